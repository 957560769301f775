/* cmd_tokenize.c — `triforce tokenize`: token ids or pieces of a text. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

int cmd_tokenize(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_TOKENIZE, "tokenize", "-m MODEL (-p TEXT | -f FILE) [--ids] [--no-bos]", 0, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (!o.model) {
        fprintf(stderr, "triforce tokenize: -m MODEL is required (see --help)\n");
        return 2;
    }
    size_t len;
    char *text = cli_prompt_text(&o, &len);
    if (!text) return 2;
    tf_model_params mp = tf_model_default_params();
    mp.vocab_only = true; /* works on vocab-only files, and never maps weights it does not need */
    char err[1024];
    tf_model *m;
    if (tf_model_load_file(&m, o.model, &mp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        free(text);
        return 1;
    }
    size_t n = 0;
    int32_t *ids = cli_tokenize(m, text, len, !o.no_bos, true, &n);
    int rc = 0;
    if (!ids) {
        fprintf(stderr, "triforce: cannot tokenize the text\n");
        rc = 1;
    } else if (o.ids) {
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        printf("\n");
    } else {
        for (size_t i = 0; i < n; i++) {
            char piece[512];
            int32_t np = tf_model_token_to_piece(m, ids[i], true, piece, sizeof piece);
            if (np < 0 || np > (int32_t)sizeof piece) np = 0;
            printf("%6d -> '%.*s'\n", ids[i], np, piece);
        }
    }
    free(ids);
    free(text);
    tf_model_close(m);
    return rc;
}

/*
 * export_hf.c — write a GGUF model out as a Hugging Face checkpoint directory
 * (config.json, safetensors shards, tokenizer.json), with the exporter the
 * tests use (tests/common/hf_export.c, hf_tokjson.c). For checking the
 * Hugging Face loader and `triforce convert` against other engines
 * (dev/llamacpp_check.sh).
 *
 *   export_hf MODEL.gguf OUT_DIR [SHARDS]
 */
#include "hf_export.h"
#include "hf_tokjson.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: export_hf MODEL.gguf OUT_DIR [SHARDS]\n");
        return 2;
    }
    tf_model *m;
    tf_err err = {0};
    if (tf_model_load(&m, argv[1], NULL, &err) != TF_OK) {
        fprintf(stderr, "export_hf: %s\n", err.msg);
        return 1;
    }
    char *tj = NULL, *tc = NULL;
    tu_hf_opts to = {0};
    if (m->tok && !tu_hf_tokjson_from_gguf(&m->gguf, &to, &tj, &tc)) {
        fprintf(stderr, "export_hf: %s: the tokenizer could not be written as tokenizer.json\n", argv[1]);
        return 1;
    }
    hf_export_opts ex = {.tokenizer_json = tj, .n_shards = argc > 3 ? atoi(argv[3]) : 1};
    int rc = hf_export(m, argv[2], &ex);
    free(tj);
    free(tc);
    tf_model_free(m);
    if (rc == 0) fprintf(stderr, "wrote %s\n", argv[2]);
    return rc ? 1 : 0;
}

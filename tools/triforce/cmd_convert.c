/* cmd_convert.c — `triforce convert HF_DIR OUT.gguf [TYPE]`: a Hugging Face
 * checkpoint directory to one GGUF file that this engine and llama.cpp load. */
#include "cli.h"

#include "core/dtype.h"
#include "model/hf.h"
#include "model/model.h"
#include "model/quantize.h"

#include <stdio.h>

int cmd_convert(int argc, char **argv) {
    cli_opts o;
    const char *usage = "HF_DIR OUT.gguf [TYPE]   (TYPE, default the type the weights are stored in:\n"
                        "      " TF_DTYPE_NAMES ")";
    int r = cli_parse(&o, CMD_CONVERT, "convert", usage, 3, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (o.n_pos < 2) {
        fprintf(stderr, "usage: triforce convert %s\n", usage);
        return 2;
    }
    if (!tf_hf_is_dir(o.pos[0])) {
        fprintf(stderr, "triforce convert: '%s' is not a directory (expected a Hugging Face checkpoint directory "
                        "with config.json, *.safetensors and tokenizer.json)\n", o.pos[0]);
        return 2;
    }
    tf_dtype type = TF_DTYPE_COUNT;
    if (o.n_pos == 3 && !tf_dtype_from_name(o.pos[2], &type)) {
        fprintf(stderr, "triforce convert: type '%s': expected one of:" TF_DTYPE_NAMES "\n", o.pos[2]);
        return 2;
    }
    if (!cli_check_output("convert", o.pos[1], o.pos[0])) return 2;
    tf_logger lg = {.fn = cli_log, .min_level = o.verbose ? TF_LOG_DEBUG : TF_LOG_INFO};
    tf_err err = {0};
    double t0 = cli_now();
    cli_catch_interrupts();
    /* Loading validates the whole checkpoint the way generation would. */
    tf_model *m = NULL;
    if (tf_model_load(&m, o.pos[0], &lg, &err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err.msg);
        return 1;
    }
    if (type == TF_DTYPE_COUNT) type = (tf_dtype)m->tok_embd.type;
    fprintf(stderr, "convert: %s (%d layers, n_embd %d, %d tokens) -> %s as %s\n", o.pos[0], m->hp.n_layer,
            m->hp.n_embd, m->hp.n_vocab, o.pos[1], tf_dtype_name(type));
    cli_progress progress = cli_progress_make("convert");
    tf_status st = tf_quantize_gguf(&m->gguf, o.pos[1], type, o.n_threads > 0 ? o.n_threads : 0, &lg,
                                    cli_progress_percent, &progress, &err);
    tf_model_free(m);
    if (st != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce: %s\n", err.msg);
        return cli_interrupted() ? 130 : 1;
    }
    fprintf(stderr, "wrote %s (%s) in %.2f s\n", o.pos[1], tf_dtype_name(type), cli_now() - t0);
    return 0;
}

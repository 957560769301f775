/* cmd_quantize.c — `triforce quantize IN.gguf OUT.gguf TYPE`. */
#include "cli.h"

#include "core/dtype.h"
#include "model/hf.h"
#include "model/quantize.h"

#include <stdio.h>

int cmd_quantize(int argc, char **argv) {
    cli_opts o;
    const char *usage = "IN.gguf OUT.gguf TYPE   (TYPE, any of these but f32:\n"
                        "      " TF_DTYPE_NAMES ")";
    int r = cli_parse(&o, CMD_QUANTIZE, "quantize", usage, 3, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (o.n_pos != 3) {
        fprintf(stderr, "usage: triforce quantize %s\n", usage);
        return 2;
    }
    tf_dtype type;
    if (!tf_dtype_from_name(o.pos[2], &type) || type == TF_DTYPE_F32) {
        fprintf(stderr, "triforce quantize: type '%s': expected one of:" TF_DTYPE_NAMES " except f32\n", o.pos[2]);
        return 2;
    }
    if (tf_hf_is_dir(o.pos[0])) {
        fprintf(stderr, "triforce quantize: %s is a directory; quantize reads a GGUF file. A Hugging Face "
                        "checkpoint directory is converted instead: triforce convert %s OUT.gguf %s\n", o.pos[0],
                o.pos[0], o.pos[2]);
        return 2;
    }
    if (!cli_check_output("quantize", o.pos[1], o.pos[0])) return 2;
    tf_logger lg = {.fn = cli_log, .min_level = o.verbose ? TF_LOG_DEBUG : TF_LOG_INFO};
    tf_err err = {0};
    double t0 = cli_now();
    cli_progress progress = cli_progress_make("quantize");
    cli_catch_interrupts();
    if (tf_quantize_file(o.pos[0], o.pos[1], type, &lg, cli_progress_percent, &progress, &err) != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce: %s\n", err.msg);
        return cli_interrupted() ? 130 : 1;
    }
    fprintf(stderr, "wrote %s (%s) in %.2f s\n", o.pos[1], tf_dtype_name(type), cli_now() - t0);
    return 0;
}

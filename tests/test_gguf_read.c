/* test_gguf_read.c — GGUF reader on the real shared files. */
#include "testutil.h"

#include <string.h>

#include "core/dtype.h"
#include "format/gguf.h"

static void test_stories260k(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
    tf_gguf g;
    tf_err err = {0};
    assert_int_equal(tf_gguf_open(&g, path, &err), TF_OK);
    assert_int_equal(g.version, 3);
    uint32_t n_embd = 0, n_layer = 0;
    assert_int_equal(tf_gguf_get_u32(&g, "llama.embedding_length", &n_embd, NULL, &err), TF_OK);
    assert_int_equal(tf_gguf_get_u32(&g, "llama.block_count", &n_layer, NULL, &err), TF_OK);
    assert_int_equal(n_embd, 64);
    assert_int_equal(n_layer, 5);
    const tf_gguf_tensor *t = tf_gguf_find_tensor(&g, "blk.0.attn_k.weight");
    assert_non_null(t);
    assert_int_equal(t->type, TF_DTYPE_F32);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 32);
    assert_int_equal(t->nbytes, 64 * 32 * 4);
    const tf_gguf_kv *toks;
    assert_int_equal(tf_gguf_get_arr(&g, "tokenizer.ggml.tokens", TF_GGUF_STRING, &toks, NULL, &err), TF_OK);
    assert_int_equal(toks->arr_n, 512);
    /* wrong-type access is an error naming the key */
    tf_gguf_str s;
    assert_int_equal(tf_gguf_get_str(&g, "llama.block_count", &s, NULL, &err), TF_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "llama.block_count"));
    tf_gguf_close(&g);
}

static void test_missing_file(void **state) {
    (void)state;
    tf_gguf g;
    tf_err err = {0};
    assert_int_equal(tf_gguf_open(&g, "/nonexistent/model.gguf", &err), TF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/model.gguf"));
    tf_gguf_close(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_json.c — tf_json_parse reads JSON as strictly as Python's json and
 * serde_json do (the readers behind the Hugging Face files): what cJSON alone
 * accepts but those refuse, or read differently, is an error naming the
 * line and column; everything valid still parses to the same tree. */
#include "testutil.h"

#include "format/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse len bytes of text (len (size_t)-1: strlen) and expect want; on an
 * error, every non-NULL needle must be in the message. */
static cJSON *parse_n(const char *text, size_t len, tf_status want, const char *n1, const char *n2) {
    if (len == (size_t)-1) len = strlen(text);
    cJSON *root = NULL;
    tf_err err = {0};
    tf_status st = tf_json_parse("doc.json", text, len, &root, &err);
    if (st != want) fail_msg("'%.*s': status %d (expected %d): %s", (int)len, text, st, want, err.msg);
    if (st != TF_OK) {
        assert_null(root);
        if (strncmp(err.msg, "doc.json: ", 10) != 0) fail_msg("'%s': message lacks the file: %s", text, err.msg);
        if (n1 && !strstr(err.msg, n1)) fail_msg("'%s': message lacks '%s': %s", text, n1, err.msg);
        if (n2 && !strstr(err.msg, n2)) fail_msg("'%s': message lacks '%s': %s", text, n2, err.msg);
    }
    return root;
}

static void ok(const char *text) { cJSON_Delete(parse_n(text, (size_t)-1, TF_OK, NULL, NULL)); }
static void bad(const char *text, const char *n1, const char *n2) { parse_n(text, (size_t)-1, TF_ERR_FORMAT, n1, n2); }

static void test_valid_documents(void **state) {
    (void)state;
    ok("{}");
    ok(" \t\r\n{ \"a\" : [ 1 , -0 , 0.5 , -1.25e+3 , 2E-2 , 10e5 ] } \n");
    ok("[]");
    ok("\"just a string\"");
    ok("-0.0");
    ok("{\"esc\": \"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"}");
    ok("{\"utf8\": \"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
    ok("{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}, \"c\": [{\"k\": 1}, {\"k\": 2}]}"); /* same key, other objects */
    ok("{\"t\": true, \"f\": false, \"n\": null}");
    /* the tree is the one cJSON builds */
    cJSON *r = parse_n("{\"x\": [1, 2.5], \"y\": \"\\u0041b\"}", (size_t)-1, TF_OK, NULL, NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "x")), 2);
    assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "x"), 1)->valuedouble == 2.5);
    assert_string_equal(cJSON_GetObjectItem(r, "y")->valuestring, "Ab");
    cJSON_Delete(r);
}

static void test_trailing_data(void **state) {
    (void)state;
    bad("{} x", "more data after the top-level value", "line 1, column 4");
    bad("{}{}", "more data after the top-level value", NULL);
    bad("{\"a\": 1}\n}", "more data after the top-level value", "line 2, column 1");
    bad("[1] 2", "more data after the top-level value", NULL);
}

static void test_control_bytes(void **state) {
    (void)state;
    /* between values: only space, tab, CR and LF */
    parse_n("{}\0", 3, TF_ERR_FORMAT, "byte 0x00 between values", "NUL");
    parse_n("{\0\"a\": 1}", 9, TF_ERR_FORMAT, "byte 0x00 between values", "line 1, column 2");
    bad("{\x0b\"a\": 1}", "byte 0x0b between values", NULL);
    bad("\x0c{}", "byte 0x0c between values", NULL);
    bad("{\"a\":\x1f 1}", "byte 0x1f between values", NULL);
    /* inside strings: none at all, whitespace included (it must be escaped) */
    bad("{\"a\": \"x\ty\"}", "control character 0x09 inside a string", NULL);
    bad("{\"a\": \"x\ny\"}", "control character 0x0a inside a string", NULL);
    parse_n("{\"a\": \"x\0y\"}", 12, TF_ERR_FORMAT, "control character 0x00 inside a string", NULL);
    bad("{\"a\x01\": 1}", "control character 0x01 inside a string", NULL);
}

static void test_escapes_and_utf8(void **state) {
    (void)state;
    bad("{\"a\": \"\\x41\"}", "an invalid escape", NULL);
    bad("{\"a\": \"\\'\"}", "an invalid escape", NULL);
    bad("{\"a\": \"\\u12\"}", "an invalid \\u escape", NULL);
    bad("{\"a\": \"\\u12G4\"}", "an invalid \\u escape", NULL);
    bad("{\"a\": \"\xff\"}", "byte 0xff is not UTF-8", NULL);
    bad("{\"a\": \"\xc0\xaf\"}", "byte 0xc0 is not UTF-8", NULL);         /* overlong '/' */
    bad("{\"a\": \"\xed\xa0\x80\"}", "byte 0xed is not UTF-8", NULL);     /* a surrogate */
    bad("{\"a\": \"\xf4\x90\x80\x80\"}", "byte 0xf4 is not UTF-8", NULL); /* past U+10FFFF */
    bad("{\"a\": \"\xe2\x82\"}", "is not UTF-8", NULL);                   /* cut short */
    bad("{\"a\": 1\xc2\xa0}", "a non-ASCII character outside a string", NULL);
}

static void test_numbers(void **state) {
    (void)state;
    const char *bad_numbers[] = {"+1", "01", "1.", ".5", "1e", "1e+", "-", "--1", "0x10", "1.5.2", "00", "-01"};
    for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
        char doc[64];
        snprintf(doc, sizeof doc, "{\"n\": %s}", bad_numbers[i]);
        bad(doc, "a malformed number", "column 7");
    }
    bad("{\"n\": NaN}", NULL, NULL);
    bad("{\"n\": Infinity}", NULL, NULL);
    /* number-like text inside strings is just text */
    ok("{\"s\": \"+1 01 1. .5\", \"+1\": 0}");
}

static void test_duplicate_keys(void **state) {
    (void)state;
    bad("{\"a\": 1, \"b\": 2, \"a\": 3}", "key 'a' appears more than once in the top-level object", NULL);
    bad("{\"model\": {\"vocab\": {\"x\": 1, \"y\": 2, \"x\": 3}}}",
        "key 'x' appears more than once in the object at model.vocab", NULL);
    bad("{\"added_tokens\": [{\"id\": 1}, {\"id\": 2, \"id\": 3}]}",
        "key 'id' appears more than once in the object at added_tokens[]", NULL);
    /* a large object: found however far apart the two are */
    size_t n = 60000;
    char *doc = malloc(n * 24 + 64);
    size_t at = (size_t)sprintf(doc, "{");
    for (size_t i = 0; i < n; i++) at += (size_t)sprintf(doc + at, "%s\"t%zu\": %zu", i ? ", " : "", i, i);
    strcpy(doc + at, "}");
    ok(doc);
    sprintf(doc + at, ", \"t7\": 0}");
    bad(doc, "key 't7' appears more than once", NULL);
    free(doc);
}

static void test_syntax_errors_name_the_place(void **state) {
    (void)state;
    bad("{\"a\": 1,\n \"b\" 2}", "a syntax error", "line 2");
    bad("", "a syntax error", "line 1, column 1");
    bad("{\"a\": tru}", "a syntax error", NULL);
}

/* Random bytes and random damage to a valid document never crash, and every
 * failure is a format error naming the file. */
static void test_random_damage(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x15);
    const char *base = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}, "
                       "\"n\": [1, -2.5e3, true, null], \"s\": \"\\u00e9\\n\"}";
    size_t len = strlen(base);
    char buf[256];
    int parsed = 0, refused = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, base, len);
        int flips = 1 + (int)(tf_rng_next(&rng) % 3);
        for (int k = 0; k < flips; k++) buf[tf_rng_next(&rng) % len] = (char)(tf_rng_next(&rng) & 0xff);
        cJSON *root = NULL;
        tf_err err = {0};
        tf_status st = tf_json_parse("doc.json", buf, len, &root, &err);
        if (st == TF_OK) {
            parsed++;
            cJSON_Delete(root);
        } else {
            refused++;
            if (st != TF_ERR_FORMAT || strncmp(err.msg, "doc.json: ", 10) != 0)
                fail_msg("iteration %d: status %d: %s", it, st, err.msg);
        }
    }
    print_message("random damage: %d parsed, %d refused\n", parsed, refused);
    assert_true(parsed > 0 && refused > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_documents),  cmocka_unit_test(test_trailing_data),
        cmocka_unit_test(test_control_bytes),    cmocka_unit_test(test_escapes_and_utf8),
        cmocka_unit_test(test_numbers),          cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_syntax_errors_name_the_place), cmocka_unit_test(test_random_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

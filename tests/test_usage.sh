#!/bin/sh
# test_usage.sh — usage errors are found before any work, exit 2 and name what
# is wrong; messages say what the input is; flags do not size memory or threads
# beyond what the run needs:
#   - --gamma1/--gamma2 whose sum a target pass cannot verify exactly, an unknown
#     --device, --device cuda in a build without CUDA: exit 2 before the model is
#     opened (the model path given does not exist, so a late check would report
#     that instead), for generate, bench and eval; so is an unknown
#     --chat-template family, and each known one passes;
#   - -t past the CPUs: a warning, and the CPUs there are;
#   - --window and --sinks far past the context: memory follows the context;
#   - -f DIR says it is a directory; -f - reads standard input;
#   - quantize on a directory points to convert; on a vocabulary-only GGUF it
#     fails rather than writing a file without tensors;
#   - the echoed prompt is cleaned like the generated text (invalid UTF-8 as U+FFFD).
# Uses ../shared (stories260K, a vocabulary GGUF); cases needing them are skipped
# where absent. Reports with cmocka's markers.
B=${BUILD:-build}
TF=$B/triforce
W=$B/test_usage
. tests/common/marks.sh

[ -x "$TF" ] || { echo "test_usage: $TF not built"; exit 1; }
rm -rf "$W"; mkdir -p "$W" || exit 1
SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf
VOCAB=$SH/vocab/ggml-vocab-gpt-2.gguf
NOMODEL=$W/no-such-model.gguf

# expect NAME RC PATTERN CMD...: exit RC and PATTERN (fixed text) on stderr
expect() {
    name=$1; want=$2; pat=$3; shift 3
    echo "[ RUN      ] $name"
    "$@" > "$W/out" 2> "$W/err" < /dev/null; rc=$?
    if [ $rc -eq "$want" ] && grep -qF -- "$pat" "$W/err"; then ok "$name"; return 0; fi
    echo "exit $rc (expected $want), stderr:"; cat "$W/err"; bad "$name"; return 1
}

expect gamma_sum_before_loading 2 "gamma2 15 + gamma1 16: a target pass would verify 31 tokens" \
    "$TF" generate -m "$NOMODEL" -p hi --draft-layers 1 --gamma1 16 --gamma2 15
expect device_name_before_loading 2 "--device 'gpu': expected cuda, cpu or auto" \
    "$TF" generate -m "$NOMODEL" -p hi --device gpu
case "$B" in
*cuda*) skipped device_cuda_without_cuda "this build has the CUDA backend" ;;
*) expect device_cuda_without_cuda 2 "device cuda: this build has no CUDA backend" \
    "$TF" generate -m "$NOMODEL" -p hi --device cuda ;;
esac
expect bench_gamma_before_loading 2 "a target pass would verify 19 tokens" \
    "$TF" bench -m "$NOMODEL" --draft-layers 1 --mode triforce --gamma1 4 --gamma2 15
expect the_model_error_after_the_flags 1 "$NOMODEL: cannot open" \
    "$TF" generate -m "$NOMODEL" -p hi --draft-layers 1 --gamma1 4 --gamma2 6
expect chat_template_name_before_loading 2 "--chat-template 'vicuna': expected chatml, llama3, llama2, mistral, zephyr, deepseek, deepseek-coder or deepseek3" \
    "$TF" generate -m "$NOMODEL" -p hi --chat --chat-template vicuna
for fam in deepseek deepseek-coder deepseek3; do
    expect chat_template_$fam 1 "$NOMODEL: cannot open" "$TF" serve -m "$NOMODEL" --chat-template $fam
done

mkdir -p "$W/dir"
expect prompt_file_is_a_directory 2 "$W/dir: is a directory (expected a file)" \
    "$TF" generate -m "$NOMODEL" -f "$W/dir"
expect quantize_a_directory 2 "is a directory; quantize reads a GGUF file" \
    "$TF" quantize "$W/dir" "$W/q.gguf" q8_0
if [ -f "$VOCAB" ]; then
    expect quantize_vocab_only 1 "has no tensors (a vocabulary-only file?)" "$TF" quantize "$VOCAB" "$W/q.gguf" q8_0 &&
        { [ ! -e "$W/q.gguf" ] || { echo "$W/q.gguf was written"; bad quantize_vocab_only_no_file; }; }
else skipped quantize_vocab_only "$VOCAB not found"; fi

if [ -f "$S260" ]; then
    expect threads_past_the_cpus 0 "is more than the" \
        "$TF" generate -m "$S260" -p "Once upon a time" -n 4 --temp 0 -t 1024
    # --window / --sinks far past the context: with memory limited to 1 GiB of address
    # space the run must still succeed (the cache used to be sized by the flag:
    # 612 MB for an 8-token prompt). ASan reserves terabytes of address space.
    case "$B" in
    *asan*) skipped window_past_context "address-space limit under ASan" ;;
    *)
        echo "[ RUN      ] window_past_context"
        if (ulimit -v 1048576 && "$TF" generate -m "$S260" -p "Once upon a time" -n 8 --temp 0 --draft-layers 2 \
            --window 16777216 --sinks 1048576 > "$W/out" 2> "$W/err"); then ok window_past_context
        else cat "$W/err"; bad window_past_context; fi ;;
    esac
    echo "[ RUN      ] prompt_from_stdin"
    printf 'Once upon a time' | "$TF" generate -m "$S260" -f - -n 4 --temp 0 > "$W/out" 2> "$W/err"; rc=$?
    printf 'Once upon a time' > "$W/p.txt"
    "$TF" generate -m "$S260" -f "$W/p.txt" -n 4 --temp 0 > "$W/ref" 2> /dev/null
    if [ $rc -eq 0 ] && cmp -s "$W/out" "$W/ref" && grep -q '^Once upon a time' "$W/out"; then ok prompt_from_stdin
    else echo "exit $rc"; cat "$W/err" "$W/out"; bad prompt_from_stdin; fi
    echo "[ RUN      ] prompt_echo_is_clean_utf8"
    "$TF" generate -m "$S260" -p "$(printf 'caf\303 \377 ok')" -n 2 --temp 0 > "$W/out" 2> "$W/err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(head -c 13 "$W/out" | od -An -tx1 | tr -d ' \n')" = "636166efbfbd20efbfbd206f6b" ]; then
        ok prompt_echo_is_clean_utf8
    else echo "exit $rc"; od -c "$W/out" | head -3; bad prompt_echo_is_clean_utf8; fi
else
    for c in threads_past_the_cpus window_past_context prompt_from_stdin prompt_echo_is_clean_utf8; do
        skipped $c "$S260 not found"
    done
fi

rm -rf "$W"
marks_summary

#!/bin/sh
# test_outputs.sh — nothing lost, nothing silent, for the commands that write:
#   - quantize, convert and gen-model refuse an output that is their input (also
#     through a hard link) or an existing non-regular file (a device node, a FIFO,
#     a directory), exit 2 with a message naming the path, and leave it as it was;
#   - a failed write to standard output (/dev/full) exits non-zero with a message, and
#     one to standard error (which cannot be reported) exits non-zero too
#     (tokenize, info, generate); --stats-json that cannot be created fails before
#     the run, one that cannot be written (/dev/full) fails after it; a context
#     that fills before the tokens asked for are generated exits 1;
#   - SIGINT during quantize stops it with exit 130 and no OUT.partial left.
# Models are generated here (gen-model) or come from ../shared (stories260K; the
# cases needing it are skipped where absent). Reports with cmocka's markers.
B=${BUILD:-build}
TF=$B/triforce
W=$B/test_outputs
. tests/common/marks.sh

[ -x "$TF" ] || { echo "test_outputs: $TF not built"; exit 1; }
rm -rf "$W"; mkdir -p "$W" || exit 1
SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf

# a small f32 model to quantize (a few MB)
"$TF" gen-model "$W/a.gguf" --n-embd 128 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 256 --n-vocab 512 \
    --type f32 > /dev/null 2>&1 || { echo "test_outputs: gen-model failed"; exit 1; }
sum_a=$(cksum < "$W/a.gguf")

# refused NAME PATTERN CMD...: exit 2, PATTERN (fixed text) on stderr
refused() {
    name=$1; pat=$2; shift 2
    echo "[ RUN      ] $name"
    "$@" > "$W/out" 2> "$W/err"; rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$pat" "$W/err"; then return 0; fi
    echo "exit $rc, stderr:"; cat "$W/err"; return 1
}

if refused quantize_same_file "is the input file" "$TF" quantize "$W/a.gguf" "$W/a.gguf" q8_0 &&
    [ "$(cksum < "$W/a.gguf")" = "$sum_a" ] && [ ! -e "$W/a.gguf.partial" ]; then ok quantize_same_file
else bad quantize_same_file; fi

ln "$W/a.gguf" "$W/link.gguf"
if refused quantize_hard_link "is the input file" "$TF" quantize "$W/a.gguf" "$W/link.gguf" q4_0 &&
    [ "$(cksum < "$W/a.gguf")" = "$sum_a" ]; then ok quantize_hard_link; else bad quantize_hard_link; fi

if refused quantize_other_spelling "is the input file" "$TF" quantize "$W/a.gguf" "$W/../test_outputs/a.gguf" q8_0 &&
    [ "$(cksum < "$W/a.gguf")" = "$sum_a" ]; then ok quantize_other_spelling; else bad quantize_other_spelling; fi

mkfifo "$W/fifo"
if refused quantize_fifo "exists and is not a regular file (a FIFO)" "$TF" quantize "$W/a.gguf" "$W/fifo" q8_0 &&
    [ -p "$W/fifo" ]; then ok quantize_fifo; else bad quantize_fifo; fi

mkdir "$W/dir"
if refused gen_model_directory "exists and is not a regular file (a directory)" "$TF" gen-model "$W/dir" --preset tiny-24m &&
    [ -d "$W/dir" ]; then ok gen_model_directory; else bad gen_model_directory; fi

# a device node of our own (as root): a regression must not replace the system's /dev/null
if mknod "$W/null" c 1 3 2>/dev/null; then
    if refused quantize_device "$W/null: exists and is not a regular file (a character device)" \
        "$TF" quantize "$W/a.gguf" "$W/null" q8_0 && [ -c "$W/null" ]; then ok quantize_device; else bad quantize_device; fi
else skipped quantize_device "cannot make a device node here (not root)"; fi

# convert into its own checkpoint: a directory whose shard is the output
mkdir "$W/hf"
cp "$W/a.gguf" "$W/hf/model.safetensors" # any bytes: the refusal comes before reading
echo '{}' > "$W/hf/config.json"
if refused convert_into_input "is $W/hf/model.safetensors, a file of the input directory" \
    "$TF" convert "$W/hf" "$W/hf/model.safetensors" f16 &&
    [ "$(cksum < "$W/hf/model.safetensors")" = "$sum_a" ]; then ok convert_into_input; else bad convert_into_input; fi

# an output that is a new file or a regular file elsewhere still works
echo "[ RUN      ] quantize_regular_output"
if "$TF" quantize "$W/a.gguf" "$W/b.gguf" q8_0 > /dev/null 2>&1 && [ -s "$W/b.gguf" ] &&
    "$TF" quantize "$W/a.gguf" "$W/b.gguf" q4_0 > /dev/null 2>&1 && [ ! -e "$W/b.gguf.partial" ] &&
    "$TF" info "$W/b.gguf" 2>/dev/null | grep -q "q4_0"; then ok quantize_regular_output; else bad quantize_regular_output; fi

# write errors on standard output
if [ -c /dev/full ]; then
    echo "[ RUN      ] info_stdout_full"
    "$TF" info "$W/a.gguf" > /dev/full 2> "$W/err"; rc=$?
    if [ $rc -ne 0 ] && grep -qF "cannot write the output to standard output" "$W/err"; then ok info_stdout_full
    else echo "exit $rc:"; cat "$W/err"; bad info_stdout_full; fi
    echo "[ RUN      ] help_stdout_full"
    "$TF" --help > /dev/full 2> "$W/err"; rc=$?
    if [ $rc -ne 0 ] && grep -qF "cannot write the output to standard output" "$W/err"; then ok help_stdout_full
    else echo "exit $rc:"; cat "$W/err"; bad help_stdout_full; fi
    echo "[ RUN      ] stderr_full"
    "$TF" gen-model "$W/e.gguf" --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 2 --n-ff 64 --n-vocab 300 \
        > /dev/null 2> /dev/full; rc=$?
    if [ $rc -ne 0 ]; then ok stderr_full; else echo "exit $rc with its messages lost"; bad stderr_full; fi
    if [ -f "$S260" ]; then
        echo "[ RUN      ] tokenize_stdout_full"
        "$TF" tokenize -m "$S260" -p "Once upon a time there was a little girl" > /dev/full 2> "$W/err"; rc=$?
        if [ $rc -ne 0 ] && grep -qF "cannot write the output to standard output" "$W/err"; then ok tokenize_stdout_full
        else echo "exit $rc:"; cat "$W/err"; bad tokenize_stdout_full; fi
        echo "[ RUN      ] generate_stdout_full"
        "$TF" generate -m "$S260" -p "Once upon a time" -n 8 --temp 0 -t 1 > /dev/full 2> "$W/err"; rc=$?
        if [ $rc -ne 0 ] && grep -qF "cannot write the output to standard output" "$W/err"; then ok generate_stdout_full
        else echo "exit $rc:"; cat "$W/err"; bad generate_stdout_full; fi
        echo "[ RUN      ] stats_json_full"
        "$TF" generate -m "$S260" -p "Once upon a time" -n 4 --temp 0 -t 1 --stats-json /dev/full > /dev/null 2> "$W/err"; rc=$?
        if [ $rc -ne 0 ] && grep -qF -- "--stats-json /dev/full: write failed" "$W/err"; then ok stats_json_full
        else echo "exit $rc:"; cat "$W/err"; bad stats_json_full; fi
    else
        for t in tokenize_stdout_full generate_stdout_full stats_json_full; do skipped $t "no $S260"; done
    fi
else
    for t in info_stdout_full help_stdout_full stderr_full tokenize_stdout_full generate_stdout_full stats_json_full; do
        skipped $t "no /dev/full"
    done
fi
if [ -f "$S260" ]; then
    echo "[ RUN      ] stats_json_missing_dir"
    "$TF" generate -m "$S260" -p "Once upon a time" -n 4 --temp 0 -t 1 --stats-json "$W/none/s.json" > "$W/out" 2> "$W/err"; rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "--stats-json $W/none/s.json: cannot create" "$W/err" && [ ! -s "$W/out" ]; then
        ok stats_json_missing_dir
    else echo "exit $rc:"; cat "$W/err"; bad stats_json_missing_dir; fi
    echo "[ RUN      ] stats_json_written"
    if "$TF" generate -m "$S260" -p "Once upon a time" -n 4 --temp 0 -t 1 --stats-json "$W/s.json" > /dev/null 2>&1 &&
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['generated_tokens'] == 4" "$W/s.json"; then
        ok stats_json_written
    else bad stats_json_written; fi
    echo "[ RUN      ] generate_context_full"
    "$TF" generate -m "$S260" -p "Once upon a time" -n 40 -c 24 --temp 0 --ignore-eos -t 1 > "$W/out" 2> "$W/err"; rc=$?
    if [ $rc -eq 1 ] && grep -qF "context full after" "$W/err" && grep -qF "of the 40 tokens asked for" "$W/err"; then
        ok generate_context_full
    else echo "exit $rc:"; cat "$W/err"; bad generate_context_full; fi
else
    for t in stats_json_missing_dir stats_json_written generate_context_full; do skipped $t "no $S260"; done
fi

# SIGINT while quantize writes: a model large enough to take a while (~150 MB of f32, seconds to quantize)
"$TF" gen-model "$W/big.gguf" --n-embd 1024 --n-layer 2 --n-head 8 --n-head-kv 8 --n-ff 4096 --n-vocab 8192 \
    --type f32 > /dev/null 2>&1
echo "[ RUN      ] quantize_interrupted"
"$TF" quantize "$W/big.gguf" "$W/big_q.gguf" q4_k > /dev/null 2> "$W/err" &
qpid=$!
i=0
while [ ! -e "$W/big_q.gguf.partial" ] && [ $i -lt 400 ] && kill -0 $qpid 2>/dev/null; do sleep 0.01; i=$((i + 1)); done
if [ -e "$W/big_q.gguf.partial" ]; then
    kill -INT $qpid
    wait $qpid; rc=$?
    if [ $rc -eq 130 ] && [ ! -e "$W/big_q.gguf.partial" ] && [ ! -e "$W/big_q.gguf" ] &&
        grep -qF "writing cancelled" "$W/err"; then ok quantize_interrupted
    else echo "exit $rc:"; cat "$W/err"; ls "$W"; bad quantize_interrupted; fi
else
    wait $qpid
    skipped quantize_interrupted "quantize finished before its output appeared; nothing to interrupt"
fi

rm -rf "$W"
marks_summary

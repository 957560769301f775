#!/bin/sh
# fuzz_run.sh NAME... — run the libFuzzer harnesses that `make fuzz` built, one after another.
#
# For each NAME: build-fuzz/seeds_NAME writes its seeds into build-fuzz/corpus/NAME (kept
# between runs, so the corpus grows), then build-fuzz/fuzz_NAME fuzzes for FUZZ_SECONDS
# (default 60) with dev/fuzz_NAME.dict. Crash, leak, timeout and out-of-memory inputs go to
# build-fuzz/artifacts/NAME-*. The tokenizer harness loads the vocabularies in FUZZ_VOCABS
# (space-separated paths) and is skipped when that is empty (../shared absent).
#
# Every harness runs even after one fails; the exit status is 1 if any failed, with the
# command that reproduces each failure.
set -u
seconds=${FUZZ_SECONDS:-60}
failed=""
mkdir -p build-fuzz/artifacts
for name in "$@"; do
    # Per harness: the longest input, in bytes, and what it needs from the environment.
    case "$name" in
    gguf) max_len=8192 ;;
    safetensors) max_len=4096 ;;
    hf_config) max_len=8192 ;;
    tokenizer)
        max_len=2048
        if [ -z "${FUZZ_VOCABS:-}" ]; then
            echo "fuzz_tokenizer: skipped: ../shared/models and ../shared/vocab not found (set FUZZ_VOCABS)"
            continue
        fi
        TF_FUZZ_VOCABS=$FUZZ_VOCABS
        export TF_FUZZ_VOCABS
        ;;
    *) max_len=4096 ;;
    esac
    corpus=build-fuzz/corpus/$name
    mkdir -p "$corpus"
    if ! "build-fuzz/seeds_$name" "$corpus"; then
        echo "fuzz_$name: the seed writer failed" >&2
        failed="$failed $name"
        continue
    fi
    dict=""
    [ -f "dev/fuzz_$name.dict" ] && dict="-dict=dev/fuzz_$name.dict"
    echo "fuzz_$name: $seconds s, corpus $corpus ($(ls "$corpus" | wc -l) inputs)"
    # -timeout: one input running longer than that is a hang (reported as a failure).
    if ! "build-fuzz/fuzz_$name" -max_total_time="$seconds" -max_len="$max_len" -timeout=30 \
        -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$name-" $dict "$corpus"; then
        failed="$failed $name"
    fi
done
if [ -n "$failed" ]; then
    echo "make fuzz: FAILED:$failed" >&2
    for name in $failed; do
        env=""
        [ "$name" = tokenizer ] && env="TF_FUZZ_VOCABS=\"$FUZZ_VOCABS\" "
        echo "  reproduce: ${env}build-fuzz/fuzz_$name FILE (FILE: the build-fuzz/artifacts/$name-* named above)" >&2
    done
    exit 1
fi
echo "make fuzz: no failures ($*)"

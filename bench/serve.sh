#!/bin/sh
# serve.sh — the "Server" figures of docs/BENCHMARKS.md. For each configuration it
# starts `triforce serve --port 0` (a free port, read from its "listening on" line),
# points bench/serve_load.py at it and stops it with SIGTERM. Output, appended (the
# timings are noisy, so runs are kept side by side; every block starts with
# serve_load.py's header line: date, machine, server):
#   bench/results/serve_load.txt  stories260K (../shared), CLIENTS clients x REQUESTS short
#                                 completions (max_tokens MAX_TOKENS) per configuration
#                                 of CONFIGS (';'-separated serve flags), REPEAT times each
#   bench/results/serve_ttft.txt  SmolLM2-135M (make models), -c 8192: time to first token
#                                 of two streamed questions on a DOC_TOKENS-token document
#                                 of Pride and Prejudice, without and with prompt-cache
#                                 reuse, on REPEAT slices of the text
#   sh bench/serve.sh             (WHAT="load ttft", BUILD, TF_SHARED_DIR and the
#                                  upper-case names above may be overridden)
set -eu
B=${BUILD:-build}
TF=$B/triforce
SH=${TF_SHARED_DIR:-../shared}
OUT=bench/results
WHAT=${WHAT:-"load ttft"}
REPEAT=${REPEAT:-2}
CLIENTS=${CLIENTS:-4}
REQUESTS=${REQUESTS:-100}
MAX_TOKENS=${MAX_TOKENS:-16}
CONFIGS=${CONFIGS:-"--parallel 1;--parallel 2;--parallel 4;--parallel 1 -t 1;--parallel 2 -t 1;--parallel 4 -t 1"}
DOC_TOKENS=${DOC_TOKENS:-7500}
S260=$SH/models/stories260K/stories260K.gguf
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TEXT=$SH/text/pride_and_prejudice.txt
TMP=$OUT/tmp
mkdir -p "$TMP"
PID=
URL=
OLD_IFS=$IFS

# start_server FLAGS...: the server in the background; sets PID and URL.
start_server() {
    log=$TMP/serve.log
    : > "$log"
    "$TF" serve --port 0 "$@" 2> "$log" &
    PID=$!
    i=0
    while ! grep -q "listening on" "$log"; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$PID" 2>/dev/null; then
            echo "serve.sh: the server did not start:" >&2
            cat "$log" >&2
            exit 1
        fi
        sleep 0.1
    done
    URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log")
}

stop_server() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=
    fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

for w in $WHAT; do
    case $w in
    load)
        [ -f "$S260" ] || { echo "serve.sh: load skipped: $S260 not found"; continue; }
        L=$OUT/serve_load.txt
        IFS=';'
        for flags in $CONFIGS; do # the list is split at ';', each item at blanks
            IFS=$OLD_IFS
            [ -n "$flags" ] || continue
            # shellcheck disable=SC2086 # the flags are words
            start_server -m "$S260" $flags
            r=0
            while [ $r -lt "$REPEAT" ]; do
                python3 bench/serve_load.py --url "$URL" -o "$L" load -c "$CLIENTS" -n "$REQUESTS" \
                    --max-tokens "$MAX_TOKENS" --label "$flags"
                r=$((r + 1))
            done
            stop_server
        done
        IFS=$OLD_IFS
        ;;
    ttft)
        [ -f "$SMOL" ] || { echo "serve.sh: ttft skipped: $SMOL not found (make models)"; continue; }
        [ -f "$TEXT" ] || { echo "serve.sh: ttft skipped: $TEXT not found"; continue; }
        T=$OUT/serve_ttft.txt
        start_server -m "$SMOL" -c 8192
        python3 bench/serve_load.py --url "$URL" -o "$T" ttft --doc "$TEXT" --doc-tokens "$DOC_TOKENS" \
            --runs "$REPEAT" -v
        stop_server
        ;;
    *)
        echo "serve.sh: WHAT: '$w' is not load or ttft" >&2
        exit 2
        ;;
    esac
done

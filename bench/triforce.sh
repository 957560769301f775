#!/bin/sh
# TriForce benchmark on this CPU (the paper's Table 2 shape): stories260K F32 as the
# target, its Q8_0 quantization as the draft, prompts cut from ../shared/text, 256
# generated tokens, temperatures 0 and 0.6; every mode's decode ms/token, speedup over ar
# and acceptance per level; then ablations at 16K. Output: bench/results/triforce.jsonl
# (one object per run, from generate --stats-json), bench/results/triforce.md (tables),
# docs/img/*.png (gnuplot). LENGTHS, TEMPS, ABLATE and N may be overridden from the environment.
set -eu
B=${BUILD:-build}
TF=$B/triforce
SH=${TF_SHARED_DIR:-../shared}
T=${THREADS:-2}
N=${N:-256}
LENGTHS=${LENGTHS:-"16384 32768 65536"}
TEMPS=${TEMPS:-"0 0.6"}
ABLATE=${ABLATE:-1}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP" docs/img
S260=$SH/models/stories260K/stories260K.gguf
TEXT=$SH/text/war_and_peace.txt
[ -f "$S260" ] && [ -f "$TEXT" ] || { echo "triforce bench: skipped: $S260 or $TEXT not found"; exit 0; }
Q8=$TMP/stories260K-q8_0.gguf
[ -f "$Q8" ] || $TF quantize "$S260" "$Q8" q8_0 2>/dev/null
J=$OUT/triforce.jsonl
: > "$J"

# A prompt of exactly n tokens: the text cut by bytes, then trimmed by tokens.
prompt_file() { # n -> path
    f=$TMP/prompt-$1.txt
    if [ ! -f "$f" ]; then
        bytes=$(( $1 * 2 ))
        head -c $bytes "$TEXT" > "$f.tmp"
        while [ "$($TF tokenize -m "$S260" -f "$f.tmp" --ids | tr ',' '\n' | wc -l)" -gt "$1" ]; do
            bytes=$(( bytes * 97 / 100 ))
            head -c $bytes "$TEXT" > "$f.tmp"
        done
        mv "$f.tmp" "$f"
    fi
    echo "$f"
}

run() { # label len temp mode [extra flags...]
    label=$1; len=$2; temp=$3; mode=$4; shift 4
    p=$(prompt_file "$len")
    js=$TMP/run.json
    $TF generate -m "$S260" -md "$Q8" -f "$p" --mode "$mode" --temp "$temp" -n "$N" -s 1 -t "$T" \
        --ignore-eos --stats-json "$js" "$@" > /dev/null 2> "$TMP/run.err" || { cat "$TMP/run.err"; exit 1; }
    printf '{"label": "%s", "len": %s, "temp": %s, "extra": "%s", "stats": %s}\n' "$label" "$len" "$temp" "$*" \
        "$(tr -d '\n' < "$js")" >> "$J"
    grep -o '"decode_tok_s": [0-9.]*' "$js" | sed "s/^/$label $len T=$temp $mode $* /"
}

for len in $LENGTHS; do
    for temp in $TEMPS; do
        for mode in ar draft retrieval streaming triforce; do
            run table "$len" "$temp" "$mode"
        done
    done
done

if [ "$ABLATE" = 1 ]; then
    for g in 1 2 3 4 6 8 10; do run gamma2 16384 0 retrieval --gamma2 $g; done
    for g in 1 2 3 4; do run gamma1 16384 0 triforce --gamma1 $g --gamma2 $((10 - g > 6 ? 6 : 10 - g)); done
    for b in 256 512 1024 2048 4096 8192; do run budget 16384 0 retrieval --budget $b; done
    for c in 1 4 8 16 32 64; do run chunk 16384 0 retrieval --chunk $c; done
    for r in 1 4 16 64 1000000; do run stride 16384 0 retrieval --rebuild-stride $r; done
    for a in 0 0.1 0.2 0.4; do run bypass 16384 0 triforce --bypass-accept $a; done
fi
sh bench/triforce_report.sh

#!/bin/sh
# eval_smollm2.sh — the acceptance and passkey tables of docs/BENCHMARKS.md for
# SmolLM2-135M (make models), and their plots (gnuplot, docs/img/):
#   bench/results/accept-smollm2-pride.jsonl   a novel (Pride and Prejudice, ../shared/text)
#   bench/results/accept-smollm2-needle.jsonl  the passkey prompt (the needle task)
#   bench/results/passkey-smollm2.jsonl        passkey accuracy by context and depth
# Acceptance does not depend on timing: this may run on a busy machine.
#   sh bench/eval_smollm2.sh        (BUILD, TF_SHARED_DIR, N, CONTEXTS, BUDGETS override)
set -eu
B=${BUILD:-build}
TF=$B/triforce
SH=${TF_SHARED_DIR:-../shared}
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=bench/results
N=${N:-128}
CONTEXTS=${CONTEXTS:-2048,4096,8000}
BUDGETS=${BUDGETS:-256,512,1024,2048}
TEXT=$SH/text/pride_and_prejudice.txt
[ -f "$M" ] || { echo "eval_smollm2: skipped: $M not found (make models)"; exit 0; }
[ -f "$TEXT" ] || { echo "eval_smollm2: skipped: $TEXT not found"; exit 0; }
$TF eval accept -m "$M" -f "$TEXT" --contexts "$CONTEXTS" --budgets "$BUDGETS" -n "$N" -o json \
    > "$OUT/accept-smollm2-pride.jsonl"
$TF eval accept -m "$M" --contexts "$CONTEXTS" --budgets "$BUDGETS" -n "$N" -o json > "$OUT/accept-smollm2-needle.jsonl"
$TF eval passkey -m "$M" --contexts "$CONTEXTS" -o json > "$OUT/passkey-smollm2.jsonl"
sh bench/eval_plot.sh

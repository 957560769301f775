#!/bin/sh
# bench/kvscale.sh — the synthetic run with Llama2-7B-128K's proportions: where the KV
# cache dominates a decoding step on this CPU, and what the three TriForce levels cost.
#
# Llama2-7B-128K's exact layer shapes (n_embd 4096, 32 heads, n_ff 11008, vocab 32000,
# YaRN 32x over 4096) in F16, built with 1 and 4 layers (a 32-layer model does not fit a
# benchmark's time on 2 cores, and its prefill even less): the cost of one layer is a third
# of the difference, and a 32-layer pass is projected as head + 32 layers. KV slots are filled with
# random values instead of a prefill (bench/kvscale.c). The draft is llama-68m-shaped over
# a StreamingLLM cache of 256 slots.
#
# Output: bench/results/kvscale.jsonl (raw) and bench/results/kvscale.md (table).
# Env: THREADS (2), SLOTS (target contexts), REPS (5).
set -eu
B=${BUILD:-build}
T=${THREADS:-2}
SLOTS=${SLOTS:-1024,4096,16384,32768,65536}
REPS=${REPS:-5}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"
J=$OUT/kvscale.jsonl
: > "$J"
for nl in 1 4; do
    [ -f "$TMP/l7b-$nl.gguf" ] || $B/triforce gen-model "$TMP/l7b-$nl.gguf" --preset llama2-7b-128k --n-layer $nl --type f16 >&2
done
[ -f "$TMP/l68m.gguf" ] || $B/triforce gen-model "$TMP/l68m.gguf" --preset llama-68m --type f16 >&2
for nl in 1 4; do
    ab=$([ $nl = 1 ] && echo a || echo b)
    # target over C_p: 1 row (ar) and gamma2 + 1 = 7 rows (verification)
    $B/kvscale -m "$TMP/l7b-$nl.gguf" -t "$T" --slots "$SLOTS" --rows 1,7 --reps "$REPS" --label "target-$ab" | tee -a "$J"
    # middle: the same weights over C_r (B = 4096): 1 and gamma1 + 1 = 3 rows
    $B/kvscale -m "$TMP/l7b-$nl.gguf" -t "$T" --slots 4096 --rows 1,3 --reps "$REPS" --label "middle-$ab" | tee -a "$J"
done
$B/kvscale -m "$TMP/l68m.gguf" -t "$T" --slots 256 --rows 1 --reps "$REPS" --label draft | tee -a "$J"
sh bench/kvscale_report.sh "$J" > "$OUT/kvscale.md"
cat "$OUT/kvscale.md"

#!/bin/sh
# make bench — the engine-core benchmarks. Results: bench/results/latest.jsonl (one JSON
# object per measurement), bench/results/latest.txt (machine description + bandwidth) and
# bench/results/attnbw.jsonl (attention alone, bench/attnbw.c).
# Summarized in docs/BENCHMARKS.md. Needs ../shared (the model and texts); generated
# models are written to bench/results/tmp/ (ignored by git). Where `make models` has fetched
# SmolLM2-135M, `triforce bench` measures it too: bench/results/bench-smollm2.jsonl.
set -eu
B=${BUILD:-build}
TF=$B/triforce
BENCH=$B/tfbench
SH=${TF_SHARED_DIR:-../shared}
T=${THREADS:-2}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"
S260=$SH/models/stories260K/stories260K.gguf
TEXT=$SH/text/war_and_peace.txt
VOCAB=$SH/vocab/ggml-vocab-llama-spm.gguf
# Decode and verification attention alone against the bytes it reads (no model needed):
# Llama2-7B (MHA), Llama-3-8B (GQA 4) and stories260K head shapes, one layer.
A=$OUT/attnbw.jsonl
: > "$A"
$B/attnbw -t "$T" --heads 32 --kv-heads 32 --head-dim 128 --slots 16384,65536 --rows 1,7 --type f16 | tee -a "$A"
$B/attnbw -t "$T" --heads 32 --kv-heads 32 --head-dim 128 --slots 65536 --rows 1,7 --type f32 | tee -a "$A"
$B/attnbw -t "$T" --heads 32 --kv-heads 8 --head-dim 128 --slots 65536 --rows 1,7 --type f16 | tee -a "$A"
$B/attnbw -t "$T" --heads 8 --kv-heads 4 --head-dim 8 --slots 65536 --rows 1,7 --type f16 | tee -a "$A"
# Prefill's causal attention over a 4,096-token prompt, against the bf16 and f32 peaks:
# Llama-3.1-8B (GQA 4, head_dim 128), Llama2-7B (MHA) and SmolLM2-135M (9 / 3 heads of 64) layers.
$B/attnbw -t "$T" --heads 32 --kv-heads 8 --head-dim 128 --prefill 4096 --reps 3 | tee -a "$A"
$B/attnbw -t "$T" --heads 32 --kv-heads 32 --head-dim 128 --prefill 4096 --reps 3 | tee -a "$A"
$B/attnbw -t "$T" --heads 9 --kv-heads 3 --head-dim 64 --prefill 4096,16384 --reps 3 | tee -a "$A"

for f in "$S260" "$TEXT" "$VOCAB"; do
    [ -f "$f" ] || { echo "bench: skipped: $f not found"; exit 0; }
done
J=$OUT/latest.jsonl
: > "$J"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
    echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "caches: $(lscpu | grep -E 'L2|L3' | tr -s ' ' | tr '\n' ';')"
    echo "compiler: $(${CC:-cc} --version | head -n 1)"
    echo "threads: $T"
} > "$OUT/latest.txt"
BW=$($BENCH membw -t "$T")
echo "bandwidth: $BW" >> "$OUT/latest.txt"
cat "$OUT/latest.txt"
DRAM=$(echo "$BW" | sed 's/.*"dram_'"$T"'t_gbs": \([0-9.]*\).*/\1/')

run() { # label model prompt gen kv [text]
    if [ -n "${6:-}" ]; then f="-f $6"; else f=""; fi
    $BENCH run -m "$2" $f -p "$3" -n "$4" -t "$T" --kv "$5" --bw "$DRAM" --label "$1" | tee -a "$J"
}

# stories260K at long prompts (the KV cache dominates), both KV types
for p in 16384 65536; do
    for kv in f16 f32; do run "stories260K-${p}-$kv" "$S260" $p 128 $kv "$TEXT"; done
done

# Llama-68M's shape (F32, F16) at 1K and 16K context
for ty in f32 f16; do
    m=$TMP/llama68m-$ty.gguf
    [ -f "$m" ] || $TF gen-model "$m" --preset llama-68m --type $ty --vocab-from "$VOCAB" 2>/dev/null
    for p in 1024 16384; do run "llama68m-$ty-$p" "$m" $p 128 f16 "$TEXT"; done
done

# ~24M parameters, 32000 vocabulary: decode at a short context, every weight type
for ty in f32 f16 q8_0 q4_0; do
    m=$TMP/tiny24m-$ty.gguf
    [ -f "$m" ] || $TF gen-model "$m" --preset tiny-24m --type $ty --vocab-from "$VOCAB" 2>/dev/null
    run "tiny24m-$ty" "$m" 16 256 f16 "$TEXT"
done
echo "results: $J"

# triforce bench on the real model: prefill, k-row target passes and the decoding modes at two
# depths of Pride and Prejudice, against the bandwidth it measures itself. The draft is the
# target's first 6 layers and the retrieval budget 512 tokens, as in `make demo`.
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
PP=$SH/text/pride_and_prejudice.txt
if [ -f "$SMOL" ] && [ -f "$PP" ]; then
    $TF bench -m "$SMOL" -f "$PP" -p 512,4096 -n 64 -d 2048,8000 --rows 1,2,4,8 \
        --mode ar,retrieval,triforce --draft-layers 6 --budget 512 -t "$T" -o json > "$OUT/bench-smollm2.jsonl"
    echo "results: $OUT/bench-smollm2.jsonl"
else
    echo "bench: skipped: triforce bench on SmolLM2 ($SMOL or $PP not found; make models)"
fi

#!/usr/bin/env bash
# gpu_check.sh — everything that needs a GPU, in one run on a GPU machine:
#   1. build with CUDA=1 (library, CLI, tests) and the kernel labs of dev/cuda/;
#   2. run the labs (each validates its variants against a CPU reference
#      before timing them; GB/s next to the measured peak);
#   3. run tests/test_backend_ops (every op of the CUDA table, the retrieval
#      cache's and the streaming ring's included, against double-precision
#      references) and tests/test_cuda (kernels vs CPU references, GPU == CPU
#      greedy tokens on generated models and stories260K, TriForce greedy
#      equality on the GPU);
#      FULL=1 also runs the whole suite of the CUDA build;
#   4. benchmark a generated model with Llama2-7B-128K's shapes (F16) at
#      prompts of 32K / 64K / 122K tokens: prefill tok/s, ar ms/token next to
#      its bandwidth floor, the middle level (B = 4096) and a Llama-68M-shaped
#      draft over C_q, and TriForce end to end.
# Everything is written to bench/results/cuda-<date>.txt (and the JSON of each
# run to bench/results/cuda-<date>.jsonl). Exit status: non-zero if a build,
# lab or test failed; benchmark failures are reported and do not stop the run.
#
#   bash dev/gpu_check.sh                 # all
#   LENGTHS="32768" N=64 bash dev/gpu_check.sh
#   SKIP_BENCH=1 bash dev/gpu_check.sh    # build, labs, tests only
set -u
cd "$(dirname "$0")/.."
STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p bench/results/tmp
OUT=bench/results/cuda-$STAMP.txt
JSONL=bench/results/cuda-$STAMP.jsonl
TMP=bench/results/tmp
LENGTHS=${LENGTHS:-"32768 65536 122880"}
N=${N:-128}
JOBS=${JOBS:-$(nproc)}
exec > >(tee "$OUT") 2>&1
fail=0
step() { echo; echo "=== $* ($(date +%H:%M:%S))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 || echo "nvidia-smi: not found"
/usr/local/cuda/bin/nvcc --version 2>&1 | tail -1

step "build (make CUDA=1)"
make CUDA=1 -j"$JOBS" >"$TMP/build.log" 2>&1 || { tail -40 "$TMP/build.log"; echo "BUILD FAILED"; exit 1; }
make CUDA=1 -j"$JOBS" cuda-labs >>"$TMP/build.log" 2>&1 || { tail -40 "$TMP/build.log"; echo "LAB BUILD FAILED"; exit 1; }
make CUDA=1 -j"$JOBS" build-cuda/tests/test_cuda build-cuda/tests/test_backend_ops >>"$TMP/build.log" 2>&1 ||
    { tail -40 "$TMP/build.log"; exit 1; }
echo "ok"

step "kernel labs"
PEAK=""
for lab in elementwise gemv attn_decode; do
    echo "--- $lab"
    if ! ./build-cuda/dev/$lab | tee "$TMP/lab-$lab.txt"; then echo "LAB $lab FAILED"; fail=1; fi
done
PEAK=$(sed -n 's/.* \([0-9][0-9]*\) GB\/s measured.*/\1/p' "$TMP/lab-gemv.txt" | head -1)
echo "measured peak: ${PEAK:-unknown} GB/s"

step "tests/test_backend_ops"
if ! BUILD=build-cuda ./build-cuda/tests/test_backend_ops; then echo "TEST_BACKEND_OPS FAILED"; fail=1; fi
step "tests/test_cuda"
if ! BUILD=build-cuda ./build-cuda/tests/test_cuda; then echo "TEST_CUDA FAILED"; fail=1; fi
if [ "${FULL:-0}" = 1 ]; then
    step "full suite of the CUDA build"
    make CUDA=1 test || fail=1
fi

if [ "${SKIP_BENCH:-0}" = 1 ]; then exit $fail; fi

step "benchmark models"
TF=./build-cuda/triforce
T7=$TMP/llama2-7b-128k-f16.gguf
D68=$TMP/llama68m-f16-v32k.gguf
[ -f "$T7" ] || $TF gen-model "$T7" --preset llama2-7b-128k --type f16 || { echo "gen-model failed"; exit 1; }
[ -f "$D68" ] || $TF gen-model "$D68" --preset llama-68m --type f16 || { echo "gen-model failed"; exit 1; }
$TF info "$T7" | head -20

# A prompt of exactly n tokens of the generated models' byte vocabulary: the
# project's prose repeated, cut by bytes, then trimmed by tokens.
SRC=$TMP/prose.txt
[ -f "$SRC" ] || { for i in $(seq 1 40); do cat README.md docs/*.md; done > "$SRC"; }
prompt_file() { # n -> path
    f=$TMP/cuda-prompt-$1.txt
    if [ ! -f "$f" ]; then
        bytes=$(( $1 * 3 ))
        head -c $bytes "$SRC" > "$f.tmp"
        while [ "$($TF tokenize -m "$D68" -f "$f.tmp" --ids | tr ',' '\n' | wc -l)" -gt "$1" ]; do
            bytes=$(( bytes * 97 / 100 ))
            head -c $bytes "$SRC" > "$f.tmp"
        done
        mv "$f.tmp" "$f"
    fi
    echo "$f"
}

# bytes one target token must read at context L: F16 weights + the f16 KV cache
W_BYTES=$(stat -c %s "$T7")
floor_ms() { # len -> ms at the measured peak
    awk -v w="$W_BYTES" -v l="$1" -v p="${PEAK:-0}" 'BEGIN { kv = l * 32 * 2 * 4096 * 2;
        if (p > 0) printf "%.2f", (w + kv) / (p * 1e9) * 1e3; else printf "n/a" }'
}

bench() { # label len mode [flags...]
    label=$1; len=$2; mode=$3; shift 3
    p=$(prompt_file "$len")
    js=$TMP/cuda-run.json
    if timeout 1800 $TF generate -m "$T7" -f "$p" --mode "$mode" --device cuda --temp 0 -n "$N" -s 1 \
        -c $(( len + N + 64 )) -b 2048 --ignore-eos --stats-json "$js" "$@" > /dev/null 2> "$TMP/cuda-run.err"; then
        printf '{"label": "%s", "len": %s, "mode": "%s", "extra": "%s", "stats": %s}\n' "$label" "$len" "$mode" "$*" \
            "$(tr -d '\n' < "$js")" >> "$JSONL"
        echo "$label len=$len mode=$mode $*: $(grep -E '^prefill' "$TMP/cuda-run.err" | tail -1)"
        grep -o '"[a-z_]*": *[0-9.e+-]*' "$js" | tr '\n' ' ' | cut -c1-600; echo
    else
        echo "$label len=$len mode=$mode $*: FAILED"; tail -5 "$TMP/cuda-run.err"
    fi
}

for len in $LENGTHS; do
    step "prompt $len tokens (ar floor at the measured peak: $(floor_ms "$len") ms/token)"
    bench ar "$len" ar
    bench middle-B4096 "$len" retrieval --budget 4096 --gamma2 6
    bench draft68m-Cq "$len" draft -md "$D68" --gamma2 6
    bench triforce "$len" triforce -md "$D68" --budget 4096 --gamma1 2 --gamma2 6
done
echo
echo "results: $OUT, $JSONL"
exit $fail

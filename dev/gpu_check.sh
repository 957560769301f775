#!/usr/bin/env bash
# gpu_check.sh — everything that needs a GPU, in one run on a GPU machine.
# Steps (STEPS: the steps to run, in the order given; default all, in this order):
#   labs      the kernel labs of dev/cuda/ (LABS, default all four): each validates its variants against
#             a CPU reference, then times them (GB/s next to the measured copy
#             bandwidth, which every later bound uses);
#   ops       tests/test_backend_ops on the CUDA table (every op against
#             double-precision references);
#   cuda      tests/test_cuda (kernels vs CPU references, GPU == CPU greedy
#             tokens on generated models and stories260K, every decoding mode
#             on the GPU == GPU ar);
#   dist      tests/test_spec_dist with TF_TEST_DEVICE=cuda (the chi-square
#             distribution tests and their negative controls on the device);
#   memcheck  compute-sanitizer memcheck over one greedy and one sampled
#             TriForce generation on stories260K;
#   smoke     triforce bench --device cuda on small generated models;
#   bench7b   a generated model with Llama2-7B-128K's shapes (F16): prefill,
#             k-row target passes and ar decode at DEPTHS over a cache of
#             random keys and values, each next to its bytes-read floor; a
#             Llama-68M-shaped model's passes over a short cache (the bottom
#             level's cost);
#   ab7b      bench7b's passes and decode with the kernel variants AB_ENVS selects
#             (configurations separated by ';', each a list of VAR=value; default
#             TF_CUDA_GEMV=1, the warp-per-row GEMV), for an A/B in one run
#             (P7_AB: prefill lengths, default none; AB_ROWS: pass rows);
#   abcuda    tests/test_cuda with AB_ENVS's first configuration set (the variants' GPU == CPU tokens and
#             every mode == GPU ar);
#   abmemcheck  compute-sanitizer memcheck with that configuration over one greedy and one
#             sampled TriForce generation on a generated llama-68m shape (head size 64);
#   e2e7b     the same model with a Llama-68M-shaped draft, every mode end to end
#             over a real prompt of E2E_LEN tokens (default 32768; a prefill, so
#             minutes with the CUDA-core prefill attention);
#   smollm2   SmolLM2-135M-Instruct (models/, `make models`) on the device:
#             GPU == CPU greedy tokens, then every mode at 2K / 8K tokens of a
#             novel with the speedup over ar and whether the output equals ar's;
#             SMOL_LONG=16384,32000 adds those depths with YaRN x4;
#   ncu       Nsight Compute on the one-row and eight-row GEMV (4096x4096 F16) and decode attention
#             (122,880 keys x 32 heads): the default kernels against the tensor-core variants
#             (speed of light, occupancy, warp stalls, memory), for the one-row gap;
#   peer      bench/peer_torch.py: PyTorch (HF transformers LlamaForCausalLM,
#             static cache, CUDA graph) decoding at the same shapes and depths
#             (PEER: presets, PEER_ROWS, PEER_REPS; PEER_CHECK= skips --check).
# Everything is written to RESULTS/cuda-<date>.txt (bench rows also as JSON
# lines in RESULTS/cuda-<date>.jsonl; RESULTS defaults to bench/results). Exit status: non-zero if a
# build, lab or test failed; benchmark failures are reported and do not stop
# the run. Every step runs under a time limit (LIMIT_<step> seconds).
#
#   bash dev/gpu_check.sh                          # build here, all steps
#   PREBUILT=.gpu bash dev/gpu_check.sh            # binaries from dev/gpu_stage.sh
#   STEPS="labs ops cuda" bash dev/gpu_check.sh
#   DEPTHS=32768,65536,122880 N=64 bash dev/gpu_check.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=${RESULTS:-bench/results}
TMP=bench/results/tmp
mkdir -p "$RESULTS" "$TMP"
LOG=$RESULTS/cuda-$STAMP.txt
JSONL=$RESULTS/cuda-$STAMP.jsonl
STEPS=${STEPS:-"labs ops cuda dist memcheck smoke bench7b ab7b e2e7b smollm2 peer"} # ncu, abcuda, abmemcheck on request
DEPTHS=${DEPTHS:-32768,65536,122880}
N=${N:-64}
JOBS=${JOBS:-$(nproc)}
exec > >(tee "$LOG") 2>&1
fail=0
step() { echo; echo "=== $* ($(date +%H:%M:%S))"; }
lim() { local v="LIMIT_$1"; echo "${!v:-$2}"; } # step default -> seconds
# run a command under a limit; a time-out is a failure named as such
limited() { # seconds label cmd...
    local s=$1 label=$2; shift 2
    timeout -k 10 "$s" "$@"; local rc=$?
    [ $rc = 124 ] || [ $rc = 137 ] && echo "$label: TIMED OUT after ${s}s"
    return $rc
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory,clocks.sm --format=csv 2>&1 || echo "nvidia-smi: not found"
nvcc --version 2>/dev/null | tail -1 || /usr/local/cuda/bin/nvcc --version 2>&1 | tail -1
nproc; free -g | head -2

if [ -n "${PREBUILT:-}" ]; then
    step "prebuilt binaries from $PREBUILT"
    mkdir -p build-cuda && tar xJf "$PREBUILT/bin.tar.xz" -C build-cuda || { echo "UNPACK FAILED"; exit 1; }
    # the libraries as gpu_stage.sh writes them (a folder in stages made before it compressed them)
    [ -f "$PREBUILT/lib.tar.xz" ] && { tar xJf "$PREBUILT/lib.tar.xz" -C "$PREBUILT" || { echo "UNPACK FAILED"; exit 1; }; }
    export LD_LIBRARY_PATH="$PWD/$PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ -d "$PREBUILT/shared" ] && export TF_SHARED_DIR="$PWD/$PREBUILT/shared"
    # cuBLAS / cudart where the build machine's rpath does not point
    if ldd build-cuda/triforce | grep -q "not found"; then
        for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(ls -d /usr/local/cuda-*/lib64 2>/dev/null) \
                 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
            [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
        done
    fi
    ldd build-cuda/triforce | grep "not found" && { echo "MISSING LIBRARIES"; exit 1; }
    echo ok
else
    step "build (make CUDA=1)"
    make CUDA=1 -j"$JOBS" >"$TMP/build.log" 2>&1 || { tail -40 "$TMP/build.log"; echo "BUILD FAILED"; exit 1; }
    make CUDA=1 -j"$JOBS" cuda-labs build-cuda/tests/test_cuda build-cuda/tests/test_backend_ops \
        build-cuda/tests/test_spec_dist >>"$TMP/build.log" 2>&1 || { tail -40 "$TMP/build.log"; echo "BUILD FAILED"; exit 1; }
    echo ok
fi
TF=./build-cuda/triforce
S260=${TF_SHARED_DIR:-../shared}/models/stories260K/stories260K.gguf

PEAK="" BW=""
s_labs() {
    step "kernel labs"
    for lab in ${LABS:-elementwise gemv attn_decode attn_prefill}; do
        echo "--- $lab"
        if [ -n "${PREBUILT:-}" ] && [ ! -x ./build-cuda/dev/$lab ]; then
            echo "not in the stage (LABS=0 bash dev/gpu_stage.sh): skipped"; continue
        fi
        if ! limited "$(lim labs 120)" "lab $lab" ./build-cuda/dev/$lab | tee "$TMP/lab-$lab.txt"; then
            echo "LAB $lab FAILED"; fail=1
        fi
        # the copy bandwidth each lab measures first: the bounds use the first
        [ -n "$PEAK" ] || PEAK=$(sed -n 's/.* \([0-9][0-9]*\) GB\/s measured.*/\1/p' "$TMP/lab-$lab.txt" | head -1)
    done
    echo "measured copy bandwidth: ${PEAK:-unknown} GB/s"
    BW=${PEAK:+--bw-gbs $PEAK}
}

s_ops() {
    step "tests/test_backend_ops"
    limited "$(lim ops 300)" test_backend_ops env BUILD=build-cuda ./build-cuda/tests/test_backend_ops ||
        { echo "TEST_BACKEND_OPS FAILED"; fail=1; }
}
s_cuda() {
    step "tests/test_cuda"
    limited "$(lim cuda 600)" test_cuda env BUILD=build-cuda ./build-cuda/tests/test_cuda || { echo "TEST_CUDA FAILED"; fail=1; }
}
s_dist() {
    step "tests/test_spec_dist on the device (TF_TEST_DEVICE=cuda)"
    limited "$(lim dist 600)" test_spec_dist env TF_TEST_DEVICE=cuda ./build-cuda/tests/test_spec_dist ||
        { echo "TEST_SPEC_DIST (cuda) FAILED"; fail=1; }
}
s_memcheck() {
    step "compute-sanitizer memcheck: TriForce on stories260K, greedy and sampled"
    CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    for temp in 0 0.8; do
        limited "$(lim memcheck 300)" memcheck "$CS" --tool memcheck --error-exitcode 3 --print-limit 20 \
            $TF generate -m "$S260" -md "$S260" --device cuda --mode triforce --budget 64 --gamma1 2 --gamma2 4 \
            -p "Once upon a time, there was a little girl named Lily. She loved to play outside." -n 48 \
            --temp $temp -s 7 --ignore-eos 2>&1 | tail -12 || { echo "MEMCHECK (temp $temp) FAILED"; fail=1; }
    done
}

# triforce bench on the device: rows to the log (md) and the JSON lines file
tfbench() { # label limit args...
    local label=$1 s=$2; shift 2
    echo "--- $label"
    if limited "$s" "$label" $TF bench --device cuda $BW "$@" -o json > "$TMP/bench.json" 2> "$TMP/bench.err"; then
        sed "s/^{/{\"label\": \"$label\", /" "$TMP/bench.json" >> "$JSONL"
        python3 - "$TMP/bench.json" <<'EOF' || cat "$TMP/bench.json"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    lv = " ".join("%s=%.3g" % (l["name"], l["ms_per_pass"]) for l in r.get("levels", []) if l.get("ms_per_pass") is not None)
    acc = " ".join("%s=%.3f" % (l["name"], l["acceptance"]) for l in r.get("levels", []) if l.get("acceptance") is not None)
    f = lambda k: ("%.4g" % r[k]) if r.get(k) is not None else "-"
    print("%-7s %-9s d=%-6d n=%-5d %s %s [%s..%s] floor %s (%s%%) speedup %s tok/pass %s acc %s ms/pass %s =ar %s" % (
        r["test"], r["mode"], r["depth"], r["n"], f("median"), r["unit"], f("min"), f("max"), f("bound"),
        f("pct_of_bound"), f("speedup"), f("tok_per_target_pass"), acc or "-", lv or "-", r.get("same_as_ar")))
EOF
    else
        echo "$label: FAILED"; tail -5 "$TMP/bench.err"
    fi
}

s_smoke() {
    step "smoke: bench --device cuda on generated models"
    # llama-68m at depth 256: the bottom level's pass over C_q (16 sinks + a 240-token window)
    for p in tiny-24m llama-68m; do
        f=$TMP/$p-f16.gguf
        [ -f "$f" ] || $TF gen-model "$f" --preset $p --type f16 >/dev/null || echo "gen-model $p failed"
        tfbench "$p" "$(lim smoke 120)" -m "$f" -p 512,2048 -n 64 -d 256,2048 --rows 1,2,4,8 --fill random --mode ar -r 3
    done
}

s_bench7b() {
    step "Llama2-7B-128K shapes (F16), depths $DEPTHS"
    T7=$TMP/llama2-7b-128k-f16.gguf
    [ -f "$T7" ] || limited "$(lim gen 300)" gen-model $TF gen-model "$T7" --preset llama2-7b-128k --type f16 ||
        echo "gen-model llama2-7b-128k failed"
    ls -la "$T7"
    # depth 4096: a pass over the middle level's retrieval cache (B = 4096) costs what a target pass at
    # depth 4096 costs (the same weights, kernels and cache size)
    tfbench "llama2-7b" "$(lim bench7b 400)" -m "$T7" -p "${P7:-4096,16384}" -b 4096 -n "$N" -d "4096,$DEPTHS" \
        --rows 1,2,4,8,16 --fill random --mode ar -r 2
}

AB_ENVS=${AB_ENVS:-${AB_ENV:-TF_CUDA_GEMV=1}} # configurations separated by ';' (ab7b runs each)
AB_ENV=${AB_ENVS%%;*}                          # the first: abcuda, abmemcheck
ab_set() { local kv; for kv in $AB_ENV; do export "$kv"; done; }
ab_unset() { local kv; for kv in $AB_ENV; do unset "${kv%%=*}"; done; }

s_ab7b() {
    local first=$AB_ENV rest="$AB_ENVS;"
    T7=$TMP/llama2-7b-128k-f16.gguf
    [ -f "$T7" ] || limited "$(lim gen 300)" gen-model $TF gen-model "$T7" --preset llama2-7b-128k --type f16 ||
        echo "gen-model llama2-7b-128k failed"
    while [ -n "$rest" ]; do
        AB_ENV=${rest%%;*} rest=${rest#*;}
        [ -n "$AB_ENV" ] || continue
        step "A/B: $AB_ENV at the same shapes"
        ab_set
        tfbench "llama2-7b $AB_ENV" "$(lim ab7b 300)" -m "$T7" -p "${P7_AB:-0}" -b 4096 -n "$N" -d "4096,$DEPTHS" \
            --rows "${AB_ROWS:-1,2,4,8,16}" --fill random --mode ar -r 2
        ab_unset
    done
    AB_ENV=$first
}

s_abcuda() {
    step "tests/test_cuda with $AB_ENV"
    ab_set
    limited "$(lim cuda 600)" test_cuda env BUILD=build-cuda ./build-cuda/tests/test_cuda ||
        { echo "TEST_CUDA ($AB_ENV) FAILED"; fail=1; }
    ab_unset
}

s_abmemcheck() {
    step "compute-sanitizer memcheck with $AB_ENV: TriForce on a generated llama-68m shape"
    CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    D68=$TMP/llama-68m-f16.gguf
    [ -f "$D68" ] || $TF gen-model "$D68" --preset llama-68m --type f16 >/dev/null || echo "gen-model llama-68m failed"
    head -c 1500 "${TF_SHARED_DIR:-../shared}/text/pride_and_prejudice.txt" > "$TMP/novel1500.txt" # byte vocabulary
    ab_set
    for temp in 0 0.8; do
        limited "$(lim memcheck 300)" memcheck "$CS" --tool memcheck --error-exitcode 3 --print-limit 20 \
            $TF generate -m "$D68" -md "$D68" --device cuda --mode triforce --budget 256 --gamma1 2 --gamma2 4 \
            -f "$TMP/novel1500.txt" -c 2048 -n 24 \
            --temp $temp -s 7 --ignore-eos 2>&1 | tail -6 || { echo "MEMCHECK ($AB_ENV, temp $temp) FAILED"; fail=1; }
    done
    ab_unset
}

s_e2e7b() {
    step "TriForce end to end at Llama2-7B-128K's shapes over a real ${E2E_LEN:-32768}-token prompt"
    T7=$TMP/llama2-7b-128k-f16.gguf D68=$TMP/llama-68m-f16.gguf
    [ -f "$T7" ] || limited "$(lim gen 300)" gen-model $TF gen-model "$T7" --preset llama2-7b-128k --type f16 ||
        echo "gen-model llama2-7b-128k failed"
    [ -f "$D68" ] || $TF gen-model "$D68" --preset llama-68m --type f16 >/dev/null || echo "gen-model llama-68m failed"
    # random weights: the acceptance means nothing, the per-level latencies and the equality with ar do
    tfbench "llama2-7b e2e" "$(lim e2e 600)" -m "$T7" -md "$D68" -f "${TF_SHARED_DIR:-../shared}/text/pride_and_prejudice.txt" \
        -p 0 --rows 0 -n 64 -d "${E2E_LEN:-32768}" -b 4096 --mode ar,retrieval,draft,triforce --budget 4096 \
        --gamma1 2 --gamma2 6 -r 1
}

s_smollm2() {
    step "SmolLM2-135M-Instruct on the device"
    SM=${SMOLLM2:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
    NOVEL=${TF_SHARED_DIR:-../shared}/text/pride_and_prejudice.txt
    if [ ! -f "$SM" ]; then
        echo "skipped: $SM not found"
    else
        head -c 30000 "$NOVEL" > "$TMP/novel8k.txt" # 7,633 tokens
        for dev in cpu cuda; do
            limited "$(lim smol 120)" "greedy $dev" $TF generate -m "$SM" -f "$TMP/novel8k.txt" --device $dev --temp 0 \
                -n 64 --ignore-eos -c 8192 --stats-json "$TMP/sm-$dev.json" > "$TMP/sm-$dev.txt" 2> "$TMP/sm-$dev.err" ||
                { echo "greedy on $dev FAILED"; tail -3 "$TMP/sm-$dev.err"; }
            grep -E "^prefill|^decode|device" "$TMP/sm-$dev.err" | head -4
        done
        if cmp -s "$TMP/sm-cpu.txt" "$TMP/sm-cuda.txt"; then echo "SmolLM2 8K prompt: GPU text == CPU text (64 greedy tokens)"
        else echo "SmolLM2 8K prompt: GPU text differs from CPU text:"; diff "$TMP/sm-cpu.txt" "$TMP/sm-cuda.txt" | head -8; fi
        tfbench "smollm2 modes" "$(lim smol 400)" -m "$SM" -f "$NOVEL" -p 2048,7800 -n 256 -d 2048,7800 \
            --rows 1,2,4,8,16 --mode ar,retrieval,draft,triforce --draft-lookup 4 --budget 512 --gamma1 4 --gamma2 10 -r 2
        # past the trained context: YaRN x4 (32,768 positions)
        [ -n "${SMOL_LONG:-}" ] && tfbench "smollm2 yarn x4" "$(lim smol 400)" -m "$SM" -f "$NOVEL" -p 0 --rows 0 -n 256 \
            -d "$SMOL_LONG" --rope-scaling yarn --rope-factor 4 --mode ar,retrieval,draft,triforce --draft-lookup 4 \
            --budget 512 --gamma1 4 --gamma2 10 -r 1
    fi
}

s_ncu() {
    step "ncu: one-row and eight-row GEMV and decode attention, default against tensor cores"
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    local sec="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats"
    # lab shape index, lab, mangled kernel-name prefix (the variant the lab runs: split R4 / tc 8 warps; rows2 / tc pipelined)
    local runs="0:gemv:_Z12k_gemv_splitILi1ELi4ELi1E 0:gemv:_Z9k_gemv_tcILi1ELi1ELi8ELi1E
                4:gemv:_Z12k_gemv_splitILi8ELi4ELi1E 4:gemv:_Z9k_gemv_tcILi1ELi1ELi8ELi1E
                5:attn_decode:_Z18k_attn_split_rows2ILi16ELi1E 5:attn_decode:_Z15k_attn_split_tcILi128ELi1E
                6:attn_decode:_Z18k_attn_split_rows2ILi16ELi8E 6:attn_decode:_Z15k_attn_split_tcILi128ELi1E"
    for r in $runs; do
        local only=${r%%:*} rest=${r#*:}; local lab=${rest%%:*} k=${rest#*:}
        echo "--- $lab shape $only, $k"
        LAB_ONLY=$only limited "$(lim ncu 180)" "ncu $k" "$NCU" --kernel-name-base mangled -k "regex:^$k" -s 2 -c 1 \
            $sec ./build-cuda/dev/$lab 2>&1 | grep -vE "^==PROF==" | tail -90
    done
}

s_peer() {
    step "peer: PyTorch (HF transformers) on the device"
    if [ -f bench/peer_torch.py ]; then
        for p in ${PEER:-llama2-7b-128k smollm2-135m}; do
            d=$DEPTHS; [ $p = smollm2-135m ] && d=2048,7800
            PYTHONUNBUFFERED=1 limited "$(lim peer 400)" "peer $p" python3 bench/peer_torch.py --preset $p --depths "$d" \
                --n "$N" --rows "${PEER_ROWS:-1,2,4,8,16}" --reps "${PEER_REPS:-3}" ${PEER_CHECK---check} \
                --out "$TMP/peer.jsonl" || echo "peer $p FAILED"
        done
        [ -f "$TMP/peer.jsonl" ] && sed 's/^{/{"label": "peer", /' "$TMP/peer.jsonl" >> "$JSONL"
    else
        echo "skipped: bench/peer_torch.py not found"
    fi
}
for st in $STEPS; do
    if declare -F "s_$st" >/dev/null; then "s_$st"; else echo "unknown step '$st'"; fail=1; fi
done
echo
echo "results: $LOG, $JSONL"
exit $fail

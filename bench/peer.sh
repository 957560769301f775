#!/bin/sh
# bench/peer.sh — the CPU engine beside llama.cpp at 1B–8B shapes: both engines on the same
# GGUF files, the same prompt token ids and the same thread count, taking turns, with prefill
# tok/s, decode ms/token, their ratio and each decode figure's floor at the measured bandwidth.
#
#   sh bench/peer.sh                  everything (52 minutes on the 2-core Zen 5 VM; docs/BENCHMARKS.md)
#   MODELS=smollm2 CTXS=512 REPS=1 NGEN=16 sh bench/peer.sh     a smoke run (about 2 minutes)
#
# Results: bench/results/peer.md (header with the machine and versions, one table) and
# bench/results/peer.jsonl (every repetition), written only when the whole run succeeds (on
# failure the raw runs stay in bench/results/tmp/peer-work/). Summarized in docs/BENCHMARKS.md.
#
# Models (MODELS, comma-separated; weight types TYPES, default q8_0,q4_k,f16):
#   smollm2      SmolLM2-135M-Instruct, the real Q4_1 file of `make models` (TYPES do not apply)
#   tiny24m      the ~24M-parameter shape of `make bench` (`gen-model --preset tiny-24m`: n_embd 512,
#                4 layers, 8 / 2 heads, tied 32000 vocabulary), random weights, the Llama SPM
#                vocabulary; not in the default MODELS (weights of 47-95 MB in F16/F32: a small
#                model's decode, where a token's fixed costs weigh most)
#   tinyllama    TinyLlama-1.1B shape, random weights (`triforce gen-model --preset tinyllama-1.1b`),
#                the 32000-token Llama SPM vocabulary copied from ../shared/vocab
#   llama3.2-1b  Llama-3.2-1B shape, tied; 128256 tokens of gen-model's padded byte vocabulary
#   llama3.1-8b  the first 4 of Llama-3.1-8B's 32 layers (all widths, untied 128256 vocabulary);
#                contexts CTXS_8B (default CTXS; 16384 is opt-in: CTXS_8B=512,4096,16384)
# Generated models go to bench/results/tmp/peer-*.gguf (git-ignored) and are reused; they take
# about 15 GB and 10 minutes to write on 2 cores the first time (Q4_K most of it).
#
# For each model, weight type and context P (CTXS, default 512,4096), REPS times (default 3),
# each repetition starting with the other engine:
#   llama.cpp  bench/peer_llamacpp.py: llama_decode of the first P ids in batches of BATCH, then
#              NGEN greedy tokens, wall-clocked around the calls; flash attention FLASH_ATTN
#              (on, the default, or off), K and V of type KV (f16, the default, q8_0 or q4_0:
#              llama.cpp's -ctk/-ctv, which need flash attention on);
#   triforce   triforce bench -p P -d P -n NGEN --mode ar -b BATCH --kv-type KV -o json on the same text:
#              its bandwidth probe, prefill of the first P tokens, NGEN greedy tokens after
#              them (FILL=random: after a cache of random K/V instead of a second prefill).
# The prompt is the first P*8 bytes (whole lines) of PEER_TEXT (default ../shared/text/
# war_and_peace.txt); triforce bench tokenizes that whole file, and llama.cpp gets the ids of
# `triforce tokenize` on it, so both see the same tokens.
#
# Settings: THREADS (default 2), BATCH (default 512, n_batch = n_ubatch for llama.cpp),
# NGEN (default 64), REPS, FILL (text or random), KV (f16, q8_0 or q4_0), BUILD (default build), TF_SHARED_DIR,
# PEER_NOTE (a line for the header of the results, e.g. "smoke run on a busy machine").
# llama.cpp comes from PyPI's llama-cpp-python: PEER_PYTHON names a Python that has it;
# otherwise it is installed once into $BUILD/venv-llamacpp (compiled from source: several
# minutes; LLAMACPP_PYTHON_VERSION, default 0.3.36) with -march=native, and reused; the header
# of the results warns when the llama.cpp in use lacks AVX-512 on a CPU that has it. Inputs
# that are absent (the text, the vocabulary, SmolLM2) skip what needs them with a line saying so.
# Run it on a quiet machine: llama.cpp's OpenMP threads spin at their barriers, and its
# decode was 10 to 100 times slower while other builds held the cores of this 2-core VM.
set -eu
B=${BUILD:-build}
TF=$B/triforce
SH=${TF_SHARED_DIR:-../shared}
T=${THREADS:-2}
REPS=${REPS:-3}
NGEN=${NGEN:-64}
BATCH=${BATCH:-512}
FA=${FLASH_ATTN:-on}
FILL=${FILL:-text}
KV=${KV:-f16}
CTXS=${CTXS:-512,4096}
CTXS_8B=${CTXS_8B:-$CTXS}
MODELS=${MODELS:-smollm2,tinyllama,llama3.2-1b,llama3.1-8b}
TYPES=${TYPES:-q8_0,q4_k,f16}
TEXT=${PEER_TEXT:-$SH/text/war_and_peace.txt}
VOCAB=$SH/vocab/ggml-vocab-llama-spm.gguf
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=bench/results
TMP=$OUT/tmp
W=$TMP/peer-work
VERSION=${LLAMACPP_PYTHON_VERSION:-0.3.36}

case $FA in on|off) ;; *) echo "peer: FLASH_ATTN=$FA: expected on or off" >&2; exit 2;; esac
case $FILL in text|random) ;; *) echo "peer: FILL=$FILL: expected text or random" >&2; exit 2;; esac
case $KV in f16) ;; q8_0|q4_0) [ "$FA" = on ] || { echo "peer: KV=$KV needs FLASH_ATTN=on (llama.cpp quantizes V only with flash attention)" >&2; exit 2; };;
*) echo "peer: KV=$KV: expected f16, q8_0 or q4_0" >&2; exit 2;; esac
for x in $T $REPS $NGEN $BATCH $(echo "$CTXS,$CTXS_8B" | tr ',' ' '); do
    case $x in ''|*[!0-9]*|0) echo "peer: THREADS, REPS, NGEN, BATCH, CTXS, CTXS_8B: '$x' is not a positive integer" >&2; exit 2;; esac
done
for x in $(echo "$MODELS" | tr ',' ' '); do
    case $x in smollm2|tiny24m|tinyllama|llama3.2-1b|llama3.1-8b) ;;
    *) echo "peer: MODELS: unknown model '$x' (expected smollm2, tiny24m, tinyllama, llama3.2-1b, llama3.1-8b)" >&2; exit 2;; esac
done
for x in $(echo "$TYPES" | tr ',' ' '); do
    case $x in f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k) ;;
    *) echo "peer: TYPES: '$x' is not a type gen-model writes (f16, q8_0, q4_k, ...)" >&2; exit 2;; esac
done
[ -f "$TEXT" ] || { echo "peer: skipped: $TEXT not found (TF_SHARED_DIR, PEER_TEXT)"; exit 0; }
[ -x "$TF" ] || make -s "$TF"

# ---- llama-cpp-python ----
if [ -n "${PEER_PYTHON:-}" ]; then
    PY=$PEER_PYTHON
    "$PY" -c 'import llama_cpp, numpy' 2> /dev/null ||
        { echo "peer: PEER_PYTHON=$PY cannot import llama_cpp and numpy" >&2; exit 1; }
else
    V=$B/venv-llamacpp
    PY=$V/bin/python
    if ! "$PY" -c 'import llama_cpp, numpy' 2> /dev/null; then
        command -v python3 > /dev/null || { echo "peer: python3 not found (Debian: apt-get install -y python3-venv)" >&2; exit 1; }
        if [ ! -x "$V/bin/pip" ]; then
            rm -rf "$V"
            python3 -m venv "$V" || { echo "peer: python3 -m venv failed (Debian: apt-get install -y python3-venv)" >&2; exit 1; }
        fi
        echo "peer: installing llama-cpp-python $VERSION from PyPI into $V (compiles llama.cpp; several minutes)"
        # -march=native, as triforce picks its kernels for this CPU; no cached wheel, which may be generic.
        # LLAMACPP_CMAKE_ARGS replaces it (dev/llamacpp_check.sh: a VM with AMX where native stops with
        # "Illegal instruction")
        CMAKE_ARGS="${LLAMACPP_CMAKE_ARGS:--DGGML_NATIVE=ON}" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
            "$V/bin/pip" install --quiet --no-cache-dir "llama-cpp-python==$VERSION"
    fi
fi

rm -rf "$W"
mkdir -p "$W/runs"
START=$(date +%s)

# ---- the machine and the versions ----
{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
    echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "caches: $(lscpu | grep -E '^L[23]' | tr -s ' ' | tr '\n' ';' | sed 's/;$//')"
    echo "triforce: $(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' (with uncommitted changes)'), $(${CC:-cc} --version | head -n 1)"
    LCINFO=$("$PY" -c 'import llama_cpp; print(llama_cpp.llama_print_system_info().decode().strip())')
    echo "llama.cpp: llama-cpp-python $("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)') from PyPI, $LCINFO"
    if grep -qw avx512f /proc/cpuinfo && ! echo "$LCINFO" | grep -q 'AVX512 = 1'; then
        echo "warning: this CPU has AVX-512 and this llama.cpp was built without it (not -march=native), so it is" \
            "slower than it can be here; rebuild it: rm -rf $B/venv-llamacpp and run without PEER_PYTHON"
    fi
    echo "settings: $T threads, batch $BATCH (llama.cpp n_batch = n_ubatch), $KV KV cache, llama.cpp flash attention $FA, $NGEN decoded tokens, repetitions: $REPS, triforce decode after $([ "$FILL" = random ] && echo 'a cache filled with random K/V' || echo 'a prefill of the text')"
    echo "text: $TEXT"
    [ -z "${PEER_NOTE:-}" ] || echo "note: $PEER_NOTE"
} > "$W/info.txt"
cat "$W/info.txt"

# gen_model FILE ARGS...: writes FILE with `triforce gen-model` unless it is there already
gen_model() {
    f=$1; shift
    [ -f "$f" ] && return 0
    echo "peer: writing $f"
    "$TF" gen-model "$f" "$@" -t "$T"
}

# measure LABEL TYPE MODEL CTXS: the interleaved runs of one model file at each context
measure() {
    label=$1 ty=$2 m=$3 ctxs=$4
    for p in $(echo "$ctxs" | tr ',' ' '); do
        tag=$(echo "$label-$ty-$p" | tr -c 'A-Za-z0-9._\n-' '_')
        prompt=$W/$tag.txt
        head -c $((p * 8)) "$TEXT" | sed '$d' > "$prompt"
        "$TF" tokenize -m "$m" -f "$prompt" --ids > "$W/$tag.ids"
        n=$(tr ',' ' ' < "$W/$tag.ids" | wc -w)
        if [ "$n" -lt "$p" ]; then
            echo "peer: skipped: $label $ty at $p tokens: $TEXT gives only $n tokens in $((p * 8)) bytes"
            continue
        fi
        fill=""
        [ "$FILL" = random ] && fill="--fill random"
        r=1
        while [ "$r" -le "$REPS" ]; do
            lc=$W/runs/$tag-$r-llamacpp.json
            tf=$W/runs/$tag-$r-triforce.jsonl
            for e in $(if [ $((r % 2)) -eq 1 ]; then echo llamacpp triforce; else echo triforce llamacpp; fi); do
                echo "peer: $label $ty, $p tokens, repetition $r/$REPS: $e"
                if [ "$e" = llamacpp ]; then
                    "$PY" bench/peer_llamacpp.py --model "$m" --tokens "$W/$tag.ids" --prompt "$p" --n-gen "$NGEN" \
                        --threads "$T" --batch "$BATCH" --flash-attn "$FA" --kv-type "$KV" > "$lc" 2>> "$W/llamacpp.log" ||
                        { echo "peer: llama.cpp failed on $m (its log: $W/llamacpp.log)" >&2; exit 1; }
                else
                    # shellcheck disable=SC2086 # $fill is empty or two words
                    "$TF" bench -m "$m" -f "$prompt" -p "$p" -d "$p" -n "$NGEN" --rows 0 --mode ar -r 1 -t "$T" \
                        -b "$BATCH" --kv-type "$KV" $fill -o json > "$tf" 2>> "$W/triforce.log" ||
                        { echo "peer: triforce bench failed on $m (its log: $W/triforce.log)" >&2; exit 1; }
                fi
            done
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$ty" "$m" "$p" "$r" "$lc" "$tf" >> "$W/manifest.tsv"
            r=$((r + 1))
        done
    done
}

for model in $(echo "$MODELS" | tr ',' ' '); do
    case $model in
    smollm2)
        if [ -f "$SMOL" ]; then measure "SmolLM2-135M" q4_1 "$SMOL" "$CTXS"
        else echo "peer: skipped: SmolLM2-135M ($SMOL not found; make models)"; fi
        ;;
    tiny24m)
        if [ ! -f "$VOCAB" ]; then echo "peer: skipped: 24M shape ($VOCAB not found)"; continue; fi
        for ty in $(echo "$TYPES" | tr ',' ' '); do
            m=$TMP/peer-tiny-24m-$ty.gguf
            gen_model "$m" --preset tiny-24m --vocab-from "$VOCAB" --type "$ty"
            measure "24M shape" "$ty" "$m" "$CTXS"
        done
        ;;
    tinyllama)
        if [ ! -f "$VOCAB" ]; then echo "peer: skipped: TinyLlama-1.1B shape ($VOCAB not found)"; continue; fi
        for ty in $(echo "$TYPES" | tr ',' ' '); do
            m=$TMP/peer-tinyllama-1.1b-$ty.gguf
            gen_model "$m" --preset tinyllama-1.1b --vocab-from "$VOCAB" --type "$ty"
            measure "TinyLlama-1.1B shape" "$ty" "$m" "$CTXS"
        done
        ;;
    llama3.2-1b)
        for ty in $(echo "$TYPES" | tr ',' ' '); do
            m=$TMP/peer-llama3.2-1b-$ty.gguf
            gen_model "$m" --preset llama3.2-1b --type "$ty"
            measure "Llama-3.2-1B shape" "$ty" "$m" "$CTXS"
        done
        ;;
    llama3.1-8b)
        for ty in $(echo "$TYPES" | tr ',' ' '); do
            m=$TMP/peer-llama3.1-8b-4layers-$ty.gguf
            gen_model "$m" --preset llama3.1-8b --n-layer 4 --type "$ty"
            measure "Llama-3.1-8B shape, 4 of 32 layers" "$ty" "$m" "$CTXS_8B"
        done
        ;;
    esac
done

if [ ! -s "$W/manifest.tsv" ]; then echo "peer: nothing was measured"; exit 0; fi
"$PY" bench/peer_report.py "$W/manifest.tsv" "$W/info.txt" "$W/peer.md" "$W/peer.jsonl"
mv "$W/peer.jsonl" "$OUT/peer.jsonl"
mv "$W/peer.md" "$OUT/peer.md"
rm -rf "$W"
cat "$OUT/peer.md"
echo "peer: $(( ($(date +%s) - START) / 60 )) minutes; results: $OUT/peer.md, $OUT/peer.jsonl"

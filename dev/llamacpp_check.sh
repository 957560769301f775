#!/bin/sh
# dev/llamacpp_check.sh — does llama.cpp load what `triforce convert` writes, and decode it
# the same way? stories260K is exported as a Hugging Face directory (two safetensors
# shards, tokenizer.json, rotate-half q/k rows), converted back to GGUF (f32 and q8_0), and
# both files are run greedily by llama.cpp (through its Python binding, llama-cpp-python)
# and by triforce; the texts of the first 40 tokens must be equal.
#
# llama-cpp-python comes from PyPI: on first use it is installed with pip into a virtual
# environment, $BUILD/venv-llamacpp (default build/venv-llamacpp), which compiles llama.cpp
# from source (several minutes on 2 cores; needs python3 with venv, a C++ compiler and
# cmake, which pip fetches when absent). Later runs reuse it. LLAMACPP_PYTHON_VERSION
# picks another release; LLAMACPP_CMAKE_ARGS passes llama.cpp's build options (on a VM
# whose Sapphire Rapids CPU reports AMX, the default native build stopped with "Illegal
# instruction" at its first evaluation; -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON
# -DGGML_F16C=ON built one that runs).
set -eu
B=${BUILD:-build}
SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf
V=$B/venv-llamacpp
VERSION=${LLAMACPP_PYTHON_VERSION:-0.3.36}
[ -f "$S260" ] || { echo "llamacpp_check: skipped: $S260 not found"; exit 0; }
W=${TMPDIR:-/tmp}/tf_llamacpp_check
mkdir -p "$W"
make -s "$B/triforce" "$B/dev/export_hf"
rm -rf "$W/hf"
"$B/dev/export_hf" "$S260" "$W/hf" 2
"$B/triforce" convert "$W/hf" "$W/conv-f32.gguf"
"$B/triforce" convert "$W/hf" "$W/conv-q8_0.gguf" q8_0

if ! "$V/bin/python" -c 'import llama_cpp' 2> /dev/null; then
    command -v python3 > /dev/null || { echo "llamacpp_check: python3 not found (Debian: apt-get install -y python3-venv)" >&2; exit 1; }
    if [ ! -x "$V/bin/pip" ]; then
        rm -rf "$V"
        python3 -m venv "$V" || { echo "llamacpp_check: python3 -m venv failed (Debian: apt-get install -y python3-venv)" >&2; exit 1; }
    fi
    echo "llamacpp_check: installing llama-cpp-python $VERSION from PyPI into $V (compiles llama.cpp; several minutes)"
    CMAKE_ARGS="${LLAMACPP_CMAKE_ARGS:-}" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        "$V/bin/pip" install --quiet "llama-cpp-python==$VERSION"
fi

cat > "$W/greedy.py" <<'PY'
# Greedy decoding of a prompt with llama.cpp: prints the text of the first n tokens (fewer
# if an end-of-generation token comes first, where triforce stops too).
import sys
from llama_cpp import Llama

model_path, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
llm = Llama(model_path=model_path, n_ctx=512, n_gpu_layers=0, verbose=False)
out = []
for t in llm.generate(llm.tokenize(prompt.encode(), add_bos=True), temp=0.0, repeat_penalty=1.0):
    if t == llm.token_eos() or len(out) >= n:
        break
    out.append(t)
print(llm.detokenize(out).decode("utf-8", errors="replace"))
PY
fail=0
for f in "$W/conv-f32.gguf" "$W/conv-q8_0.gguf"; do
    a=$("$V/bin/python" "$W/greedy.py" "$f" "Once upon a time" 40 2> /dev/null)
    b=$("$B/triforce" generate -m "$f" -p "Once upon a time" --temp 0 -n 40 2> /dev/null | sed 's/^Once upon a time//')
    if [ "$a" = "$b" ]; then echo "same   $(basename "$f"): $a"; else echo "DIFFER $(basename "$f"):"; echo "  llama.cpp: $a"; echo "  triforce:  $b"; fail=1; fi
done
exit $fail

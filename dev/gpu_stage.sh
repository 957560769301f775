#!/usr/bin/env bash
# gpu_stage.sh — prepare a folder that lets dev/gpu_check.sh run on a GPU machine
# that has the CUDA toolkit and driver but none of the build's other packages
# (cJSON, PCRE2, utf8proc, libmicrohttpd, cmocka) and no copy of ../shared:
#
#   STAGE/bin.tar.xz   the CUDA build's CLI, test binaries and kernel labs,
#                      host debug info stripped (the device code keeps its line
#                      table), unpacked by gpu_check.sh PREBUILT=STAGE into build-cuda/;
#   STAGE/lib.tar.xz   the shared libraries those binaries need beyond glibc,
#                      libstdc++ and the CUDA libraries (unpacked into STAGE/lib/
#                      and put on LD_LIBRARY_PATH by gpu_check.sh);
#   STAGE/shared/      the files of ../shared the GPU tests and benchmarks read
#                      (TF_SHARED_DIR): stories260K and one novel.
#
#   make CUDA=1 -j && make CUDA=1 cuda-labs build-cuda/tests/test_cuda ... (done here)
#   bash dev/gpu_stage.sh [STAGE]       # default .gpu (keep it out of git)
#   LABS=0 bash dev/gpu_stage.sh STAGE  # without the kernel labs but the elementwise
#                                       # one (its copy bandwidth is every bound's), when
#                                       # the tree that reaches the GPU machine is limited
#                                       # (about 14 MB instead of 25)
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${1:-.gpu}
SHARED=${TF_SHARED_DIR:-../shared}
BINS="triforce tests/test_cuda tests/test_backend_ops tests/test_spec_dist dev/elementwise"
[ "${LABS:-1}" = 0 ] || BINS="$BINS dev/gemv dev/attn_decode dev/attn_prefill"
make CUDA=1 -j"$(nproc)" >/dev/null
make CUDA=1 -j"$(nproc)" cuda-labs $(for b in $BINS; do case $b in tests/*) echo build-cuda/$b;; esac; done) >/dev/null
rm -rf "$STAGE/bin" "$STAGE/lib" "$STAGE/shared" "$STAGE/bin.tar.xz" "$STAGE/lib.tar.xz"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/shared/models/stories260K" "$STAGE/shared/text"
for b in $BINS; do
    mkdir -p "$STAGE/bin/$(dirname "$b")"
    cp "build-cuda/$b" "$STAGE/bin/$b"
    strip -g "$STAGE/bin/$b"
done
tar cJf "$STAGE/bin.tar.xz" -C "$STAGE/bin" .
rm -rf "$STAGE/bin"
# libraries beyond the C and C++ runtimes and CUDA's: those the GPU machine may lack
for b in $BINS; do ldd "build-cuda/$b"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcu[A-Za-z]*)\.so' |
    while read -r l; do cp -L "$l" "$STAGE/lib/"; done
tar cJf "$STAGE/lib.tar.xz" -C "$STAGE" lib
rm -rf "$STAGE/lib"
cp "$SHARED/models/stories260K/stories260K.gguf" "$STAGE/shared/models/stories260K/"
cp "$SHARED/text/pride_and_prejudice.txt" "$STAGE/shared/text/"
du -sh "$STAGE"/*

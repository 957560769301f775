# triforce — plain Makefile. CPU-only by default; `make CUDA=1` adds the CUDA backend.
#
#   make            library (static + shared) and the `triforce` CLI
#   make test       build and run the test suite (offline)
#   make asan       the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench      benchmarks; results go to bench/results/ and are summarized in docs/

CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-psabi -fPIC \
           -Iinclude -Isrc -Itests/common
LDLIBS  += -lcjson -lpcre2-8 -lm -lpthread
BUILD   ?= build

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

# SIMD kernels: -O3 for full unrolling of fixed-trip loops, FMA contraction on
# (ISO C mode turns it off); they are tested against references with tolerances.
SIMD_OPT     := -O3 -ffp-contract=fast
AVX2_FLAGS   := $(SIMD_OPT) -mavx2 -mfma -mf16c
AVX512_FLAGS := $(SIMD_OPT) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c

HAVE_AVX512 := $(shell grep -q avx512f /proc/cpuinfo 2>/dev/null && echo yes || echo no)
HAVE_AVX2   := $(shell grep -q avx2 /proc/cpuinfo 2>/dev/null && echo yes || echo no)

.PHONY: all lib test asan bench clean info
all: info lib $(BUILD)/triforce

info:
	@echo "triforce build: CC=$(CC) CUDA=$(if $(CUDA),yes,no) host AVX2=$(HAVE_AVX2) AVX-512=$(HAVE_AVX512) (SIMD is dispatched at run time)"

lib: $(BUILD)/libtriforce.a $(BUILD)/libtriforce.so

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libtriforce.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libtriforce.so: $(LIB_OBJS)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/triforce: $(TOOL_OBJS) $(BUILD)/libtriforce.a
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJS) $(BUILD)/libtriforce.a $(LDLIBS)
	@ln -sf $(BUILD)/triforce triforce 2>/dev/null || true

$(BUILD)/tests/%: tests/%.c $(TESTLIB_OBJS) $(BUILD)/libtriforce.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(TESTLIB_OBJS) $(BUILD)/libtriforce.a -lcmocka $(LDLIBS)

test: $(TEST_BINS) $(BUILD)/triforce
	@BUILD=$(BUILD) sh tests/run.sh $(TEST_BINS)

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    LDLIBS="-fsanitize=address,undefined -lcjson -lpcre2-8 -lm -lpthread" test

$(BUILD)/tfbench: bench/tfbench.c $(BUILD)/libtriforce.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtriforce.a $(LDLIBS)

bench: all $(BUILD)/tfbench
	BUILD=$(BUILD) sh bench/run.sh

clean:
	rm -rf build build-asan triforce

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

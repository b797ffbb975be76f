# autofusion build. `make` builds the library, CLI and tests into build/; `make test` runs them;
# `make SAN=1` builds an ASan+UBSan variant into build-san/.
CC ?= cc
SAN ?= 0
ifeq ($(SAN),1)
  BUILD := build-san
  OPT := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
  BUILD := build
  OPT := -O2 -g
endif

ONNX_PROTO ?= /usr/include/onnx/onnx.proto
CFLAGS := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -Wno-format-truncation $(OPT) -Iinclude -Isrc -I$(BUILD)/gen
LDLIBS := -lprotobuf-c -lcjson -lm -lpthread
LDFLAGS := $(OPT)

GEN_C := $(BUILD)/gen/onnx.pb-c.c
LIB_SRC := $(shell find src -name '*.c' | sort)
RULES := $(sort $(wildcard rules/*.rules))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/onnx.pb-c.o $(BUILD)/gen/builtin_rules.o

CLI := $(BUILD)/autofusion
TESTS := $(BUILD)/test_unit $(BUILD)/test_conformance
UNIT_SRC := $(sort $(wildcard tests/unit/*.c))
DEPS := $(LIB_OBJ:.o=.d) $(BUILD)/cli/autofusion.d $(BUILD)/tests/conformance.d $(UNIT_SRC:%.c=$(BUILD)/%.d)

.PHONY: all test check check-san demo clean
all: $(CLI) $(TESTS)

# Generated from the schema Debian's libonnx-dev ships; never committed.
$(GEN_C): $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

# The built-in fusion rules, embedded as C arrays so the library needs no files at run time.
$(BUILD)/gen/builtin_rules.c: $(RULES) scripts/embed_rules.sh
	@mkdir -p $(BUILD)/gen
	sh scripts/embed_rules.sh $(RULES) > $@

$(BUILD)/gen/builtin_rules.o: $(BUILD)/gen/builtin_rules.c
	$(CC) -std=c11 $(OPT) -c $< -o $@

$(BUILD)/gen/onnx.pb-c.o: $(GEN_C)
	$(CC) -std=c11 $(OPT) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/%.o: %.c $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

LIB := $(BUILD)/libautofusion.a
$(LIB): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(CLI): $(BUILD)/cli/autofusion.o $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/test_unit: $(UNIT_SRC:%.c=$(BUILD)/%.o) $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/test_conformance: $(BUILD)/tests/conformance.o $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

test: all
	./tests/run_all.sh $(BUILD)

# The README's test command: every suite, plain build. check-san: the same under ASan+UBSan.
check: test
# Allocation failures are part of what the tests check, so ASan returns NULL instead of aborting.
check-san:
	ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 $(MAKE) SAN=1 test

# The main job on a built-in model (a committed fixture): inspect it, show how it fuses, run it.
DEMO_MODEL ?= tests/models/resnet_small/model.onnx
demo: $(CLI)
	$(CLI) inspect $(DEMO_MODEL)
	$(CLI) fuse $(DEMO_MODEL)
	$(CLI) run $(DEMO_MODEL)

# ---- Fuzzing and thread sanitizer (docs/security.md) ------------------------------------------
# The library is rebuilt with clang into its own folder by re-running make with BUILD, CC and OPT
# overridden, so the rules above serve every variant.
FUZZ_BUILD := build-fuzz
FUZZ_OPT := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
            -fno-omit-frame-pointer -Wno-unknown-warning-option
FUZZERS := $(FUZZ_BUILD)/fuzz_load $(FUZZ_BUILD)/fuzz_pipeline
FUZZ_TIME ?= 60
# A fusion config for fuzz_pipeline's sessions (AF_FUZZ_CONFIG), and through it rules files:
# FUZZ_CONFIG=tests/fuzz/hostile.json puts any op in any family. Empty: the defaults.
FUZZ_CONFIG ?=
FUZZ_SEEDS := $(FUZZ_BUILD)/seeds

.PHONY: fuzz fuzz-lib fuzz-smoke check-tsan
fuzz-lib:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang OPT='$(FUZZ_OPT)' $(FUZZ_BUILD)/libautofusion.a

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h fuzz-lib
	clang -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror $(FUZZ_OPT) -fsanitize=fuzzer -Iinclude \
	    $< $(FUZZ_BUILD)/libautofusion.a $(LDLIBS) -o $@

fuzz: $(FUZZERS)

# Seeds: the robustness corpus (the pathological graphs included), the model fixtures (under
# unique names) and tests/fuzz/seeds (small models of each fused-step builder's shapes, and inputs
# that once crashed; tests/fuzz/make_seeds.py). New inputs the
# fuzzers find go to $(FUZZ_BUILD)/corpus_*; crashes to $(FUZZ_BUILD)/crash-*.
$(FUZZ_SEEDS): $(wildcard tests/robustness/*.onnx) $(wildcard tests/models/*/model.onnx) \
                $(wildcard tests/fuzz/seeds/*.onnx)
	rm -rf $@ && mkdir -p $@
	cp tests/robustness/*.onnx tests/fuzz/seeds/*.onnx $@/
	for m in tests/models/*/model.onnx; do cp $$m $@/fixture_$$(basename $$(dirname $$m)).onnx; done

# Bounded run for CI: FUZZ_TIME seconds per harness (default 60).
fuzz-smoke: fuzz $(FUZZ_SEEDS)
	@for f in load pipeline; do \
	    mkdir -p $(FUZZ_BUILD)/corpus_$$f; \
	    echo "== fuzz_$$f for $(FUZZ_TIME)s"; \
	    XDG_CACHE_HOME=$(CURDIR)/$(FUZZ_BUILD)/cache AF_FUZZ_BASE_DIR=tests/robustness AF_FUZZ_CONFIG=$(FUZZ_CONFIG) ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
	    $(FUZZ_BUILD)/fuzz_$$f -max_total_time=$(FUZZ_TIME) -timeout=20 -rss_limit_mb=2048 -max_len=4194304 \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/ \
	        $(FUZZ_BUILD)/corpus_$$f $(FUZZ_SEEDS) >$(FUZZ_BUILD)/fuzz_$$f.log 2>&1; rc=$$?; \
	    grep -E '^#[0-9]+ +(INITED|DONE)|^stat::number_of_executed_units|^stat::peak_rss' $(FUZZ_BUILD)/fuzz_$$f.log; \
	    if [ $$rc -ne 0 ]; then tail -n 60 $(FUZZ_BUILD)/fuzz_$$f.log; exit 1; fi; \
	done

# The concurrency tests (thread pool, sessions in parallel, one session from several threads, plan
# swaps under runs in flight, the conv kernels' bands on the pool) under ThreadSanitizer. Like
# tests/run_all.sh, they keep the measured hardware figures in a cache of their own, never the
# user's.
TSAN_BUILD := build-tsan
TSAN_ENV := XDG_CACHE_HOME=$(CURDIR)/$(TSAN_BUILD)/cache TSAN_OPTIONS=halt_on_error=1
check-tsan:
	$(MAKE) BUILD=$(TSAN_BUILD) CC=clang OPT='-O1 -g -fsanitize=thread -Wno-unknown-warning-option' \
	    $(TSAN_BUILD)/test_unit
	$(TSAN_ENV):second_deadlock_stack=1 $(TSAN_BUILD)/test_unit threads
	$(TSAN_ENV) $(TSAN_BUILD)/test_unit gemm_thread
	$(TSAN_ENV) $(TSAN_BUILD)/test_unit fast_conv
	$(TSAN_ENV) $(TSAN_BUILD)/test_unit pointwise_depthwise

clean:
	rm -rf build build-san $(FUZZ_BUILD) $(TSAN_BUILD)

-include $(DEPS)

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

clean:
	rm -rf build build-san

-include $(DEPS)

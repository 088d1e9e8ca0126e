# Poseidon testbed. `make` builds build/poseidon (CPU-only unless nvcc is found);
# `make demo` runs the main job; `make test` runs every test. See README.md.

BUILD   ?= build
CC      ?= cc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA    ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
COMMIT  := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

OPT      ?= -O2
CPPFLAGS += -I. -Icore -D_GNU_SOURCE -DPOSEIDON_HAVE_CUDA=$(CUDA)
SAN      ?=
BASE_CFLAGS := -std=c11 $(OPT) -g -Wall -Wextra -Werror -pthread -MMD -MP $(SAN)
LDLIBS   += -lgsl -lopenblas -lzmq -lz -lm -ldl -pthread

CORE_SRC    := $(wildcard core/*.c)
SIM_SRC     := $(wildcard sim/*.c)
RUNTIME_SRC := $(wildcard runtime/*.c)
CLI_SRC     := $(filter-out cli/main.c,$(wildcard cli/*.c))
TEST_SRC    := $(wildcard tests/*.c)
CU_SRC      := $(if $(filter 1,$(CUDA)),$(wildcard runtime/*.cu))

LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(CORE_SRC) $(SIM_SRC) $(RUNTIME_SRC) $(CLI_SRC))
CU_OBJ   := $(patsubst %.cu,$(BUILD)/%.cu.o,$(CU_SRC))
# The CUDA backend links apart, loaded by runtime/compute.c only when a GPU is asked for.
CU_LIB   := $(if $(CU_SRC),$(BUILD)/libposeidon_cuda.so)
TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))

.PHONY: all deps test demo asan bench clean FORCE
all: $(BUILD)/poseidon $(BUILD)/test_unit $(CU_LIB)

$(BUILD)/libposeidon_cuda.so: $(CU_OBJ)
	$(CC) -shared -o $@ $^ -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++

$(BUILD)/poseidon: $(BUILD)/cli/main.o $(BUILD)/libposeidon.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/test_unit: $(TEST_OBJ) $(BUILD)/libposeidon.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libposeidon.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BASE_CFLAGS) $(CFLAGS) -c -o $@ $<

# Only log.o carries the commit, and it is rebuilt only when the commit changes.
$(BUILD)/commit.txt: FORCE
	@mkdir -p $(BUILD)
	@echo '$(COMMIT)' | cmp -s - $@ || echo '$(COMMIT)' > $@
$(BUILD)/core/log.o: CPPFLAGS += -DPOSEIDON_COMMIT='"$(COMMIT)"'
$(BUILD)/core/log.o: $(BUILD)/commit.txt

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -I. -Icore -DPOSEIDON_HAVE_CUDA=1 -Xcompiler -fPIC -c -o $@ $<

deps:
	@scripts/deps.sh --install

test: deps
	@$(MAKE) --no-print-directory all
	@tests/run.sh $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory all
	@scripts/bench.sh $(BUILD)

# AddressSanitizer + UBSan build of everything, then the same tests.
asan: deps
	@$(MAKE) --no-print-directory BUILD=build/asan CUDA=0 OPT=-O1 \
	    SAN='-fsanitize=address,undefined -fno-omit-frame-pointer' all
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 tests/run.sh build/asan

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

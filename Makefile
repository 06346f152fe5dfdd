# The front door. Each target does everything from a fresh clone: installs missing Debian
# packages, configures, builds, runs.
#   make demo            build and run tern on the fixture models
#   make test            build and pass the whole suite (release, then ASan+UBSan with fuzzers,
#                        then the aarch64 build under emulation)
#   make test-sanitize   only the ASan+UBSan suite and the short fuzz runs
#   make microbench      build and run the micro-benchmarks (microbench/)
#   make results         run `tern bench suite` and write docs/RESULTS.md and its plots
#                        (LLAMA_CPP=<llama.cpp build/bin> adds llama.cpp's figures)
#   make fuzz            run each fuzzer for longer (FUZZ_SECONDS, default 300)
#   make build-arm64     cross-build tern for aarch64 (build-arm64/tern)
#   make test-arm64      run it and its kernel tests under qemu-aarch64-static on three emulated
#                        CPUs (one per ARM level), against the x86-64 build's outputs
#   make format          format every C++ file to .clang-format
#   make format-check    fail when a C++ file is off .clang-format (CI runs it)

BUILD ?= build
SAN_BUILD ?= build-sanitize
ARM64_BUILD ?= build-arm64
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 15
export TERN_FIXTURES ?= $(abspath ../shared/fixtures)
# ctest runs test processes side by side on few cores: OpenMP threads that spin while they
# wait would steal the cores their neighbours need (timing, never results, depends on it).
TEST_ENV = OMP_WAIT_POLICY=passive

.PHONY: all deps build build-demo build-sanitize demo test test-release test-sanitize microbench results fuzz \
        deps-arm64 build-arm64 test-arm64 format format-check clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

$(SAN_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTERN_SANITIZE=ON -DTERN_FUZZ=ON -DTERN_BENCH=OFF

build-sanitize: deps $(SAN_BUILD)/build.ninja
	cmake --build $(SAN_BUILD) -j $(JOBS)

# The demo needs only the tern binary, not the test suite and the benchmarks.
build-demo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target tern

demo: build-demo
	scripts/demo.sh $(BUILD)/tern

# On x86-64 the suite includes the aarch64 build under emulation; on an ARM machine the suite
# itself is the ARM run.
ifeq ($(shell uname -m),x86_64)
TEST_ARM64 = test-arm64
endif

test: test-release test-sanitize $(TEST_ARM64)

test-release: build
	cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j $(JOBS)
	scripts/test-vulkan-validation.sh $(BUILD)

test-sanitize: build-sanitize
	cd $(SAN_BUILD) && $(TEST_ENV) ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=suppressions=$(abspath tests/lsan-suppressions.txt):print_suppressions=0 \
	  ctest --output-on-failure -j $(JOBS)
	scripts/run-fuzzers.sh $(SAN_BUILD) $(FUZZ_SMOKE_SECONDS) $(JOBS)

microbench: build
	scripts/run-benchmarks.sh $(BUILD)

results: build-demo
	scripts/results.sh $(BUILD)

fuzz: build-sanitize
	scripts/run-fuzzers.sh $(SAN_BUILD) $(FUZZ_SECONDS) $(JOBS)

deps-arm64:
	@scripts/install-arm64-deps.sh

$(ARM64_BUILD)/build.ninja:
	cmake -S . -B $(ARM64_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DTERN_TESTS=OFF -DTERN_BENCH=OFF \
	  -DTERN_KERNEL_TESTS=ON

build-arm64: deps deps-arm64 $(ARM64_BUILD)/build.ninja
	cmake --build $(ARM64_BUILD) -j $(JOBS) --target tern

test-arm64: build-arm64 build-demo
	cmake --build $(ARM64_BUILD) -j $(JOBS) --target tern_kernel_tests
	scripts/test-arm64.sh $(ARM64_BUILD) $(BUILD)/tern

CXX_FILES = $$(git ls-files '*.cpp' '*.h')

format: deps
	clang-format -i $(CXX_FILES)

format-check: deps
	clang-format --dry-run -Werror $(CXX_FILES)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(ARM64_BUILD)

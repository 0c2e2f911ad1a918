# Rampart: `make run` and `make test` are all a new machine needs (Debian 12, root or sudo).
BUILD_DIR ?= build
BUILD_TYPE ?= Release
ASAN_DIR ?= build-asan
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
RUN_ARGS ?= --config examples/rampart.yaml

.PHONY: all deps configure build build-serve run test check format format-check tidy asan fuzz bench \
	clean

all: build

deps:
	@tools/install_deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Only what serving needs: the server and the example models (no tests, no benchmarks).
build-serve: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target rampart example_models

# Starts the server on the bundled example models: KServe v2 HTTP on port 8000.
# The keyring's master key (examples/rampart.yaml's keyring:) is made on first run.
run: build-serve
	@mkdir -p data && test -s data/master.key || (umask 077; head -c 32 /dev/urandom > data/master.key)
	$(BUILD_DIR)/rampart serve $(RUN_ARGS)

# The unit and end-to-end tests, then every fuzz target for FUZZ_SECONDS (FUZZ_SECONDS=0 skips).
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	$(if $(filter 0,$(FUZZ_SECONDS)),,$(MAKE) --no-print-directory fuzz)

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

format-check:
	git ls-files '*.h' '*.cc' | xargs clang-format --dry-run --Werror

tidy: configure
	git ls-files 'src/*.cc' | xargs clang-tidy -p $(BUILD_DIR) --quiet

# What to run before every commit: formatting, a warnings-as-errors build, all tests.
check: format-check test

asan: deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRAMPART_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) -E '^e2e_'

# libFuzzer targets (fuzz/, docs/fuzzing.md) in their own clang build: each runs FUZZ_SECONDS,
# JOBS at a time; fails on any crash, leak, timeout or out-of-memory, naming the reproducer.
fuzz: deps
	cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER=clang++ \
		-DRAMPART_FUZZ=ON -DRAMPART_WERROR=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_DIR) -j $(JOBS)
	fuzz/run_fuzzers.sh --build-dir $(FUZZ_DIR) --seconds $(FUZZ_SECONDS) --jobs $(JOBS)

bench: build
	bench/http_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models
	bench/batching_bench.sh --binary $(BUILD_DIR)/rampart --offline $(BUILD_DIR)/bench/torch_offline --stall-probe $(BUILD_DIR)/bench/stall_probe --repository examples/models
	bench/batching_bench.sh --binary $(BUILD_DIR)/rampart --offline $(BUILD_DIR)/bench/torch_offline --stall-probe $(BUILD_DIR)/bench/stall_probe --repository examples/models --threads 1 $(if $(filter 1,$(shell nproc)),,--split-cpus)
	bench/efficiency_bench.sh --binary $(BUILD_DIR)/rampart --offline $(BUILD_DIR)/bench/torch_offline --repository examples/models
	bench/grpc_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models
	bench/grpc_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models --models simple --grpc-engine core
	bench/gateway_bench.sh --binary $(BUILD_DIR)/rampart --probe $(BUILD_DIR)/bench/first_event_probe
	$(BUILD_DIR)/bench/codec_bench --benchmark_min_time=0.5
	bench/pinecone_http_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models --probe $(BUILD_DIR)/bench/index_query_probe
	$(BUILD_DIR)/bench/guard_bench
	$(BUILD_DIR)/bench/vector_bench
	$(BUILD_DIR)/bench/vector_durability_bench
	bench/metrics_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models
	bench/access_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models
	bench/audit_infer_bench.sh --binary $(BUILD_DIR)/rampart --repository examples/models
	bench/audit_cpu_bench.py --binary this=$(BUILD_DIR)/rampart --repository examples/models
	bench/audit_store_floor.py --dir $(BUILD_DIR)
	bench/crypto_bench.sh --binary $(BUILD_DIR)/bench/crypto_bench
	$(BUILD_DIR)/bench/audit_bench
	$(BUILD_DIR)/bench/guard_stage_bench
	$(BUILD_DIR)/bench/http_client_bench
	$(BUILD_DIR)/bench/auth_bench
	$(BUILD_DIR)/bench/policy_bench
	$(BUILD_DIR)/bench/quota_bench
	$(BUILD_DIR)/bench/store_bench
	$(BUILD_DIR)/bench/hub_text_bench
	$(BUILD_DIR)/bench/kb_service_bench
	$(BUILD_DIR)/bench/knowledge_answer_bench
	bench/kb_eval.py --binary $(BUILD_DIR)/rampart --repository examples/models
	bench/kb_search_bench.py --binary $(BUILD_DIR)/rampart --repository examples/models

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)

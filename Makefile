# Perseus: the two commands of README.md, and a few helpers.
#   make run   - install missing Debian packages, build, plan GPT-3 175B on the bundled A100 profile
#   make test  - install missing Debian packages, build, run every test (C++ and Python)
BUILD ?= build
JOBS ?= $(shell nproc)
OUT ?= out/gpt3-175b-a100

.PHONY: run test build build-cli deps bench asan clean golden-update soak

deps:
	@scripts/install-deps.sh all

# Everything: library, CLI, runtime, Python module, tests, benchmarks.
build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERSEUS_BUILD_TESTS=ON \
	  -DPERSEUS_BUILD_PYTHON=ON -DPERSEUS_BUILD_BENCH=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# Only what `make run` runs: the perseus command and its Debian packages.
build-cli:
	@scripts/install-deps.sh run
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERSEUS_BUILD_TESTS=OFF \
	  -DPERSEUS_BUILD_PYTHON=OFF -DPERSEUS_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target perseus

run: build-cli
	$(BUILD)/cli/perseus optimize --profile examples/stage_profile_gpt3-175b_a100_sxm.csv \
	  --stages 8 --microbatches 12 --p2p-power 83.64 --format zeus --report --out $(OUT)
	@echo "open $(OUT)/report.html in a browser"


test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs this too).
asan: deps
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DPERSEUS_SANITIZE=ON \
	  -DPERSEUS_BUILD_PYTHON=OFF -DPERSEUS_BUILD_BENCH=OFF -DPERSEUS_BUILD_RUNTIME=OFF >/dev/null
	@cmake --build $(BUILD)-asan -j$(JOBS) --target perseus_unit_tests perseus
	cd $(BUILD)-asan && LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  ctest --output-on-failure -L unit -j$(JOBS)

# Rewrite the data-driven golden expectations (tests/golden/cases/*) after an intended change;
# review `git diff tests/golden/cases` before committing.
golden-update: build
	scripts/golden_cases.py $(BUILD)/cli/perseus update

# The whole suite 5 times in a row while both CPUs are busy (issue 13: no flaky tests).
soak: build
	scripts/soak-tests.sh $(BUILD)

bench: build
	bench/run_benchmarks.sh

clean:
	rm -rf $(BUILD) $(BUILD)-asan out

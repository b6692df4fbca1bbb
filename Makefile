# The README's two commands. Each installs what is missing, builds in Release, then runs.
#   make run    build the binary alone, train configs/shakespeare_char.toml, evaluate it,
#               sample from it, and write its inspect report (runs/shakespeare_char/report.html)
#   make test   build everything, then the suite but its slow tests (ctest -LE slow)
# CI runs `make check`: the suite, its slow tests, then the sanitizers' (below).

BUILD := build
RUN := runs/shakespeare_char
JOBS ?= $(shell nproc)

.PHONY: run test test-slow build binary deps deps-run configure clean sanitize sanitize-build \
  fuzz check

deps:
	@./scripts/install-deps.sh

deps-run:
	@./scripts/install-deps.sh run

configure:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null

# Only what `make run` runs: the tinylm binary, not the test suite.
binary: deps-run
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD) -j $(JOBS) --target tinylm

build: deps
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD) -j $(JOBS)

# A finished run is resumed, which trains nothing: `make run` twice does not train twice.
run: binary
	@if [ -f $(RUN)/state.json ]; then resume=--resume; fi; \
	  ./$(BUILD)/tinylm train configs/shakespeare_char.toml --out $(RUN) $$resume
	./$(BUILD)/tinylm eval $(RUN)
	./$(BUILD)/tinylm sample $(RUN)
	./$(BUILD)/tinylm inspect $(RUN) --html $(RUN)/report.html --json $(RUN)/report.json

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

# The minutes-long tests the README's command leaves to CI (labelled slow).
test-slow: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L slow
	@if grep -q "cannot make two network namespaces" $(BUILD)/Testing/Temporary/LastTest.log; then \
	  echo "two_hosts_torchrun: SKIPPED, it did not run (no network namespaces: needs root)"; \
	else echo "two_hosts_torchrun: ran"; fi

# ASan + UBSan (clang) over the quick suite and every fuzz target's bounded budget, in
# build-sanitize/ (docs/DESIGN.md, "Sanitizers and fuzzing").
SANITIZE_BUILD := build-sanitize
sanitize-build: deps
	@CXX=clang++ cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTINYLM_SANITIZE=ON -DCMAKE_CXX_FLAGS=-gline-tables-only > /dev/null
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS)

# Any report fails its test: ASan's (leaks included), UBSan's (halt_on_error).
# LibTorch's one leak: tests/sanitizers/lsan.supp.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp
# The quick suite; the tests it leaves out under the sanitizers: tests/CMakeLists.txt.
sanitize: sanitize-build
	cd $(SANITIZE_BUILD) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) -L quick

# Each fuzz target for FUZZ_SECONDS (default 300), its corpus growing in build-sanitize/fuzz/.
FUZZ_SECONDS ?= 300
fuzz: sanitize-build
	@$(SANITIZER_ENV) ./tests/fuzz/run-fuzzers.sh $(SANITIZE_BUILD) $(FUZZ_SECONDS)

# What CI runs: the suite, its slow tests, then the sanitizers'.
check: test test-slow sanitize

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD)

# The README's two commands. Each installs what is missing, builds in Release, then runs.
#   make run    train configs/shakespeare_char.toml, evaluate it, sample from it, and write
#               its inspect report (runs/shakespeare_char/report.html)
#   make test   the test suite (ctest)

BUILD := build
RUN := runs/shakespeare_char
JOBS ?= $(shell nproc)

.PHONY: run test build deps clean sanitize sanitize-build fuzz check

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# A finished run is resumed, which trains nothing: `make run` twice does not train twice.
run: build
	@if [ -f $(RUN)/state.json ]; then resume=--resume; fi; \
	  ./$(BUILD)/tinylm train configs/shakespeare_char.toml --out $(RUN) $$resume
	./$(BUILD)/tinylm eval $(RUN)
	./$(BUILD)/tinylm sample $(RUN)
	./$(BUILD)/tinylm inspect $(RUN) --html $(RUN)/report.html --json $(RUN)/report.json

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# ASan + UBSan (clang) over the quick suite and every fuzz target's bounded budget, in
# build-sanitize/. The sanitizers' settings and suppressions: tests/sanitizers/.
SANITIZE_BUILD := build-sanitize
sanitize-build: deps
	@CXX=clang++ cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTINYLM_SANITIZE=ON -DCMAKE_CXX_FLAGS=-gline-tables-only > /dev/null
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS)

sanitize: sanitize-build
	cd $(SANITIZE_BUILD) && ctest --output-on-failure -j $(JOBS) -L quick -LE no_sanitize

# Each fuzz target for FUZZ_SECONDS (default 300), its corpus growing in build-sanitize/fuzz/.
FUZZ_SECONDS ?= 300
fuzz: sanitize-build
	@./tests/fuzz/run-fuzzers.sh $(SANITIZE_BUILD) $(FUZZ_SECONDS)

# What CI runs: the default suite, then the sanitizers'.
check: test sanitize

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD)

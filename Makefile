# The README's two commands. Each installs what is missing, builds in Release, then runs.
#   make run    train configs/shakespeare_char.toml, evaluate it, sample from it, and write
#               its inspect report (runs/shakespeare_char/report.html)
#   make test   the test suite (ctest)

BUILD := build
RUN := runs/shakespeare_char
JOBS ?= $(shell nproc)

.PHONY: run test build deps clean

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

clean:
	rm -rf $(BUILD)

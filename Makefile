# Placeholder header until the lead's Makefile lands on main (the lead owns everything outside the
# "--- images ---" section; keep theirs when merging).
SHELL := /bin/bash
PYTHON ?= $(if $(wildcard /work/venv/bin/python),/work/venv/bin/python,python3)
ENVCHECK ?= $(if $(ENVCHECK_IMAGE),envcheck,PYTHONPATH=$(CURDIR) $(PYTHON) -m envcheck)

.PHONY: help verify
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

verify: ## run the checks here (inside an image: ENVCHECK_IMAGE=1, no GPU is an error unless ALLOW_CPU=1)
	$(ENVCHECK) run $(if $(ALLOW_CPU),--allow-cpu) $(if $(LEVEL),--level $(LEVEL))

# --- images ----------------------------------------------------------------------------------------
# Build, verify and push the versioned PyTorch+CUDA images of docker/matrix.toml. Variables:
#   ROW (matrix row id), TARGET (runtime|devel|...), REPO (image name), BASE_IMAGE (override the row's
#   apt-based base), OFFLINE=1 (install only from .wheelhouse/), CA_BUNDLE (extra CA for a TLS proxy,
#   passed as a BuildKit secret), DOCKER (a client whose `docker build` has BuildKit built in).
ROW ?= 2.11-cu130
TARGET ?= runtime
REPO ?= envcheck
BASE_IMAGE ?=
OFFLINE ?=
CA_BUNDLE ?= $(wildcard /etc/ssl/certs/ca-certificates.crt)
DOCKER ?= $(if $(wildcard /usr/bin/docker),/usr/bin/docker,docker)
IMAGE ?= $(REPO):$(shell $(ENVCHECK) matrix github --row $(ROW) --target $(TARGET) 2>/dev/null \
	| $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["include"][0]["tags"].split(",")[0])' 2>/dev/null)
BUILD_FLAGS = --repo $(REPO) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(OFFLINE),--offline) \
	$(if $(CA_BUNDLE),--ca-bundle $(CA_BUNDLE))
IMAGES_ENV = ENVCHECK_DOCKER=$(DOCKER) DOCKER_BUILDKIT=1

.PHONY: image images verify-image verify-images push base-image wheelhouse hadolint
image: ## build one image: make image ROW=2.11-cu130 TARGET=runtime [BASE_IMAGE=local/debian:bookworm] [OFFLINE=1]
	$(IMAGES_ENV) $(ENVCHECK) image build --row $(ROW) --target $(TARGET) $(BUILD_FLAGS)

images: ## build every row and target of docker/matrix.toml
	$(IMAGES_ENV) $(ENVCHECK) image build --all $(BUILD_FLAGS)

verify-image: ## run envcheck inside IMAGE through the Docker SDK (ALLOW_CPU=1 without a GPU)
	$(ENVCHECK) image verify $(IMAGE) $(if $(ALLOW_CPU),--allow-cpu) $(if $(JSON),--json $(JSON)) \
		$(if $(JUNIT),--junit $(JUNIT))

verify-images: ## run envcheck inside every built matrix image (ALLOW_CPU=1 without a GPU)
	$(ENVCHECK) matrix verify --repo $(REPO) $(if $(ALLOW_CPU),--allow-cpu)

push: ## tag ROW/TARGET for REGISTRY and push every tag: make push REGISTRY=ghcr.io/org/envcheck
	@test -n "$(REGISTRY)" || { echo "make push needs REGISTRY=host/org/name" >&2; exit 2; }
	$(IMAGES_ENV) $(ENVCHECK) image push --row $(ROW) --target $(TARGET) --repo $(REPO) --registry $(REGISTRY)

base-image: ## debootstrap local/debian:bookworm (for machines that cannot pull images)
	DOCKER=$(DOCKER) docker/ci/make-base-image.sh

wheelhouse: ## pip download ROW's wheels (runtime + devel) into .wheelhouse/ for OFFLINE=1 builds
	$(ENVCHECK) image wheelhouse --row $(ROW)

hadolint: ## lint docker/Dockerfile with the committed .hadolint.yaml
	hadolint --config .hadolint.yaml docker/Dockerfile
# --- end images ------------------------------------------------------------------------------------

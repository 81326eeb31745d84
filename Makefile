# The front door: `make run`, `make test`, `make lint`, `make bench`.
# Every target installs what it needs into .venv first (pinned in requirements-dev.txt).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test lint typecheck unit par-sheets run bench clean

setup: $(STAMP)

$(STAMP): requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

lint: setup
	$(BIN)/ruff check shared services tests bench

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest

test: lint typecheck unit

par-sheets: setup
	@for r in $$($(BIN)/casino rulesets); do $(BIN)/casino par-sheet $$r; echo; done

run: setup
	$(BIN)/casino run $(ARGS)

bench: setup
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis

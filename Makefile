# The front door: `make run`, `make test`, `make lint`, `make bench`.
# Every target installs what it needs into .venv first (pinned in requirements-dev.txt).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup tools image-tools test lint typecheck unit par-sheets run bench soak clean asyncapi image image-test engine-stop

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

# Three workers on the two cores (a test waits on its servers much of its
# time), each taking another's tests once out of its own; tests/image runs
# with `make image-test`, which makes the image first.
unit: setup
	$(BIN)/pytest --ignore=tests/image -n 3 --dist worksteal

# Debian's packages the tests use: Prometheus and its promtool (the alert
# rules' unit tests, and `make run ARGS=--observe`), Alertmanager (an alert
# carried to a receiver), strace (counting the server's syncs to disk) and
# chromium (the web pages driven by Playwright in a real browser).
DEBIAN_TOOLS := prometheus:prometheus promtool:prometheus prometheus-alertmanager:prometheus-alertmanager strace:strace \
	chromium:chromium

# What `make image` needs: Debian's container engine and debootstrap.
IMAGE_TOOLS := dockerd:docker.io docker:docker.io debootstrap:debootstrap

define install_debian
	@for pair in $(1); do tool=$${pair%%:*}; package=$${pair#*:}; \
	  command -v $$tool >/dev/null 2>&1 && continue; \
	  echo "installing $$tool (Debian's $$package package)"; \
	  apt-get install -y -q --no-install-recommends $$package >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends $$package >/dev/null 2>&1; } || true; \
	  command -v $$tool >/dev/null 2>&1 || { echo "$$tool is missing and could not be installed: apt-get install $$package" >&2; exit 1; }; \
	done
endef

tools:
	$(call install_debian,$(DEBIAN_TOOLS))

image-tools:
	$(call install_debian,$(IMAGE_TOOLS))

test: lint typecheck tools unit

par-sheets: setup
	@for r in $$($(BIN)/casino rulesets); do $(BIN)/casino par-sheet $$r; echo; done

# Each service's AsyncAPI document, from its faststream application
# (tests/ops/test_asyncapi.py fails when one is stale).
ASYNCAPI_SERVICES := shoe wager dealer_policy settlement projections archiver
asyncapi: setup
	@for s in $(ASYNCAPI_SERVICES); do CASINO_INSTANCE=instance CASINO_NATS_URL=nats://nats:4222 \
	  $(BIN)/faststream docs gen services.$$s.app:app --factory --yaml --out docs/asyncapi/$$(echo $$s | tr _ -).yaml \
	  >/dev/null || exit 1; done

# `make run ARGS=--observe` also runs a Prometheus: Debian's, installed by `make tools`.
run: setup $(if $(findstring --observe,$(ARGS)),tools)
	$(BIN)/casino run $(ARGS)

# The long fault tests (25 kill -9s of each service over 100 coups per table,
# the cluster faults over 100 coups per table, two instances of every service
# with terminals racing over 100 coups per table and 10 kills of each, card-reading
# tables with faults at 1 card in 10 over 100 coups and 10 kills each of the shoe
# and the dealer-policy), the
# property tests with thirty times their random examples, then 16 tables flat
# out for a minute.
soak: setup
	CASINO_SOAK_READING_COUPS=$${CASINO_SOAK_READING_COUPS:-100} CASINO_SOAK_READING_KILLS=$${CASINO_SOAK_READING_KILLS:-10} \
	CASINO_SOAK_RACING_COUPS=$${CASINO_SOAK_RACING_COUPS:-100} CASINO_SOAK_RACING_KILLS=$${CASINO_SOAK_RACING_KILLS:-10} \
	CASINO_SOAK_KILLS=$${CASINO_SOAK_KILLS:-25} CASINO_SOAK_COUPS=$${CASINO_SOAK_COUPS:-100} \
	  CASINO_SOAK_EXAMPLES=$${CASINO_SOAK_EXAMPLES:-30} $(BIN)/pytest -s tests/faults tests/rules/test_properties.py tests/archive/test_archiver.py -k "kill or properties or not archive"
	$(BIN)/python -m bench.load --tables 16 --seconds 60

# The services' image, built on the project's own container engine (never the
# machine's default socket) from a base made locally: deploy/image/build.sh.
IMAGE := coup-engine:0.1.0
image: setup image-tools
	deploy/image/engine.sh start
	deploy/image/build.sh $(BIN)/python $(IMAGE)

# Every service run from the image as the k8s manifests run it, against a NATS
# container that testcontainers starts, dealing a bounded run that verifies;
# and the event store's contract tests with the tests' NATS a container too.
image-test: image
	CASINO_IMAGE=$(IMAGE) CASINO_NATS_IMAGE=$$(cat var/image/nats-image) CASINO_TEST_NATS=container \
	  DOCKER_HOST=$$(deploy/image/engine.sh host) \
	  $(BIN)/pytest tests/image tests/store

engine-stop:
	deploy/image/engine.sh stop

bench: setup
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis

# The two commands of the README: `make run` and `make test`.
# `make run` serves on HOST:PORT: `make run PORT=8001` (or PORT=8001 in the
# environment) for another port.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum requirements.txt | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run api-key test test-citus lint docs install dist bench bench-quick

install: $(STAMP)

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

# Development only: DEBUG, the demo receiver, loopback endpoints, and an
# encryption key for signing secrets made once and kept in DEV_KEY_FILE.
DEV_KEY_FILE := .dev-encryption-key
RUN_ENV = DEBUG=true RELAY_DEMO=true RELAY_ALLOW_PRIVATE_DESTINATIONS=true \
	RELAY_BASE_URL=http://$(HOST):$(PORT) RELAY_ENCRYPTION_KEYS=$$(cat $(DEV_KEY_FILE))

$(DEV_KEY_FILE): | install
	$(BIN)/python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())" > $@

# Web and one dispatcher together on SQLite; Ctrl-C stops both. devrun
# migrates and seeds the demo first, and prints the banner (also kept in
# .dev-banner.txt) once the server answers.
run: install $(DEV_KEY_FILE)
	$(RUN_ENV) $(BIN)/python -m relayproject.devrun $(HOST) $(PORT)

# An API key for the `make run` relay, made with the environment `make run`
# uses (DEBUG, its database, its encryption key): `make -s api-key NAME=billing`
# prints it on its last line; MERCHANT=slug scopes it to one merchant.
api-key: install $(DEV_KEY_FILE)
	@test -n "$(NAME)" || { echo "usage: make api-key NAME=<name> [MERCHANT=<slug>]" >&2; exit 2; }
	@$(RUN_ENV) $(BIN)/python manage.py create_api_key --name "$(NAME)" $(if $(MERCHANT),--merchant "$(MERCHANT)")

# Time bombs: the tests that name a fixed date (and the folders whose
# conftest does) run again with the clock 400 days ahead, so a test that seeds
# a fixed date and then reads the real clock fails now, not on that day.
CLOCK_SHIFT_DAYS := 400
FIXED_DATE_TESTS = grep -rlE 'datetime[(]20[0-9]{2},' tests --include='*.py' \
	| sed -n -e 's,/conftest[.]py$$,/,p' -e '/\/test_[^/]*[.]py$$/p' | sort -u

# The whole suite. With TEST_DATABASE_URL (as .ci/run sets) it runs on
# PostgreSQL, then the tests marked both_backends run again on SQLite; the
# first pass ends with the fixed-date tests on a clock moved ahead (not the
# whole suite: heartbeats are judged on the database's clock, which no
# process setting moves).
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	@echo "--- clock $(CLOCK_SHIFT_DAYS) days ahead (tests that name a fixed date)"
	RELAY_TEST_CLOCK_SHIFT_DAYS=$(CLOCK_SHIFT_DAYS) $(BIN)/python -m pytest -q $$($(FIXED_DATE_TESTS))
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		echo "--- SQLite pass (tests marked both_backends)"; \
		env -u TEST_DATABASE_URL RELAY_SQLITE_PASS=1 $(BIN)/python -m pytest -m both_backends $(PYTEST_ARGS); \
	fi

# The Citus tier (tests/citus) on a Citus coordinator, e.g.
#   CITUS_TEST_URL=postgres://postgres@127.0.0.1:9700/relay make test-citus
# It makes a database of its own on every node and drops it after; `make
# test` leaves the tier out (one line says so).
test-citus: install
	@test -n "$$CITUS_TEST_URL" || { echo "set CITUS_TEST_URL to a Citus coordinator's URL"; exit 2; }
	TEST_DATABASE_URL=$$CITUS_TEST_URL $(BIN)/python -m pytest -m citus tests/citus $(PYTEST_ARGS)

# The package: webhook_relay-<version>.tar.gz and its wheel in dist/, built
# from the sdist as pip would (pyproject.toml; the build fetches hatchling).
dist: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The published benchmark (bench/headline.py): the headline scenarios with
# their ceilings, on the committed HEAD, written to bench/report/ (report.md,
# SVG plots, results.json). It waits for a quiet machine first (1-minute load
# under 1) and says in the report if it gave up waiting. Never in `make test`.
bench: install
	$(BIN)/python -m bench.headline

# The same at smoke sizes (a few minutes), to see that it works.
bench-quick: install
	$(BIN)/python -m bench.headline --quick

# The docs site (docs/mkdocs.yml), built strictly: a broken link or anchor, a
# page left out of the nav or any other warning fails it.
DOCS_BUILD = NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --config-file docs/mkdocs.yml

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	out=$$(mktemp -d) && $(DOCS_BUILD) --site-dir "$$out"; status=$$?; rm -rf "$$out"; exit $$status

# The docs site into build/docs/ (open build/docs/index.html); to read it
# while editing: .venv/bin/mkdocs serve --config-file docs/mkdocs.yml
docs: install
	$(DOCS_BUILD)
	@echo "The docs are in build/docs/index.html"

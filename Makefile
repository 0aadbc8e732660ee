# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum requirements.txt | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-citus lint install dist

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

# Web and one dispatcher together on SQLite; Ctrl-C stops both.
run: install $(DEV_KEY_FILE)
	$(RUN_ENV) $(BIN)/python manage.py migrate --noinput
	$(RUN_ENV) $(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT)
	$(RUN_ENV) $(BIN)/python -m relayproject.devrun $(HOST) $(PORT)

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

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

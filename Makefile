# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum requirements.txt | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint install

install: $(STAMP)

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

# Web and one dispatcher together on SQLite; Ctrl-C stops both.
run: install
	RELAY_ALLOW_PRIVATE_DESTINATIONS=true $(BIN)/python manage.py migrate --noinput
	RELAY_ALLOW_PRIVATE_DESTINATIONS=true $(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT)
	$(BIN)/python -m relayproject.devrun $(HOST) $(PORT)

# The whole suite. With TEST_DATABASE_URL (as .ci/run sets) it runs on
# PostgreSQL, then the tests marked both_backends run again on SQLite.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		echo "--- SQLite pass (tests marked both_backends)"; \
		env -u TEST_DATABASE_URL RELAY_SQLITE_PASS=1 $(BIN)/python -m pytest -m both_backends $(PYTEST_ARGS); \
	fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

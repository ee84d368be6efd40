# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench doctor java clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

java:
	@bash .ci/ensure-java

demo: java $(STAMP)
	$(PY) -m statekit demo

test: java $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest tests --nbmake notebooks -v

bench: java $(STAMP)
	$(PY) -m bench

doctor: $(STAMP)
	$(PY) -m statekit doctor

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) statekit-out .pytest_cache

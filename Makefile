# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-order test-fast lint bench bench-report peer-venv doctor java kafka-jars kafka-streams-app s3a-jars chromium jvm-classes html lab docs clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,docs]'
	@touch $(STAMP)

java:
	@bash .ci/ensure-java

# Apache Kafka's jars for the embedded broker (statekit/kafka/jars.py): fetched once per machine
# from Maven Central with mvn (about 45 MB) into statekit's cache, never committed.
kafka-jars: java $(STAMP)
	@bash .ci/ensure-maven
	@$(PY) -m statekit.kafka.jars

# statekit's reference Kafka Streams application (statekit/kafka_streams/jvm, Java 17): compiled
# with mvn against Maven Central's kafka-streams of the broker's version into statekit's cache
# (about 92 MB with its dependencies), once per version of its sources, never committed.
kafka-streams-app: java $(STAMP)
	@bash .ci/ensure-maven
	@bash .ci/ensure-jdk
	@$(PY) -m statekit.kafka_streams.build

# Hadoop's S3A connector (hadoop-aws and the AWS SDK's S3 pieces, statekit/spark/s3a_jars.py) for
# s3a:// checkpoints: fetched once per machine from Maven Central with mvn (about 19 MB) into
# statekit's cache, never committed; a session loads it only with spark_session(s3a=True).
s3a-jars: java $(STAMP)
	@bash .ci/ensure-maven
	@$(PY) -m statekit.spark.s3a_jars

# The driver JVM's class-data archive (statekit/spark/class_archive.py): built once per machine
# (about a minute, ~180 MB under ~/.cache/statekit), it saves seconds on every fresh Spark
# session; a machine where it cannot be built just starts sessions without it.
jvm-classes: java $(STAMP)
	@$(PY) -m statekit.spark.class_archive --if-missing || echo "sessions will start without it"

# Debian's Chromium for tests/project/test_browser.py (skipped, with the reason, when it cannot
# be had).
chromium:
	@bash .ci/ensure-chromium || echo "Chromium missing: tests/project/test_browser.py will be skipped"

# Every notebook executed into self-contained HTML handouts (charts included, no network).
NOTEBOOKS ?=
html: java $(STAMP) jvm-classes kafka-jars kafka-streams-app
	$(PY) -m statekit.workshop.handouts $(NOTEBOOKS) --out build/handouts

# JupyterLab on the notebooks, with this project's environment as the kernel.
lab: java $(STAMP) jvm-classes kafka-jars kafka-streams-app
	$(PY) -m jupyter lab --ServerApp.root_dir=notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# The documentation site (docs/, Sphinx) into build/docs, offline, warnings as errors. It reads
# the notebooks without running them; the handouts of `make html`, when there, are copied in.
docs: $(STAMP)
	$(PY) -m sphinx -j auto -b html -W --keep-going -d build/.docs-doctrees docs build/docs
	@echo "open build/docs/index.html"

demo: java $(STAMP) jvm-classes kafka-jars kafka-streams-app
	$(PY) -m statekit demo

# Every test has a timeout (pyproject.toml: [tool.pytest.ini_options] timeout); a notebook cell
# gets NB_CELL_TIMEOUT seconds. Both targets end with the slowest tests and the wall time.
NB_CELL_TIMEOUT ?= 600
# PYTHONFAULTHANDLER: a crash after pytest has finished, while Python still runs (where pytest's
# own fault handler is off), still prints every thread's traceback; one later still, in native
# libraries' own teardown after Python's, prints nothing but the signal.
PYTEST := PYTHONFAULTHANDLER=1 $(PY) -m pytest

# $(call timed,LABEL,COMMAND): run COMMAND, print its wall time, exit with COMMAND's status.
timed = start=$$(date +%s); $(2); status=$$?; took=$$(( $$(date +%s) - start )); \
	printf '%s: wall time %dm%02ds (%d s), exit status %d\n' '$(1)' \
	$$((took / 60)) $$((took % 60)) $$took $$status; exit $$status

# Everything: all tests, slow ones included, every docstring example in statekit/
# (--doctest-modules, pyproject.toml) and the notebooks (what CI runs). TEST_WORKERS processes
# (pytest-xdist) take whole files each (--dist loadfile: a file's module-scoped queries and
# broker stay in one process), the longest first (tests/file_seconds.tsv,
# tests/helpers/file_order.py), not pytest-xdist's most-tests-first, which left the notebooks
# and the browser runs for the end. TEST_WORKERS=2 (the default): 32-43 min on the 2-core
# machine. Three processes kept the cores busier (93 %) and took 31-33 min, but one of three
# such runs failed a fault test that passes alone (the full disk under the broker, under
# load): two stay the default until its cause is found (bench/README.md, "The suite").
# TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
test: java chromium $(STAMP) jvm-classes kafka-jars kafka-streams-app s3a-jars
	$(PY) -m ruff check .
	@$(call timed,make test,$(PYTEST) $(XDIST) tests statekit --nbmake notebooks --nbmake-timeout=$(NB_CELL_TIMEOUT) -v --durations=10)

# tests/file_seconds.tsv anew from the last whole run's build/test-times.tsv (the order files
# are handed to TEST_WORKERS processes in)
test-order:
	$(PY) tests/helpers/file_order.py build/test-times.tsv

# For development: no tests marked slow (subprocess queries, crash drills, long streams), no
# notebooks.
test-fast: java $(STAMP) kafka-jars kafka-streams-app s3a-jars
	$(PY) -m ruff check .
	@$(call timed,make test-fast,$(PYTEST) $(XDIST) tests statekit -m "not slow" --durations=10)

# Each benchmark writes bench/results/<name>.json (bench/results.py); the tables of
# bench/README.md are then regenerated from those files.
bench: java $(STAMP) jvm-classes kafka-jars kafka-streams-app
	$(PY) -m bench
	$(PY) -m bench.report

bench-report: $(STAMP)
	$(PY) -m bench.report

# Quix Streams for `python -m bench.peer`, in an interpreter of its own: quixstreams 3.28 pins
# confluent-kafka<2.13 and pydantic<2.14, lower than the project's .venv has.
PEER_VENV ?= .venv-peer
peer-venv:
	@test -x $(PEER_VENV)/bin/python || python3.11 -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEER_VENV)/bin/python -m pip install --quiet 'quixstreams>=3.28,<4'

doctor: $(STAMP)
	$(PY) -m statekit doctor

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) statekit-out .pytest_cache build/docs build/.docs-doctrees docs/_generated

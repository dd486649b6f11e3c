# blockheat: the two commands a newcomer runs are `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: demo test bench-ingest bench-heat bench-profile bench-sim bench-jvm clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@command -v java >/dev/null || { echo "error: Java 17 is required (java not on PATH)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -c requirements.lock -e '.[test,bench,airflow]'
	@# side by side on two cores: the Spark JVMs' class archive, and every numba loop compiled into numba's cache
	$(VENV)/bin/blockheat jvm-archive & archive=$$!; $(PY) -m libs.warm; warm=$$?; wait $$archive && exit $$warm
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/blockheat ingest --format hp-srt --trace-id hplajw data/traces/hplajw/ajw.1week.srt
	$(VENV)/bin/blockheat traces
	$(VENV)/bin/blockheat report hplajw

test: $(STAMP)
	$(VENV)/bin/ruff check .              # lint and import order (pyproject.toml [tool.ruff])
	$(VENV)/bin/lint-imports --no-cache   # the house's import contract (pyproject.toml [tool.importlinter])
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25   # two workers, whole files each, the longest first (tests/conftest.py); the 25 slowest listed

bench-ingest: $(STAMP)
	$(PY) bench/ingest.py --millions 5

bench-heat: $(STAMP)
	$(PY) bench/heat.py --millions 5

bench-profile: $(STAMP)
	$(PY) bench/trace_profile.py --millions 1

bench-sim: $(STAMP)
	$(PY) bench/sim.py

bench-jvm: $(STAMP)
	$(PY) bench/jvm_start.py --rounds 3

clean:
	rm -rf warehouse spark-warehouse metastore_db derby.log .pytest_cache

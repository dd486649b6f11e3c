# blockheat: the two commands a newcomer runs are `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
# S3Proxy (Apache-2.0, Java 17 class files), the S3-compatible server the tests start (tests/s3_server.py): one jar
# from Maven Central, checked against the pinned sha256, kept in the environment next to the JVM archive.
S3PROXY_VERSION := 4.1.0
S3PROXY_SHA256 := a4d025969aaf796616ed4b1e2491d87d455ce84bb28cb9db086b2e6aaa68b48d
S3PROXY_JAR := $(VENV)/var/blockheat/s3proxy-$(S3PROXY_VERSION)-jar-with-dependencies.jar

.PHONY: demo test bench-ingest bench-heat bench-profile bench-sim bench-jvm clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock | $(S3PROXY_JAR)
	@command -v java >/dev/null || { echo "error: Java 17 is required (java not on PATH)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -c requirements.lock -e '.[test,bench,airflow]'
	@# side by side on two cores: the Spark JVMs' class archive, and every numba loop compiled into numba's cache
	$(VENV)/bin/blockheat jvm-archive & archive=$$!; $(PY) -m libs.warm; warm=$$?; wait $$archive && exit $$warm
	@touch $(STAMP)

# Order-only for $(STAMP) above: fetched when missing (a new clone, or an older venv), never a reason to reinstall.
$(S3PROXY_JAR):
	@mkdir -p $(@D) && curl -fsSL --retry 3 -o $@.part https://repo1.maven.org/maven2/org/gaul/s3proxy/$(S3PROXY_VERSION)/$(@F)
	@echo "$(S3PROXY_SHA256)  $@.part" | sha256sum -c --quiet - && mv $@.part $@

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

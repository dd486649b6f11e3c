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
# PostgreSQL's JDBC driver (BSD-2-Clause), for the Hive metastore shared on PostgreSQL (libs/io/catalog.py): one jar
# from Maven Central, checked against the pinned sha256, beside S3Proxy's.
POSTGRES_JDBC_VERSION := 42.7.14
POSTGRES_JDBC_SHA256 := 73914527305a40cce504b0d3d90b23caf565136912d607ae8ae7c5895512332c
POSTGRES_JDBC_JAR := $(VENV)/var/blockheat/postgresql-$(POSTGRES_JDBC_VERSION).jar
# blockheat's SQL access classes (libs/io/java: the read-only guard, the Thrift password check), compiled against
# pyspark's jars by javac of the JDK 17 that runs Spark (libs/io/sql_access.py; an installed wheel does the same on
# first use).
SQL_ACCESS_SOURCES := $(wildcard libs/io/java/io/blockheat/sql/*.java)
SQL_ACCESS_JAR := $(VENV)/var/blockheat/blockheat-sql-access.jar

.PHONY: demo test test-fast wheel-check airflow-check postgres-server chromium bench-ingest bench-heat bench-profile bench-sim bench-jvm clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock | $(S3PROXY_JAR) $(POSTGRES_JDBC_JAR)
	@command -v java >/dev/null || { echo "error: Java 17 is required (java not on PATH)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -c requirements.lock -e '.[test,bench,airflow]'
	@# the project's byte code, also where PYTHONDONTWRITEBYTECODE is set: a command starts ~0.1 s sooner
	$(PY) -m compileall -q jobs libs sim schemas dags data >/dev/null
	@# side by side on two cores: the Spark JVMs' class archive, and every numba loop compiled into numba's cache
	$(VENV)/bin/blockheat jvm-archive & archive=$$!; $(PY) -m blockheat.libs.warm; warm=$$?; wait $$archive && exit $$warm
	@touch $(STAMP)

$(SQL_ACCESS_JAR): $(SQL_ACCESS_SOURCES) | $(STAMP)
	$(PY) -c 'from blockheat.libs.io.sql_access import access_jar; print(access_jar())'

# Order-only for $(STAMP) above: fetched when missing (a new clone, or an older venv), never a reason to reinstall.
$(S3PROXY_JAR):
	@mkdir -p $(@D) && curl -fsSL --retry 3 -o $@.part https://repo1.maven.org/maven2/org/gaul/s3proxy/$(S3PROXY_VERSION)/$(@F)
	@echo "$(S3PROXY_SHA256)  $@.part" | sha256sum -c --quiet - && mv $@.part $@

$(POSTGRES_JDBC_JAR):
	@mkdir -p $(@D) && curl -fsSL --retry 3 -o $@.part https://repo1.maven.org/maven2/org/postgresql/postgresql/$(POSTGRES_JDBC_VERSION)/$(@F)
	@echo "$(POSTGRES_JDBC_SHA256)  $@.part" | sha256sum -c --quiet - && mv $@.part $@

# Debian's PostgreSQL server, which the shared-catalog test and the Airflow check start in a directory of their own
# (infra/postgres/local-cluster.sh): installed when missing, as root (CI, the development machines).
postgres-server:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	  else echo "error: the PostgreSQL server is missing: sudo apt-get install postgresql"; exit 1; fi; }

# Debian's Chromium, which the report's browser test drives headless (tests/chromium.py): installed when missing, as
# root (CI, the development machines).
chromium:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else echo "error: Chromium is missing: sudo apt-get install chromium"; exit 1; fi; }

demo: $(STAMP) $(SQL_ACCESS_JAR)
	$(VENV)/bin/blockheat demo

test: $(STAMP) $(SQL_ACCESS_JAR) postgres-server chromium
	$(VENV)/bin/ruff check .              # lint and import order (pyproject.toml [tool.ruff])
	$(VENV)/bin/lint-imports --no-cache   # the house's import contract (pyproject.toml [tool.importlinter])
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25   # two workers, whole files each, the longest first (tests/conftest.py); the 25 slowest listed

# The lane without a JVM: lint, the import contracts and every test not marked `spark` (tests/conftest.py marks the
# tests whose fixtures start a JVM); `java` on PATH refuses to start (.ci/no-jvm), so an unmarked JVM test fails.
test-fast: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	PATH="$(abspath .ci/no-jvm):$$PATH" JAVA_HOME= $(PY) -m pytest -n 2 -m "not spark" --durations=10

# The package outside the checkout: sdist and wheel built, the wheel installed into fresh venvs (the locked set, every
# lower bound) in a temporary directory, and the smoke commands run there (.ci/wheel-check.sh).
wheel-check: $(STAMP)
	.ci/wheel-check.sh

# The nightly DAG under a real Airflow scheduler (LocalExecutor, PostgreSQL): one night of the bundled trace
# (infra/airflow/check_scheduler.py; infra/airflow/README.md says how long it takes).
airflow-check: $(STAMP) postgres-server
	$(PY) infra/airflow/check_scheduler.py

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

#!/usr/bin/env bash
# The product outside its checkout: build the sdist and the wheel (the wheel from the sdist), install the wheel into
# fresh virtual environments in a temporary directory, and run the smoke commands there, away from the repository:
#   locked  the exact set of requirements.lock, with the Airflow extra
#   lowest  every dependency at the lower bound pyproject.toml declares (.ci/constraints-lowest.txt), with the
#           Airflow and test extras, on the next Python (LOWEST_PYTHON, default python3.12 where there is one);
#           also runs the fast lane's tests of sim, schemas, readers and plans against the installed package
# Usage: .ci/wheel-check.sh [locked|lowest ...]   (default: both). Needs Python 3.11 and Java 17 on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
# the next Python: python3.12 on PATH, else pyenv's 3.12 (its shim runs only where 3.12 is selected), else $python
lowest_python=${LOWEST_PYTHON:-}
if [ -z "$lowest_python" ]; then
  for candidate in python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12 "$python"; do
    if "$candidate" --version >/dev/null 2>&1; then lowest_python=$candidate; break; fi
  done
fi
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(locked lowest)
work=$(mktemp -d "${TMPDIR:-/tmp}/blockheat-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

step() { printf '\n== %s\n' "$*"; }

step "build: sdist and wheel (python -m build)"
.venv/bin/python -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/blockheat-*.whl)
ls -l "$work"/dist
step "the wheel's files (every module under the one import root)"
.venv/bin/python - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
tops = sorted({n.split("/")[0] for n in names})
print(f"{len(names)} files; top level: {', '.join(tops)}")
for n in names:
    print("  " + n)
bad = [t for t in tops if t != "blockheat" and not t.endswith(".dist-info")]
assert not bad, f"installs outside the blockheat name: {bad}"
PY

smoke() {   # $1: venv; runs in an empty directory with nothing of the checkout on the path
  local venv=$1 run=$work/run-$(basename "$1")
  mkdir -p "$run"
  (
    cd "$run"
    unset PYTHONPATH BLOCKHEAT_SPARK_MASTER BLOCKHEAT_SPARK_REMOTE
    export BLOCKHEAT_WAREHOUSE=$run/warehouse PYSPARK_PYTHON=$venv/bin/python PYSPARK_DRIVER_PYTHON=$venv/bin/python
    export PATH=$venv/bin:$PATH
    step "$(basename "$venv"): where blockheat is imported from"
    python -c 'import blockheat.jobs, blockheat.libs, blockheat.sim, blockheat.schemas, blockheat.data, sys
for m in (blockheat.jobs, blockheat.libs, blockheat.sim, blockheat.schemas, blockheat.data):
    assert m.__file__.startswith(sys.prefix), (m.__name__, m.__file__)
    print(m.__name__, m.__file__)'
    step "$(basename "$venv"): blockheat --version"
    blockheat --version
    step "$(basename "$venv"): blockheat demo"
    blockheat demo
    test -s "$run/warehouse/reports/hplajw/report.html"
    step "$(basename "$venv"): blockheat experiment placement --scale tiny"
    blockheat experiment placement --scale tiny
    step "$(basename "$venv"): the DAG from the installed package (the DAG folder's one line)"
    mkdir -p dags && cp "$repo/infra/airflow/dags/blockheat_nightly.py" dags/
    AIRFLOW_HOME=$run/airflow AIRFLOW__CORE__DAGS_FOLDER=$run/dags AIRFLOW__CORE__LOAD_EXAMPLES=False python -c '
import os
from pathlib import Path
from airflow.dag_processing.dagbag import DagBag
import blockheat.jobs
bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
assert not bag.import_errors, bag.import_errors
dag = bag.dags["nightly_trace_analysis"]
jobs = Path(blockheat.jobs.__file__).resolve().parent
apps = {t.task_id: t.partial_kwargs["application"] for t in dag.tasks if hasattr(t, "partial_kwargs")}
assert apps and all(Path(a).parent == jobs and Path(a).is_file() for a in apps.values()), apps
print(f"{dag.dag_id}: {len(dag.tasks)} tasks from {dag.fileloc}; Spark stages submit {jobs}/<stage>.py")'
  )
}

for kind in "${kinds[@]}"; do
  venv=$work/venv-$kind
  interpreter=$python
  [ "$kind" = lowest ] && interpreter=$lowest_python
  step "$kind: a fresh virtual environment with the wheel ($("$interpreter" --version))"
  "$interpreter" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip==26.3
  case $kind in
    locked) "$venv/bin/python" -m pip install --quiet -c requirements.lock "$wheel[airflow]" ;;
    lowest) "$venv/bin/python" -m pip install --quiet -c .ci/constraints-lowest.txt "$wheel[airflow,test]" ;;
    *) echo "wheel-check: unknown kind $kind (locked, lowest)" >&2; exit 2 ;;
  esac
  "$venv/bin/python" -m pip freeze | grep -iE '^(pyspark|delta-spark|deltalake|pyarrow|pandas|numpy|networkx|numba|matplotlib|zstandard|tqdm|apache-airflow|apache-airflow-providers-apache-spark)==' | tr '\n' ' '
  echo
  smoke "$venv"
  if [ "$kind" = lowest ]; then
    step "lowest: the fast lane's tests against the installed package"
    # the checkout's tests, importing blockheat from the venv (the folders here are jobs/, libs/...: not `blockheat`)
    PATH="$repo/.ci/no-jvm:$venv/bin:$PATH" JAVA_HOME='' "$venv/bin/python" -m pytest -q -p no:cacheprovider \
      -m "not spark" -n 2 tests/sim tests/schemas tests/libs/readers tests/libs/plans
  fi
done
step "wheel-check: passed (${kinds[*]})"

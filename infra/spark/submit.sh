#!/usr/bin/env bash
# spark-submit one blockheat job (the installed blockheat/jobs/JOB.py) to a Spark cluster, in client mode from this machine:
#
#   BLOCKHEAT_SPARK_MASTER=spark://spark-master.example:7077 BLOCKHEAT_WAREHOUSE=/mnt/blockheat/warehouse \
#   BLOCKHEAT_DRIVER_HOST=10.0.0.12 infra/spark/submit.sh extent_heat hplajw
#
# BLOCKHEAT_SPARK_MASTER  the master URL (required): spark://HOST:PORT (standalone) or k8s://https://API:PORT.
# BLOCKHEAT_WAREHOUSE     the warehouse: a path that is the same directory on this machine and every worker (a
#                         shared filesystem mounted at the same place everywhere).
# BLOCKHEAT_DRIVER_HOST   an address of this machine the executors can reach (default 127.0.0.1: only for a
#                         cluster on this machine, e.g. infra/spark/local-cluster.sh).
# PYTHON                  the interpreter with blockheat installed (default .venv/bin/python); the workers
#                         need the same interpreter at the same path (spark.pyspark.python), see infra/README.md.
# SPARK_PROPERTIES        extra properties file (default infra/spark/standalone.conf for spark://, none else).
# Kubernetes in cluster mode (the driver in a pod) uses infra/spark/kubernetes/submit-k8s.sh instead.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
job=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${BLOCKHEAT_SPARK_MASTER:?set BLOCKHEAT_SPARK_MASTER to the master URL of the cluster}"
: "${BLOCKHEAT_WAREHOUSE:?set BLOCKHEAT_WAREHOUSE to the shared warehouse path}"
python=${PYTHON:-$repo/.venv/bin/python}
application=$("$python" -c 'import pathlib, sys; from blockheat import jobs; print(pathlib.Path(jobs.__file__).parent / (sys.argv[1] + ".py"))' "$job")
[ -f "$application" ] || { echo "submit.sh: no such job: $application" >&2; exit 2; }
interpreter=$("$python" -c 'import sys; print(sys.executable)')
spark_home=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
# The Delta jars an earlier session resolved (executors fetch them from the driver), else Maven coordinates.
jars=$("$python" -c 'from blockheat.libs.io.session import cached_delta_jars; print(",".join(cached_delta_jars() or []))')
package=$("$python" -c 'from blockheat.libs.nightly import delta_package; print(delta_package())')
if [ -n "$jars" ]; then delta=(--jars "$jars"); else delta=(--packages "$package"); fi
properties=${SPARK_PROPERTIES:-}
if [ -z "$properties" ] && [[ "$BLOCKHEAT_SPARK_MASTER" == spark://* ]]; then properties=$here/standalone.conf; fi
props=()
[ -n "$properties" ] && props=(--properties-file "$properties")
export PYSPARK_PYTHON=$interpreter PYSPARK_DRIVER_PYTHON=$interpreter BLOCKHEAT_WAREHOUSE
exec "$spark_home/bin/spark-submit" --master "$BLOCKHEAT_SPARK_MASTER" --deploy-mode client "${props[@]}" \
  "${delta[@]}" --conf "spark.pyspark.python=$interpreter" "$application" "$@"

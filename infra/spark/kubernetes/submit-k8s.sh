#!/usr/bin/env bash
# spark-submit one blockheat job to Kubernetes in cluster mode: the driver runs in a pod of the blockheat image
# (infra/spark/kubernetes/Dockerfile), the job file is the image's installed one.
#
#   K8S_API=https://k8s.example.com:6443 infra/spark/kubernetes/submit-k8s.sh extent_heat hplajw
#
# K8S_API     the Kubernetes API server URL (required).
# PYTHON      a local interpreter with pyspark, for its spark-submit (default .venv/bin/python).
# SPARK_PROPERTIES  properties file (default infra/spark/kubernetes/spark-k8s.conf: image, namespace,
#             service account, the warehouse volume; edit it for your cluster).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
job=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
: "${K8S_API:?set K8S_API to the Kubernetes API server URL}"
python=${PYTHON:-$here/../../../.venv/bin/python}
spark_home=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
exec "$spark_home/bin/spark-submit" --master "k8s://$K8S_API" \
  --properties-file "${SPARK_PROPERTIES:-$here/spark-k8s.conf}" --name "blockheat-${job//_/-}" \
  "local:///opt/blockheat/.venv/lib/python3.11/site-packages/blockheat/jobs/$job.py" "$@"

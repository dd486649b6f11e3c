#!/usr/bin/env bash
# A Spark standalone cluster on this machine from pyspark's pip installation, which ships bin/spark-class but
# not the sbin start/stop scripts: one master and N workers, everything bound to 127.0.0.1.
#
#   infra/spark/local-cluster.sh start [--workers N] [--cores C] [--memory M] [--port P] [--webui-port P] [--dir DIR]
#                                      [--pin]
#   infra/spark/local-cluster.sh stop [--dir DIR]
#   infra/spark/local-cluster.sh status [--dir DIR]
#
# start waits until the master and every worker are up and prints the master URL (also kept in DIR/master-url):
#   export BLOCKHEAT_SPARK_MASTER=$(infra/spark/local-cluster.sh start --workers 2)
# Defaults: 2 workers of 1 core and 2g each, master on 7077, master web UI on 8080; a port of 0 picks a free
# one. DIR (default $BLOCKHEAT_CLUSTER_DIR, else .spark-cluster) holds the pid files, the logs and the workers'
# scratch space (executor logs under DIR/worker-I/work). PYTHON (default .venv/bin/python, else python3) is
# the interpreter whose pyspark starts the JVMs; executors run the driver's interpreter (spark.pyspark.python,
# set by libs/io/session.py). --pin confines worker I, with the executors and Python workers it starts, to C CPUs
# of its own ((I-1)*C .. I*C-1, modulo the machine's), standing in for separate machines of C cores (a
# worker's --cores only caps its task slots, not the CPU its processes use); the driver is not pinned.
set -euo pipefail

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

action=${1:-}
[ -n "$action" ] || usage
shift
workers=2 cores=1 memory=2g port=7077 webui_port=8080 timeout_s=120 pin=0
dir=${BLOCKHEAT_CLUSTER_DIR:-.spark-cluster}
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --webui-port) webui_port=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --pin) pin=1; shift ;;
    *) echo "local-cluster.sh: unknown option $1" >&2; usage ;;
  esac
done
for n in "$workers" "$cores" "$port" "$webui_port" "$timeout_s"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "local-cluster.sh: not a number: $n" >&2; exit 2; }
done
[[ "$memory" =~ ^[0-9]+[mMgG]$ ]] || { echo "local-cluster.sh: --memory wants e.g. 1g or 512m, got $memory" >&2; exit 2; }

# A pid file names a live process of this cluster only if that process is still a Spark daemon (pids get reused).
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'org.apache.spark.deploy'
}

stop_one() {  # pid file: TERM the daemon and its children (a worker's executors), KILL what is left after 15 s
  local pidfile=$1 pid children
  if alive "$pidfile"; then
    pid=$(cat "$pidfile")
    children=$(ps -o pid= --ppid "$pid" 2>/dev/null || true)
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    for child in $children; do kill -KILL "$child" 2>/dev/null || true; done
  fi
  rm -f "$pidfile"
}

stop_all() {
  local f
  for f in "$dir"/worker-*.pid; do [ -e "$f" ] && stop_one "$f"; done
  [ -e "$dir/master.pid" ] && stop_one "$dir/master.pid"
  rm -f "$dir/master-url"
}

wait_for_line() {  # log file, extended regex, what: wait until the log has a matching line; print the match
  local log=$1 pattern=$2 what=$3 deadline=$((SECONDS + timeout_s)) line
  while [ $SECONDS -lt $deadline ]; do
    line=$(grep -m1 -oE "$pattern" "$log" 2>/dev/null || true)
    if [ -n "$line" ]; then echo "$line"; return 0; fi
    sleep 0.2
  done
  echo "local-cluster.sh: $what not up after ${timeout_s} s; last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
  return 1
}

case "$action" in
  start)
    if alive "$dir/master.pid"; then
      echo "local-cluster.sh: a cluster already runs from $dir (master $(cat "$dir/master-url" 2>/dev/null)); stop it first" >&2
      exit 1
    fi
    python=${PYTHON:-}
    if [ -z "$python" ]; then
      if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
    fi
    spark_home=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
    interpreter=$("$python" -c 'import sys; print(sys.executable)')
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    export SPARK_LOCAL_IP=127.0.0.1 SPARK_HOME="$spark_home"
    export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$interpreter}
    trap 'stop_all' ERR
    rm -f "$dir"/*.log "$dir/master-url"
    # No REST submission server: it would take the fixed port 6066 (one cluster per machine), and nothing uses it.
    export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=false"
    # The environment's JVM class archive (blockheat jvm-archive), if made: the daemons start faster.
    archive=$("$python" -c 'from blockheat.libs.io.jvm import archive_options; print(" ".join(archive_options()))' 2>/dev/null || true)
    export SPARK_DAEMON_JAVA_OPTS="${SPARK_DAEMON_JAVA_OPTS:-} $archive"
    # spark-class execs java, so $! is the daemon's own pid. setsid: the daemons outlive this shell's session.
    setsid "$spark_home/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host 127.0.0.1 --port "$port" --webui-port "$webui_port" >"$dir/master.log" 2>&1 </dev/null &
    echo $! >"$dir/master.pid"
    url=$(wait_for_line "$dir/master.log" 'spark://127\.0\.0\.1:[0-9]+' "the master")
    # The CPUs this process may use (a container's cpuset need not start at 0), one per line.
    allowed=()
    IFS=, read -ra ranges <<<"$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
    for r in "${ranges[@]}"; do
      if [[ $r == *-* ]]; then mapfile -t -O "${#allowed[@]}" allowed < <(seq "${r%-*}" "${r#*-}"); else allowed+=("$r"); fi
    done
    for i in $(seq 1 "$workers"); do
      mkdir -p "$dir/worker-$i/work"
      pinned=()
      if [ "$pin" = 1 ]; then
        cpus=$(for c in $(seq $(((i - 1) * cores)) $((i * cores - 1))); do echo "${allowed[c % ${#allowed[@]}]}"; done \
               | sort -un | paste -sd,)
        pinned=(taskset -c "$cpus")
      fi
      setsid "${pinned[@]}" "$spark_home/bin/spark-class" org.apache.spark.deploy.worker.Worker \
        --host 127.0.0.1 --port 0 --webui-port 0 --cores "$cores" --memory "$memory" \
        --work-dir "$dir/worker-$i/work" "$url" >"$dir/worker-$i.log" 2>&1 </dev/null &
      echo $! >"$dir/worker-$i.pid"
    done
    for i in $(seq 1 "$workers"); do
      wait_for_line "$dir/worker-$i.log" 'Successfully registered with master' "worker $i" >/dev/null
    done
    trap - ERR
    echo "$url" >"$dir/master-url"
    echo "$url"
    ;;
  stop)
    stop_all
    ;;
  status)
    if alive "$dir/master.pid"; then
      echo "master $(cat "$dir/master-url" 2>/dev/null) pid $(cat "$dir/master.pid")"
    else
      echo "no master running from $dir"
    fi
    for f in "$dir"/worker-*.pid; do
      [ -e "$f" ] || continue
      w=$(basename "$f" .pid)
      if alive "$f"; then echo "$w pid $(cat "$f")"; else echo "$w not running"; fi
    done
    ;;
  *) usage ;;
esac

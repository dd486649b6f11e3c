#!/usr/bin/env bash
# A local PostgreSQL cluster (Debian's postgresql package) for the shared catalog and Airflow's metadata:
#
#   infra/postgres/local-cluster.sh start DIR [PORT]   create the cluster in DIR if needed, start it on 127.0.0.1:PORT
#                                                      (default 5432), create the roles and databases below
#   infra/postgres/local-cluster.sh stop DIR           stop it (the data stays in DIR; nothing to do if it is stopped)
#   infra/postgres/local-cluster.sh status DIR         exit 0 while it runs, 3 when it does not
#
# Databases, each owned by a role of its name with that password (TCP on 127.0.0.1 with the password, the Unix
# socket in DIR without): blockheat_metastore (the Hive metastore of `blockheat serve-sql`, `sql`, `sql-shell` and
# the jobs, see docs/deployment.md) and airflow (Airflow's metadata database, infra/airflow/). PostgreSQL refuses to
# run as root: run as root, the cluster belongs to the `postgres` user of the Debian package, which must be able to
# reach DIR (under /tmp or /var/lib, say; not under a directory only root may enter). PG_BIN names another
# PostgreSQL's bin directory (default: the newest /usr/lib/postgresql/*/bin).
set -euo pipefail

usage="usage: local-cluster.sh start DIR [PORT] | stop DIR | status DIR"
cmd=${1:?$usage}
dir=${2:?$usage}
port=${3:-5432}
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
if [[ -z "$bin" || ! -x "$bin/pg_ctl" ]]; then
  echo "local-cluster.sh: no PostgreSQL server found (apt-get install postgresql; or set PG_BIN)" >&2
  exit 1
fi
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ $(id -u) -eq 0 ]]; then chown postgres: "$dir"; fi
    if ! as_owner test -w "$dir" -a -x "$dir"; then
      echo "local-cluster.sh: $dir is out of reach of user $(as_owner id -un) (a parent directory it may not" \
           "enter?): choose a directory under /tmp or /var/lib" >&2
      exit 1
    fi
    if [[ ! -f "$dir/PG_VERSION" ]]; then
      log=$(mktemp)
      chmod 644 "$log"
      # initdb wants an empty directory: its log goes in afterwards.
      if ! as_owner "$bin/initdb" -D "$dir" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
             --encoding=UTF8 --locale=C.UTF-8 >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        exit 1
      fi
      mv "$log" "$dir/initdb.log"
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      if ! as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
             -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null; then
        echo "local-cluster.sh: PostgreSQL did not start on 127.0.0.1:$port; the end of $dir/server.log:" >&2
        tail -n 20 "$dir/server.log" >&2
        exit 1
      fi
    fi
    port=$(sed -n 4p "$dir/postmaster.pid")          # the running server's port, if it was started before
    for db in blockheat_metastore airflow; do
      as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q <<SQL
SELECT 'CREATE ROLE $db LOGIN PASSWORD ''$db''' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$db')\gexec
SELECT 'CREATE DATABASE $db OWNER $db' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$db')\gexec
SQL
    done
    echo "postgresql://127.0.0.1:$port (databases blockheat_metastore, airflow; data in $dir)"
    ;;
  stop)
    if as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
    fi
    ;;
  status)
    as_owner "$bin/pg_ctl" -D "$dir" status
    ;;
  *)
    echo "local-cluster.sh: unknown command $cmd (start, stop or status)" >&2
    exit 2
    ;;
esac

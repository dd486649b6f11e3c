"""The Spark Thrift server (`blockheat serve-sql`), so any JDBC/ODBC client (beeline, BI tools) queries every table by
name. Bound to 127.0.0.1; runs on the persistent catalog (libs.io.catalog), and registers tables that jobs create
while it runs. Clients authenticate (libs.io.sql_access: the password file for JDBC, the owner's token for Spark
Connect); JDBC clients read only unless the server allows writes (ServeConfig.allow_writes), Spark Connect clients
write unless they seal their session read-only.

Spark's own HiveThriftServer2 application is started by spark-submit (libs.io.connect_server) with the Spark Connect
plugin on a loopback port: this process keeps the catalog in step with the warehouse through that Connect endpoint.
"""
from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blockheat.libs.io import endpoint, journal, sql_access
from blockheat.libs.io.catalog import driver_class_path, metastore_in_use, metastore_path, sync_catalog
from blockheat.libs.io.connect_server import CONNECT_PLUGIN, ConnectServer, free_port
from blockheat.libs.io.jvm import merge_java_options
from blockheat.libs.io.session import SparkConfig, delta_jars, join_class_path
from blockheat.libs.io.table_names import NAMES_CONF, NAMES_CREATED
from blockheat.libs.io.tables import TABLES, table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
READY_TIMEOUT_S = 120.0
#: Seconds between checks of the journal: a query waits at most about this long for a stopped writer's commit.
JOURNAL_POLL_S = 0.5
THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"


class ServeError(RuntimeError):
    """The server cannot start: port taken, metastore held by another process, ..."""


@dataclass(frozen=True)
class ServeConfig:
    """Ports of the JDBC and Spark Connect endpoints (connect_port 0: a free one), seconds between checks for new
    tables, how long to wait for a metastore another process holds (a `blockheat sql` finishing, say), and whether
    to publish the Connect endpoint for every command to attach to (libs.io.endpoint), and whether JDBC clients'
    sessions write (allow_writes; otherwise read-only, libs.io.sql_access)."""

    port: int = 10000
    refresh_s: float = 10.0
    wait_metastore_s: float = 30.0
    connect_port: int = 0
    publish: bool = False
    allow_writes: bool = False

    def __post_init__(self) -> None:
        for name, port in (("port", self.port), ("connect port", self.connect_port or 1)):
            if not 1 <= port <= 65535:
                raise ValueError(f"{name} must be 1-65535, got {port}")
        if self.refresh_s <= 0:
            raise ValueError(f"refresh must be > 0 seconds, got {self.refresh_s:g}")

    @property
    def url(self) -> str:
        return f"jdbc:hive2://{HOST}:{self.port}"


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise ServeError(f"port {port} on {HOST} is in use ({exc.strerror}); pick another with --port") from exc


def _wait_for_metastore(warehouse: Path, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while metastore_in_use(warehouse):
        if time.monotonic() >= deadline:
            raise ServeError(f"metastore {metastore_path(warehouse)} is in use by another process (another "
                             "blockheat serve-sql or sql-shell?); stop it first")
        time.sleep(0.5)


def _wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise ServeError(f"the Thrift server did not listen on {HOST}:{port} within {timeout_s:g} s") from None
            time.sleep(0.2)


def _finish_commits(warehouse: Any, reported: set[str] | None = None) -> None:
    """Finish what a stopped ingest decided (libs.io.journal), so that the queries waiting on the journal go on; a
    failure is logged (once per cause, remembered in `reported`) and tried again at the next check."""
    try:
        journal.finish(warehouse)
    except journal.JournalError as exc:
        if reported is None or str(exc) not in reported:
            log.error("serve-sql: %s", exc)
        if reported is not None:
            reported.add(str(exc))


def _existing_tables(warehouse: Path) -> frozenset[str]:
    return frozenset(n for n in TABLES if table_exists(warehouse, n))


def start_server(cfg: SparkConfig, job: ServeConfig, secrets: sql_access.ServerSecrets) -> ConnectServer:
    """The Thrift server application on the persistent catalog, with the Delta jars on the driver's class path,
    the Thrift endpoint's host, port and password check (Spark passes spark.hive.* to HiveServer2 as hive.*), the
    read-only guard, the journal its sessions wait on before a statement (a query never reads half an ingest),
    and a Connect endpoint (with the token) on a free loopback port for this process."""
    _check_port_free(job.port)
    if job.connect_port:
        _check_port_free(job.connect_port)
    if cfg.metastore is None:                   # Derby under the warehouse: one JVM at a time
        _wait_for_metastore(cfg.warehouse, job.wait_metastore_s)
    # FAIR: a quick query of one client runs beside another client's long job instead of queueing behind it.
    # NAMES_CREATED: the catalog has every table; a Connect client's session names only the tables it creates.
    auth, java = sql_access.thrift_auth_conf(), "spark.driver.extraJavaOptions"
    guarded = replace(cfg, catalog="hive", sql_guard=True, allow_writes=job.allow_writes,
                      extra={**cfg.extra, **auth, java: merge_java_options(cfg.extra.get(java), auth[java])})
    extra = {"spark.driver.extraClassPath": join_class_path(driver_class_path(delta_jars(), cfg.metastore),
                                                            str(sql_access.access_jar())),
             "spark.hive.server2.thrift.bind.host": HOST,
             "spark.hive.server2.thrift.port": str(job.port),
             "spark.ui.showConsoleProgress": "false", "spark.plugins": CONNECT_PLUGIN, "spark.scheduler.mode": "FAIR",
             NAMES_CONF: NAMES_CREATED, sql_access.AWAIT_JOURNAL: journal.directory(cfg.warehouse)}
    return ConnectServer.start(guarded, HOST, job.connect_port or free_port(HOST), main_class=THRIFT_SERVER_CLASS,
                               extra=extra, timeout_s=READY_TIMEOUT_S, secrets=secrets.environment())


def serve(cfg: SparkConfig, job: ServeConfig, on_ready: Callable[[str], None] = lambda url: None) -> None:
    """Run the Thrift server until SIGTERM or SIGINT; finishes a stopped writer's commits within JOURNAL_POLL_S
    (libs.io.journal; queries wait for them) and registers tables that appear meanwhile. The signal
    handlers are this function's only while the server runs (call from the main thread)."""
    from pyspark.sql import SparkSession

    stop = threading.Event()
    previous: dict[int, Any] = {}
    secrets = sql_access.ServerSecrets.ensure(cfg.warehouse)
    server = start_server(cfg, job, secrets)
    spark: SparkSession | None = None
    published: endpoint.Endpoint | None = None
    try:
        _wait_for_port(job.port, READY_TIMEOUT_S)
        spark = (SparkSession.builder.remote(sql_access.connect_url(server.url, secrets.token))
                 .config(map=sql_access.client_conf(allow_writes=True, job=True)).getOrCreate())
        _finish_commits(cfg.warehouse)
        sync_catalog(spark, cfg.warehouse)
        known = _existing_tables(cfg.warehouse)
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        if job.publish:
            published = endpoint.Endpoint(server.url, job.url, socket.gethostname(), server.process.pid)
            endpoint.write(cfg.warehouse, published)
        on_ready(job.url)
        next_sync, reported = time.monotonic() + job.refresh_s, set[str]()
        while not stop.wait(min(JOURNAL_POLL_S, job.refresh_s)):
            if server.process.poll() is not None:
                raise ServeError(f"the Thrift server exited with code {server.process.returncode}")
            _finish_commits(cfg.warehouse, reported)        # the queries waiting on the journal go on
            if time.monotonic() < next_sync:
                continue
            next_sync = time.monotonic() + job.refresh_s
            now = _existing_tables(cfg.warehouse)
            if now != known:
                synced = sync_catalog(spark, cfg.warehouse)
                log.info("serve-sql: tables now %s", ", ".join(synced.registered))
                known = now
    finally:
        if published is not None:
            endpoint.remove(cfg.warehouse, published)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if spark is not None:
            spark.stop()
        server.stop()


def parse_args(argv: Sequence[str] | None) -> ServeConfig:
    parser = argparse.ArgumentParser(prog="sql_server", description=__doc__)
    parser.add_argument("--port", type=int, default=10000)
    parser.add_argument("--refresh", type=float, default=10.0, help="seconds between checks for new tables")
    parser.add_argument("--connect-port", type=int, default=0, help="Spark Connect port (0: a free one)")
    parser.add_argument("--publish", action="store_true", help="publish the endpoints for every command to attach")
    parser.add_argument("--allow-writes", action="store_true", help="clients' sessions write (default: read-only)")
    args = parser.parse_args(argv)
    return ServeConfig(args.port, args.refresh, connect_port=args.connect_port, publish=args.publish,
                       allow_writes=args.allow_writes)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point; `blockheat serve-sql` is the same with one-line errors."""
    job = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="sql_server: %(message)s")
    cfg = SparkConfig.from_env("serve-sql", short_driver=False, attach=False)
    serve(cfg, job, lambda url: log.info("serving on %s", url))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

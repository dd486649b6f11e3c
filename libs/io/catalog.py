"""The persistent SQL catalog: Spark's embedded Hive metastore (Derby) at <warehouse>/metastore_db, holding
every blockheat table as an external Delta table by location, plus whatever views users create.

Derby lets one JVM at a time open the metastore. The interactive entry points use it (`blockheat sql`,
`blockheat sql-shell`, `blockheat serve-sql`); jobs name no table (catalog "none" in libs.io.session: they read
and write by path), so they never wait for a lock. An entry point that finds the metastore in use (say, while
`blockheat serve-sql` runs) falls back to an in-memory catalog registered from the warehouse on its start
(libs.io.tables.register_tables): every table is still visible by name, only the views saved in the metastore
are not. The Delta logs stay the truth:
the metastore only maps names to locations, and sync_catalog re-derives those on every start.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from libs.io import delta_log, storage
from libs.io.tables import TABLES, register_tables, table_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

METASTORE_DIR = "metastore_db"
# Derby holds an exclusive lock (fcntl, through java.nio FileChannel.tryLock) on this file of a booted
# database for as long as the JVM has it open; db.lck and dbex.lck themselves stay behind after a crash.
DERBY_LOCK_FILE = "dbex.lck"
# Maven groups of the Delta jars the Thrift server and spark-sql need on the driver's own class path (see
# driver_class_path); the rest of the resolved jars (older jackson, parquet, hadoop) would shadow Spark's.
CLASS_PATH_GROUPS = ("io.delta_", "io.unitycatalog_")


def session_catalog(spark: SparkSession) -> str:
    """The catalog the running session really has ("hive" or "in-memory"), fixed when its context started."""
    return str(spark.conf.get("spark.sql.catalogImplementation", "in-memory"))


def metastore_path(warehouse: Path) -> Path:
    """The Derby metastore of a warehouse: <warehouse>/metastore_db."""
    return Path(warehouse) / METASTORE_DIR


def metastore_in_use(warehouse: Path) -> bool:
    """True while another process has the warehouse's Derby metastore open (it holds Derby's file lock)."""
    lock = metastore_path(warehouse) / DERBY_LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False                     # never booted: free
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def hive_conf(warehouse: Path) -> dict[str, str]:
    """Session settings for the Hive catalog with its Derby metastore under the warehouse (absolute, so any
    working directory opens the same one)."""
    db = metastore_path(Path(warehouse).resolve())
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={db};create=true",
    }


def driver_class_path(jars: Sequence[str]) -> str:
    """The Delta (and Unity Catalog client) jars among `jars` (file URIs or paths) as a driver class path.

    Hive's session code (HiveServer2's sessions, the spark-sql shell) makes the system class loader the
    context class loader of its threads, so classes given through spark.jars alone cannot be found there
    (ClassNotFoundException: ...DeltaCatalog when a JDBC client connects)."""
    paths = [urlparse(j).path if j.startswith("file:") else j for j in jars]
    return os.pathsep.join(p for p in paths if Path(p).name.startswith(CLASS_PATH_GROUPS))


@dataclass(frozen=True)
class CatalogSync:
    """What sync_catalog changed in the metastore."""

    registered: tuple[str, ...]      # tables now visible by name
    repointed: tuple[str, ...]       # entries that named another location (a moved warehouse)
    dropped: tuple[str, ...]         # entries whose table no longer exists in the warehouse


_INFO_RE = re.compile(r"^(Location|Provider): (.*)$", re.MULTILINE)


def sync_catalog(spark: SparkSession, warehouse: Path) -> CatalogSync:
    """Make the session catalog's blockheat entries match the warehouse: drop entries of tables whose Delta
    log is gone or that point elsewhere (entries are external: dropping one deletes no data), then register
    every existing table. Other entries (users' views and tables) are left alone."""
    known = set(TABLES)
    stale, moved = [], []
    for row in spark.sql("SHOW TABLE EXTENDED IN default LIKE '*'").collect():
        if row["tableName"] not in known or row["isTemporary"]:
            continue
        info = dict(_INFO_RE.findall(row["information"]))
        expected = table_path(warehouse, row["tableName"])
        where = info.get("Location", "")
        if storage.is_local(expected):
            where = urlparse(where).path
        if not delta_log.is_table(expected):
            stale.append(row["tableName"])
        elif info.get("Provider") != "delta" or where.rstrip("/") != expected:
            moved.append(row["tableName"])
    for name in stale + moved:
        log.info("catalog: dropping the entry of %s (%s)", name,
                 "re-pointed to the warehouse" if name in moved else "no such table in the warehouse")
        spark.sql(f"DROP TABLE IF EXISTS default.{name}")
    registered = register_tables(spark, warehouse)
    return CatalogSync(tuple(registered), tuple(moved), tuple(stale))


def init_sql(warehouse: Path) -> str:
    """SQL that registers every existing table (for `spark-sql -i`, which has no blockheat code)."""
    lines = []
    for name in TABLES:
        path = table_path(warehouse, name)
        if delta_log.is_table(path):
            if "'" in path:
                raise ValueError(f"warehouse path {path} contains a quote")
            lines.append(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION '{path}';\n")
    return "".join(lines)


def release_metastore(spark: SparkSession) -> None:
    """Free the metastore a session holds and stop the session, so a `blockheat sql` right after finds it free:
    Derby unlocks its database only when its engine shuts down, which otherwise happens when the JVM exits, a while
    after Python's own exit. The engine is shut down through Derby's documented shutdown URL, opened by Spark's JDBC
    source on the driver (whose "connection" then fails, as a Derby shutdown does). Sessions on the in-memory
    catalog are left running."""
    if session_catalog(spark) != "hive":
        return
    with contextlib.suppress(Exception):
        spark.read.format("jdbc").option("url", "jdbc:derby:;shutdown=true").option("dbtable", "shutdown").load()
    spark.stop()

"""The persistent SQL catalog: a Hive metastore holding every blockheat table as an external Delta table by
location, plus whatever views users create. By default Spark's embedded Derby at <warehouse>/metastore_db; with
BLOCKHEAT_METASTORE_URL, a PostgreSQL database that every process shares (SharedMetastore).

Derby lets one JVM at a time open the metastore. The interactive entry points use it (`blockheat sql`,
`blockheat sql-shell`, `blockheat serve-sql`); jobs name no table (catalog "none" in libs.io.session: they read
and write by path), so they never wait for a lock. An entry point that finds the metastore in use (say, while
`blockheat serve-sql` runs) falls back to an in-memory catalog registered from the warehouse on its start
(libs.io.tables.register_tables): every table is still visible by name, only the views saved in the metastore
are not. On PostgreSQL there is no such fallback: the entry points and the jobs use the one catalog at once, and
a job names the tables it creates there. The Delta logs stay the truth:
the metastore only maps names to locations, and sync_catalog re-derives those on every start.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from blockheat.libs.io import redaction, storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Location = str | os.PathLike[str]

log = logging.getLogger(__name__)

METASTORE_DIR = "metastore_db"
# Derby holds an exclusive lock (fcntl, through java.nio FileChannel.tryLock) on this file of a booted
# database for as long as the JVM has it open; db.lck and dbex.lck themselves stay behind after a crash.
DERBY_LOCK_FILE = "dbex.lck"
# Maven groups of the Delta jars the Thrift server and spark-sql need on the driver's own class path (see
# driver_class_path); the rest of the resolved jars (older jackson, parquet, hadoop) would shadow Spark's.
CLASS_PATH_GROUPS = ("io.delta_", "io.unitycatalog_")

# The shared metastore: where it is, the PostgreSQL role, and the role's password (from a file only its owner may
# read, or the variable itself). The driver JVM gets the password in its environment, never on a command line.
URL_ENV = "BLOCKHEAT_METASTORE_URL"
USER_ENV = "BLOCKHEAT_METASTORE_USER"
PASSWORD_FILE_ENV = "BLOCKHEAT_METASTORE_PASSWORD_FILE"
PASSWORD_ENV = "BLOCKHEAT_METASTORE_PASSWORD"
POSTGRES_URL_PREFIX = "jdbc:postgresql://"
POSTGRES_DRIVER = "org.postgresql.Driver"
# PostgreSQL's JDBC driver (Maven Central's org.postgresql:postgresql, fetched by `make` with a pinned sha256).
POSTGRES_JAR_GLOB = "postgresql-*.jar"


class MetastoreConfigError(ValueError):
    """BLOCKHEAT_METASTORE_* settings that cannot be used (the message says which and why)."""


@dataclass(frozen=True)
class SharedMetastore:
    """A Hive metastore in a PostgreSQL database, shared by every process of a warehouse.

        export BLOCKHEAT_METASTORE_URL=jdbc:postgresql://127.0.0.1:5432/blockheat_metastore
        export BLOCKHEAT_METASTORE_USER=blockheat_metastore BLOCKHEAT_METASTORE_PASSWORD_FILE=~/.blockheat-metastore
    """

    url: str
    user: str
    password: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SharedMetastore | None:
        """The metastore BLOCKHEAT_METASTORE_URL names (None when unset: Derby under the warehouse), with
        BLOCKHEAT_METASTORE_USER and the password of BLOCKHEAT_METASTORE_PASSWORD_FILE or
        BLOCKHEAT_METASTORE_PASSWORD (neither: none sent). MetastoreConfigError for unusable settings."""
        env = os.environ if environ is None else environ
        url = env.get(URL_ENV, "").strip()
        if not url:
            return None
        if not url.startswith(POSTGRES_URL_PREFIX):
            raise MetastoreConfigError(f"{URL_ENV} must be a PostgreSQL JDBC URL ({POSTGRES_URL_PREFIX}host:port/"
                                       f"database), got {url!r}")
        user = env.get(USER_ENV, "").strip()
        if not user:
            raise MetastoreConfigError(f"{USER_ENV} is not set: the PostgreSQL role of {url}")
        path, password = env.get(PASSWORD_FILE_ENV), env.get(PASSWORD_ENV)
        if path and password is not None:
            raise MetastoreConfigError(f"set {PASSWORD_FILE_ENV} or {PASSWORD_ENV}, not both")
        return cls(url, user, read_password_file(Path(path)) if path else password)

    def environment(self) -> dict[str, str]:
        """The variables a driver JVM on this metastore needs (its settings refer to the password by name)."""
        return {} if self.password is None else {PASSWORD_ENV: self.password}


def read_password_file(path: Path) -> str:
    """The password in `path` (its first line), refusing a file that others than its owner may read; registered
    with libs.io.redaction so that it is never printed."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise MetastoreConfigError(f"{PASSWORD_FILE_ENV}={path}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise MetastoreConfigError(f"{PASSWORD_FILE_ENV}={path} may be read by others than its owner (mode "
                                   f"{stat.S_IMODE(mode):04o}): chmod 600 {path}")
    lines = path.read_text().splitlines()
    password = lines[0] if lines else ""
    redaction.register(password)                # never printed from now on
    return password


def postgres_jar(prefix: str | Path | None = None) -> Path:
    """PostgreSQL's JDBC driver in the environment (<prefix>/var/blockheat/, the newest if several)."""
    folder = Path(sys.prefix if prefix is None else prefix) / "var" / "blockheat"
    jars = sorted(folder.glob(POSTGRES_JAR_GLOB),
                  key=lambda p: tuple(int(x) for x in re.findall(r"\d+", p.name)))
    if not jars:
        raise MetastoreConfigError(f"no PostgreSQL JDBC driver ({POSTGRES_JAR_GLOB}) in {folder}: run `make venv`")
    return jars[-1]


def session_catalog(spark: SparkSession) -> str:
    """The catalog the running session really has ("hive" or "in-memory"), fixed when its context started."""
    return str(spark.conf.get("spark.sql.catalogImplementation", "in-memory"))


def on_derby(spark: SparkSession) -> bool:
    """Whether a Hive-catalog session's metastore is the embedded Derby one (not a shared PostgreSQL one)."""
    return str(spark.conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", "jdbc:derby:")).startswith("jdbc:derby:")


def metastore_home(warehouse: Location) -> Path:
    """Where Derby keeps a warehouse's metastore and its log (derby.system.home): the warehouse directory itself
    (absolute, so any working directory opens the same one); for a warehouse in an object store, which Derby cannot
    write, a directory of this user's cache, $XDG_CACHE_HOME/blockheat/metastore/<hash of the URI> (default
    ~/.cache), never a path made from the URI."""
    if storage.is_local(warehouse):
        return Path(storage.normalize(warehouse))
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "blockheat" / "metastore" / hashlib.sha256(storage.normalize(warehouse).encode()).hexdigest()[:16]


def metastore_path(warehouse: Location) -> Path:
    """The Derby metastore of a warehouse: <metastore_home>/metastore_db."""
    return metastore_home(warehouse) / METASTORE_DIR


def metastore_in_use(warehouse: Location) -> bool:
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


def hive_conf(warehouse: Location, metastore: SharedMetastore | None = None) -> dict[str, str]:
    """Session settings for the Hive catalog: with its Derby metastore in metastore_home (the warehouse, or this
    user's cache for an object-store warehouse), or on the shared PostgreSQL `metastore` (its driver then goes on the
    driver's class path; the JVM must have the metastore's environment())."""
    if metastore is None:
        db = metastore_path(warehouse)
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={db};create=true",
        }
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": metastore.url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": POSTGRES_DRIVER,
        "spark.hadoop.javax.jdo.option.ConnectionUserName": metastore.user,
        # Hive's built-in 2.3 client creates its schema (DataNucleus) in an empty database, without a version check.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # ... all of it when the metastore starts, from Hive's package.jdo: a table DataNucleus creates lazily, inside
        # a metastore transaction, waits forever on PostgreSQL for that transaction's own lock (the first CREATE TABLE
        # adds TBL_PRIVS, whose foreign key needs TBLS, where the transaction has just inserted a row).
        "spark.hadoop.datanucleus.autoStartMechanism": "MetaData",
        "spark.hadoop.datanucleus.autoStartMetaDataFiles": "package.jdo",
        "spark.driver.extraClassPath": driver_class_path([], metastore),
    }
    if metastore.password is not None:
        # Hadoop's configuration expands ${env.NAME} when Hive reads the setting: the password is in the driver's
        # environment only, not on the spark-submit command line nor in Spark's settings.
        conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] = "${env." + PASSWORD_ENV + "}"
    return conf


def driver_class_path(jars: Sequence[str], metastore: SharedMetastore | None = None) -> str:
    """The Delta (and Unity Catalog client) jars among `jars` (file URIs or paths) as a driver class path, and
    PostgreSQL's JDBC driver for a shared `metastore`.

    Hive's session code (HiveServer2's sessions, the spark-sql shell) makes the system class loader the
    context class loader of its threads, so classes given through spark.jars alone cannot be found there
    (ClassNotFoundException: ...DeltaCatalog when a JDBC client connects)."""
    paths = [urlparse(j).path if j.startswith("file:") else j for j in jars]
    chosen = [p for p in paths if Path(p).name.startswith(CLASS_PATH_GROUPS)]
    return os.pathsep.join([*chosen, str(postgres_jar())] if metastore is not None else chosen)


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
    from blockheat.libs.io import delta_log  # lazy: a Spark Connect client (libs.io.session) needs neither
    from blockheat.libs.io.tables import TABLES, forget_registered, register_tables, table_path

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
        forget_registered(spark, name)
    registered = register_tables(spark, warehouse)
    return CatalogSync(tuple(registered), tuple(moved), tuple(stale))


def init_sql(warehouse: Path) -> str:
    """SQL that registers every existing table (for `spark-sql -i`, which has no blockheat code)."""
    from blockheat.libs.io import delta_log  # lazy: a Spark Connect client (libs.io.session) needs neither
    from blockheat.libs.io.delta_files import sql_string
    from blockheat.libs.io.tables import TABLES, table_path

    lines = []
    for name in TABLES:
        path = table_path(warehouse, name)
        if delta_log.is_table(path):
            lines.append(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {sql_string(path)};\n")
    return "".join(lines)


def release_metastore(spark: SparkSession) -> None:
    """Free the metastore a session holds and stop the session, so a `blockheat sql` right after finds it free:
    Derby unlocks its database only when its engine shuts down, which otherwise happens when the JVM exits, a while
    after Python's own exit. The engine is shut down through Derby's documented shutdown URL, opened by Spark's JDBC
    source on the driver (whose "connection" then fails, as a Derby shutdown does). Sessions on the in-memory
    catalog, and on a shared PostgreSQL metastore (which holds no lock), are left running."""
    if session_catalog(spark) != "hive" or not on_derby(spark):
        return
    with contextlib.suppress(Exception):
        spark.read.format("jdbc").option("url", "jdbc:derby:;shutdown=true").option("dbtable", "shutdown").load()
    spark.stop()

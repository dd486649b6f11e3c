"""The one place SparkSessions are built: local or cluster master, Delta Lake, warehouse, UTC."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

import pyspark
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession

from blockheat.libs.io import endpoint, redaction, sql_access, storage
from blockheat.libs.io.catalog import (
    SharedMetastore,
    hive_conf,
    metastore_home,
    metastore_in_use,
    metastore_path,
    session_catalog,
    sync_catalog,
)
from blockheat.libs.io.jvm import (
    JAVA_OPTION_KEYS,
    LEAN_DRIVER_OPTIONS,
    SHORT_JOB_OPTIONS,
    archive_options,
    java_options,
    merge_java_options,
)
from blockheat.libs.io.table_names import NAMES_CONF, NAMES_CREATED

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
DEFAULT_WAREHOUSE = storage.DEFAULT_WAREHOUSE
DEFAULT_DRIVER_HOST = "127.0.0.1"
# Delta Lake's SQL extension and catalog (with its jars, see delta_builder).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CONF = {"spark.sql.extensions": DELTA_EXTENSION,
              "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
# Hadoop's S3A file system (s3a:// tables and traces) at the Hadoop version of pyspark's jars, with the two AWS SDK
# modules it loads instead of the SDK's 690 MB bundle (12 MB in all, resolved once with Delta's jars).
S3A_PACKAGES = ["org.apache.hadoop:hadoop-aws:3.5.0", "software.amazon.awssdk:s3:2.35.4",
                "software.amazon.awssdk:s3-transfer-manager:2.35.4"]
S3A_EXCLUDES = "software.amazon.awssdk:bundle,org.wildfly.openssl:wildfly-openssl"


@dataclass(frozen=True)
class SparkConfig:
    """Where Spark runs and where the tables live. from_env() reads the two documented variables."""

    master: str = DEFAULT_MASTER
    warehouse: Path | str = Path(DEFAULT_WAREHOUSE)   # a local directory, or a URI (libs.io.storage)
    app_name: str = "blockheat"
    extra: dict[str, str] = field(default_factory=dict)
    # "in-memory": tables registered by name for this session only; "hive": the persistent metastore under the
    # warehouse (libs.io.catalog), for the SQL entry points; "none": tables by path only (the jobs, from_env: a
    # name costs a Delta snapshot of its table, seconds of a job's start for tables the job never names). With a
    # shared `metastore`, "none" is a job on it that names the tables it creates (see _job_on_shared_metastore).
    catalog: str = "in-memory"
    # The shared PostgreSQL metastore (BLOCKHEAT_METASTORE_URL, libs.io.catalog.SharedMetastore) of "hive"
    # sessions, instead of Derby under the warehouse.
    metastore: SharedMetastore | None = None
    # The address the driver binds to and executors connect back to: loopback for local mode and a cluster on
    # this machine; a reachable address for one on other machines; "auto" leaves it to Spark (spark-submit's
    # settings, or the driver pod's address on Kubernetes).
    driver_host: str = DEFAULT_DRIVER_HOST
    # A Spark Connect server to run on (sc://host:port) instead of a driver in this process: the server has its own
    # master, Delta and object-store settings (libs.io.connect_server starts one with this product's).
    remote: str | None = None
    # The remote is the warehouse's `blockheat serve` (libs.io.endpoint), which keeps every table registered in its
    # catalog: a client then registers none itself.
    served: bool = False
    # SQL access (libs.io.sql_access): the read-only guard in the session's extensions and file queries off; the
    # session writes only with allow_writes. For a server application (session_conf), allow_writes lets its JDBC
    # clients write. A client of a served remote seals its own session read-only unless allow_writes (a job's session
    # writes: sql_guard False), whatever the server allows.
    sql_guard: bool = False
    allow_writes: bool = False

    @classmethod
    def from_env(cls, app_name: str = "blockheat", short_driver: bool = True, attach: bool = True,
                 lean_local: bool = False, **extra: str) -> SparkConfig:
        """BLOCKHEAT_SPARK_MASTER (default local[*], or under spark-submit its --master),
        BLOCKHEAT_WAREHOUSE (default ./warehouse), BLOCKHEAT_DRIVER_HOST (default 127.0.0.1) and
        BLOCKHEAT_SPARK_REMOTE (a Spark Connect server, sc://host:port; "local": never a server). Without
        BLOCKHEAT_SPARK_REMOTE, the warehouse's running `blockheat serve` when there is one (attach=False: never;
        the servers themselves). lean_local: a job whose passes run in Python workers reading the files; in local
        mode its driver's JVM gets LEAN_DRIVER_OPTIONS."""
        master = os.environ.get("BLOCKHEAT_SPARK_MASTER", default_master())
        warehouse = storage.warehouse_from_env()
        remote, served = os.environ.get("BLOCKHEAT_SPARK_REMOTE") or None, False
        if remote == "local" or not attach or "PYSPARK_GATEWAY_PORT" in os.environ:    # spark-submit: its own driver
            remote = None
        elif remote is None and (running := endpoint.attached(warehouse)) is not None:
            remote, served = running.connect, True
        # A job's driver on a cluster plans, schedules and commits; the executors do the work. The JIT's first tier
        # and the serial GC start it sooner and leave the CPU to the executors, which matters most when they share
        # the driver's machine. In local mode the driver's JVM is the executor too, and keeps the defaults; so do
        # long-lived drivers (short_driver=False: the SQL server and shell, where the driver plans every query),
        # unless the job's tasks do their work in Python workers (lean_local).
        if not master or master.startswith("local"):
            flags = LEAN_DRIVER_OPTIONS if lean_local else ()
        else:
            flags = SHORT_JOB_OPTIONS if short_driver else ()
        driver = {"spark.driver.extraJavaOptions": " ".join(flags)} if flags else {}
        return cls(
            catalog="none",
            master=master,
            warehouse=warehouse,
            app_name=app_name,
            extra={**driver, **extra},
            driver_host=os.environ.get("BLOCKHEAT_DRIVER_HOST", DEFAULT_DRIVER_HOST),
            remote=remote,
            served=served,
            metastore=SharedMetastore.from_env(),
        )


def default_master() -> str:
    """local[*]; "" (keep the master spark-submit was given) when spark-submit started the driver's JVM,
    which pyspark tells by PYSPARK_GATEWAY_PORT: a master set on the builder would override --master."""
    return "" if "PYSPARK_GATEWAY_PORT" in os.environ else DEFAULT_MASTER


def delta_builder(builder: SparkSession.Builder, jars: list[str] | None = None) -> SparkSession.Builder:
    """Add Delta Lake's SQL extension and catalog, and its jars with the S3A file system's: the given local jar
    paths, or resolved from Maven (fetched on first use) when there are none."""
    for key, value in DELTA_CONF.items():
        builder = builder.config(key, value)
    if jars:
        return builder.config("spark.jars", ",".join(jars))
    return configure_spark_with_delta_pip(builder.config("spark.jars.excludes", S3A_EXCLUDES),
                                          extra_packages=S3A_PACKAGES)


def _jar_list_file() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "blockheat" / f"delta-spark-{version('delta-spark')}-s3a-jars.txt"


def _artifact(jar_name: str, resolved: bool = False) -> str:
    """A jar's artifact name: hadoop-client-api from Spark's hadoop-client-api-3.5.0.jar, or (`resolved`) from
    org.apache.hadoop_hadoop-client-api-3.4.2.jar, as Spark's Maven resolver names its jars
    (<organisation>_<artifact>-<revision>.jar)."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name.split("_", 1)[-1] if resolved else jar_name)


def spark_artifacts() -> set[str]:
    """The artifacts of the jars Spark itself ships (SPARK_HOME's, else pyspark's jars/)."""
    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    return {_artifact(p.name) for p in (home / "jars").glob("*.jar")}


def without_spark_copies(jars: list[str], shipped: set[str]) -> list[str]:
    """`jars` without the libraries Spark ships itself. Maven resolves delta-spark with its whole dependency
    tree: 70 of its 86 MB are older copies of Spark's own libraries (hadoop-client 30 + 19 MB, zstd, parquet,
    jackson, log4j). Spark's class loaders look in Spark's jars first, so the copies are never used, but
    every executor fetched and copied them as it started."""
    return [j for j in jars if _artifact(Path(urlparse(j).path).name, resolved=True) not in shipped]


def cached_delta_jars() -> list[str] | None:
    """The Delta jars resolved by an earlier session, if every one of them is still on disk (without the
    libraries Spark ships)."""
    listing = _jar_list_file()
    if not listing.is_file():
        return None
    jars = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
    if not jars or not all(Path(urlparse(j).path).is_file() for j in jars):
        return None
    return without_spark_copies(jars, spark_artifacts())


def delta_jars() -> list[str]:
    """The Delta jars (file URIs) an earlier session resolved; when there are none yet, a throwaway session in
    a child process resolves them from Maven once (a process cannot put jars on the class path of a JVM it has
    already started, and the Thrift server and spark-sql need them there from the start)."""
    jars = cached_delta_jars()
    if jars is None:
        log.info("resolving the Delta Lake jars once (a throwaway local session)")
        with tempfile.TemporaryDirectory() as tmp:
            code = ("from blockheat.libs.io.session import SparkConfig, build_session; "
                    "build_session(SparkConfig.from_env('resolve-delta-jars')).stop()")
            env = {**os.environ, "BLOCKHEAT_WAREHOUSE": tmp, "BLOCKHEAT_SPARK_MASTER": "local[1]"}
            subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp)
        jars = cached_delta_jars()
        if jars is None:
            raise RuntimeError("the Delta Lake jars could not be resolved (see the output above)")
    return jars


def remember_delta_jars(spark: SparkSession) -> None:
    """Keep the jar paths Spark resolved from Maven, so later sessions skip the resolver (and its
    hundred lines of output on every start)."""
    jars = [j for j in spark.sparkContext.getConf().get("spark.jars", "").split(",") if j]
    if any("delta-spark" in j for j in jars):
        listing = _jar_list_file()
        listing.parent.mkdir(parents=True, exist_ok=True)
        partial = listing.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text("\n".join(jars) + "\n")
        partial.replace(listing)  # atomic: a concurrent start reads the old list or the new one


# The drivers' Log4j 2 settings: errors only (start-up warnings and banners are not a command's output).
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def session_conf(cfg: SparkConfig) -> dict[str, str]:
    """Every setting build_session gives a session for `cfg` (`blockheat sql-shell` passes them to spark-sql)."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    archive = java_options(*archive_options())     # the environment's class archive (libs.io.jvm), if made
    # BLOCKHEAT_JAVA_OPTIONS: extra driver JVM flags for this process (e.g. libs.io.jvm.SHORT_JOB_OPTIONS). Paths
    # are quoted: a warehouse or an environment may have spaces or quotes in its path.
    # Derby's home (its derby.log, and the metastore of a Hive catalog on Derby): never the working directory.
    derby = metastore_home(cfg.warehouse)
    if not storage.is_local(cfg.warehouse):               # this user's cache (a local warehouse is made by its jobs)
        derby.mkdir(parents=True, exist_ok=True)
    driver_java = merge_java_options(java_options(f"-Dderby.system.home={derby}"), archive,
                                     java_options(f"-Dlog4j.configurationFile={LOG4J_CONFIG}"),
                                     os.environ.get("BLOCKHEAT_JAVA_OPTIONS"))
    conf = {
        "spark.ui.enabled": "false",
        # Spark's stage bars are for its shells; the blockheat command draws its own progress line.
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(cfg.warehouse),
        "spark.driver.extraJavaOptions": driver_java,
        "spark.pyspark.python": python,
        # Python workers import pyspark from its installed package, not the source zip Spark puts first on their
        # path (libs.io.spark_daemon: a new worker starts sooner, on Python 3.11 especially).
        "spark.python.daemon.module": "blockheat.libs.io.spark_daemon",
        "spark.sql.shuffle.partitions": "8",
        # Scans split into pieces of at most 32 MB (default 128): a 10 M-request table (195 MB) is ~8 tasks, not 3,
        # so two cores or workers share a stage evenly.
        "spark.sql.files.maxPartitionBytes": "32m",
        # and a large shuffle is read by up to the 8 partitions above, not coalesced into 64 MB ones: coalesced, extent
        # heat's final aggregation of 100 M requests is 3 tasks, too few for a second worker to share.
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16m",
        # Our aggregations are mostly per extent, block or edge (10^5-10^7 groups a task): the small
        # first-level hash map only misses there before every row goes on to the main one, so it is off.
        "spark.sql.codegen.aggregate.map.twolevel.enabled": "false",
        "spark.driver.memory": "4g",
        # Delta: keep schema strict, and let replaceWhere use arbitrary predicates on partitions.
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # Delta rebuilds table state with this many tasks on every read (default 50): far too many
        # for the small logs of a local warehouse, where it dominated small ingests.
        "spark.databricks.delta.snapshotPartitions": "4",
        # replaceWhere writes made outside libs.io.delta_files (spark-sql users) skip Delta's per-row re-check.
        "spark.databricks.delta.replaceWhere.constraintCheck.enabled": "false",
    }
    conf.update(object_store_conf(cfg))
    if cfg.driver_host != "auto":
        conf.update(dict.fromkeys(("spark.ui.host", "spark.driver.host", "spark.driver.bindAddress"), cfg.driver_host))
    if cfg.catalog == "hive" or _job_on_shared_metastore(cfg):
        conf.update(hive_conf(cfg.warehouse, cfg.metastore))
    elif cfg.catalog not in ("in-memory", "none"):
        raise ValueError(f"catalog must be 'in-memory', 'hive' or 'none', got {cfg.catalog!r}")
    if archive:
        conf["spark.executor.extraJavaOptions"] = archive
    if cfg.sql_guard:
        conf["spark.sql.extensions"] = f"{DELTA_EXTENSION},{sql_access.GUARD_EXTENSION}"
        conf.update(sql_access.guard_conf(cfg.allow_writes))
        conf["spark.driver.extraClassPath"] = join_class_path(conf.get("spark.driver.extraClassPath"),
                                                              str(sql_access.access_jar()))
    for key, value in cfg.extra.items():        # java options add to ours; any other setting replaces
        conf[key] = merge_java_options(conf.get(key), value) if key in JAVA_OPTION_KEYS else value
    return conf


def join_class_path(*parts: str | None) -> str:
    """Class path entries joined (empty ones left out)."""
    return os.pathsep.join(p for p in parts if p)


def _remote_session(cfg: SparkConfig) -> SparkSession:
    """A Spark Connect client session; tables are registered by name in it unless cfg.catalog is "none". A client
    of the warehouse's `blockheat serve` (cfg.served) registers nothing: the server's catalog has every table and
    its sessions name only the tables they create (NAMES_CREATED, jobs.sql_server), so it starts in one round trip,
    with the token from the warehouse's serve state in its URL and, beside the app name, its session's write setting
    (sql_access.client_conf: a job's session writes, a guarded one only with cfg.allow_writes)."""
    if not cfg.remote or not cfg.remote.startswith("sc://"):
        raise ValueError("BLOCKHEAT_SPARK_REMOTE must be a Spark Connect URL sc://host:port, got "
                         f"{redaction.redact(repr(cfg.remote))}")
    builder = SparkSession.builder.appName(cfg.app_name)
    if cfg.served:
        token = sql_access.read_token(cfg.warehouse)
        builder = builder.remote(sql_access.connect_url(cfg.remote, token)).config(
            map=sql_access.client_conf(cfg.allow_writes or not cfg.sql_guard, job=not cfg.sql_guard))
    else:
        builder = builder.remote(cfg.remote)
    spark = builder.getOrCreate()
    if cfg.catalog == "none" and not cfg.served:
        spark.conf.set(NAMES_CONF, "false")
    elif not cfg.served:
        from blockheat.libs.io.tables import register_tables  # lazy: a served client (the common case) needs none of it

        register_tables(spark, cfg.warehouse)
    log.debug("spark connect %s warehouse=%s", redaction.redact(cfg.remote), cfg.warehouse)
    return spark


def object_store_conf(cfg: SparkConfig) -> dict[str, str]:
    """Spark's settings for the object store of the environment's S3 settings (libs.io.storage), when there is
    one: the same store as fs.s3a.* for Spark, and the variables passed on to the executors' Python workers
    (whose pyarrow and delta-rs read them)."""
    env = {k: os.environ[k] for k in storage.S3_VARIABLES if os.environ.get(k)}
    if not env and storage.is_local(cfg.warehouse):
        return {}
    conf = storage.S3Settings.from_env().hadoop_conf()
    conf.update({f"spark.executorEnv.{k}": v for k, v in env.items()})
    return conf


def _job_on_shared_metastore(cfg: SparkConfig) -> bool:
    """Whether a job's session (catalog "none") is on the shared metastore: when there is one and this process
    starts the driver's JVM (spark-submit's, already running, has no PostgreSQL driver on its class path)."""
    return cfg.catalog == "none" and cfg.metastore is not None and "PYSPARK_GATEWAY_PORT" not in os.environ


def _usable_catalog(cfg: SparkConfig) -> SparkConfig:
    """`cfg`, or `cfg` with the in-memory catalog when a session already runs in this process (getOrCreate
    reuses it, with the catalog it started with, and its tables keep getting names) or when `cfg` asks for the
    Derby metastore and another process has it open (a shared PostgreSQL metastore is never given up)."""
    if SparkSession.getActiveSession() is not None:
        return replace(cfg, catalog="in-memory")
    if cfg.catalog != "hive" or cfg.metastore is not None:
        return cfg
    if metastore_in_use(cfg.warehouse):
        log.warning("metastore %s is in use by another process (blockheat serve-sql?): tables are registered "
                    "for this session only; views saved in the metastore are not visible",
                    metastore_path(cfg.warehouse))
        return replace(cfg, catalog="in-memory")
    return cfg


def finish_commits(warehouse: Path | str) -> None:
    """Finish the multi-table commits a stopped writer left (libs.io.journal) before anything reads the tables."""
    from blockheat.libs.io import journal  # lazy: one directory check when there is nothing to finish

    journal.finish(warehouse)


def build_session(cfg: SparkConfig) -> SparkSession:
    """Build (or reuse) the session for `cfg` and register every existing table by name (in the metastore
    with catalog "hive", see libs.io.catalog). With cfg.remote, a Spark Connect client session of that server."""
    finish_commits(cfg.warehouse)
    if cfg.remote:
        return _remote_session(cfg)
    # Python workers must run this interpreter: the system python3 has no pyarrow/pandas, and
    # mapInArrow then fails with "No module named pyarrow".
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if cfg.driver_host != "auto":  # bind there (loopback by default), never to every interface
        os.environ.setdefault("SPARK_LOCAL_IP", cfg.driver_host)
    storage.makedirs(storage.normalize(cfg.warehouse))
    if cfg.sql_guard and SparkSession.getActiveSession() is not None:
        # A session already running in this process (a test's, an API user's) keeps the extensions it started with:
        # none to guard it, and its settings are not this command's to change.
        cfg = replace(cfg, sql_guard=False)
    cfg = _usable_catalog(cfg)
    if cfg.metastore is not None:  # the driver JVM reads the metastore's password from its environment
        os.environ.update(cfg.metastore.environment())
    builder = SparkSession.builder.appName(cfg.app_name)
    if cfg.master:  # "": the JVM's own master (spark-submit --master), see default_master
        builder = builder.master(cfg.master)
    jars = cached_delta_jars()
    builder = delta_builder(builder, jars)
    conf = session_conf(cfg)
    if cfg.sql_guard:
        # This JVM serves this process alone: the application allows writes, so the catalog is synced below, and
        # the session is then sealed read-only unless cfg.allow_writes (SQL cannot undo that: ReadOnlyGuard).
        conf.update(sql_access.guard_conf(allow_writes=True))
    for key, value in conf.items():     # after Delta's: the guard's spark.sql.extensions names Delta's too
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not jars:
        remember_delta_jars(spark)
    spark.sparkContext.setLogLevel("ERROR")
    if session_catalog(spark) == "hive" and cfg.catalog == "none":    # a job on the shared metastore
        spark.conf.set(NAMES_CONF, NAMES_CREATED)
    elif session_catalog(spark) == "hive":
        sync_catalog(spark, cfg.warehouse)
    elif cfg.catalog == "none":
        spark.conf.set(NAMES_CONF, "false")
    else:
        from blockheat.libs.io.tables import register_tables  # lazy: see _remote_session

        register_tables(spark, cfg.warehouse)
    if cfg.sql_guard and not cfg.allow_writes:
        spark.conf.set(sql_access.READ_ONLY, "true")          # sealed at its first statement
    log.info("spark %s master=%s warehouse=%s", spark.version, spark.sparkContext.master, cfg.warehouse)
    return spark

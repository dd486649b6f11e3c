"""The one place SparkSessions are built: local or cluster master, Delta Lake, warehouse, UTC."""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
DEFAULT_WAREHOUSE = "warehouse"


@dataclass(frozen=True)
class SparkConfig:
    """Where Spark runs and where the tables live. from_env() reads the two documented variables."""

    master: str = DEFAULT_MASTER
    warehouse: Path = Path(DEFAULT_WAREHOUSE)
    app_name: str = "blockheat"
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, app_name: str = "blockheat", **extra: str) -> SparkConfig:
        """BLOCKHEAT_SPARK_MASTER (default local[*]) and BLOCKHEAT_WAREHOUSE (default ./warehouse)."""
        return cls(
            master=os.environ.get("BLOCKHEAT_SPARK_MASTER", DEFAULT_MASTER),
            warehouse=Path(os.environ.get("BLOCKHEAT_WAREHOUSE", DEFAULT_WAREHOUSE)).resolve(),
            app_name=app_name,
            extra=dict(extra),
        )


def delta_builder(builder: SparkSession.Builder, jars: list[str] | None = None) -> SparkSession.Builder:
    """Add Delta Lake's SQL extension and catalog, and its jars: the given local jar paths, or
    resolved from Maven (fetched on first use) when there are none."""
    from delta import configure_spark_with_delta_pip

    builder = (
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    )
    if jars:
        return builder.config("spark.jars", ",".join(jars))
    return configure_spark_with_delta_pip(builder)


def _jar_list_file() -> Path:
    from importlib.metadata import version

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "blockheat" / f"delta-spark-{version('delta-spark')}-jars.txt"


def cached_delta_jars() -> list[str] | None:
    """The Delta jars resolved by an earlier session, if every one of them is still on disk."""
    listing = _jar_list_file()
    if not listing.is_file():
        return None
    jars = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
    if not jars or not all(Path(urlparse(j).path).is_file() for j in jars):
        return None
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


def build_session(cfg: SparkConfig) -> SparkSession:
    """Build (or reuse) the session for `cfg` and register every existing table by name."""
    from pyspark.sql import SparkSession

    from libs.tables import register_tables

    # Python workers must run this interpreter: the system python3 has no pyarrow/pandas, and
    # mapInArrow then fails with "No module named pyarrow".
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind to loopback, never a public address
    cfg.warehouse.mkdir(parents=True, exist_ok=True)
    builder = (
        SparkSession.builder.master(cfg.master)
        .appName(cfg.app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.host", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(cfg.warehouse))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={cfg.warehouse}")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", "4g")
        # Delta: keep schema strict, and let replaceWhere use arbitrary predicates on partitions.
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        # Delta rebuilds table state with this many tasks on every read (default 50): far too many
        # for the small logs of a local warehouse, where it dominated small ingests.
        .config("spark.databricks.delta.snapshotPartitions", "4")
        # libs.tables.replace_trace stamps trace_id on every row it writes (see there).
        .config("spark.databricks.delta.replaceWhere.constraintCheck.enabled", "false")
    )
    for key, value in cfg.extra.items():
        builder = builder.config(key, value)
    jars = cached_delta_jars()
    spark = delta_builder(builder, jars).getOrCreate()
    if not jars:
        remember_delta_jars(spark)
    spark.sparkContext.setLogLevel("ERROR")
    register_tables(spark, cfg.warehouse)
    log.info("spark %s master=%s warehouse=%s", spark.version, cfg.master, cfg.warehouse)
    return spark

"""Session settings (UTC, UI off, Delta), the cached list of Delta jars, and the test session's own JVM or the
xdist controller's (tests/shared_jvm.py)."""
from __future__ import annotations

import os
from pathlib import Path

from blockheat.libs.io import session as S
from blockheat.libs.io.tables import registers_names
from tests.shared_jvm import WAREHOUSE_CONF, shared_worker


def test_session_is_utc_ui_off_with_delta(spark):
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert any("delta-spark" in j for j in spark.sparkContext.getConf().get("spark.jars").split(","))


def test_the_test_session_is_this_processs_own_in_its_jvm(spark, spark_cfg):
    """Under xdist the JVM is the controller's child and this worker names its tables in its own database;
    otherwise the JVM is this process's child. Either way the session knows its own warehouse."""
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current()
    worker = shared_worker()
    assert jvm.parent().get().pid() == (os.getppid() if worker else os.getpid())
    assert spark.catalog.currentDatabase() == (f"tests_{worker}" if worker else "default")
    assert spark.conf.get(WAREHOUSE_CONF) == str(spark_cfg.warehouse)
    spark.range(3).createOrReplaceTempView("own_view")                 # a session's views are its own
    assert [t.name for t in spark.catalog.listTables() if t.name == "own_view"] == ["own_view"]
    assert not spark.newSession().catalog.tableExists("own_view")


def test_config_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOCKHEAT_SPARK_MASTER", "spark://127.0.0.1:7077")
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(tmp_path / "wh"))
    cfg = S.SparkConfig.from_env("x")
    assert (cfg.master, cfg.warehouse, cfg.app_name) == ("spark://127.0.0.1:7077", tmp_path / "wh", "x")
    # a job's driver on a cluster starts with the short-job JVM flags, on top of the session's own driver flags
    assert cfg.extra == {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    assert S.session_conf(cfg)["spark.driver.extraJavaOptions"].endswith(
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    assert S.SparkConfig.from_env("x", **{"spark.driver.extraJavaOptions": "-Da=1"}).extra == \
        {"spark.driver.extraJavaOptions": "-Da=1"}                     # a caller's own choice wins
    assert S.SparkConfig.from_env("serve-sql", short_driver=False).extra == {}     # a long-lived driver
    assert S.SparkConfig.from_env("profile", lean_local=True).extra == \
        {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}   # on a cluster: as any job
    monkeypatch.setenv("BLOCKHEAT_SPARK_MASTER", "local[2]")
    assert S.SparkConfig.from_env().extra == {}                         # the driver's JVM runs the tasks too
    # unless the tasks do their work in Python workers: then it schedules and commits, on a small heap and the
    # JIT's first tier
    assert S.SparkConfig.from_env("profile", lean_local=True).extra == {
        "spark.driver.extraJavaOptions":
            "-XX:+UseSerialGC -Xms128m -Xmn48m -XX:MinHeapFreeRatio=20 -XX:MaxHeapFreeRatio=50 "
            "-XX:TieredStopAtLevel=1"}
    monkeypatch.delenv("BLOCKHEAT_SPARK_MASTER")
    monkeypatch.delenv("BLOCKHEAT_WAREHOUSE")
    assert S.SparkConfig.from_env().master == "local[*]"
    assert S.SparkConfig.from_env().warehouse == Path("warehouse").resolve()
    assert S.SparkConfig.from_env().catalog == "none"            # the jobs: tables by path only


def test_a_job_session_names_no_table_and_a_reused_session_keeps_naming(spark, tmp_path, monkeypatch):
    """A session built from from_env() (a job's) gives no table a name: in a fresh process (a subprocess
    here), a table it creates is not in its catalog while the in-memory session names it; in a process
    whose session already runs (the tests'), from_env() reuses it and names stay on."""
    from tests.builders import python_child

    child = ("import sys; from dataclasses import replace; from pathlib import Path; "
             "from blockheat.libs.io.session import SparkConfig, build_session; "
             "from blockheat.libs.io.tables import ensure_table; "
             "cfg = replace(SparkConfig.from_env('names'), master='local[1]', warehouse=Path(sys.argv[1])); "
             "s = build_session(cfg); ensure_table(s, cfg.warehouse, 'traces'); "
             "print('none', [t.name for t in s.catalog.listTables()]); s.stop(); "
             "s = build_session(replace(cfg, catalog='in-memory')); "
             "print('in-memory', [t.name for t in s.catalog.listTables()])")
    done = python_child(child, str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["none []", "in-memory ['traces']"]
    assert (tmp_path / "wh" / "traces" / "_delta_log").is_dir()
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(tmp_path / "empty"))     # no table: none named in the tests' session
    reused = S.build_session(S.SparkConfig.from_env("reused"))
    assert reused is spark
    assert registers_names(reused)


class _FakeConf:
    def __init__(self, jars: str) -> None:
        self.jars = jars

    def get(self, key: str, default: str = "") -> str:
        return self.jars if key == "spark.jars" else default


class _FakeSpark:
    def __init__(self, jars: str) -> None:
        self.sparkContext = type("SC", (), {"getConf": lambda _self: _FakeConf(jars)})()


def test_delta_jar_list_is_remembered_and_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert S.cached_delta_jars() is None                      # nothing remembered yet
    jar_a, jar_b = tmp_path / "io.delta_delta-spark_2.13-9.jar", tmp_path / "other.jar"
    jar_a.write_bytes(b"PK")
    jar_b.write_bytes(b"PK")
    S.remember_delta_jars(_FakeSpark(f"{jar_a.as_uri()},{jar_b.as_uri()}"))
    assert S.cached_delta_jars() == [jar_a.as_uri(), jar_b.as_uri()]
    jar_b.unlink()                                            # a jar vanished: resolve again
    assert S.cached_delta_jars() is None


def test_jar_list_without_delta_is_not_remembered(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jar = tmp_path / "other.jar"
    jar.write_bytes(b"PK")
    S.remember_delta_jars(_FakeSpark(jar.as_uri()))
    assert S.cached_delta_jars() is None


def test_jars_spark_ships_are_not_shipped_again(monkeypatch, tmp_path):
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("hadoop-client-api-3.5.0.jar", "zstd-jni-1.5.7-7.jar", "spark-core_2.13-4.2.0.jar",
                 "commons-pool-1.5.4.jar"):
        (home / "jars" / name).write_bytes(b"PK")
    monkeypatch.setenv("SPARK_HOME", str(home))
    shipped = S.spark_artifacts()
    assert shipped == {"hadoop-client-api", "zstd-jni", "spark-core_2.13", "commons-pool"}
    resolved = [f"file:{tmp_path}/m/{n}" for n in (
        "io.delta_delta-spark_4.2_2.13-4.4.0.jar", "org.apache.hadoop_hadoop-client-api-3.4.2.jar",
        "com.github.luben_zstd-jni-1.5.7-3.jar", "commons-pool_commons-pool-1.6.jar",
        "io.delta_delta-storage-4.4.0.jar", "org.roaringbitmap_shims-0.9.25.jar", "other.jar")]
    assert [Path(j).name for j in S.without_spark_copies(resolved, shipped)] == [
        "io.delta_delta-spark_4.2_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar",
        "org.roaringbitmap_shims-0.9.25.jar", "other.jar"]
    monkeypatch.delenv("SPARK_HOME")
    assert {"hadoop-client-api", "spark-core_2.13", "delta-spark_2.13"} & S.spark_artifacts() == \
        {"hadoop-client-api", "spark-core_2.13"}                           # pyspark's own jars, without Delta's

"""Catalog and cluster settings without a JVM: where the metastore lives, how a held one is detected, the
driver's address, the jars on the driver's class path, the spark-sql command line, and the SQL commands'
usage errors. (The real metastore, Thrift server and clients: test_sql_catalog.py.)"""
from __future__ import annotations

import re
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

from blockheat.jobs.cli.main import main
from blockheat.jobs.cli.sql import spark_sql_command
from blockheat.jobs.sql_server import ServeConfig
from blockheat.libs.io import tables
from blockheat.libs.io.catalog import (
    MetastoreConfigError,
    SharedMetastore,
    driver_class_path,
    hive_conf,
    metastore_in_use,
    postgres_jar,
)
from blockheat.libs.io.session import SparkConfig, session_conf

DRIVER_KEYS = ("spark.ui.host", "spark.driver.host", "spark.driver.bindAddress")


def test_driver_binds_to_loopback_unless_told_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv("BLOCKHEAT_DRIVER_HOST", raising=False)
    conf = session_conf(SparkConfig.from_env("x"))
    assert [conf[k] for k in DRIVER_KEYS] == ["127.0.0.1"] * 3
    monkeypatch.setenv("BLOCKHEAT_DRIVER_HOST", "10.1.2.3")
    conf = session_conf(SparkConfig.from_env("x"))
    assert [conf[k] for k in DRIVER_KEYS] == ["10.1.2.3"] * 3
    monkeypatch.setenv("BLOCKHEAT_DRIVER_HOST", "auto")           # Spark's (or Kubernetes') own choice
    assert not set(DRIVER_KEYS) & set(session_conf(SparkConfig.from_env("x")))


def test_hive_catalog_settings_name_the_warehouse_metastore(tmp_path):
    cfg = SparkConfig(warehouse=tmp_path / "wh", catalog="hive")
    conf = session_conf(cfg)
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == \
        f"jdbc:derby:;databaseName={tmp_path / 'wh' / 'metastore_db'};create=true"
    assert "spark.sql.catalogImplementation" not in session_conf(replace(cfg, catalog="in-memory"))
    with pytest.raises(ValueError, match="catalog must be 'in-memory', 'hive' or 'none', got 'derby'"):
        session_conf(replace(cfg, catalog="derby"))


HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)      # what Derby's FileChannel.tryLock takes on a booted database
print("locked", flush=True)
sys.stdin.read()
"""


def test_metastore_in_use_while_another_process_holds_derbys_lock(tmp_path):
    assert not metastore_in_use(tmp_path)                       # no metastore yet
    lock = tmp_path / "metastore_db" / "dbex.lck"
    lock.parent.mkdir()
    lock.write_bytes(b"")
    assert not metastore_in_use(tmp_path)                       # left behind by a JVM that exited
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert metastore_in_use(tmp_path)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert not metastore_in_use(tmp_path)


JARS = ["file:///c/io.delta_delta-spark_4.2_2.13-4.4.0.jar", "file:///c/com.fasterxml.jackson.core_jackson-core-2.13.5.jar",
        "file:///c/io.unitycatalog_unitycatalog-client-0.6.0.jar", "/c/io.delta_delta-storage-4.4.0.jar"]


def test_driver_class_path_has_the_delta_jars_only():
    # Delta's older jackson, parquet and hadoop would shadow Spark's own on the system class path.
    assert driver_class_path(JARS) == ("/c/io.delta_delta-spark_4.2_2.13-4.4.0.jar:"
                                       "/c/io.unitycatalog_unitycatalog-client-0.6.0.jar:/c/io.delta_delta-storage-4.4.0.jar")


def test_spark_sql_command_carries_the_session_settings(tmp_path):
    cfg = SparkConfig(master="local[1]", warehouse=tmp_path, app_name="shell", catalog="hive")
    cmd = spark_sql_command(cfg, JARS, tmp_path / "init.sql", ["-e", "SELECT 1"])
    assert Path(cmd[0]).name == "spark-sql"
    assert cmd[1:5] == ["--name", "shell", "--master", "local[1]"]
    assert cmd[-4:] == ["-i", str(tmp_path / "init.sql"), "-e", "SELECT 1"]
    confs = dict(c.split("=", 1) for c in cmd[6:-4:2])
    assert cmd[5:-4:2] == ["--conf"] * len(confs)
    assert confs == {**session_conf(cfg), "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                     "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                     "spark.jars": ",".join(JARS), "spark.driver.extraClassPath": driver_class_path(JARS)}


@pytest.mark.parametrize(("argv", "message"), [
    (["sql-shell", "SELECT 1"], "unexpected 'SELECT 1': spark-sql arguments go after --"),
    (["sql-shell", "-f", "/no/such.sql"], "-f /no/such.sql: no such file"),
    (["serve-sql", "--port", "0"], "port must be 1-65535, got 0"),
    (["serve-sql", "--refresh", "0"], "refresh must be > 0 seconds, got 0"),
])
def test_sql_command_usage_errors(capsys, argv, message):
    assert main(argv) == 2
    assert capsys.readouterr().err == f"blockheat: error: {message}\n"


def test_serve_sql_refuses_a_port_in_use(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve-sql", "--port", str(port)]) == 1
    assert capsys.readouterr().err == \
        f"blockheat: error: port {port} on 127.0.0.1 is in use (Address already in use); pick another with --port\n"
    assert ServeConfig(port).url == f"jdbc:hive2://127.0.0.1:{port}"


PG_URL = "jdbc:postgresql://127.0.0.1:5432/blockheat_metastore"


def metastore_env(tmp_path: Path, mode: int = 0o600, **more: str) -> dict[str, str]:
    secret = tmp_path / "metastore-password"
    secret.write_text("s3cret word\n")
    secret.chmod(mode)
    return {"BLOCKHEAT_METASTORE_URL": PG_URL, "BLOCKHEAT_METASTORE_USER": "blockheat_metastore",
            "BLOCKHEAT_METASTORE_PASSWORD_FILE": str(secret), **more}


def test_shared_metastore_settings_from_the_environment(tmp_path):
    assert SharedMetastore.from_env({}) is None                            # Derby under the warehouse
    shared = SharedMetastore.from_env(metastore_env(tmp_path))
    assert shared == SharedMetastore(PG_URL, "blockheat_metastore", "s3cret word")
    assert "s3cret" not in repr(shared)
    assert shared.environment() == {"BLOCKHEAT_METASTORE_PASSWORD": "s3cret word"}
    direct = SharedMetastore.from_env({"BLOCKHEAT_METASTORE_URL": PG_URL, "BLOCKHEAT_METASTORE_USER": "u",
                                       "BLOCKHEAT_METASTORE_PASSWORD": "pw"})
    assert direct == SharedMetastore(PG_URL, "u", "pw")


@pytest.mark.parametrize(("env", "message"), [
    ({"mode": 0o640}, "may be read by others than its owner (mode 0640): chmod 600 "),
    ({"mode": 0o604}, "may be read by others than its owner (mode 0604): chmod 600 "),
    ({"BLOCKHEAT_METASTORE_URL": "jdbc:mysql://db/metastore"}, "BLOCKHEAT_METASTORE_URL must be a PostgreSQL JDBC URL"),
    ({"BLOCKHEAT_METASTORE_USER": ""}, "BLOCKHEAT_METASTORE_USER is not set: the PostgreSQL role of jdbc:postgresql:"),
    ({"BLOCKHEAT_METASTORE_PASSWORD": "x"}, "set BLOCKHEAT_METASTORE_PASSWORD_FILE or BLOCKHEAT_METASTORE_PASSWORD, "
                                            "not both"),
    ({"BLOCKHEAT_METASTORE_PASSWORD_FILE": "/no/such/file"}, "BLOCKHEAT_METASTORE_PASSWORD_FILE=/no/such/file: No "
                                                             "such file or directory"),
])
def test_shared_metastore_refuses_unusable_settings(tmp_path, env, message):
    mode = env.pop("mode", 0o600)
    with pytest.raises(MetastoreConfigError, match=re.escape(message)):
        SharedMetastore.from_env(metastore_env(tmp_path, mode, **env))


def test_hive_settings_on_postgresql_keep_the_password_off_the_command_line(tmp_path, monkeypatch):
    for key, value in metastore_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    cfg = replace(SparkConfig.from_env("x"), warehouse=tmp_path / "wh")
    assert cfg.metastore == SharedMetastore(PG_URL, "blockheat_metastore", "s3cret word")
    jar = postgres_jar()
    assert jar.name == "postgresql-42.7.14.jar"                        # `make` fetched it into the environment
    expected = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": PG_URL,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName": "blockheat_metastore",
        "spark.hadoop.javax.jdo.option.ConnectionPassword": "${env.BLOCKHEAT_METASTORE_PASSWORD}",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.hadoop.datanucleus.autoStartMechanism": "MetaData",
        "spark.hadoop.datanucleus.autoStartMetaDataFiles": "package.jdo",
        "spark.driver.extraClassPath": str(jar)}
    assert hive_conf(cfg.warehouse, cfg.metastore) == expected
    for catalog in ("hive", "none"):          # the SQL entry points, and a job whose driver this process starts
        conf = session_conf(replace(cfg, catalog=catalog))
        assert {k: conf[k] for k in expected} == expected
        assert not [v for v in conf.values() if "s3cret" in v]
    assert "spark.sql.catalogImplementation" not in session_conf(replace(cfg, catalog="in-memory"))
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")               # under spark-submit the job stays by path
    assert "spark.sql.catalogImplementation" not in session_conf(cfg)
    shell = spark_sql_command(replace(cfg, catalog="hive"), JARS, None, [])
    assert f"spark.driver.extraClassPath={driver_class_path(JARS)}:{jar}" in shell
    assert f"spark.hadoop.javax.jdo.option.ConnectionURL={PG_URL}" in shell
    assert not [a for a in shell if "s3cret" in a]


def test_a_command_refuses_a_password_file_others_may_read(tmp_path, monkeypatch, capsys):
    for key, value in metastore_env(tmp_path, 0o644).items():
        monkeypatch.setenv(key, value)
    assert main(["sql", "SELECT 1"]) == 1
    assert capsys.readouterr().err == (f"blockheat: error: BLOCKHEAT_METASTORE_PASSWORD_FILE={tmp_path}/metastore-"
                                       f"password may be read by others than its owner (mode 0644): chmod 600 "
                                       f"{tmp_path}/metastore-password\n")


class _Raced(AnalysisException):
    """What a session gets when another one named the table between its check and its CREATE."""

    def getCondition(self) -> str:
        return "TABLE_OR_VIEW_ALREADY_EXISTS"


class _Session:
    """A session whose CREATE TABLE raises `error`; the shared catalog then holds the name or not (`named`)."""

    def __init__(self, error: Exception, named: bool) -> None:
        self.error, self.named, self.statements = error, named, []
        self.catalog = self

    def sql(self, statement: str) -> None:
        self.statements.append(statement)
        raise self.error

    def tableExists(self, name: str) -> bool:
        return self.named


def test_a_name_another_session_registered_meanwhile_is_taken_as_ours():
    raced = _Session(_Raced("[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view `requests`"), named=True)
    tables._register(raced, "requests", "/wh/requests")
    assert raced.statements == ["CREATE TABLE IF NOT EXISTS requests USING delta LOCATION '/wh/requests'"]
    assert "requests" in tables._REGISTERED[raced]
    # not a race: the name is still missing, or the CREATE failed for another reason
    for session in (_Session(_Raced("exists?"), named=False), _Session(AnalysisException("denied"), named=True)):
        with pytest.raises(AnalysisException):
            tables._register(session, "requests", "/wh/requests")
        assert "requests" not in tables._REGISTERED.get(session, set())

"""The SQL endpoints' secrets and settings without a JVM: a secret is made once, readable by its owner only, and
refused when others may read it; a server keeps its password and token in its warehouse's serve state; the token
goes into a Connect URL as pyspark sends it on loopback; a guarded session names Delta's extension and the guard;
the compiled access classes are in the environment, compiled from the shipped sources when missing."""
from __future__ import annotations

import zipfile

import pytest

from blockheat.libs.io import sql_access


def test_a_secret_is_made_once_for_its_owner_only(tmp_path):
    path = tmp_path / "_serve" / "token"
    first = sql_access.ensure_secret(path)
    assert len(first) == 43                                                         # 32 bytes, URL-safe base64
    assert first.replace("-", "").replace("_", "").isalnum()
    assert path.stat().st_mode & 0o777 == 0o600
    assert sql_access.ensure_secret(path) == first                                  # kept, not remade
    path.chmod(0o640)
    with pytest.raises(sql_access.SecretFileError, match=r"others may read it \(mode 640\); chmod 600 it"):
        sql_access.read_secret(path)


def test_settings_and_urls():
    assert sql_access.guard_conf(False) == {"spark.blockheat.allowWrites": "false", "spark.sql.runSQLOnFiles": "false"}
    assert sql_access.guard_conf(True)["spark.blockheat.allowWrites"] == "true"
    assert sql_access.thrift_auth_conf() == {
        "spark.hive.server2.authentication": "CUSTOM",
        "spark.driver.extraJavaOptions": "-Dhive.server2.custom.authentication.class="
                                         "io.blockheat.sql.PasswordFileAuthenticator"}
    assert sql_access.connect_url("sc://127.0.0.1:15099", "abc") == "sc://localhost:15099/;token=abc"


def test_the_access_classes_are_compiled_into_the_environment():
    with zipfile.ZipFile(sql_access.access_jar()) as jar:
        assert {"io/blockheat/sql/ReadOnlyGuard.class", "io/blockheat/sql/PasswordFileAuthenticator.class"} <= set(
            jar.namelist())


@pytest.mark.spark          # javac is a JVM
def test_a_missing_or_stale_jar_is_compiled_from_the_shipped_sources(tmp_path, monkeypatch):
    built = sql_access.access_jar(prefix=tmp_path)                    # none there yet: compiled on first use
    assert built == tmp_path / "var" / "blockheat" / "blockheat-sql-access.jar"
    with zipfile.ZipFile(built) as jar:
        assert {"io/blockheat/sql/ReadOnlyGuard.class", "io/blockheat/sql/PasswordFileAuthenticator.class"} <= set(
            jar.namelist())
    assert list(built.parent.iterdir()) == [built]                    # nothing left beside it
    stamp = built.stat().st_mtime_ns
    assert sql_access.access_jar(prefix=tmp_path) == built             # up to date: kept
    assert built.stat().st_mtime_ns == stamp
    monkeypatch.setattr(sql_access.shutil, "which", lambda _name: None)
    built.unlink()
    with pytest.raises(RuntimeError, match="not compiled yet and there is no JDK to compile them"):
        sql_access.access_jar(prefix=tmp_path)


def test_server_secrets_live_in_the_warehouses_serve_state(tmp_path, monkeypatch):
    warehouse = tmp_path / "wh"
    secrets = sql_access.ServerSecrets.ensure(warehouse)
    assert secrets.password_file == warehouse / "_serve" / "sql-password"
    assert sql_access.read_token(warehouse) == secrets.token != sql_access.read_secret(secrets.password_file)
    assert secrets.environment() == {"BLOCKHEAT_SQL_PASSWORD_FILE": str(secrets.password_file),
                                     "SPARK_CONNECT_AUTHENTICATE_TOKEN": secrets.token}
    assert sql_access.ServerSecrets.ensure(warehouse) == secrets                    # kept across starts
    (warehouse / "_serve" / "connect-token").chmod(0o644)
    with pytest.raises(sql_access.SecretFileError, match="others may read it"):
        sql_access.ServerSecrets.ensure(warehouse)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    remote = sql_access.serve_dir("s3a://bucket/wh")                                # no file modes there
    assert remote.parent == tmp_path / "state" / "blockheat" / "serve"
    assert remote == sql_access.serve_dir("s3a://bucket/wh") != sql_access.serve_dir("s3a://bucket/other")


def test_a_clients_session_settings():
    assert sql_access.client_conf("t0k", allow_writes=True) == {"spark.blockheat.allowWrites": "true",
                                                                "spark.blockheat.writeKey": "t0k"}
    assert sql_access.client_conf("t0k", allow_writes=False) == {"spark.blockheat.allowWrites": "false"}


def test_a_guarded_session_names_delta_and_the_guard(tmp_path):
    from blockheat.libs.io.session import SparkConfig, session_conf

    conf = session_conf(SparkConfig(warehouse=tmp_path, sql_guard=True))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension,io.blockheat.sql.ReadOnlyGuard"
    assert conf["spark.blockheat.allowWrites"] == "false"
    assert conf["spark.sql.runSQLOnFiles"] == "false"
    assert str(sql_access.access_jar()) in conf["spark.driver.extraClassPath"].split(":")
    assert "spark.sql.extensions" not in session_conf(SparkConfig(warehouse=tmp_path))

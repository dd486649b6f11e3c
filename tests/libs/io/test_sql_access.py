"""The SQL endpoints' secrets and settings: a secret is made once, readable by its owner only, and
refused when others may read it; a server keeps its password and token in its warehouse's serve state; the token
goes into a Connect URL as pyspark sends it on loopback; a guarded session names Delta's extension and the guard;
the compiled access classes are in the environment, compiled from the shipped sources when missing; and, in a JVM
of its own, a server's statement waits while the journal holds an unfinished commit (CommitBarrier)."""
from __future__ import annotations

import os
import subprocess
import sys
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
    assert sql_access.guard_conf(False) == {"spark.blockheat.allowWrites": "false", "spark.sql.runSQLOnFiles": "false",
                                            "spark.sql.variable.substitute": "false"}
    assert sql_access.guard_conf(True)["spark.blockheat.allowWrites"] == "true"
    assert sql_access.thrift_auth_conf() == {
        "spark.hive.server2.authentication": "CUSTOM",
        "spark.driver.extraJavaOptions": "-Dhive.server2.custom.authentication.class="
                                         "io.blockheat.sql.PasswordFileAuthenticator"}
    assert sql_access.connect_url("sc://127.0.0.1:15099", "abc") == "sc://localhost:15099/;token=abc"


def test_the_access_classes_are_compiled_into_the_environment():
    with zipfile.ZipFile(sql_access.access_jar()) as jar:
        assert {"io/blockheat/sql/ReadOnlyGuard.class", "io/blockheat/sql/PasswordFileAuthenticator.class",
                "io/blockheat/sql/GuardParser.class",
                "io/blockheat/sql/CommitBarrier.class"} <= set(jar.namelist())


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
    assert sql_access.client_conf(allow_writes=True) == {}            # the server decides from the credential
    assert sql_access.client_conf(allow_writes=False) == {"spark.blockheat.readOnly": "true"}      # the seal
    assert sql_access.client_conf(allow_writes=True, job=True) == {"spark.blockheat.awaitCommits": "false"}


def test_a_guarded_session_names_delta_and_the_guard(tmp_path):
    from blockheat.libs.io.session import SparkConfig, session_conf

    conf = session_conf(SparkConfig(warehouse=tmp_path, sql_guard=True))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension,io.blockheat.sql.ReadOnlyGuard"
    assert conf["spark.blockheat.allowWrites"] == "false"
    assert conf["spark.sql.runSQLOnFiles"] == "false"
    assert str(sql_access.access_jar()) in conf["spark.driver.extraClassPath"].split(":")
    assert "spark.sql.extensions" not in session_conf(SparkConfig(warehouse=tmp_path))


# A guarded session whose application waits on the journal JOURNAL (3 s at most), in a JVM of its own: a statement
# while an entry is there, one whose entry goes after 1 s, and one of a session that does not wait.
BARRIER = """
import sys, threading, time
from pathlib import Path
from blockheat.libs.io.session import SparkConfig, build_session
journal, warehouse = Path(sys.argv[1]), Path(sys.argv[2])
spark = build_session(SparkConfig(warehouse=warehouse, master="local[1]", sql_guard=True, catalog="in-memory",
                                  extra={"spark.blockheat.journal": str(journal),
                                         "spark.blockheat.awaitCommitsSeconds": "3"}))
spark.sql("SELECT 0").collect()                 # the JVM's first query, before any timing
entry = journal / "0001.json"
journal.mkdir()
entry.write_text("{}")
started = time.monotonic()
try:
    spark.sql("SELECT 1").collect()
    print("ANSWERED")
except Exception as exc:
    print("REFUSED", round(time.monotonic() - started), " ".join(str(exc).split())[:600])
threading.Timer(1.0, entry.unlink).start()
started = time.monotonic()
print("ANSWER", spark.sql("SELECT 2").collect()[0][0], round(time.monotonic() - started, 2))
entry.write_text("{}")
spark.conf.set("spark.blockheat.awaitCommits", "false")
started = time.monotonic()
print("ANSWER", spark.sql("SELECT 3").collect()[0][0], round(time.monotonic() - started, 2))
"""


@pytest.mark.spark          # a JVM of its own
def test_a_served_statement_waits_for_the_journal(tmp_path):
    done = subprocess.run([sys.executable, "-c", BARRIER, str(tmp_path / "_journal"), str(tmp_path / "wh")],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr[-3000:]
    refused, waited, at_once = done.stdout.splitlines()[-3:]
    assert refused.startswith("REFUSED 3 "), refused
    assert "the tables are between the commits of an ingest for over 3.0 s" in refused
    assert f"journal entry file:{tmp_path / '_journal' / '0001.json'}" in refused
    # waited for the entry to go (1 s), answered before the 3 s limit; the session that does not wait answers while
    # an entry stays (a waiting one would be refused after 3 s)
    answer, seconds = waited.split()[1:]
    assert answer == "2", waited
    assert 1.0 <= float(seconds) < 3.0, waited
    answer, seconds = at_once.split()[1:]
    assert answer == "3", at_once
    assert float(seconds) < 1.0, at_once

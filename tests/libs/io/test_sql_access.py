"""The SQL endpoints' secrets and settings without a JVM: a secret is made once, readable by its owner only, and
refused when others may read it; the token goes into a Connect URL as pyspark sends it on loopback; the compiled
access classes are in the environment."""
from __future__ import annotations

import zipfile

import pytest

from libs.io import sql_access


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
        "spark.hive.server2.custom.authentication.class": "io.blockheat.sql.PasswordFileAuthenticator"}
    assert sql_access.connect_url("sc://127.0.0.1:15099", "abc") == "sc://localhost:15099/;token=abc"


def test_the_access_classes_are_compiled_into_the_environment():
    with zipfile.ZipFile(sql_access.access_jar()) as jar:
        assert {"io/blockheat/sql/ReadOnlyGuard.class", "io/blockheat/sql/PasswordFileAuthenticator.class"} <= set(
            jar.namelist())

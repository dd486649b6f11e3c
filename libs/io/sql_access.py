"""Who may use the SQL endpoints, and what they may do: the settings of blockheat's SQL access classes
(infra/spark/sql-access, compiled by `make` into the environment) and the secrets the servers hand their owner.

- Read-only sessions: ReadOnlyGuard (a Spark SQL extension) refuses at analysis every command that writes or changes
  a table, a script (TRANSFORM) and SQL's SET of the protected settings, unless the session's ALLOW_WRITES is true;
  file queries (`SELECT * FROM text.`/etc/...``) are off (spark.sql.runSQLOnFiles).
- The Thrift JDBC/ODBC endpoint: HiveServer2's CUSTOM authentication with PasswordFileAuthenticator, whose password
  is the first line of a file only its owner may read (PASSWORD_FILE_ENV in the server's environment).
- The Spark Connect endpoint: Spark's pre-shared token (SPARK_CONNECT_AUTHENTICATE_TOKEN in the server's
  environment); clients give it in the URL, sc://localhost:PORT/;token=... (pyspark sends a token without TLS only
  to "localhost").
"""
from __future__ import annotations

import os
import secrets
import stat
import sys
from pathlib import Path

GUARD_EXTENSION = "io.blockheat.sql.ReadOnlyGuard"
AUTHENTICATOR = "io.blockheat.sql.PasswordFileAuthenticator"
#: The session setting that lets a session write (ReadOnlyGuard's ALLOW_WRITES).
ALLOW_WRITES = "spark.blockheat.allowWrites"
PASSWORD_FILE_ENV = "BLOCKHEAT_SQL_PASSWORD_FILE"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


class SecretFileError(PermissionError):
    """A secret file that others may read, or that is not this user's."""


def access_jar(prefix: str | Path | None = None) -> Path:
    """The compiled SQL access classes of the environment at `prefix` (default: this interpreter's)."""
    path = Path(sys.prefix if prefix is None else prefix) / "var" / "blockheat" / "blockheat-sql-access.jar"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: blockheat's SQL access classes are missing; run `make` (needs javac)")
    return path


def guard_conf(allow_writes: bool) -> dict[str, str]:
    """Session settings of a guarded session (the extension itself goes into spark.sql.extensions beside
    Delta's): read-only unless allow_writes, and no queries on files either way."""
    return {ALLOW_WRITES: "true" if allow_writes else "false", "spark.sql.runSQLOnFiles": "false"}


def thrift_auth_conf() -> dict[str, str]:
    """The Thrift server's settings for the password check (Spark passes spark.hive.* to HiveServer2)."""
    return {"spark.hive.server2.authentication": "CUSTOM",
            "spark.hive.server2.custom.authentication.class": AUTHENTICATOR}


def read_secret(path: Path) -> str:
    """The first line of a secret file that only its owner, this user, may read (SecretFileError otherwise)."""
    info = path.stat()
    if info.st_uid != os.getuid():
        raise SecretFileError(f"{path}: owned by uid {info.st_uid}, not by this user")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretFileError(f"{path}: others may read it (mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it")
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].strip() if lines else ""


def ensure_secret(path: Path) -> str:
    """The secret in `path`, made (32 random bytes, URL-safe) with mode 600 when there is none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_secret(path)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(secrets.token_urlsafe(32) + "\n")
    return read_secret(path)


def connect_url(url: str, token: str) -> str:
    """A Spark Connect URL of a loopback server (sc://127.0.0.1:PORT) with its token, as pyspark sends it there."""
    host_port = url.removeprefix("sc://").split("/", 1)[0]
    port = host_port.rsplit(":", 1)[1]
    return f"sc://localhost:{port}/;token={token}"


__all__ = ["ALLOW_WRITES", "AUTHENTICATOR", "GUARD_EXTENSION", "PASSWORD_FILE_ENV", "TOKEN_ENV", "SecretFileError",
           "access_jar", "connect_url", "ensure_secret", "guard_conf", "read_secret", "thrift_auth_conf"]

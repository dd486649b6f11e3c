"""Who may use the SQL endpoints, and what they may do: the settings of blockheat's SQL access classes
(libs/io/java, shipped as sources and compiled into the environment on first use) and the secrets the servers hand
their owner.

- Read-only sessions: ReadOnlyGuard (a Spark SQL extension) refuses at analysis, statement by statement, every
  command that writes or changes a table, Java calls (reflect), SQL's SET of the protected settings and file queries
  (`SELECT * FROM text.`/etc/...``, spark.sql.runSQLOnFiles), and a script (TRANSFORM) in any session; its parser
  (GuardParser) never substitutes `${env:...}` and the like. The server decides which sessions write, from how
  the client authenticated: every session when the application allows writes (ALLOW_WRITES in its Spark
  configuration: a server's --allow-writes), otherwise only Spark Connect clients, which hold the owner's token;
  JDBC users (the password) read. A client that holds the token seals its session read-only (READ_ONLY,
  client_conf) for good: `blockheat sql` without --allow-writes.
- The Thrift JDBC/ODBC endpoint: HiveServer2's CUSTOM authentication with PasswordFileAuthenticator, whose password
  is the first line of a file only its owner may read (PASSWORD_FILE_ENV in the server's environment).
- The Spark Connect endpoint: Spark's pre-shared token (TOKEN_ENV in the server's environment); clients give it in
  the URL, sc://localhost:PORT/;token=... (pyspark sends a token without TLS only to "localhost").

A server keeps both secrets in its warehouse's serve state (serve_dir), made on its first start.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from blockheat.libs.io import redaction, storage

GUARD_EXTENSION = "io.blockheat.sql.ReadOnlyGuard"
AUTHENTICATOR = "io.blockheat.sql.PasswordFileAuthenticator"
#: The application setting that lets every session write (ReadOnlyGuard's ALLOW_WRITES).
ALLOW_WRITES = "spark.blockheat.allowWrites"
#: The session setting that seals a session read-only for good (ReadOnlyGuard's READ_ONLY).
READ_ONLY = "spark.blockheat.readOnly"
#: A server's setting: the journal its sessions wait on before a statement (CommitBarrier's JOURNAL).
AWAIT_JOURNAL = "spark.blockheat.journal"
#: The session setting that reads without waiting for the journal (CommitBarrier's AWAIT).
AWAIT_COMMITS = "spark.blockheat.awaitCommits"
PASSWORD_FILE_ENV = "BLOCKHEAT_SQL_PASSWORD_FILE"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


class SecretFileError(PermissionError):
    """A secret file that others may read, or that is not this user's."""


#: The Java sources of the access classes, shipped in the package.
JAVA_SOURCES = Path(__file__).with_name("java")


def _sources() -> list[Path]:
    return sorted(JAVA_SOURCES.rglob("*.java"))


def access_jar(prefix: str | Path | None = None) -> Path:
    """The compiled SQL access classes of the environment at `prefix` (default: this interpreter's), compiled from
    the shipped sources on first use (build_access_jar) when missing or older than the sources."""
    path = Path(sys.prefix if prefix is None else prefix) / "var" / "blockheat" / "blockheat-sql-access.jar"
    if path.is_file() and max(s.stat().st_mtime for s in _sources()) <= path.stat().st_mtime:
        return path
    return build_access_jar(path)


def build_access_jar(path: Path) -> Path:
    """Compile the shipped sources against pyspark's jars with the JDK's javac and jar into `path` (written whole
    or not at all); RuntimeError saying what is missing when there is no JDK."""
    import pyspark  # the jars the classes compile against

    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        raise RuntimeError(f"{path}: blockheat's SQL access classes are not compiled yet and there is no JDK to "
                           "compile them (javac and jar of Java 17 on PATH)")
    path.parent.mkdir(parents=True, exist_ok=True)
    classpath = str(Path(pyspark.__file__).parent / "jars" / "*")
    with tempfile.TemporaryDirectory(prefix="sql-access-", dir=path.parent) as tmp:
        classes, part = Path(tmp) / "classes", Path(tmp) / "access.jar"
        for cmd in ([javac, "-nowarn", "-d", str(classes), "-cp", classpath, *map(str, _sources())],
                    [jar, "cf", str(part), "-C", str(classes), "io"]):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"compiling blockheat's SQL access classes into {path} failed: "
                                   f"{(done.stderr or done.stdout).strip()[-2000:]}")
        os.replace(part, path)
    return path


def guard_conf(allow_writes: bool) -> dict[str, str]:
    """The application settings of a guarded Spark application (the extension itself goes into spark.sql.extensions
    beside Delta's): every session writes if allow_writes (otherwise the owner's Spark Connect clients only), no
    session queries files, and variables are not substituted (the guard's parser sees to that in any case)."""
    return {ALLOW_WRITES: "true" if allow_writes else "false", "spark.sql.runSQLOnFiles": "false",
            "spark.sql.variable.substitute": "false"}


def client_conf(allow_writes: bool, job: bool = False) -> dict[str, str]:
    """The settings a client of a guarded server gives its own session: none to write as the server lets it, or the
    seal that keeps it read-only whatever the server allows; a job (which finishes the journal itself before it
    starts, libs.io.journal) reads without waiting for the server's journal."""
    return {**({} if allow_writes else {READ_ONLY: "true"}), **({AWAIT_COMMITS: "false"} if job else {})}


def thrift_auth_conf() -> dict[str, str]:
    """The Thrift server's settings for the password check: the method through Spark (which passes spark.hive.* to
    HiveServer2), the class as a system property of the driver's JVM, since HiveServer2 reads it from a HiveConf
    of its own, made from hive-site.xml and the system properties."""
    return {"spark.hive.server2.authentication": "CUSTOM",
            "spark.driver.extraJavaOptions": f"-Dhive.server2.custom.authentication.class={AUTHENTICATOR}"}


def read_secret(path: Path) -> str:
    """The first line of a secret file that only its owner, this user, may read (SecretFileError otherwise),
    registered with libs.io.redaction so that it is never printed."""
    info = path.stat()
    if info.st_uid != os.getuid():
        raise SecretFileError(f"{path}: owned by uid {info.st_uid}, not by this user")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretFileError(f"{path}: others may read it (mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it")
    lines = path.read_text(encoding="utf-8").splitlines()
    secret = lines[0].strip() if lines else ""
    redaction.register(secret)                  # never printed from now on
    return secret


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


SERVE_DIR = "_serve"
PASSWORD_FILE = "sql-password"
TOKEN_FILE = "connect-token"


def serve_dir(warehouse: str | os.PathLike[str]) -> Path:
    """Where the servers of `warehouse` keep their secrets: <warehouse>/_serve for a local warehouse (beside the
    endpoint file, libs.io.endpoint), a directory of this user's ($XDG_STATE_HOME/blockheat/serve/<hash of the
    URI>) for one in an object store, which has no file modes."""
    if storage.is_local(warehouse):
        return Path(storage.normalize(warehouse)) / SERVE_DIR
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256(storage.normalize(warehouse).encode()).hexdigest()[:16]
    return state / "blockheat" / "serve" / digest


@dataclass(frozen=True)
class ServerSecrets:
    """A server's JDBC password file and its Spark Connect token."""

    password_file: Path
    token: str

    @classmethod
    def ensure(cls, warehouse: str | os.PathLike[str]) -> ServerSecrets:
        """The secrets of `warehouse`'s servers, each made on first use (mode 600); SecretFileError when one is
        another user's or others may read it."""
        home = serve_dir(warehouse)
        password = home / PASSWORD_FILE
        ensure_secret(password)
        return cls(password, ensure_secret(home / TOKEN_FILE))

    def environment(self) -> dict[str, str]:
        """The server's environment for both checks (never its command line, which every user can list)."""
        return {PASSWORD_FILE_ENV: str(self.password_file), TOKEN_ENV: self.token}


def read_token(warehouse: str | os.PathLike[str]) -> str:
    """The Spark Connect token of `warehouse`'s server (FileNotFoundError, SecretFileError)."""
    return read_secret(serve_dir(warehouse) / TOKEN_FILE)


def connect_port(url: str) -> str:
    """The port of a Spark Connect URL (sc://host:port, parameters after a slash)."""
    return url.removeprefix("sc://").split("/", 1)[0].rsplit(":", 1)[1]


def connect_url(url: str, token: str) -> str:
    """A Spark Connect URL of a loopback server (sc://127.0.0.1:PORT) with its token, as pyspark sends it there."""
    return f"sc://localhost:{connect_port(url)}/;token={token}"


__all__ = ["ALLOW_WRITES", "AUTHENTICATOR", "AWAIT_COMMITS", "AWAIT_JOURNAL", "GUARD_EXTENSION", "PASSWORD_FILE",
           "PASSWORD_FILE_ENV", "READ_ONLY", "TOKEN_ENV", "TOKEN_FILE", "SecretFileError", "ServerSecrets",
           "access_jar", "build_access_jar", "client_conf", "connect_port", "connect_url", "ensure_secret",
           "guard_conf", "read_secret", "read_token", "serve_dir", "thrift_auth_conf"]

"""A Spark Connect server with this product's session settings (Delta Lake, the object store, the warehouse, the
Python workers), for `BLOCKHEAT_SPARK_REMOTE=sc://host:port` clients: `blockheat connect-server` runs one, and the
tests start one on loopback.

The server is pyspark's own (org.apache.spark.sql.connect.service.SparkConnectServer, in pyspark's jars) started by
spark-submit, so it runs where Spark runs: its master (local[N] here, a cluster's elsewhere) executes every client's
queries and Python functions, with the Python of this environment.

    with ConnectServer.start(SparkConfig(master="local[2]", warehouse=Path("wh")), port=15002) as server:
        os.environ["BLOCKHEAT_SPARK_REMOTE"] = server.url            # sc://127.0.0.1:15002
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pyspark

from blockheat.libs.io.session import DELTA_CONF, SparkConfig, delta_jars, session_conf

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Spark Connect as a plugin of another Spark application (the Thrift server of `blockheat serve-sql`).
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
DEFAULT_PORT = 15002


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(cfg: SparkConfig, host: str, port: int, main_class: str = SERVER_CLASS,
                   extra: dict[str, str] | None = None) -> list[str]:
    """The spark-submit command line of a Connect server for `cfg` listening on host:port (or of another server
    application, `main_class`, with `extra` settings)."""
    conf = {**DELTA_CONF, **session_conf(cfg), "spark.connect.grpc.binding.address": host,
            "spark.connect.grpc.binding.port": str(port), "spark.app.name": cfg.app_name, **(extra or {})}
    cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--class", main_class,
           "--jars", ",".join(delta_jars())]
    if cfg.master:
        cmd += ["--master", cfg.master]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, "spark-internal"]


def server_env(cfg: SparkConfig, secrets: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this Python for its workers, the driver's address, the shared metastore's password
    and `secrets` (libs.io.sql_access.ServerSecrets.environment)."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    if cfg.driver_host != "auto":
        env.setdefault("SPARK_LOCAL_IP", cfg.driver_host)
    if cfg.metastore is not None:       # the shared metastore's password, which its settings name (libs.io.catalog)
        env.update(cfg.metastore.environment())
    env.update(secrets or {})
    return env


@dataclass
class ConnectServer:
    """A running Connect server (stop() ends it)."""

    process: subprocess.Popen[bytes]
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @classmethod
    def start(cls, cfg: SparkConfig, host: str = "127.0.0.1", port: int = 0, *, log_path: Path | None = None,
              timeout_s: float = 180.0, main_class: str = SERVER_CLASS, extra: dict[str, str] | None = None,
              secrets: dict[str, str] | None = None) -> ConnectServer:
        """Start a server (port 0: a free one; `secrets` in its environment, see server_env) and wait until its
        Connect endpoint accepts connections; RuntimeError naming its log when it exits or does not answer in
        time."""
        port = port or free_port(host)
        log = open(log_path, "wb") if log_path else subprocess.DEVNULL      # noqa: SIM115  the server's life
        process = subprocess.Popen(server_command(cfg, host, port, main_class, extra), env=server_env(cfg, secrets),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        server = cls(process, host, port)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with code {process.returncode}"
                                   + (f" (see {log_path})" if log_path else ""))
            try:
                socket.create_connection((host, port), timeout=1).close()
                return server
            except OSError:
                time.sleep(0.2)
        server.stop()
        raise RuntimeError(f"the Spark Connect server did not answer on {host}:{port} in {timeout_s:.0f} s")

    def stop(self, timeout_s: float = 60.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


__all__ = ["CONNECT_PLUGIN", "DEFAULT_PORT", "ConnectServer", "free_port", "server_command", "server_env"]

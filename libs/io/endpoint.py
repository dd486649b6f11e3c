"""Where a running `blockheat serve` of a warehouse listens: a small JSON file under the warehouse.

`blockheat serve` writes `<warehouse>/_serve/endpoint.json` once its endpoints answer and removes it when it stops;
every other command reads it (libs.io.session.SparkConfig.from_env) and attaches to the server's Spark Connect
endpoint instead of starting a JVM of its own. A file left by a server that died (another host, a pid that is gone,
a port that does not answer) is ignored.

    {"connect": "sc://127.0.0.1:15002", "jdbc": "jdbc:hive2://127.0.0.1:10000", "host": "node-1", "pid": 4242}
"""
from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import asdict, dataclass
from urllib.parse import urlparse

from blockheat.libs.io import sql_access, storage

log = logging.getLogger(__name__)

Location = str | os.PathLike[str]

FILE = ("_serve", "endpoint.json")
# How long a command waits for the server's port before starting its own JVM instead.
PROBE_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class Endpoint:
    """The endpoints of one running server and the process that holds them."""

    connect: str            # sc://host:port
    jdbc: str               # jdbc:hive2://host:port
    host: str               # socket.gethostname() of the server
    pid: int

    def answers(self) -> bool:
        """Whether the server process lives on this host and its Connect port accepts a connection."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass                                    # alive, another user's
        url = urlparse(self.connect.replace("sc://", "http://", 1))
        try:
            socket.create_connection((url.hostname, url.port), timeout=PROBE_TIMEOUT_S).close()
        except OSError:
            return False
        return True


def path(warehouse: Location) -> str:
    """The endpoint file of a warehouse."""
    return storage.join(storage.normalize(warehouse), *FILE)


def write(warehouse: Location, endpoint: Endpoint) -> None:
    """Publish a server's endpoints (replacing any earlier file)."""
    target = path(warehouse)
    storage.makedirs(storage.parent(target))
    storage.write_bytes(target, json.dumps(asdict(endpoint), indent=1).encode())


def remove(warehouse: Location, endpoint: Endpoint) -> None:
    """Withdraw `endpoint` (only if the file still names it: a later server's file stays)."""
    if read(warehouse) == endpoint:
        storage.delete(path(warehouse))


def read(warehouse: Location) -> Endpoint | None:
    """The published endpoint, answering or not; None without a readable file."""
    try:
        return Endpoint(**json.loads(storage.read_bytes(path(warehouse))))
    except (FileNotFoundError, OSError, ValueError, TypeError):
        return None


def find(warehouse: Location) -> Endpoint | None:
    """The running server of this warehouse, if one answers on this host."""
    endpoint = read(warehouse)
    return endpoint if endpoint is not None and endpoint.answers() else None


def attached(warehouse: Location) -> Endpoint | None:
    """The running server a command of this warehouse attaches to (libs.io.session.SparkConfig.from_env): none when
    BLOCKHEAT_SPARK_REMOTE names a server or is "local", under spark-submit (its own driver), when no server answers,
    or when this user cannot read the server's Spark Connect token (another user's command starts a JVM of its own
    instead)."""
    found = attached_with_token(warehouse)
    return None if found is None else found[0]


def attached_with_token(warehouse: Location) -> tuple[Endpoint, str] | None:
    """attached(warehouse) and the server's Spark Connect token, read once."""
    if os.environ.get("BLOCKHEAT_SPARK_REMOTE") or "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    running = find(warehouse)
    if running is None:
        return None
    try:
        token = sql_access.read_token(warehouse)
    except (OSError, sql_access.SecretFileError) as exc:
        log.info("not attaching to the warehouse's server: %s", exc)
        return None
    return running, token


__all__ = ["Endpoint", "attached", "attached_with_token", "find", "path", "read", "remove", "write"]

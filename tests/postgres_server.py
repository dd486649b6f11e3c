"""A real PostgreSQL server for the tests: Debian's PostgreSQL, started by infra/postgres/local-cluster.sh in a fresh
directory on a free loopback port, with the cluster script's databases (blockheat_metastore, airflow; each owned by a
role of its name whose password is its name). About 3 s to start, the cluster created anew each time.

The directory is made in the system's temporary directory, not under pytest's: run as root, the server runs as the
`postgres` user, who may not enter pytest's root-only temporary folders.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from blockheat.libs.io.connect_server import free_port

SCRIPT = Path(__file__).resolve().parent.parent / "infra" / "postgres" / "local-cluster.sh"
METASTORE_DB = "blockheat_metastore"


@dataclass(frozen=True)
class PostgresServer:
    """Where a running cluster listens and keeps its data."""

    port: int
    directory: Path

    def jdbc_url(self, database: str = METASTORE_DB) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}"

    def metastore_environment(self, password_file: Path) -> dict[str, str]:
        """The BLOCKHEAT_METASTORE_* variables of the shared catalog on this server (libs.io.catalog), its password
        written to `password_file` (mode 600)."""
        password_file.write_text(f"{METASTORE_DB}\n")
        password_file.chmod(0o600)
        return {"BLOCKHEAT_METASTORE_URL": self.jdbc_url(), "BLOCKHEAT_METASTORE_USER": METASTORE_DB,
                "BLOCKHEAT_METASTORE_PASSWORD_FILE": str(password_file)}


@contextmanager
def running_postgres(prefix: str = "blockheat-pg-") -> Iterator[PostgresServer]:
    """A cluster for the block's duration, then stopped and its directory removed."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        port = free_port()
        done = subprocess.run(["bash", str(SCRIPT), "start", str(directory), str(port)], capture_output=True,
                              text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr[-3000:]}")
        yield PostgresServer(port, directory)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=120, check=False)
        shutil.rmtree(directory, ignore_errors=True)

"""One writer per trace id (libs.io.lease): two `blockheat ingest` commands of the same trace id run one after the
other; the first killed at each boundary of its commit, or stopped (SIGSTOP) between its commits past its lease,
leaves the second's trace whole, never a left-over journal entry of the first applied over it. Afterwards
`traces`, `requests` and `rejected_records` agree (test_atomic_ingest.read_back).

The commands are real processes (tests.libs.ingest.crash_at), clients of one Spark Connect server.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from blockheat.libs.io import journal, lease
from tests.libs.ingest.test_atomic_ingest import REPO, SOURCES, TRACE, connect_server, read_back

LEASE_S = "3"


def start(warehouse: Path, remote: str, fmt: str, point: str = "none", action: str = "kill",
          gate: Path | None = None) -> subprocess.Popen[str]:
    """`blockheat ingest` of TRACE from SOURCES[fmt] in a session of its own, stopped at `point` (crash_at); with
    `gate`, it writes its journal entry only once that file exists."""
    env = {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "PYSPARK_PYTHON": sys.executable,
           "BLOCKHEAT_SPARK_REMOTE": remote, "BLOCKHEAT_SPARK_MASTER": "local[2]", lease.LEASE_ENV: LEASE_S}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    if gate is not None:
        env["BLOCKHEAT_TEST_GATE"] = str(gate)
    return subprocess.Popen([sys.executable, "-m", "tests.libs.ingest.crash_at", point, action, "--", "ingest",
                             "--format", fmt, "--trace-id", TRACE, *SOURCES[fmt]], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def until(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def holds_lease(process: subprocess.Popen[str], warehouse: Path) -> bool:
    held = lease.current_lease(warehouse, TRACE)
    return held is not None and held.pid == process.pid and held.live()


def finished(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    """The command's exit code and stderr; killed with its process group when it takes longer than `timeout`."""
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return process.returncode, err


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Spark Connect server for the ingests (local[1]): its URL."""
    with connect_server(tmp_path_factory.mktemp("one-writer-server"), "blockheat-one-writer-test", 1) as url:
        yield url


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "wh"


@pytest.mark.spark          # a Spark Connect server (server)
def test_two_ingests_of_one_trace_run_one_after_the_other(warehouse: Path, server: str, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    first = start(warehouse, server, "msr", "none", "kill", gate)
    until(lambda: holds_lease(first, warehouse), "the first ingest takes the lease")
    second = start(warehouse, server, "blkparse")
    time.sleep(5)               # the second waits for the lease (without it: loads its files and commits first)
    gate.touch()
    assert finished(first)[0] == 0
    code, err = finished(second)
    assert code == 0, err
    assert journal.pending(warehouse) == []
    assert read_back(warehouse) == "blkparse"


@pytest.mark.spark          # a Spark Connect server (server)
def test_the_first_ingest_killed_at_each_commit_boundary_leaves_the_second_s_trace(
        warehouse: Path, server: str, tmp_path: Path) -> None:
    for point in ("entry", "step-0", "step-1", "step-2", "done"):
        gate = tmp_path / f"gate-{point}"
        first = start(warehouse, server, "msr", point, "kill", gate)
        until(lambda p=first: holds_lease(p, warehouse), f"{point}: the first ingest takes the lease")
        second = start(warehouse, server, "blkparse")
        time.sleep(5)           # without the lease the second sweeps the journal before the first decides
        gate.touch()
        assert finished(first)[0] == -9, point
        code, err = finished(second)
        assert code == 0, (point, err)
        assert read_back(warehouse) == "blkparse", point


@pytest.mark.spark          # a Spark Connect server (server)
def test_an_ingest_stopped_past_its_lease_commits_nothing_more(warehouse: Path, server: str) -> None:
    first = start(warehouse, server, "msr", "step-1", "stop")
    until(lambda: Path(f"/proc/{first.pid}/stat").read_text().split(") ")[1].startswith("T"),
          "the first ingest stops between its commits")
    try:
        second = start(warehouse, server, "blkparse")
        code, err = finished(second, timeout=180)
        assert code == 0, err
    finally:
        os.kill(first.pid, signal.SIGCONT)
    code, err = finished(first)
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"blockheat: error: trace {TRACE}: this ingest's lock "), last
    assert "expired while it was stopped and another ingest took it over" in last
    assert read_back(warehouse) == "blkparse"
    assert lease.current_lease(warehouse, TRACE).released

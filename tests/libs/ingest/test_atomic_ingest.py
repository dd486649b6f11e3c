"""An ingest is all or nothing across `requests`, `rejected_records` and `traces` (libs.io.journal): a re-ingest
or an append killed at each boundary of its commit, or stopped by a full disk, leaves every later reader the whole
old trace or the whole new one, with records_read = accepted + rejected = the rows each table holds for it.

The ingests run as `blockheat` commands in sessions of their own, killed with their process tree. The journal and
the commits run in the command's own Python process, so most of them are clients of one Spark Connect server (the
tasks that wrote the files have finished when the process dies); the issue's case, a kill just after the `requests`
commit, also runs with the command's own Spark JVM, killed with it.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from blockheat.jobs.cli.main import main
from blockheat.libs.io import delta_log, journal
from blockheat.libs.io.connect_server import ConnectServer
from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from blockheat.libs.io.session import SparkConfig
from tests.builders import write_msr
from tests.jobs.cli.test_faults import tmpfs
from tests.libs.ingest.crash_at import FILLER, fill

TRACE = "t"
REPO = Path(__file__).resolve().parents[3]
AGREE = REPO / "tests" / "data" / "agree"
# The three ways an ingest writes its files: clean text by tasks, the general path, vSCSI by tasks.
SOURCES = {"msr": [str(AGREE / "msr_fix_0.csv")], "blkparse": [str(AGREE / "blkparse.txt")],
           "vscsi": [str(AGREE / "dev0.v1.vscsi"), str(AGREE / "dev1.v1.vscsi")]}


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A small file system of its own (tmpfs), so a test can fill it."""
    with tmpfs(tmp_path_factory.mktemp("atomic") / "disk", "size=24m") as mount:
        yield mount


@contextlib.contextmanager
def connect_server(tmp: Path, app: str, cores: int) -> Iterator[str]:
    """A Spark Connect server on local[cores] for the ingests of a test module (short-lived JVM options): its URL."""
    cfg = SparkConfig(master=f"local[{cores}]", warehouse=tmp / "wh", app_name=app,
                      extra={"spark.sql.shuffle.partitions": str(cores), "spark.default.parallelism": str(cores),
                             "spark.driver.extraJavaOptions": " ".join(SHORT_JOB_OPTIONS)})
    with ConnectServer.start(cfg, log_path=tmp / "connect-server.log") as running:
        yield running.url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Spark Connect server for the ingests: its URL."""
    with connect_server(tmp_path_factory.mktemp("atomic-server"), "blockheat-atomic-test", 2) as url:
        yield url


def run(warehouse: Path, remote: str, point: str, action: str, *command: str) -> subprocess.CompletedProcess[str]:
    """A `blockheat` command in a session of its own (so a kill takes its JVM too), stopped at `point`."""
    env = {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "PYSPARK_PYTHON": sys.executable,
           "BLOCKHEAT_SPARK_REMOTE": remote, "BLOCKHEAT_SPARK_MASTER": "local[2]"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return subprocess.run([sys.executable, "-m", "tests.libs.ingest.crash_at", point, action, "--", *command],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, start_new_session=True)


def ingest(warehouse: Path, remote: str, fmt: str, point: str = "none",
           action: str = "kill") -> subprocess.CompletedProcess[str]:
    return run(warehouse, remote, point, action, "ingest", "--format", fmt, "--trace-id", TRACE, *SOURCES[fmt])


def traces(warehouse: Path) -> tuple[int, str, str]:
    """`blockheat traces --json` on the warehouse (a reader: it finishes a decided commit first): exit code, stdout
    and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"BLOCKHEAT_WAREHOUSE": str(warehouse)}), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(["traces", "--json"])
    return code, out.getvalue(), err.getvalue()


def read_back(warehouse: Path) -> str:
    """What a reader sees after the stop: `blockheat traces`, then the tables read directly. Asserts the invariant;
    returns the trace's format (which ingest it is)."""
    code, listed, err = traces(warehouse)
    assert code == 0, err
    assert journal.pending(warehouse) == []
    (row,) = delta_log.read(str(warehouse / "traces"), ["trace_id", "format", "records_read", "records_accepted",
                                                         "records_rejected"], {"trace_id": TRACE}).to_pylist()
    requests = delta_log.read(str(warehouse / "requests"), ["seq"], {"trace_id": TRACE}).num_rows
    rejected = delta_log.read(str(warehouse / "rejected_records"), ["position"], {"trace_id": TRACE}).num_rows
    assert row["records_read"] == row["records_accepted"] + row["records_rejected"]
    assert (row["records_accepted"], row["records_rejected"]) == (requests, rejected), row
    assert [(t["trace_id"], t["format"]) for t in map(json.loads, listed.splitlines())] == [(TRACE, row["format"])]
    return row["format"]


def last_line(done: subprocess.CompletedProcess[str] | str) -> str:
    text = done if isinstance(done, str) else done.stderr
    return text.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def warehouse(disk: Path, server: str) -> Path:
    where = disk / "wh"
    first = ingest(where, server, "msr")
    assert first.returncode == 0, first.stderr
    assert read_back(where) == "msr"
    return where


# (where the process dies, the format it re-ingests, the format every reader then sees): before the journal entry
# nothing is decided and the old trace stays; from the entry on, the new one is finished by the next reader.
KILLS = [("entry", "blkparse", "msr"), ("step-0", "blkparse", "blkparse"), ("step-1", "vscsi", "vscsi"),
         ("step-2", "msr", "msr"), ("done", "blkparse", "blkparse")]


@pytest.mark.spark          # a Spark Connect server (server)
def test_a_re_ingest_killed_at_each_commit_boundary_leaves_one_whole_trace(warehouse: Path, server: str) -> None:
    for point, fmt, seen in KILLS:
        killed = ingest(warehouse, server, fmt, point)
        assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
        assert bool(journal.pending(warehouse)) == (point != "entry"), point
        assert read_back(warehouse) == seen, point
    # The same with the command's own Spark JVM, killed with it just after the `requests` commit.
    killed = ingest(warehouse, "local", "vscsi", "step-1")
    assert killed.returncode == -9, killed.stderr
    assert len(journal.pending(warehouse)) == 1
    assert read_back(warehouse) == "vscsi"


@pytest.mark.spark          # a Spark Connect server (server)
def test_a_full_disk_during_the_commit_leaves_one_whole_trace(warehouse: Path, server: str, disk: Path) -> None:
    # Full after the first step: the ingest fails, decided; readers refuse while the disk is full, then finish it.
    failed = ingest(warehouse, server, "blkparse", "step-1", f"fill:{disk}")
    assert failed.returncode == 1
    assert last_line(failed) == (f"blockheat: error: the ingest of trace t is decided but not finished; the next "
                                 f"blockheat command on {warehouse} finishes it: disk full: no space left on the "
                                 f"device (under the warehouse {warehouse}); free space there and run the command "
                                 "again")
    (disk / FILLER).unlink()
    fill(disk)                             # the failed ingest freed its staging copies: full again
    code, listed, err = traces(warehouse)
    assert (code, listed) == (1, "")
    assert last_line(err).startswith("blockheat: error: the ingest of trace t is decided but not finished, and "
                                     "finishing it failed; nothing is read until it is"), err
    assert "disk full: no space left on the device" in last_line(err)
    (disk / FILLER).unlink()
    assert read_back(warehouse) == "blkparse"
    # Full before the journal entry: nothing decided, the files are deleted, the trace stays as it was.
    failed = ingest(warehouse, server, "msr", "entry", f"fill:{disk}")
    assert failed.returncode == 1
    assert last_line(failed).startswith("blockheat: error: disk full: no space left on the device"), failed.stderr
    (disk / FILLER).unlink()
    assert journal.pending(warehouse) == []
    assert read_back(warehouse) == "blkparse"


def appended_rows(warehouse: Path, trace_id: str) -> int:
    """After a stopped append: the trace's records read, once a reader finished what was decided; asserts that
    records_read = accepted + rejected = the rows each table holds for it, and seq numbers every request once."""
    code, _, err = traces(warehouse)
    assert code == 0, err
    assert journal.pending(warehouse) == []
    (row,) = delta_log.read(str(warehouse / "traces"), ["records_read", "records_accepted", "records_rejected"],
                            {"trace_id": trace_id}).to_pylist()
    seqs = delta_log.read(str(warehouse / "requests"), ["seq"], {"trace_id": trace_id}).column("seq").to_pylist()
    rejected = delta_log.read(str(warehouse / "rejected_records"), ["position"], {"trace_id": trace_id}).num_rows
    assert row["records_read"] == row["records_accepted"] + row["records_rejected"]
    assert (row["records_accepted"], row["records_rejected"]) == (len(seqs), rejected), row
    assert sorted(seqs) == list(range(len(seqs)))
    return row["records_read"]


@pytest.mark.spark          # a Spark Connect server (server)
def test_an_append_killed_at_each_commit_boundary_leaves_the_trace_before_or_after_it(
        warehouse: Path, server: str, tmp_path: Path) -> None:
    day_us = 86_400_000_000
    days = [write_msr(tmp_path / f"day{d}.csv", [(d * day_us + i * 1_000_000, i % 2, "R", 4096 * i, 4096)
                                                  for i in range(20)]) for d in range(6)]
    first = run(warehouse, server, "none", "kill", "ingest", "--format", "msr", "--trace-id", "a", str(days[0]))
    assert first.returncode == 0, first.stderr
    assert appended_rows(warehouse, "a") == 20
    expected = 20
    for point, day in zip(("entry", "step-0", "step-1", "step-2", "done"), days[1:], strict=True):
        killed = run(warehouse, server, point, "kill", "ingest", "--append", "--format", "msr", "--trace-id", "a",
                     str(day))
        assert killed.returncode == -9, (point, killed.stderr)
        assert bool(journal.pending(warehouse)) == (point != "entry"), point
        expected += 0 if point == "entry" else 20
        assert appended_rows(warehouse, "a") == expected, point
    # A decided append is in the trace: appending its file again is refused, naming both.
    again = run(warehouse, server, "none", "kill", "ingest", "--append", "--format", "msr", "--trace-id", "a",
                str(days[5]))
    assert again.returncode == 1
    assert last_line(again) == (f"blockheat: error: {days[5]}: already in trace a as {days[5]} (the same SHA-256, "
                                f"{hashlib.sha256(days[5].read_bytes()).hexdigest()[:16]}...); nothing written")
    assert appended_rows(warehouse, "a") == expected == 100

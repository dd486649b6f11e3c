"""An ingest is all or nothing across `requests`, `rejected_records` and `traces` (libs.io.journal): a re-ingest
killed at each boundary of its commit, or stopped by a full disk, leaves every later reader the whole old trace or
the whole new one, with records_read = accepted + rejected = the rows each table holds for it."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from libs.io import delta_log, journal
from tests.jobs.cli.test_faults import tmpfs
from tests.libs.ingest.crash_at import FILLER, fill

TRACE = "t"
REPO = Path(__file__).resolve().parents[3]
AGREE = REPO / "tests" / "data" / "agree"
# The three ways an ingest writes its files: clean text by tasks, the general path, vSCSI by tasks.
SOURCES = {"msr": [str(AGREE / "msr_fix_0.csv")], "blkparse": [str(AGREE / "blkparse.txt")],
           "vscsi": [str(AGREE / "dev0.v1.vscsi"), str(AGREE / "dev1.v1.vscsi")]}


def run(warehouse: Path, point: str, action: str, *command: str) -> subprocess.CompletedProcess[str]:
    """A `blockheat` command in a session of its own (so a kill takes its JVM too), stopped at `point`."""
    env = {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "PYSPARK_PYTHON": sys.executable,
           "BLOCKHEAT_SPARK_REMOTE": "local", "BLOCKHEAT_SPARK_MASTER": "local[2]"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return subprocess.run([sys.executable, "-m", "tests.libs.ingest.crash_at", point, action, "--", *command],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, start_new_session=True)


def ingest(warehouse: Path, fmt: str, point: str = "none", action: str = "kill") -> subprocess.CompletedProcess[str]:
    return run(warehouse, point, action, "ingest", "--format", fmt, "--trace-id", TRACE, *SOURCES[fmt])


def read_back(warehouse: Path) -> str:
    """What a reader sees after the stop: `blockheat traces` (which finishes a decided commit first), then the
    tables read directly. Asserts the invariant; returns the trace's format (which ingest it is)."""
    listed = run(warehouse, "none", "kill", "traces", "--json")
    assert listed.returncode == 0, listed.stderr
    assert journal.pending(warehouse) == []
    (row,) = delta_log.read(str(warehouse / "traces"), ["trace_id", "format", "records_read", "records_accepted",
                                                         "records_rejected"], {"trace_id": TRACE}).to_pylist()
    requests = delta_log.read(str(warehouse / "requests"), ["seq"], {"trace_id": TRACE}).num_rows
    rejected = delta_log.read(str(warehouse / "rejected_records"), ["position"], {"trace_id": TRACE}).num_rows
    assert row["records_read"] == row["records_accepted"] + row["records_rejected"]
    assert (row["records_accepted"], row["records_rejected"]) == (requests, rejected), row
    assert f'"format": "{row["format"]}"' in listed.stdout.replace('":"', '": "')
    return row["format"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("atomic") / "wh"
    first = ingest(where, "msr")
    assert first.returncode == 0, first.stderr
    assert read_back(where) == "msr"
    return where


# (where the process dies, the format it re-ingests, the format every reader then sees): before the journal entry
# nothing is decided and the old trace stays; from the entry on, the new one is finished by the next reader.
KILLS = [("entry", "blkparse", "msr"), ("step-0", "blkparse", "blkparse"), ("step-1", "vscsi", "vscsi"),
         ("step-2", "msr", "msr"), ("done", "blkparse", "blkparse")]


def test_a_re_ingest_killed_at_each_commit_boundary_leaves_one_whole_trace(warehouse: Path) -> None:
    for point, fmt, seen in KILLS:
        killed = ingest(warehouse, fmt, point)
        assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
        assert bool(journal.pending(warehouse)) == (point != "entry"), point
        assert read_back(warehouse) == seen, point


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "size=24m") as mount:
        yield mount


def test_a_full_disk_during_the_commit_leaves_one_whole_trace(small_disk: Path) -> None:
    warehouse = small_disk / "wh"
    assert ingest(warehouse, "msr").returncode == 0
    # Full after the first step: the ingest fails, decided; readers refuse while the disk is full, then finish it.
    failed = ingest(warehouse, "blkparse", "step-1", f"fill:{small_disk}")
    assert failed.returncode == 1
    assert last_line(failed) == (f"blockheat: error: the ingest of trace t is decided but not finished; the next "
                                 f"blockheat command on {warehouse} finishes it: disk full: no space left on the "
                                 f"device (under the warehouse {warehouse}); free space there and run the command "
                                 "again")
    (small_disk / FILLER).unlink()
    fill(small_disk)                       # the failed ingest freed its staging copies: full again
    refused = run(warehouse, "none", "kill", "traces")
    assert refused.returncode == 1
    assert last_line(refused).startswith("blockheat: error: the ingest of trace t is decided but not finished, and "
                                         "finishing it failed; nothing is read until it is"), refused.stderr
    assert "disk full: no space left on the device" in last_line(refused)
    assert refused.stdout == ""
    (small_disk / FILLER).unlink()
    assert read_back(warehouse) == "blkparse"
    # Full before the journal entry: nothing decided, the files are deleted, the trace stays as it was.
    failed = ingest(warehouse, "msr", "entry", f"fill:{small_disk}")
    assert failed.returncode == 1
    assert last_line(failed).startswith("blockheat: error: disk full: no space left on the device"), failed.stderr
    (small_disk / FILLER).unlink()
    assert journal.pending(warehouse) == []
    assert read_back(warehouse) == "blkparse"

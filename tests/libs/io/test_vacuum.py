"""Nothing piles up: `blockheat vacuum` leaves exactly the files the latest versions reference, the start-up sweep
deletes a killed write's old orphans and keeps young ones, and the retention has a floor."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from blockheat.jobs.cli.main import main as blockheat
from blockheat.libs.io import vacuum
from blockheat.libs.io.delta_files import ABANDONED_DIR
from blockheat.libs.io.delta_log import snapshot, table_version
from blockheat.libs.io.table_names import NAMES_CONF
from tests.builders import ingest, write_msr

DAY = 24 * 3600
ROWS = [(i * 1000, i % 2, "R" if i % 3 else "W", i * 4096, 4096) for i in range(500)]


@pytest.fixture
def own_warehouse(spark, spark_cfg, tmp_path, monkeypatch):
    """A warehouse of this test's own, its tables by path only (the session's catalog keeps naming the shared
    warehouse's tables), and BLOCKHEAT_WAREHOUSE pointing at it for the command."""
    warehouse = tmp_path / "wh"
    before = spark.conf.get(NAMES_CONF, "true")
    spark.conf.set(NAMES_CONF, "false")
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(warehouse))
    yield dataclasses.replace(spark_cfg, warehouse=warehouse)
    spark.conf.set(NAMES_CONF, before)


def data_files(root: Path) -> dict[str, int]:
    """Every file of a table's directory outside its log: path relative to the table -> bytes."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")
            if p.is_file() and "_delta_log" not in p.parts}


def latest_files(root: Path) -> dict[str, int]:
    """The files the table's latest version references: path relative to the table -> bytes."""
    snap = snapshot(str(root))
    return {str(Path(snap.path(f)).relative_to(root)): f["size"] for f in snap.files}


def test_vacuum_after_three_reingests_leaves_exactly_the_latest_version(spark, own_warehouse, tmp_path, capsys):
    trace = write_msr(tmp_path / "small.csv", ROWS)
    for _ in range(3):
        ingest(spark, own_warehouse, "msr", "again", [trace])
    assert len(requests_of_warehouse(own_warehouse.warehouse)) == 500
    root = own_warehouse.warehouse / "requests"
    latest = latest_files(root)
    on_disk = data_files(root)
    assert len(latest) > 0
    assert len(on_disk) == 3 * len(latest)                 # each ingest wrote as many files; two versions replaced
    assert set(latest) <= set(on_disk)

    capsys.readouterr()
    assert blockheat(["vacuum", "--retain-hours", "0", "--allow-short-retention", "--json"]) == 0
    rows = {r["table"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}

    assert data_files(root) == latest                      # exactly the latest version's files, byte for byte
    assert sum(data_files(root).values()) == sum(latest.values())
    removed = {k: v for k, v in on_disk.items() if k not in latest}
    assert rows["requests"] == {"table": "requests", "replaced_files": len(removed),
                                "replaced_bytes": sum(removed.values()), "orphan_files": 0, "orphan_bytes": 0}
    for name in ("rejected_records", "traces"):
        table = own_warehouse.warehouse / name
        assert data_files(table) == latest_files(table), name
    assert rows["traces"]["replaced_files"] == 2           # the two replaced catalog rows' files
    assert rows["_staging"] == {"table": "_staging", "replaced_files": 0, "replaced_bytes": 0,
                                "orphan_files": 0, "orphan_bytes": 0}
    assert [r["seq"] for r in requests_of_warehouse(own_warehouse.warehouse)] == list(range(500))

    version = table_version(str(root))                     # a second vacuum finds nothing, and commits nothing
    assert blockheat(["vacuum", "--retain-hours", "0", "--allow-short-retention", "--json"]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(r["replaced_files"] == r["orphan_files"] == 0 for r in again), again
    assert table_version(str(root)) == version


def requests_of_warehouse(warehouse: Path) -> list[dict]:
    """The `requests` rows of a warehouse, read from the files its latest version lists."""
    from blockheat.libs.io.tables import rows_from_log

    return sorted(rows_from_log(warehouse, "requests", "again"), key=lambda r: r["seq"])


def test_vacuum_refuses_a_retention_below_the_minimum_without_the_flag(own_warehouse, capsys):
    assert (vacuum.MIN_RETAIN_HOURS, vacuum.DEFAULT_RETAIN_HOURS) == (24, 168)
    assert blockheat(["vacuum", "--retain-hours", "23"]) == 2
    err = capsys.readouterr().err
    assert "retention of 23 h is below the minimum of 24 h" in err
    assert "--allow-short-retention" in err
    with pytest.raises(vacuum.RetentionError, match="must be >= 0 hours"):
        vacuum.check_retention(-1, allow_short=True)


def _age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def test_sweep_removes_an_old_orphan_and_keeps_a_young_one_and_every_referenced_file(tmp_path):
    root = tmp_path / "requests"
    for i in range(2):                                      # version 1 replaces version 0's file
        write_deltalake(str(root), pa.table({"trace_id": ["t"], "seq": [i]}), mode="overwrite",
                        partition_by=["trace_id"])
    referenced = data_files(root)
    assert len(referenced) == 2                             # the current file and the replaced one
    some = next((root / "trace_id=t").glob("*.parquet"))
    old, young = root / "trace_id=t" / "part-killed-old.parquet", root / "trace_id=t" / "part-killed-young.parquet"
    shutil.copy(some, old)
    shutil.copy(some, young)
    markers = root / ABANDONED_DIR
    markers.mkdir()
    (markers / "oldwrite").write_bytes(b"")                 # writes discarded after a failure
    (markers / "youngwrite").write_bytes(b"")
    for path in [*root.rglob("*.parquet"), markers / "oldwrite"]:
        _age(path, 2 * DAY)                                 # every file older than the age...
    _age(young, vacuum.LONGEST_WRITE.total_seconds() - 3600)   # ...but one orphan, an hour younger than it

    removed = vacuum.sweep_table(str(root))

    assert removed == vacuum.Removed("requests", 1, some.stat().st_size)   # markers are not counted
    assert (old.exists(), young.exists()) == (False, True)
    assert set(data_files(root)) == set(referenced) | {"trace_id=t/part-killed-young.parquet", "_abandoned/youngwrite"}
    assert DeltaTable(str(root), version=0).to_pyarrow_table().column("seq").to_pylist() == [0]   # time travel


def test_sweep_of_staging_removes_old_ingest_folders_only(tmp_path):
    staging = tmp_path / "_staging"
    old, young = staging / "t-00000000", staging / "t-11111111"
    for folder in (old, young):
        folder.mkdir(parents=True)
        (folder / "0000_x.gz.raw").write_bytes(b"x" * 1000)
    empty = staging / "t-22222222"
    empty.mkdir()
    for path in (old / "0000_x.gz.raw", old, empty):
        _age(path, 2 * DAY)

    assert vacuum.sweep_staging(staging) == vacuum.Removed("_staging", 1, 1000)
    assert sorted(p.name for p in staging.iterdir()) == ["t-11111111"]


def test_an_ingest_start_sweeps_a_killed_writes_old_orphans(spark, own_warehouse, tmp_path):
    trace = write_msr(tmp_path / "small.csv", ROWS[:50])
    ingest(spark, own_warehouse, "msr", "swept", [trace])
    root = own_warehouse.warehouse / "requests"
    committed = data_files(root)
    folder = root / "trace_id=swept" / "device=h_0"
    some = next(folder.glob("*.parquet"))
    old, young = folder / "part-00000-killed-old.parquet", folder / "part-00000-killed-young.parquet"
    shutil.copy(some, old)
    shutil.copy(some, young)
    _age(old, vacuum.LONGEST_WRITE.total_seconds() + 60)
    staged = own_warehouse.warehouse / "_staging" / "swept-deadbeef"
    staged.mkdir(parents=True)
    (staged / "0000_small.csv.zst.raw").write_bytes(b"1" * 100)
    _age(staged / "0000_small.csv.zst.raw", 2 * DAY)
    _age(staged, 2 * DAY)

    ingest(spark, own_warehouse, "msr", "other", [trace])   # the next start

    assert (old.exists(), young.exists()) == (False, True)
    assert not staged.exists()
    assert set(committed) | {"trace_id=swept/device=h_0/part-00000-killed-young.parquet"} <= set(data_files(root))

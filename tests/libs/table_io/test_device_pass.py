"""libs.table_io.device_pass: one Spark task per device over its own files, each output committed once after every task
succeeded, nothing committed and no file left when a task fails, and the Spark SQL form taken on Unsupported."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from blockheat.libs.io.delta_files import ABANDONED_DIR
from blockheat.libs.io.table_versions import table_version
from blockheat.libs.io.tables import read_table, table_target
from blockheat.libs.table_io import device_pass as DP
from blockheat.schemas import extent_heat as EH
from tests.builders import ingest, write_msr

TRACE = "device-pass"
# (ts_us, device, op, offset_bytes, size_bytes): 3 requests on device 0, 2 on device 1
ROWS = [(0, 0, "R", 0, 4096), (10, 0, "W", 1 << 20, 512), (20, 0, "R", 0, 8192), (5, 1, "R", 4096, 4096),
        (15, 1, "W", 0, 1024)]


@pytest.fixture(scope="module")
def traced(spark, spark_cfg, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    ingest(spark, spark_cfg, "msr", TRACE, [write_msr(tmp_path_factory.mktemp("dp") / "dp_0.csv", ROWS)])
    return DP.trace_files(spark, spark_cfg.warehouse, TRACE)


def _summary_row(device: str, requests: pa.Table, window_us: int) -> pa.Table:
    """One extent_heat row per device: its requests and bytes (extent 0, the whole trace)."""
    n, total = requests.num_rows, int(pa.compute.sum(requests.column("size_bytes")).as_py())
    row = {"trace_id": TRACE, "device": device, "extent_bytes": 1 << 40, "extent_id": 0, "window_start_us": 0,
           "window_us": window_us, "requests": n, "reads": 0, "writes": n, "blocks": 0, "bytes": total,
           "heat": None, "temperature": None}
    return pa.Table.from_pylist([row], schema=EH.ARROW_SCHEMA)


def _outputs(spark, warehouse: Path) -> dict[int, DP.Output]:
    target = table_target(spark, warehouse, EH.TABLE)
    return {w: DP.Output(target.for_write(), {"trace_id": TRACE, "extent_bytes": 1 << 40, "window_us": w})
            for w in (0, 7)}


def _written(spark, warehouse: Path) -> list[tuple[str, int, int, int]]:
    rows = read_table(spark, warehouse, EH.TABLE, TRACE).where("extent_bytes = 1099511627776").collect()
    return sorted((r.device, r.window_us, r.requests, r.bytes) for r in rows)


def _data_files(warehouse: Path) -> set[Path]:
    return {p for p in (warehouse / EH.TABLE).rglob("*.parquet")}


def test_every_device_in_one_task_and_each_output_committed_once(spark, spark_cfg, traced) -> None:
    assert sorted(traced) == ["h_0", "h_1"]
    outputs = _outputs(spark, spark_cfg.warehouse)                    # the table exists from here on
    before = table_version(spark_cfg.warehouse, EH.TABLE)
    out = DP.device_pass(spark, sorted(traced.items()),
                         lambda device, t: ({w: _summary_row(device, t, w) for w in (0, 7)}, t.num_rows),
                         read=DP.Read(["size_bytes"]), outputs=outputs)
    assert out.rows == {0: 2, 7: 2}
    assert out.extras == {"h_0": 3, "h_1": 2}
    assert table_version(spark_cfg.warehouse, EH.TABLE) == before + 2                    # one commit each
    assert _written(spark, spark_cfg.warehouse) == [("h_0", 0, 3, 12800), ("h_0", 7, 3, 12800), ("h_1", 0, 2, 5120),
                                                    ("h_1", 7, 2, 5120)]
    # a filter is applied by the tasks' reads; a rerun replaces the rows it names
    DP.device_pass(spark, sorted(traced.items()), lambda device, t: ({0: _summary_row(device, t, 0)}, None),
                   read=DP.Read(["size_bytes"], [("ts_us", ">=", 10)]),
                   outputs={0: _outputs(spark, spark_cfg.warehouse)[0]})
    assert _written(spark, spark_cfg.warehouse) == [("h_0", 0, 2, 8704), ("h_0", 7, 3, 12800), ("h_1", 0, 1, 1024),
                                                    ("h_1", 7, 2, 5120)]


def test_a_failing_device_commits_nothing_and_leaves_no_file(spark, spark_cfg, traced, tmp_path) -> None:
    DP.device_pass(spark, sorted(traced.items()), lambda device, t: ({0: _summary_row(device, t, 0)}, None),
                   read=DP.Read(["size_bytes"]), outputs={0: _outputs(spark, spark_cfg.warehouse)[0]})
    version, files, rows = (table_version(spark_cfg.warehouse, EH.TABLE), _data_files(spark_cfg.warehouse),
                            _written(spark, spark_cfg.warehouse))
    outputs = _outputs(spark, spark_cfg.warehouse)
    markers = [Path(o.target.root) / ABANDONED_DIR / o.target.write_id for o in outputs.values()]
    returned = tmp_path / "device-0-returned"

    def fails_on_device_1(device: str, t: pa.Table) -> tuple[dict[int, pa.Table], None]:
        if device == "h_1":
            raise RuntimeError("device 1 is broken")
        deadline = time.monotonic() + 60                  # device 0 still running after the driver gave up
        while not all(m.exists() for m in markers) and time.monotonic() < deadline:
            time.sleep(0.01)
        returned.touch()
        return {w: _summary_row(device, t, w) for w in (0, 7)}, None

    with pytest.raises(Exception, match="device 1 is broken"):
        DP.device_pass(spark, sorted(traced.items()), fails_on_device_1, read=DP.Read(["size_bytes"]),
                       outputs=outputs)
    assert table_version(spark_cfg.warehouse, EH.TABLE) == version
    deadline = time.monotonic() + 60
    while not returned.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert returned.exists()
    steady = time.monotonic()                 # device 0's task writes its files now, finds the write abandoned and
    while time.monotonic() - steady < 1 and time.monotonic() < deadline:     # deletes them: none for a second
        if _data_files(spark_cfg.warehouse) != files:
            steady = time.monotonic()
        time.sleep(0.01)
    assert _data_files(spark_cfg.warehouse) == files
    assert _written(spark, spark_cfg.warehouse) == rows


def test_files_or_sql_takes_the_sql_form_only_when_unsupported(spark, spark_cfg) -> None:
    def unreadable() -> str:
        return str(DP.trace_files(spark, spark_cfg.warehouse, "no-such-trace"))

    assert DP.files_or_sql(unreadable, lambda: "sql", "test") == "sql"
    assert DP.files_or_sql(lambda: "files", lambda: "sql", "test") == "files"

    def broken() -> str:
        raise ValueError("a bug, not a table the files path cannot read")

    with pytest.raises(ValueError, match="a bug"):
        DP.files_or_sql(broken, lambda: "sql", "test")


def test_request_files_lists_each_device_rows_and_the_last_time(spark, spark_cfg, traced) -> None:
    listed = DP.request_files(spark, spark_cfg.warehouse, TRACE)
    assert listed.rows == {"h_0": 3, "h_1": 2}
    assert listed.last_us == 20
    assert [d for d, _ in listed.by_size_items()] == ["h_0", "h_1"]


def test_a_device_read_in_parts_holds_a_part_not_its_files(tmp_path: Path) -> None:
    """DeviceChunks over a device's 20 files of one row group each, in parts of a file: the Arrow memory held with
    each part stays a few parts' worth (a pre-buffering reader keeps each open file's last group read: it grew to
    about 20 parts)."""
    rng = np.random.default_rng(1)
    group = 50_000
    paths = []
    for f in range(20):
        seq = np.arange(f * group, (f + 1) * group)
        paths.append(str(tmp_path / f"part-{f}.parquet"))
        pq.write_table(pa.table({"seq": seq, "ts_us": seq * 7, "offset_bytes": rng.integers(0, 1 << 40, group),
                                 "size_bytes": rng.integers(1, 1 << 20, group)}), paths[-1])
    base = pa.total_allocated_bytes()
    held = []
    for part in DP.DeviceChunks(paths, ["seq", "ts_us", "offset_bytes", "size_bytes"], max_rows=group):
        held.append((part.num_rows, pa.total_allocated_bytes() - base))
        del part
    part_bytes = group * 4 * 8
    assert [rows for rows, _ in held] == [group] * 20
    assert max(b for _, b in held) < 5 * part_bytes
    assert held[-1][1] - held[0][1] < part_bytes          # not growing with the files read


def test_threads_share_the_sessions_cores_among_the_tasks(spark, monkeypatch) -> None:
    """local[2]: one task alone gets both cores, two or more tasks one each; a task caps the figure at the CPUs it
    may run on (a worker pinned to one CPU counts one)."""
    assert [DP.threads_per_task(spark, n) for n in (1, 2, 3, 40)] == [2, 1, 1, 1]
    monkeypatch.setattr(DP.os, "sched_getaffinity", lambda pid: {3})
    assert DP.task_threads(2) == 1
    monkeypatch.setattr(DP.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert [DP.task_threads(n) for n in (1, 2, 8)] == [1, 2, 4]

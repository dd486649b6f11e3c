"""A device read in parts (libs.table_io.device_pass.DeviceChunks: time order, whole windows, bounded rows) gives
extent and disk heat equal to reading it whole (libs.table_io.heat.device_heat_parts): the hplajw days, every device
cut into parts of a few hundred requests, the busiest one also split by time over two tasks
(libs.table_io.heat.pieces)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from blockheat.libs.table_io import device_pass as DP
from blockheat.libs.table_io import heat as H
from tests.builders import ingest, table_digest

WINDOW_US = 600_000_000


def test_device_chunks_time_order_whole_windows(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    ts = np.sort(rng.integers(0, 10_000, 5_000))
    seq = np.arange(5_000)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"ts_us": ts, "seq": seq, "size_bytes": seq % 7}), path, row_group_size=300)
    parts = list(DP.DeviceChunks([str(path)], ["seq", "ts_us", "size_bytes"], 1_000, align_us=100))
    assert len(parts) >= 5
    assert np.concatenate([p.column("seq").to_numpy() for p in parts]).tolist() == seq.tolist()   # time order
    windows = [set((p.column("ts_us").to_numpy() // 100).tolist()) for p in parts]
    assert all(a.isdisjoint(b) for i, a in enumerate(windows) for b in windows[i + 1:])              # whole windows
    assert max(p.num_rows for p in parts) < 1_600                                                   # bounded
    assert DP.spans(DP.row_groups(str(path)), 10_000) == [(None, None)]                              # one part
    chunks = DP.DeviceChunks([str(path)], ["seq", "ts_us"], 1_000)
    later = list(chunks.reread(["size_bytes", "seq"], start=5_000))                # other columns, from a time on
    assert [p.column_names for p in later] == [["size_bytes", "seq"]] * len(later)
    assert np.concatenate([p.column("seq").to_numpy() for p in later]).tolist() == seq[ts >= 5_000].tolist()


def test_heat_in_parts_equals_heat_whole(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ingest(spark, spark_cfg, "hp-srt", "heat-parts", hplajw_days[:3])
    files = DP.request_files(spark, spark_cfg.warehouse, "heat-parts")
    p = H.HeatParams(span_us=files.last_us + 1, window_us=WINDOW_US, width=2, disks=2)
    wh = Path(spark_cfg.warehouse)
    _, whole_disks, whole_counts = H.extent_and_disk_heat(spark, wh, "heat-parts", p)
    whole = table_digest(spark, wh, "extent_heat", "heat-parts")
    monkeypatch.setattr(H, "CHUNK_ROWS", 500)
    _, disks, counts = H.extent_and_disk_heat(spark, wh, "heat-parts", p)
    assert max(files.rows.values()) > 10 * 500                    # the busiest device in several parts
    tasks = H.pieces(files, 2, WINDOW_US)                          # ... and split over the session's two cores
    assert [(name, device) for name, device, _ in tasks] == [("0#0", "0"), ("0#1", "0"), ("1", "1")]
    assert tasks[0][2][1] == tasks[1][2][0]                        # one cut between the two, on a window's edge
    assert tasks[0][2][1] % WINDOW_US == 0
    assert {d: [a.tolist() for a in c["whole"]] for d, c in counts.items()} == \
        {d: [a.tolist() for a in c["whole"]] for d, c in whole_counts.items()}
    assert table_digest(spark, wh, "extent_heat", "heat-parts") == whole
    assert disks.sort_by([(c, "ascending") for c in disks.column_names[:5]]).equals(
        whole_disks.sort_by([(c, "ascending") for c in whole_disks.column_names[:5]]))
    assert {d: c["end"] for d, c in counts.items()} == {d: c["end"] for d, c in whole_counts.items()}

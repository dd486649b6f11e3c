"""libs.simulation.spill: an array group's requests files spilled span by span, in the order a whole read gives."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from blockheat.libs.io import storage
from blockheat.libs.simulation.spill import spill_requests
from blockheat.sim import Requests
from blockheat.sim.workloads import from_arrow

ORDER = ("sdc", "sda", "sdb")


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(11)
    ts = np.sort(rng.integers(0, n // 5, n))                 # many equal times across devices: seq decides
    return pa.table({"device": rng.choice(list(ORDER), n), "seq": rng.permutation(n), "ts_us": ts,
                     "op": rng.choice(["R", "W"], n), "offset_bytes": rng.integers(0, 1 << 30, n),
                     "size_bytes": rng.integers(1, 1 << 16, n)})


def _same(a: Requests, b: Requests) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) and getattr(a, k).dtype == getattr(b, k).dtype
               for k in ("arrival_us", "device", "lbn", "sectors", "flags"))


@pytest.mark.parametrize("device_column", [False, True])
@pytest.mark.parametrize("window", [None, (100, 450)])
def test_a_spill_in_small_spans_holds_the_whole_reads_requests(tmp_path: Path, device_column: bool,
                                                                window: tuple[int, int] | None) -> None:
    # Row groups of 37 rows and spans of about 90 requests: most spans cut some groups at their edges, and
    # every group inside a span is taken whole.
    table = _table(2000)
    files, devices = [], []
    for d in ORDER:
        rows = table.filter(pc.equal(table.column("device"), d))
        files.append(str(tmp_path / f"{d}.parquet"))
        devices.append(d)
        pq.write_table(rows if device_column else rows.drop_columns(["device"]), files[-1], row_group_size=37)
    with spill_requests(files, 512, ORDER, storage.filesystem, file_devices=None if device_column else devices,
                        window_us=window, span_requests=90, chunk_requests=64) as spill:
        got = Requests.concat(spill())
    if window is not None:
        ts = table.column("ts_us")
        table = table.filter(pc.and_(pc.greater_equal(ts, window[0]), pc.less(ts, window[1])))
    want, _ = from_arrow(table, sector_size=512, devices=ORDER)
    assert 0 < len(want) == len(got)
    assert _same(got, want)


def test_a_spill_refuses_a_file_device_outside_the_device_list(tmp_path: Path) -> None:
    path = str(tmp_path / "sdd.parquet")
    pq.write_table(_table(50).drop_columns(["device"]), path)
    with pytest.raises(ValueError, match=r"devices \['sdd'\] are not in the given device list \['sdc', 'sda', 'sdb'\]"):
        spill_requests([path], 512, ORDER, storage.filesystem, file_devices=["sdd"])

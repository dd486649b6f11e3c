"""An array group's requests files read in arrival order a time span at a time (spans of about SPAN_REQUESTS rows,
from the row groups' ts_us ranges) into a sim SpilledRequests on the task's local disk: a lane replaying a long
window holds a span while it converts and a chunk while it simulates, never the window (sim.scenarios.
simulate_chunks)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.io.task_parquet import Opener
from blockheat.libs.table_io.device_pass import NO_STATS, RowGroup, row_groups, spans
from blockheat.sim import SPILL_CHUNK_REQUESTS as CHUNK_REQUESTS
from blockheat.sim import SpilledRequests, requests_from_arrow_tables, requests_from_coded_table

#: Rows converted at once (about 80 bytes each while converting).
SPAN_REQUESTS = 4_000_000


def spill_requests(files: Sequence[str], sector_size: int, devices: Sequence[str], opener: Opener, *,
                   file_devices: Sequence[str] | None = None, window_us: tuple[int, int] | None = None,
                   span_requests: int = SPAN_REQUESTS, chunk_requests: int = CHUNK_REQUESTS) -> SpilledRequests:
    """The files' requests (start <= ts_us < end with window_us) in (ts_us, seq) order, as sim.workloads.from_arrow
    orders them with these devices (their codes in this order), spilled span by span. file_devices: each file's
    device, for files without a device column (the `requests` table's own); chunk_requests: the spill's chunks."""
    opened = {}
    groups: list[RowGroup] = []
    for f in files:
        fs, where = opener(f)
        opened[f] = pq.ParquetFile(where, filesystem=fs, pre_buffer=False)     # see libs.io.storage.parquet_file
        groups += row_groups(f, opened[f])
    code_of = None
    if file_devices is not None:                 # each file's device index, as from_arrow_tables would number it
        index = {d: i for i, d in enumerate(devices)}
        unknown = sorted(set(file_devices) - set(index))
        if unknown:
            raise ValueError(f"devices {unknown} are not in the given device list {list(devices)}")
        code_of = {f: index[d] for f, d in zip(files, file_devices, strict=True)}
    columns = ["seq", "ts_us", "op", "offset_bytes", "size_bytes", *([] if code_of else ["device"])]
    start, stop = window_us if window_us is not None else (None, None)
    spill = SpilledRequests(chunk_requests=chunk_requests)
    try:
        for lo, hi in spans(groups, span_requests, 0, start, stop):
            low, high = lo if lo is not None else -NO_STATS, hi if hi is not None else NO_STATS
            tables, codes = [], []
            for g in groups:
                if g.hi < low or g.lo >= high:
                    continue
                table = opened[g.path].read_row_group(g.index, columns=columns)
                if g.lo < low or g.hi >= high:                       # the span's edge cuts the group
                    ts = table.column("ts_us")
                    table = table.filter(pc.and_(pc.greater_equal(ts, low), pc.less(ts, high)))
                tables.append(table)
                codes.append(code_of[g.path] if code_of else 0)
            if not tables:
                continue
            if code_of:                 # one table for the span: no device column to read, look up or cast
                device = np.repeat(np.array(codes, np.int32), [t.num_rows for t in tables])
                requests = requests_from_coded_table(pa.concat_tables(tables), device, sector_size=sector_size)
            else:
                requests, _ = requests_from_arrow_tables(tables, sector_size=sector_size, devices=devices)
            del tables, table
            spill.append(requests)
    except BaseException:
        spill.close()
        raise
    return spill

"""Compiles every numba loop of blockheat into numba's on-disk cache, once per environment (`make venv` runs
it): otherwise each process that first calls a loop compiles it (seconds of CPU each, the test workers and
every Spark Python worker at once on a cold cache). Each warm-up calls its loops with the argument types the
jobs pass, writable arrays and the read-only ones Arrow columns give (numba compiles those again).

    python -m blockheat.libs.warm
"""
from __future__ import annotations

import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.alis.graph import _split_by_bucket
from blockheat.libs.io.inputs import newline_blocks
from blockheat.libs.readers.clean_text import parse_range, regroup_values
from blockheat.libs.readers.srt import find_record_offsets
from blockheat.libs.readers.text_formats import LAYOUTS
from blockheat.libs.readers.text_kernels import by_device
from blockheat.libs.table_io import profile as PF
from blockheat.libs.table_io.alis_graph import Build, GraphParams, device_build
from blockheat.libs.table_io.alis_spill import SpillSizes
from blockheat.libs.table_io.tracking import rows_of_pieces
from blockheat.libs.transforms import heat_kernels as HK
from blockheat.libs.transforms import profile as P
from blockheat.libs.transforms import profile_kernels as PK
from blockheat.libs.transforms import tracking_kernels as TK
from blockheat.sim import compile_alis, warm_trace
from blockheat.sim import compile_all as compile_simulator
from blockheat.sim import frozen_array as frozen

VIEWS = (np.array, frozen)        # writable, and read-only as a requests file's Arrow columns give them


def profile() -> None:
    x = np.arange(1, 40, dtype=np.int64)
    PK.round_significant_code(x * 1_000)
    for coded in (True, False):
        PK.group_cells(x // 10, x, 4, coded, 10_000 + 13 * 9_000)
    for view in VIEWS:
        PK.block_pass(view(x * 10), view(x * 4096), x * 4096 + 9_000, 100, 4096, 1 << 20, 1 << 20, 1, 0,
                      10_000 + 13 * 9_000, x[:1].copy(), x[:1].copy())
    profile_tasks()


def profile_tasks(n: int = 4_000) -> int:
    """The profile's tasks as a Spark worker runs them (libs.table_io.profile.run_task: a device task, then ordered,
    block and arrival tasks; then a merge bucket's merge) on a small requests file of n rows in a temporary folder,
    so the loops compile with the types of the Arrow columns a Parquet file gives. Returns the merged rows."""
    rng = np.random.default_rng(7)
    rows = pa.table({"seq": np.arange(n, dtype=np.int64),
                     "ts_us": np.sort(rng.integers(0, 3 * 3_600_000_000, n)),
                     "op": pa.array(np.where(rng.random(n) < 0.5, "R", "W")),
                     "offset_bytes": rng.integers(0, 2_000, n) * 4096,
                     "size_bytes": rng.choice(np.array([512, 4096, 65_536]), n)})
    merged = 0
    with tempfile.TemporaryDirectory(prefix="blockheat-warm-") as folder:
        path = f"{folder}/requests.parquet"
        pq.write_table(rows, path, row_group_size=n // 4)
        for rows_per_part in (n, n // 4):
            tasks, groups = PF.plan({"d": [path]}, rows_per_part=rows_per_part, parallelism=2, block_rows=n)
            every = [g for gs in groups.values() for g in gs]
            end = PF.stop(groups)
            outs = [PF.run_task(t, every if t.kind == "arrival" else groups[t.device], window_us=3_600_000_000,
                                extent_bytes=1 << 20, end=end)[0] for t in tasks]
            out = pa.concat_tables(outs)
            merged_kinds = pc.is_in(out.column("kind"), pa.array(["hist", "extent"]))   # as the tasks split them
            cells = out.filter(merged_kinds)
            _, still = P.runs_of_pieces(out.filter(pc.invert(merged_kinds)))
            done, _ = P.merge_and_keep(cells, P.Horizon.after(end, 3_600_000_000, still))
            merged += done.num_rows + P.merge_skew(cells).num_rows
    return merged


def tracking() -> None:
    one = np.array([0], np.int64)
    for view in VIEWS:                # unit_pieces also serves the aged counts' interval pass
        TK.unit_pieces(view(one), view(np.array([4096], np.int64)), 65_536)
    for view in VIEWS:                # both take the columns as read (read-only when zero-copy; tracking_eval's too)
        size = view(np.array([4096], np.int64))
        TK.pieces_by_extent(view(one), view(one), view(one), size, 1 << 20, 0, 1)
        ext, ts, _, blocks = TK.extent_pieces(view(one), view(one), view(one), size, 1 << 20)
    TK.last_of_groups(ext, 2)
    starts = TK.checkpoint_rows(ext, ts, 1, 10)
    TK.track(ext, ts, blocks, starts, np.array([2], np.int64), 1, 10)
    for seen_before in (None, one):   # as the tracking tasks call the loops: a whole pass, and one resumed
        rows_of_pieces(ext, ts, blocks, ks=(2,), extent_bytes=1 << 20, aging_period_us=10, last_j=1, first_row_j=0,
                       seen_before=seen_before)


def heat() -> None:
    for view in VIEWS:
        one, size = view(np.array([0], np.int64)), view(np.array([4096], np.int64))
        _, _, e_lo, e_hi, pieces, _, _ = HK.extent_range(one, one, size, 1 << 20)
        number, ids = HK.touched_extents(one, size, 1 << 20, e_lo, e_hi - e_lo + 1)
        HK.touched_extent_ids(one, size, 1 << 20)
        state = HK.device_state(0, "d")
        read = np.array([0], np.uint8)                # device_heat's reads: its bool mask's bytes
        for numbers in (number, number[:0]):          # extents numbered by marks, and by binary search
            ext, *_ = HK.device_grids(one, one, one, size, read, 1 << 20, numbers, ids, e_lo, 3_600_000_000, 0, 1, 0,
                                      1, True, 65_536, 4, 4, state)
            HK.window_cells(ext, ids, 0, 3_600_000_000)
            HK.ordered_device_cells(one, one, one, size, read, 1 << 20, numbers, ids, e_lo, 3_600_000_000, 0, 1,
                                    65_536, 4, 4, state, pieces)
        HK.disks_of(state, one, 4)


def text() -> None:
    """The clean text path's loops: the plain parser (integer and decimal timestamps) over a range's read-only bytes,
    the regrouping of its rows by device, and the newline count per block of the input scan (over the scan's
    writable buffer and over bytes)."""
    p = parse_range(b"128166372003061629,hm,1,Read,7014609920,24576,41286\n", LAYOUTS["msr"], tolerance_us=None)
    s = parse_range(b"1538352000.5,2048,8,0,1001\n", LAYOUTS["tencent"], tolerance_us=None)
    assert (p.size_bytes.tolist(), s.ts_raw_us.tolist()) == ([24576], [1_538_352_000_500_000])
    for q in (p, s):                       # a range's rows regrouped by device (write_task)
        *_, sums = by_device(q.device_codes, len(q.device_names), 0, q.ts_raw_us, 0, q.is_read, q.offset_bytes,
                             q.size_bytes, regroup_values(q.response_us), regroup_values(q.queue_us))
        assert sums[0, 0] == 1
    for buf in (bytearray(b"a\nbc\n"), b"a\nbc\n"):
        counts = np.empty(1, np.int64)
        newline_blocks(np.frombuffer(buf, np.uint8), 1 << 20, counts, counts.copy(), counts.copy())
        assert counts.tolist() == [2]


def srt() -> None:
    """The record walk (records of two sizes), over a memory map's read-only bytes."""
    body = frozen(np.array([0, 0, 0, 8, 1, 1, 1, 1, 0, 0, 0, 12, *[2] * 8], np.uint8))
    offsets, stop = find_record_offsets(body)
    assert (offsets.tolist(), stop) == ([0, 8], 20)


def alis() -> int:
    """ALIS's loops: one device's graphs and runs built per device (libs.table_io.alis_graph) from sim's warm-up
    trace, whole-trace and then nightly with the first night's graph aged in, as jobs/alis_graph.py's tasks run
    them, and once more through the bucket files of a hot device; then the loops only the Spark build calls (its
    fallback): the reduce buckets' split, and the cores on the arrays its Arrow groups give
    (sim.warm.compile_alis). Returns the runs' member rows found."""
    table = warm_trace()
    requests = table.filter(pc.equal(table.column("device"), "0"))
    params = GraphParams(graph_share=0.5)          # a budget small enough that pruning runs
    first = device_build(requests, None, None, Build("warm", 0, 1, 4_000_000), params)
    night = device_build(requests, first["units"], first["graph"].filter(pc.equal(first["graph"]["interval_id"], 1)),
                         Build("warm", 2, 2, 4_000_000, nightly=True), params)
    # A hot device's intervals: the counts through bucket files, pruned there (libs.table_io.alis_spill).
    spilled = device_build(requests, None, None, Build("warm", 0, 1, 4_000_000), params,
                           SpillSizes(sum_edges=20, memory_edges=10, buckets=4))
    assert spilled["graph"].equals(first["graph"])
    src, dst = np.array([0, 1, 2, 0], np.int64), np.array([1, 2, 0, 2], np.int64)
    _split_by_bucket(src % 2, src, dst, dst, dst, 2)
    compile_alis()
    return first["runs"].num_rows + night["runs"].num_rows


STEPS = {"profile": profile, "tracking": tracking, "heat": heat, "text": text, "srt": srt, "sim": compile_simulator,
         "alis": alis}


def compile_all(only: tuple[str, ...] | None = None) -> dict[str, float]:
    """Runs every warm-up of STEPS (or the named ones); returns the seconds each took."""
    took = {}
    for name, step in STEPS.items():
        if only is not None and name not in only:
            continue
        t0 = time.perf_counter()
        step()
        took[name] = time.perf_counter() - t0
    return took


if __name__ == "__main__":
    took = compile_all()
    print("libs.warm: numba's cache holds the loops of " + ", ".join(f"{k} ({v:.1f} s)" for k, v in took.items()))

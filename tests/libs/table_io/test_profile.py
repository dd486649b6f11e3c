"""The profile read straight from the `requests` files (libs.table_io.profile) gives exactly the
rows of the Spark path (compute_trace_profile), however the files are cut into row groups, whatever
their order, and however the work is split into time spans and address buckets."""
from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from blockheat.libs.io.delta_files import FileWriter, commit_replace
from blockheat.libs.io.tables import read_table, table_target
from blockheat.libs.table_io import device_pass as DP
from blockheat.libs.table_io import profile as PF
from blockheat.libs.transforms.profile import compute_trace_profile
from blockheat.schemas import requests as R
from tests.builders import python_child
from tests.libs.transforms.test_profile import TINY

WINDOW_US = 30_000_000


def write_requests(spark, cfg, trace_id, rows, *, group_rows, seed=None):
    """`rows` (device, seq, ts_us, op, offset, size) as the trace's requests files, in row groups of
    about `group_rows` rows; `seed`: shuffled first, so row groups overlap in time."""
    if seed is not None:
        rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
    table = pa.Table.from_pylist([dict(zip(R.COLUMNS, (trace_id, *r, None, None, "hand-built"), strict=True))
                                  for r in rows], schema=R.ARROW_SCHEMA)
    target = table_target(spark, cfg.warehouse, R.TABLE).for_write()
    writer = FileWriter(target, buffer_rows=group_rows)
    for batch in table.to_batches(max_chunksize=group_rows):
        writer.write(batch)
    commit_replace(spark, target, {"trace_id": trace_id}, writer.close().to_pylist())


def generated(n=4_000, seed=7):
    """Three devices over ~4 minutes: bursts and idle gaps, sequential runs, re-read hot blocks, sizes
    from 512 bytes to 256 KiB, requests crossing extent edges."""
    rng = np.random.default_rng(seed)
    gaps = np.where(rng.random(n) < 0.02, rng.integers(1_000_000, 20_000_000, n),
                    rng.exponential(30_000, n).astype(int))
    ts = np.cumsum(gaps) - gaps[0]
    ts[rng.random(n) < 0.05] -= 1   # some ties
    ts = np.maximum.accumulate(np.maximum(ts, 0))
    rows, ends = [], {}
    for seq in range(n):
        device = ["a", "b", "c"][int(rng.integers(0, 3))] if rng.random() < 0.9 else "a"
        size = int(rng.choice([512, 4096, 8192, 65536, 262144]))
        u = rng.random()
        if u < 0.3 and device in ends:
            offset = ends[device]                                          # sequential
        elif u < 0.55:
            offset = int(rng.integers(0, 64)) * 4096                       # hot blocks
        else:
            offset = int(rng.integers(0, 1 << 22)) * 512 + (1 << 20) - 4096 * int(rng.integers(0, 3))
        ends[device] = offset + size
        rows.append((device, seq, int(ts[seq]), "R" if rng.random() < 0.6 else "W", offset, size))
    return rows


def by_key(rows):
    return {(r["scope"], r["device"], r["window_start_us"], r["window_us"], r["metric"]): r["value"] for r in rows}


def assert_same(got, want):
    assert got.keys() == want.keys()
    assert {k for k, v in got.items() if v is None} == {k for k, v in want.items() if v is None}
    assert {k: v for k, v in got.items() if v is not None} == pytest.approx(
        {k: v for k, v in want.items() if v is not None}, rel=1e-9)


def spark_path(spark, cfg, trace_id, span_us, window_us, **kw):
    rows = compute_trace_profile(read_table(spark, cfg.warehouse, "requests", trace_id), span_us=span_us,
                                 window_us=window_us, **kw).collect()
    return by_key([r.asDict() for r in rows])


def direct(spark, cfg, trace_id, span_us, window_us, **kw):
    written = PF.profile_trace(spark, cfg.warehouse, trace_id, span_us=span_us, window_us=window_us, **kw)
    rows = [r.asDict() for r in read_table(spark, cfg.warehouse, "trace_profile", trace_id).collect()]
    assert written == len(rows)
    return by_key(rows)


@pytest.fixture(scope="module")
def gen_expected(spark, spark_cfg):
    rows = generated()
    write_requests(spark, spark_cfg, "pf-gen", rows, group_rows=1 << 20)
    span = max(r[2] for r in rows)
    return rows, span, spark_path(spark, spark_cfg, "pf-gen", span, WINDOW_US)


@pytest.mark.parametrize(("group_rows", "seed", "rows_per_part"), [
    (1 << 20, None, 250_000),   # one row group per device; one "device" task (both passes) per device
    (97, None, 300),            # many row groups in time order; devices cut into time spans and address buckets
    (97, 3, 300),               # shuffled rows: every row group spans the whole trace
    (1_000, 5, 120),            # row groups of 1,000 shuffled rows; ~10 spans and buckets per device
])
def test_direct_profile_equals_spark_path(spark, spark_cfg, gen_expected, group_rows, seed, rows_per_part):
    rows, span, expected = gen_expected
    trace_id = f"pf-gen-{group_rows}-{seed}-{rows_per_part}"
    write_requests(spark, spark_cfg, trace_id, rows, group_rows=group_rows, seed=seed)
    got = direct(spark, spark_cfg, trace_id, span, WINDOW_US, rows_per_part=rows_per_part, block_rows=rows_per_part)
    assert len(got) > 1_000
    assert got[("trace", "*", 0, 0, "requests")] == len(rows)
    assert_same(got, expected)


def test_direct_profile_one_block_bucket_over_many_ordered_spans(spark, spark_cfg, gen_expected):
    """Devices cut into many time spans but each in one block bucket (its block task reads the device's rows itself,
    with the ordered tasks; several buckets read the rows those wrote): the same rows as the Spark path."""
    rows, span, expected = gen_expected
    write_requests(spark, spark_cfg, "pf-one-bucket", rows, group_rows=97, seed=3)
    files = DP.trace_files(spark, spark_cfg.warehouse, "pf-one-bucket")
    tasks = PF.plan(files, rows_per_part=300, parallelism=2, block_rows=10**9)[0]
    assert {t.buckets for t in tasks if t.kind == "block"} == {1}
    assert sum(t.kind == "ordered" for t in tasks) > 2 * len(files)
    assert_same(direct(spark, spark_cfg, "pf-one-bucket", span, WINDOW_US, rows_per_part=300, block_rows=10**9),
                expected)


def test_direct_profile_tiny_trace_by_hand(spark, spark_cfg):
    """The hand-checked tiny trace (tests/libs/transforms/test_profile.py), one request per span: the same rows."""
    write_requests(spark, spark_cfg, "pf-tiny", TINY, group_rows=1)
    want = spark_path(spark, spark_cfg, "pf-tiny", 2_025_000, 1_000_000, chunk_us=10_000, rows_per_part=1)
    got = direct(spark, spark_cfg, "pf-tiny", 2_025_000, 1_000_000, rows_per_part=1, block_rows=1)
    assert_same(got, want)
    assert got[("device", "d", 0, 0, "seek_bytes_max")] == 16_384
    assert got[("trace", "*", 0, 0, "interarrival_us_max")] == 1_025_000


def test_plan_splits_devices_and_spans(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"ts_us": np.arange(1_000, dtype=np.int64)}), path, row_group_size=100)
    groups = DP.row_groups(str(path))
    assert [(g.rows, g.lo, g.hi) for g in groups[:2]] == [(100, 0, 99), (100, 100, 199)]
    # even rows in time: equal shares at the quarters
    assert PF.cuts(groups, 4) == [250, 500, 750]
    assert PF.cuts(groups, 1) == []
    tasks, by_device = PF.plan({"x": [str(path)]}, rows_per_part=300, parallelism=2, block_rows=300)
    kinds = [t.kind for t in tasks]
    assert kinds == ["block"] * 4 + ["ordered"] * 4 + ["arrival"] * 2   # 300 rows a task, 600 an arrival task
    assert [(t.bucket, t.buckets) for t in PF.plan({"x": [str(path)]}, rows_per_part=500, parallelism=2,
                                                   block_rows=500)[0] if t.kind == "block"] == [(0, 2), (1, 2)]
    # block tasks by default hold up to BLOCK_ROWS (or rows_per_part if larger): one bucket here, 4 ordered spans
    assert [t.kind for t in PF.plan({"x": [str(path)]}, rows_per_part=300, parallelism=2)[0]] == \
        ["block"] + ["ordered"] * 4 + ["arrival"] * 2
    assert [(t.bucket, t.buckets) for t in PF.plan({"x": [str(path)]}, rows_per_part=300, parallelism=2,
                                                   block_rows=450)[0] if t.kind == "block"] == [(0, 3), (1, 3), (2, 3)]
    # a device that fits one task: both passes in one "device" task (its rows read once)
    assert [t.kind for t in PF.plan({"x": [str(path)]}, rows_per_part=1_000, parallelism=1)[0]] == ["device", "arrival"]
    spans = [(t.start, t.stop) for t in tasks if t.kind == "ordered"]
    assert spans == [(None, 250), (250, 500), (500, 750), (750, None)]
    assert len(by_device["x"]) == 10


def test_reader_last_before_any_row_group_order(tmp_path):
    rng = np.random.default_rng(1)
    ts = rng.integers(0, 500, 2_000)
    seq = np.arange(2_000)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"ts_us": ts, "seq": seq}), path, row_group_size=64)
    groups = DP.row_groups(str(path))
    reader = PF._Reader()
    for start in (0, 1, 7, 250, 499, 500, 10_000):
        got = reader.last_before(groups, ["ts_us", "seq"], start)
        below = ts < start
        if not below.any():
            assert got.num_rows == 0
            continue
        top = ts[below].max()
        assert sorted(got.column("seq").to_pylist()) == sorted(seq[ts == top].tolist())
        span = reader.span(groups, ["ts_us", "seq"], start, start + 50)
        assert sorted(span.column("seq").to_pylist()) == sorted(seq[(ts >= start) & (ts < start + 50)].tolist())


def test_trace_files_unknown_trace(spark, spark_cfg):
    with pytest.raises(DP.Unsupported, match="no requests files"):
        DP.trace_files(spark, spark_cfg.warehouse, "pf-nothing-here")


def test_buckets_are_stable():
    table = pa.table({"scope": ["trace", "device"], "device": ["*", "a"], "w": [0, 3_600_000_000],
                      "window_us": [0, 3_600_000_000], "metric": ["size_bytes", "reuse_time_us"]})
    # crc32, not hash(): every Python worker must put a group in the same bucket
    assert PF._buckets_of(table, 1_000_003).tolist() == [
        zlib.crc32(b"trace\x1f*\x1f0\x1f0\x1fsize_bytes") % 1_000_003,
        zlib.crc32(b"device\x1fa\x1f3600000000\x1f3600000000\x1freuse_time_us") % 1_000_003]


def test_slots_spread_cost_evenly():
    tasks = [PF.Task("block", "a", bucket=k, buckets=4, rows=1_000) for k in range(4)]      # cost 1,100 each
    tasks += [PF.Task("ordered", "a", part=i, rows=1_000) for i in range(5)]               # 1,000 each
    tasks += [PF.Task("arrival", rows=10_000)]                                             # 4,000
    assigned = PF.slots(tasks, 4)
    assert sorted(i for s in assigned for i in s) == list(range(len(tasks)))
    loads = sorted(sum(tasks[i].cost for i in s) for s in assigned)
    # longest first, each to the least loaded (13,400 in all; within 4/3 of the best split, 3,350 each)
    assert loads == [3_100, 3_100, 3_200, 4_000]
    assert PF.slots(tasks[:2], 4) == [[0], [1]]       # never an empty Spark task
    # two Spark tasks side by side: the first runs its costliest first, the second its cheapest first
    first, second = ([tasks[i].cost for i in s] for s in PF.slots(tasks, 2))
    assert first == sorted(first, reverse=True)
    assert first[0] == 4_000
    assert second == sorted(second)
    assert (second[0], second[-1]) == (1_000, 1_100)


def test_spill_files_on_an_object_store(spark, spark_cfg, gen_expected, tmp_path, monkeypatch):
    """The first job's spill files (cells by merge bucket, read by the second job's tasks) under an object-store
    scratch (tests/fake_store.py): written and read through storage.filesystem as the driver has it, the same
    profile as with a local scratch directory."""
    from blockheat.libs.io import storage
    from tests.fake_store import fake_s3

    rows, span, _ = gen_expected
    files = DP.trace_files(spark, spark_cfg.warehouse, "pf-gen")
    tasks, groups = PF.plan(files, rows_per_part=400, parallelism=spark.sparkContext.defaultParallelism,
                            block_rows=400)

    def profile(scratch):
        ran = PF.run_tasks(spark, tasks, groups, window_us=WINDOW_US, extent_bytes=1 << 20, scratch=scratch,
                           span_us=span)
        return by_key(ran.rows.to_pylist())

    local = profile(str(tmp_path / "scratch"))
    store = fake_s3(monkeypatch, tmp_path / "s3")
    scratch = store.url("wh/_scratch/profile-pf-gen")
    remote = profile(scratch)
    spilled = [storage.name(f) for f, _ in storage.files_under(scratch) if "/state/" not in f]
    assert spilled
    assert all(f.endswith(".arrow") for f in spilled)
    blocks = [storage.name(f) for f, _ in storage.files_under(storage.join(scratch, "state"))]
    assert sorted(blocks) == sorted(f"{t.device}-{t.bucket}-of-{t.buckets}.parquet" for t in tasks
                                    if t.kind in ("block", "device"))     # each block pass's last accesses
    assert len({p.name for p in store.local(scratch).iterdir()}) > 1                 # several merge buckets
    assert remote[("trace", "*", 0, 0, "requests")] == len(rows)
    assert_same(remote, local)


def test_the_profile_job_and_the_command_line_import_no_numba():
    """The profile's driver plans, merges and commits: its modules leave numba (and LLVM, ~120 MB resident) to the
    tasks that run the compiled loops."""
    done = python_child("import sys, blockheat.jobs.trace_profile, blockheat.jobs.cli.main;"
                        "import blockheat.libs.table_io.profile;"
                        "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

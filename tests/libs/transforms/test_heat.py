"""Extent and disk heat on hand-built traces, checked against values computed by hand; aged counts."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from blockheat.jobs.aged_heat import AgingConfig
from blockheat.jobs.aged_heat import run as run_aging
from blockheat.libs.columns import idiv, idiv_sql
from blockheat.libs.io.tables import read_table
from blockheat.libs.transforms.aging import age_values
from blockheat.libs.transforms.heat import (
    LAYOUTS,
    compute_disk_heat,
    compute_disk_heats,
    compute_extent_heat,
    disk_heat_rows,
    split_at,
)
from blockheat.schemas import disk_heat, extent_heat
from tests.builders import ingest, make_requests, write_msr

MIB = 1 << 20

# (device, seq, ts_us, op, offset_bytes, size_bytes)
TINY = [
    ("a", 0, 0, "R", 0, 4096),                       # extent 0: 8 blocks
    ("a", 1, 1_500_000, "W", MIB - 1024, 2048),      # crosses: 2 blocks in extent 0, 2 in extent 1
    ("a", 2, 2_500_000, "R", 3 * MIB, 512),          # extent 3: 1 block
    ("b", 3, 500_000, "R", 0, MIB),                  # extent 0 of b: 2048 blocks
]
TINY_SPAN_US = 2_500_000


@pytest.fixture
def tiny(spark):
    return make_requests(spark, TINY)


def _heat_rows(df):
    return {(r.device, r.extent_id, r.window_start_us): (r.requests, r.reads, r.writes, r.blocks, r.bytes, r.heat,
                                                          r.temperature) for r in df.collect()}


def test_extent_heat_two_second_windows_by_hand(tiny):
    heat = compute_extent_heat(tiny, extent_bytes=MIB, window_us=2_000_000, span_us=TINY_SPAN_US)
    extent_heat.validate_extent_heat(heat)
    assert _heat_rows(heat) == {
        ("a", 0, 0): (2, 1, 1, 10, 5120, 5.0, 5.0 / 2048),
        ("a", 1, 0): (1, 0, 1, 2, 1024, 1.0, 1.0 / 2048),
        ("a", 3, 2_000_000): (1, 1, 0, 1, 512, 0.5, 0.5 / 2048),
        ("b", 0, 0): (1, 1, 0, 2048, MIB, 1024.0, 0.5),
    }


def test_extent_heat_whole_trace_window_divides_by_span(tiny):
    heat = compute_extent_heat(tiny, extent_bytes=MIB, window_us=0, span_us=TINY_SPAN_US)
    rows = _heat_rows(heat)
    assert {k: v[5] for k, v in rows.items()} == {("a", 0, 0): 4.0, ("a", 1, 0): 0.8, ("a", 3, 0): 0.4,
                                                  ("b", 0, 0): 819.2}
    assert heat.select("window_us").distinct().collect()[0][0] == 0


def test_extent_heat_window_boundary_belongs_to_the_later_window(spark):
    reqs = make_requests(spark, [("d", 0, 999_999, "R", 0, 512), ("d", 1, 1_000_000, "R", 0, 512)])
    heat = compute_extent_heat(reqs, extent_bytes=MIB, window_us=1_000_000, span_us=1_000_000)
    assert sorted((r.window_start_us, r.blocks) for r in heat.collect()) == [(0, 1), (1_000_000, 1)]


def test_blocks_count_partial_512_byte_blocks(spark):
    # 256-byte sectors (the HP trace): [256, 768) touches blocks 0 and 1.
    reqs = make_requests(spark, [("d", 0, 0, "R", 256, 512)])
    pieces = split_at(reqs, 1024)
    assert [(r.extent_id, r.bytes, r.blocks) for r in pieces.collect()] == [(0, 512, 2)]


def test_extent_size_must_be_whole_blocks(tiny):
    with pytest.raises(ValueError, match="extent_bytes must be a positive multiple of 512, got 1000"):
        compute_extent_heat(tiny, extent_bytes=1000, span_us=1)


def _disk(df):
    return {(r.window_start_us, r.disk): (r.requests, r.blocks, r.heat, r.mean_heat, r.max_heat, r.max_over_mean,
                                          r.heat_variance) for r in df.collect()}


def test_disk_heat_as_traced_by_hand(tiny):
    dh = compute_disk_heat(tiny, layout="as-traced", window_us=2_000_000, span_us=TINY_SPAN_US)
    disk_heat.validate_disk_heat(dh)
    assert _disk(dh) == {
        (0, "a"): (2, 12, 6.0, 515.0, 1024.0, 1024 / 515, 509.0**2),
        (0, "b"): (1, 2048, 1024.0, 515.0, 1024.0, 1024 / 515, 509.0**2),
        (2_000_000, "a"): (1, 1, 0.5, 0.25, 0.5, 2.0, 0.0625),
        (2_000_000, "b"): (0, 0, 0.0, 0.25, 0.5, 2.0, 0.0625),   # idle disk counted in mean and variance
    }


def test_disk_heat_striped_splits_at_unit_boundaries(tiny):
    # Volume: device a at 0 (ends at 3 MiB + 512 -> 4 MiB of units), device b at 4 MiB. Unit 1 MiB, width 2:
    # r0 unit 0 -> disk 0 (8); r1 units 0 and 1 -> disks 0 (2) and 1 (2); r2 unit 3 -> disk 1 (1);
    # r3 unit 4 -> disk 0 (2048).
    dh = compute_disk_heat(tiny, layout="striped", window_us=2_000_000, span_us=TINY_SPAN_US,
                           stripe_unit_bytes=MIB, width=2)
    rows = _disk(dh)
    assert rows[(0, "0")][:3] == (3, 2058, 1029.0)
    assert rows[(0, "1")][:3] == (1, 2, 1.0)
    assert rows[(0, "0")][3:] == (515.0, 1029.0, 1029 / 515, 514.0**2)
    assert rows[(2_000_000, "1")][:3] == (1, 1, 0.5)
    assert rows[(2_000_000, "0")][:3] == (0, 0, 0.0)
    assert dh.select("layout_params").distinct().collect()[0][0] == "unit_bytes=1048576,width=2"


def test_disk_heat_random_is_seeded_whole_request_and_uniform(spark):
    rows = [("d", i, i * 1000, "R", (i * 7919 % 1000) * 4096, 4096) for i in range(8000)]
    reqs = make_requests(spark, rows)
    one = compute_disk_heat(reqs, layout="random", window_us=0, span_us=8_000_000, disks=4, seed=11)
    again = compute_disk_heat(reqs, layout="random", window_us=0, span_us=8_000_000, disks=4, seed=11)
    assertDataFrameEqual(one, again)
    counts = {r.disk: r.requests for r in one.collect()}
    assert sum(counts.values()) == 8000                    # each request whole on one disk
    assert all(abs(c - 2000) < 150 for c in counts.values()), counts  # ~3.4 sigma of Binomial(8000, 1/4)
    other = {r.disk: r.requests for r in compute_disk_heat(reqs, layout="random", window_us=0, span_us=8_000_000,
                                                           disks=4, seed=12).collect()}
    assert other != counts


def test_every_layout_in_one_query_gives_each_layouts_own_rows(tiny):
    """The job computes the three layouts' disk heats in one pass: each layout's rows (its disks, windows, mean,
    max and variance across its own disks only) are those of that layout computed alone."""
    kw = {"window_us": 2_000_000, "span_us": TINY_SPAN_US, "stripe_unit_bytes": MIB, "width": 2, "disks": 3,
          "seed": 7}
    together = compute_disk_heats(tiny, layouts=LAYOUTS, **kw).collect()
    assert sorted({(r.layout, r.disks) for r in together}) == [("as-traced", 2), ("random", 3), ("striped", 2)]
    for layout in LAYOUTS:
        alone = compute_disk_heat(tiny, layout=layout, **kw).collect()
        assert sorted(r for r in together if r.layout == layout) == sorted(alone), layout
    assert len(together) == 2 * (2 + 3 + 2)                 # 2 windows, every disk of each layout in each


def test_disk_heat_rows_by_hand():
    """The driver's part of disk heat (no Spark): idle disks filled in per layout and window, heat per second of
    window, and the statistics across each layout's own disks; a zero-length trace has no heat (nulls)."""
    per_disk = pa.table({"layout": ["striped", "striped", "random"], "window_start_us": [0, 10_000_000, 0],
                         "disk": ["1", "0", "2"], "requests": [3, 1, 4], "blocks": [30, 5, 40]})
    layouts = {"striped": ("unit_bytes=512,width=2", ["0", "1"]), "random": ("disks=3,seed=0", ["0", "1", "2"])}
    rows = disk_heat_rows(per_disk, layouts, window_us=10_000_000, span_us=20_000_000)
    assert rows.schema == disk_heat.ARROW_SCHEMA
    got = {(r["layout"], r["window_start_us"], r["disk"]): (r["requests"], r["blocks"], r["heat"], r["disks"],
                                                            r["mean_heat"], r["max_heat"], r["max_over_mean"],
                                                            r["heat_variance"]) for r in rows.to_pylist()}
    assert got == {
        ("striped", 0, "0"): (0, 0, 0.0, 2, 1.5, 3.0, 2.0, 2.25),
        ("striped", 0, "1"): (3, 30, 3.0, 2, 1.5, 3.0, 2.0, 2.25),
        ("striped", 10_000_000, "0"): (1, 5, 0.5, 2, 0.25, 0.5, 2.0, 0.0625),
        ("striped", 10_000_000, "1"): (0, 0, 0.0, 2, 0.25, 0.5, 2.0, 0.0625),
        ("random", 0, "0"): (0, 0, 0.0, 3, 4 / 3, 4.0, 3.0, pytest.approx(32 / 9, rel=1e-15)),
        ("random", 0, "1"): (0, 0, 0.0, 3, 4 / 3, 4.0, 3.0, pytest.approx(32 / 9, rel=1e-15)),
        ("random", 0, "2"): (4, 40, 4.0, 3, 4 / 3, 4.0, 3.0, pytest.approx(32 / 9, rel=1e-15)),
    }
    empty = disk_heat_rows(per_disk, layouts, window_us=0, span_us=0)      # whole trace of zero length
    assert empty.num_rows == 2 * 2 + 1 * 3                 # striped: 2 windows x 2 disks; random: 1 x 3
    assert all(empty.column(c).null_count == empty.num_rows
               for c in ("heat", "mean_heat", "max_heat", "max_over_mean", "heat_variance"))


def test_unknown_layout(tiny):
    with pytest.raises(ValueError, match="layout 'raid5'"):
        compute_disk_heat(tiny, layout="raid5", span_us=1)
    with pytest.raises(ValueError, match="layout 'raid5'"):
        compute_disk_heats(tiny, layouts=("striped", "raid5"), span_us=1)


def test_idiv_is_exact_beyond_double_precision(spark):
    big = (1 << 62) + 12345
    row = spark.range(1).select(idiv(F.lit(big), 1_000_003).alias("q"), idiv(F.lit(2**53 + 1), 3).alias("r")).first()
    assert (row.q, row.r) == (big // 1_000_003, (2**53 + 1) // 3)


def test_idiv_floors_negative_and_extreme_longs(spark):
    values = [0, 1, 511, 512, -1, -511, -512, -513, 2**63 - 1, -(2**63), -(2**63) + 1]
    for divisor in (1, 3, 512, 1 << 20):
        frame = spark.createDataFrame([(v,) for v in values], "v long")
        rows = frame.select(idiv(F.col("v"), divisor), F.expr(idiv_sql("v", divisor))).collect()
        assert [r[0] for r in rows] == [v // divisor for v in values], divisor
        assert [r[1] for r in rows] == [v // divisor for v in values], divisor


def test_age_values_three_intervals_by_formula(spark):
    schema = "device string, extent_id long, count double"
    i0 = spark.createDataFrame([("d", 0, 10.0)], schema)
    i1 = spark.createDataFrame([("d", 1, 5.0)], schema)
    i2 = spark.createDataFrame([("d", 0, 4.0), ("d", 1, 5.0)], schema)
    keys = ["device", "extent_id"]
    a0 = age_values(i0, None, keys=keys, value="count", alpha=0.8)
    a1 = age_values(i1, a0, keys=keys, value="count", alpha=0.8)
    a2 = age_values(i2, a1, keys=keys, value="count", alpha=0.8)
    got = {r.extent_id: r["count"] for r in a2.collect()}
    assert got == pytest.approx({0: 0.8 * 4 + 0.2 * (0.2 * (0.8 * 10)), 1: 0.8 * 5 + 0.2 * (0.8 * 5)})
    assert {r.extent_id: r["count"] for r in a1.collect()} == pytest.approx({0: 1.6, 1: 4.0})


def test_aged_heat_job_incremental_equals_from_scratch(spark, spark_cfg, tmp_path, monkeypatch):
    day = 10_000_000  # 10 s "days" keep the fixture small
    rows = [(t, 0, "R", 0, 4096) for t in range(0, day, day // 10)]                 # interval 0: extent 0 x10
    rows += [(day + t, 0, "W", MIB, 4096) for t in range(0, day, day // 5)]        # interval 1: extent 1 x5
    rows += [(2 * day + t, 0, "R", 0, 4096) for t in range(0, day, day // 4)]      # interval 2: extent 0 x4
    rows += [(2 * day + t + 1, 0, "R", MIB, 4096) for t in range(0, day, day // 5)]  # ... and extent 1 x5
    ingest(spark, spark_cfg, "msr", "aging-t", [write_msr(tmp_path / "aging_0.csv", rows)])
    cfg = AgingConfig("aging-t", extent_bytes=MIB, interval_us=day, alpha=0.8, through=1)
    assert run_aging(spark, spark_cfg, cfg) == [0, 1]
    assert run_aging(spark, spark_cfg, AgingConfig("aging-t", MIB, day, 0.8)) == [2]  # nightly: one interval
    table = read_table(spark, spark_cfg.warehouse, "aged_heat", "aging-t")
    incremental = {(r.interval_id, r.extent_id): (r["count"], r.aged_count) for r in table.collect()}
    expected = {(0, 0): (10, 8.0), (1, 0): (0, 1.6), (1, 1): (5, 4.0),
                (2, 0): (4, 0.8 * 4 + 0.2 * 1.6), (2, 1): (5, 0.8 * 5 + 0.2 * 4.0)}
    assert sorted(incremental) == sorted(expected)
    for key, (count, aged) in expected.items():
        assert incremental[key][0] == count
        assert incremental[key][1] == pytest.approx(aged, rel=1e-12), key
    import blockheat.jobs.aged_heat as J
    import blockheat.libs.table_io.heat as HF

    def refuse(*args, **kwargs):
        raise HF.Unsupported("refused by the test")

    with monkeypatch.context() as m:
        m.setattr(J, "compute_interval_counts", refuse)        # the runs count from the requests files,
        m.setattr(HF, "CHUNK_ROWS", 3)                          # each interval read in parts of about 3 requests
        assert run_aging(spark, spark_cfg, AgingConfig("aging-t", MIB, day, 0.8, from_scratch=True)) == [0, 1, 2]
    rebuilt = read_table(spark, spark_cfg.warehouse, "aged_heat", "aging-t").collect()
    assert {(r.interval_id, r.extent_id): (r["count"], r.aged_count) for r in rebuilt} == incremental
    # Spark SQL (the files refused) gives interval 2 (counts and both sides of the blend) exactly as they did.
    monkeypatch.setattr(HF, "request_files", refuse)
    assert run_aging(spark, spark_cfg, AgingConfig("aging-t", MIB, day, 0.8, interval_index=2)) == [2]
    through_sql = read_table(spark, spark_cfg.warehouse, "aged_heat", "aging-t").collect()
    assert sorted(tuple(r) for r in through_sql) == sorted(tuple(r) for r in rebuilt)


def test_whole_trace_heat_from_the_hourly_rows_equals_a_pass_over_the_requests(spark, spark_cfg, hplajw):
    """extent_heat's whole-trace rows are the hourly rows' counts summed (the job does not read the requests
    again for them): the same rows on the bundled HP trace, for extents and a striped layout (counts exactly;
    floating values to 1e-12: the disks' variance is an aggregate whose last bits follow Spark's summing order)."""
    from blockheat.libs.io.tables import trace_info
    from blockheat.libs.transforms.heat import whole_trace_disk_heat, whole_trace_extent_heat
    from tests.conftest import HPLAJW_TRACE_ID as TID

    span = int(trace_info(spark, spark_cfg.warehouse, TID)["span_us"])
    requests = read_table(spark, spark_cfg.warehouse, "requests", TID)
    hourly = compute_extent_heat(requests, extent_bytes=MIB, window_us=3_600_000_000, span_us=span).cache()
    whole = compute_extent_heat(requests, extent_bytes=MIB, window_us=0, span_us=span)
    derived = whole_trace_extent_heat(hourly, extent_bytes=MIB, span_us=span)
    assert derived.count() == whole.count() == 257          # extents of 1 MiB the week touched
    assertDataFrameEqual(derived, whole, checkRowOrder=False, rtol=1e-12, atol=0.0)
    kw = {"span_us": span, "width": 3, "disks": 5, "seed": 5}   # every layout at once; striped has idle hours
    hourly_disks = compute_disk_heats(requests, window_us=3_600_000_000, **kw)
    whole_disks = compute_disk_heats(requests, window_us=0, **kw)
    assert whole_disks.count() == 2 + 3 + 5                 # hplajw's 2 devices, 3 striped and 5 random disks
    assertDataFrameEqual(whole_trace_disk_heat(hourly_disks, span_us=span), whole_disks, checkRowOrder=False,
                         rtol=1e-12, atol=0.0)
    # The files path's arrays (libs.table_io.heat, per device on the driver here): the same rows, every
    # float to the last bit, from requests in time order (one window's cells at a time) and in reverse (the
    # dense grids of any order).
    from blockheat.libs.table_io.heat import HeatParams, device_heat, disk_counts

    p = HeatParams(span, MIB, 3_600_000_000, 65_536, width=3, disks=5, seed=5)
    table = requests.toArrow().sort_by([("ts_us", "ascending"), ("seq", "ascending")])

    def keyed(rows, keys):
        return {tuple(r[k] for k in keys): r for r in rows}

    spark_rows = {w: keyed([r.asDict() for r in frame.drop("trace_id").collect()], EH_KEYS)
                  for w, frame in ((3_600_000_000, hourly), (0, whole))}
    spark_disks = keyed([r.asDict() for r in hourly_disks.collect()], DH_KEYS)
    for order in (table, table.take(np.arange(table.num_rows)[::-1])):
        extents, counts = {}, {}
        for device in sorted(set(order.column("device").to_pylist())):
            rows, counts[device] = device_heat(order.filter(pc.equal(order.column("device"), device)), device, p)
            for w, t in rows.items():
                extents.setdefault(w, []).append(t)
        for w, want in spark_rows.items():
            assert keyed(pa.concat_tables(extents[w]).drop_columns(["trace_id"]).to_pylist(), EH_KEYS) == want
        per_disk, names = disk_counts(counts, p)
        mine = disk_heat_rows(per_disk, names, window_us=3_600_000_000, span_us=span)
        assert keyed(mine.to_pylist(), DH_KEYS) == spark_disks
        assert len(extents[0][0]) + len(extents[0][1]) == 257
    hourly.unpersist()


def test_spark_xxhash64_disk_reproduces_spark_bit_for_bit(spark):
    # The random layout's disk: devices of 0 to 45 UTF-8 bytes (the 4-lane path from 32 bytes on, the 8-, 4- and
    # 1-byte tails), seqs across the int64 range, seeds as ints and beyond 32 bits (a long literal).
    from blockheat.libs.table_io.heat import spark_xxhash64_disk

    rng = np.random.default_rng(3)
    seqs = np.concatenate([rng.integers(-(1 << 62), 1 << 62, 300), [0, -1, (1 << 63) - 1, -(1 << 63)]])
    devices = ["", "a", "h_0", "disk", "hplajw_c", "hplajw_c0t6d0", "é-ü", "x" * 31, "y" * 32, "z" * 45]
    for seed, disks in ((0, 5), (5, 3), (-7, 40), (1 << 40, 7), (9, 8), (2, 1)):     # 8 and 1: by a mask
        df = spark.createDataFrame([(d, int(s)) for d in devices for s in seqs], "device string, seq long")
        got = df.select(F.pmod(F.xxhash64(F.lit(seed), F.col("device"), F.col("seq")), F.lit(disks)).alias("k"))
        want = np.array([r.k for r in got.collect()], np.int64)
        mine = np.concatenate([spark_xxhash64_disk(seed, d, seqs, disks) for d in devices])
        assert np.array_equal(mine, want), (seed, disks)


def _table_rows(spark, cfg, name, trace_id, keys):
    rows = read_table(spark, cfg.warehouse, name, trace_id).drop("trace_id").collect()
    return {tuple(r[k] for k in keys): r.asDict() for r in rows}


EH_KEYS = ("device", "extent_bytes", "window_us", "extent_id", "window_start_us")
DH_KEYS = ("layout", "window_us", "window_start_us", "disk")


def _heat_by_both_paths(spark, cfg, trace_id, monkeypatch, job):
    """The extent_heat job's tables from the requests files, then from Spark SQL (the files refused)."""
    import blockheat.jobs.extent_heat as J
    import blockheat.libs.table_io.heat as HF

    def refuse(*args, **kwargs):
        raise HF.Unsupported("refused by the test")

    with monkeypatch.context() as m:
        m.setattr(J, "read_table", refuse)                 # the Spark path's first step: not taken
        direct = J.run(spark, cfg, job)
    tables = [_table_rows(spark, cfg, n, trace_id, k) for n, k in (("extent_heat", EH_KEYS), ("disk_heat", DH_KEYS))]
    with monkeypatch.context() as m:
        m.setattr(HF, "request_files", refuse)
        through_sql = J.run(spark, cfg, job)
    return direct, through_sql, tables, [_table_rows(spark, cfg, n, trace_id, k)
                                         for n, k in (("extent_heat", EH_KEYS), ("disk_heat", DH_KEYS))]


def test_heat_from_the_files_equals_spark_sql_on_many_devices(spark, spark_cfg, tmp_path, monkeypatch):
    # 4,000 requests on 6 disks over 3 hours in two files, sizes up to 2 MiB (requests crossing extents and stripe
    # units), 64 KiB extents, 10-minute windows, 4 striped and 5 random disks, seed 9; both paths' tables equal.
    from blockheat.jobs.extent_heat import HeatConfig

    rng = np.random.default_rng(11)
    rows = [(int(rng.integers(0, 3 * 3_600_000_000)), int(rng.integers(0, 6)), "R" if rng.random() < 0.4 else "W",
             int(rng.integers(0, 1 << 16)) * 512, int(rng.choice([512, 4096, 65536, 100_000, 1 << 21])))
            for _ in range(4000)]
    paths = [write_msr(tmp_path / "many_0.csv", rows[:2000]), write_msr(tmp_path / "many_1.csv", rows[2000:])]
    ingest(spark, spark_cfg, "msr", "heat-many", paths)
    job = HeatConfig("heat-many", extent_bytes=65_536, window_us=600_000_000, stripe_width=4, random_disks=5, seed=9)
    direct, through_sql, files, sql = _heat_by_both_paths(spark, spark_cfg, "heat-many", monkeypatch, job)
    assert direct == through_sql
    assert files == sql
    windowed = [v for k, v in files[0].items() if k[2] == 600_000_000]
    assert sum(v["requests"] for v in windowed) > 4000                 # pieces: crossing requests count twice
    assert {(k[0], k[1]) for k in files[1]} == {("as-traced", 600_000_000), ("striped", 600_000_000),
                                               ("random", 600_000_000), ("as-traced", 0), ("striped", 0),
                                               ("random", 0)}


def _grid_case(seed: int) -> pa.Table:
    """2,000 requests of one device over 5 hours: sizes 0 to 3 MiB (empty ones on and off extent boundaries,
    requests crossing several extents and stripe units), offsets from 0, seqs across the int64 range."""
    rng = np.random.default_rng(seed)
    n = 2000
    size = rng.choice([0, 512, 4096, 65_536, 100_000, 3 << 20], n)
    offset = rng.integers(0, 1 << 15, n) * 512 + rng.choice([0, 1 << 20], n)
    offset[:50] = rng.integers(0, 64, 50) * (1 << 20)                 # empty requests on extent boundaries
    size[:50] = 0
    return pa.table({"ts_us": rng.integers(0, 5 * 3_600_000_000, n) + 7 * 3_600_000_000,
                     "seq": rng.integers(-(1 << 63), (1 << 63) - 1, n, dtype=np.int64),
                     "op": pa.array(np.where(rng.random(n) < 0.4, "R", "W")).dictionary_encode(),
                     "offset_bytes": offset, "size_bytes": size})


def _reference_heat(table: pa.Table, device: str, p) -> tuple[dict[int, set], dict[str, set]]:
    """device_heat's rows and layout counts by a plain loop over the requests (the definition, request by request):
    extent rows as {(window_start_us, extent_id, requests, reads, blocks, bytes)} per window length, layout counts
    as {(window_start_us, disk, requests, blocks)}."""
    from collections import Counter

    from blockheat.libs.table_io.heat import spark_xxhash64_disk

    def blocks(a: int, b: int) -> int:
        return (b + 511) // 512 - a // 512

    cols = {c: table.column(c).to_pylist() for c in ("ts_us", "seq", "op", "offset_bytes", "size_bytes")}
    disk = spark_xxhash64_disk(p.seed, device, np.array(cols["seq"], np.int64), p.disks)
    extents: dict[int, Counter] = {w: Counter() for w in p.windows}
    layouts: dict[str, Counter] = {"as-traced": Counter(), "random": Counter(), "striped": Counter()}
    for i, (ts, op, lo, size) in enumerate(zip(cols["ts_us"], cols["op"], cols["offset_bytes"], cols["size_bytes"],
                                               strict=True)):
        hi = lo + size
        for w in p.windows:
            start = ts // w * w if w else 0
            for e in range(lo // p.extent_bytes, (hi - 1) // p.extent_bytes + 1):
                a, b = max(lo, e * p.extent_bytes), min(hi, (e + 1) * p.extent_bytes)
                extents[w].update({(start, e, "n"): 1, (start, e, "r"): op == "R", (start, e, "blk"): blocks(a, b),
                                   (start, e, "byt"): b - a})
        start = ts // p.window_us * p.window_us if p.window_us else 0
        layouts["as-traced"].update({(start, 0, "n"): 1, (start, 0, "blk"): blocks(lo, hi)})
        layouts["random"].update({(start, int(disk[i]), "n"): 1, (start, int(disk[i]), "blk"): blocks(lo, hi)})
        for u in range(lo // p.stripe_unit_bytes, (hi - 1) // p.stripe_unit_bytes + 1):
            a, b = max(lo, u * p.stripe_unit_bytes), min(hi, (u + 1) * p.stripe_unit_bytes)
            layouts["striped"].update({(start, u % p.width, "n"): 1, (start, u % p.width, "blk"): blocks(a, b)})
    rows = {w: {(s, e, c[(s, e, "n")], c[(s, e, "r")], c[(s, e, "blk")], c[(s, e, "byt")])
                for s, e, kind in c if kind == "n"} for w, c in extents.items()}
    counts = {k: {(s, d, c[(s, d, "n")], c[(s, d, "blk")]) for s, d, kind in c if kind == "n"}
              for k, c in layouts.items()}
    return rows, counts


@pytest.mark.parametrize("params", [
    {},                                                            # hourly windows, 1 MiB extents, 4 and 4 disks
    {"window_us": 0, "width": 3, "disks": 5, "seed": 1 << 40},      # the whole trace only; a seed beyond 32 bits
    {"window_us": 600_000_000, "extent_bytes": 65_536, "stripe_unit_bytes": 4096, "width": 7, "disks": 40,
     "seed": -7},
    # extents and units not powers of two (divided, not shifted), 8 striped and 8 random disks (masked)
    {"extent_bytes": 3 << 19, "stripe_unit_bytes": 3 * 4096, "width": 8, "disks": 8, "seed": 3}])
@pytest.mark.parametrize("passes", ["one pass", "window passes", "binary search", "time order",
                                    "time order, binary search"])
def test_the_compiled_pass_counts_every_piece_of_every_request(params, passes, monkeypatch):
    """device_heat's compiled passes (heat_kernels) give the counts of a plain loop over the requests: every
    extent_heat column, every layout's counts, the device's end, for an ASCII and a non-ASCII device; the same
    when the extent grid is counted in many passes of a few windows each, when extents are numbered by binary
    search instead of marks, and for requests in time order (ordered_device_cells: a window's cells at a time);
    rows in window order."""
    from blockheat.libs.table_io import heat as HF

    if passes == "window passes":
        monkeypatch.setattr(HF, "_GRID_CELLS", 64)
    elif passes.endswith("binary search"):
        monkeypatch.setattr(HF, "_EXTENT_SPAN", 0)
    table = _grid_case(len(params))
    if passes.startswith("time order"):
        table = table.sort_by("ts_us")
        ordered = []
        monkeypatch.setattr(HF.HK, "ordered_device_cells",
                            lambda *a, f=HF.HK.ordered_device_cells: ordered.append(1) or f(*a))
    else:
        grids = []
        monkeypatch.setattr(HF.HK, "device_grids", lambda *a, f=HF.HK.device_grids: grids.append(1) or f(*a))
    p = HF.HeatParams(span_us=5 * 3_600_000_000, **params)
    for device in ("d0", "é-ü disk"):
        rows, counts = HF.device_heat(table, device, p)
        want_rows, want_counts = _reference_heat(table, device, p)
        assert list(rows) == list(p.windows)
        for w in p.windows:
            got = rows[w]
            assert got.schema == extent_heat.ARROW_SCHEMA
            assert set(got.column("window_us").to_pylist()) == {w}
            assert set(zip(*(got.column(c).to_pylist() for c in ("window_start_us", "extent_id", "requests",
                                                                  "reads", "blocks", "bytes")), strict=True)) \
                == want_rows[w]
            assert got.num_rows == len(want_rows[w]) > 0
        offsets, sizes = table.column("offset_bytes").to_numpy(), table.column("size_bytes").to_numpy()
        assert counts["end"] == int(np.max(offsets + sizes))
        for layout, want in want_counts.items():
            assert all(a.dtype == np.int64 for a in counts[layout])
            assert set(zip(*(a.tolist() for a in counts[layout]), strict=True)) == want, layout
        assert sum(counts["random"][2]) == table.num_rows
        assert set(counts["random"][1]) == set(range(p.disks))
        for w in p.windows:                         # rows in window order
            starts = rows[w].column("window_start_us").to_pylist()
            assert starts == sorted(starts)
    assert ordered if passes.startswith("time order") else grids          # the path the order takes


def test_a_device_with_no_piece_and_one_with_too_many_windows() -> None:
    """Requests of size 0 on extent boundaries touch no extent: no extent rows, but they count as traced; windows
    far too short for one task's grids are left to Spark SQL (Unsupported)."""
    from blockheat.libs.table_io import heat as HF

    p = HF.HeatParams(span_us=3_600_000_000)
    empty = pa.table({"ts_us": [5, 9], "seq": [1, 2], "op": ["R", "W"], "offset_bytes": [1 << 20, 0],
                      "size_bytes": [0, 0]})
    rows, counts = HF.device_heat(empty, "d0", p)
    assert [t.num_rows for t in rows.values()] == [0, 0]
    assert [a.tolist() for a in counts["as-traced"]] == [[0], [0], [2], [0]]
    assert counts["striped"][2].tolist() == []
    with pytest.raises(HF.Unsupported, match=r"device d0: 3,600,000,001 windows of 1 us"):
        HF.device_heat(pa.table({"ts_us": [0, 3_600_000_000], "seq": [1, 2], "op": ["R", "R"],
                                 "offset_bytes": [0, 0], "size_bytes": [512, 512]}), "d0",
                       HF.HeatParams(span_us=3_600_000_000, window_us=1))

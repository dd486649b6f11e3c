"""Trace profile: every definition on a hand-built trace, and pinned figures of the real HP trace.

The hplajw figures were derived independently with a plain numpy/pandas pass over the `requests`
rows (sorting per device, diffing, bincount per second, a set of (device, 4 KiB block) pairs).
"""
from __future__ import annotations

import collections
import json
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from blockheat.jobs.cli.main import main as cli_main
from blockheat.jobs.trace_profile import run as run_profile
from blockheat.libs.io.tables import read_table, trace_info
from blockheat.libs.report import PROFILE_GROUPS
from blockheat.libs.transforms import profile as profile_module
from blockheat.libs.transforms.profile import (
    CODES,
    PS,
    _cell_views,
    _extent_cells,
    _group_stats,
    _lex_order,
    _pack,
    _Partials,
    add_extent_counts,
    compute_trace_profile,
    extent_counts,
    merged_partials,
    ordered_partials,
    round_significant_np,
    skew_stats,
    stitch_runs,
    value_counts,
    value_of_code,
)
from blockheat.libs.transforms.profile_kernels import (
    EXACT_COUNTED,
    block_pass,
    group_cells,
    round_significant_code,
)
from blockheat.schemas import trace_profile
from tests.builders import ingest, make_requests, write_msr
from tests.conftest import HPLAJW_TRACE_ID

MIB = 1 << 20
TINY = [
    ("d", 0, 0, "R", 0, 4096),
    ("d", 1, 5_000, "R", 4096, 4096),          # sequential
    ("d", 2, 25_000, "W", 8192, 8192),         # sequential: a run of 3
    ("e", 3, 1_000_000, "W", MIB, 512),
    ("d", 4, 2_025_000, "R", 0, 4096),         # seek back 16384 bytes; re-reads block 0 after 2.025 s
]


def _metrics(rows, scope, device, window_start=0, window=0):
    return {r.metric: r.value for r in rows if (r.scope, r.device, r.window_start_us, r.window_us)
            == (scope, device, window_start, window)}


@pytest.fixture(scope="module")
def tiny_profile(spark):
    # one request per part: runs, lags, gaps and 1 s bins all cross part edges
    df = compute_trace_profile(make_requests(spark, TINY), span_us=2_025_000, window_us=1_000_000,
                               chunk_us=10_000, rows_per_part=1)
    trace_profile.validate_trace_profile(df)
    return df.collect()


def test_profile_device_definitions_by_hand(tiny_profile):
    d = _metrics(tiny_profile, "device", "d")
    assert (d["requests"], d["reads"], d["writes"]) == (4, 3, 1)
    assert d["read_share_bytes"] == pytest.approx(12288 / 20480)
    assert (d["seq_share"], d["runs"], d["run_length_mean"], d["run_length_max"]) == (0.5, 2, 2.0, 3.0)
    assert (d["seek_bytes_mean"], d["seek_bytes_max"]) == (pytest.approx(16384 / 3), 16384.0)
    assert d["interarrival_us_mean"] == pytest.approx((5000 + 20000 + 2_000_000) / 3)
    assert (d["idle_10ms_count"], d["idle_10ms_total_s"], d["idle_1s_count"]) == (2, pytest.approx(2.02), 1)
    assert (d["footprint_blocks_4k"], d["footprint_bytes"], d["reuse_share"]) == (4, 16384, 0.2)
    assert d["reuse_time_us_p50"] == 2_025_000
    assert (d["size_bytes_p50"], d["size_bytes_max"]) == (4096.0, 8192.0)


def test_profile_trace_scope_merges_devices(tiny_profile):
    t = _metrics(tiny_profile, "trace", "*")
    assert t["requests"] == 5
    assert t["rate_per_s"] == pytest.approx(5 / 2.025)
    # merged arrivals: gaps 5 ms, 20 ms, 975 ms, 1025 ms
    assert (t["idle_10ms_count"], t["idle_1s_count"]) == (3, 1)
    assert t["footprint_blocks_4k"] == 5
    # 1 s bins over 2.025 s -> 3 bins with 3, 1, 1 requests
    assert t["peak_to_mean_1s"] == pytest.approx(3 / (5 / 3))
    assert t["dispersion_1s"] == pytest.approx((11 / 3 - 25 / 9) / (5 / 3))
    # extents: (d, 0) x4 and (e, 1) x1; the hottest 1% (rounded up to one extent) gets 4/5
    assert (t["extents_touched"], t["skew_top1pct_share"]) == (2, 0.8)
    theta = math.log(0.8) / math.log(0.5)
    assert t["skew_theta"] == pytest.approx(theta)
    y = t["skew_y_pct"] / 100
    assert y**theta + y == pytest.approx(1.0)
    assert t["skew_x_pct"] + t["skew_y_pct"] == pytest.approx(100.0)


def test_profile_windows(tiny_profile):
    per_window = {ws: _metrics(tiny_profile, "trace", "*", ws, 1_000_000)["requests"]
                  for ws in (0, 1_000_000, 2_000_000)}
    assert per_window == {0: 3, 1_000_000: 1, 2_000_000: 1}
    # the run of 3 starts in window 0; the run of 1 in window 2
    assert _metrics(tiny_profile, "device", "d", 0, 1_000_000)["run_length_max"] == 3.0


HPLAJW_PINNED = {
    # scope/device: metric -> value (see the module docstring for how they were derived)
    ("trace", "*"): {"requests": 44_519, "reads": 13_040, "runs": 43_917, "seq_share": 0.013522316314382624,
                     "interarrival_us_mean": 13_546_533.736735702, "idle_10ms_count": 31_547,
                     "footprint_blocks_4k": 7_344, "reuse_share": 0.9003135562161502,
                     "peak_to_mean_1s": 1435.9013005682966, "dispersion_1s": 20.001854324373728,
                     "extents_touched": 257, "skew_top10pct_share": 0.7149377964736419},
    ("device", "0"): {"requests": 42_252, "runs": 41_691, "seq_share": 0.013277477989207611,
                      "interarrival_us_mean": 14_273_379.413812691, "idle_10ms_count": 29_390,
                      "footprint_blocks_4k": 7_064, "reuse_share": 0.900240079084875,
                      "peak_to_mean_1s": 1512.9435293003883, "dispersion_1s": 20.003543883706712,
                      "extents_touched": 255, "skew_top10pct_share": 0.7107837360047142},
    ("device", "1"): {"requests": 2_267, "runs": 2_226, "seq_share": 0.01808557565063961,
                      "interarrival_us_mean": 266_110_902.08075905, "idle_10ms_count": 2_227,
                      "footprint_blocks_4k": 280, "reuse_share": 0.9021321216357917,
                      "peak_to_mean_1s": 3724.2655491839437, "dispersion_1s": 4.144013255971771,
                      "extents_touched": 2, "skew_top10pct_share": 0.9311865902073224},
}


@pytest.fixture(scope="module")
def hplajw_profile(spark, spark_cfg, hplajw):
    """The profile job on the hplajw week: (rows it says it wrote, rows in the table)."""
    written = run_profile(spark, spark_cfg, HPLAJW_TRACE_ID)
    return written, read_table(spark, spark_cfg.warehouse, "trace_profile", HPLAJW_TRACE_ID).collect()


def test_profile_pinned_on_hplajw(hplajw_profile):
    written, rows = hplajw_profile
    assert written == len(rows) > 0
    for (scope, device), pinned in HPLAJW_PINNED.items():
        got = _metrics(rows, scope, device)
        assert {m: got[m] for m in pinned} == pytest.approx(pinned, rel=1e-9), (scope, device)
    # one week in 1 h windows: 168 windows hold all requests
    windows = [r for r in rows if r.scope == "trace" and r.window_us == 3_600_000_000 and r.metric == "requests"]
    assert len(windows) <= 168
    assert sum(r.value for r in windows) == 44_519


def test_cli_profile_json(spark, spark_cfg, tmp_path, capsys):
    path = write_msr(tmp_path / "p_0.csv", [(0, 0, "R", 0, 4096), (1000, 0, "R", 4096, 4096),
                                            (3000, 0, "R", 65536, 4096)])
    ingest(spark, spark_cfg, "msr", "prof-cli", [path])
    capsys.readouterr()
    assert cli_main(["profile", "prof-cli", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace"]["requests"] == 3
    assert out["trace"]["seq_share"] == pytest.approx(1 / 3)
    assert out["device h_0"]["interarrival_us_mean"] == 1500


def test_cli_profile_table_is_grouped_and_labelled_as_the_report(spark, spark_cfg, tmp_path, capsys):
    """Two reads of 4 KiB and a write of 8 KiB: the byte share of reads is 50% (it printed as "0 B"), every
    metric listed once, in the report's groups."""
    path = write_msr(tmp_path / "q_0.csv", [(0, 0, "R", 0, 4096), (1000, 0, "W", 4096, 8192),
                                            (3000, 0, "R", 65536, 4096)])
    ingest(spark, spark_cfg, "msr", "prof-table", [path])
    capsys.readouterr()
    assert cli_main(["profile", "prof-table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    titles = [line[:-1] for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert titles == [title for title, _ in PROFILE_GROUPS] + ["Other"]
    assert re.search(r"^reads, share of bytes +50% +50%$", "\n".join(lines), re.MULTILINE)
    assert re.search(r"^reads, share of requests +66.7% +66.7%$", "\n".join(lines), re.MULTILINE)
    assert cli_main(["profile", "prof-table", "--format", "csv"]) == 0
    rows = {line.split(",")[0]: line.split(",")[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["read_share_bytes"] == ["0.5", "0.5"]
    shown = sum(int(m.group(1)) for line in lines if (m := re.match(r"^\((\d+) rows?\)$", line)))
    assert shown == len(rows) == 50                                          # every metric, once, in a group


def test_profile_same_for_any_split(spark, spark_cfg, hplajw_profile):
    """hplajw fits one task by default (every group finished there); split into ~15 parts and 3,000-
    request block tasks, groups merge across tasks, runs join across part edges and 1 s bins are cut
    by 10-minute chunks: the profile must not change."""
    requests = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID)
    span = int(trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)["span_us"])

    def by_key(rows):
        return {(r.scope, r.device, r.window_start_us, r.window_us, r.metric): r.value for r in rows}

    whole = by_key(hplajw_profile[1])
    split = by_key(compute_trace_profile(requests, span_us=span, rows_per_part=3_000, chunk_us=600_000_000).collect())
    assert whole.keys() == split.keys()
    assert len(whole) > 40_000
    assert {k: v for k, v in split.items() if v is not None} == pytest.approx(
        {k: v for k, v in whole.items() if v is not None}, rel=1e-9)
    assert {k for k, v in split.items() if v is None} == {k for k, v in whole.items() if v is None}


def test_round_significant_half_up():
    values = np.array([0, 7, 9_999, 12_345, 12_355, 123_456_789, 99_995])
    assert round_significant_np(values.astype(float)).tolist() == [0, 7, 9_999, 12_350, 12_360, 123_500_000, 100_000]


def test_round_significant_code_equals_float_rounding():
    """The workers' integer rounding, as order-preserving codes, gives round_significant_np's values."""
    rng = np.random.default_rng(11)
    values = np.concatenate([np.array([0, 1, 9_999, 10_000, 10_005, 12_345, 99_995, 99_994, 999_999_999_999_995,
                                       (1 << 53) - 1]),
                             rng.integers(0, 10 ** rng.integers(1, 16, 5_000))]).astype(np.int64)
    codes = round_significant_code(values)
    assert codes.max() < CODES
    assert np.array_equal(value_of_code(codes), round_significant_np(values.astype(float)).astype(np.int64))
    order = np.argsort(values, kind="stable")
    assert (np.diff(codes[order]) >= 0).all()


# exact values counted in a table (the largest below EXACT_COUNTED, at its edge), and sorted per group
@pytest.mark.parametrize("top", [40, EXACT_COUNTED, EXACT_COUNTED + 1, 1 << 40])
@pytest.mark.parametrize("coded", [False, True])
def test_group_cells_by_hand(top, coded):
    rng = np.random.default_rng(top % 97)
    gid = np.sort(rng.integers(0, 30, 4_000))
    values = rng.integers(0, top, len(gid))
    values[::7] = top - 1                            # the largest value, often
    g_n, g_s, g_s2, g_mx, cg, cv, cn = group_cells(gid, values, 30, coded, CODES)
    keys = round_significant_code(values) if coded else values
    want = collections.Counter(zip(gid.tolist(), keys.tolist(), strict=True))
    got = list(zip(cg.tolist(), cv.tolist(), cn.tolist(), strict=True))
    assert got == sorted((g, v, c) for (g, v), c in want.items())
    for g in range(30):
        mine = values[gid == g].astype(np.float64)
        assert g_n[g] == len(mine)
        assert g_s[g] == pytest.approx(mine.sum(), rel=1e-12)
        assert g_s2[g] == pytest.approx((mine * mine).sum(), rel=1e-12)
        assert g_mx[g] == (mine.max() if len(mine) else -np.inf)


def test_round_significant_code_at_every_exponent_edge():
    """The codes at powers of ten and of two and at half-up boundaries, up to 2**63 - 1, equal integer rounding
    by hand (the exponent guessed from the bit length and corrected once; from 10**18 on, the loop)."""
    def by_hand(v: int) -> int:
        if v < 10_000:
            return v
        e = len(str(v)) - 4
        r, rest = divmod(v, 10 ** e)
        r += 2 * rest >= 10 ** e
        if r == 10_000:
            r, e = 1_000, e + 1
        return 10_000 + 9_000 * (e - 1) + (r - 1_000)

    edges = {(1 << b) + d for b in range(64) for d in range(-2, 3)}
    edges |= {10 ** k * m + d for k in range(16) for m in (1_000, 9_999, 10_000) for d in range(-3, 4)}
    edges |= {10 ** k * 9_9995 // 10 + d for k in range(16) for d in range(-2, 3)}     # 9,999.5 x 10**k: rounds up
    values = sorted(v for v in edges if 0 <= v < 1 << 63)
    assert values[-1] == (1 << 63) - 1
    codes = round_significant_code(np.array(values, np.int64))
    assert codes.tolist() == [by_hand(v) for v in values]


@pytest.mark.parametrize("rounded", [True, False])
@pytest.mark.parametrize("values", [
    [0, 1, 9_999, 10_000, 10_005, 12_345, 12_355, 99_995, 99_994, 12_345, 0],     # ties and half-up boundaries
    [-5, 3, 3, 12_345],                                  # a negative value: np.unique's way
    [7, (1 << 53) + 1, 7],                               # past the codes' range
    [512 * i for i in (1, 1, 8, 128, 2_048)],            # exact sizes by bincount
    [1, 10 ** 12],                                       # exact values spread too wide for a bincount
    [],
])
def test_value_counts_equal_np_unique_of_the_rounded_values(values, rounded):
    v = np.array(values, np.int64)
    want_v, want_n = np.unique(round_significant_np(v.astype(float)) if rounded else v.astype(float),
                               return_counts=True)
    got_v, got_n = value_counts(v, rounded=rounded)
    assert got_v.dtype == np.float64
    assert got_n.dtype == np.int64
    assert got_v.tolist() == want_v.tolist()
    assert got_n.tolist() == want_n.tolist()


def _rows_by_key(table):
    out = {}
    for r in table.to_pylist():
        cells = None if r["cells"] is None else np.frombuffer(r["cells"], np.float64).tolist()
        out[(r["kind"], r["scope"], r["device"], r["w"], r["window_us"], r["metric"])] = (
            r["v"], r["n"], r["s"], r["s2"], r["mx"], cells)
    return out


@pytest.mark.parametrize("case", range(12))
def test_whole_number_distribution_equals_general_path(case):
    """distribution() of non-negative integers (sort of one int64 key, bincount sums) gives the rows of
    the general float path: the same finished statistics, histogram cells and group sums."""
    rng = np.random.default_rng(case)
    n = int(rng.integers(1, 4_000))
    code, w = rng.integers(0, 3, n), rng.integers(0, 6, n) * 1_000
    metric = "size_bytes" if case % 3 == 0 else "reuse_time_us"
    values = (rng.choice([512, 4096, 65536], n) if case % 3 == 0 else rng.integers(0, 10 ** (1 + case), n))
    got = {}
    for kind, data in (("int", values.astype(np.int64)), ("float", values.astype(np.float64))):
        out = _Partials(["a", "b", "c"], window_us=1_000, final_whole=case % 4 == 1,
                        final_window=(lambda w: w >= 2_000) if case % 2 else None)
        out.distribution(code, w, metric, "both", data, final=case != 5)
        got[kind] = _rows_by_key(out.table())
    assert got["int"].keys() == got["float"].keys()
    kinds = {k[0] for k in got["int"]}
    assert kinds == ({"final", "hist"} if case % 2 and case != 5 else {"hist"})   # windows >= 2000 finish here
    for key, a in got["int"].items():
        b = got["float"][key]
        assert a[5] == b[5], key                                   # cells: exactly the same values and counts
        assert a[:5] == pytest.approx(b[:5], rel=1e-12, nan_ok=True), key


def test_cell_views_read_every_chunk_in_place():
    """The merges read cells from the column's buffers: chunks, slices and null cells all line up."""
    def part(seed):
        out = _Partials(["a"], window_us=0)
        rng = np.random.default_rng(seed)
        out.distribution(np.zeros(50, np.int64), np.zeros(50, np.int64), "size_bytes", "both", rng.integers(1, 9, 50))
        out.counts("count", "requests", np.zeros(3, np.int64), np.zeros(3, np.int64))    # rows without cells
        return out.table()
    table = pa.concat_tables([part(1), part(2), part(3)]).slice(1)
    assert table.column("cells").num_chunks == 3
    want = [np.zeros(0) if b is None else np.frombuffer(b, np.float64) for b in table.column("cells").to_pylist()]
    got = _cell_views(table)
    assert len(got) == len(want)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def _block_pass_by_hand(ts, lo, hi, window_us, extent_bytes, region_bytes, buckets, bucket):
    """block_pass's results by dictionaries, one 4 KiB block at a time."""
    last, wins, cells, ext = {}, {}, {}, []
    distinct = total = again = 0
    for t, a, z in zip(ts.tolist(), lo.tolist(), (hi - 1).tolist(), strict=True):
        w = t // window_us * window_us if window_us else 0
        sums = wins.setdefault(w, [0, 0.0, 0.0, -np.inf, 0, 0, 0])   # rn, rs, rs2, rmx, fnew, facc, fagain
        ext += [(w, e) for e in range(a // extent_bytes, z // extent_bytes + 1)
                if e * extent_bytes // region_bytes % buckets == bucket]
        for b in range(a // 4096, z // 4096 + 1):
            if b * 4096 // region_bytes % buckets != bucket:
                continue
            total += 1
            sums[5] += 1
            if b in last:
                d = t - last[b]
                again += 1
                sums[0] += 1
                sums[1] += d
                sums[2] += float(d) * float(d)
                sums[3] = max(sums[3], d)
                sums[6] += 1
                sums[4] += last[b] // window_us * window_us != w if window_us else 0
                code = int(round_significant_code(np.array([d]))[0])
                cells[(w, code)] = cells.get((w, code), 0) + 1
            else:
                distinct += 1
                sums[4] += 1
            last[b] = t
    return wins, cells, ext, (distinct, total, again)


@pytest.mark.parametrize(("window_us", "extent_bytes", "buckets", "bucket"),
                         [(10_000, MIB, 1, 0), (0, MIB, 1, 0), (7_000, 3 * 4096, 3, 1), (10_000, 64 * 1024, 4, 0),
                          (1_000, MIB, 2, 1)])      # ~120 windows: the per-window arrays grow past 64
def test_block_pass_matches_a_direct_computation(window_us, extent_bytes, buckets, bucket):
    rng = np.random.default_rng(5)
    n = 6_000
    ts = np.cumsum(rng.integers(0, 40, n))
    lo = rng.integers(0, 3_000, n) * 4096 * 3 + rng.integers(0, 4096, n)       # unaligned, many repeats
    hi = lo + rng.choice([512, 4096, 20_000, 300_000, 3 * MIB], n)             # across blocks, extents, regions
    region_bytes = math.lcm(extent_bytes, 4096)
    none = np.zeros(0, np.int64)
    (win, rn, rs, rs2, rmx, fnew, facc, cell_win, cell_code, cell_n, distinct, total, again,
     ext_w, ext_id, ext_n, held, held_last) = block_pass(ts, lo, hi, window_us, 4096, extent_bytes, region_bytes,
                                                         buckets,
                                                  bucket, CODES, none, none)
    wins, cells, ext, whole = _block_pass_by_hand(ts, lo, hi, window_us, extent_bytes, region_bytes, buckets, bucket)
    assert (distinct, total, again) == whole
    assert 1_000 < again < total                     # re-accesses, within and across windows
    used = facc > 0
    assert sorted(wins) == win[used].tolist()
    if window_us == 1_000:
        assert len(win) > 64                         # the per-window arrays grew
    for i in np.flatnonzero(used):
        want = wins[int(win[i])]
        assert [int(rn[i]), int(fnew[i]), int(facc[i])] == [want[0], want[4], want[5]]
        assert want[6] == want[0]                    # re-accesses: the reuse times' count
        assert rs[i] == want[1]
        assert rs2[i] == pytest.approx(want[2], rel=1e-12)
        assert (rmx[i] == want[3]) if want[0] else rmx[i] == -np.inf
    assert {(int(win[k]), c): m for k, c, m in zip(cell_win.tolist(), cell_code.tolist(), cell_n.tolist(),
                                                   strict=True)} == cells
    keys = list(zip(cell_win.tolist(), cell_code.tolist(), strict=True))
    assert keys == sorted(keys)                      # by window, then value code
    # per window and extent, the requests touching it: each pair once, the windows in time order
    pairs = list(zip(ext_w.tolist(), ext_id.tolist(), strict=True))
    assert dict(zip(pairs, ext_n.tolist(), strict=True)) == collections.Counter(ext)
    assert len(set(pairs)) == len(pairs)
    assert (np.diff(ext_w) >= 0).all()
    assert ext_n.max() > 1                           # extents touched again within a window
    # the blocks' last access afterwards: one per distinct block of the bucket's regions
    assert len(held) == distinct == len(set(held.tolist()))
    # resumed at a request: the second part after the first part's table counts what the whole pass counts
    cut = n // 3
    first = block_pass(ts[:cut], lo[:cut], hi[:cut], window_us, 4096, extent_bytes, region_bytes, buckets, bucket,
                       CODES, none, none)
    second = block_pass(ts[cut:], lo[cut:], hi[cut:], window_us, 4096, extent_bytes, region_bytes, buckets, bucket,
                        CODES, first[16], first[17])
    assert first[10] + second[10] == distinct
    assert first[12] + second[12] == again
    assert second[11] == total - first[11]
    assert dict(zip(second[16].tolist(), second[17].tolist(), strict=True)) == dict(
        zip(held.tolist(), held_last.tolist(), strict=True))


def test_extent_cells_count_touches_per_group():
    rng = np.random.default_rng(9)
    n = 3_000
    code, w, extent = rng.integers(0, 3, n), rng.integers(0, 4, n) * 100, rng.integers(0, 50, n)
    touches = rng.integers(1, 4, n)                  # rows of one (device, window, extent) summed
    out = _Partials(["a", "b", "c"], window_us=100)
    _extent_cells(out, code, w, extent, touches)
    got = {(r["scope"], r["device"], r["w"], r["window_us"]): sorted(np.frombuffer(r["cells"], np.float64).astype(int))
           for r in out.table().to_pylist()}
    want: dict = {}
    for c, wi, e, k in zip(code.tolist(), w.tolist(), extent.tolist(), touches.tolist(), strict=True):
        name = "abc"[c]
        for group in (("device", name, 0, 0), ("device", name, wi, 100), ("trace", "*", 0, 0), ("trace", "*", wi, 100)):
            want.setdefault(group, {}).setdefault((c, e), 0)
            want[group][(c, e)] += k
    assert got == {g: sorted(counts.values()) for g, counts in want.items()}


def test_group_stats_percentiles_match_linear_interpolation():
    rng = np.random.default_rng(3)
    values = np.sort(rng.integers(0, 50, 101).astype(float))
    v, n = np.unique(values, return_counts=True)
    stats = _group_stats(np.array([0]), v, n, v * n, v * v * n, v)
    for p in PS:
        assert stats[f"p{round(p * 100):g}"][0] == pytest.approx(np.percentile(values, p * 100))
    assert (stats["mean"][0], stats["max"][0], stats["count"][0]) == (pytest.approx(values.mean()), values.max(), 101)
    assert stats["cv"][0] == pytest.approx(values.std() / values.mean())


def test_stitch_runs_across_parts():
    # part 0 leaves a run of 2 open (window 0); part 1 continues it by 3 and opens a run of 1;
    # part 2 is one request that continues that run; part 3 opens a run nothing continues
    pieces = [("d", 0, 2, 2, 0), ("d", 1, 0, 3, 10), ("d", 1, 2, 1, 10), ("d", 2, 1, 1, 20), ("d", 3, 2, 4, 30)]
    assert sorted(stitch_runs(pieces)) == [("d", 0, 5), ("d", 10, 2), ("d", 30, 4)]
    with pytest.raises(ValueError, match="continues a run no earlier part left open"):
        stitch_runs([("e", 0, 0, 1, 0)])


def test_skew_stats_by_hand():
    got = skew_stats(np.array([1, 4]))
    assert (got["extents_touched"], got["skew_top1pct_share"], got["skew_top20pct_share"]) == (2, 0.8, 0.8)
    assert got["skew_theta"] == pytest.approx(math.log(0.8) / math.log(0.5))
    assert skew_stats(np.array([7]))["skew_theta"] is None  # one extent: nothing to fit


@pytest.mark.parametrize("values", ["whole", "fractional", "negative", "huge", "empty"])
@pytest.mark.parametrize("windows", ["hourly", "scattered"])
def test_lex_order_is_lexsorts_permutation(values, windows):
    """The one-key sort of the histogram cells orders exactly as the stable lexsort it replaces."""
    rng = np.random.default_rng(len(values) * 7 + len(windows))
    n = 0 if values == "empty" else 5_000
    code = rng.integers(0, 6, n)
    w = rng.integers(0, 30, n) * 3_600_000_000 if windows == "hourly" else rng.integers(0, 1 << 50, n)
    v = {"whole": rng.integers(0, 40, n).astype(np.float64), "fractional": rng.integers(0, 40, n) / 4,
         "negative": rng.integers(-20, 20, n).astype(np.float64), "huge": rng.integers(0, 1 << 45, n) * 1.0,
         "empty": np.zeros(0)}[values]
    assert np.array_equal(_lex_order([code, w], v), np.lexsort((v, w, code)))
    bins = rng.integers(0, 9, n)                          # one key alone (the burst bins of _group_sums)
    assert np.array_equal(_lex_order([], bins), np.argsort(bins, kind="stable"))


@pytest.fixture(scope="module")
def hplajw_part(hplajw, spark, spark_cfg):
    """ordered_partials' input and arguments for a part of the bundled real trace: every device, hour windows, the
    requests from the middle of the trace on, with a request of each device before them."""
    requests = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID).select(
        "device", "seq", "ts_us", "op", "offset_bytes", "size_bytes").toArrow()
    cut = int(np.median(requests["ts_us"].to_numpy()))
    part = requests.filter(pc.greater_equal(requests["ts_us"], cut))
    before = {d: (cut - 1_000 * k, 8192 * k) for k, d in enumerate(sorted(set(part["device"].to_pylist())))}
    return part, {"part": 1, "before": before, "before_ts": cut - 1, "window_us": 3_600_000_000,
                  "span": (cut, None), "data_end": int(requests["ts_us"].to_numpy().max()) + 1}


@pytest.mark.parametrize("merged", [True, False])
def test_gap_pass_equals_the_numpy_path_on_hplajw(hplajw_part, monkeypatch, merged):
    """The seek, interarrival and idle distributions of the compiled pass (gap_cells) are the numpy path's rows
    exactly, on a part of the bundled real trace."""
    part, args = hplajw_part
    compiled, real = [], profile_module._gap_cells
    monkeypatch.setattr(profile_module, "_gap_cells", lambda *a: compiled.append(real(*a)) or compiled[-1])
    fused = ordered_partials(part, merged=merged, **args)
    assert compiled[0] is not None                              # the compiled pass made these rows
    monkeypatch.setattr(profile_module, "_gap_cells", lambda *a: None)
    numpy_rows = ordered_partials(part, merged=merged, **args)
    assert fused.num_rows > 1_000
    assert fused.equals(numpy_rows)


def test_device_bursts_equal_the_numpy_bursts_on_hplajw(hplajw_part, monkeypatch):
    """A part's burst rows of the device scope from the compiled pass (device_bursts) are bursts()' rows exactly:
    the bins inside the part per device and hour, and those reaching outside it as "bin" rows."""
    part, args = hplajw_part
    fused = ordered_partials(part, merged=False, **args)
    kinds = collections.Counter(fused.filter(pc.is_in(fused["kind"], pa.array(["burst", "bin"])))["kind"].to_pylist())
    assert kinds["burst"] > 50
    assert kinds["bin"] > 0
    monkeypatch.setattr(_Partials, "device_bursts", lambda self, code, w, ts, span: self.bursts(
        code, w, ts, span, scopes=("device",)))
    assert ordered_partials(part, merged=False, **args).equals(fused)


@pytest.mark.parametrize("stop", [None, "inside"])
def test_trace_bursts_equal_the_numpy_bursts_on_hplajw(hplajw_part, monkeypatch, stop):
    """An arrival part's burst rows of the trace scope from the compiled pass (device_bursts, every row the trace's
    code) are bursts()' rows exactly, bins cut by the part's start (and its stop) as "bin" rows."""
    part, args = hplajw_part
    ts = part["ts_us"].to_numpy()
    span = (args["span"][0], int(np.quantile(ts, 0.8)) + 123_457 if stop else None)
    kw = {"before_ts": args["before_ts"], "window_us": args["window_us"], "span": span, "data_end": args["data_end"]}
    fused = merged_partials(ts[ts < span[1]] if stop else ts, **kw)
    kinds = collections.Counter(fused.filter(pc.is_in(fused["kind"], pa.array(["burst", "bin"])))["kind"].to_pylist())
    assert kinds["burst"] > 10
    assert kinds["bin"] == 4              # a 1 s and a 1 min bin at the start and at the stop (or the data's end)
    monkeypatch.setattr(_Partials, "device_bursts", lambda self, code, w, ts, span, scope: self.bursts(
        code, w, ts, span, scopes=(scope,)))
    assert merged_partials(ts[ts < span[1]] if stop else ts, **kw).equals(fused)


def test_a_seek_beyond_exact_integers_takes_the_float_path():
    """A seek of 2**60 bytes leaves the integer path: the rows come from numpy's float path, the values right."""
    table = pa.table({"device": ["d"] * 3, "seq": [0, 1, 2], "ts_us": [0, 10, 30], "op": ["R", "W", "R"],
                      "offset_bytes": [0, 1 << 60, 0], "size_bytes": [512] * 3})
    rows = ordered_partials(table, part=0, before={}, before_ts=None, window_us=0).to_pylist()
    final = {r["metric"]: r["v"] for r in rows if r["kind"] == "final" and r["scope"] == "device"}
    assert final["seek_bytes_max"] == float((1 << 60) + 512)
    assert final["seek_bytes_mean"] == pytest.approx(float(1 << 60), rel=1e-12)
    assert (final["interarrival_us_mean"], final["interarrival_us_max"]) == (15.0, 20.0)


def test_extent_counts_are_summed_by_device_window_and_extent_in_that_order():
    """Tasks' "extent_ids" rows (a whole-trace row has window_us 0: w -1) summed with stored counts, by hand."""
    def ids(device: str, w: int, window_us: int, pairs: list[tuple[int, int]]) -> dict:
        return {"kind": "extent_ids", "scope": "device", "device": device, "w": w, "window_us": window_us,
                "metric": "extent", "key": 0, "v": 0.0, "n": 0, "s": 0.0, "s2": 0.0, "mx": 0.0,
                "cells": _pack(*(np.array(c, np.int64) for c in zip(*pairs, strict=True)))}

    partials = pa.Table.from_pylist([
        ids("sdb", 3600, 3600, [(7, 2), (1, 1)]), ids("sda", 0, 0, [(5, 3)]), ids("sdb", 3600, 3600, [(7, 4)]),
        {**ids("sda", 0, 0, [(9, 9)]), "kind": "hist"},                       # not an extent_ids row: left out
        ids("sda", 0, 0, [(2, 1), (5, 1)]), ids("sda", 3600, 3600, [(5, 1)])], schema=profile_module.PARTIAL)
    counts = extent_counts(partials)
    assert counts.to_pylist() == [
        {"device": "sda", "w": -1, "extent": 2, "n": 1}, {"device": "sda", "w": -1, "extent": 5, "n": 4},
        {"device": "sda", "w": 3600, "extent": 5, "n": 1},
        {"device": "sdb", "w": 3600, "extent": 1, "n": 1}, {"device": "sdb", "w": 3600, "extent": 7, "n": 6}]
    stored = pa.Table.from_pylist([{"device": "sdc", "w": -1, "extent": 0, "n": 5},
                                   {"device": "sda", "w": -1, "extent": 5, "n": 10}], schema=profile_module.EXTENTS)
    both = add_extent_counts([stored, counts]).to_pylist()
    assert both[1] == {"device": "sda", "w": -1, "extent": 5, "n": 14}
    assert [(r["device"], r["w"], r["extent"]) for r in both] == [
        ("sda", -1, 2), ("sda", -1, 5), ("sda", 3600, 5), ("sdb", 3600, 1), ("sdb", 3600, 7), ("sdc", -1, 0)]
    assert add_extent_counts([]).num_rows == 0
    assert extent_counts(partials.slice(0, 0)).num_rows == 0

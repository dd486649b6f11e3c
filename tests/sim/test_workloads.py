"""Workload generators: FIVE's synthetic files and skew, Poisson background traffic, mixing, and the Arrow
`requests` conversion. Same generator seed, same workload."""
from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from blockheat.sim.records import FLAG_BACKGROUND, Requests
from blockheat.sim.workloads import five_synthetic, from_arrow, mix, poisson_background, www_synthetic, xy_skew_ranks


def test_xy_skew_sends_x_percent_of_requests_to_y_percent_of_items() -> None:
    ranks = xy_skew_ranks(np.random.default_rng(1), 400_000, 2000, 70.0, 30.0)
    assert np.mean(ranks <= 600) == pytest.approx(0.70, abs=0.005)            # 70 % to the top 30 %
    assert np.mean(ranks <= 180) == pytest.approx(0.49, abs=0.005)            # self-similar: 70 % of 70 %
    with pytest.raises(ValueError, match="X=100"):
        xy_skew_ranks(np.random.default_rng(1), 1, 10, 100.0, 30.0)


def test_five_synthetic_workload_matches_table_2() -> None:
    w = five_synthetic(np.random.default_rng(5), n_requests=100_000, rate_per_s=100.0)
    req = w.requests
    assert len(req) == 100_000
    assert len(w.file_start) == 10_000
    assert np.mean(req.is_read) == pytest.approx(0.7, abs=0.01)
    kb = req.sectors.astype(float)                                             # 1 KB sectors
    assert kb.mean() == pytest.approx(260, rel=0.05)                          # Table 2: 260 KB
    assert kb.std() == pytest.approx(416, rel=0.08)                           # Table 2: 416 KB
    gaps = np.diff(req.arrival_us)
    assert gaps.mean() == pytest.approx(10_000, rel=0.02)                     # Poisson at 100/s
    # Files lie back to back without overlap; requests hit whole active files only.
    order = np.argsort(w.file_start)
    assert np.all(w.file_start[order][1:] == (w.file_start + w.file_sectors)[order][:-1])
    hit = np.searchsorted(w.file_start[order], req.lbn)
    assert set(np.unique(w.file_class[order][hit])) == {0, 1}
    again = five_synthetic(np.random.default_rng(5), n_requests=100_000, rate_per_s=100.0)
    np.testing.assert_array_equal(again.requests.lbn, req.lbn)


def test_five_skewed_workload_concentrates_on_hot_files() -> None:
    w = five_synthetic(np.random.default_rng(6), n_requests=50_000, rate_per_s=50.0, skew="xy")
    _, counts = np.unique(w.requests.lbn, return_counts=True)
    top = np.sort(counts)[::-1]
    assert top[:600].sum() / counts.sum() == pytest.approx(0.70, abs=0.02)


def test_five_workload_logical_space_ends_after_its_last_placed_file() -> None:
    w = five_synthetic(np.random.default_rng(5), n_requests=100, rate_per_s=10.0)
    assert w.logical_sectors == int(w.file_sectors.sum())            # files back to back, no gaps
    assert int((w.requests.lbn + w.requests.sectors).max()) <= w.logical_sectors


def test_www_synthetic_is_fives_www_trace_class() -> None:
    # FIVE 4.2.1: 181,914 whole-file reads of 9,126 files over 120 h, request sizes 14 KB mean, 28 KB sd.
    w = www_synthetic(np.random.default_rng(3))
    req = w.requests
    assert (len(req), len(w.file_start)) == (181_914, 9_126)
    assert req.is_read.all()
    assert req.arrival_us.min() >= 0
    assert req.arrival_us.max() < 120 * 3600e6
    assert np.all(np.diff(req.arrival_us) >= 0)
    order = np.argsort(w.file_start)                                           # files back to back from 0
    assert w.file_start[order][0] == 0
    assert np.all(w.file_start[order][1:] == (w.file_start + w.file_sectors)[order][:-1])
    f = order[np.searchsorted(w.file_start[order], req.lbn)]                  # whole files only
    assert np.array_equal(w.file_start[f], req.lbn)
    assert np.array_equal(w.file_sectors[f], req.sectors)
    # Equation (26) over 9,126 files: the top file gets (1/N)^(log 0.7 / log 0.3) of the reads.
    _, counts = np.unique(req.lbn, return_counts=True)
    theta = np.log(0.7) / np.log(0.3)
    assert counts.max() / len(req) == pytest.approx((1 / 9126) ** theta, rel=0.05)
    # File sizes (not popularity weighted) are lognormal with the paper's mean and sd, rounded up to 1 KB.
    big = www_synthetic(np.random.default_rng(4), n_requests=0, n_files=400_000)
    assert big.file_sectors.mean() == pytest.approx(14.5, rel=0.03)
    assert big.file_sectors.std() == pytest.approx(28.0, rel=0.08)
    # The day cycle 1 + a sin(2 pi t / 24 h): the first half of each day gets 1/2 + a/pi of the arrivals.
    hour = (req.arrival_us // 3600e6) % 24
    assert np.mean(hour < 12) == pytest.approx(0.5 + 0.5 / np.pi, abs=0.005)
    flat = www_synthetic(np.random.default_rng(3), day_amplitude=0.0).requests
    assert np.mean((flat.arrival_us // 3600e6) % 24 < 12) == pytest.approx(0.5, abs=0.005)
    again = www_synthetic(np.random.default_rng(3))
    np.testing.assert_array_equal(again.requests.arrival_us, req.arrival_us)
    with pytest.raises(ValueError, match="day_amplitude"):
        www_synthetic(np.random.default_rng(3), day_amplitude=1.5)


def test_poisson_background_rate_size_and_flags() -> None:
    bg = poisson_background(np.random.default_rng(2), rate_per_s=150.0, start_us=0.0, end_us=100e6,
                            address_sectors=1_000_000, size_sectors=16)
    assert len(bg) == pytest.approx(15_000, rel=0.03)
    assert np.all(bg.lbn % 16 == 0)
    assert bg.lbn.max() + 16 <= 1_000_000
    assert np.all(bg.sectors == 16)
    assert np.all(bg.is_background)
    assert np.mean(bg.is_read) == pytest.approx(0.5, abs=0.02)


def test_mix_keeps_time_order_and_flags() -> None:
    trace = Requests.build([0.0, 10.0, 20.0], [0, 0, 0], [0, 8, 16], [8, 8, 8], [True, True, False],
                           think_us=np.array([1.0, 2.0, 3.0]))
    bg = Requests.build([5.0, 10.0], [0, 0], [100, 200], [8, 8], [True, True], background=[True, True])
    m = mix(trace, bg)
    assert m.arrival_us.tolist() == [0.0, 5.0, 10.0, 10.0, 20.0]
    assert m.lbn.tolist() == [0, 100, 8, 200, 16]                             # trace first at equal times
    assert (m.flags & FLAG_BACKGROUND).astype(bool).tolist() == [False, True, False, True, False]
    assert m.think_us.tolist() == [1.0, 0.0, 2.0, 0.0, 3.0]


def test_from_arrow_converts_the_requests_columns() -> None:
    table = pa.table({"trace_id": ["t"] * 4, "device": ["b", "a", "b", "a"], "seq": [3, 1, 2, 0],
                      "ts_us": [5, 5, 1, 0], "op": ["W", "R", "R", "W"],
                      "offset_bytes": [1024, 0, 600, 511], "size_bytes": [512, 1, 100, 2]})
    req, devices = from_arrow(table, sector_size=512)
    assert devices == ("a", "b")
    assert req.arrival_us.tolist() == [0.0, 1.0, 5.0, 5.0]                   # by ts_us, then seq
    assert req.device.tolist() == [0, 1, 0, 1]
    assert req.lbn.tolist() == [0, 1, 0, 2]
    assert req.sectors.tolist() == [2, 1, 1, 1]                              # 511 + 2 bytes spans two sectors
    assert req.is_read.tolist() == [False, True, True, False]
    with pytest.raises(ValueError, match=r"devices \['b'\] are not in the given device list \['a'\]"):
        from_arrow(table, sector_size=512, devices=["a"])


def test_requests_refuse_unsorted_or_bad_rows() -> None:
    with pytest.raises(ValueError, match=r"request 1 arrives at 1\.0 us, before request 0 at 2\.0 us"):
        Requests.build([2.0, 1.0], [0, 0], [0, 0], [1, 1], [True, True])
    with pytest.raises(ValueError, match="sectors must be > 0, request 0 has 0"):
        Requests.build([0.0], [0], [0], [0], [True])


def _scattered_requests(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"device": rng.choice(["sdb", "sda", "sdc"], n), "seq": rng.permutation(n),
                     "ts_us": rng.integers(0, n // 4, n),                    # many equal times: seq decides
                     "op": rng.choice(["R", "W"], n), "offset_bytes": rng.integers(0, 1 << 30, n),
                     "size_bytes": rng.integers(1, 1 << 16, n)})


def _same(a: Requests, b: Requests) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) and getattr(a, k).dtype == getattr(b, k).dtype
               for k in ("arrival_us", "device", "lbn", "sectors", "flags"))


def test_from_parquet_files_of_a_partitioned_table_and_a_window(tmp_path) -> None:
    # The requests table's own files hold no device column (a partition column): each file's device is given.
    # With a window, only the rows with start <= ts_us < end are read, whatever file they are in.
    import pyarrow.parquet as pq

    from blockheat.sim.workloads import from_parquet_files

    table = _scattered_requests(4000)
    files, devices = [], []
    for d in ("sdc", "sda", "sdb"):
        rows = table.filter(pc.equal(table.column("device"), d)).drop_columns(["device"])
        for k, (a, b) in enumerate(itertools.pairwise([0, 5, 600, rows.num_rows])):
            files.append(str(tmp_path / f"{d}-{k}.parquet"))
            devices.append(d)
            pq.write_table(rows.slice(a, b - a), files[-1])
    got, got_devices = from_parquet_files(files, sector_size=512, file_devices=devices)
    want, want_devices = from_arrow(table, sector_size=512)
    assert got_devices == want_devices == ("sda", "sdb", "sdc")
    assert _same(got, want)
    inside = pc.and_(pc.greater_equal(table.column("ts_us"), 200), pc.less(table.column("ts_us"), 700))
    windowed, _ = from_parquet_files(files, sector_size=512, file_devices=devices, window_us=(200, 700))
    assert _same(windowed, from_arrow(table.filter(inside), sector_size=512)[0])
    assert 0 < len(windowed) < len(want)
    assert len(from_parquet_files(files, sector_size=512, file_devices=devices, window_us=(10**9, 10**9 + 1))[0]) == 0
    with pytest.raises(ValueError, match="2 file devices for 9 files"):
        from_parquet_files(files, sector_size=512, file_devices=devices[:2])


def test_from_parquet_files_and_tables_equal_from_arrow(tmp_path) -> None:
    # One table cut into files of uneven sizes, in no particular order: the same requests, ordered by (ts, seq).
    import pyarrow.parquet as pq

    from blockheat.sim.workloads import from_arrow_tables, from_parquet_files

    table = _scattered_requests(5000)
    want, devices = from_arrow(table, sector_size=512)
    cuts = [0, 1, 700, 701, 2500, 5000]
    files = []
    for k, (a, b) in enumerate(itertools.pairwise(cuts)):
        files.append(str(tmp_path / f"{k}.parquet"))
        pq.write_table(table.slice(a, b - a), files[-1])
    files.reverse()
    got, got_devices = from_parquet_files(files, sector_size=512)
    assert devices == got_devices == ("sda", "sdb", "sdc")
    assert _same(got, want)
    tables, tables_devices = from_arrow_tables((pq.read_table(f) for f in files), sector_size=512)
    assert tables_devices == devices
    assert _same(tables, want)
    order = ("sdc", "sda", "sdb", "sdd")
    assert _same(from_parquet_files(files, sector_size=4096, devices=order)[0],
                 from_arrow(table, sector_size=4096, devices=order)[0])
    with pytest.raises(ValueError, match=r"devices \['sdc'\] are not in the given device list"):
        from_parquet_files(files, sector_size=512, devices=["sda", "sdb"])
    pq.write_table(table.drop_columns(["op"]).slice(0, 10), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"requests file .*bad\.parquet lacks column\(s\) op"):
        from_parquet_files([*files, str(tmp_path / "bad.parquet")], sector_size=512)


def test_a_coded_table_gives_the_requests_of_its_device_column() -> None:
    # The device indices given per row stand for the device column: the same requests in (ts, seq) order.
    from blockheat.sim.workloads import from_coded_table

    table = _scattered_requests(3000)
    order = ("sdc", "sda", "sdb")
    want, _ = from_arrow(table, sector_size=512, devices=order)
    codes = np.array([order.index(d) for d in table.column("device").to_pylist()], np.int32)
    chunked = pa.concat_tables([table.slice(0, 1000), table.slice(1000)]).drop_columns(["device"])
    assert _same(from_coded_table(chunked, codes, sector_size=512), want)
    unsequenced = table.drop_columns(["seq"])              # without seq: equal times keep the rows' order
    assert _same(from_coded_table(unsequenced.drop_columns(["device"]), codes, sector_size=512),
                 from_arrow(unsequenced, sector_size=512, devices=order)[0])
    with pytest.raises(ValueError, match="2 device indices for 3000 rows"):
        from_coded_table(chunked, codes[:2], sector_size=512)

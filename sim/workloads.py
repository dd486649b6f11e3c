"""Workloads for the simulator: traces as Requests (from columns or an Arrow `requests` table), FIVE's
synthetic file workload, and Poisson background traffic mixed into a trace. Randomness only through the
numpy Generator the caller passes; same generator state, same workload."""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.sim.records import FLAG_BACKGROUND, FLAG_READ, Requests

__all__ = [
    "FIVE_CLASSES",
    "FileClass",
    "FiveWorkload",
    "five_synthetic",
    "from_arrow",
    "from_arrow_tables",
    "from_parquet_files",
    "mix",
    "poisson_background",
    "www_synthetic",
    "xy_skew_ranks",
]


@dataclass(frozen=True)
class FileClass:
    """files of exponentially distributed size with mean_kb; active classes receive requests."""

    name: str
    files: int
    mean_kb: float
    active: bool = True


#: FIVE section 4.1 / Table 2: 1000 files of 20 KB and 1000 of 500 KB receive requests; 8000 passive
#: files of 1000 KB (10,000 files in all) only occupy space.
FIVE_CLASSES = (FileClass("A", 1000, 20.0), FileClass("B", 1000, 500.0), FileClass("C", 8000, 1000.0, active=False))


@dataclass(frozen=True, eq=False)
class FiveWorkload:
    """The generated requests plus the file table (logical start and size in sectors, class index)."""

    requests: Requests
    file_start: np.ndarray
    file_sectors: np.ndarray
    file_class: np.ndarray

    @property
    def logical_sectors(self) -> int:
        # Files lie in a random order: the space ends with the file placed last, not the last in the table.
        return int((self.file_start + self.file_sectors).max()) if len(self.file_start) else 0


def xy_skew_ranks(rng: np.random.Generator, n: int, n_items: int, x: float, y: float) -> np.ndarray:
    """n ranks in 1..n_items from FIVE's equation (26): P[rank <= s] = (s / N)^(log(X/100) / log(Y/100)),
    a self-similar skew where X% of the requests go to Y% of the items, recursively."""
    if not (0 < x < 100 and 0 < y < 100):
        raise ValueError(f"X and Y must be percentages strictly between 0 and 100, got X={x}, Y={y}")
    theta = math.log(x / 100.0) / math.log(y / 100.0)
    u = rng.random(n)
    return np.clip(np.ceil(n_items * u ** (1.0 / theta)), 1, n_items).astype(np.int64)


def five_synthetic(rng: np.random.Generator, *, n_requests: int, rate_per_s: float, read_fraction: float = 0.7,
                   skew: str = "uniform", x: float = 70.0, y: float = 30.0,
                   classes: Sequence[FileClass] = FIVE_CLASSES, sector_size: int = 1024) -> FiveWorkload:
    """FIVE's synthetic workload (section 4.1): each request reads or writes one whole file.

    File sizes are exponential within their class (rounded up to whole sectors). The files lie back to
    back on one logical volume (device 0) in a random order. Requests pick an active file uniformly
    (skew="uniform") or by equation (26) over a random ranking of the active files (skew="xy"); arrivals
    are Poisson at rate_per_s.
    """
    if n_requests < 0 or not rate_per_s > 0:
        raise ValueError(f"need n_requests >= 0 and rate_per_s > 0, got {n_requests} and {rate_per_s}")
    if not 0 <= read_fraction <= 1:
        raise ValueError(f"read_fraction must be in [0, 1], got {read_fraction}")
    if skew not in ("uniform", "xy"):
        raise ValueError(f"skew must be 'uniform' or 'xy', got {skew!r}")
    sizes_kb = np.concatenate([rng.exponential(c.mean_kb, c.files) for c in classes])
    klass = np.concatenate([np.full(c.files, i, dtype=np.int64) for i, c in enumerate(classes)])
    sectors = np.maximum(1, np.ceil(sizes_kb * 1024.0 / sector_size)).astype(np.int64)
    order = rng.permutation(len(sectors))
    start = np.zeros(len(sectors), dtype=np.int64)
    start[order] = np.concatenate([[0], np.cumsum(sectors[order])[:-1]])
    active = np.flatnonzero(np.isin(klass, [i for i, c in enumerate(classes) if c.active]))
    if active.size == 0:
        raise ValueError("no active file class")
    if skew == "uniform":
        chosen = active[rng.integers(0, active.size, n_requests)]
    else:
        ranking = rng.permutation(active)
        chosen = ranking[xy_skew_ranks(rng, n_requests, active.size, x, y) - 1]
    arrival = np.cumsum(rng.exponential(1e6 / rate_per_s, n_requests))
    reads = rng.random(n_requests) < read_fraction
    req = Requests.build(arrival, np.zeros(n_requests), start[chosen], sectors[chosen], reads)
    return FiveWorkload(req, start, sectors, klass)


def www_synthetic(rng: np.random.Generator, *, n_requests: int = 181_914, n_files: int = 9_126,
                  span_s: float = 120 * 3600.0, mean_kb: float = 14.0, sd_kb: float = 28.0, x: float = 70.0,
                  y: float = 30.0, day_amplitude: float = 0.5, sector_size: int = 1024) -> FiveWorkload:
    """A many-user WWW server trace of FIVE's class (section 4.2.1: 181,914 whole-file reads of 9,126 files over
    120 hours, request sizes of mean 14 KB and standard deviation 28 KB, heavily skewed access frequencies).

    File sizes are lognormal with mean_kb and sd_kb (rounded up to whole sectors), independent of popularity, so
    a request's expected size and spread are the file sizes'; files lie back to back on device 0 in a random
    order; each request reads one whole file, picked by equation (26) over a random ranking of all files; arrival
    times are a Poisson process over [0, span_s) whose rate follows a day cycle, proportional to
    1 + day_amplitude x sin(2 pi t / 24 h) (0: constant rate). All files are one class (0)."""
    if n_requests < 0 or n_files <= 0 or not span_s > 0 or not (mean_kb > 0 and sd_kb >= 0):
        raise ValueError(f"bad WWW parameters: {n_requests} requests, {n_files} files, span {span_s} s, "
                         f"size {mean_kb} +- {sd_kb} KB")
    if not 0 <= day_amplitude <= 1:
        raise ValueError(f"day_amplitude must be in [0, 1], got {day_amplitude}")
    sigma2 = math.log1p((sd_kb / mean_kb) ** 2)
    sizes_kb = rng.lognormal(math.log(mean_kb) - sigma2 / 2, math.sqrt(sigma2), n_files)
    sectors = np.maximum(1, np.ceil(sizes_kb * 1024.0 / sector_size)).astype(np.int64)
    order = rng.permutation(n_files)
    start = np.zeros(n_files, dtype=np.int64)
    start[order] = np.concatenate([[0], np.cumsum(sectors[order])[:-1]])
    ranking = rng.permutation(n_files)
    chosen = ranking[xy_skew_ranks(rng, n_requests, n_files, x, y) - 1]
    # n points of a Poisson process given its count: independent draws from the rate's shape (by rejection).
    times = np.zeros(0)
    day_s = 24 * 3600.0
    while len(times) < n_requests:
        t = rng.uniform(0.0, span_s, 2 * (n_requests - len(times)) + 16)
        keep = rng.random(len(t)) * (1.0 + day_amplitude) < 1.0 + day_amplitude * np.sin(2 * np.pi * t / day_s)
        times = np.concatenate([times, t[keep]])
    arrival = np.sort(times[:n_requests]) * 1e6
    req = Requests.build(arrival, np.zeros(n_requests), start[chosen], sectors[chosen], np.ones(n_requests, dtype=bool))
    return FiveWorkload(req, start, sectors, np.zeros(n_files, dtype=np.int64))


def poisson_background(rng: np.random.Generator, *, rate_per_s: float, start_us: float, end_us: float,
                       address_sectors: int, size_sectors: int, read_fraction: float = 0.5,
                       device: int = 0) -> Requests:
    """Lachesis-style competing traffic: Poisson arrivals of small I/Os at uniformly random aligned
    addresses in [0, address_sectors) of `device`, flagged as background."""
    if not rate_per_s > 0 or end_us < start_us or size_sectors <= 0 or address_sectors < size_sectors:
        raise ValueError(f"bad background parameters: rate {rate_per_s}/s, window [{start_us}, {end_us}] us, "
                         f"size {size_sectors} in {address_sectors} sectors")
    expected = (end_us - start_us) * rate_per_s / 1e6
    gaps = rng.exponential(1e6 / rate_per_s, int(expected + 10 * math.sqrt(expected + 1) + 10))
    times = start_us + np.cumsum(gaps)
    while times[-1] < end_us:
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1e6 / rate_per_s, len(gaps)))])
    times = times[times < end_us]
    n = len(times)
    slots = address_sectors // size_sectors
    lbn = rng.integers(0, slots, n) * size_sectors
    return Requests.build(times, np.full(n, device), lbn, np.full(n, size_sectors),
                          rng.random(n) < read_fraction, background=np.ones(n, dtype=bool))


def mix(trace: Requests, background: Requests) -> Requests:
    """Merge two time-sorted workloads (at equal times the trace's request first). Think times are kept
    for the trace's requests (background requests never think: they are open loop)."""
    arrival = np.concatenate([trace.arrival_us, background.arrival_us])
    order = np.argsort(arrival, kind="stable")
    think = None
    if trace.think_us is not None:
        think = np.concatenate([trace.think_us, np.zeros(len(background))])[order]
    return Requests(arrival[order], np.concatenate([trace.device, background.device])[order],
                    np.concatenate([trace.lbn, background.lbn])[order],
                    np.concatenate([trace.sectors, background.sectors])[order],
                    np.concatenate([trace.flags, background.flags | FLAG_BACKGROUND])[order], think)


def from_arrow(table: pa.Table, *, sector_size: int,
               devices: Sequence[str] | None = None) -> tuple[Requests, tuple[str, ...]]:
    """Requests from an Arrow table with the `requests` columns ts_us, device, op, offset_bytes, size_bytes
    (seq, when present, breaks timestamp ties). Devices get indices in the given order (default: sorted
    names); addresses become the spec's sectors. Returns the requests and the device names."""
    return from_arrow_tables([table], sector_size=sector_size, devices=devices)


def from_arrow_tables(tables: Iterable[pa.Table], *, sector_size: int,
                      devices: Sequence[str] | None = None) -> tuple[Requests, tuple[str, ...]]:
    """from_arrow over the rows of several tables (e.g. a generator reading one file at a time), each converted
    to the compact columns as it comes, so only one table's Arrow columns are alive at once; the rows are then
    ordered by (ts_us, seq) as from_arrow orders one table."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ts", "seq", "code", "lbn", "sectors", "flags")}
    names: list[list[str]] = []
    has_seq: bool | None = None
    for i, table in enumerate(tables):
        has_seq = _check_columns(table, i, has_seq)
        found, code, lbn, sectors, flags = _convert(table, sector_size)
        names.append(found)
        for key, values in (("code", code), ("lbn", lbn), ("sectors", sectors), ("flags", flags),
                            ("ts", table.column("ts_us").to_numpy().astype(np.float64))):
            parts[key].append(values)
        if has_seq:
            parts["seq"].append(table.column("seq").to_numpy().astype(np.int64))
        del table
    order = _device_order(names, devices)
    for k, found in enumerate(names):                       # table-local codes -> indices in `order`
        if found:
            parts["code"][k] = _lookup(found, order)[parts["code"][k]]
    cols = {key: np.concatenate(p) if p else np.zeros(0, dtype=_COLUMN_DTYPES[key]) for key, p in parts.items()}
    parts.clear()
    ts = cols.pop("ts")
    rank = _arrival_rank(ts, cols.pop("seq") if has_seq else None)
    arrival = ts[rank]
    del ts
    return Requests(arrival, *(cols.pop(key)[rank] for key in ("code", "lbn", "sectors", "flags"))), order


def from_coded_table(table: pa.Table, device: np.ndarray, *, sector_size: int) -> Requests:
    """Requests from an Arrow table with the `requests` columns ts_us, op, offset_bytes, size_bytes (seq, when
    present, breaks timestamp ties) whose rows' device indices are given (`device`, one per row), ordered by
    (ts_us, seq) as from_arrow_tables orders the same rows: for tables whose device each file implies, without
    a device column to read and look up."""
    if len(device) != table.num_rows:
        raise ValueError(f"{len(device)} device indices for {table.num_rows} rows")
    lbn, sectors, flags = _addresses(table, sector_size)
    ts = table.column("ts_us").to_numpy().astype(np.float64)
    rank = _arrival_rank(ts, table.column("seq").to_numpy().astype(np.int64) if "seq" in table.column_names else None)
    return Requests(ts[rank], np.asarray(device, np.int32)[rank], lbn[rank], sectors[rank], flags[rank])


def from_parquet_files(files: Sequence[str], *, sector_size: int, devices: Sequence[str] | None = None,
                       file_devices: Sequence[str] | None = None,
                       window_us: tuple[int, int] | None = None) -> tuple[Requests, tuple[str, ...]]:
    """from_arrow_tables over Parquet files of `requests` rows, in two passes to keep the peak low (~45 bytes a
    request instead of ~80; a 100 M-request array group is replayed by each of two tasks at once): the first
    reads ts_us, seq and device alone and orders the rows; the second converts each file's other columns
    straight into their sorted places. file_devices: each file's device, for files without a device column
    (the `requests` table's own files: device is a partition column). window_us: only the rows with
    start <= ts_us < end."""

    if file_devices is not None and len(file_devices) != len(files):
        raise ValueError(f"{len(file_devices)} file devices for {len(files)} files")
    first = ("ts_us", "seq") if file_devices is not None else ("ts_us", "seq", "device")
    rows = [pq.read_metadata(f).num_rows for f in files]
    n_all = int(sum(rows))
    ts, seq = np.empty(n_all), None
    names: list[list[str]] = []
    keep: list[np.ndarray | None] = []              # per file: the rows inside the window (None: all)
    bounds = [0]
    has_seq: bool | None = None
    for i, f in enumerate(files):
        table = _read_parquet(f, first, optional=("seq",))
        has_seq = "seq" in table.column_names if has_seq is None else has_seq
        if has_seq != ("seq" in table.column_names) or table.num_rows != rows[i]:
            raise ValueError(f"{f}: {table.num_rows} rows and columns {table.column_names}; expected {rows[i]} rows "
                             f"{'with' if has_seq else 'without'} seq, like the files before it")
        t = table.column("ts_us").to_numpy()
        inside = None if window_us is None else (t >= window_us[0]) & (t < window_us[1])
        inside = None if inside is None or inside.all() else inside
        keep.append(inside)
        a = bounds[-1]
        b = a + (len(t) if inside is None else int(inside.sum()))
        ts[a:b] = t if inside is None else t[inside]
        if has_seq:
            seq = np.empty(n_all, np.int64) if seq is None else seq
            s = table.column("seq").to_numpy()
            seq[a:b] = s if inside is None else s[inside]
        bounds.append(b)
        names.append([file_devices[i]] if file_devices is not None else
                     pc.unique(pc.cast(table.column("device"), pa.string())).to_pylist())
    n = bounds[-1]
    if n < n_all:
        ts = ts[:n].copy()
        seq = None if seq is None else seq[:n].copy()
    order = _device_order(names, devices)
    rank = _arrival_rank(ts, seq)
    del seq
    arrival = ts[rank]
    del ts
    place = np.empty(n, np.int64)                           # where each file row goes in arrival order
    place[rank] = np.arange(n, dtype=np.int64)
    del rank
    code, lbn = np.empty(n, np.int32), np.empty(n, np.int64)
    sectors, flags = np.empty(n, np.int32), np.empty(n, np.int8)
    second = ("op", "offset_bytes", "size_bytes") if file_devices is not None else \
        ("device", "op", "offset_bytes", "size_bytes")
    for i, f in enumerate(files):
        table = _read_parquet(f, second)
        if keep[i] is not None:
            table = table.filter(pa.array(keep[i]))
        found, c, b, s, fl = _convert(table, sector_size, None if file_devices is None else file_devices[i])
        at = place[bounds[i]:bounds[i + 1]]
        code[at] = _lookup(found, order)[c] if found else c
        lbn[at], sectors[at], flags[at] = b, s, fl
        del table
    return Requests(arrival, code, lbn, sectors, flags), order


def _arrival_rank(ts: np.ndarray, seq: np.ndarray | None) -> np.ndarray:
    """The rows' order by (ts, seq); without seq, by ts with ties in row order."""
    return np.lexsort((seq, ts)) if seq is not None else np.argsort(ts, kind="stable")


def _read_parquet(path: str, columns: Sequence[str], optional: Sequence[str] = ()) -> pa.Table:
    """The file's columns (optional ones when present); an error names the file and the missing columns."""

    names = set(pq.read_schema(path).names)
    missing = [c for c in columns if c not in names and c not in optional]
    if missing:
        raise ValueError(f"requests file {path} lacks column(s) {', '.join(missing)}")
    return pq.read_table(path, columns=[c for c in columns if c in names])


_COLUMN_DTYPES = {"ts": np.float64, "seq": np.int64, "code": np.int32, "lbn": np.int64, "sectors": np.int32,
                  "flags": np.int8}


def _check_columns(table: pa.Table, i: int, has_seq: bool | None) -> bool:
    """Whether the table has seq; errors name the missing columns or a seq column in some tables only."""
    missing = [c for c in ("ts_us", "device", "op", "offset_bytes", "size_bytes") if c not in table.column_names]
    if missing:
        raise ValueError(f"requests table lacks column(s) {', '.join(missing)}")
    if has_seq is not None and has_seq != ("seq" in table.column_names):
        raise ValueError(f"requests table {i}: some tables have a seq column and some do not")
    return "seq" in table.column_names


def _convert(table: pa.Table, sector_size: int, device: str | None = None
             ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One table's devices (in first-seen order) and its rows' device codes (into those), start sector,
    sectors and flags; device: every row's device, for a table without a device column."""
    if device is not None:
        found, code = ([device] if table.num_rows else []), np.zeros(table.num_rows, np.int32)
    else:
        names = pc.cast(table.column("device"), pa.string())
        unique = pc.unique(names)
        code = pc.index_in(names, value_set=unique).to_numpy(zero_copy_only=False).astype(np.int32)
        found = unique.to_pylist()
        del names
    return (found, code, *_addresses(table, sector_size))


def _addresses(table: pa.Table, sector_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows' start sector, sectors and flags (offset_bytes, size_bytes, op)."""
    offset = table.column("offset_bytes").to_numpy(zero_copy_only=False).astype(np.int64)
    lbn = offset // sector_size
    offset += table.column("size_bytes").to_numpy(zero_copy_only=False).astype(np.int64)
    sectors = (-(-offset // sector_size) - lbn).astype(np.int32)
    del offset
    flags = np.where(pc.equal(table.column("op"), "R").to_numpy(zero_copy_only=False), FLAG_READ, 0).astype(np.int8)
    return lbn, sectors, flags


def _device_order(names: list[list[str]], devices: Sequence[str] | None) -> tuple[str, ...]:
    """The given device order (default: the names sorted); error when the tables hold other devices."""
    seen = sorted({n for found in names for n in found})
    order = tuple(devices) if devices is not None else tuple(seen)
    unknown = sorted(set(seen) - set(order))
    if unknown:
        raise ValueError(f"devices {unknown} are not in the given device list {list(order)}")
    return order


def _lookup(found: list[str], order: tuple[str, ...]) -> np.ndarray:
    index = {name: k for k, name in enumerate(order)}
    return np.array([index[n] for n in found], dtype=np.int32)

"""Trace profile: the numbers storage engineers look at first, per trace and device, whole and per window.

Output is long-format schemas.trace_profile rows (scope, device, window, metric, value). Ordered
metrics (sequentiality, seek distance, interarrival, runs) follow each device's request order
(ts_us, seq); the trace scope's interarrival and idle times use all devices' requests merged.

Definitions (where the literature varies):
- sequential: a request starting at the byte where the previous request on the same device ended;
  a run is a maximal sequence of such requests plus the one that starts it (run length >= 1), and
  belongs to the window of its first request;
- seek distance: |offset - end of the previous request on the device| in bytes;
- idle period: a gap between consecutive arrivals longer than the threshold (10 ms, 1 s, 1 min);
  traces do not all carry completions, so arrival gaps are used for every format;
- burstiness: peak-to-mean of request counts in 1 s and 1 min bins and their index of dispersion
  (variance / mean), empty bins included, over the scope's duration;
- footprint: distinct 4 KiB blocks touched (per device); reuse time: time since the previous access
  to the same 4 KiB block, for accesses that re-reference a block;
- skew: accesses (requests touching) per extent, share of the hottest 1/10/20% of touched extents,
  and the exponent theta of FIVE eq. 26 (share of accesses to the hottest fraction s of extents
  = s ** theta) fitted by least squares in log-log space, reported as the X/Y rule with
  X + Y = 100 ("X% of accesses go to Y% of extents");
- percentiles of continuous values are exact over values rounded to 4 significant digits (half
  up), interpolated as Spark's `percentile` does; sizes and run lengths are not rounded.

How it runs (compute_trace_profile, the DataFrame path; the job reads the table's files itself through
libs.table_io.profile, which runs the same numpy passes per device and gives the same rows):
two numpy passes inside Spark tasks reduce the requests to small partials; Spark tasks merge the
histogram cells and extent counts by group, and the driver finishes the rest (finish(): counts,
footprints, burst bins, runs joined across part edges), as the files path does.
- The ordered pass splits the trace into parts of consecutive time chunks (`chunk_us`) of about
  `rows_per_part` requests (a chunk is never split). Each part sorts its requests per device; the request before each
  device's first one in the part comes from a per-chunk table the driver collects first (one row
  per device and chunk). Runs that cross a part edge leave pieces that the driver joins.
- The block pass groups the requests by address region (requests crossing a region edge are
  split), so every access to a 4 KiB block and every touch of an extent lands in one task: reuse
  times, distinct blocks and accesses per extent are exact there (a region is never split either:
  one very hot region is one task's work).
A task finishes the distribution of every group whose values it holds entirely (a window inside
its part; the whole trace when one task does the pass); other groups leave one histogram per
group and task (cells of equal rounded value, packed in a binary column), merged by a last numpy
step (merge_histograms). So the result is the same however the work is split (tested), and what crosses between
tasks scales with the number of groups, not requests.

The compiled loops (profile_kernels, numba) are imported by the functions that run them, in the tasks: a driver
that plans, merges and commits does not load numba and LLVM (~120 MB resident).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Window
from pyspark.sql import functions as F

from blockheat.libs.columns import idiv, to_schema
from blockheat.libs.io.arrow_values import equal_mask
from blockheat.libs.io.connect import parallelism as session_parallelism
from blockheat.libs.io.worker import python_task
from blockheat.schemas import trace_profile as TP

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

IDLE_THRESHOLDS_US = {"10ms": 10_000, "1s": 1_000_000, "1min": 60_000_000}
BURST_BINS_US = {"1s": 1_000_000, "1min": 60_000_000}
SKEW_SHARES = {"1pct": 0.01, "10pct": 0.10, "20pct": 0.20}
FOOTPRINT_BLOCK = 4096
GROUP = ("scope", "device", "window_start_us", "window_us")
ORDER = ("ts_us", "seq")
ROWS_PER_PART = 250_000  # requests per numpy task at most: bounds a Python worker's memory
MIN_ROWS_PER_TASK = 50_000  # below this, one task does the pass (and finishes every group itself)

# The passes' output, one schema for every kind of row (`kind`):
#   "count"      device, w, metric (a COUNTS name), n = the count or byte sum
#   "final"      scope, device, w, window_us, metric (e.g. seek_bytes_p50), v = its value: a group whose
#                values all were in the task
#   "hist"       scope, device, w, window_us, metric; n, s, s2, mx = count, sum, sum of squares and
#                maximum of the group's raw values in the task; cells = the task's histogram of the
#                group: per rounded value v, how many (_pack(v, count))
#   "burst"      scope, device, w, window_us, metric ("1s", "1min"): over the bins inside the task's
#                time span, n = sum of requests per bin, s = sum of their squares, mx = the largest
#   "bin"        device, w, metric ("1s", "1min"), key = bin number (ts_us // bin), n = requests: a
#                bin cut by the task's time span
#   "run_piece"  device, w, key = part, v = RUN_* kind, n = length: a run cut by a part edge
#   "footprint"  device, w, window_us (0 = whole trace), n = distinct blocks, s = accesses, s2 = re-accesses
#   "extent"     scope, device, w, window_us; cells = _pack(requests touching each extent of the group)
# and, when a later run resumes from what this one leaves (libs.table_io.profile_state):
#   "kept"       as "hist", for a group the task finished that requests after the data's end still reach
#   "extent_ids" device scope, w, window_us; cells = _pack(extent, requests touching it): the counts of the
#                whole trace and of open windows, to be added to counts kept from other spans
#   "count_whole" device, metric, n: counts of windows that ended, for the whole trace's groups only
# Histograms and extent counts travel as one binary cell per group and task, not a row per value.
PARTIAL = pa.schema([("kind", pa.string()), ("scope", pa.string()), ("device", pa.string()), ("w", pa.int64()),
                     ("window_us", pa.int64()), ("metric", pa.string()), ("key", pa.int64()), ("v", pa.float64()),
                     ("n", pa.int64()), ("s", pa.float64()), ("s2", pa.float64()), ("mx", pa.float64()),
                     ("cells", pa.binary())])
PARTIAL_DDL = ("kind string, scope string, device string, w long, window_us long, metric string, key long, v double, "
               "n long, s double, s2 double, mx double, cells binary")
FINAL = pa.schema([("scope", pa.string()), ("device", pa.string()), ("window_start_us", pa.int64()),
                   ("window_us", pa.int64()), ("metric", pa.string()), ("value", pa.float64())])
FINAL_DDL = "scope string, device string, window_start_us long, window_us long, metric string, value double"
COUNTS = ("requests", "reads", "writes", "bytes_read", "bytes_written", "sequential", "runs")
RUN_CONTINUED, RUN_CONTINUED_WHOLE, RUN_OPEN = 0, 1, 2  # head piece ending / spanning the part; tail piece
EXACT = frozenset({"size_bytes", "run_length"})  # few distinct values: not rounded
PS = (0.1, 0.5, 0.9, 0.99)


def round_significant(value: Column) -> Column:
    """Round to 4 significant digits (exact for values below 10,000)."""
    digits = F.floor(F.log10(F.abs(value)))
    step = F.pow(F.lit(10.0), F.greatest(digits - 3, F.lit(0.0)))
    return F.when(value == 0, F.lit(0.0)).otherwise(F.round(value / step) * step)


def round_significant_np(values: np.ndarray) -> np.ndarray:
    """round_significant for a float64 array, with Spark's half-up rounding (not numpy's half-even)."""
    out = np.zeros(len(values))
    nz = values != 0
    v = values[nz]
    step = 10.0 ** np.maximum(np.floor(np.log10(np.abs(v))) - 3, 0)
    out[nz] = np.sign(v) * np.floor(np.abs(v) / step + 0.5) * step
    return out


CODES = 10_000 + 13 * 9_000   # codes of the values round_significant_code gives for inputs below 2**53


def value_of_code(codes: np.ndarray) -> np.ndarray:
    """The values of round_significant_code's codes."""
    rest = np.maximum(codes - 10_000, 0)
    return np.where(codes < 10_000, codes, (rest % 9_000 + 1_000) * 10 ** (rest // 9_000 + 1))


@functools.cache
def _code_values() -> np.ndarray:
    """value_of_code of every code, as float64: a table lookup instead of powers per cell."""
    return value_of_code(np.arange(CODES, dtype=np.int64)).astype(np.float64)


def value_counts(values: np.ndarray, *, rounded: bool) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values (float64, ascending) of whole numbers `values` (int64) and their counts, the values
    rounded to 4 significant digits first when `rounded` (as round_significant_np rounds them): np.unique's
    answer, counted with one bincount by round_significant_code's code or by value instead of a sort where the
    values are non-negative and the table small."""
    from blockheat.libs.transforms.profile_kernels import round_significant_code
    values = np.asarray(values, np.int64)
    if not len(values):
        return np.zeros(0), np.zeros(0, np.int64)
    low, high = int(values.min()), int(values.max())
    if low >= 0 and rounded and high < 1 << 53:
        n = np.bincount(round_significant_code(values))
        at = np.flatnonzero(n)
        return _code_values()[at], n[at]
    if low >= 0 and not rounded and high < 2 * len(values) + (1 << 21):
        n = np.bincount(values)
        at = np.flatnonzero(n)
        return at.astype(np.float64), n[at]
    v, n = np.unique(round_significant_np(values.astype(np.float64)) if rounded else values, return_counts=True)
    return v.astype(np.float64), n.astype(np.int64)


def chunked_lag(df: DataFrame, *, keys: Sequence[str], chunk_us: int, cols: Sequence[str],
                prefix: str = "prev_") -> DataFrame:
    """Adds prefix+col = the value of the previous row in (keys; ts_us, seq) order.

    Rows are ordered inside (keys, ts_us // chunk_us) windows; the first row of a chunk takes the
    last row of the nearest earlier non-empty chunk from a per-chunk table (one row per chunk).
    """
    df = df.withColumn("_chunk", idiv(F.col("ts_us"), chunk_us))
    inner = Window.partitionBy(*keys, "_chunk").orderBy(*ORDER)
    lagged = df.select("*", (F.row_number().over(inner) == 1).alias("_first"),
                       *[F.lag(c).over(inner).alias(f"_lag_{c}") for c in cols])
    edges = df.groupBy(*keys, "_chunk").agg(F.max_by(F.struct(*cols), F.struct(*ORDER)).alias("_last"))
    # The per-chunk table is small (one row per chunk), so a window over all of it is cheap.
    across = Window.partitionBy(*keys).orderBy("_chunk") if keys else Window.partitionBy(F.lit(0)).orderBy("_chunk")
    edges = edges.select(*keys, "_chunk", F.lag("_last").over(across).alias("_edge"))
    joined = lagged.join(F.broadcast(edges), on=[*keys, "_chunk"], how="left")
    return joined.select(
        *df.columns,
        *[F.when(F.col("_first"), F.col(f"_edge.{c}")).otherwise(F.col(f"_lag_{c}")).alias(prefix + c) for c in cols],
    ).drop("_chunk")


# --- numpy passes ------------------------------------------------------------------------------


def _windows(ts: np.ndarray, window_us: int) -> np.ndarray:
    return (ts // window_us) * window_us if window_us else np.zeros(len(ts), np.int64)


def _runs_of(*keys: np.ndarray) -> np.ndarray:
    """Start index of every run of equal keys in arrays sorted by those keys."""
    if not len(keys[0]):
        return np.zeros(0, np.int64)
    new = np.zeros(len(keys[0]), bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(new)


def _group_ids(starts: np.ndarray, n: int) -> np.ndarray:
    """Each of n sorted rows' run number, given every run's first row (_runs_of)."""
    first = np.zeros(n, np.int64)
    first[starts] = 1
    return np.cumsum(first) - 1


def _pack(*cols: np.ndarray) -> bytes:
    """Equal-length numeric columns as one float64 blob (integers below 2**53 stay exact)."""
    return np.column_stack(cols).astype(np.float64).tobytes()


def _group_sums(keys: Sequence[np.ndarray], c: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct key tuples (sorted) and the sum of c per tuple."""
    if not keys_sorted(keys):
        order = _lex_order(keys[:-1], keys[-1])
        keys, c = [k[order] for k in keys], c[order]
    at = _runs_of(*keys)
    return [k[at] for k in keys], np.add.reduceat(c, at) if len(at) else c[:0]


def keys_sorted(keys: Sequence[np.ndarray]) -> bool:
    """Whether the rows are in lexicographic order of the keys (the passes' rows mostly come so: one
    device in time order), which saves a sort."""
    if len(keys[0]) < 2:
        return True
    while len(keys) > 1 and keys[0].min() == keys[0].max():    # a constant key (one device) decides nothing
        keys = keys[1:]
    if len(keys) == 1:
        return bool((keys[0][1:] >= keys[0][:-1]).all())
    after = np.zeros(len(keys[0]) - 1, bool)      # strictly after the previous row on some earlier key
    equal = np.ones(len(keys[0]) - 1, bool)
    for k in keys:
        a, b = k[:-1], k[1:]
        if not (after | (b >= a)).all():
            return False
        after |= equal & (b > a)
        equal &= b == a
    return True


def _dense(k: np.ndarray) -> tuple[np.ndarray, int]:
    """Non-negative integers in k's order (equal for equal values) and their bound: k - min when the range
    is small, divided by the values' common step (window starts), else ranks from a sort."""
    lo = int(k.min())
    shifted = k - lo
    top = int(shifted.max())
    if top >= 1 << 24:
        step = int(np.gcd.reduce(shifted[:4096]))          # the common step of a sample, if all share it
        if step <= 1 or (shifted % step).any():
            step = int(np.gcd.reduce(shifted))
        if step > 1 and top // step < 1 << 24:
            return shifted // step, top // step + 1
        distinct, ranks = np.unique(k, return_inverse=True)
        return ranks.reshape(-1).astype(np.int64), len(distinct)
    return shifted, top + 1


def _cell_ids(code: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Each row's (device, window) cell as 0..cells-1 in (device, window) order, the number of cells,
    and one row of each cell: by a bincount over the dense pairs when they are few, else np.unique."""
    dc, bc = _dense(code)
    dw, bw = _dense(w)
    combined = dc * bw + dw
    if bc * bw <= 4 * len(combined) + 1024:
        present = np.bincount(combined, minlength=bc * bw) > 0
        cell = (np.cumsum(present) - 1)[combined]
        cells = int(present.sum())
    else:
        _, cell = np.unique(combined, return_inverse=True)
        cell = cell.reshape(-1)
        cells = int(cell.max()) + 1
    row = np.empty(cells, np.int64)
    row[cell] = np.arange(len(cell))
    return cell, cells, row


def _lex_order(keys: Sequence[np.ndarray], v: np.ndarray) -> np.ndarray:
    """np.lexsort((v, *reversed(keys))), the keys first: by one stable sort of a combined int64 key
    when the values are non-negative integers and everything fits (faster), else by lexsort."""
    if not len(v) or v.min() < 0 or v.max() >= 1 << 40 or (v.dtype.kind == "f" and not np.array_equal(v, np.floor(v))):
        return np.lexsort((v, *reversed(keys)))
    parts = [_dense(k) for k in keys] + [(v.astype(np.int64), int(v.max()) + 1)]   # v: whole numbers, >= 0
    if math.prod(bound for _, bound in parts) >= 1 << 62:
        return np.lexsort((v, *reversed(keys)))
    combined = np.zeros(len(v), np.int64)
    for ranks, bound in parts:
        combined = combined * bound + ranks
    return np.argsort(combined, kind="stable")


def _cells(keys: Sequence[np.ndarray], v: np.ndarray, n: np.ndarray, s: np.ndarray, s2: np.ndarray,
           mx: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Histogram cells: rows with equal (keys, v) merged (n, s, s2 summed, mx the maximum), sorted by
    (keys, v). Raw values come in as n = 1, s = value, s2 = value**2, mx = value."""
    order = _lex_order(keys, v)
    keys, v = [k[order] for k in keys], v[order]
    at = _runs_of(*keys, v)
    return ([k[at] for k in keys], v[at], np.add.reduceat(n[order], at), np.add.reduceat(s[order], at),
            np.add.reduceat(s2[order], at), np.maximum.reduceat(mx[order], at))


def _stat_names(metric: str) -> list[tuple[str, str]]:
    """(statistic, output metric name) of a distribution metric."""
    names = [(f"p{round(p * 100):g}", f"{metric}_p{round(p * 100):g}") for p in PS]
    names += [("mean", f"{metric}_mean"), ("max", f"{metric}_max")]
    stem = metric.removesuffix("_us")
    if metric.startswith("idle_"):
        names += [("count", f"{stem}_count"), ("total_s", f"{stem}_total_s")]
    if metric == "interarrival_us":
        names.append(("cv", f"{stem}_cv"))
    return names


def _group_stats(starts: np.ndarray, v: np.ndarray, n: np.ndarray, s: np.ndarray, s2: np.ndarray,
                 mx: np.ndarray) -> dict[str, np.ndarray]:
    """Per group of histogram cells (cells sorted by group and value; `starts` = each group's first
    cell): percentiles exactly as Spark's `percentile` with frequencies computes them (position
    (count - 1) * p, linear interpolation between the two values around it), mean, max, count,
    total in seconds and the coefficient of variation (NaN where the mean is 0)."""
    return _percentiles(starts, v, n) | _moments(np.add.reduceat(n, starts), np.add.reduceat(s, starts),
                                                 np.add.reduceat(s2, starts), np.maximum.reduceat(mx, starts))


def interpolate(position: Any, lower: Any, higher: Any, lo: Any, hi: Any) -> Any:
    """Spark's `percentile` between the values lo and hi at the floor and ceiling (lower, higher) of the rank
    position: lo when they coincide, else the linear interpolation (scalars or arrays)."""
    return np.where((lower == higher) | (lo == hi), lo, (higher - position) * lo + (position - lower) * hi)


def percentile_cells(starts: np.ndarray, v: np.ndarray, n: np.ndarray, points: Sequence[float]) -> list[np.ndarray]:
    """Spark's `percentile(value, p, count)` of each group of (value, count) cells (groups from `starts`, values
    ascending within each), one array per point p: at rank position (count - 1) x p, interpolated."""
    count = np.add.reduceat(n, starts)
    cum = np.cumsum(n)
    before = cum[starts] - n[starts]
    out = []
    for p in points:
        position = (count - 1).astype(np.float64) * p
        lower, higher = np.floor(position), np.ceil(position)
        lo = v[np.searchsorted(cum, before + lower.astype(np.int64) + 1)]
        hi = v[np.searchsorted(cum, before + higher.astype(np.int64) + 1)]
        out.append(interpolate(position, lower, higher, lo, hi))
    return out


def _percentiles(starts: np.ndarray, v: np.ndarray, n: np.ndarray) -> dict[str, np.ndarray]:
    """The PS percentiles per group of (value, count) cells (see _group_stats)."""
    return {f"p{round(p * 100):g}": x for p, x in zip(PS, percentile_cells(starts, v, n, PS), strict=True)}


def _moments(count: np.ndarray, total: np.ndarray, total2: np.ndarray, mx: np.ndarray) -> dict[str, np.ndarray]:
    """Mean, max, count, total in seconds and coefficient of variation from the groups' sums."""
    mean = total / count
    sd = np.sqrt(np.maximum(total2 / count - mean * mean, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.where(mean > 0, sd / mean, np.nan)
    return {"mean": mean, "max": mx, "count": count.astype(np.float64), "total_s": total / 1e6, "cv": cv}


class _Partials:
    """Collects PARTIAL columns; device codes index `names` (the last name is "*").

    `final_window(w)` says which window starts hold all their requests in this task, `final_whole`
    whether the whole trace does: those groups' distributions are finished here ("final" rows);
    the others leave histogram cells ("hist" rows) for merge_histograms.
    """

    def __init__(self, names: list[str], *, window_us: int, final_whole: bool = False,
                 final_window: Callable[[np.ndarray], np.ndarray] | None = None,
                 final_scopes: tuple[str, ...] = ("device", "trace"), end: int | None = None) -> None:
        self.names = np.array([*names, "*"], dtype=object)
        self.star = len(names)
        self.window_us = window_us
        self.final_whole = final_whole
        self.final_scopes = final_scopes   # scopes whose groups this task may hold whole
        self.final_window = final_window or (lambda w: np.zeros(len(w), bool))
        self.end = end                     # given: finished groups open at `end` also leave their cells ("kept")
        self.cols: dict[str, list[np.ndarray]] = {f.name: [] for f in PARTIAL}

    def open_at_end(self, w: np.ndarray, window_us: int) -> np.ndarray:
        """Which groups (window starts of one window_us) requests from `end` on reach: the whole trace's, and the
        windows reaching past it (none without `end`)."""
        if self.end is None:
            return np.zeros(len(w), bool)
        return np.full(len(w), window_us == 0) | (w + window_us > self.end)

    def add(self, kind: str, code: np.ndarray, w: np.ndarray, metric: str, *, scope: str = "",
            window_us: int = 0, key: np.ndarray | None = None, v: np.ndarray | None = None,
            n: np.ndarray | None = None, s: np.ndarray | None = None, s2: np.ndarray | None = None,
            mx: np.ndarray | None = None, cells: Sequence[bytes] | None = None) -> None:
        m = len(code)
        for name, col in (("kind", np.full(m, kind, dtype=object)), ("scope", np.full(m, scope, dtype=object)),
                          ("device", self.names[code]), ("w", w), ("window_us", np.full(m, window_us, np.int64)),
                          ("metric", np.full(m, metric, dtype=object)),
                          ("key", key), ("v", v), ("n", n), ("s", s), ("s2", s2), ("mx", mx),
                          ("cells", None if cells is None else np.array(cells, dtype=object))):
            if col is None:
                col = (np.full(m, None, dtype=object) if name == "cells"
                       else np.zeros(m, np.int64 if name in ("key", "n") else np.float64))
            self.cols[name].append(col)

    def distribution(self, code: np.ndarray, w: np.ndarray, metric: str, scopes: str, values: np.ndarray, *,
                     final: bool = True) -> None:
        """A distribution metric's values of the requests at (device code, window start), counted
        in the device groups, the trace groups or both (`scopes`), whole trace and per window.
        final=False: cells only, even for groups this task holds whole."""
        if values.dtype.kind in "iu" and len(values) and values.min() >= 0 and values.max() < 1 << 53 \
                and self._int_distribution(code, w, metric, scopes, values.astype(np.int64), final=final):
            return
        raw = values.astype(np.float64)
        v = raw if metric in EXACT else round_significant_np(raw)
        # The finest cells, (device, window, value), once; every group's cells are merged from them
        # (far fewer than the requests), so the requests are sorted once per metric, not once per group.
        (code, w), v, n1, s1, s21, mx1 = _cells([code, w], v, np.ones(len(v), np.int64), raw, raw * raw, raw)
        for scope, group_code, span_w, window_us in self.groups(code, w):
            if scopes not in ("both", scope):
                continue
            done = np.full(len(w), self.final_whole) if window_us == 0 else self.final_window(span_w)
            done &= final and scope in self.final_scopes
            for kind, mask in (("final", done), ("hist", ~done), ("kept", done & self.open_at_end(span_w, window_us))):
                if not mask.any():
                    continue
                (c, gw), cv, n, s, s2, mx = _cells([group_code[mask], span_w[mask]], v[mask], n1[mask], s1[mask],
                                                   s21[mask], mx1[mask])
                starts = _runs_of(c, gw)
                if kind != "final":
                    ends = np.append(starts[1:], len(c))
                    self.add(kind, c[starts], gw[starts], metric, scope=scope, window_us=window_us,
                             n=np.add.reduceat(n, starts), s=np.add.reduceat(s, starts),
                             s2=np.add.reduceat(s2, starts), mx=np.maximum.reduceat(mx, starts),
                             cells=[_pack(cv[a:b], n[a:b]) for a, b in zip(starts, ends, strict=True)])
                else:
                    stats = _group_stats(starts, cv, n, s, s2, mx)
                    for stat, name in _stat_names(metric):
                        self.add("final", c[starts], gw[starts], name, scope=scope, window_us=window_us,
                                 v=stats[stat])

    def _int_distribution(self, code: np.ndarray, w: np.ndarray, metric: str, scopes: str, raw: np.ndarray, *,
                          final: bool) -> bool:
        """distribution() of non-negative whole numbers, the same rows by cheaper steps: one np.sort of
        (finest group, value) keys gives the finest cells, sums come per finest group by bincount,
        and only cells are merged into coarser groups. False (nothing added) when the keys would not
        fit an int64. Rounded values are counted by their code (round_significant_code) with one
        bincount instead of a sort, when the (group, code) table is small."""
        from blockheat.libs.transforms.profile_kernels import group_cells, round_significant_code
    
        coded = metric not in EXACT
        if keys_sorted([code, w]):                  # rows by group already: one compiled loop
            vmax = CODES if coded else int(raw.max()) + 1
            starts = _runs_of(code, w)
            if len(starts) * vmax >= 1 << 62:
                return False
            gid = _group_ids(starts, len(code))
            g_n, g_s, g_s2, g_mx, cell_gid, cell_v, cell_n = group_cells(gid, raw, len(starts), coded, CODES)
            self.cells(code[starts], w[starts], g_n, g_s, g_s2, g_mx, cell_gid, cell_v, cell_n, metric=metric,
                       scopes=scopes, vmax=vmax, coded=coded, final=final)
            return True
        v = round_significant_code(raw) if coded else raw
        gid, groups, row = _cell_ids(code, w)
        vmax = CODES if coded else int(v.max()) + 1
        if groups * vmax >= 1 << 62:
            return False
        g_code, g_w = code[row], w[row]
        rawf = raw.astype(np.float64)
        g_n = np.bincount(gid, minlength=groups)
        g_s = np.bincount(gid, rawf, groups)
        g_s2 = np.bincount(gid, rawf * rawf, groups)
        g_mx = np.full(groups, -np.inf)
        np.maximum.at(g_mx, gid, rawf)
        del rawf
        keys = gid * vmax + v
        del gid, v
        if coded and groups * vmax <= 2 * len(keys) + (1 << 21):
            counts = np.bincount(keys, minlength=groups * vmax)
            at = np.flatnonzero(counts)
            cell_gid, cell_v, cell_n = at // vmax, at % vmax, counts[at]
            del counts
        else:
            keys.sort()
            at = _runs_of(keys)
            cell_gid, cell_v = keys[at] // vmax, keys[at] % vmax
            cell_n = np.diff(np.append(at, len(keys)))
        del keys, at
        self.cells(g_code, g_w, g_n, g_s, g_s2, g_mx, cell_gid, cell_v, cell_n, metric=metric, scopes=scopes,
                   vmax=vmax, coded=coded, final=final)
        return True

    def cells(self, g_code: np.ndarray, g_w: np.ndarray, g_n: np.ndarray, g_s: np.ndarray, g_s2: np.ndarray,
              g_mx: np.ndarray, cell_gid: np.ndarray, cell_v: np.ndarray, cell_n: np.ndarray, *, metric: str,
              scopes: str, vmax: int, coded: bool, final: bool) -> None:
        """A distribution's rows from its finest groups (device code g_code, window start g_w; count, sum,
        sum of squares and maximum of the raw values) and their cells (finest group index, value or
        value code below vmax, count), sorted by group and value."""
        groups = len(g_code)
        for scope, group_code, span_w, window_us in self.groups(g_code, g_w):
            if scopes not in ("both", scope):
                continue
            done = np.full(groups, self.final_whole) if window_us == 0 else self.final_window(span_w)
            done &= final and scope in self.final_scopes
            for kind, mask in (("final", done), ("hist", ~done), ("kept", done & self.open_at_end(span_w, window_us))):
                if not mask.any():
                    continue
                picked = np.flatnonzero(mask)
                order = picked[_lex_order([group_code[picked]], span_w[picked])]
                c, gw = group_code[order], span_w[order]
                starts = _runs_of(c, gw)
                index = np.full(groups, -1, np.int64)     # finest group -> output group
                index[order] = _group_ids(starts, len(order))
                c, gw = c[starts], gw[starts]
                n, s, s2 = (np.add.reduceat(x[order], starts) for x in (g_n, g_s, g_s2))
                mx = np.maximum.reduceat(g_mx[order], starts)
                keep = mask[cell_gid]
                cg, cv, cn = index[cell_gid[keep]], cell_v[keep], cell_n[keep]
                if len(starts) < len(order) or (len(cg) > 1 and (cg[1:] < cg[:-1]).any()):
                    k2 = cg * vmax + cv                      # cells of several finest groups: merge
                    if len(starts) * vmax <= 4 * len(k2) + (1 << 21):
                        summed = np.bincount(k2, cn, len(starts) * vmax)    # float64: exact below 2**53
                        at2 = np.flatnonzero(summed)
                        cn = summed[at2].astype(np.int64)
                        cg, cv = at2 // vmax, at2 % vmax
                    else:
                        by = np.argsort(k2)
                        k2, cn = k2[by], cn[by]
                        at2 = _runs_of(k2)
                        cn = np.add.reduceat(cn, at2)
                        cg, cv = k2[at2] // vmax, k2[at2] % vmax
                cstarts = _runs_of(cg)
                cvf = _code_values()[cv] if coded else cv.astype(np.float64)
                if kind != "final":
                    ends = np.append(cstarts[1:], len(cg))
                    self.add(kind, c, gw, metric, scope=scope, window_us=window_us, n=n, s=s, s2=s2, mx=mx,
                             cells=[_pack(cvf[a:b], cn[a:b]) for a, b in zip(cstarts, ends, strict=True)])
                else:
                    stats = _percentiles(cstarts, cvf, cn) | _moments(n, s, s2, mx)
                    for stat, name in _stat_names(metric):
                        self.add("final", c, gw, name, scope=scope, window_us=window_us, v=stats[stat])

    def groups(self, code: np.ndarray, w: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray, int]]:
        """(scope, group device code, group window start, window_us) of rows at (code, w), for each
        group kind: device and trace scope, whole trace and per window."""
        whole = np.zeros(len(w), np.int64)
        star = np.full(len(code), self.star)
        spans = [(whole, 0)] + ([(w, self.window_us)] if self.window_us else [])
        return [(scope, gc, gw, wu) for scope, gc in (("device", code), ("trace", star)) for gw, wu in spans]

    def bursts(self, code: np.ndarray, w: np.ndarray, ts: np.ndarray, span: tuple[int | None, int | None],
               scopes: tuple[str, ...] = ("device", "trace")) -> None:
        """Request counts per 1 s and 1 min bin: "burst" sums over the bins inside `span`, "bin"
        rows for the bins that reach outside it (another task holds the rest of their requests).
        Only the groups of `scopes`; "bin" rows name their scope ("" for both)."""
        start, stop = span
        for label, bin_us in BURST_BINS_US.items():
            b = ts // bin_us
            inside = np.ones(len(b), bool)
            if start is not None:
                inside &= b * bin_us >= start
            if stop is not None:
                inside &= (b + 1) * bin_us <= stop
            self.counts("bin", label, code[~inside], w[~inside], b[~inside], scope="" if len(scopes) > 1 else scopes[0])
            for scope, gc, gw, wu in self.groups(code[inside], w[inside]):
                if scope not in scopes:
                    continue
                (gc, gw, _), c = _group_sums([gc, gw, b[inside]], np.ones(int(inside.sum()), np.int64))
                at = _runs_of(gc, gw)
                if len(at):
                    self.add("burst", gc[at], gw[at], label, scope=scope, window_us=wu, n=np.add.reduceat(c, at),
                             s=np.add.reduceat(c * c, at).astype(np.float64),
                             mx=np.maximum.reduceat(c, at).astype(np.float64))

    def device_bursts(self, code: np.ndarray, w: np.ndarray, ts: np.ndarray,
                      span: tuple[int | None, int | None], scope: str = "device") -> None:
        """bursts() of one scope of rows sorted by (code, ts), by one compiled pass per bin length
        (profile_kernels.device_bursts), the same rows: the device scope (code: the devices) or the trace scope
        (every code self.star)."""
        from blockheat.libs.transforms.profile_kernels import device_bursts
        start, stop = span
        lo = np.iinfo(np.int64).min if start is None else start
        hi = np.iinfo(np.int64).max if stop is None else stop
        for label, bin_us in BURST_BINS_US.items():
            (oc, ow, ob, on), whole, window = device_bursts(code, w, ts, bin_us, lo, hi)
            if len(on):
                self.add("bin", oc, ow, label, n=on, key=ob, scope=scope)
            groups = [((whole[0], np.zeros(len(whole[0]), np.int64), *whole[1:]), 0)]   # as groups() orders them
            if self.window_us:
                groups.append((window, self.window_us))
            for (gc, gw, n, s, mx), window_us in groups:
                if len(gc):
                    self.add("burst", gc, gw, label, scope=scope, window_us=window_us, n=n,
                             s=s.astype(np.float64), mx=mx.astype(np.float64))

    def counts(self, kind: str, metric: str, *keys: np.ndarray, weights: np.ndarray | None = None,
               scope: str = "", starts: np.ndarray | None = None) -> None:
        """Per distinct (code, w[, key]) the row count (or sum of integer `weights`) as `n`. starts: the first row of
        each distinct key, the rows sorted by the keys (found once by the caller)."""
        if starts is None:
            ones = np.ones(len(keys[0]), np.int64)
            distinct, n = _group_sums(keys, ones if weights is None else weights.astype(np.int64))
        else:
            distinct = [k[starts] for k in keys]
            if weights is None:
                n = np.diff(np.append(starts, len(keys[0])))
            else:
                n = np.add.reduceat(weights.astype(np.int64, copy=False), starts) if len(starts) else starts
        if len(n):
            self.add(kind, distinct[0], distinct[1], metric, n=n, key=distinct[2] if len(keys) > 2 else None,
                     scope=scope)

    def table(self) -> pa.Table:
        """The rows collected, as PARTIAL; the collected pieces are let go column by column as they are copied
        (a task's histogram cells are most of its memory at the end)."""
        arrays = {}
        for f in PARTIAL:
            pieces, self.cols[f.name] = self.cols[f.name], []
            arrays[f.name] = pa.array(np.concatenate(pieces) if pieces else [], f.type, from_pandas=f.name == "v")
            del pieces
        return pa.table(arrays, schema=PARTIAL)


def _by_group(table: pa.Table, kind: str) -> dict[tuple, list[int]]:
    """The rows of `kind` by group (scope, device, w, window_us, metric)."""
    groups: dict[tuple, list[int]] = {}
    columns = (table.column(c).to_pylist() for c in ("kind", "scope", "device", "w", "window_us", "metric"))
    for i, (k, *key) in enumerate(zip(*columns, strict=True)):
        if k == kind:
            groups.setdefault(tuple(key), []).append(i)
    return groups


def _cell_views(table: pa.Table) -> list[np.ndarray]:
    """Each row's "cells" as a float64 view of the column's buffer (no copy; empty for null)."""
    views: list[np.ndarray] = []
    for chunk in table.column("cells").chunks:
        _, offsets_buffer, data = chunk.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int32, count=len(chunk) + 1, offset=chunk.offset * 4)
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        views += [raw[a:b].view(np.float64) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    return views


def _group_cells(views: list[np.ndarray], rows: list[int], width: int) -> np.ndarray:
    return np.concatenate([views[i] for i in rows]).reshape(-1, width)


def _final_table(rows: list[tuple]) -> pa.Table:
    return pa.table({f.name: pa.array([r[i] for r in rows], f.type, from_pandas=True) for i, f in enumerate(FINAL)},
                    schema=FINAL)


def merge_histograms(table: pa.Table) -> pa.Table:
    """The distributions of the groups whose "hist" cells came from several tasks. Input: PARTIAL
    rows (only the "hist" ones are read), every cell of a group in this table. Output: FINAL rows.
    One group at a time, read in place from the table's buffers, so memory holds one group's cells."""
    return merge_and_keep(table, None)[0]


def merge_and_keep(table: pa.Table, horizon: Horizon | None) -> tuple[pa.Table, pa.Table]:
    """merge_histograms, and for the groups open at `horizon` one "hist" row each with their cells (equal values'
    counts summed) but those of runs still open (key OPEN_RUN): what a later run merges its own cells with."""
    rows, kept = [], []
    first = np.zeros(1, np.int64)
    views = _cell_views(table)
    n, s, s2, mx = (table.column(c).to_numpy(zero_copy_only=False) for c in ("n", "s", "s2", "mx"))
    open_run = table.column("key").to_numpy(zero_copy_only=False) == OPEN_RUN
    for (scope, device, w, window_us, metric), picked in _by_group(table, "hist").items():
        cells = _group_cells(views, picked, 2)
        order = np.argsort(cells[:, 0], kind="stable")
        values, counts = cells[order, 0], cells[order, 1].astype(np.int64)
        stats = _percentiles(first, values, counts) | _moments(
            np.array([n[picked].sum()]), np.array([s[picked].sum()]), np.array([s2[picked].sum()]),
            np.array([mx[picked].max()]))
        rows += [(scope, device, w, window_us, label, float(stats[stat][0])) for stat, label in _stat_names(metric)]
        if horizon is None or not horizon.is_open(scope, device, w, window_us, metric):
            continue
        if open_run[picked].any():
            picked = [i for i in picked if not open_run[i]]
            if not picked:
                continue
            cells = _group_cells(views, picked, 2)
            order = np.argsort(cells[:, 0], kind="stable")
            values, counts = cells[order, 0], cells[order, 1].astype(np.int64)
        at = _runs_of(values)
        kept.append({"kind": "hist", "scope": scope, "device": device, "w": w, "window_us": window_us,
                     "metric": metric, "key": 0, "v": 0.0, "n": int(n[picked].sum()), "s": float(s[picked].sum()),
                     "s2": float(s2[picked].sum()), "mx": float(mx[picked].max()),
                     "cells": _pack(values[at], np.add.reduceat(counts, at))})
    return _final_table(rows), pa.Table.from_pylist(kept, schema=PARTIAL)


def skew_stats(counts: np.ndarray) -> dict[str, float | None]:
    """Skew metrics of one group from its per-extent access counts (see the module docstring)."""
    c = np.sort(counts)[::-1]
    extents, total = len(c), float(c.sum())
    cum = np.cumsum(c)
    out: dict[str, float | None] = {
        f"skew_top{label}_share": cum[max(math.ceil(extents * share), 1) - 1] / total
        for label, share in SKEW_SHARES.items()}
    # Least-squares fit through the origin of ln(cumulative share) on ln(rank share), ranks < all.
    x = np.log(np.arange(1, extents) / extents)
    y = np.log(cum[:-1] / total)
    theta = float(np.sum(x * y) / np.sum(x * x)) if extents > 1 else None
    out |= {"extents_touched": float(extents), "skew_theta": theta, "skew_y_pct": None, "skew_x_pct": None}
    if theta is not None and theta > 0:
        # X/Y rule with X + Y = 100: solve y**theta + y = 1 by Newton's method from 0.5; theta <= 1
        # (the hottest s of extents get at least s of the accesses), where it converges.
        share = 0.5
        for _ in range(20):
            share -= (share**theta + share - 1) / (theta * share ** (theta - 1) + 1)
        out |= {"skew_y_pct": share * 100, "skew_x_pct": 100 - share * 100}
    return out


def merge_skew(table: pa.Table) -> pa.Table:
    """The skew metrics of the groups in `table` (its "extent" rows, every row of a group here).
    Output: FINAL rows."""
    views = _cell_views(table)
    return _final_table([(scope, device, w, window_us, name, value)
                         for (scope, device, w, window_us, _), picked in _by_group(table, "extent").items()
                         for name, value in skew_stats(_group_cells(views, picked, 1)[:, 0].astype(np.int64)).items()])


def _device_codes(table: pa.Table) -> tuple[list[str], np.ndarray]:
    column = table.column("device").combine_chunks()
    encoded = column if pa.types.is_dictionary(column.type) else column.dictionary_encode()
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy().astype(np.int64)


def _name_ordered_codes(table: pa.Table) -> tuple[list[str], np.ndarray]:
    """_device_codes with the names sorted, so a code's order is its name's."""
    names, code = _device_codes(table)
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), np.int64)
    rank[order] = np.arange(len(names))
    return [names[k] for k in order], rank[code]


def ordered_partials(table: pa.Table, *, part: int, before: dict[str, tuple[int, int]], before_ts: int | None,
                     window_us: int, span: tuple[int | None, int | None] = (None, None),
                     merged: bool = True, data_end: int | None = None) -> pa.Table:
    """The ordered pass over one part (consecutive time chunks, every device's requests in them).

    Input columns device, seq, ts_us, op, offset_bytes, size_bytes; `before` maps a device to the
    (ts_us, end byte) of its last request before the part, `before_ts` is the last arrival before
    the part on any device; `span` the part's [start, end) in ts_us (None: open). Output: PARTIAL
    rows (counts, distributions, burst bins, run pieces).
    merged=False: the part holds some devices only (libs.table_io.profile): no trace-scope
    arrival metrics (interarrival, idle periods, bursts; merged_partials makes those), and no
    trace-scope group finished here.
    data_end: the end of the data (a later run may add requests from it on): the groups finished here that it
    reaches also leave "kept" cells, and burst bins reaching past it stay "bin" rows.
    """
    names, code = _device_codes(table)
    ts, seq = table.column("ts_us").to_numpy(), table.column("seq").to_numpy()
    # (a device's rows read in time order, as the direct reader gives them, need no sort nor copy)
    order = None if keys_sorted([code, ts, seq]) else np.lexsort((seq, ts, code))
    del seq
    code, ts = (code, ts) if order is None else (code[order], ts[order])
    offset, size = (table.column(c).to_numpy() for c in ("offset_bytes", "size_bytes"))
    is_read = equal_mask(table.column("op"), "R")
    if order is not None:
        offset, size, is_read = offset[order], size[order], is_read[order]
        del order
    w = _windows(ts, window_us)
    start, stop = span
    out = _Partials(names, window_us=window_us, final_whole=start is None and stop is None,
                    final_window=_windows_inside(span, window_us),
                    final_scopes=("device", "trace") if merged else ("device",), end=data_end)
    starts = _runs_of(code, w)              # the finest groups (device, window), the rows sorted by them
    gaps = _gap_cells(code, w, starts, ts, offset, size, names, before)
    prev = _previous(code, ts, offset + size, names, before) if gaps is None else None
    is_seq = gaps[0] if prev is None else prev[0] & (offset == prev[2])
    for metric, weights in _count_weights(is_read, size, is_seq):
        out.counts("count", metric, code, w, weights=weights, starts=starts)
    out.distribution(code, w, "size_bytes", "both", size)
    if prev is None:
        _add_gap_cells(out, gaps[1:])
    else:
        _gap_distributions(out, code, w, ts, offset, prev)
    if merged:
        _arrival_partials(out, ts, before_ts, window_us)
        out.bursts(code, w, ts, (start, data_end if stop is None else stop))
    else:
        out.device_bursts(code, w, ts, (start, data_end if stop is None else stop))
    _run_partials(out, code, w, is_seq, part)
    return out.table()


def _count_weights(is_read: np.ndarray, size: np.ndarray, is_seq: np.ndarray
                   ) -> Iterator[tuple[str, np.ndarray | None]]:
    """The "count" metrics with each request's weight (None: 1), one weight array made at a time."""
    yield "requests", None
    yield "reads", is_read
    yield "writes", ~is_read
    yield "bytes_read", np.where(is_read, size, 0)
    yield "bytes_written", np.where(is_read, 0, size)
    yield "sequential", is_seq
    yield "runs", ~is_seq


GAP_METRICS = (("seek_bytes", "both"), ("interarrival_us", "device"),
               *((f"idle_{label}_us", "device") for label in IDLE_THRESHOLDS_US))


def _gap_cells(code: np.ndarray, w: np.ndarray, starts: np.ndarray, ts: np.ndarray, offset: np.ndarray,
               size: np.ndarray, names: list[str], before: dict[str, tuple[int, int]]) -> tuple | None:
    """ordered_partials' rows (sorted by device code and ts; `starts` the first row of each (code, w)) through
    profile_kernels.gap_cells: (is_seq, the finest groups' device codes and window starts, then gap_cells' sums and
    cells); None when a value leaves the integer path (then _gap_distributions computes the same rows)."""
    from blockheat.libs.transforms.profile_kernels import gap_cells
    if len(starts) * CODES >= 1 << 62:
        return None
    known = [names[c] in before for c in range(len(names))]
    b_ts, b_end = (np.array([before[d][k] if d in before else 0 for d in names], np.int64) for k in (0, 1))
    ok, is_seq, *sums = gap_cells(_group_ids(starts, len(code)), code, ts, offset, size, len(starts), b_ts, b_end,
                                  np.array(known, np.bool_), np.array(list(IDLE_THRESHOLDS_US.values()), np.int64),
                                  CODES)
    return (is_seq, code[starts], w[starts], *sums) if ok else None


def _add_gap_cells(out: _Partials, gaps: tuple) -> None:
    """Each GAP_METRICS distribution from _gap_cells' groups and cells, as distribution() adds it."""
    g_code, g_w, g_n, g_s, g_s2, g_mx, key, value, count = gaps
    for m, (metric, scopes) in enumerate(GAP_METRICS):
        keep = g_n[m] > 0                        # the groups with a value of this metric
        if not keep.any():
            continue
        renumbered = np.cumsum(keep) - 1
        mine = key % len(GAP_METRICS) == m
        out.cells(g_code[keep], g_w[keep], g_n[m][keep], g_s[m][keep], g_s2[m][keep], g_mx[m][keep],
                  renumbered[key[mine] // len(GAP_METRICS)], value[mine], count[mine], metric=metric, scopes=scopes,
                  vmax=CODES, coded=True, final=True)


def _previous(code: np.ndarray, ts: np.ndarray, end: np.ndarray, names: list[str],
              before: dict[str, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's previous request on its device (rows sorted by device code and ts; a device's first row's from
    `before`): (has one, its ts, its end)."""
    first = np.zeros(len(ts), bool)
    first[_runs_of(code)] = True
    prev_ts, prev_end = np.roll(ts, 1), np.roll(end, 1)
    has_prev = ~first
    for i in np.flatnonzero(first):
        if names[code[i]] in before:
            prev_ts[i], prev_end[i] = before[names[code[i]]]
            has_prev[i] = True
    return has_prev, prev_ts, prev_end


def _gap_distributions(out: _Partials, code: np.ndarray, w: np.ndarray, ts: np.ndarray, offset: np.ndarray,
                       prev: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """_gap_cells' distributions by numpy, for values the integer path does not take (prev: _previous's)."""
    has_prev, prev_ts, prev_end = prev
    gap = (ts - prev_ts)[has_prev]
    gap_code, gap_w = code[has_prev], w[has_prev]
    out.distribution(gap_code, gap_w, "seek_bytes", "both", np.abs(offset - prev_end)[has_prev])
    out.distribution(gap_code, gap_w, "interarrival_us", "device", gap)
    for label, threshold in IDLE_THRESHOLDS_US.items():
        dev = gap > threshold
        out.distribution(gap_code[dev], gap_w[dev], f"idle_{label}_us", "device", gap[dev])


def _windows_inside(span: tuple[int | None, int | None], window_us: int) -> Callable[[np.ndarray], np.ndarray]:
    """Which window starts have their whole window inside the span [start, stop) (None: open)."""
    start, stop = span

    def inside(w: np.ndarray) -> np.ndarray:
        ok = np.ones(len(w), bool)
        if start is not None:
            ok &= w >= start
        if stop is not None:
            ok &= w + window_us <= stop
        return ok

    return inside


def _arrival_partials(out: _Partials, ts: np.ndarray, before_ts: int | None, window_us: int) -> None:
    """The trace scope's interarrival times and idle periods: every device's arrivals merged."""
    merged = ts if keys_sorted([ts]) else np.sort(ts, kind="stable")   # timsort: merges each device's sorted run
    merged_gap = np.diff(merged) if before_ts is None else np.diff(merged, prepend=before_ts)
    merged_w = _windows(merged[len(merged) - len(merged_gap):], window_us)
    star = np.full(len(merged_gap), out.star)
    out.distribution(star, merged_w, "interarrival_us", "trace", merged_gap)
    for label, threshold in IDLE_THRESHOLDS_US.items():
        tr = merged_gap > threshold
        out.distribution(star[tr], merged_w[tr], f"idle_{label}_us", "trace", merged_gap[tr])


def merged_partials(ts: np.ndarray, *, before_ts: int | None, window_us: int,
                    span: tuple[int | None, int | None] = (None, None),
                    data_end: int | None = None) -> pa.Table:
    """The trace scope's arrival metrics over one time part [start, end) of every device's arrivals
    (`ts`, any order): interarrival times, idle periods and burst bins. `before_ts` is the last
    arrival before the part. Output: PARTIAL rows; windows inside the span are finished here.
    data_end: the end of the data, as for ordered_partials."""
    out = _Partials([], window_us=window_us, final_whole=span == (None, None),
                    final_window=_windows_inside(span, window_us), final_scopes=("trace",), end=data_end)
    ts = np.sort(np.asarray(ts, np.int64), kind="stable")
    _arrival_partials(out, ts, before_ts, window_us)
    start, stop = span
    out.device_bursts(np.full(len(ts), out.star), _windows(ts, window_us), ts,
                      (start, data_end if stop is None else stop), scope="trace")
    return out.table()


def _run_partials(out: _Partials, code: np.ndarray, w: np.ndarray, is_seq: np.ndarray, part: int) -> None:
    """Run lengths of the runs inside the part; pieces for the runs its edges may cut: a device's
    first run when it continues one from before the part, and its last run, which may go on."""
    if not len(code):
        return
    new = ~is_seq                               # a non-sequential request or a new device starts a run
    new[0] = True
    new[1:] |= code[1:] != code[:-1]
    starts = np.flatnonzero(new)
    del new
    length = np.diff(np.append(starts, len(code)))
    continued = is_seq[starts]  # only a device's first run in the part can continue
    last = np.append(code[starts][1:] != code[starts][:-1], True)
    whole = ~continued & ~last
    # always merged: runs that cross a part edge join their groups later
    out.distribution(code[starts][whole], w[starts][whole], "run_length", "both", length[whole], final=False)
    kind = np.where(continued, np.where(last, RUN_CONTINUED_WHOLE, RUN_CONTINUED), RUN_OPEN)
    piece = ~whole
    out.add("run_piece", code[starts][piece], w[starts][piece], "run_piece",
            key=np.full(int(piece.sum()), part, np.int64), v=kind[piece].astype(np.float64), n=length[piece])


def stitch_runs(pieces: Sequence[tuple[str, int, int, int, int]]) -> list[tuple[str, int, int]]:
    """Joins run pieces (device, part, kind, length, window of the piece's first request) into
    runs: (device, window of the run's first request, length)."""
    runs, still = stitch_open(pieces)
    return runs + still


def stitch_open(pieces: Sequence[tuple[str, int, int, int, int]]
                ) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """stitch_runs, the runs a later part may still continue (each device's last, if it reaches the end of its
    last piece) apart: (ended runs, open runs)."""
    runs: list[tuple[str, int, int]] = []
    open_run: dict[str, list[int]] = {}
    for device, part, kind, length, w in sorted(pieces, key=lambda p: (p[0], p[1], p[2])):
        if kind == RUN_OPEN:
            if device in open_run:
                runs.append((device, *open_run.pop(device)))
            open_run[device] = [w, length]
            continue
        if device not in open_run:
            raise ValueError(f"run piece of part {part} on {device!r} continues a run no earlier part left open")
        open_run[device][1] += length
        if kind == RUN_CONTINUED:
            runs.append((device, *open_run.pop(device)))
    return runs, [(device, w, length) for device, (w, length) in open_run.items()]


def _extent_cells(out: _Partials, code: np.ndarray, w: np.ndarray, extent: np.ndarray, touches: np.ndarray, *,
                  by_id: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
    """Per group, the requests touching each of its extents, from rows (device code, window, extent, requests
    touching it there). An extent's touches all come to one task (its region's), so another task never counts the
    same (device, extent). The touches are summed once per (device, window, extent) and per (device, extent); each
    group's cells are cut from those. by_id: the windows whose counts, and the whole trace's, leave "extent_ids"
    rows (device scope; extent and count, for the driver to add to counts kept from other spans) instead."""
    if not len(extent):
        return
    dc, bc = _dense(code)
    dw, bw = _dense(w)
    de, be = _dense(extent)
    if bc * bw * be >= 1 << 62 or bc * bw > 4 * len(extent) + 1024:
        whole_trace = by_id is None
        if by_id is not None:
            ids = by_id(w)
            _extent_id_rows(out, code, w, extent, touches, ids)
            code, w, extent, touches = code[~ids], w[~ids], extent[~ids], touches[~ids]
        for scope, gc, gw, wu in out.groups(code, w):
            if wu or whole_trace:
                (gc, gw, _, _), c = _group_sums([gc, gw, code, extent], touches)
                _add_extent_rows(out, scope, wu, gc, gw, c)
        return
    star = out.star
    fine = (dc * bw + dw) * be + de
    if bc * bw * be <= 4 * len(fine) + (1 << 21):
        counted = np.bincount(fine, weights=touches, minlength=bc * bw * be).astype(np.int64)   # exact below 2**53
        fine = np.flatnonzero(counted)
        fine_n = counted[fine]
    else:
        order = np.argsort(fine)
        fine = fine[order]
        at = _runs_of(fine)
        fine_n, fine = np.add.reduceat(touches[order], at), fine[at]
    fine_row = np.empty(bc * bw, np.int64)                   # dense (device, window) -> a request's row
    fine_row[dc * bw + dw] = np.arange(len(dc))
    f_code, f_w = code[fine_row[fine // be]], w[fine_row[fine // be]]
    whole = (fine // be // bw) * be + fine % be              # (device, extent), windows summed
    by = np.argsort(whole, kind="stable")
    at = _runs_of(whole[by])
    whole_n = np.add.reduceat(fine_n[by], at)
    w_code = f_code[by][at]
    zeros = np.zeros(len(whole_n), np.int64)
    if by_id is None:
        _add_extent_rows(out, "device", 0, w_code, zeros, whole_n)
        _add_extent_rows(out, "trace", 0, np.full(len(whole_n), star), zeros, whole_n)
    else:
        ext_of = np.empty(be, np.int64)                      # dense extent -> extent
        ext_of[de] = extent
        _add_extent_id_rows(out, 0, w_code, zeros, ext_of[whole[by][at] % be], whole_n)
    if out.window_us:
        if by_id is not None:
            ids = by_id(f_w)
            _add_extent_id_rows(out, out.window_us, f_code[ids], f_w[ids], ext_of[fine[ids] % be], fine_n[ids])
            f_code, f_w, fine_n = f_code[~ids], f_w[~ids], fine_n[~ids]
        _add_extent_rows(out, "device", out.window_us, f_code, f_w, fine_n)
        by = np.argsort(f_w, kind="stable")
        _add_extent_rows(out, "trace", out.window_us, np.full(len(fine_n), star), f_w[by], fine_n[by])


def _add_extent_id_rows(out: _Partials, window_us: int, gc: np.ndarray, gw: np.ndarray, ext: np.ndarray,
                        n: np.ndarray) -> None:
    """"extent_ids" rows (device scope): one per run of equal (gc, gw), its (extent, count) pairs packed."""
    if not len(gc):
        return
    at = _runs_of(gc, gw)
    ends = np.append(at[1:], len(gc))
    out.add("extent_ids", gc[at], gw[at], "extent", scope="device", window_us=window_us,
            cells=[_pack(ext[a:b], n[a:b]) for a, b in zip(at, ends, strict=True)])


def _add_extent_rows(out: _Partials, scope: str, window_us: int, gc: np.ndarray, gw: np.ndarray, c: np.ndarray) -> None:
    """"extent" rows: one per run of equal (gc, gw) in the given order, its counts packed."""
    if not len(gc):
        return
    at = _runs_of(gc, gw)
    ends = np.append(at[1:], len(c))
    out.add("extent", gc[at], gw[at], "extent", scope=scope, window_us=window_us,
            cells=[_pack(c[a:b]) for a, b in zip(at, ends, strict=True)])


def _extent_id_rows(out: _Partials, code: np.ndarray, w: np.ndarray, extent: np.ndarray, touches: np.ndarray,
                    windowed: np.ndarray) -> None:
    """"extent_ids" rows (device scope): per device for the whole trace, and per device and window where
    `windowed`, the requests touching each extent as cells _pack(extent, count), for the driver to add to
    counts kept from earlier requests (extent_counts)."""
    spans = [(0, code, np.zeros(len(w), np.int64), extent, touches)]
    if out.window_us:
        spans.append((out.window_us, code[windowed], w[windowed], extent[windowed], touches[windowed]))
    for window_us, c, gw, e, t in spans:
        if not len(e):
            continue
        (c, gw, e), n = _group_sums([c, gw, e], t)
        _add_extent_id_rows(out, window_us, c, gw, e, n)


def block_partials(table: pa.Table, *, region_bytes: int, window_us: int, extent_bytes: int,
                   final: bool = False, final_scopes: tuple[str, ...] = ("device", "trace")) -> pa.Table:
    """The block pass over the requests touching a set of address regions (every request of the
    trace that touches one of them; a request crossing a region edge comes once per region).

    Input columns device, seq, ts_us, region, lo, hi (the request's byte range). Output: PARTIAL
    rows: reuse-time distribution, footprint per window and whole trace, accesses per extent.
    With `final` (the task holds every request of the groups of `final_scopes`), the reuse-time
    groups of those scopes are finished here.
    """
    names, code = _device_codes(table)
    ts, seq = table.column("ts_us").to_numpy(), table.column("seq").to_numpy()
    region = table.column("region").to_numpy()
    lo = np.maximum(table.column("lo").to_numpy(), region * region_bytes)
    hi = np.minimum(table.column("hi").to_numpy(), (region + 1) * region_bytes)
    order = np.lexsort((seq, ts, code))        # each device's pieces in time order (a request's in region order)
    code, ts, lo, hi = code[order], ts[order], lo[order], hi[order]
    starts = _runs_of(code)
    ends = np.append(starts[1:], len(code))
    out = _Partials(names, window_us=window_us, final_whole=final, final_window=lambda w: np.full(len(w), final),
                    final_scopes=final_scopes)
    _block_rows(out, [(int(code[a]), ts[a:b], lo[a:b], hi[a:b]) for a, b in zip(starts, ends, strict=True)],
                region_bytes=region_bytes, extent_bytes=extent_bytes)
    return out.table()


def resumed_block_partials(device: str, ts: np.ndarray, seq: np.ndarray, lo: np.ndarray, hi: np.ndarray, *,
                           window_us: int, extent_bytes: int, buckets: int, bucket: int, start: int | None, end: int,
                           seen: tuple[np.ndarray, np.ndarray]) -> tuple[pa.Table, tuple[np.ndarray, np.ndarray]]:
    """block_partials for one device's requests from `start` (None: the trace's beginning) to the end of the
    data, `end`, after the accesses before `start` (seen: the bucket's blocks and their last access), and the
    bucket's blocks' last access at `end`. With one bucket the reuse-time groups of the windows from `start` on
    are finished here (the whole trace's too when start is None; "kept" cells for those `end` reaches); the
    extent counts of the whole trace, of the window reaching back before `start` and of windows reaching past
    `end` come as "extent_ids" rows, to be added to the counts of other spans."""
    if not keys_sorted([ts, seq]):
        order = np.lexsort((seq, ts))
        ts, lo, hi = ts[order], lo[order], hi[order]
    inside = _windows_inside((start, None), window_us)
    final = buckets == 1
    out = _Partials([device], window_us=window_us, final_whole=final and start is None,
                    final_window=lambda w: inside(w) & final, final_scopes=("device",), end=end)
    before = None if start is None or not window_us else start // window_us * window_us
    # the regions r with r % buckets == bucket only (libs.table_io.profile: no region pieces are built)

    def by_id(w: np.ndarray) -> np.ndarray:
        return (w == before) | (w + window_us > end) if window_us else np.ones(len(w), bool)

    (held,) = _block_rows(out, [(0, ts, lo, hi)], region_bytes=math.lcm(extent_bytes, FOOTPRINT_BLOCK),
                          extent_bytes=extent_bytes, buckets=buckets, bucket=bucket, seen=[seen], by_id=by_id)
    return out.table(), held


def _block_rows(out: _Partials, devices: Sequence[tuple[int, np.ndarray, np.ndarray, np.ndarray]], *,
                region_bytes: int, extent_bytes: int, buckets: int = 1, bucket: int = 0,
                seen: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
                by_id: Callable[[np.ndarray], np.ndarray] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The block pass's rows for (device code, ts_us, lo, hi) of each device, in time order: one compiled
    loop per device (profile_kernels.block_pass) gives the per-window sums and reuse-time cells. seen: per
    device, the blocks accessed before and their last access; by_id: the windows whose extent counts (and
    the whole trace's) leave "extent_ids" rows. Returns per device its blocks' last access afterwards."""
    from blockheat.libs.transforms.profile_kernels import block_pass

    window_us = out.window_us
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("fc", "fw", "fnew", "facc", "fagain", "rc", "rw", "rn", "rs",
                                                          "rs2", "rmx", "cg", "cv", "cn", "ec", "ew", "eid", "en")}
    whole: list[tuple[int, int, int, int]] = []
    held: list[tuple[np.ndarray, np.ndarray]] = []
    groups = 0
    none = np.zeros(0, np.int64)
    for i, (code, ts, lo, hi) in enumerate(devices):
        blocks, last = (np.array(a, np.int64) for a in seen[i]) if seen else (none, none)   # writable, for numba
        if len(blocks) > 1 and not (blocks[1:] > blocks[:-1]).all():
            # In block order: the kernel's table hashes blocks by chunk number, and a table's contents in its own
            # slot order (how they were stored) would pile into one cluster while the table grows.
            order = np.argsort(blocks)
            blocks, last = blocks[order], last[order]
        (win, rn, rs, rs2, rmx, fnew, facc, cell_win, cell_code, cell_n, distinct, total, again,
         ext_w, ext_id, ext_n, after, after_last) = block_pass(ts, lo, hi, window_us, FOOTPRINT_BLOCK, extent_bytes,
                                                               region_bytes, buckets, bucket, CODES, blocks, last)
        held.append((after, after_last))
        if not total:
            continue
        whole.append((code, distinct, total, again))
        used = facc > 0
        for k, v in (("fc", np.full(int(used.sum()), code)), ("fw", win[used]), ("fnew", fnew[used]),
                     ("facc", facc[used]), ("fagain", rn[used])):               # re-accesses
            parts[k].append(v)
        reused = rn > 0
        index = np.cumsum(reused) - 1 + groups          # window -> reuse group
        groups += int(reused.sum())
        for k, v in (("rc", np.full(int(reused.sum()), code)), ("rw", win[reused]), ("rn", rn[reused]),
                     ("rs", rs[reused]), ("rs2", rs2[reused]), ("rmx", rmx[reused]), ("cg", index[cell_win]),
                     ("cv", cell_code), ("cn", cell_n), ("ec", np.full(len(ext_id), code)), ("ew", ext_w),
                     ("eid", ext_id), ("en", ext_n)):
            parts[k].append(v)
    if not whole:
        return held
    p = {k: np.concatenate(v) for k, v in parts.items()}
    _extent_cells(out, p["ec"], p["ew"], p["eid"], p["en"], by_id=by_id)
    if groups:
        out.cells(p["rc"], p["rw"], p["rn"], p["rs"], p["rs2"], p["rmx"], p["cg"], p["cv"], p["cn"],
                  metric="reuse_time_us", scopes="both", vmax=CODES, coded=True, final=True)
    c, distinct, total, again = (np.array(x, np.int64) for x in zip(*whole, strict=True))
    out.add("footprint", c, np.zeros(len(c), np.int64), "footprint", window_us=0, n=distinct,
            s=total.astype(np.float64), s2=again.astype(np.float64))
    if window_us:
        out.add("footprint", p["fc"], p["fw"], "footprint", window_us=window_us, n=p["fnew"],
                s=p["facc"].astype(np.float64), s2=p["fagain"].astype(np.float64))
    return held


# --- Spark -------------------------------------------------------------------------------------


def _index_of(col: Column, bounds: Sequence[int], base: int = 0) -> Column:
    """i such that bounds[i] <= col < bounds[i + 1] (col >= bounds[0]), as a balanced CASE tree."""
    if len(bounds) == 1:
        return F.lit(base)
    mid = len(bounds) // 2
    return F.when(col < bounds[mid], _index_of(col, bounds[:mid], base)).otherwise(
        _index_of(col, bounds[mid:], base + mid))


def plan_parts(chunks: Sequence[tuple[str, int, int, int, int]], *, parts: int
               ) -> tuple[list[int], dict[int, tuple[dict[str, tuple[int, int]], int | None]]]:
    """Splits the trace's time chunks into at most `parts` runs of consecutive chunks with about
    equal request counts. Input: (device, chunk, requests, last ts_us, last end byte) per non-empty
    (device, chunk). Returns the first chunk of each part and, per part, what ordered_partials
    needs from before it: each device's last (ts_us, end byte) and the last arrival on any device.
    """
    per_chunk: dict[int, int] = {}
    for _, chunk, count, _, _ in chunks:
        per_chunk[chunk] = per_chunk.get(chunk, 0) + count
    order = sorted(per_chunk)
    total = sum(per_chunk.values())
    firsts, done, last_part = [], 0, -1
    for chunk in order:
        part = done * parts // max(total, 1)
        if part > last_part:
            firsts.append(chunk)
            last_part = part
        done += per_chunk[chunk]
    before: dict[int, tuple[dict[str, tuple[int, int]], int | None]] = {}
    rows = sorted(chunks, key=lambda r: r[1])
    seen: dict[str, tuple[int, int]] = {}
    latest: int | None = None
    i = 0
    for p, first in enumerate(firsts):
        while i < len(rows) and rows[i][1] < first:
            device, _, _, ts, end = rows[i]
            seen[device] = (ts, end)
            latest = ts if latest is None else max(latest, ts)
            i += 1
        before[p] = (dict(seen), latest)
    return firsts, before


def _tasks(total: int, rows_per_part: int, parallelism: int) -> int:
    """How many numpy tasks a pass over `total` rows uses: every core busy once there is enough
    work (MIN_ROWS_PER_TASK each), and no task above rows_per_part."""
    return max(1, min(2 * parallelism, math.ceil(total / MIN_ROWS_PER_TASK)), math.ceil(total / rows_per_part))


def _ordered_pass(base: DataFrame, *, chunk_us: int, window_us: int, rows_per_part: int) -> tuple[DataFrame, int]:
    """The ordered pass's partials and the number of requests."""
    chunk = idiv(F.col("ts_us"), chunk_us)
    chunks = [tuple(r) for r in base.groupBy("device", chunk.alias("chunk")).agg(
        F.count(F.lit(1)).alias("n"), F.max_by(F.struct("ts_us", "end_bytes"), F.struct(*ORDER)).alias("last"))
        .select("device", "chunk", "n", "last.ts_us", "last.end_bytes").collect()]
    total = sum(r[2] for r in chunks)
    parallelism = session_parallelism(base.sparkSession)
    firsts, before = plan_parts(chunks, parts=_tasks(total, rows_per_part, parallelism))
    if not firsts:
        return base.sparkSession.createDataFrame([], PARTIAL_DDL), 0
    edges = [None, *(c * chunk_us for c in firsts[1:]), None]

    def run(table: pa.Table) -> pa.Table:
        part = table.column("part")[0].as_py()
        device_before, any_before = before[part]
        return ordered_partials(table, part=part, before=device_before, before_ts=any_before, window_us=window_us,
                                span=(edges[part], edges[part + 1]))

    return (base.select("device", "seq", "ts_us", "op", "offset_bytes", "size_bytes",
                        _index_of(chunk, firsts).alias("part"))
            .groupBy("part").applyInArrow(python_task(run), PARTIAL_DDL)), total


def _block_pass(base: DataFrame, *, window_us: int, extent_bytes: int, buckets: int) -> DataFrame:
    region_bytes = math.lcm(extent_bytes, FOOTPRINT_BLOCK)
    lo, hi = F.col("offset_bytes"), F.col("offset_bytes") + F.col("size_bytes")
    first, last = idiv(lo, region_bytes), idiv(hi - 1, region_bytes)
    pieces = base.select("device", "seq", "ts_us", lo.alias("lo"), hi.alias("hi"), F.explode(
        F.when(first == last, F.array(first)).otherwise(F.sequence(first, last))).alias("region"))

    def run(table: pa.Table) -> pa.Table:
        return block_partials(table, region_bytes=region_bytes, window_us=window_us, extent_bytes=extent_bytes,
                              final=buckets == 1)

    return (pieces.withColumn("bucket", F.pmod(F.col("region"), F.lit(buckets)))
            .groupBy("bucket").applyInArrow(python_task(run), PARTIAL_DDL))


def _merging(*merges: Callable[[pa.Table], pa.Table]):  # type: ignore[no-untyped-def]
    """mapInArrow function: each of `merges` over a partition's rows (whole groups, by partitioning)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        kept = [b for b in batches if b.num_rows]
        if kept:
            table = pa.Table.from_batches(kept)
            for merge in merges:
                yield from merge(table).to_batches()

    return run


def _run_cells(stitched: Sequence[tuple[str, int, int]], window_us: int) -> list[tuple]:
    """PARTIAL "hist" rows of the runs joined across part edges, one per group each run counts in."""
    rows = []
    for device, w, n in stitched:
        groups = [("device", device), ("trace", "*")]
        spans = [(0, 0)] + ([(w, window_us)] if window_us else [])
        cells = _pack(np.array([n], np.float64), np.ones(1))
        rows += [("hist", scope, dev, start, span, "run_length", 0, 0.0, 1, float(n), float(n * n), float(n), cells)
                 for scope, dev in groups for start, span in spans]
    return rows


def compute_trace_profile(requests: DataFrame, *, span_us: int, window_us: int = 3_600_000_000,
                          extent_bytes: int = 1 << 20, chunk_us: int = 60_000_000,
                          rows_per_part: int = ROWS_PER_PART, persisted: list[DataFrame] | None = None) -> DataFrame:
    """The profile of one trace. Input: `requests` rows; span_us the trace's span (traces.span_us).
    Output: exactly schemas.trace_profile.COLUMNS, trace_id left for libs.io.tables.replace_rows.
    Runs two Spark jobs before returning (the per-chunk table; the ordered pass, for its run pieces).
    Both passes' partials are persisted and, given `persisted` (a list), appended to it for the caller
    to unpersist once the result is written.

        profile = compute_trace_profile(spark.table("requests").where("trace_id = 'x'"), span_us=span)
    """
    if window_us < 0 or chunk_us <= 0 or extent_bytes <= 0 or rows_per_part <= 0:
        raise ValueError(f"window_us >= 0, chunk_us > 0, extent_bytes > 0, rows_per_part > 0 required, got "
                         f"{window_us}, {chunk_us}, {extent_bytes}, {rows_per_part}")
    spark = requests.sparkSession
    base = requests.select("device", "seq", "ts_us", "op", "offset_bytes", "size_bytes",
                           (F.col("offset_bytes") + F.col("size_bytes")).alias("end_bytes"))
    ordered, total = _ordered_pass(base, chunk_us=chunk_us, window_us=window_us, rows_per_part=rows_per_part)
    ordered = ordered.persist()
    tasks = _tasks(total, rows_per_part, session_parallelism(spark))
    blocks = _block_pass(base, window_us=window_us, extent_bytes=extent_bytes, buckets=tasks).persist()
    if persisted is not None:
        persisted += [ordered, blocks]
    kind = F.col("kind")
    # Everything but histogram cells and extent counts is small (rows per group and part): the driver
    # finishes it (finish()); the cells are merged by Spark tasks, one group per task at a time.
    small = ordered.unionByName(blocks).where(kind.isin("count", "final", "burst", "bin", "footprint", "run_piece"))
    small = small.toArrow()
    runs = spark.createDataFrame(joined_runs(small, window_us).to_pylist(), PARTIAL_DDL)
    group = ("scope", "device", "w", "window_us", "metric")
    cells = ordered.unionByName(blocks).unionByName(runs).where(kind.isin("hist", "extent"))
    merged = (cells.repartition(tasks, *group)
              .mapInArrow(python_task(_merging(merge_histograms, merge_skew)), FINAL_DDL).toArrow())
    rows = finish(small, merged, span_us=span_us, window_us=window_us)
    profile = spark.createDataFrame(rows)
    return to_schema(profile.select(F.lit("").alias("trace_id"), *GROUP, "metric", "value"), TP.SPARK_SCHEMA)


# --- the driver's merge (both paths) -----------------------------------------------------------


def _groups_of(scope: str, device: str, w: int, window_us: int) -> list[tuple[str, str, int, int]]:
    """The (scope, device, window start, window_us) groups a (device, window) row counts in: `scope`
    "" for both scopes; each for the whole trace and its window."""
    scopes = ("device", "trace") if not scope else (scope,)
    spans = [(0, 0)] + ([(w, window_us)] if window_us else [])
    return [(s, device if s == "device" else "*", start, span) for s in scopes for start, span in spans]


def _rows(table: pa.Table, kind: str, columns: Sequence[str]) -> list[tuple]:
    picked = table.filter(pc.equal(table.column("kind"), kind)).select(list(columns))
    return list(zip(*(picked.column(c).to_pylist() for c in columns), strict=True))


def joined_runs(partials: pa.Table, window_us: int) -> pa.Table:
    """PARTIAL "hist" rows of the runs that cross span edges, from the ordered tasks' run pieces."""
    ended, still = runs_of_pieces(partials)
    return pa.concat_tables([run_rows(ended, window_us), run_rows(still, window_us)])


def runs_of_pieces(partials: pa.Table) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """The runs the "run_piece" rows join into: (ended, still open), as stitch_open gives them."""
    pieces = _rows(partials, "run_piece", ("device", "key", "v", "n", "w"))
    return stitch_open([(d, k, int(v), n, w) for d, k, v, n, w in pieces])


def run_rows(runs: Sequence[tuple[str, int, int]], window_us: int, *, key: int = 0) -> pa.Table:
    """PARTIAL "hist" rows of runs (device, window, length), marked `key`."""
    rows = [(*r[:6], key, *r[7:]) for r in _run_cells(runs, window_us)]
    return pa.Table.from_pylist([dict(zip(PARTIAL.names, r, strict=True)) for r in rows], schema=PARTIAL)


def finish(partials: pa.Table, merged: pa.Table, *, span_us: int, window_us: int) -> pa.Table:
    """The profile (FINAL rows) from every task's small partials and the merged distributions."""
    out: list[tuple] = []
    counts: dict[tuple, dict[str, int]] = {}
    for kind, spans in (("count", window_us), ("count_whole", 0)):     # count_whole: the whole trace's groups only
        for device, w, metric, n in _rows(partials, kind, ("device", "w", "metric", "n")):
            for group in _groups_of("", device, w, spans):
                cell = counts.setdefault(group, dict.fromkeys(COUNTS, 0))
                cell[metric] += n
    for group, c in counts.items():
        duration = (group[3] if group[3] > 0 else span_us) / 1e6
        total_bytes = c["bytes_read"] + c["bytes_written"]
        metrics: dict[str, Any] = {
            "requests": c["requests"], "duration_s": duration,
            "rate_per_s": c["requests"] / duration if duration else None,
            "reads": c["reads"], "writes": c["writes"], "read_share_requests": c["reads"] / c["requests"],
            "read_share_bytes": c["bytes_read"] / total_bytes if total_bytes > 0 else None,
            "bytes_read": c["bytes_read"], "bytes_written": c["bytes_written"],
            "seq_share": c["sequential"] / c["requests"], "runs": c["runs"]}
        out += [(*group, m, None if v is None else float(v)) for m, v in metrics.items()]
    out += _rows(partials, "final", ("scope", "device", "w", "window_us", "metric", "v"))
    out += _footprint(partials) + _bursts(partials, span_us=span_us, window_us=window_us)
    return pa.concat_tables([_final_table(out), merged.select(FINAL.names).cast(FINAL)])


def _footprint(partials: pa.Table) -> list[tuple]:
    """Distinct 4 KiB blocks and the re-access share per device and summed over devices (a block
    belongs to one device), from the block pass's "footprint" rows."""
    sums: dict[tuple, list[float]] = {}
    for device, w, window_us, n, s, s2 in _rows(partials, "footprint", ("device", "w", "window_us", "n", "s", "s2")):
        for group in (("device", device, w, window_us), ("trace", "*", w, window_us)):
            cell = sums.setdefault(group, [0, 0.0, 0.0])
            cell[0] += n
            cell[1] += s
            cell[2] += s2
    return [(*group, metric, value) for group, (blocks, accesses, again) in sums.items()
            for metric, value in (("footprint_blocks_4k", float(blocks)),
                                  ("footprint_bytes", float(blocks * FOOTPRINT_BLOCK)),
                                  ("reuse_share", again / accesses))]


def _bursts(partials: pa.Table, *, span_us: int, window_us: int) -> list[tuple]:
    """Peak-to-mean and index of dispersion of request counts per bin, empty bins included, from the
    passes' "burst" sums and their "bin" rows (bins cut by a part edge, joined here)."""
    out = []
    for label, bin_us in BURST_BINS_US.items():
        bins: dict[tuple, dict[int, int]] = {}
        for scope, device, w, key, n in _rows(partials.filter(pc.equal(partials.column("metric"), label)), "bin",
                                             ("scope", "device", "w", "key", "n")):
            for group in _groups_of(scope, device, w, window_us):
                per_bin = bins.setdefault(group, {})
                per_bin[key] = per_bin.get(key, 0) + n
        sums: dict[tuple, list[int]] = {group: [sum(c.values()), sum(v * v for v in c.values()), max(c.values())]
                                        for group, c in bins.items()}
        for scope, device, w, wu, n, s, mx in _rows(partials.filter(pc.equal(partials.column("metric"), label)),
                                                    "burst", ("scope", "device", "w", "window_us", "n", "s", "mx")):
            cell = sums.setdefault((scope, device, w, wu), [0, 0, 0])
            cell[0] += n
            cell[1] += int(s)
            cell[2] = max(cell[2], int(mx))
        for group, (n, n2, peak) in sums.items():
            length = group[3] if group[3] > 0 else max(span_us, 1)
            bins_n = max(math.ceil(length / bin_us), 1)
            mean = n / bins_n
            var = n2 / bins_n - mean * mean
            out += [(*group, f"peak_to_mean_{label}", peak / mean),
                    (*group, f"dispersion_{label}", var / mean if mean > 0 else None)]
    return out


# --- resuming after an append: what the requests before a time `stop` leave for later runs --------------------

OPEN_RUN = 1   # the key of "hist" rows of runs a later request may continue: counted in this run's profile only


@dataclass(frozen=True)
class Horizon:
    """Which groups requests from `stop` on can still change: the whole trace's, the windows reaching past
    `stop`, and the run-length distributions of the windows where a still-open run began (run_windows:
    (device, window start), "*" for the trace scope)."""

    stop: int
    window_us: int
    run_windows: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def after(cls, stop: int, window_us: int, still: Sequence[tuple[str, int, int]]) -> Horizon:
        """The horizon at `stop` with the open runs `still` (device, window, length)."""
        return cls(stop, window_us, frozenset({(d, w) for d, w, _ in still} | {("*", w) for _, w, _ in still}))

    def is_open(self, scope: str, device: str, w: int, window_us: int, metric: str) -> bool:
        if window_us == 0 or w + window_us > self.stop:
            return True
        return metric.startswith("run_length") and (device if scope == "device" else "*", w) in self.run_windows

    def closed(self, final: pa.Table) -> pa.Table:
        """The FINAL rows of the groups no later request changes."""
        cols = [final.column(c).to_pylist() for c in ("scope", "device", "window_start_us", "window_us", "metric")]
        keep = [not self.is_open(*row) for row in zip(*cols, strict=True)]
        return final.filter(pa.array(keep, pa.bool_()))


EXTENTS = pa.schema([("device", pa.string()), ("w", pa.int64()), ("extent", pa.int64()), ("n", pa.int64())])


def extent_counts(partials: pa.Table) -> pa.Table:
    """The "extent_ids" rows' counts as EXTENTS rows (w -1: the whole trace), summed."""
    picked = partials.filter(pc.equal(partials.column("kind"), "extent_ids"))
    pairs = [view.reshape(-1, 2).astype(np.int64) for view in _cell_views(picked)]
    names, code = _name_ordered_codes(picked)
    rows = [len(p) for p in pairs]
    whole = picked.column("window_us").to_numpy() == 0
    w = np.repeat(np.where(whole, -1, picked.column("w").to_numpy()), rows)
    both = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    return _summed_extents(names, np.repeat(code, rows), w, both[:, 0], both[:, 1])


def add_extent_counts(tables: Sequence[pa.Table]) -> pa.Table:
    """EXTENTS rows summed by (device, w, extent), in that order."""
    table = pa.concat_tables([EXTENTS.empty_table(), *tables])
    return _summed_extents(*_name_ordered_codes(table), *(table.column(c).to_numpy() for c in ("w", "extent", "n")))


def _summed_extents(names: list[str], code: np.ndarray, w: np.ndarray, extent: np.ndarray, n: np.ndarray
                    ) -> pa.Table:
    """EXTENTS rows of (names[code], w, extent, n) summed by key, in key order (`names` sorted, so a code's order
    is its name's): numpy's sort and sums, whose transient memory is a few arrays of the rows (Arrow's hash
    group-by on the string key held several times that)."""
    order = np.lexsort((extent, w, code))
    code, w, extent = code[order], w[order], extent[order]
    starts = _runs_of(code, w, extent)
    n = np.add.reduceat(n[order], starts) if len(starts) else n[:0]
    device = pc.take(pa.array(names, pa.string()), pa.array(code[starts]))
    return pa.table({"device": device, "w": w[starts], "extent": extent[starts], "n": n}, schema=EXTENTS)


def extent_rows(counts: pa.Table, window_us: int) -> pa.Table:
    """PARTIAL "extent" rows of the groups EXTENTS `counts` hold: per device and for the trace, the whole
    trace (w -1) and each window, every row of a group here."""
    names, code = _device_codes(counts)
    w, n = counts.column("w").to_numpy(), counts.column("n").to_numpy()
    rows = []

    def add(scope: str, name: str, at: int, picked: np.ndarray) -> None:
        rows.append({"kind": "extent", "scope": scope, "device": name, "w": max(at, 0),
                     "window_us": window_us if at >= 0 else 0, "metric": "extent", "key": 0, "v": 0.0, "n": 0,
                     "s": 0.0, "s2": 0.0, "mx": 0.0, "cells": _pack(picked)})

    for at in np.unique(w).tolist():
        mine = w == at
        add("trace", "*", at, n[mine])
        for name, k in sorted((names[k], k) for k in np.unique(code[mine]).tolist()):
            add("device", name, at, n[mine & (code == k)])
    return pa.Table.from_pylist(rows, schema=PARTIAL)


def kept_partials(small: pa.Table, horizon: Horizon, still: Sequence[tuple[str, int, int]], *, part: int
                  ) -> pa.Table:
    """What a later run needs of the small partials (all but histogram cells and extent counts) of the requests
    before horizon.stop: the counts of the open windows per device (the others summed per device as
    "count_whole"), the burst sums of the open groups with the bins that ended folded in, the bins reaching
    past stop, the footprint sums of the open groups, and the open runs `still` as pieces of `part`."""
    stop, window_us = horizon.stop, horizon.window_us
    sums: dict[tuple, list] = {}

    def add(key: tuple, values: Sequence[float], peak: bool = False) -> None:
        cell = sums.setdefault(key, [0] * len(values))
        for i, v in enumerate(values):
            cell[i] = max(cell[i], v) if peak and i == len(values) - 1 else cell[i] + v

    for kind in ("count", "count_whole"):
        for device, w, metric, n in _rows(small, kind, ("device", "w", "metric", "n")):
            if kind == "count" and (window_us == 0 or w + window_us > stop):
                add(("count", "", device, w, 0, metric), [n])
            else:
                add(("count_whole", "", device, 0, 0, metric), [n])
    for label, bin_us in BURST_BINS_US.items():
        of_label = small.filter(pc.equal(small.column("metric"), label))
        ended: dict[tuple, int] = {}
        for scope, device, w, key, n in _rows(of_label, "bin", ("scope", "device", "w", "key", "n")):
            if (key + 1) * bin_us > stop:
                add(("bin", scope, device, w, 0, label, key), [n])
                continue
            for group in _groups_of(scope, device, w, window_us):
                if horizon.is_open(*group, label):
                    ended[(*group, key)] = ended.get((*group, key), 0) + n
        for (*group, _), n in ended.items():
            add(("burst", *group, label), [n, n * n, n], peak=True)
        for scope, device, w, wu, n, s, mx in _rows(of_label, "burst",
                                                    ("scope", "device", "w", "window_us", "n", "s", "mx")):
            if horizon.is_open(scope, device, w, wu, label):
                add(("burst", scope, device, w, wu, label), [n, int(s), int(mx)], peak=True)
    for device, w, wu, n, s, s2 in _rows(small, "footprint", ("device", "w", "window_us", "n", "s", "s2")):
        if horizon.is_open("device", device, w, wu, "footprint"):
            add(("footprint", "", device, w, wu, "footprint"), [n, s, s2])
    rows = []
    for key, values in sums.items():
        kind, scope, device, w, wu, metric, *rest = key
        row = {"kind": kind, "scope": scope, "device": device, "w": w, "window_us": wu, "metric": metric,
               "key": rest[0] if rest else 0, "v": 0.0, "n": values[0], "s": 0.0, "s2": 0.0, "mx": 0.0, "cells": None}
        if kind in ("burst", "footprint"):
            row |= {"s": float(values[1]), "s2": float(values[2]) if kind == "footprint" else 0.0,
                    "mx": float(values[2]) if kind == "burst" else 0.0}
        rows.append(row)
    rows += [{"kind": "run_piece", "scope": "", "device": device, "w": w, "window_us": 0, "metric": "run_piece",
              "key": part, "v": float(RUN_OPEN), "n": length, "s": 0.0, "s2": 0.0, "mx": 0.0, "cells": None}
             for device, w, length in still]
    return pa.Table.from_pylist(rows, schema=PARTIAL)

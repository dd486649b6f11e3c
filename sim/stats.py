"""Run results: response-time summaries split by read and write, queue and service times, per-disk
utilization and queue length, cache and migration figures, saturation, and the optional time series and
per-request output, as one typed object with Arrow renderings."""
from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
from numba import njit

from blockheat.sim import _kernel as K
from blockheat.sim.records import FLAG_BACKGROUND, FLAG_READ
from blockheat.sim.select import float_of_bits, select_bits

if TYPE_CHECKING:
    from blockheat.sim.records import Requests
    from blockheat.sim.spec import DiskSpec

__all__ = ["RESULT_SCHEMA", "Replay", "ResponseTally", "RunResult", "arrow_type", "saturation_verdict",
           "summarize", "timeseries"]


class _Settings(Protocol):
    """The run settings the figures depend on (sim.engine.SimConfig's)."""

    @property
    def closed_loop(self) -> object | None: ...
    @property
    def per_request(self) -> bool: ...
    @property
    def saturation_min_backlog(self) -> int: ...
    @property
    def saturation_fraction(self) -> float: ...


class Replay(Protocol):
    """What the figures are read from: a sim.engine.Simulation, during or after its run. Named by its shape,
    so that this module imports nothing of the engine, which builds its results here."""

    @property
    def core(self) -> K.Core: ...
    @property
    def out(self) -> K.Out: ...
    @property
    def config(self) -> _Settings: ...
    @property
    def requests(self) -> Requests: ...
    @property
    def spec(self) -> DiskSpec: ...
    @property
    def saturated_early(self) -> bool: ...
    @property
    def tally(self) -> ResponseTally | None: ...


@dataclass(frozen=True)
class RunResult:
    """One run's figures. Times in ms. Response figures are +inf when the run is saturated.

    Split columns end in _read / _write; plain ones are over all foreground requests (background
    traffic is reported only in bg_*). Queue time of a request is that of its slowest part; service
    time is the disk busy time of all its parts (ALIS's throughput proxy). physical_ios count media
    accesses of foreground parts (cache hits excluded), sectors_* the sectors completed (spec's sectors).
    read_miss_ratio: read requests that needed the media / read requests. Utilization and queue length
    are per disk, time-averaged over [first arrival, last event]; queue length counts the request in
    service; the hottest disk is the most utilized. Their _read / _write shares add up to the total: reads
    are foreground and migration reads, writes the rest (writes, migration writes, destages; destages
    count in utilization only, they never queue). migration_mb counts bytes read plus bytes written;
    migration_*_read / _write split the copies' I/O into the read of the old place and the write of the new.
    """

    requests: int
    reads: int
    writes: int
    saturated: bool
    mean_response_ms: float
    p50_response_ms: float
    p95_response_ms: float
    p99_response_ms: float
    max_response_ms: float
    mean_response_ms_read: float
    p50_response_ms_read: float
    p95_response_ms_read: float
    p99_response_ms_read: float
    max_response_ms_read: float
    mean_response_ms_write: float
    p50_response_ms_write: float
    p95_response_ms_write: float
    p99_response_ms_write: float
    max_response_ms_write: float
    mean_queue_ms: float
    mean_queue_ms_read: float
    mean_queue_ms_write: float
    mean_service_ms: float
    mean_service_ms_read: float
    mean_service_ms_write: float
    physical_ios: int
    physical_ios_read: int
    physical_ios_write: int
    sectors_read: int
    sectors_written: int
    read_miss_ratio: float
    mean_utilization: float
    mean_utilization_read: float
    mean_utilization_write: float
    hottest_disk: int
    hottest_utilization: float
    mean_queue_length: float
    mean_queue_length_read: float
    mean_queue_length_write: float
    hottest_queue_length: float
    max_outstanding: int
    migration_ios: int
    migration_mb: float
    migration_busy_ms: float
    migration_ios_read: int
    migration_ios_write: int
    migration_mb_read: float
    migration_mb_write: float
    migration_busy_ms_read: float
    migration_busy_ms_write: float
    remaps: int
    destage_ios: int
    bg_requests: int
    bg_mean_response_ms: float
    simulated_s: float
    events: int
    disk_utilization: tuple[float, ...]
    disk_queue_length: tuple[float, ...]
    disk_physical_ios: tuple[int, ...]
    disk_max_queue: tuple[int, ...]
    disk_utilization_read: tuple[float, ...]
    disk_utilization_write: tuple[float, ...]
    disk_queue_length_read: tuple[float, ...]
    disk_queue_length_write: tuple[float, ...]

    def as_row(self) -> dict[str, Any]:
        """Plain values for an Arrow row: tuples as lists, NaN (no such requests) as None; inf stays."""
        row: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            row[f.name] = list(v) if isinstance(v, tuple) else (None if isinstance(v, float) and math.isnan(v) else v)
        return row


def arrow_type(annotation: str) -> pa.DataType:
    """The Arrow type of a record field's annotation (int, float, bool, str, tuple[int/float, ...])."""
    if annotation.startswith("tuple[float"):
        return pa.list_(pa.float64())
    if annotation.startswith("tuple[int"):
        return pa.list_(pa.int64())
    return {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}[annotation]


#: Arrow schema of RunResult.as_row() (one row per run); floats are null when undefined (e.g. no reads).
RESULT_SCHEMA = pa.schema([pa.field(f.name, arrow_type(str(f.type)), str(f.type) == "float")
                           for f in fields(RunResult)])



def saturation_verdict(backlog: np.ndarray, arrived: int, *, min_backlog: int, fraction: float) -> bool:
    """A backlog that ends above max(min_backlog, fraction x arrivals) and grew over the second half.

    backlog[j] is the number of requests in the array at the j-th arrival checkpoint (-1: not reached).
    """
    seen = backlog[backlog >= 0]
    if len(seen) < 2:
        return False
    end = int(seen[-1])
    mid = int(seen[len(seen) // 2])
    return end > max(min_backlog, fraction * arrived) and end > mid


def _order_stats(x: np.ndarray) -> tuple[float, float, float, float, float]:
    """mean, p50, p95, p99, max (nearest rank) in the input's units; NaN when empty."""
    n = len(x)
    if n == 0:
        return (math.nan,) * 5
    ks = sorted({max(0, math.ceil(q * n) - 1) for q in (0.50, 0.95, 0.99)})
    part = np.partition(x, ks)
    at = {k: float(part[k]) for k in ks}
    p = [at[max(0, math.ceil(q * n) - 1)] for q in (0.50, 0.95, 0.99)]
    return float(np.mean(x, dtype=np.float64)), p[0], p[1], p[2], float(x.max())


class ResponseTally:
    """The response times of a streamed run's answered foreground requests, read and write apart, for the exact
    figures of _order_stats in memory that does not grow with the run: each class keeps a count per value of the top
    16 bits of the response (float32, or float64 with dtype; the bits of a non-negative float order like its
    value), a float64 sum, and its responses' bits in a scratch file; a rank's value is found from its bucket by
    select_bits. The mean sums chunk by chunk, so it can differ from one np.mean in the last bits."""

    def __init__(self, dtype: type = np.float32) -> None:
        self.through = 0                                     # requests added so far (answered or not)
        self.dtype = np.dtype(dtype)
        self._bits = np.dtype(np.uint32 if self.dtype.itemsize == 4 else np.uint64)
        self._counts = np.zeros((2, 1 << 16), np.int64)
        self._sums = [0.0, 0.0]
        self._max = [0, 0]
        # The tally owns its scratch files for its life (they go with it): no context manager spans that.
        self._files = [tempfile.TemporaryFile(prefix="blockheat-responses-") for _ in range(2)]  # noqa: SIM115

    def add(self, resp: np.ndarray, flags: np.ndarray) -> None:
        """The next requests' responses (NaN: not answered) and flags."""
        self.through += len(resp)
        values = np.empty((2, len(resp)), self.dtype)
        bits = values.view(self._bits)
        counted = _classify(np.ascontiguousarray(resp), np.ascontiguousarray(flags, dtype=np.int8), values, bits,
                            self._counts, self._bits.itemsize * 8 - 16)
        for c, n in enumerate(counted.tolist()):
            if n:
                self._sums[c] += float(np.sum(values[c, :n], dtype=np.float64))
                self._max[c] = max(self._max[c], int(bits[c, :n].max()))
                bits[c, :n].tofile(self._files[c])

    def count(self, classes: tuple[int, ...]) -> int:
        """The answered responses of the classes (0: reads, 1: writes)."""
        return int(self._counts[list(classes)].sum())

    def order_stats(self, classes: tuple[int, ...]) -> tuple[float, float, float, float, float]:
        """_order_stats over the classes' responses (0: reads, 1: writes)."""
        top = self._counts[list(classes)].sum(axis=0)
        n = int(top.sum())
        if n == 0:
            return (math.nan,) * 5

        def passes() -> Iterator[np.ndarray]:
            for c in classes:
                f = self._files[c]
                f.flush()
                f.seek(0)
                while len(bits := np.fromfile(f, dtype=self._bits, count=1 << 22)):
                    yield bits
                f.seek(0, 2)

        values = [self._value(select_bits(passes, top, max(0, math.ceil(q * n) - 1))) for q in (0.50, 0.95, 0.99)]
        top_value = self._value(max(self._max[c] for c in classes if self._counts[c].any()))
        return sum(self._sums[c] for c in classes) / n, values[0], values[1], values[2], top_value

    def _value(self, bits: int) -> float:
        return float_of_bits(bits, self.dtype)


@njit(cache=True, nogil=True)
def _classify(resp: np.ndarray, flags: np.ndarray, values: np.ndarray, bits: np.ndarray, counts: np.ndarray,
              shift: int) -> np.ndarray:  # pragma: no cover
    """One pass over a chunk: each answered foreground response (not NaN, no FLAG_BACKGROUND) appended to its
    class's row of `values` (0: reads, 1: writes; cast to values' dtype) and counted in `counts` by its top 16 bits
    (bits: values viewed as unsigned integers, shift: their width - 16). Returns the count per class."""
    n = np.zeros(2, np.int64)
    for i in range(resp.shape[0]):
        r = resp[i]
        if np.isnan(r) or flags[i] & FLAG_BACKGROUND:
            continue
        c = 0 if flags[i] & FLAG_READ else 1
        k = n[c]
        values[c, k] = r
        counts[c, bits[c, k] >> shift] += 1
        n[c] = k + 1
    return n


def summarize(sim: Replay) -> RunResult:
    core, out = sim.core, sim.out
    cfg = sim.config
    acc = core.sf
    req = sim.requests
    saturated = sim.saturated_early or (cfg.closed_loop is None and saturation_verdict(
        out.backlog, int(core.si[K.SI_ARRIVED]), min_backlog=cfg.saturation_min_backlog,
        fraction=cfg.saturation_fraction))
    fg = ~req.is_background
    done = ~np.isnan(out.resp)
    is_read = req.is_read
    stats = {}
    for label, mask, classes in (("", fg & done, (0, 1)), ("_read", fg & done & is_read, (0,)),
                                 ("_write", fg & done & ~is_read, (1,))):
        if saturated:
            vals: tuple[float, ...] = (math.inf,) * 5
        elif sim.tally is not None:
            vals = sim.tally.order_stats(classes)
        else:
            vals = _order_stats(out.resp[mask])
        for name, v in zip(("mean", "p50", "p95", "p99", "max"), vals, strict=True):
            stats[f"{name}_response_ms{label}"] = v / 1000.0
    n_r, n_w = float(acc[K.A_N]), float(acc[K.A_N + 1])
    n = n_r + n_w

    def ratio(a: float, b: float) -> float:
        return a / b if b > 0 else math.nan

    t_first = float(core.sf[K.SF_T_FIRST])
    t_end = max(float(core.sf[K.SF_T_EVENT]), float(core.sf[K.SF_T_LAST]))
    span = max(t_end - t_first, 1e-9)
    util = core.dk_f[:, K.DKF_BUSY] / span
    qlen = core.dk_f[:, K.DKF_AREA] / span
    util_r = core.dk_f[:, K.DKF_BUSY_R] / span
    qlen_r = core.dk_f[:, K.DKF_AREA_R] / span
    hot = int(np.argmax(util)) if len(util) else 0
    return RunResult(
        requests=int(n), reads=int(n_r), writes=int(n_w), saturated=bool(saturated), **stats,
        mean_queue_ms=ratio(acc[K.A_QUEUE] + acc[K.A_QUEUE + 1], n) / 1000.0,
        mean_queue_ms_read=ratio(acc[K.A_QUEUE], n_r) / 1000.0,
        mean_queue_ms_write=ratio(acc[K.A_QUEUE + 1], n_w) / 1000.0,
        mean_service_ms=ratio(acc[K.A_SVC] + acc[K.A_SVC + 1], n) / 1000.0,
        mean_service_ms_read=ratio(acc[K.A_SVC], n_r) / 1000.0,
        mean_service_ms_write=ratio(acc[K.A_SVC + 1], n_w) / 1000.0,
        physical_ios=int(acc[K.A_PHYS] + acc[K.A_PHYS + 1]), physical_ios_read=int(acc[K.A_PHYS]),
        physical_ios_write=int(acc[K.A_PHYS + 1]),
        sectors_read=int(acc[K.A_SECT]), sectors_written=int(acc[K.A_SECT + 1]),
        read_miss_ratio=ratio(acc[K.A_MISS_REQ_R], n_r),
        mean_utilization=float(util.mean()), mean_utilization_read=float(util_r.mean()),
        mean_utilization_write=float((util - util_r).mean()), hottest_disk=hot, hottest_utilization=float(util[hot]),
        mean_queue_length=float(qlen.mean()), mean_queue_length_read=float(qlen_r.mean()),
        mean_queue_length_write=float((qlen - qlen_r).mean()), hottest_queue_length=float(qlen[hot]),
        max_outstanding=int(acc[K.A_MAX_OUT]),
        migration_ios=int(acc[K.A_MIG_IOS]), migration_mb=float(acc[K.A_MIG_SECTORS]) * sim.spec.sector_size / 1e6,
        migration_busy_ms=float(acc[K.A_MIG_BUSY]) / 1000.0,
        migration_ios_read=int(acc[K.A_MIG_IOS_R]), migration_ios_write=int(acc[K.A_MIG_IOS] - acc[K.A_MIG_IOS_R]),
        migration_mb_read=float(acc[K.A_MIG_SECTORS_R]) * sim.spec.sector_size / 1e6,
        migration_mb_write=float(acc[K.A_MIG_SECTORS] - acc[K.A_MIG_SECTORS_R]) * sim.spec.sector_size / 1e6,
        migration_busy_ms_read=float(acc[K.A_MIG_BUSY_R]) / 1000.0,
        migration_busy_ms_write=float(acc[K.A_MIG_BUSY] - acc[K.A_MIG_BUSY_R]) / 1000.0,
        remaps=int(acc[K.A_REMAPS]),
        destage_ios=int(acc[K.A_DESTAGE_IOS]),
        bg_requests=int(acc[K.A_BG_N]), bg_mean_response_ms=ratio(acc[K.A_BG_RESP], acc[K.A_BG_N]) / 1000.0,
        simulated_s=span / 1e6, events=int(core.si[K.SI_EVENTS]),
        disk_utilization=tuple(float(u) for u in util), disk_queue_length=tuple(float(q) for q in qlen),
        disk_physical_ios=tuple(int(x) for x in core.dk_i[:, K.DK_IOS]),
        disk_max_queue=tuple(int(x) for x in core.dk_i[:, K.DK_MAXQ]),
        disk_utilization_read=tuple(float(u) for u in util_r),
        disk_utilization_write=tuple(float(u) for u in util - util_r),
        disk_queue_length_read=tuple(float(q) for q in qlen_r),
        disk_queue_length_write=tuple(float(q) for q in qlen - qlen_r),
    )


def timeseries(sim: Replay) -> pa.Table:
    """One row per interval of SimConfig.interval_ms (no rows when no interval was set): interval, start_ms,
    arrivals, completions, mean and max response of the requests completing in it (null: none did), requests in
    the array time-averaged, mean and hottest disk's utilization and queue length. The `sim_timeseries` table's
    contract (schemas/sim_timeseries.py) is the one schema of these columns: the simulation stage casts to it,
    and tests/sim/test_table_schemas.py keeps the two in step."""
    core, out = sim.core, sim.out
    w = float(core.sf[K.CF_TS_W])
    t_end = max(float(core.sf[K.SF_T_EVENT]), float(core.sf[K.SF_T_LAST]))
    k = min(int(t_end / w) + 1, out.ts.shape[0]) if w > 0 else 0
    w = w if w > 0 else 1.0
    ts = out.ts[:k]
    busy = out.ts_disk[:k, :, 1] / w
    area = out.ts_disk[:k, :, 0] / w
    hot = int(np.argmax(core.dk_f[:, K.DKF_BUSY])) if core.dk_f.shape[0] else 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_resp = np.where(ts[:, K.TS_DONE] > 0, ts[:, K.TS_RESP_SUM] / ts[:, K.TS_DONE] / 1000.0, np.nan)
    done = ts[:, K.TS_DONE] > 0
    return pa.table({
        "interval": np.arange(k, dtype=np.int64),
        "start_ms": np.arange(k, dtype=np.float64) * w / 1000.0,
        "arrivals": ts[:, K.TS_ARR].astype(np.int64),
        "completions": ts[:, K.TS_DONE].astype(np.int64),
        "mean_response_ms": pa.array(mean_resp, mask=~done),
        "max_response_ms": pa.array(ts[:, K.TS_RESP_MAX] / 1000.0, mask=~done),
        "mean_outstanding": ts[:, K.TS_OUT_AREA] / w,
        "mean_utilization": busy.mean(axis=1),
        "hottest_utilization": busy[:, hot],
        "mean_queue_length": area.mean(axis=1),
        "hottest_queue_length": area[:, hot],
    })


def per_request(sim: Replay) -> pa.Table:
    """One row per request (SimConfig.per_request): arrival, response, queue and busy time in ms."""
    out = sim.out
    if not sim.config.per_request:
        raise ValueError("per-request output needs SimConfig(per_request=True)")
    r = sim.requests
    return pa.table({
        "request": np.arange(len(r), dtype=np.int64),
        "arrival_ms": r.arrival_us / 1000.0,
        "is_read": r.is_read,
        "background": r.is_background,
        "response_ms": out.resp.astype(np.float64) / 1000.0,
        "queue_ms": out.out_queue.astype(np.float64) / 1000.0,
        "service_ms": out.out_service.astype(np.float64) / 1000.0,
    })


def completed(sim: Replay) -> int:
    return int(sim.core.si[K.SI_DONE])



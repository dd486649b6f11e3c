"""Evaluation of interarrival heat tracking: generated step traces and the accuracy metrics.

Generated traces (seeded, deterministic) are Arrow tables with the `requests` columns; the metrics
are DataFrame -> value reductions over libs.transforms.tracking output. Choices: the step trace
rises from 1 to 10 requests/s per extent (4 KiB each) at 600 s; the drop trace runs at 10
requests/s and stops at 600 s; pseudo requests (aging) every second; "reached" means the estimate
is at least 90% of the new true heat, "stale" means it is still above 10% of the old true heat;
"accurate" on the real trace means a mean relative error of at most 25% at every k (ACCURATE_WITHIN; the
paper claims insensitivity to k, not an accuracy, so accuracy is reported apart from its claims).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from blockheat.libs.columns import idiv
from blockheat.libs.transforms.heat import split_at
from blockheat.libs.transforms.tracking import with_tracked_heat
from blockheat.libs.transforms.tracking_kernels import extent_pieces
from blockheat.schemas import requests as R

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KS = (5, 10, 20, 50)
EXTENT_BYTES = 1 << 20
REQUEST_BYTES = 4096
BLOCKS_PER_REQUEST = REQUEST_BYTES // 512
EVAL_AGING_PERIOD_US = 1_000_000
#: The real trace's tracking is "accurate" when every k's mean relative error is at most this.
ACCURATE_WITHIN = 0.25
#: The accuracy line's label (the report lists it before the paper's claims).
ACCURACY_LABEL = f"accurate on the real trace (mean relative error at most {ACCURATE_WITHIN:.0%} at every k)"


@dataclass(frozen=True)
class StepSpec:
    extents: int = 200
    rate_before: float = 1.0   # requests per second per extent
    rate_after: float = 10.0
    change_s: float = 600.0
    end_s: float = 720.0       # the drop trace ends with no requests after change_s
    seed: int = 7


DEFAULT_SPEC = StepSpec()


def _poisson_times(rng: np.random.Generator, rate: float, start_s: float, end_s: float) -> np.ndarray:
    n = rng.poisson(rate * (end_s - start_s) * 1.5) + 16
    times = start_s + np.cumsum(rng.exponential(1.0 / rate, size=n))
    while times[-1] < end_s:  # rare: extend until the period is covered
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1.0 / rate, size=n))])
    return times[times < end_s]


def generated_trace(kind: str, spec: StepSpec = DEFAULT_SPEC) -> pa.Table:
    """`step` (rate_before -> rate_after at change_s) or `drop` (rate_after until change_s, then
    nothing until end_s) for `extents` extents of one device, as a requests-shaped Arrow table."""
    if kind not in ("step", "drop"):
        raise ValueError(f"kind must be 'step' or 'drop', got {kind!r}")
    rng = np.random.default_rng(spec.seed)
    ts, ext = [], []
    for e in range(spec.extents):
        if kind == "step":
            t = np.concatenate([_poisson_times(rng, spec.rate_before, 0.0, spec.change_s),
                                _poisson_times(rng, spec.rate_after, spec.change_s, spec.end_s)])
        else:
            t = _poisson_times(rng, spec.rate_after, 0.0, spec.change_s)
        ts.append(np.round(t * 1e6).astype(np.int64))
        ext.append(np.full(len(t), e, dtype=np.int64))
    ts_all, ext_all = np.concatenate(ts), np.concatenate(ext)
    order = np.lexsort((ext_all, ts_all))
    ts_all, ext_all = ts_all[order], ext_all[order]
    n = len(ts_all)
    columns: dict[str, Any] = {
        "trace_id": pa.array([f"generated-{kind}"] * n), "device": pa.array(["gen"] * n),
        "seq": pa.array(np.arange(n, dtype=np.int64)), "ts_us": pa.array(ts_all), "op": pa.array(["R"] * n),
        "offset_bytes": pa.array(ext_all * EXTENT_BYTES), "size_bytes": pa.array(np.full(n, REQUEST_BYTES)),
        "response_us": pa.nulls(n, pa.float64()), "queue_us": pa.nulls(n, pa.float64()),
        "source_file": pa.array([f"generated:{kind}:seed={spec.seed}"] * n),
    }
    return pa.table(columns, schema=R.ARROW_SCHEMA)


def _tracked(requests: DataFrame, k: int) -> DataFrame:
    return with_tracked_heat(split_at(requests, EXTENT_BYTES), k=k)


def requests_to_reach(requests: DataFrame, *, k: int, spec: StepSpec = DEFAULT_SPEC,
                      fraction: float = 0.9) -> float | None:
    """Mean over extents of the requests after the step until the estimate first reaches
    `fraction` of the new true heat (rate_after * blocks per request). None if no extent gets there."""
    change_us = round(spec.change_s * 1e6)
    target = fraction * spec.rate_after * BLOCKS_PER_REQUEST
    after = _tracked(requests, k).where(F.col("ts_us") >= change_us)
    first_n = after.groupBy("device", "extent_id").agg(
        F.min("n").alias("_first_after"), F.min(F.when(F.col("heat") >= target, F.col("n"))).alias("_reach"))
    reached = first_n.where(F.col("_reach").isNotNull())
    value = reached.agg(F.avg(F.col("_reach") - F.col("_first_after") + 1)).first()[0]
    return None if value is None else float(value)


def stale_seconds(requests: DataFrame, *, k: int, aging: bool, spec: StepSpec = DEFAULT_SPEC,
                  aging_period_us: int = EVAL_AGING_PERIOD_US, fraction: float = 0.1) -> float | None:
    """Mean over extents of the time from an extent's last request until its estimate falls below
    `fraction` of the old true heat. Without aging the estimate never changes after the last
    request: None (never) unless it is already below. With aging, the first pseudo request at a
    multiple of P with k*R / (t' - t_(n-k+2)) below the threshold ends it (closed form below)."""
    threshold = fraction * spec.rate_after * BLOCKS_PER_REQUEST
    last = _tracked(requests, k).where(F.col("next_ts_us").isNull())
    if not aging:
        stale = F.when(F.col("heat") < threshold, F.lit(0.0))
    else:
        # k*R / (t' - t_age) < threshold  <=>  t' > t_age + k*R / threshold (in us)
        bound = F.floor(F.col("age_from_us") + F.col("m") * F.col("mean_blocks") * 1e6 / threshold).cast("long")
        first_pseudo = (idiv(F.greatest(bound, F.col("ts_us")), aging_period_us) + 1) * aging_period_us
        stale = F.when(F.col("heat") < threshold, F.lit(0.0)).otherwise((first_pseudo - F.col("ts_us")) / 1e6)
    values = last.select(stale.alias("_s"))
    if values.where(F.col("_s").isNull()).limit(1).count():
        return None
    return float(values.agg(F.avg("_s")).first()[0])


@dataclass(frozen=True)
class Tracked:
    """with_tracked_heat's columns as arrays, one entry per extent piece in (extent, ts_us, seq) order: the
    extent's first piece index (`start`), n, m, m R x 1e6 (`work`), heat (NaN: NULL), t_(n-m+2) (`age_from`,
    -1 for n = 1), whether a later piece of the extent follows (`has_next`)."""

    ext: np.ndarray
    ts: np.ndarray
    start: np.ndarray
    n: np.ndarray
    m: np.ndarray
    work: np.ndarray
    heat: np.ndarray
    age_from: np.ndarray
    has_next: np.ndarray


def tracked_arrays(requests: pa.Table, k: int) -> Tracked:
    """with_tracked_heat(split_at(requests, EXTENT_BYTES), k) of one device's requests, in numpy with the
    same floating-point operations in the same order (heat = (m x (sum / m)) x 1e6 / max(span, 1))."""

    col = {c: np.ascontiguousarray(requests.column(c).to_numpy(), np.int64)
           for c in ("ts_us", "seq", "offset_bytes", "size_bytes")}
    ext, ts, seq, blocks = extent_pieces(col["ts_us"], col["seq"], col["offset_bytes"], col["size_bytes"],
                                         EXTENT_BYTES)
    order = np.lexsort((seq, ts, ext))
    ext, ts, blocks = ext[order], ts[order], blocks[order]
    i = np.arange(len(ext))
    first = np.r_[True, ext[1:] != ext[:-1]] if len(ext) else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(first, i, 0))
    n = i - start + 1
    m = np.minimum(n, k)
    total = np.r_[0, np.cumsum(blocks)]
    sums = total[i + 1] - total[i + 1 - m]
    work = m * (sums / m) * 1e6
    span = ts - ts[i - m + 1]
    heat = np.where(n >= 2, work / np.maximum(span, 1), np.nan)
    age_from = np.where(n >= 2, ts[np.maximum(i - m + 2, 0)], -1)
    has_next = np.r_[~first[1:], False] if len(ext) else np.zeros(0, bool)
    return Tracked(ext, ts, start, n, m, work, heat, age_from, has_next)


def requests_to_reach_arrays(requests: pa.Table, *, k: int, spec: StepSpec = DEFAULT_SPEC,
                             fraction: float = 0.9) -> float | None:
    """requests_to_reach on an Arrow table (tracked_arrays; no Spark job)."""
    t = tracked_arrays(requests, k)
    target = fraction * spec.rate_after * BLOCKS_PER_REQUEST
    after = t.ts >= round(spec.change_s * 1e6)
    reached = after & (t.heat >= target)                       # NaN (no estimate) compares False, as NULL
    extents = np.unique(t.ext[after])
    first_n = {e: n for e, n in zip(t.ext[after][::-1], t.n[after][::-1], strict=True)}   # the smallest n
    reach_n = {e: n for e, n in zip(t.ext[reached][::-1], t.n[reached][::-1], strict=True)}
    counts = [int(reach_n[e]) - int(first_n[e]) + 1 for e in extents if e in reach_n]
    return float(np.sum(counts, dtype=np.float64) / len(counts)) if counts else None


def stale_seconds_arrays(requests: pa.Table, *, k: int, aging: bool, spec: StepSpec = DEFAULT_SPEC,
                         aging_period_us: int = EVAL_AGING_PERIOD_US, fraction: float = 0.1) -> float | None:
    """stale_seconds on an Arrow table (tracked_arrays; no Spark job)."""
    t = tracked_arrays(requests, k)
    threshold = fraction * spec.rate_after * BLOCKS_PER_REQUEST
    last = ~t.has_next
    heat, ts = t.heat[last], t.ts[last]
    below = heat < threshold                                   # NaN: not below, as NULL
    if not aging:
        return 0.0 if below.all() and len(heat) else None
    if np.isnan(heat).any():                                   # one request only: no estimate, no bound
        return None
    bound = np.floor(t.age_from[last] + t.work[last] / threshold).astype(np.int64)
    first_pseudo = (np.maximum(bound, ts) // aging_period_us + 1) * aging_period_us
    stale = np.where(below, 0.0, (first_pseudo - ts) / 1e6)
    return float(stale.mean()) if len(stale) else None


def relative_errors(tracking: DataFrame) -> dict[str, float | int | None]:
    """Mean and median |heat - true| / true over heat_tracking rows with an estimate and true > 0."""
    rows = tracking.where(F.col("heat").isNotNull() & (F.col("true_heat") > 0)).select(
        (F.abs(F.col("heat") - F.col("true_heat")) / F.col("true_heat")).alias("_e"))
    agg = rows.agg(F.count(F.lit(1)).alias("n"), F.avg("_e").alias("mean"),
                   F.percentile("_e", 0.5).alias("median")).first()
    return {"checkpoints": int(agg["n"]), "mean": agg["mean"], "median": agg["median"]}


def relative_errors_by_k(tracking: DataFrame) -> dict[int, dict[str, float | int | None]]:
    """relative_errors of every k in the rows, in one job: k -> {checkpoints, mean, median}."""
    rows = tracking.where(F.col("heat").isNotNull() & (F.col("true_heat") > 0)).select(
        "k", (F.abs(F.col("heat") - F.col("true_heat")) / F.col("true_heat")).alias("_e"))
    agg = rows.groupBy("k").agg(F.count(F.lit(1)).alias("n"), F.avg("_e").alias("mean"),
                                F.percentile("_e", 0.5).alias("median")).collect()
    return {int(r["k"]): {"checkpoints": int(r["n"]), "mean": r["mean"], "median": r["median"]} for r in agg}


def accuracy(rows: list[dict[str, Any]]) -> tuple[bool | None, str]:
    """The real trace's tracking accuracy in plain words, from tracking_eval rows: (accurate, verdict); accurate
    is None when no k has a measured error. Not one of the paper's claims (paper_claims judges those)."""
    by_k = [r for r in sorted(rows, key=lambda r: r["k"]) if r["mean_relative_error"] is not None]
    if not by_k:
        return None, "not measured: no checkpoint with an estimate and a true heat above 0"
    errors = [r["mean_relative_error"] for r in by_k]
    per_k = ", ".join(f"k={r['k']}: {r['mean_relative_error']:.0%}" for r in by_k)
    if max(errors) <= ACCURATE_WITHIN:
        return True, f"accurate within {max(errors):.0%} (mean relative error {per_k})"
    return False, (f"inaccurate: estimates off by {min(errors):.1f}x to {max(errors):.1f}x the true heat on average "
                   f"(mean relative error {per_k})")


class TrackingClaim(NamedTuple):
    """One of FIVE section 3.3's claims judged on tracking_eval rows; reason: why it does not hold ("" if it does)."""

    claim: str
    holds: bool | None
    ours: str
    reason: str


def judge_claims(rows: list[dict[str, Any]]) -> list[TrackingClaim]:
    """FIVE section 3.3's claims checked against tracking_eval rows, each failing one with the k values that fail
    it and by how much."""
    by_k = sorted(rows, key=lambda r: r["k"])
    measured = [r for r in by_k if r["mean_relative_error"] is not None]
    claims: list[TrackingClaim] = []
    if measured:
        errors = [r["mean_relative_error"] for r in measured]
        spread = max(errors) / min(errors) if min(errors) > 0 else float("inf")
        worst = max(measured, key=lambda r: r["mean_relative_error"])
        best = min(measured, key=lambda r: r["mean_relative_error"])
        claims.append(TrackingClaim(
            "estimate fairly insensitive to k (mean relative error within a factor 1.5 across k)", spread <= 1.5,
            "mean relative error " + ", ".join(f"k={r['k']}: {r['mean_relative_error']:.3f}" for r in measured)
            + f" (max/min {spread:.2f})",
            "" if spread <= 1.5 else f"k={worst['k']} errs {spread:.2f}x as much as k={best['k']}"))
    reach = [(r["k"], r["requests_to_90pct"]) for r in by_k]
    # The paper: "fully reflected in the heat estimate after k requests". With Poisson arrivals the
    # estimate over k fresh requests is itself noisy, so "about k" is taken as a mean within 1.25 k.
    slow = [(k, v) for k, v in reach if v is None or v > 1.25 * k]
    claims.append(TrackingClaim(
        "quick to follow a rise (90% of a 10x step after about k requests: mean <= 1.25 k)", not slow,
        ", ".join(f"k={k}: {'never' if v is None else f'{v:.1f}'} requests" for k, v in reach),
        "; ".join(f"k={k}: {'never reached' if v is None else f'{v / k:.2f} k requests'}" for k, v in slow)))
    stale = [(r["k"], r["stale_s_aging"], r["stale_s_no_aging"]) for r in by_k]
    wrong = [(k, a, n) for k, a, n in stale if a is None or n is not None]
    claims.append(TrackingClaim(
        "aging needed for a sudden drop (stale forever without, bounded with)", not wrong,
        ", ".join(f"k={k}: {'never' if a is None else f'{a:.1f} s'} with aging, "
                  f"{'never' if n is None else f'{n:.1f} s'} without" for k, a, n in stale),
        "; ".join(f"k={k}: " + ("stale forever with aging" if a is None else f"cold after {n:.1f} s without aging")
                  for k, a, n in wrong)))
    return claims


def paper_claims(rows: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """judge_claims as (claim, holds, evidence) with the reason appended to the evidence of a claim that does not
    hold ("...; does not hold: <reason>")."""
    return [(c.claim, c.holds, c.ours + (f"; does not hold: {c.reason}" if c.reason else ""))
            for c in judge_claims(rows)]


def report_claims(rows: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """The report's list: the accuracy line first (ACCURACY_LABEL, accurate, verdict), then paper_claims."""
    accurate, verdict = accuracy(rows)
    return [(ACCURACY_LABEL, accurate, verdict), *paper_claims(rows)]

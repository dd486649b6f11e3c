"""The HTML trace report: a summary first, then figures (matplotlib, PNG embedded as base64) and tables, all from
small, already-aggregated inputs, written as one self-contained page (write_report: a local directory or an
object-store prefix). No Spark here: jobs/heat_report.py gathers the inputs.

    page, figures = render(inputs)        # inputs: ReportInputs
    write_report("/tmp/report", page, figures)
"""
from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from matplotlib.colors import LogNorm
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from blockheat.libs.io import storage
from blockheat.schemas import policy_scores as PS

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
LAYOUTS = ("as-traced", "striped", "random")
#: Distributions that keep reads and writes apart; the others hold all of a device's requests under ALL_OPS.
ALL_OPS = "*"
#: Most devices drawn in a distribution panel (the busiest); the page says when some are left out.
MAX_CDF_DEVICES = 8

#: One distribution: [(value at p, p)], p the cumulative share of requests.
Points = list[tuple[float, float]]


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    note: str = ""


@dataclass
class ReportInputs:
    """Everything the page shows; each list is small (binned, per window, per percentile or per policy).

    trace: the `traces` row. heat_map: a table (device, time_bin_us, addr_bin_bytes, heat in blocks/s) over bins of
    heat_map_bins (time us, address bytes). disk_heat: `disk_heat` rows (layout, layout_params, window_start_us,
    window_us, disk, requests, heat, max_over_mean), the whole trace (window_us 0) and per window. rates: per device
    and profile window (device, window_start_us, requests, bytes_read, bytes_written) of rate_window_us. cdfs: per
    metric (size_bytes, response_us, interarrival_us), per (device, "R" | "W" | ALL_OPS), the percentile points.
    profile: `trace_profile` whole-trace rows (scope, device, metric, value). hottest_extents: whole-trace
    `extent_heat` rows, hottest first. scores: `policy_scores` rows of one window; plan: the latest `reorg_plans`
    row (any columns it has) and plan_steps its steps summed per (step_type, source_device, dest_device).
    """

    trace: dict[str, Any]
    heat_map: pa.Table
    heat_map_bins: tuple[int, int]
    disk_heat: list[dict[str, Any]]
    rates: list[dict[str, Any]]
    rate_window_us: int
    cdfs: dict[str, dict[tuple[str, str], Points]]
    tracking: list[dict[str, Any]]
    claims: list[tuple[str, bool | None, str]]
    profile: list[dict[str, Any]]
    extent_bytes: int = 1 << 20
    hottest_extents: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    plan_steps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- numbers as people read them

_BINARY = ("KiB", "MiB", "GiB", "TiB", "PiB")


def significant(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits in fixed notation with thousands separators (53.6, 0.0353, 1,235)."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    if abs(x) < 1e-4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def human_bytes(n: float) -> str:
    """Bytes in binary units: 512 B, 8 KiB, 321 MiB, 1.5 GiB."""
    if abs(n) < 1024:
        return f"{n:,.0f} B"
    value, unit = float(n), "B"
    for unit in _BINARY:  # noqa: B007 - the unit the loop stops at is the one printed
        value /= 1024
        if abs(value) < 1024:
            break
    return f"{significant(value)} {unit}"


def human_us(us: float) -> str:
    """A duration given in microseconds, in the unit that reads best: 181 µs, 23.4 ms, 4.2 s, 12.5 min, 3.1 h,
    6.98 days."""
    a = abs(us)
    for limit, scale, unit in ((1e3, 1.0, "µs"), (1e6, 1e3, "ms"), (60e6, 1e6, "s"), (3600e6, 60e6, "min"),
                               (86_400e6, 3600e6, "h")):
        if a < limit:
            return f"{significant(us / scale)} {unit}"
    return f"{significant(us / 86_400e6)} days"


def human_share(x: float) -> str:
    """A fraction as a percentage: 0.2929 -> 29.3%."""
    return f"{significant(100 * x)}%"


def _number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() and abs(x) >= 1 else significant(x)


#: How a value of each kind reads (the kinds of PROFILE_GROUPS and the tables).
FORMATS: dict[str, Callable[[float], str]] = {
    "count": lambda x: f"{x:,.0f}", "bytes": human_bytes, "us": human_us, "s": lambda x: human_us(x * 1e6),
    "ms": lambda x: human_us(x * 1e3), "share": human_share, "num": _number,
    "rate": lambda x: f"{significant(x)} /s", "mb": lambda x: f"{significant(x)} MB", "text": str,
}


def kind_of(name: str) -> str:
    """The kind of a column or metric the report has no label for, from its name's unit."""
    for pattern, kind in ((r"(^|_)bytes($|_)", "bytes"), (r"(^|_)us($|_)", "us"), (r"(^|_)ms($|_)", "ms"),
                          (r"(^|_)s$|_seconds?($|_)", "s"), (r"share|fraction|improvement|utilization", "share"),
                          (r"(^|_)mb($|_)", "mb"), (r"^(n_|count)|_count$|steps|moves|extents", "count")):
        if re.search(pattern, name):
            return kind
    return "num"


def show(value: Any, kind: str = "num") -> str:
    """One cell's text: None as a dash, numbers by `kind` (FORMATS), anything else as text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isinf(value):
            return "saturated" if value > 0 else "-inf"
        return FORMATS[kind](float(value))
    return str(value)


# ---------------------------------------------------------------- time: the trace's real days

@dataclass(frozen=True)
class Start:
    """The trace's absolute start as a naive wall-clock time and where that clock is (None: not known)."""

    at: datetime | None
    clock: str


def trace_start(trace: dict[str, Any]) -> Start:
    """The start as the source states it (its local wall clock, so days begin at the traced site's midnight), else
    start_time_utc, else unknown."""
    source = trace.get("start_time_source") or ""
    found = re.match(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s*(.*)", source)
    if found:
        return Start(datetime.fromisoformat(f"{found[1]}T{found[2]}"), found[3].strip() or "the source's clock")
    utc = trace.get("start_time_utc")
    if isinstance(utc, datetime):
        return Start(utc.replace(tzinfo=None), "UTC")
    return Start(None, "")


def day_marks(trace: dict[str, Any]) -> list[tuple[float, datetime]]:
    """The trace's days: (hours since the trace start, the day's midnight) for the day the trace starts in (at
    0 hours or less) and every midnight before the trace ends; [] when the start is not known."""
    start = trace_start(trace).at
    if start is None:
        return []
    first = datetime(start.year, start.month, start.day)
    end = start + timedelta(microseconds=trace["span_us"])
    marks, day = [], first
    while day <= end:
        marks.append(((day - start) / timedelta(hours=1), day))
        day += timedelta(days=1)
    return marks


def _time_axis(ax: Any, trace: dict[str, Any], *, labels: bool = True) -> None:
    """Hours since the trace start on x, a dotted line at each midnight and the weekday and date over each day."""
    span_h = trace["span_us"] / HOUR_US
    ax.set_xlim(0, max(span_h, 1e-6))
    marks = day_marks(trace)
    for i, (hours, day) in enumerate(marks):
        if hours > 0:
            ax.axvline(hours, color="#777", lw=0.8, ls=":", zorder=0)
        if labels:
            following = marks[i + 1][0] if i + 1 < len(marks) else span_h
            middle = (max(hours, 0.0) + min(following, span_h)) / 2
            if following - max(hours, 0.0) >= span_h / 40:   # no label on a sliver of a day
                ax.text(middle, 1.01, day.strftime("%a %d %b"), transform=ax.get_xaxis_transform(), ha="center",
                        va="bottom", fontsize="small")
    if span_h >= 48:
        ax.xaxis.set_major_locator(FixedLocator([h for h in np.arange(0, span_h + 1, 24.0 if span_h > 96 else 12.0)]))


def _panel_title(ax: Any, title: str) -> None:
    """A panel's title inside its top left corner (the first panel's top edge carries the day names)."""
    ax.text(0.005, 0.97, title, transform=ax.transAxes, va="top", ha="left", fontsize="medium", zorder=5,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5})


def _time_label(trace: dict[str, Any]) -> str:
    start = trace_start(trace)
    if start.at is None:
        return "time since trace start (hours; absolute start not recorded)"
    return f"time since trace start (hours); start {start.at:%a %d %b %Y %H:%M:%S}, {start.clock}"


# ---------------------------------------------------------------- the summary

@dataclass(frozen=True)
class Item:
    """One line of the summary: a key the tests and scripts find it by, a label, the value (as stored: a number
    or text) and how it reads."""

    key: str
    label: str
    value: Any
    text: str


def _profile_value(rows: Sequence[dict[str, Any]], metric: str, scope: str = "trace", device: str = "*") -> Any:
    for r in rows:
        if r["metric"] == metric and r["scope"] == scope and (scope == "trace" or r["device"] == device):
            return r["value"]
    return None


def busiest_window(rates: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The profile window with the most requests, all devices together: window_start_us, requests, bytes."""
    total: dict[int, list[int]] = {}
    for r in rates:
        cell = total.setdefault(r["window_start_us"], [0, 0])
        cell[0] += int(r["requests"] or 0)
        cell[1] += int((r["bytes_read"] or 0) + (r["bytes_written"] or 0))
    if not total:
        return None
    start, (requests, nbytes) = max(total.items(), key=lambda kv: (kv[1][0], -kv[0]))
    return {"window_start_us": start, "requests": requests, "bytes": nbytes,
            "peak_bytes": max(b for _, b in total.values())}


def _at(trace: dict[str, Any], offset_us: int) -> str:
    start = trace_start(trace).at
    when = f"{offset_us / HOUR_US:,.0f} h in"
    return f"{(start + timedelta(microseconds=offset_us)):%a %d %b %H:%M}, {when}" if start else when


def best_score(scores: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The scorecard's best-ranked policy that is a layout to plan (not the random reference, not as-traced)."""
    ranked = sorted((r for r in scores if r.get("plannable", True) and r["policy_id"] != "as-traced"),
                    key=lambda r: r["rank"])
    return ranked[0] if ranked else None


def summary(inputs: ReportInputs) -> list[Item]:
    """The summary's lines, from the same inputs as the sections below it."""
    t = inputs.trace
    requests, span_s = t["records_accepted"], t["span_us"] / 1e6
    total_bytes = t["bytes_read"] + t["bytes_written"]
    start = trace_start(t)
    items = [
        Item("requests", "Requests", requests, f"{requests:,} on {len(t['devices'])} devices "
             f"({', '.join(t['devices'])}); {t['records_rejected']:,} rejected"),
        Item("span_us", "Span", t["span_us"], human_us(t["span_us"]) + (
            f", from {start.at:%a %d %b %Y %H:%M:%S}, {start.clock}" if start.at
            else ", absolute start not recorded")),
        Item("read_share_requests", "Read share", t["reads"] / requests if requests else None,
             f"{human_share(t['reads'] / requests) if requests else '—'} of requests, "
             f"{human_share(t['bytes_read'] / total_bytes) if total_bytes else '—'} of bytes "
             f"({human_bytes(t['bytes_read'])} read, {human_bytes(t['bytes_written'])} written)"),
    ]
    iops = requests / span_s if span_s else None
    mbps = total_bytes / span_s / 1e6 if span_s else None
    busiest = busiest_window(inputs.rates)
    window_s = inputs.rate_window_us / 1e6
    peak_to_mean = _profile_value(inputs.profile, "peak_to_mean_1s")
    peak_second = round(peak_to_mean * requests / max(math.ceil(t["span_us"] / 1e6), 1)) if peak_to_mean else None
    items.append(Item("iops_mean", "IOPS", iops, f"mean {show(iops)}" + (
        f"; busiest {human_us(inputs.rate_window_us)}: {show(busiest['requests'] / window_s)} "
        f"from {_at(t, busiest['window_start_us'])}" if busiest else "") + (
        f"; busiest second: {peak_second:,} requests" if peak_second is not None else "")))
    if busiest:
        items.append(Item("iops_peak_window", f"IOPS, busiest {human_us(inputs.rate_window_us)}",
                          busiest["requests"] / window_s, show(busiest["requests"] / window_s)))
    if peak_second is not None:
        items.append(Item("iops_peak_second", "IOPS, busiest second", peak_second, f"{peak_second:,}"))
    items.append(Item("mbps_mean", "MB/s", mbps, f"mean {_throughput(mbps)}" + (
        f"; busiest {human_us(inputs.rate_window_us)}: {_throughput(busiest['peak_bytes'] / window_s / 1e6)}"
        if busiest else "")))
    if busiest:
        items.append(Item("mbps_peak_window", f"MB/s, busiest {human_us(inputs.rate_window_us)}",
                          busiest["peak_bytes"] / window_s / 1e6, _throughput(busiest["peak_bytes"] / window_s / 1e6)))
    if inputs.hottest_extents:
        hot = inputs.hottest_extents[0]
        items.append(Item("hottest_extent_heat", "Hottest extents", hot["heat"], "; ".join(
            f"device {e['device']} {human_bytes(e['extent_id'] * inputs.extent_bytes)} to "
            f"{human_bytes((e['extent_id'] + 1) * inputs.extent_bytes)}: {show(e['heat'])} blocks/s, "
            f"{e['requests']:,} requests" for e in inputs.hottest_extents[:3])))
    whole = [r for r in inputs.disk_heat if r["window_us"] == 0]
    traced = sorted((r for r in whole if r["layout"] == "as-traced"), key=lambda r: -(r["heat"] or 0.0))
    if traced:
        mean = sum(r["heat"] or 0.0 for r in traced) / len(traced)
        items.append(Item("hottest_disk", "Hottest disks", traced[0]["disk"], "; ".join(
            f"{r['disk']}: {show(r['heat'])} blocks/s ({human_share((r['heat'] or 0.0) / mean / len(traced))} of "
            f"the heat)" if mean else f"{r['disk']}: 0" for r in traced)))
    imbalance = {r["layout"]: r["max_over_mean"] for r in whole}
    if "as-traced" in imbalance:
        items.append(Item("imbalance", "Imbalance (hottest / mean disk heat)", imbalance["as-traced"],
                          "; ".join(f"{LAYOUT_NAMES[k]}: {show(imbalance[k])}" for k in LAYOUTS if k in imbalance)
                          + " (1 = even)"))
    best = best_score(inputs.scores)
    if best is None:
        items.append(Item("best_policy", "Best policy", None, f"not scored (blockheat score {t['trace_id']})"))
    else:
        text = (f"{best['policy_id']} (window {best['window_id']}): mean response "
                f"{show(best['mean_response_ms'], 'ms')} against "
                f"{show(best['baseline_mean_response_ms'], 'ms')} as traced, "
                f"gain {show(best['improvement_mean'], 'share')}")
        plan = inputs.plan
        if plan and plan["policy_id"] == best["policy_id"]:
            text += (f"; its latest plan ({plan['status']}): {plan['n_steps']:,} steps moving "
                     f"{human_bytes(plan['bytes_to_move'])}, predicted gain {show(plan['improvement_mean'], 'share')}")
        elif plan:
            text += f"; the latest plan is for {plan['policy_id']} ({_verdict(plan)})"
        else:
            text += f"; no plan yet (blockheat plan {t['trace_id']} --policy best)"
        items.append(Item("best_policy", "Best policy", best["policy_id"], text))
    return items


# ---------------------------------------------------------------- figures

def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def rates_figure(rates: Sequence[dict[str, Any]], window_us: int, trace: dict[str, Any]) -> Figure:
    """IOPS and MB/s per device over time (one point per profile window), with the trace's days marked."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.6), sharex=True)
    window_s = window_us / 1e6
    for device in sorted({r["device"] for r in rates}):
        mine = sorted((r for r in rates if r["device"] == device), key=lambda r: r["window_start_us"])
        x = [r["window_start_us"] / HOUR_US for r in mine] + [(mine[-1]["window_start_us"] + window_us) / HOUR_US]
        iops = [(r["requests"] or 0) / window_s for r in mine]
        mbps = [((r["bytes_read"] or 0) + (r["bytes_written"] or 0)) / window_s / 1e6 for r in mine]
        top.step(x, [*iops, iops[-1]], where="post", lw=1.0, label=f"device {device}")
        bottom.step(x, [*mbps, mbps[-1]], where="post", lw=1.0, label=f"device {device}")
    top.set_ylabel(f"IOPS (requests / s, {human_us(window_us)} mean)")
    bottom.set_ylabel(f"MB/s ({human_us(window_us)} mean)")
    for ax in (top, bottom):
        _time_axis(ax, trace, labels=ax is top)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(loc="upper right", fontsize="small")
    bottom.set_xlabel(_time_label(trace))
    return Figure("load_over_time", "Load over time: IOPS and MB/s per device", _png(fig),
                  f"Each point is a {human_us(window_us)} window's mean rate; dotted lines mark midnight "
                  f"({trace_start(trace).clock or 'absolute start not recorded'}).")


def _kib_axis(ax: Any, lo: float, hi: float) -> None:
    ax.set_xscale("log", base=2)
    ticks = [2.0 ** k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if len(ticks) > 12:
        for label in ax.get_xticklabels():
            label.set_rotation(60)


def _devices_by_requests(cdfs: dict[tuple[str, str], Points], counts: dict[str, float]) -> list[str]:
    devices = sorted({d for d, _ in cdfs}, key=lambda d: (-counts.get(d, 0.0), d))
    return devices[:MAX_CDF_DEVICES]


def cdf_figure(name: str, cdfs: dict[tuple[str, str], Points], counts: dict[tuple[str, str], float], *,
               per_op: bool) -> Figure:
    """Cumulative share of requests against the value, one line per device; reads and writes in two panels when
    per_op. name: "response_us" (ms), "size_bytes" (KiB ticks) or "interarrival_us" (ms)."""
    ops = [("R", "reads"), ("W", "writes")] if per_op else [(ALL_OPS, "all requests")]
    fig, axes = plt.subplots(1, len(ops), figsize=(5.2 * len(ops), 3.6), squeeze=False, sharey=True)
    per_device = {d: sum(v for (dd, _), v in counts.items() if dd == d) for d, _ in cdfs}
    devices = _devices_by_requests(cdfs, per_device)
    scale, xlabel = {"response_us": (1e-3, "response time (ms), log scale"),
                     "size_bytes": (1 / 1024, "request size (KiB), log scale"),
                     "interarrival_us": (1e-3, "interarrival time (ms), log scale")}[name]
    floor = {"size_bytes": 0.5, "response_us": 1e-3, "interarrival_us": 1e-3}[name]
    for ax, (op, what) in zip(axes[0], ops, strict=True):
        lo, hi, drawn = math.inf, 0.0, 0
        for device in devices:
            pts = cdfs.get((device, op))
            if not pts:
                continue
            xs = [max(v * scale, floor) for v, _ in pts]
            lo, hi = min(lo, xs[0]), max(hi, xs[-1])
            n = counts.get((device, op))
            ax.step(xs, [c for _, c in pts], where="post", lw=1.2,
                    label=f"device {device}" + (f" ({n:,.0f})" if n is not None else ""))
            drawn += 1
        if name == "size_bytes" and drawn:
            _kib_axis(ax, lo, max(hi, lo * 2))
        else:
            ax.set_xscale("log")
        ax.set_title(what)
        ax.set_xlabel(xlabel)
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3, which="both")
        if drawn:
            ax.legend(loc="lower right", fontsize="small")
        else:
            ax.text(0.5, 0.5, f"no {what}", transform=ax.transAxes, ha="center")
    axes[0, 0].set_ylabel("cumulative share of requests")
    left_out = len({d for d, _ in cdfs}) - len(devices)
    title = {"response_us": "Response time per device, reads and writes", "size_bytes":
             "Request size per device, reads and writes", "interarrival_us": "Interarrival time per device"}[name]
    note = (f"The {len(devices)} busiest devices are drawn; {left_out} more are left out. " if left_out else "")
    note += "Legend: requests per device." if counts else ""
    return Figure(f"{name.removesuffix('_us').removesuffix('_bytes')}_cdf", title, _png(fig), note)


#: How the page names the layouts of `disk_heat`.
LAYOUT_NAMES = {"as-traced": "as traced", "striped": "striped", "random": "random"}


def layout_title(layout: str, params: str, extent_bytes: int) -> str:
    """A layout and its parameters in words: "striped: 64 KiB stripe unit over 2 disks"."""
    p = dict(kv.split("=", 1) for kv in params.split(",") if "=" in kv)
    if layout == "striped" and "unit_bytes" in p:
        return f"striped: {human_bytes(int(p['unit_bytes']))} stripe unit over {p.get('width', '?')} disks"
    if layout == "random" and "disks" in p:
        return f"random: each request on a disk picked by a hash, {p['disks']} disks (seed {p.get('seed', '?')})"
    if layout == "as-traced":
        return "as traced: each device its own disk"
    return f"{layout} ({params})" if params else layout


def disk_heat_figure(rows: Sequence[dict[str, Any]], trace: dict[str, Any], extent_bytes: int) -> Figure:
    """Heat per disk over time, one panel per layout (as traced, striped, random), and a last panel with each
    layout's hottest / mean disk heat. Disks are drawn widest first, so a disk under an equal one still shows."""
    windowed = [r for r in rows if r["window_us"] > 0]
    layouts = [k for k in LAYOUTS if any(r["layout"] == k for r in windowed)]
    layouts += sorted({r["layout"] for r in windowed} - set(layouts))
    fig, axes = plt.subplots(len(layouts) + 1, 1, figsize=(10, 2.5 * (len(layouts) + 1)), squeeze=False, sharex=True)
    whole = {r["layout"]: r["max_over_mean"] for r in rows if r["window_us"] == 0}
    for ax, layout in zip(axes[:-1, 0], layouts, strict=True):
        mine = [r for r in windowed if r["layout"] == layout]
        disks = sorted({r["disk"] for r in mine}, key=lambda d: (len(d), d))
        width = mine[0]["window_us"]
        for i, disk in enumerate(disks):
            pts = sorted((r["window_start_us"] / HOUR_US, r["heat"] or 0.0) for r in mine if r["disk"] == disk)
            xs = [p[0] for p in pts] + [pts[-1][0] + width / HOUR_US]
            ys = [p[1] for p in pts] + [pts[-1][1]]
            ax.step(xs, ys, where="post", lw=max(3.2 - 1.1 * i, 0.8), alpha=0.85, label=f"disk {disk}")
        _panel_title(ax, layout_title(layout, mine[0]["layout_params"], extent_bytes))
        ax.set_ylabel("heat (blocks / s)")
        ax.set_yscale("symlog", linthresh=0.1)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize="small", ncol=min(len(disks), 4))
        _time_axis(ax, trace, labels=ax is axes[0, 0])
    ax = axes[-1, 0]
    for layout in layouts:
        pts = sorted({(r["window_start_us"] / HOUR_US, r["max_over_mean"]) for r in windowed
                      if r["layout"] == layout and r["max_over_mean"] is not None})
        whole_text = f", whole trace {show(whole[layout])}" if whole.get(layout) is not None else ""
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", ms=3,
                label=f"{LAYOUT_NAMES.get(layout, layout)}{whole_text}")
    ax.axhline(1.0, color="#444", lw=0.8)
    _panel_title(ax, "imbalance: hottest / mean disk heat per window (1 = even)")
    ax.set_ylabel("hottest / mean")
    ax.legend(loc="upper right", fontsize="small")
    _time_axis(ax, trace, labels=False)
    ax.set_xlabel(_time_label(trace))
    return Figure("disk_heat", "Disk heat per layout (as traced, striped, random) and imbalance", _png(fig),
                  "Heat = 512-byte blocks accessed per second, per window; y on a log scale above 0.1. "
                  "Windows without any access are not drawn in the imbalance panel.")


def heat_map_figure(rows: pa.Table, bins: tuple[int, int], trace: dict[str, Any], extent_bytes: int) -> Figure:
    """Address (MiB) against time (hours), colour = heat in blocks/s on a log scale, one panel per device."""
    time_bin, addr_bin = bins
    encoded = pc.dictionary_encode(rows.column("device")).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    names = encoded.dictionary.to_pylist()
    devices = sorted(names, key=lambda d: (len(d), d))
    heat = rows.column("heat").to_numpy(zero_copy_only=False).astype(np.float64)      # a null heat: nan, not drawn
    t_all = rows.column("time_bin_us").to_numpy(zero_copy_only=False) // time_bin
    a_all = rows.column("addr_bin_bytes").to_numpy(zero_copy_only=False) // addr_bin
    fig, axes = plt.subplots(max(1, len(devices)), 1, figsize=(10, 3.2 * max(1, len(devices))), squeeze=False)
    positive = heat[heat > 0]
    norm = LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size else None
    image = None
    span_h = trace["span_us"] / HOUR_US
    for ax, device in zip(axes[:, 0], devices, strict=True):
        mine = codes == names.index(device)
        t, a = t_all[mine], a_all[mine]
        grid = np.full((int(a.max()) + 1, max(math.ceil(trace["span_us"] / time_bin), int(t.max()) + 1)), np.nan)
        grid[a, t] = heat[mine]
        image = ax.imshow(grid, aspect="auto", origin="lower", norm=norm, cmap="inferno", interpolation="nearest",
                          extent=(0, grid.shape[1] * time_bin / HOUR_US, 0, grid.shape[0] * addr_bin / 2**20))
        _panel_title(ax, f"device {device}")
        ax.set_ylabel("address (MiB)")
        _time_axis(ax, trace, labels=ax is axes[0, 0])
        ax.set_xlim(0, max(span_h, time_bin / HOUR_US))
    axes[-1, 0].set_xlabel(_time_label(trace))
    if image is not None:
        fig.colorbar(image, ax=axes[:, 0].tolist(), label="heat (512-byte blocks / s, log scale)")
    size = "the extent size" if addr_bin == extent_bytes else f"{addr_bin // extent_bytes} extents"
    return Figure("extent_heat_map", "Extent heat over time", _png(fig),
                  f"Bins: {human_us(time_bin)} x {human_bytes(addr_bin)} ({size}); white = no access.")


# ---------------------------------------------------------------- tables

_NUMERIC = re.compile(r"^[-+]?[\d.,]+(\s|%|/|$)|^—$")


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str], kinds: dict[str, str] | None = None,
           cls: str = "") -> str:
    kinds = kinds or {}
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)

    def cell(text: str) -> str:   # words to the left, numbers to the right
        left = "" if _NUMERIC.match(text) else " class='t'"
        return f"<td{left}>{html.escape(text)}</td>"
    body = "".join("<tr>" + "".join(cell(show(r.get(c), kinds.get(c, "num"))) for c in columns) + "</tr>"
                   for r in rows)
    return f"<table{f' class={cls!r}' if cls else ''}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def profile_table(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """trace_profile rows (scope, device, metric, value) -> one row per metric with a column per
    scope ("trace", then "device <name>"), and the column names."""
    scopes = sorted({(r["scope"], r["device"]) for r in rows}, key=lambda s: (s[0] != "trace", s[1]))
    names = ["trace" if s == "trace" else f"device {d}" for s, d in scopes]
    by_metric: dict[str, dict[str, Any]] = {}
    for r in rows:
        key = "trace" if r["scope"] == "trace" else f"device {r['device']}"
        by_metric.setdefault(r["metric"], {"metric": r["metric"]})[key] = r["value"]
    return sorted(by_metric.values(), key=lambda d: d["metric"]), ["metric", *names]


def _stats(prefix: str, what: str, kind: str) -> list[tuple[str, str, str]]:
    return [(f"{prefix}_mean", f"{what}, mean", kind), (f"{prefix}_p10", f"{what}, 10th percentile", kind),
            (f"{prefix}_p50", f"{what}, median", kind), (f"{prefix}_p90", f"{what}, 90th percentile", kind),
            (f"{prefix}_p99", f"{what}, 99th percentile", kind), (f"{prefix}_max", f"{what}, largest", kind)]


def _idle(label: str) -> list[tuple[str, str, str]]:
    what = f"idle period longer than {label}"
    return [(f"idle_{label}_count", f"idle periods longer than {label}", "count"),
            (f"idle_{label}_total_s", f"time in idle periods longer than {label}", "s"),
            *(s for s in _stats(f"idle_{label}_us", what, "us") if s[0].endswith(("_mean", "_p50", "_p90", "_max")))]


#: The profile's groups: (title, [(metric, label, kind)]). Metrics in no group are shown under "Other".
PROFILE_GROUPS: tuple[tuple[str, list[tuple[str, str, str]]], ...] = (
    ("Rates and volume", [
        ("requests", "requests", "count"), ("reads", "reads", "count"), ("writes", "writes", "count"),
        ("read_share_requests", "reads, share of requests", "share"),
        ("read_share_bytes", "reads, share of bytes", "share"), ("bytes_read", "bytes read", "bytes"),
        ("bytes_written", "bytes written", "bytes"), ("duration_s", "duration", "s"),
        ("rate_per_s", "mean request rate (IOPS)", "rate")]),
    ("Request sizes", _stats("size_bytes", "request size", "bytes")),
    ("Sequentiality and seeks", [
        ("seq_share", "sequential requests (start where the previous one ended)", "share"),
        ("runs", "sequential runs", "count"), *_stats("run_length", "run length (requests)", "num"),
        *_stats("seek_bytes", "seek distance", "bytes")]),
    ("Interarrival and idle periods", [
        *_stats("interarrival_us", "interarrival time", "us"),
        ("interarrival_cv", "interarrival time, coefficient of variation", "num"),
        *_idle("10ms"), *_idle("1s"), *_idle("1min")]),
    ("Burstiness", [
        ("peak_to_mean_1s", "busiest second / mean second (requests)", "num"),
        ("peak_to_mean_1min", "busiest minute / mean minute (requests)", "num"),
        ("dispersion_1s", "index of dispersion of requests per second (variance / mean)", "num"),
        ("dispersion_1min", "index of dispersion of requests per minute (variance / mean)", "num")]),
    ("Footprint and reuse", [
        ("footprint_bytes", "footprint (distinct 4 KiB blocks touched)", "bytes"),
        ("footprint_blocks_4k", "distinct 4 KiB blocks touched", "count"),
        ("reuse_share", "accesses to a block touched before", "share"),
        *_stats("reuse_time_us", "time since the block's previous access", "us")]),
    ("Skew", [
        ("extents_touched", "extents touched", "count"),
        ("skew_top1pct_share", "accesses to the hottest 1% of extents", "share"),
        ("skew_top10pct_share", "accesses to the hottest 10% of extents", "share"),
        ("skew_top20pct_share", "accesses to the hottest 20% of extents", "share"),
        ("skew_theta", "skew exponent θ (FIVE eq. 26: share of accesses = share of extents ^ θ)", "num"),
        ("skew_x_pct", "X/Y rule: X% of accesses go to Y% of extents", "rule")]),
)


#: Metrics the page leaves out (`blockheat profile` lists every metric): skew_y_pct is in the X/Y rule's cell.
PROFILE_LEFT_OUT = frozenset({"skew_y_pct", *(f"idle_{label}_us_{p}" for label in ("10ms", "1s", "1min")
                                              for p in ("p10", "p99"))})


def profile_kind(metric: str) -> str:
    """The kind of a trace_profile metric: its PROFILE_GROUPS kind, else kind_of its name (read_share_bytes is a
    share, not bytes)."""
    return _PROFILE_KINDS.get(metric) or kind_of(metric)


_PROFILE_KINDS = {m: kind for _, metrics in PROFILE_GROUPS for m, _, kind in metrics if kind != "rule"}


def profile_groups(rows: Sequence[dict[str, Any]], *,
                   every_metric: bool = False) -> list[tuple[str, list[dict[str, str]], list[str]]]:
    """trace_profile whole-trace rows -> per group (title, rows of readable text, columns): one row per metric with
    its label and a column per scope ("trace", then each device); groups and metrics in PROFILE_GROUPS order.
    every_metric: PROFILE_LEFT_OUT's metrics too, under "Other" (the page leaves them out)."""
    table, columns = profile_table(rows)
    by_metric = {r["metric"]: r for r in table}
    scopes = columns[1:]
    known = {m for _, metrics in PROFILE_GROUPS for m, _, _ in metrics} | (set() if every_metric else PROFILE_LEFT_OUT)
    groups = [*PROFILE_GROUPS, ("Other", [(m, m, kind_of(m)) for m in sorted(by_metric) if m not in known])]
    out = []
    for title, metrics in groups:
        lines = []
        for metric, label, kind in metrics:
            if metric not in by_metric:
                continue
            line = {"measure": label}
            for scope in scopes:
                v = by_metric[metric].get(scope)
                if kind == "rule":
                    y = by_metric.get("skew_y_pct", {}).get(scope)
                    line[scope] = f"{v:.0f}/{y:.0f}" if v is not None and y is not None else "—"
                else:
                    line[scope] = show(v, kind)
            lines.append(line)
        if lines:
            out.append((title, lines, ["measure", *scopes]))
    return out


TRACKING_COLUMNS = (
    ("k", "k: requests per estimate", "count"),
    ("checkpoints", "extent-hours compared", "count"),
    ("mean_relative_error", "mean error", "share"),
    ("median_relative_error", "median error", "share"),
    ("requests_to_90pct", "requests to reach 90% after a 10x rise", "num"),
    ("stale_s_aging", "time to read cold after a stop, with aging", "s"),
    ("stale_s_no_aging", "the same without aging", "s"),
)


def _tracking_html(inputs: ReportInputs) -> str:
    rows = [{label: (show(r.get(col), kind) if not (col == "stale_s_no_aging" and r.get(col) is None)
                     else "never (within the test)") for col, label, kind in TRACKING_COLUMNS}
            for r in inputs.tracking]
    columns = [label for _, label, _ in TRACKING_COLUMNS]
    parts = [
        "<p>Interarrival heat tracking (FIVE section 3.3) estimates each extent's heat from its last k requests. "
        "Error: how far the estimate at each hour lies from the extent's true heat in the next hour, "
        "|estimate - true| / true, over this trace's extent-hours. Rise and stop: generated traces; "
        "an extent reads cold when its estimate falls below 10% of its old heat.</p>",
        _table(rows, columns, {c: "text" for c in columns}),
        "<ul>" + "".join(f"<li>{html.escape(c)}: <b>{_VERDICT[ok]}</b> ({html.escape(ev)})</li>"
                         for c, ok, ev in inputs.claims) + "</ul>"]
    return "".join(parts)


_VERDICT = {True: "holds", False: "does not hold", None: "not measured"}

SCORE_COLUMNS = (
    ("rank", "rank", "count"), ("policy_id", "policy", "text"),
    ("mean_response_ms", "mean response", "ms"), ("p95_response_ms", "p95 response", "ms"),
    ("improvement_mean", "gain, mean", "share"), ("improvement_p95", "gain, p95", "share"),
    ("hottest_utilization", "hottest disk busy", "share"),
    ("utilization_max_over_mean", "hottest / mean busy", "num"),
    ("migration_mb", "data copied while running", "mb"), ("plannable", "plannable", "text"),
    ("note", "note", "text"),
)
#: Scorecard columns not shown (identifiers, run settings); a column in neither list is shown by its name.
SCORE_HIDDEN = frozenset(PS.COLUMNS) - {c for c, _, _ in SCORE_COLUMNS}


def _throughput(mb_per_s: float | None) -> str:
    """MB/s as bytes per second in binary units (437 B/s, 1.5 MiB/s): a quiet trace's 0.000437 MB/s reads as 437 B/s."""
    return "—" if mb_per_s is None else f"{human_bytes(mb_per_s * 1e6)}/s"


def _verdict(plan: dict[str, Any]) -> str:
    """A plan's status and why (reorg_plans status and reason): e.g. "not_worth_it: moves 3 GiB for a 0.4% gain"."""
    return f"{plan['status']}: {plan['reason']}" if plan.get("reason") else str(plan["status"])


def _scores_html(scores: Sequence[dict[str, Any]], trace_id: str) -> str:
    if not scores:
        return (f"<p>Not scored yet: <code>blockheat score {html.escape(trace_id)}</code> replays the policies in "
                "the simulator.</p>")
    ranked = sorted(scores, key=lambda r: r["rank"])
    extra = sorted({c for r in ranked for c in r} - SCORE_HIDDEN - {c for c, _, _ in SCORE_COLUMNS})
    cols = [*((c, label, kind) for c, label, kind in SCORE_COLUMNS), *((c, c, kind_of(c)) for c in extra)]
    rows = [{label: show(r.get(c), kind) if kind != "text" else show(r.get(c)) for c, label, kind in cols}
            for r in ranked]
    first = ranked[0]
    head = (f"<p>Window {html.escape(first['window_id'])}: {first['window_requests']:,} requests replayed on "
            f"{first['n_disks']} disks ({html.escape(first['spec'])}, {html.escape(first['scheduler'])}); gain = "
            f"1 - policy / as traced (mean response {show(first['baseline_mean_response_ms'], 'ms')}).</p>")
    return head + _table(rows, [label for _, label, _ in cols], {label: "text" for _, label, _ in cols}, "scores")


PLAN_FIELDS = (
    ("policy_id", "policy", "text"), ("status", "status", "text"), ("reason", "reason", "text"),
    ("window_id", "scored on window", "text"), ("created_at", "created", "text"),
    ("valid_until", "valid until", "text"), ("n_steps", "steps", "count"),
    ("bytes_to_move", "bytes moved", "bytes"), ("predicted_mean_response_ms", "predicted mean response", "ms"),
    ("baseline_mean_response_ms", "mean response as traced", "ms"),
    ("improvement_mean", "predicted gain, mean response", "share"),
    ("validation_demerit_ms", "disk model's validation demerit", "ms"), ("plan_id", "plan id", "text"),
)
#: Plan columns not shown; any column in neither list (the plan's cost figures, say) is shown by its name.
PLAN_HIDDEN = frozenset({"trace_id", "content_id", "schema_version", "plan_json", "family"})


def _plan_html(plan: dict[str, Any] | None, steps: Sequence[dict[str, Any]], trace_id: str) -> str:
    if plan is None:
        return (f"<p>No plan yet: <code>blockheat plan {html.escape(trace_id)} --policy best</code> proposes "
                "one.</p>")
    known = {c for c, _, _ in PLAN_FIELDS}
    extra = sorted(c for c in plan if c not in known and c not in PLAN_HIDDEN and plan[c] is not None)
    rows = [{"field": label, "value": show(plan.get(c), kind) if kind != "text" else show(plan.get(c))}
            for c, label, kind in PLAN_FIELDS if plan.get(c) is not None]
    rows += [{"field": c, "value": show(plan[c], kind_of(c))} for c in extra]
    out = _table(rows, ["field", "value"], {"field": "text", "value": "text"}, "plan")
    if steps:
        step_rows = [{"step type": s["step_type"], "from device": s["source_device"], "to device": s["dest_device"],
                      "steps": f"{s['steps']:,}", "extents": show(s.get("extents"), "count"),
                      "bytes": human_bytes(s["bytes"])}
                     for s in sorted(steps, key=lambda s: (-s["bytes"], s["step_type"]))]
        cols = ["step type", "from device", "to device", "steps", "extents", "bytes"]
        out += "<p>Steps, summed per type and pair of devices:</p>" + _table(step_rows, cols, dict.fromkeys(
            cols, "text"), "steps")
    return out


# ---------------------------------------------------------------- the page

STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222;line-height:1.35}"
         "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;"
         "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child,td.t{text-align:left}img{max-width:100%}"
         ".note,figcaption{color:#555;font-size:90%}dl.summary{display:grid;grid-template-columns:max-content auto;"
         "gap:4px 16px;background:#f7f7f2;padding:12px;border:1px solid #ddd}dl.summary div{display:contents}"
         "dt{font-weight:bold}dd{margin:0}nav a{margin-right:1em}figure{margin:0 0 1.5em}h3{margin-bottom:0.2em}")


def _value_attr(v: Any) -> str:
    return "" if v is None else html.escape(repr(v) if isinstance(v, float) else str(v), quote=True)


def _figure_html(fig: Figure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    note = f"<figcaption>{html.escape(fig.note)}</figcaption>" if fig.note else ""
    return (f"<figure id='fig-{fig.name}'><img alt='{html.escape(fig.title, quote=True)}' "
            f"src='data:image/png;base64,{data}'>{note}</figure>")


def _counts(profile: Sequence[dict[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for r in profile:
        if r["scope"] == "device" and r["metric"] in ("reads", "writes", "requests") and r["value"] is not None:
            op = {"reads": "R", "writes": "W", "requests": ALL_OPS}[r["metric"]]
            out[(r["device"], op)] = r["value"]
    return out


def render(inputs: ReportInputs) -> tuple[str, list[Figure]]:
    """The page (one HTML string, figures embedded, no scripts) and the figures (also written as PNG files)."""
    t = inputs.trace
    counts = _counts(inputs.profile)
    per_op = {k: v for k, v in counts.items() if k[1] != ALL_OPS}
    per_device = {k: v for k, v in counts.items() if k[1] == ALL_OPS}
    figs: dict[str, Figure] = {}
    if inputs.rates:
        figs["load"] = rates_figure(inputs.rates, inputs.rate_window_us, t)
    if inputs.disk_heat:
        figs["disk_heat"] = disk_heat_figure(inputs.disk_heat, t, inputs.extent_bytes)
    if inputs.heat_map.num_rows:
        figs["heat_map"] = heat_map_figure(inputs.heat_map, inputs.heat_map_bins, t, inputs.extent_bytes)
    for name, op_counts, by_op in (("response_us", per_op, True), ("size_bytes", per_op, True),
                                   ("interarrival_us", per_device, False)):
        if inputs.cdfs.get(name):
            figs[name] = cdf_figure(name, inputs.cdfs[name], op_counts, per_op=by_op)
    missing = [what for name, what in (("response_us", "response time"), ("size_bytes", "request size"),
                                       ("interarrival_us", "interarrival time")) if not inputs.cdfs.get(name)]
    sections: list[tuple[str, str, str]] = []   # (id, title, html)

    def section(key: str, title: str, *body: str) -> None:
        sections.append((key, title, "".join(body)))

    section("load", "Load over time", _figure_html(figs["load"]) if "load" in figs else "<p>No profile windows.</p>")
    section("disks", "Disk heat and balance", *(_figure_html(figs[k]) for k in ("disk_heat", "heat_map") if k in figs))
    section("distributions", "Response times, sizes and interarrival times",
            *(_figure_html(figs[k]) for k in ("response_us", "size_bytes", "interarrival_us") if k in figs),
            f"<p class='note'>Not in this trace's format: {html.escape(', '.join(missing))}.</p>" if missing else "")
    section("scores", "Policy scorecard", _scores_html(inputs.scores, t["trace_id"]))
    section("plan", "Latest plan", _plan_html(inputs.plan, inputs.plan_steps, t["trace_id"]))
    section("profile", "Profile (whole trace)", *(
        f"<h3>{html.escape(title)}</h3>" + _table(rows, cols, dict.fromkeys(cols, "text"), "profile")
        for title, rows, cols in profile_groups(inputs.profile)))
    section("tracking", "Heat tracking accuracy", _tracking_html(inputs))
    items = summary(inputs)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>blockheat report: {html.escape(t['trace_id'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>Trace {html.escape(t['trace_id'])}</h1>",
        f"<p class='note'>Format {html.escape(t['format'])}; source "
        f"{html.escape(', '.join(Path(f['path']).name for f in t.get('source_files') or []))}.</p>",
        "<section id='summary'><h2>Summary</h2><dl class='summary'>",
        *(f"<div data-key='{i.key}' data-value='{_value_attr(i.value)}'><dt>{html.escape(i.label)}</dt>"
          f"<dd>{html.escape(i.text)}</dd></div>" for i in items if not i.key.endswith(("_window", "_second"))),
        "</dl>",
        *(f"<span hidden data-key='{i.key}' data-value='{_value_attr(i.value)}'></span>"
          for i in items if i.key.endswith(("_window", "_second"))),
        "</section><nav>" + "".join(f"<a href='#{k}'>{html.escape(title)}</a>" for k, title, _ in sections) + "</nav>",
        *(f"<section id='{k}'><h2>{html.escape(title)}</h2>{body}</section>" for k, title, body in sections),
        *(f"<p class='note'>{html.escape(n)}</p>" for n in inputs.notes),
        "</body></html>",
    ]
    return "".join(parts), list(figs.values())


def write_report(out: str | Path, page: str, figures: Sequence[Figure]) -> Path | str:
    """The page as <out>/report.html and each figure as <out>/<name>.png, `out` a local directory (created) or an
    object-store URI (libs.io.storage: one PUT per file, the figures first, the page last); returns the page's
    location (a resolved Path for a local directory, the URI otherwise)."""
    where = storage.normalize(out)
    storage.makedirs(where)
    for fig in figures:
        storage.write_bytes(storage.join(where, f"{fig.name}.png"), fig.png)
    page_at = storage.join(where, "report.html")
    storage.write_bytes(page_at, page.encode("utf-8"))
    return Path(page_at) if storage.is_local(page_at) else page_at

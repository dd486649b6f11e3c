"""The HTML trace report: figures (matplotlib, PNG embedded as base64) and tables from small,
already-aggregated inputs, and its files written to a local directory or an object-store prefix (write_report).
No Spark here: jobs/heat_report.py gathers the inputs."""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from libs.io import storage

HOUR_US = 3_600_000_000


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    note: str = ""


@dataclass
class ReportInputs:
    """Everything the page shows; each list is small (binned or per-percentile)."""

    trace: dict[str, Any]
    heat_map: list[dict[str, Any]]            # device, time_bin_us, addr_bin_bytes, heat (blocks/s)
    heat_map_bins: tuple[int, int]            # (time bin us, address bin bytes)
    disk_heat: dict[str, list[dict[str, Any]]]  # layout -> rows (window_start_us, disk, heat)
    cdfs: dict[str, list[tuple[float, float]]]  # name -> [(value, cumulative share)]
    tracking: list[dict[str, Any]]
    claims: list[tuple[str, bool | None, str]]
    profile: list[dict[str, Any]]             # scope, device, metric, value (whole trace)
    notes: list[str] = field(default_factory=list)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def heat_map_figure(rows: Sequence[dict[str, Any]], bins: tuple[int, int]) -> Figure:
    """Address (MiB) against time (hours), colour = heat in blocks/s on a log scale, one panel per device."""
    time_bin, addr_bin = bins
    devices = sorted({r["device"] for r in rows})
    fig, axes = plt.subplots(len(devices), 1, figsize=(10, 3.2 * max(1, len(devices))), squeeze=False)
    positive = [r["heat"] for r in rows if r["heat"] and r["heat"] > 0]
    norm = LogNorm(vmin=min(positive), vmax=max(positive)) if positive else None
    image = None
    for ax, device in zip(axes[:, 0], devices, strict=True):
        mine = [r for r in rows if r["device"] == device]
        t = np.array([r["time_bin_us"] for r in mine]) // time_bin
        a = np.array([r["addr_bin_bytes"] for r in mine]) // addr_bin
        grid = np.full((int(a.max()) + 1, int(t.max()) + 1), np.nan)
        grid[a, t] = [r["heat"] for r in mine]
        image = ax.imshow(grid, aspect="auto", origin="lower", norm=norm, cmap="inferno", interpolation="nearest",
                          extent=(0, (t.max() + 1) * time_bin / HOUR_US, 0, (a.max() + 1) * addr_bin / 2**20))
        ax.set_title(f"device {device}")
        ax.set_ylabel("address (MiB)")
    axes[-1, 0].set_xlabel("time since trace start (hours)")
    if image is not None:
        fig.colorbar(image, ax=axes[:, 0].tolist(), label="heat (512-byte blocks / s, log scale)")
    return Figure("extent_heat_map", "Extent heat over time",
                  _png(fig), f"bins: {time_bin / 1e6:g} s x {addr_bin / 2**20:g} MiB; white = no access")


def disk_heat_figure(layouts: dict[str, list[dict[str, Any]]]) -> Figure:
    """Heat per disk over time, one panel per layout."""
    fig, axes = plt.subplots(len(layouts), 1, figsize=(10, 3 * max(1, len(layouts))), squeeze=False, sharex=True)
    for ax, (layout, rows) in zip(axes[:, 0], layouts.items(), strict=True):
        for disk in sorted({r["disk"] for r in rows}):
            pts = sorted((r["window_start_us"] / HOUR_US, r["heat"] or 0.0) for r in rows if r["disk"] == disk)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], drawstyle="steps-post", label=f"disk {disk}", lw=0.9)
        ax.set_title(f"{layout}")
        ax.set_ylabel("heat (blocks / s)")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("time since trace start (hours)")
    return Figure("disk_heat", "Disk heat over time, as traced and striped", _png(fig))


CDF_LABELS = {"size_bytes": "request size (bytes)", "interarrival_us": "interarrival time (us)",
              "response_us": "response time (us)"}


def cdf_figure(cdfs: dict[str, list[tuple[float, float]]]) -> Figure:
    names = [n for n in CDF_LABELS if cdfs.get(n)]
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(4.2 * max(1, len(names)), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=False):
        pts = cdfs[name]
        ax.step([max(v, 1e-3) for v, _ in pts], [c for _, c in pts], where="post")
        ax.set_xscale("log")
        ax.set_xlabel(CDF_LABELS[name] + ", log scale")
        ax.set_ylabel("cumulative share of requests")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    missing = [CDF_LABELS[n] for n in CDF_LABELS if not cdfs.get(n)]
    return Figure("cdfs", "Distributions", _png(fig),
                  ("not in this trace's format: " + ", ".join(missing)) if missing else "")


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "—"
        if isinstance(v, float):
            return f"{v:,.6g}"
        if isinstance(v, int):
            return f"{v:,}"
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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


def render(inputs: ReportInputs) -> tuple[str, list[Figure]]:
    """The page (one HTML string, figures embedded) and the figures (also written as PNG files)."""
    figures = [heat_map_figure(inputs.heat_map, inputs.heat_map_bins), disk_heat_figure(inputs.disk_heat),
               cdf_figure(inputs.cdfs)]
    t = inputs.trace
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>blockheat report: {html.escape(t['trace_id'])}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;"
        "text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}img{max-width:100%}"
        ".note{color:#666;font-size:90%}</style></head><body>",
        f"<h1>Trace {html.escape(t['trace_id'])}</h1>",
        _table([{"format": t["format"], "requests": t["records_accepted"], "rejected": t["records_rejected"],
                 "reads": t["reads"], "writes": t["writes"], "span (days)": t["span_us"] / 86_400e6,
                 "devices": ", ".join(t["devices"]), "start (source)": t.get("start_time_source")}],
               ["format", "requests", "rejected", "reads", "writes", "span (days)", "devices", "start (source)"]),
    ]
    for fig in figures:
        data = base64.b64encode(fig.png).decode("ascii")
        parts.append(f"<h2>{html.escape(fig.title)}</h2><img alt='{fig.name}' src='data:image/png;base64,{data}'>")
        if fig.note:
            parts.append(f"<p class='note'>{html.escape(fig.note)}</p>")
    parts.append("<h2>Heat tracking accuracy (FIVE section 3.3)</h2>")
    parts.append(_table(inputs.tracking, ["k", "checkpoints", "mean_relative_error", "median_relative_error",
                                          "requests_to_90pct", "stale_s_aging", "stale_s_no_aging"]))
    parts.append("<ul>" + "".join(
        f"<li>{html.escape(c)}: <b>{'holds' if ok else 'does not hold'}</b> ({html.escape(ev)})</li>"
        for c, ok, ev in inputs.claims) + "</ul>")
    parts.append("<h2>Profile (whole trace)</h2>")
    parts.append(_table(*profile_table(inputs.profile)))
    parts += [f"<p class='note'>{html.escape(n)}</p>" for n in inputs.notes]
    parts.append("</body></html>")
    return "".join(parts), figures


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

"""`five-cooling`: FIVE's table 6, the skewed (X/Y = 70/30) synthetic workload on the 32 disks of table 1,
files striped round robin with Gopt140 (87 KB), Track (35 KB) and Cyl (385 KB) units, with and without disk
cooling, over arrival rates 20..130 per second.

Choices where the paper is open (one line each, tested in tests/libs/experiments/test_experiments.py):
- cooling: every 100 requests, delta 5 %, whole extents (the file's striping units) as migration units,
  FIVE's same-file rule with the workload's files, tracker k = 10 with aging (sim.cooling's defaults);
- requests per rate: 40,000 at full scale (FIVE: 1 million) and 6,000 at tiny scale; the same files,
  ranking and request sequence at every rate (one seed), only the arrival times scale;
- saturated ("∞"): the backlog at the last arrival exceeds 1 % of the requests and grew over the second
  half (sim.stats), or more than 3,000 requests are outstanding (the run stops);
- queue length is time-averaged and counts the request in service (sim.stats); the hottest disk is the
  most utilized one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from libs.experiments import five
from libs.experiments.common import Claim, ExperimentOutput, fmt, markdown_table, new_figure, save_figure
from libs.experiments.five import INF, MAX_OUTSTANDING
from sim.array import DiskArray
from sim.cooling import CoolingConfig, DiskCooling
from sim.engine import SimConfig, Simulation, run_with_policy

TITLE = "FIVE disk cooling on the skewed synthetic workload (FIVE table 6)"
METHODS = ("Gopt140", "Track", "Cyl")
#: The paper's rates, then higher ones: our disks serve a request faster than FIVE's (at 120/s the mean
#: utilization is about 0.7 against the paper's 0.79), so saturation comes later here.
RATES = (20, 40, 60, 80, 100, 110, 120, 125, 130, 140, 150, 160)
SCALE = {"full": {"requests": 40_000, "rates": RATES, "methods": METHODS},
         "tiny": {"requests": 6_000, "rates": (20, 120, 160), "methods": ("Gopt140", "Track")}}
COOLING = CoolingConfig(every_requests=100, delta=0.05, k=10)

#: Table 6 (ms): rate -> method -> response; "-C" with cooling.
PAPER = {
    20: {"Gopt140": 46.57, "Track": 33.38, "Cyl": 98.34, "Gopt140-C": 47.23, "Track-C": 34.23, "Cyl-C": 96.66},
    40: {"Gopt140": 53.30, "Track": 38.92, "Cyl": 124.66, "Gopt140-C": 53.59, "Track-C": 39.98, "Cyl-C": 113.91},
    60: {"Gopt140": 62.81, "Track": 47.05, "Cyl": INF, "Gopt140-C": 64.02, "Track-C": 48.09, "Cyl-C": 157.58},
    80: {"Gopt140": 77.93, "Track": 60.39, "Cyl": INF, "Gopt140-C": 77.73, "Track-C": 61.68, "Cyl-C": INF},
    100: {"Gopt140": 111.87, "Track": 87.52, "Cyl": INF, "Gopt140-C": 110.63, "Track-C": 87.20, "Cyl-C": INF},
    110: {"Gopt140": 176.13, "Track": 117.80, "Cyl": INF, "Gopt140-C": 117.20, "Track-C": 109.72, "Cyl-C": INF},
    120: {"Gopt140": INF, "Track": 203.30, "Cyl": INF, "Gopt140-C": 152.74, "Track-C": 163.72, "Cyl-C": INF},
    125: {"Gopt140": INF, "Track": 438.65, "Cyl": INF, "Gopt140-C": 188.88, "Track-C": 221.42, "Cyl-C": INF},
    130: {"Gopt140": INF, "Track": INF, "Cyl": INF, "Gopt140-C": 199.63, "Track-C": 429.76, "Cyl-C": INF},
}


def run_point(method: str, rate: float, cooling: bool, *, n_requests: int, seed: int,
              maps: dict[str, five.StripedFiles] | None = None) -> dict[str, Any]:
    """One (method, rate, cooling) run as a table row."""
    w = five.workload(seed, n_requests, rate, "xy")
    maps = {} if maps is None else maps
    if method not in maps:
        maps[method] = five.striped_files(w, five.UNITS[method])
    striped = maps[method]
    n = len(w.requests)
    sim = Simulation(five.spec(), DiskArray(five.N_DISKS, striped.extent_map), w.requests,
                     SimConfig(max_outstanding=MAX_OUTSTANDING, saturation_min_backlog=max(1, n // 100)),
                     np.random.default_rng(seed + 1), device_sectors=[w.logical_sectors])
    moves, vetoes = 0, 0
    if cooling:
        policy = DiskCooling(COOLING, unit_file=striped.unit_file)
        run_with_policy(sim, policy)
        moves, vetoes = len(policy.moves), policy.outcomes.get("source_queue", 0)
    else:
        sim.run()
    r = sim.result()
    return {"method": method, "unit_kb": five.UNITS[method], "rate_per_s": float(rate), "cooling": cooling,
            "label": method + ("-C" if cooling else ""), "requests": r.requests, "saturated": r.saturated,
            "mean_response_ms": r.mean_response_ms, "hottest_utilization": r.hottest_utilization,
            "mean_utilization": r.mean_utilization, "hottest_queue_length": r.hottest_queue_length,
            "mean_queue_length": r.mean_queue_length, "moves": moves, "source_queue_vetoes": vetoes,
            "migration_ios": r.migration_ios,
            "paper_response_ms": PAPER.get(int(rate), {}).get(method + ("-C" if cooling else ""))}


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("five-cooling", TITLE, scale)
    cfg = SCALE[scale]
    maps: dict[str, five.StripedFiles] = {}
    rows = [run_point(m, rate, c, n_requests=cfg["requests"], seed=seed, maps=maps)
            for m in cfg["methods"] for rate in cfg["rates"] for c in (False, True)]
    out.tables["responses"] = pa.Table.from_pylist(rows)
    _claims(out, rows, cfg)
    _sections(out, rows, cfg)
    out.plots.append(("response_vs_rate.png", lambda p: _plot(p, rows)))
    return out.finish()


def _get(rows: list[dict[str, Any]], method: str, rate: float, cooling: bool) -> dict[str, Any]:
    return next(r for r in rows if r["method"] == method and r["rate_per_s"] == rate and r["cooling"] == cooling)


def _claims(out: ExperimentOutput, rows: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    rates = cfg["rates"]
    found, best_ratio = [], []
    for m in ("Gopt140", "Track"):
        best, top = None, (0.0, 0.0)
        for rate in rates:
            a, b = _get(rows, m, rate, False)["mean_response_ms"], _get(rows, m, rate, True)["mean_response_ms"]
            if np.isfinite(b) and a >= 10 * b:
                best = (rate, a, b)
            if np.isfinite(a) and np.isfinite(b) and a / b > top[0]:
                top = (a / b, rate)
        found.append((m, best))
        best_ratio.append(f"{m} {top[0]:.1f}x at {fmt(top[1])}/s")
    vetoes = sum(r["source_queue_vetoes"] for r in rows if r["cooling"] and r["saturated"])
    out.claims.append(Claim(
        "cooling: an order of magnitude lower near saturation",
        "for Gopt140 and Track, some rate where the run without cooling is saturated or >= 10x slower "
        "than with cooling (which is not saturated)",
        "Gopt140 at 120/s: ∞ vs 152.74 ms; Track at 130/s: ∞ vs 429.76 ms",
        "; ".join(f"{m} at {fmt(b[0])}/s: {fmt(b[1])} vs {fmt(b[2])} ms" if b else f"{m}: none"
                  for m, b in found) + f" (largest finite gain: {', '.join(best_ratio)}; in the saturated "
        f"cooling runs step 5 vetoed {vetoes} moves: the hottest disk always had a queue)",
        all(b is not None for _, b in found)))
    light = min(rates)
    ratios = {m: _get(rows, m, light, True)["mean_response_ms"] / _get(rows, m, light, False)["mean_response_ms"]
              for m in cfg["methods"]}
    out.claims.append(Claim(
        "cooling costs little at light load",
        f"at {light}/s, with cooling within 10 % of without (the migrations' extra load)",
        "20/s: +1.4 % (Gopt140), +2.5 % (Track), -1.7 % (Cyl)",
        ", ".join(f"{100 * (x - 1):+.1f} % ({m})" for m, x in ratios.items()),
        all(x <= 1.10 for x in ratios.values())))
    top = 130 if 130 in rates else max(rates)
    sat = {m: _get(rows, m, top, False)["saturated"] for m in cfg["methods"]}
    out.claims.append(Claim(
        "without cooling every method saturates by 130/s",
        f"at {top}/s every method without cooling is saturated",
        "130/s: ∞ for Gopt140, Track, Cyl",
        ", ".join(f"{m} {'∞' if s else fmt(_get(rows, m, top, False)['mean_response_ms']) + ' ms'}"
                  for m, s in sat.items()), all(sat.values())))
    if 120 in rates:
        t, tc = _get(rows, "Track", 120, False), _get(rows, "Track", 120, True)
        out.claims.append(Claim(
            "cooling relieves the hottest disk",
            "Track at 120/s: hottest-disk utilization and queue length both lower with cooling",
            "0.94 and 10.3 without, 0.89 and 5.5 with (all disks: 0.79 and 3.5 without)",
            f"{fmt(t['hottest_utilization'], 3)} and {fmt(t['hottest_queue_length'], 3)} without, "
            f"{fmt(tc['hottest_utilization'], 3)} and {fmt(tc['hottest_queue_length'], 3)} with (all disks: "
            f"{fmt(t['mean_utilization'], 3)} and {fmt(t['mean_queue_length'], 3)} without)",
            bool(tc["hottest_utilization"] < t["hottest_utilization"]
                 and tc["hottest_queue_length"] < t["hottest_queue_length"])))


def _sections(out: ExperimentOutput, rows: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    labels = [m + s for m in cfg["methods"] for s in ("", "-C")]
    table = []
    for rate in cfg["rates"]:
        row: dict[str, Any] = {"λ": rate}
        for m in cfg["methods"]:
            for c in (False, True):
                r = _get(rows, m, rate, c)
                row[r["label"]] = f"{fmt(r['mean_response_ms'])} ({fmt(r['paper_response_ms'])})"
        table.append(row)
    moves = [{"λ": rate, **{m + "-C": f"{_get(rows, m, rate, True)['moves']} "
                                      f"({_get(rows, m, rate, True)['source_queue_vetoes']})"
                            for m in cfg["methods"]}} for rate in cfg["rates"]]
    out.sections += [
        f"## Setup\n\n{cfg['requests']:,} requests per rate (FIVE: 1,000,000), 32 disks of `five_table1`, detailed "
        "disk model, FCFS, files striped round robin; cooling every 100 requests, delta 5 %, extents as "
        "migration units. The X/Y = 70/30 skew sends about 10 % of all requests to the hottest file alone, so "
        "the outcome depends on which files the (random) ranking puts on top; ours:\n\n" + hottest_files(cfg),
        "## Mean response time in ms: ours (paper's table 6)", markdown_table(table, ["λ", *labels]),
        "## Cooling moves executed (in brackets: moves vetoed by step 5, the hottest disk had a queue)",
        markdown_table(moves, ["λ", *[m + "-C" for m in cfg["methods"]]]),
    ]


def hottest_files(cfg: dict[str, Any], seed: int = 1, top: int = 5) -> str:
    """The most requested files of the workload (class, size, share of requests, units under Track and Cyl)."""
    w = five.workload(seed, cfg["requests"], 100.0, "xy")
    files, counts = np.unique(w.requests.lbn, return_counts=True)
    order = np.argsort(-counts)[:top]
    by_start = {int(s): i for i, s in enumerate(w.file_start)}
    rows = []
    for k in order:
        f = by_start[int(files[k])]
        size = int(w.file_sectors[f])
        rows.append({"file": f, "class": "ABC"[int(w.file_class[f])], "size (KB)": size,
                     "share of requests": f"{100 * counts[k] / len(w.requests):.1f} %",
                     "Track units": -(-size // five.UNITS["Track"]), "Cyl units": -(-size // five.UNITS["Cyl"])})
    return markdown_table(rows, list(rows[0]))


def _plot(path: Path, rows: list[dict[str, Any]]) -> None:
    fig, (ax,) = new_figure(1, width=7.5)
    for i, m in enumerate(dict.fromkeys(r["method"] for r in rows)):
        for c, style in ((False, "-"), (True, "--")):
            pts = sorted((r["rate_per_s"], r["mean_response_ms"]) for r in rows if r["method"] == m
                         and r["cooling"] == c)
            x = [p[0] for p in pts if np.isfinite(p[1])]
            y = [p[1] for p in pts if np.isfinite(p[1])]
            ax.plot(x, y, style, marker="o", color=f"C{i}", label=m + ("-C" if c else ""))
            sat = [p[0] for p in pts if not np.isfinite(p[1])]
            ax.plot(sat, [5000] * len(sat), "x", color=f"C{i}", markersize=9)
    ax.set_xlabel("arrival rate λ (requests/s)")
    ax.set_ylabel("mean response time (ms); x = saturated")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    save_figure(fig, path, "FIVE table 6: skewed workload, with (-C) and without cooling")

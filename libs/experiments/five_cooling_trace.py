"""`five-cooling-trace`: FIVE's table 7 method on a real trace: the bundled hplajw week, sped up by alpha
(interarrival times divided by alpha), Track striping (35 KB units, round robin) with and without disk
cooling (every 100 s of trace time, i.e. every 100/alpha s simulated; whole extents; delta = 0.05).

Choices where the paper is open or the trace differs (one line each, tested in
tests/libs/experiments/test_five.py):
- disks: 4 of FIVE's table-1 model, so that at alpha = 1000 the mean utilization (about 0.27) is near the
  paper's 0.24 for its WWW trace; the two traced devices are concatenated and striped over them;
- hplajw's 256-byte sector addresses become the table-1 disk's 1 KB blocks (a request covers every block it
  touches);
- every extent is its own "file" for cooling's same-file rule (the trace has no file map; with devices as
  files every disk would hold both devices' extents and no move would ever be allowed);
- queue length is time-averaged and counts the request in service (sim.stats); the paper's 63 and 1.6 are
  averaged over the instants a request was enqueued, so only the direction compares;
- scale: the whole week at full scale, its first 15,000 requests at tiny scale;
- sensitivity run: the same requests (addresses, sizes, order) at Poisson arrivals over the same span (sorted
  uniform times, seeded), Track and Track-C at the highest alpha, to separate the bursts from the load.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.libs.experiments import five
from blockheat.libs.experiments.common import Claim, ExperimentOutput, fmt, markdown_table, new_figure, save_figure
from blockheat.libs.experiments.placement import load_hplajw
from blockheat.sim import (
    CoolingConfig,
    DiskArray,
    DiskCooling,
    ExtentMap,
    Requests,
    SimConfig,
    Simulation,
    run_with_policy,
)

TITLE = "FIVE disk cooling on a real trace: the hplajw week sped up (FIVE table 7's method)"
N_DISKS = 4
TRACK_BLOCKS = five.UNITS["Track"]
COOL_EVERY_TRACE_S = 100.0
ALPHAS = (100, 300, 500, 700, 900, 1000)
SCALE = {"full": {"limit": None, "alphas": ALPHAS}, "tiny": {"limit": 15_000, "alphas": (100, 1000)}}
#: Table 7 (ms): alpha -> (Track, Track-C), the WWW server trace.
PAPER = {100: (16.68, 16.50), 300: (18.39, 17.57), 500: (21.13, 19.63), 700: (27.58, 24.61),
         900: (79.11, 24.86), 1000: (203.36, 28.57)}


def trace_requests(limit: int | None = None) -> tuple[Requests, list[int]]:
    """hplajw in table-1 blocks, and each device's size in blocks."""
    w = load_hplajw(limit)
    block = five.spec().sector_size
    r = w.requests
    byte = r.lbn * w.spec.sector_size
    lbn = byte // block
    blocks = -(-(byte + r.sectors * w.spec.sector_size) // block) - lbn
    sizes = [s * w.spec.sector_size // block for s in w.device_sectors]
    return Requests.build(r.arrival_us, r.device, lbn, blocks, r.is_read), sizes


def run_point(req: Requests, sizes: list[int], alpha: float, cooling: bool, seed: int) -> dict[str, Any]:
    extent_map = ExtentMap.round_robin(sum(sizes), TRACK_BLOCKS, N_DISKS)
    sim = Simulation(five.spec(), DiskArray(N_DISKS, extent_map), req, SimConfig(speedup=alpha),
                     np.random.default_rng(seed), device_sectors=sizes)
    moves = 0
    if cooling:
        policy = DiskCooling(CoolingConfig(every_requests=None, every_s=COOL_EVERY_TRACE_S / alpha, delta=0.05),
                             unit_file=np.arange(len(extent_map.extents), dtype=np.int64))
        run_with_policy(sim, policy)
        moves = len(policy.moves)
    else:
        sim.run()
    r = sim.result()
    return {"alpha": float(alpha), "cooling": cooling, "label": "Track-C" if cooling else "Track",
            "requests": r.requests, "saturated": r.saturated, "mean_response_ms": r.mean_response_ms,
            "p50_response_ms": r.p50_response_ms, "mean_utilization": r.mean_utilization,
            "hottest_utilization": r.hottest_utilization, "mean_queue_length": r.mean_queue_length,
            "hottest_queue_length": r.hottest_queue_length, "moves": moves, "migration_ios": r.migration_ios,
            "p95_response_ms": r.p95_response_ms,
            "paper_response_ms": PAPER.get(int(alpha), (None, None))[int(cooling)]}


def bursts(req: Requests, window_s: float = 10.0) -> dict[str, float]:
    """How bursty the trace is: the most requests arriving within window_s of trace time, and the share of
    requests with at least 10 (100) others arriving in the window_s before them."""
    t = np.sort(req.arrival_us)
    before = np.arange(len(t)) - np.searchsorted(t, t - window_s * 1e6, side="left")
    return {"requests": float(len(t)), "window_s": window_s, "largest_burst": float(before.max() + 1),
            "share_in_bursts_of_10_plus": float((before >= 10).mean()),
            "share_in_bursts_of_100_plus": float((before >= 100).mean())}


def poisson_arrivals(req: Requests, seed: int) -> Requests:
    """The same requests in the same order with Poisson arrivals over the trace's span (sorted uniform times)."""
    t = req.arrival_us
    times = np.sort(np.random.default_rng(seed).uniform(float(t.min()), float(t.max()), len(t)))
    return Requests.build(times, req.device, req.lbn, req.sectors, req.is_read)


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("five-cooling-trace", TITLE, scale)
    cfg = SCALE[scale]
    req, sizes = trace_requests(cfg["limit"])
    rows = [run_point(req, sizes, a, c, seed) for a in cfg["alphas"] for c in (False, True)]
    top = float(max(cfg["alphas"]))
    smooth = poisson_arrivals(req, seed)
    poisson = [run_point(smooth, sizes, top, c, seed) for c in (False, True)]
    out.tables["responses"] = pa.Table.from_pylist(rows)
    out.tables["poisson_arrivals"] = pa.Table.from_pylist(poisson)
    b = bursts(req)
    _claims(out, rows, cfg, poisson, b)
    _sections(out, rows, b, cfg)
    out.plots.append(("response_vs_alpha.png", lambda p: _plot(p, rows)))
    return out.finish()


def _get(rows: list[dict[str, Any]], alpha: float, cooling: bool) -> dict[str, Any]:
    return next(r for r in rows if r["alpha"] == alpha and r["cooling"] == cooling)


def _claims(out: ExperimentOutput, rows: list[dict[str, Any]], cfg: dict[str, Any], poisson: list[dict[str, Any]],
            b: dict[str, float]) -> None:
    lo, hi = float(min(cfg["alphas"])), float(max(cfg["alphas"]))
    t, tc = _get(rows, hi, False), _get(rows, hi, True)
    gain = t["mean_response_ms"] / tc["mean_response_ms"] if np.isfinite(tc["mean_response_ms"]) else 0.0
    p, pc = _get(poisson, hi, False), _get(poisson, hi, True)
    holds = bool(gain >= 10.0 or (t["saturated"] and not tc["saturated"]))
    reason = "" if holds else (
        f"hplajw arrives in bursts ({100 * b['share_in_bursts_of_10_plus']:.0f} % of requests with at least 10 "
        f"others in the {b['window_s']:g} s before them): the same requests at Poisson arrivals (sensitivity run) "
        f"take {fmt(p['mean_response_ms'])} ms (Track) and {fmt(pc['mean_response_ms'])} ms (Track-C) against "
        f"{fmt(t['mean_response_ms'])} ms with the trace's timing, so response time is burst drain time, not the "
        f"average load cooling evens; and Track striping leaves little imbalance to remove (hottest disk "
        f"{fmt(t['hottest_utilization'], 2)} against the mean {fmt(t['mean_utilization'], 2)}; paper 0.67 "
        "against 0.24)")
    out.claims.append(Claim(
        "cooling: an order of magnitude at the highest load",
        f"at alpha = {fmt(hi)}, Track at least 10x Track-C (or Track saturated and Track-C not)",
        "alpha 1000: 203.36 vs 28.57 ms (7.1x; 'an order of magnitude', over 20x at the load peak)",
        f"{fmt(t['mean_response_ms'])} vs {fmt(tc['mean_response_ms'])} ms ({gain:.2f}x)", holds, reason))
    a, b = _get(rows, lo, False), _get(rows, lo, True)
    out.claims.append(Claim(
        "cooling costs little at light load", f"at alpha = {fmt(lo)}, Track-C within 10 % of Track",
        "alpha 100: 16.50 vs 16.68 ms", f"{fmt(b['mean_response_ms'])} vs {fmt(a['mean_response_ms'])} ms",
        bool(b["mean_response_ms"] <= 1.10 * a["mean_response_ms"])))
    out.claims.append(Claim(
        "cooling relieves the hottest disk",
        f"at alpha = {fmt(hi)}, the hottest disk's utilization and queue length both lower with cooling",
        "utilization 0.67 -> 0.39 (all disks 0.24 -> 0.25); queue length 63 -> 1.6",
        f"utilization {fmt(t['hottest_utilization'], 3)} -> {fmt(tc['hottest_utilization'], 3)} (all disks "
        f"{fmt(t['mean_utilization'], 3)} -> {fmt(tc['mean_utilization'], 3)}); queue length "
        f"{fmt(t['hottest_queue_length'], 3)} -> {fmt(tc['hottest_queue_length'], 3)}",
        bool(tc["hottest_utilization"] < t["hottest_utilization"]
             and tc["hottest_queue_length"] < t["hottest_queue_length"])))


def _sections(out: ExperimentOutput, rows: list[dict[str, Any]], b: dict[str, float], cfg: dict[str, Any]) -> None:
    table = [{"alpha": a, "Track": f"{fmt(_get(rows, a, False)['mean_response_ms'])} ({fmt(PAPER[a][0])})",
              "Track-C": f"{fmt(_get(rows, a, True)['mean_response_ms'])} ({fmt(PAPER[a][1])})",
              "Track median": fmt(_get(rows, a, False)["p50_response_ms"]),
              "moves": _get(rows, a, True)["moves"],
              "hottest util.": f"{fmt(_get(rows, a, False)['hottest_utilization'], 3)} -> "
                               f"{fmt(_get(rows, a, True)['hottest_utilization'], 3)}",
              "mean util.": fmt(_get(rows, a, False)["mean_utilization"], 3)} for a in cfg["alphas"]]
    out.sections += [
        f"## Setup\n\n{int(b['requests']):,} requests of the hplajw week, {N_DISKS} disks of `five_table1`, "
        "Track striping (35 KB units) of the two concatenated devices, FCFS; cooling every 100 s of trace time, "
        "delta 5 %, whole extents.",
        "## Mean response in ms: ours (paper's table 7, a WWW server trace)",
        markdown_table(table, ["alpha", "Track", "Track-C", "Track median", "moves", "hottest util.", "mean util."]),
        "## Why this trace differs\n\nThe WWW trace of table 7 is many independent users; hplajw is one "
        "workstation whose file system writes in bursts: up to "
        f"{fmt(b['largest_burst'])} requests arrive within {b['window_s']:g} s of trace time, and "
        f"{100 * b['share_in_bursts_of_10_plus']:.0f} % of all requests have at least 10 others in the "
        f"{b['window_s']:g} s before them ({100 * b['share_in_bursts_of_100_plus']:.1f} % at least 100). "
        "Speeding the trace up by alpha squeezes each burst into 1/alpha of its time, so at alpha = 100 a "
        "burst of hundreds of 6 KB requests arrives within a tenth of a second and queues for seconds on "
        "every disk, at mean utilizations of a few percent: response time is set by burst "
        "drain times, and a burst spreads over all disks under Track striping whatever the extents' heat. "
        "Cooling evens the disks' average load (the hottest disk's utilization falls), which is what it is "
        "built to do, but that average is not what the bursts queue on. The sensitivity run replays the same "
        "requests at Poisson arrivals (`tables/poisson_arrivals.parquet`, quoted in the claim table).",
    ]


def _plot(path: Path, rows: list[dict[str, Any]]) -> None:
    fig, (ax, bx) = new_figure(2)
    for c, style in ((False, "-o"), (True, "--s")):
        pts = sorted((r["alpha"], r["mean_response_ms"], r["hottest_utilization"]) for r in rows if r["cooling"] == c)
        label = "Track-C" if c else "Track"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        bx.plot([p[0] for p in pts], [p[2] for p in pts], style, label=label)
    ax.set_xlabel("speed-up alpha")
    ax.set_ylabel("mean response (ms)")
    ax.set_yscale("log")
    bx.set_xlabel("speed-up alpha")
    bx.set_ylabel("hottest disk utilization")
    for x in (ax, bx):
        x.grid(True, alpha=0.3)
        x.legend()
    save_figure(fig, path, "hplajw sped up, Track striping with and without cooling")

"""`five-striping`: FIVE's tables 3-5, the uniform synthetic workload on the 32 disks of table 1 striped by
Opt, Gopt, Block, Track, Cyl, Opt-140 and Gopt-140, at light load (lambda = 1, with table 4's breakdown by
request size) and over arrival rates 20..140 per second.

Choices where the paper is open (one line each, tested in tests/libs/experiments/test_five.py):
- units come from our advisor (libs.plans.striping_advisor.advise) on the table-1 disk, not the paper's printed values:
  Gopt is the global Phase A unit for R-bar = the mean size of the requested files (ours 5 KB; the paper's
  Gopt 8 KB, its exhaustive Gbest 5 KB), Gopt-140 the global unit at 140/s (five.gopt140, also five-cooling's),
  Opt and Opt-140 the same per file with R_i = L_i (each request reads its whole file: aligned);
- Gbest: the best simulated global unit (requested files; class C in Track units) over a grid per rate that
  holds every global method's unit and steps finely around the optimum (full scale: every KB from 1 to 16
  at λ = 1, every 5 KB from 40 to 160 at 140/s; SCALE) and the paper's units, so no method's unit is the
  only candidate near the best; the lowest unit wins a tie;
- the Gbest-at-140/s claim's reason: the same sweep at 120/s (FIVE's 70 KB against the best unit at a
  lower load) and FIVE's Gopt claim's reason: Phase A's unit for R = 260 KB over the seek line's slope e;
- "almost a factor of two" (tuned methods against Track and Cyl at 140/s) is the paper's own table-5 ratios,
  1.62..1.74, widened by 10 % (the "close" reading with the paper's margin);
- the never-requested class-C files are striped in Track units under every method, so methods differ only
  in how the requested files are striped (and Block stays an extent map of about 760,000 units);
- files are dealt round robin in logical order with one cursor (libs.experiments.five.striped_file_map);
- spindles independent (FIVE's equation 9 charges a striped request the slowest of its disks' rotations);
- requests per rate: 20,000 at full scale (FIVE: 1 million), 3,000 at tiny scale; the same files and
  request sequence at every rate (one seed), only arrival times scale; saturated ("∞") as in five-cooling.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.libs.experiments import five
from blockheat.libs.experiments.common import (
    Claim,
    ExperimentOutput,
    about,
    fmt,
    markdown_table,
    new_figure,
    save_figure,
)
from blockheat.libs.experiments.five import INF, MAX_OUTSTANDING
from blockheat.libs.plans.striping_advisor import FileStats, Workload, advise, phase_a, phase_b
from blockheat.sim import SimConfig, Simulation

TITLE = "FIVE striping methods on the uniform synthetic workload (FIVE tables 3-5)"
METHODS = ("Opt", "Gopt", "Block", "Track", "Cyl", "Opt140", "Gopt140")
TUNED_RATE = five.TUNED_RATE
LIGHT = 1.0
RATES = (20, 40, 60, 80, 100, 120, 140)
#: FIVE 4.1.1's exhaustive Gbest: 5 KB at light load; 70 KB (about 110 ms) at 140/s.
PAPER_GBEST = {LIGHT: (5, 24.54), TUNED_RATE: (70, 110.0)}
#: Per scale: requests per run, the rates of table 5, the Gbest grids by rate (every global method's unit is
#: added) and the load sensitivity's rate and grid.
SCALE = {"full": {"requests": 20_000, "rates": RATES,
                  "grid": {LIGHT: (*range(1, 17), 20, 24, 32, 48, 64, 70, 87, 100, 128, 256),
                           TUNED_RATE: (16, 32, 35, *range(40, 161, 5), 180, 200, 256)},
                  "load_rate": 120.0, "load_grid": tuple(range(50, 151, 10))},
         "tiny": {"requests": 3_000, "rates": (20, 80, 140),
                  "grid": {LIGHT: (2, 4, 5, 6, 8), TUNED_RATE: (60, 70, 80, 90, 100, 110, 120, 130)},
                  "load_rate": 120.0, "load_grid": (60, 70, 80, 100, 127)}}
#: FIVE's Gopt: Phase A's global unit for R = 260 KB (section 4.1.1).
PAPER_GOPT, PAPER_R_BAR = 8, 260.0
#: Table 4's request-size classes (KB, inclusive upper bounds).
SIZE_CLASSES = ((10, "≤ 10"), (50, "11-50"), (100, "51-100"), (200, "101-200"), (500, "201-500"),
                (1000, "501-1000"), (None, "> 1000"))

PAPER_LIGHT = {"Opt": 24.54, "Gopt": 24.75, "Block": 24.54, "Track": 28.86, "Cyl": 81.84}
PAPER_SIZES = {
    "≤ 10": (16.97, 17.06, 19.18, 16.84, 17.63), "11-50": (22.04, 21.26, 21.22, 24.50, 26.18),
    "51-100": (22.97, 23.81, 22.28, 31.23, 48.94), "101-200": (24.58, 25.91, 24.42, 34.56, 86.41),
    "201-500": (27.48, 28.45, 27.35, 36.38, 168.39), "501-1000": (33.83, 34.66, 33.79, 38.46, 200.38),
    "> 1000": (49.75, 50.01, 49.65, 53.29, 207.27)}
PAPER = {  # table 5 (ms): rate -> method -> response
    20: (29.62, 29.71, 31.84, 32.42, 90.36, 42.08, 44.66), 40: (38.13, 37.79, 48.76, 37.15, 100.53, 47.31, 50.04),
    60: (55.17, 53.35, 126.20, 43.66, 112.76, 53.83, 56.81), 80: (112.48, 97.02, INF, 53.16, 128.00, 62.31, 65.59),
    100: (INF, 1033.67, INF, 69.13, 147.39, 74.18, 77.73), 120: (INF, INF, INF, 102.86, 173.50, 91.64, 96.21),
    140: (INF, INF, INF, 206.71, 211.29, 121.26, 127.49)}
PAPER_UNITS_KB = {"Gopt": "8", "Block": "1", "Track": "35", "Cyl": "385", "Gopt140": "87 (P-bar 3)",
                  "Opt": "per file", "Opt140": "per file (parallelism ≤ 3)"}


disk_model = five.disk_model


def global_units(w: five.FiveWorkload, unit: int) -> np.ndarray:
    """Each file's unit under a global unit: the requested files `unit`, class-C files Track (the docstring)."""
    units = np.full(len(w.file_sectors), five.UNITS["Track"], dtype=np.int64)
    units[w.file_class < 2] = unit
    return units


def all_file_units(w: five.FiveWorkload) -> dict[str, np.ndarray]:
    """Each method's per-file striping units (blocks): one advisor pass gives Opt (Phase A per file) and Opt140
    (per file with the global P-bar at 140/s); Gopt140 is five.tuned_unit, the unit five-cooling uses too."""
    m = disk_model()
    active = w.file_class < 2
    sizes = w.file_sectors[active]
    r_bar = float(sizes.mean())
    gopt = advise(m, n_disks=five.N_DISKS, workload=Workload(r_bar, r_bar, None, aligned=True))
    out = {k: global_units(w, five.UNITS[k]) for k in ("Block", "Track", "Cyl")}
    out["Gopt"] = global_units(w, next(r.striping_unit_blocks for r in gopt if r.file == "*"
                                       and r.method == "five_phase_a"))
    out["Gopt140"] = global_units(w, five.tuned_unit(w, TUNED_RATE).unit)
    distinct = np.unique(sizes)
    recs = advise(m, n_disks=five.N_DISKS, workload=Workload(r_bar, r_bar, TUNED_RATE, aligned=True),
                  files=[FileStats(str(s), float(s), float(s)) for s in distinct.tolist()])
    for method, want in (("Opt", "five_phase_a"), ("Opt140", "five")):
        by_size = {int(r.file): r.striping_unit_blocks for r in recs if r.file != "*" and r.method == want}
        units = global_units(w, five.UNITS["Track"])
        units[active] = [by_size[int(s)] for s in sizes.tolist()]
        out[method] = units
    return {k: out[k] for k in METHODS}


def run_point(w: five.FiveWorkload, method: str, units: np.ndarray, rate: float, seed: int,
              maps: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray]:
    """One (method, rate) run (method: one of METHODS, or "unit N" for a sweep point): its table row and each
    request's response (ms)."""
    if method not in maps:
        maps[method] = five.SharedArray(five.N_DISKS, five.striped_file_map(w, units))
    n = len(w.requests)
    sim = Simulation(five.spec(), maps[method], w.requests,
                     SimConfig(max_outstanding=MAX_OUTSTANDING, saturation_min_backlog=max(1, n // 100),
                               spindles="independent"),
                     np.random.default_rng(seed + 1), device_sectors=[w.logical_sectors])
    sim.run()
    r = sim.result()
    active = units[w.file_class < 2]
    paper = None
    if method in METHODS:
        paper = PAPER_LIGHT.get(method) if rate == LIGHT else PAPER.get(int(rate), (None,) * 7)[METHODS.index(method)]
    row = {"method": method, "rate_per_s": float(rate), "requests": r.requests, "saturated": r.saturated,
           "mean_response_ms": r.mean_response_ms, "p95_response_ms": r.p95_response_ms,
           "mean_utilization": r.mean_utilization, "hottest_utilization": r.hottest_utilization,
           "physical_ios": r.physical_ios, "unit_kb_min": int(active.min()), "unit_kb_max": int(active.max()),
           "unit_kb_mean": float(active.mean()), "paper_response_ms": paper}
    return row, sim.out.resp.astype(np.float64) / 1000.0


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("five-striping", TITLE, scale)
    cfg = SCALE[scale]
    base = five.workload(seed, cfg["requests"], LIGHT, "uniform")
    units = all_file_units(base)
    maps: dict[str, Any] = {}
    rows, size_rows = [], []
    # The same seed gives the same files and requests at every rate (only arrival times scale).
    for rate in (LIGHT, *cfg["rates"]):
        w = base if rate == LIGHT else five.workload(seed, cfg["requests"], rate, "uniform")
        for m in METHODS:
            row, resp = run_point(w, m, units[m], rate, seed, maps)
            rows.append(row)
            if rate == LIGHT:
                size_rows += _by_size(w, m, resp)
    grids = sweep_grids(units, base, cfg)
    sweep = gbest_sweep(base, units, rows, grids, seed, maps)
    load = load_sweep(base, cfg, seed)
    out.tables["responses"] = pa.Table.from_pylist(rows)
    out.tables["light_load_by_size"] = pa.Table.from_pylist(size_rows)
    out.tables["gbest_sweep"] = pa.Table.from_pylist(sweep)
    out.tables["gbest_by_load"] = pa.Table.from_pylist(load)
    _claims(out, rows, cfg)
    _gbest_claims(out, rows, sweep, load, base)
    out.claims.append(five.table4_claim(size_rows))
    _sections(out, rows, size_rows, units, base, cfg)
    out.sections += sweep_sections(sweep, load, grids, base)
    out.plots.append(("response_vs_rate.png", lambda p: _plot(p, rows)))
    return out.finish()


GLOBAL = ("Gopt", "Block", "Track", "Cyl", "Gopt140")


def _method_units(units: dict[str, np.ndarray], w: five.FiveWorkload) -> dict[int, list[str]]:
    """Each global method's unit (KB) and the methods striped with it."""
    active = w.file_class < 2
    by_unit: dict[int, list[str]] = {}
    for m in GLOBAL:
        by_unit.setdefault(int(units[m][active][0]), []).append(m)
    return by_unit


def sweep_grids(units: dict[str, np.ndarray], w: five.FiveWorkload, cfg: dict[str, Any]) -> dict[float, list[int]]:
    """The Gbest grid at λ = 1 and 140/s: the scale's grid, every global method's unit and the paper's units
    (Gbest 5 and Gopt 8 KB at λ = 1; Gbest 70 and Gopt-140 87 KB at 140/s)."""
    mine = set(_method_units(units, w))
    paper = {LIGHT: {PAPER_GBEST[LIGHT][0], PAPER_GOPT}, TUNED_RATE: {PAPER_GBEST[TUNED_RATE][0], five.PAPER_GOPT140}}
    return {rate: sorted(set(cfg["grid"][rate]) | mine | paper[rate]) for rate in (LIGHT, TUNED_RATE)}


def gbest_sweep(base: five.FiveWorkload, units: dict[str, np.ndarray], rows: list[dict[str, Any]],
                grids: dict[float, list[int]], seed: int, maps: dict[str, Any]) -> list[dict[str, Any]]:
    """Simulated mean response of each unit of the rate's grid at λ = 1 and 140 (a global method's own run
    where it has that unit); each row marks the methods with that unit and whether it is Gbest (the lowest
    response, the lowest unit on a tie)."""
    by_unit = _method_units(units, base)
    loads = {LIGHT: base, TUNED_RATE: five.workload(seed, len(base.requests), TUNED_RATE, "uniform")}
    out = []
    for u in sorted(set(grids[LIGHT]) | set(grids[TUNED_RATE])):
        for rate, w in loads.items():
            if u not in grids[rate]:
                continue
            if u in by_unit:
                r = _get(rows, by_unit[u][0], rate)
            else:
                r, _ = run_point(w, f"unit {u}", global_units(w, u), rate, seed, maps)
            out.append({"rate_per_s": rate, "unit_kb": u, "mean_response_ms": INF if r["saturated"] else
                        r["mean_response_ms"], "saturated": r["saturated"], "methods": ", ".join(by_unit.get(u, [])),
                        "gbest": False})
        maps.pop(f"unit {u}", None)          # a sweep point's map is not used again
    for rate in loads:
        here = [x for x in out if x["rate_per_s"] == rate]
        min(here, key=lambda x: (x["mean_response_ms"], x["unit_kb"]))["gbest"] = True
    return sorted(out, key=lambda x: (x["rate_per_s"], x["unit_kb"]))


def load_sweep(base: five.FiveWorkload, cfg: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The Gbest-at-140/s claim's sensitivity: global units of the scale's load grid at the load rate (120/s),
    the same files and requests; the best marked."""
    rate = cfg["load_rate"]
    w = five.workload(seed, len(base.requests), rate, "uniform")
    out = []
    for u in cfg["load_grid"]:
        r, _ = run_point(w, f"unit {u}", global_units(w, u), rate, seed, {})
        out.append({"rate_per_s": rate, "unit_kb": u, "mean_response_ms": INF if r["saturated"] else
                    r["mean_response_ms"], "mean_utilization": r["mean_utilization"], "best": False})
    min(out, key=lambda x: (x["mean_response_ms"], x["unit_kb"]))["best"] = True
    return out


def _by_size(w: five.FiveWorkload, method: str, resp: np.ndarray) -> list[dict[str, Any]]:
    kb = w.requests.sectors * five.spec().sector_size / 1024.0
    rows, low = [], 0.0
    for i, (high, label) in enumerate(SIZE_CLASSES):
        sel = (kb > low) & (kb <= (high if high is not None else np.inf))
        rows.append({"method": method, "size_class": label, "requests": int(sel.sum()),
                     "mean_response_ms": float(resp[sel].mean()) if sel.any() else None,
                     "paper_response_ms": PAPER_SIZES[label][METHODS.index(method)] if method in PAPER_LIGHT else None,
                     "order": i})
        low = float(high) if high is not None else low
    return rows


def _get(rows: list[dict[str, Any]], method: str, rate: float) -> dict[str, Any]:
    return next(r for r in rows if r["method"] == method and r["rate_per_s"] == rate)


def first_saturated(rows: list[dict[str, Any]], method: str, rates: tuple[float, ...]) -> float:
    """The lowest rate at which `method` saturated (inf when it never did)."""
    return min((r for r in rates if _get(rows, method, r)["saturated"]), default=INF)


#: "Almost a factor of two" (FIVE 4.1.1) as the paper's own table 5 has it at 140/s: Track and Cyl over Opt140
#: and Gopt140, 1.62..1.74; the claim's band is that range widened by 10 % ("close", its own margin).
PAPER_FACTOR = (min(PAPER[140][i] / PAPER[140][j] for i in (3, 4) for j in (5, 6)),
                max(PAPER[140][i] / PAPER[140][j] for i in (3, 4) for j in (5, 6)))
FACTOR_BAND = (PAPER_FACTOR[0] / 1.1, PAPER_FACTOR[1] * 1.1)


def _claims(out: ExperimentOutput, rows: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    light = {m: _get(rows, m, LIGHT)["mean_response_ms"] for m in METHODS}
    gap = abs(light["Opt"] / light["Block"] - 1.0)
    out.claims.append(Claim(
        "Opt near Block at light load", "at λ = 1, Opt's and Block's mean responses differ by at most 5 %",
        "24.54 vs 24.54 ms", f"{fmt(light['Opt'])} vs {fmt(light['Block'])} ms ({100 * gap:.1f} %)", bool(gap <= 0.05),
        "" if gap <= 0.05 else "see the light-load table",
        quote="The Opt method outperforms all other methods for almost all request size categories. However, the "
              "advantage over Block striping is marginal at best.",
        where="section 4.1.1, tables 3-4", wording="small"))
    gap = abs(light["Gopt"] / light["Opt"] - 1.0)
    out.claims.append(Claim(
        "Gopt close to Opt at light load", "at λ = 1, Gopt's and Opt's mean responses differ by at most 5 %",
        "24.75 vs 24.54 ms", f"{fmt(light['Gopt'])} vs {fmt(light['Opt'])} ms ({100 * gap:.1f} %)", bool(gap <= 0.05),
        "" if gap <= 0.05 else "see the light-load table",
        quote="The global striping method Gopt turned out to be very competitive to the file-specific striping "
              "method Opt; the advantage of Opt is more or less negligible throughout the spectrum of request sizes.",
        where="section 4.1.1, tables 3-4", wording="small"))
    rates = tuple(float(r) for r in cfg["rates"])
    sat = {m: first_saturated(rows, m, rates) for m in METHODS}
    out.claims.append(Claim(
        "Block saturates first", "Block's lowest saturated rate is below every other method's (∞: never)",
        "Block ∞ from 80/s; Opt from 100/s; Gopt from 120/s; Track, Cyl, Opt140, Gopt140 never (to 140/s)",
        "; ".join(f"{m} {'from ' + fmt(s) + '/s' if np.isfinite(s) else 'never'}" for m, s in sat.items()),
        bool(np.isfinite(sat["Block"]) and all(sat["Block"] < s for m, s in sat.items() if m != "Block")),
        "" if np.isfinite(sat["Block"]) and all(sat["Block"] < s for m, s in sat.items() if m != "Block") else
        "Block saturates no earlier than another method (table 5 here)",
        quote="80 112.48 97.02 ∞ 53.16 128.00 62.31 65.59", where="section 4.1.1, table 5 (λ = 80: Block's ∞, the "
              "first in the table)", wording="direction"))
    top = max(rates)
    hi = {m: _get(rows, m, top) for m in ("Track", "Cyl", "Opt140", "Gopt140")}
    ms = {m: INF if r["saturated"] else r["mean_response_ms"] for m, r in hi.items()}
    ratio = {(a, b): ms[a] / ms[b] for a in ("Track", "Cyl") for b in ("Opt140", "Gopt140")}
    lo, up = FACTOR_BAND
    out_of_band = [k for k, v in ratio.items() if not lo <= v <= up]
    below = {m: _get(rows, m, 120.0) for m in ("Track", "Gopt140")} if 120 in cfg["rates"] else {}
    out.claims.append(Claim(
        "λ-tuned methods beat Track and Cyl by almost a factor of two at 140/s",
        f"at {fmt(top)}/s, each of Track and Cyl over each of Opt140 and Gopt140 within 10 % of the paper's own "
        f"'almost a factor of two' ({PAPER_FACTOR[0]:.2f}..{PAPER_FACTOR[1]:.2f}): {lo:.2f}..{up:.2f}",
        f"Track 206.71, Cyl 211.29 vs Opt140 121.26, Gopt140 127.49 ms ({PAPER_FACTOR[0]:.2f}..{PAPER_FACTOR[1]:.2f}x)",
        ", ".join(f"{m} {fmt(v)}" for m, v in ms.items()) + " ms ("
        + ", ".join(f"{a}/{b} {v:.2f}" for (a, b), v in ratio.items()) + ")", bool(not out_of_band),
        "" if not out_of_band else
        f"{', '.join(f'{a}/{b}' for a, b in out_of_band)} outside the band: Track is at the edge of saturation at "
        f"{fmt(top)}/s here (mean utilization {hi['Track']['mean_utilization']:.2f}"
        + (f"; its response grows {ms['Track'] / below['Track']['mean_response_ms']:.1f}x from 120/s, FIVE's "
           f"{PAPER[140][3] / PAPER[120][3]:.1f}x" if below else "")
        + f"), while Cyl's ratios ({ratio[('Cyl', 'Opt140')]:.2f}) are "
        + ("inside" if lo <= ratio[("Cyl", "Opt140")] <= up else "outside") + " the band",
        quote="The striping methods that are specifically tuned for a particular arrival rate outperform both Track "
              "and Cyl by almost a factor of two (in the case of $\\lambda=140$).",
        where="section 4.1.1, table 5", wording="close"))


def p_bar_by_rate(r_bar: float, rates: tuple[float, ...] = (100.0, 110.0, 120.0, 130.0, 140.0)) -> dict[float, int]:
    """Phase B's P-bar for R-bar on the table-1 disk at each rate (where it switches from 3 to 2)."""
    return {r: int(phase_b(disk_model(), r_bar, r, five.N_DISKS).p_bar or 0) for r in rates}


def gopt_by_seek_slope(r: float = PAPER_R_BAR,
                       slopes: tuple[float, ...] = tuple(np.round(np.arange(0.008, 0.0301, 0.0005), 4))
                       ) -> dict[float, int]:
    """Phase A's global unit ceil(R / P_opt) for requests of r KB on the table-1 disk with the seek line's
    slope e (equation 8, ms per cylinder) replaced by each of `slopes`: what FIVE's 8 KB needs."""
    m = disk_model()
    out = {}
    for e in slopes:
        p = phase_a(dataclasses.replace(m, seek_e_ms=float(e)), r).p_opt
        out[float(e)] = -(-int(r) // p)
    return out


def _gbest_claims(out: ExperimentOutput, rows: list[dict[str, Any]], sweep: list[dict[str, Any]],
                  load: list[dict[str, Any]], w: five.FiveWorkload) -> None:
    tuned = five.tuned_unit(w, TUNED_RATE)
    b = tuned.phase_b
    at = {(x["rate_per_s"], x["unit_kb"]): x["mean_response_ms"] for x in sweep}
    best = {x["rate_per_s"]: x for x in sweep if x["gbest"]}
    m = disk_model()
    # FIVE's Gopt: Phase A for R = 260 KB.
    a260 = phase_a(m, PAPER_R_BAR)
    gopt260 = -(-int(PAPER_R_BAR) // a260.p_opt)
    gopt = int(all_file_units(w)["Gopt"][w.file_class < 2][0])
    slopes = [e for e, u in gopt_by_seek_slope().items() if u == PAPER_GOPT]
    p8 = -(-int(PAPER_R_BAR) // PAPER_GOPT)      # the smallest P giving 8 KB units
    flat = a260.service_ms[p8 - 1] / a260.service_ms[a260.p_opt - 1] - 1.0
    sim8 = at.get((LIGHT, PAPER_GOPT))
    out.claims.append(Claim(
        "Gopt (Phase A for R = 260 KB) is 8 KB",
        "Phase A (equation 16 minimized over P) on the table-1 disk for R = 260 KB: ceil(R / P_opt) equals 8 KB",
        "8 KB", f"{gopt260} KB (P_opt {a260.p_opt}); for our R-bar {tuned.r_bar:.1f} KB {gopt} KB",
        gopt260 == PAPER_GOPT,
        "" if gopt260 == PAPER_GOPT else
        f"equation 16 is flat near its minimum ({fmt(a260.service_ms[p8 - 1])} ms at P = {p8}, FIVE's 8 KB, against "
        f"{fmt(a260.service_ms[a260.p_opt - 1])} ms at P_opt = {a260.p_opt}: {100 * flat:.1f} %), so the optimum "
        f"follows the seek line's slope e: 8 KB needs e = "
        + (f"{min(slopes):.4f}..{max(slopes):.4f}" if slopes else "none of 0.008..0.030")
        + f" ms per cylinder, the table-1 spec's seek curve gives {m.seek_e_ms:.4f}"
        + (f"; simulated at λ = 1, 8 KB {fmt(sim8)} ms against {gopt} KB {fmt(at[(LIGHT, gopt)])} ms"
           if sim8 is not None and (LIGHT, gopt) in at else ""),
        quote="*Gopt*: the striping unit for each file is the global optimum of 8 KBytes, which was determined by "
              "using the first step of the heuristic method of Section 2 under the assumption that all files have the "
              "same average request size $R = 260$ KBytes.",
        where="section 4.1.1, table 3"))
    ours, paper_unit = tuned.unit, five.PAPER_GOPT140
    switch = p_bar_by_rate(tuned.r_bar)
    three = [r for r, p in switch.items() if p == 3]
    sim_cmp = (f"simulated at 140/s: {ours} KB {fmt(at[(TUNED_RATE, ours)])} ms, {paper_unit} KB "
               f"{fmt(at[(TUNED_RATE, paper_unit)])} ms")
    out.claims.append(Claim(
        "Gopt-140 is ceil(260 / 3) = 87 KB",
        "Figure 2 on the table-1 disk for R-bar (requested files' mean) at 140/s: ceil(R-bar / min(P_opt, P-bar)) "
        "equals 87 KB",
        "87 KB (R-bar 260 KB, P-bar 3)",
        f"{ours} KB (R-bar {tuned.r_bar:.1f} KB, P_opt {tuned.p_opt}, P-bar {tuned.p_bar})", ours == paper_unit,
        "" if ours == paper_unit else
        f"P-bar: equation 25 on the table-1 disk at 140/s gives {fmt(b.response_ms[1])} ms at P = 2 and "
        f"{fmt(b.response_ms[2])} ms at P = 3 (rho {fmt(b.rho[1], 2)} and {fmt(b.rho[2], 2)}); P-bar is 3 only up "
        f"to {fmt(max(three)) if three else '-'}/s; {sim_cmp}",
        quote="*Gopt-140*: the optimal global striping unit is computed for a request arrival rate of "
              "$\\lambda = 140$. The corresponding striping unit size is $\\lceil 260/3 \\rceil = 87$ KBytes.",
        where="section 4.1.1, table 5"))
    light = best[LIGHT]
    lo = {m: _get(rows, m, LIGHT)["mean_response_ms"] / light["mean_response_ms"] - 1.0 for m in ("Opt", "Gopt")}
    ok = bool(all(abs(v) <= 0.05 for v in lo.values()))
    out.claims.append(Claim(
        "Opt and Gopt close to Gbest at light load",
        "at λ = 1, Opt and Gopt each within 5 % of Gbest (the best unit of the λ = 1 grid)",
        "Gbest 5 KB, almost identical to Opt and Gopt (24.54, 24.75 ms)",
        f"Gbest {light['unit_kb']} KB {fmt(light['mean_response_ms'])} ms; "
        + ", ".join(f"{m} {100 * v:+.1f} %" for m, v in lo.items()), ok,
        "" if ok else "see the Gbest sweep table",
        quote="For this particular workload the Gbest method has a striping unit of 5 KBytes and its performance was "
              "almost identical to that of Opt and Gopt.",
        where="section 4.1.1, table 3", wording="small"))
    high = best[TUNED_RATE]
    hi = {m: _get(rows, m, TUNED_RATE)["mean_response_ms"] / high["mean_response_ms"] - 1.0
          for m in ("Opt140", "Gopt140")}
    ok = bool(all(v <= 0.15 * 1.2 for v in hi.values()))
    out.claims.append(Claim(
        "Opt-140 and Gopt-140 within about 10-15 % of Gbest at 140/s",
        "at 140/s, Opt140 and Gopt140 each at most 18 % (15 % and 20 % more) above Gbest, the best unit of the "
        "140/s grid (methods' units are grid points among others)",
        "Gbest 70 KB, about 110 ms; Opt140 121.26 (+10 %), Gopt140 127.49 ms (+16 %)",
        f"Gbest {high['unit_kb']} KB {fmt(high['mean_response_ms'])} ms; "
        + ", ".join(f"{m} {100 * v:+.1f} %" for m, v in hi.items()), ok,
        "" if ok else "see the Gbest sweep table",
        quote="Thus, the fact that both the Opt and the Gopt methods approached the real optima within approximately "
              "10 to 15 percent is indeed a successful result and demonstrates the viability of our tuning heuristics.",
        where="section 4.1.1, table 5", wording="about"))
    unit_ok = about(high["unit_kb"], PAPER_GBEST[TUNED_RATE][0])
    ms_ok = about(high["mean_response_ms"], PAPER_GBEST[TUNED_RATE][1])
    near = [x["unit_kb"] for x in sweep if x["rate_per_s"] == TUNED_RATE
            and x["mean_response_ms"] <= 1.05 * high["mean_response_ms"]]
    lbest = next(x for x in load if x["best"])
    l70 = next((x for x in load if x["unit_kb"] == PAPER_GBEST[TUNED_RATE][0]), None)
    track = _get(rows, "Track", TUNED_RATE)
    out.claims.append(Claim(
        "Gbest at 140/s: 70 KB, about 110 ms",
        "the best unit of the 140/s grid within 20 % of 70 KB and its mean response within 20 % of 110 ms",
        "70 KB, about 110 ms",
        f"{high['unit_kb']} KB, {fmt(high['mean_response_ms'])} ms (70 KB: {fmt(at.get((TUNED_RATE, 70)))} ms)",
        bool(unit_ok and ms_ok),
        "" if unit_ok and ms_ok else
        f"the best unit falls with load: at {fmt(lbest['rate_per_s'])}/s (sensitivity) it is {lbest['unit_kb']} KB"
        + (f" and 70 KB is {100 * (l70['mean_response_ms'] / lbest['mean_response_ms'] - 1):+.1f} % from it"
           if l70 else "")
        + f", and our array is busier at 140/s than FIVE's (Track "
        f"{fmt(INF if track['saturated'] else track['mean_response_ms'])} ms against 206.71); near the optimum "
        f"the curve is flat (units {min(near)}..{max(near)} KB within 5 % of the best)",
        quote="For $\\lambda=140$ the response time of Gbest was approximately 110 ms, and this was obtained for a "
              "global striping unit of 70 KBytes.",
        where="section 4.1.1, table 5", wording="about"))


def sweep_sections(sweep: list[dict[str, Any]], load: list[dict[str, Any]], grids: dict[float, list[int]],
                   w: five.FiveWorkload) -> list[str]:
    """The Gbest sweep and its grids beside Phase A (Gopt) and Phase B (Gopt-140), the load sensitivity,
    Phase B's P-bar by rate and Phase A's unit by seek slope."""
    rows = []
    cell = {(x["rate_per_s"], x["unit_kb"]): x for x in sweep}
    for u in sorted({x["unit_kb"] for x in sweep}):
        row: dict[str, Any] = {"unit (KB)": u}
        for rate, col in ((LIGHT, "λ = 1 (ms)"), (TUNED_RATE, "λ = 140 (ms)")):
            x = cell.get((rate, u))
            row[col] = "-" if x is None else fmt(x["mean_response_ms"]) + (" Gbest" if x["gbest"] else "")
        row["methods"] = next(x["methods"] for x in sweep if x["unit_kb"] == u) or "-"
        rows.append(row)
    tuned = five.tuned_unit(w, TUNED_RATE)
    pb = [{"λ": r, "P-bar": p, "Gopt unit (KB)": -(-int(tuned.r_bar * 1000) // (p * 1000)) if p else "-"}
          for r, p in p_bar_by_rate(tuned.r_bar).items()]
    eq25 = [{"P": p + 1, "rho": fmt(tuned.phase_b.rho[p], 3), "eq. 25 (ms)": fmt(tuned.phase_b.response_ms[p])}
            for p in range(4)]
    by_e = gopt_by_seek_slope()
    slope = [{"e (ms per cylinder)": e, "Gopt for R = 260 KB (KB)": u} for e, u in by_e.items()
             if round(e * 1e4) % 20 == 0 or u == PAPER_GOPT]
    ld = [{"unit (KB)": x["unit_kb"], "mean response (ms)": fmt(x["mean_response_ms"]) + (" best" if x["best"] else ""),
           "mean utilization": fmt(x["mean_utilization"], 3)} for x in load]
    return ["## Gbest sweep beside Phase A and B\n\nSimulated mean response of each global unit (requested files; "
            "class C in Track units). Phase A gives Gopt, Phase B at 140/s Gopt-140; FIVE's Gbest: 5 KB at λ = 1, "
            f"70 KB (about 110 ms) at 140/s. Grid at λ = 1: {', '.join(map(str, grids[LIGHT]))} KB; at 140/s: "
            f"{', '.join(map(str, grids[TUNED_RATE]))} KB (-: not on that rate's grid).",
            markdown_table(rows, ["unit (KB)", "λ = 1 (ms)", "λ = 140 (ms)", "methods"]),
            f"## Gbest at {fmt(load[0]['rate_per_s'])}/s (sensitivity: the best unit at a lower load)",
            markdown_table(ld, ["unit (KB)", "mean response (ms)", "mean utilization"]),
            f"## Phase B's P-bar for R-bar = {tuned.r_bar:.1f} KB (FIVE: 3 at 140/s, R-bar 260 KB)",
            markdown_table(pb, ["λ", "P-bar", "Gopt unit (KB)"]), "Equation 25 at 140/s:",
            markdown_table(eq25, ["P", "rho", "eq. 25 (ms)"]),
            f"## Phase A's Gopt for R = 260 KB by the seek line's slope e (FIVE: 8 KB; ours e = "
            f"{disk_model().seek_e_ms:.4f})",
            markdown_table(slope, ["e (ms per cylinder)", "Gopt for R = 260 KB (KB)"])]


def _sections(out: ExperimentOutput, rows: list[dict[str, Any]], size_rows: list[dict[str, Any]],
              units: dict[str, np.ndarray], w: five.FiveWorkload, cfg: dict[str, Any]) -> None:
    active = w.file_class < 2
    unit_rows = [{"method": m, "ours (KB)": (str(int(u[active][0])) if m not in ("Opt", "Opt140") else
                                             f"{int(u[active].min())}..{int(u[active].max())} "
                                             f"(mean {u[active].mean():.1f})"),
                  "paper (KB)": PAPER_UNITS_KB[m]} for m, u in units.items()]
    light = [{"method": m, "ours": _get(rows, m, LIGHT)["mean_response_ms"], "paper": PAPER_LIGHT.get(m)}
             for m in METHODS]
    sizes = []
    for _, label in SIZE_CLASSES:
        row: dict[str, Any] = {"size (KB)": label}
        for m in METHODS:
            r = next(x for x in size_rows if x["method"] == m and x["size_class"] == label)
            row[m] = f"{fmt(r['mean_response_ms'])} ({fmt(r['paper_response_ms'])})"
        sizes.append(row)
    table = []
    for rate in cfg["rates"]:
        row = {"λ": rate}
        for m in METHODS:
            r = _get(rows, m, float(rate))
            row[m] = f"{fmt(INF if r['saturated'] else r['mean_response_ms'])} ({fmt(r['paper_response_ms'])})"
        table.append(row)
    out.sections += [
        f"## Setup\n\n{cfg['requests']:,} requests per rate (FIVE: 1,000,000), 32 disks of `five_table1`, detailed "
        f"disk model, FCFS; files striped round robin. Mean requested-file size (R-bar): "
        f"{w.file_sectors[active].mean():.1f} KB (paper 260).",
        "## Striping units", markdown_table(unit_rows, ["method", "ours (KB)", "paper (KB)"]),
        "Opt-140 and Gopt-140 coincide here: with whole-file requests (R_i = L_i), step 3 gives each file "
        "P_i = P-bar L_i / R-bar, so step 4's unit ceil(L_i / P_i) = ceil(R-bar / P-bar) for every file that "
        "P_opt,i does not bound, and a file smaller than the unit is one unit under both. The paper's figures "
        "differ by 5 %, presumably from per-file request sizes that were not the file sizes.",
        "## Light load (λ = 1): mean response in ms (table 3)", markdown_table(light, ["method", "ours", "paper"]),
        "## Light load by request size: ours (paper's table 4), ms", markdown_table(sizes, ["size (KB)", *METHODS]),
        "## Mean response time in ms over arrival rates: ours (paper's table 5)",
        markdown_table(table, ["λ", *METHODS]),
    ]


def _plot(path: Path, rows: list[dict[str, Any]]) -> None:
    fig, (ax,) = new_figure(1, width=7.5)
    for i, m in enumerate(METHODS):
        pts = sorted((r["rate_per_s"], r["mean_response_ms"], r["saturated"]) for r in rows
                     if r["method"] == m and r["rate_per_s"] != LIGHT)
        ok = [(x, y) for x, y, s in pts if not s and np.isfinite(y)]
        ax.plot([p[0] for p in ok], [p[1] for p in ok], marker="o", color=f"C{i}", label=m)
        sat = [x for x, y, s in pts if s or not np.isfinite(y)]
        ax.plot(sat, [5000] * len(sat), "x", color=f"C{i}", markersize=9)
    ax.set_xlabel("arrival rate λ (requests/s)")
    ax.set_ylabel("mean response time (ms); x = saturated")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(ncol=2)
    save_figure(fig, path, "FIVE table 5: uniform workload, striping methods over arrival rates")

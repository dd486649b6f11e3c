"""`five-striping`: FIVE's tables 3-5, the uniform synthetic workload on the 32 disks of table 1 striped by
Opt, Gopt, Block, Track, Cyl, Opt-140 and Gopt-140, at light load (lambda = 1, with table 4's breakdown by
request size) and over arrival rates 20..140 per second.

Choices where the paper is open (one line each, tested in tests/libs/experiments/test_five.py):
- units come from our advisor (libs.plans.striping_advisor.advise) on the table-1 disk, not the paper's printed values:
  Gopt is the global Phase A unit for R-bar = the mean size of the requested files (ours 5 KB; the paper's
  Gopt 8 KB, its exhaustive Gbest 5 KB), Gopt-140 the global unit at 140/s (five.gopt140, also five-cooling's),
  Opt and Opt-140 the same per file with R_i = L_i (each request reads its whole file: aligned);
- Gbest: the best simulated global unit (requested files; class C in Track units) at λ = 1 and 140 over
  powers of two to a cylinder, a track, the paper's 5, 70 and 87 KB and every global method's unit (full
  scale), over the methods' units and 8, 64, 70 and 87 KB at tiny scale; the lowest unit wins a tie;
- the never-requested class-C files are striped in Track units under every method, so methods differ only
  in how the requested files are striped (and Block stays an extent map of about 760,000 units);
- files are dealt round robin in logical order with one cursor (libs.experiments.five.striped_file_map);
- spindles independent (FIVE's equation 9 charges a striped request the slowest of its disks' rotations);
- requests per rate: 20,000 at full scale (FIVE: 1 million), 3,000 at tiny scale; the same files and
  request sequence at every rate (one seed), only arrival times scale; saturated ("∞") as in five-cooling.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.libs.experiments import five
from blockheat.libs.experiments.common import Claim, ExperimentOutput, fmt, markdown_table, new_figure, save_figure
from blockheat.libs.experiments.five import INF, MAX_OUTSTANDING
from blockheat.libs.plans.striping_advisor import FileStats, Workload, advise, default_sweep, phase_b
from blockheat.sim import SimConfig, Simulation

TITLE = "FIVE striping methods on the uniform synthetic workload (FIVE tables 3-5)"
METHODS = ("Opt", "Gopt", "Block", "Track", "Cyl", "Opt140", "Gopt140")
TUNED_RATE = five.TUNED_RATE
LIGHT = 1.0
RATES = (20, 40, 60, 80, 100, 120, 140)
#: FIVE 4.1.1's exhaustive Gbest: 5 KB at light load; 70 KB (about 110 ms) at 140/s.
PAPER_GBEST = {LIGHT: (5, 24.54), TUNED_RATE: (70, 110.0)}
SCALE = {"full": {"requests": 20_000, "rates": RATES, "sweep": (5, 70, 87)},
         "tiny": {"requests": 3_000, "rates": (20, 80, 140), "sweep": (8, 64, 70, 87)}}
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
    sweep = gbest_sweep(base, units, rows, cfg, seed, maps, full=scale == "full")
    out.tables["responses"] = pa.Table.from_pylist(rows)
    out.tables["light_load_by_size"] = pa.Table.from_pylist(size_rows)
    out.tables["gbest_sweep"] = pa.Table.from_pylist(sweep)
    _claims(out, rows, cfg)
    _gbest_claims(out, rows, sweep, base)
    _sections(out, rows, size_rows, units, base, cfg)
    out.sections += sweep_sections(sweep, base)
    out.plots.append(("response_vs_rate.png", lambda p: _plot(p, rows)))
    return out.finish()


GLOBAL = ("Gopt", "Block", "Track", "Cyl", "Gopt140")


def gbest_sweep(base: five.FiveWorkload, units: dict[str, np.ndarray], rows: list[dict[str, Any]],
                cfg: dict[str, Any], seed: int, maps: dict[str, Any], *, full: bool) -> list[dict[str, Any]]:
    """Simulated mean response of each global unit at λ = 1 and 140 (a global method's own run where it has
    that unit); each row marks the methods with that unit and whether it is Gbest (the lowest response)."""
    active = base.file_class < 2
    by_unit: dict[int, list[str]] = {}
    for m in GLOBAL:
        by_unit.setdefault(int(units[m][active][0]), []).append(m)
    grid = sorted(set(cfg["sweep"]) | set(by_unit) | (set(default_sweep(disk_model())) if full else set()))
    out = []
    for rate in (LIGHT, TUNED_RATE):
        w = base if rate == LIGHT else five.workload(seed, cfg["requests"], rate, "uniform")
        for u in grid:
            if u in by_unit:
                r = _get(rows, by_unit[u][0], rate)
            else:
                r, _ = run_point(w, f"unit {u}", global_units(w, u), rate, seed, maps)
            ms = INF if r["saturated"] else r["mean_response_ms"]
            out.append({"rate_per_s": rate, "unit_kb": u, "mean_response_ms": ms, "saturated": r["saturated"],
                        "methods": ", ".join(by_unit.get(u, [])), "gbest": False})
        here = [x for x in out if x["rate_per_s"] == rate]
        min(here, key=lambda x: (x["mean_response_ms"], x["unit_kb"]))["gbest"] = True
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


def _claims(out: ExperimentOutput, rows: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    light = {m: _get(rows, m, LIGHT)["mean_response_ms"] for m in METHODS}
    out.claims.append(Claim(
        "Opt near Block at light load", "at λ = 1, Opt's mean response within 10 % of Block's",
        "24.54 vs 24.54 ms", f"{fmt(light['Opt'])} vs {fmt(light['Block'])} ms",
        abs(light["Opt"] / light["Block"] - 1.0) <= 0.10))
    out.claims.append(Claim(
        "Gopt close to Opt at light load", "at λ = 1, Gopt within 10 % of Opt",
        "24.75 vs 24.54 ms", f"{fmt(light['Gopt'])} vs {fmt(light['Opt'])} ms",
        abs(light["Gopt"] / light["Opt"] - 1.0) <= 0.10))
    rates = tuple(float(r) for r in cfg["rates"])
    sat = {m: first_saturated(rows, m, rates) for m in METHODS}
    out.claims.append(Claim(
        "Block saturates first", "Block's lowest saturated rate is below every other method's (∞: never)",
        "Block ∞ from 80/s; Opt from 100/s; Gopt from 120/s; Track, Cyl, Opt140, Gopt140 never (to 140/s)",
        "; ".join(f"{m} {'from ' + fmt(s) + '/s' if np.isfinite(s) else 'never'}" for m, s in sat.items()),
        bool(np.isfinite(sat["Block"]) and all(sat["Block"] < s for m, s in sat.items() if m != "Block"))))
    top = max(rates)
    hi = {m: _get(rows, m, top)["mean_response_ms"] for m in ("Track", "Cyl", "Opt140", "Gopt140")}
    out.claims.append(Claim(
        "λ-tuned methods beat Track and Cyl at high load",
        f"at {fmt(top)}/s, Opt140 and Gopt140 each below both Track and Cyl",
        "140/s: Opt140 121.26, Gopt140 127.49 vs Track 206.71, Cyl 211.29 ms",
        ", ".join(f"{m} {fmt(v)}" for m, v in hi.items()) + " ms",
        bool(max(hi["Opt140"], hi["Gopt140"]) < min(hi["Track"], hi["Cyl"]))))


def p_bar_by_rate(r_bar: float, rates: tuple[float, ...] = (100.0, 110.0, 120.0, 130.0, 140.0)) -> dict[float, int]:
    """Phase B's P-bar for R-bar on the table-1 disk at each rate (where it switches from 3 to 2)."""
    return {r: int(phase_b(disk_model(), r_bar, r, five.N_DISKS).p_bar or 0) for r in rates}


def _gbest_claims(out: ExperimentOutput, rows: list[dict[str, Any]], sweep: list[dict[str, Any]],
                  w: five.FiveWorkload) -> None:
    tuned = five.tuned_unit(w, TUNED_RATE)
    b = tuned.phase_b
    at = {(x["rate_per_s"], x["unit_kb"]): x["mean_response_ms"] for x in sweep}
    best = {x["rate_per_s"]: x for x in sweep if x["gbest"]}
    ours, paper_unit = tuned.unit, five.PAPER_GOPT140
    switch = p_bar_by_rate(tuned.r_bar)
    three = [r for r, p in switch.items() if p == 3]
    sim_cmp = (f"simulated at 140/s: {ours} KB {fmt(at[(TUNED_RATE, ours)])} ms, {paper_unit} KB "
               f"{fmt(at[(TUNED_RATE, paper_unit)])} ms")
    out.claims.append(Claim(
        "Gopt-140 is ceil(260 / 3) = 87 KB",
        "Figure 2 on the table-1 disk for R-bar (requested files' mean) at 140/s: ceil(R-bar / min(P_opt, P-bar))",
        "87 KB (R-bar 260 KB, P-bar 3)",
        f"{ours} KB (R-bar {tuned.r_bar:.1f} KB, P_opt {tuned.p_opt}, P-bar {tuned.p_bar})", ours == paper_unit,
        "" if ours == paper_unit else
        f"P-bar: equation 25 on the table-1 disk at 140/s gives {fmt(b.response_ms[1])} ms at P = 2 and "
        f"{fmt(b.response_ms[2])} ms at P = 3 (rho {fmt(b.rho[1], 2)} and {fmt(b.rho[2], 2)}); P-bar is 3 only up "
        f"to {fmt(max(three)) if three else '-'}/s; {sim_cmp}"))
    light = best[LIGHT]
    lo = {m: _get(rows, m, LIGHT)["mean_response_ms"] / light["mean_response_ms"] - 1.0 for m in ("Opt", "Gopt")}
    ok = all(v <= 0.10 for v in lo.values())
    out.claims.append(Claim(
        "Opt and Gopt close to Gbest at light load",
        "at λ = 1, Opt and Gopt each within 10 % of Gbest (the best unit of the sweep)",
        "Gbest 5 KB, almost identical to Opt and Gopt",
        f"Gbest {light['unit_kb']} KB {fmt(light['mean_response_ms'])} ms; "
        + ", ".join(f"{m} {100 * v:+.1f} %" for m, v in lo.items()), ok,
        "" if ok else "see the Gbest sweep table"))
    high = best[TUNED_RATE]
    hi = {m: _get(rows, m, TUNED_RATE)["mean_response_ms"] / high["mean_response_ms"] - 1.0
          for m in ("Opt140", "Gopt140")}
    ok = all(v <= 0.15 for v in hi.values())
    out.claims.append(Claim(
        "Opt-140 and Gopt-140 within about 10-15 % of Gbest at 140/s",
        "at 140/s, Opt140 and Gopt140 each within 15 % of Gbest's mean response",
        "Gbest 70 KB, about 110 ms; Opt140 121.26 (+10 %), Gopt140 127.49 ms (+16 %)",
        f"Gbest {high['unit_kb']} KB {fmt(high['mean_response_ms'])} ms; "
        + ", ".join(f"{m} {100 * v:+.1f} %" for m, v in hi.items()), ok,
        "" if ok else "see the Gbest sweep table"))


def sweep_sections(sweep: list[dict[str, Any]], w: five.FiveWorkload) -> list[str]:
    """The Gbest sweep beside Phase A (Gopt) and Phase B (Gopt-140), and Phase B's P-bar by rate."""
    rows = []
    for u in sorted({x["unit_kb"] for x in sweep}):
        a, b = (next(x for x in sweep if x["unit_kb"] == u and x["rate_per_s"] == r) for r in (LIGHT, TUNED_RATE))
        rows.append({"unit (KB)": u, "λ = 1 (ms)": fmt(a["mean_response_ms"]) + (" Gbest" if a["gbest"] else ""),
                     "λ = 140 (ms)": fmt(b["mean_response_ms"]) + (" Gbest" if b["gbest"] else ""),
                     "methods": a["methods"] or "-"})
    tuned = five.tuned_unit(w, TUNED_RATE)
    pb = [{"λ": r, "P-bar": p, "Gopt unit (KB)": -(-int(tuned.r_bar * 1000) // (p * 1000)) if p else "-"}
          for r, p in p_bar_by_rate(tuned.r_bar).items()]
    eq25 = [{"P": p + 1, "rho": fmt(tuned.phase_b.rho[p], 3), "eq. 25 (ms)": fmt(tuned.phase_b.response_ms[p])}
            for p in range(4)]
    return ["## Gbest sweep beside Phase A and B\n\nSimulated mean response of each global unit (requested files; "
            "class C in Track units). Phase A gives Gopt, Phase B at 140/s Gopt-140; FIVE's Gbest: 5 KB at λ = 1, "
            "70 KB (about 110 ms) at 140/s.",
            markdown_table(rows, ["unit (KB)", "λ = 1 (ms)", "λ = 140 (ms)", "methods"]),
            f"## Phase B's P-bar for R-bar = {tuned.r_bar:.1f} KB (FIVE: 3 at 140/s, R-bar 260 KB)",
            markdown_table(pb, ["λ", "P-bar", "Gopt unit (KB)"]), "Equation 25 at 140/s:",
            markdown_table(eq25, ["P", "rho", "eq. 25 (ms)"])]


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

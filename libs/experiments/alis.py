"""`alis`: ALIS's heat, run and combined clustering (Hsu, Smith, Young, sections 5.3 and 6) replayed on the
bundled hplajw week through the simulator's redirector, against the unreorganized disk, with the
sensitivity sweeps of figures 10 (context size, graph size, beta, edge threshold; run clustering alone) and
15 (reorganized-area size) at reduced scale.

Choices where the paper is open or the trace differs (one line each, tested in
tests/libs/experiments/test_alis.py):
- disk: the paper's IBM Ultrastar 73LZX, resource-poor configuration (the shipped 36.7 GB spec: an 8 MB cache
  in 16 segments with read-ahead); the week's 336 MB fill 0.9 % of it (the paper's traces about 65 %);
- the two traced disks form one volume, device 1 after device 0 (the paper concatenates multi-volume
  workloads), on one disk; its RA (15 % of the sectors used) is inserted 30 % into it, moving the home
  data behind it up (the baseline keeps the plain volume, no area);
- replay: open loop at the trace's own times (not the paper's issue-window model), FCFS;
- warm-up: day 0 is simulated, not measured (the first realizable reorganization ends it); every figure is
  over the requests completing from day 1 on;
- defaults: AlisParams's (libs.alis's: tau 9, f 1, beta 0.8, alpha 0.8, graph 0.5 % of the storage used, run
  threshold 0.1 alone and 0.4 combined, runs of at least tau units, sequential heat layout, writes counted in
  heat, RunHeat writes, daily reorganization, realizable plans);
- improvement = (baseline - ALIS) / baseline of a figure (the paper's definition), in percent;
- "most of the benefit" = within TOLERANCE_PP percentage points of the best value in the sweep;
- scale: full is the whole week with 4-5 values per swept parameter; tiny the first DAYS_TINY days (the
  runs found in the busy days 4-6 dominate the planning time) with 2 values each.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from libs.experiments.common import Claim, ExperimentOutput, fmt, markdown_table, new_figure, save_figure
from libs.experiments.placement import load_hplajw
from sim.alis.layout import MODES
from sim.alis.params import DAY_US, AlisParams
from sim.alis.policy import prepare, run_measured
from sim.array import Concatenated, DiskArray
from sim.engine import SimConfig, Simulation
from sim.records import Requests
from sim.spec import DiskSpec
from sim.specs import load as load_spec

TITLE = "ALIS heat, run and combined clustering on the hplajw week (ALIS sections 5.3 and 6, figures 10, 14, 15)"
SPEC_NAME = "ibm_ultrastar_73lzx"
TOLERANCE_PP = 2.0
#: Figure 10's panels (run clustering alone) and figure 15's area sizes; defaults in AlisParams.
SWEEPS = {
    "full": {"tau": (2, 4, 9, 16), "graph_share": (0.0005, 0.001, 0.005, 0.01), "beta": (0.1, 0.5, 0.8, 1.0),
             "threshold": (0.0, 0.1, 0.4, 1.0), "ra_share": (0.01, 0.05, 0.10, 0.15, 0.20)},
    "tiny": {"tau": (2, 9), "graph_share": (0.0005, 0.005), "beta": (0.1, 0.8), "threshold": (0.1, 1.0),
             "ra_share": (0.10, 0.15)},
}
FIG10 = ("tau", "graph_share", "beta", "threshold")
DAYS_TINY = 4
#: The paper's figures (server workloads, resource-poor unless noted; table 2 and sections 5-6).
PAPER = {
    "baseline": "table 2, S-Avg. resource-poor: read response 2.67 ms, read service 1.91 ms, read miss ratio 0.349, "
                "write service 1.32 ms (P-Avg.: 3.34, 2.22, 0.431, 1.41)",
    "heat": "up to 29 % (sequential layout, 4 KB units; figure A-1(d))",
    "combined": "37 % base servers, 50 % merged servers; PCs about 17 % (section 6.1)",
    "write": "RunHeat: 5-10 % better write service for most workloads, up to 22 % for the base servers (6.3)",
    "lookahead": "lookahead beats history by about 40-50 % for run and combined clustering; small for heat (6.4)",
}


@dataclass(frozen=True, eq=False)
class Workload:
    requests: Requests
    spec: DiskSpec
    device_sectors: tuple[int, ...]


def load(spec: DiskSpec | None = None, *, days: int | None = None) -> Workload:
    """The hplajw week (or its first `days` days) in `spec`'s sectors (default the 73LZX's 512 bytes): byte
    extents from the trace's 256-byte sectors, each device's size its highest address used over the week
    (the paper's storage used)."""
    spec = load_spec(SPEC_NAME) if spec is None else spec
    traced = load_hplajw()
    r = traced.requests
    byte = r.lbn * traced.spec.sector_size
    end = byte + r.sectors.astype(np.int64) * traced.spec.sector_size
    lbn = byte // spec.sector_size
    sectors = -(-end // spec.sector_size) - lbn
    req = Requests(r.arrival_us, r.device, lbn, sectors.astype(np.int32), r.flags)
    ends = np.zeros(int(r.device.max()) + 1, np.int64)
    np.maximum.at(ends, r.device, lbn + sectors)
    if days is not None:
        req = req.take(np.flatnonzero(req.arrival_us < days * DAY_US))
    return Workload(req, spec, tuple(int(e) for e in ends))


def without_read_ahead(spec: DiskSpec) -> DiskSpec:
    """The same disk with read-ahead off (its segments still hold the data a read brings in)."""
    return replace(spec, name=spec.name + ", no read-ahead", cache=replace(spec.cache, read_ahead_sectors=0))


def improvement(base: float, new: float) -> float:
    """(base - new) / base in percent (the paper's improvement for smaller-is-better figures)."""
    return 100.0 * (base - new) / base if base and math.isfinite(base) and math.isfinite(new) else math.nan


class Runner:
    """Runs and memoizes configurations of one workload: the baseline per disk and ALIS per parameters."""

    def __init__(self, w: Workload, seed: int) -> None:
        self.w = w
        self.seed = seed
        self.cache: dict[Any, dict[str, Any]] = {}
        self.measured = self.w.requests.arrival_us >= DAY_US

    def baseline(self, spec: DiskSpec) -> dict[str, Any]:
        key = ("baseline", spec.name)
        if key not in self.cache:
            sim = Simulation(spec, DiskArray(1, Concatenated()), self.w.requests, SimConfig(),
                             np.random.default_rng(self.seed), device_sectors=self.w.device_sectors)
            self.cache[key] = {**run_measured(sim, from_us=DAY_US), "ra_read_share": 0.0,
                               "served": {"home": int((self.w.requests.is_read & self.measured).sum())},
                               "copy_in_sectors": 0, "copy_back_sectors": 0, "runs": 0}
        return self.cache[key]

    def alis(self, params: AlisParams, spec: DiskSpec, *, empty: bool = False) -> dict[str, Any]:
        """One ALIS configuration; empty: the area inserted but never filled (the layout's own cost)."""
        key = ("alis", params, spec.name, empty)
        if key not in self.cache:
            setup = prepare(self.w.requests, params, sector_size=spec.sector_size,
                            device_sectors=self.w.device_sectors, concatenated=True,
                            capacity_sectors=spec.capacity_sectors, schedule=[] if empty else None)
            sim = setup.redirected.simulation(spec, SimConfig(), np.random.default_rng(self.seed))
            figures = run_measured(sim, from_us=DAY_US)
            served = setup.redirected.served(self.measured)
            reads = sum(served.values())
            d = [r.directory for r in setup.schedule]
            runs = {(j, int(k)) for j, x in enumerate(d) for k in x.run_id[x.run_id >= 0]}
            self.cache[key] = {**figures, "served": served,
                               "ra_read_share": (reads - served["home"]) / reads if reads else math.nan,
                               "copy_in_sectors": int(setup.redirected.copy_in_sectors.sum()),
                               "copy_back_sectors": int(setup.redirected.copy_back_sectors.sum()),
                               "runs": len(runs)}
        return self.cache[key]


def _row(label: str, res: dict[str, Any], base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    served = res["served"]
    return {
        "configuration": label, **extra,
        "reads": res["reads"], "writes": res["writes"],
        "read_response_ms": res["mean_response_ms_read"], "read_service_ms": res["mean_service_ms_read"],
        "read_miss_ratio": res["read_miss_ratio"], "physical_reads": res["physical_ios_read"],
        "write_response_ms": res["mean_response_ms_write"], "write_service_ms": res["mean_service_ms_write"],
        "read_response_impr_pct": improvement(base["mean_response_ms_read"], res["mean_response_ms_read"]),
        "read_service_impr_pct": improvement(base["mean_service_ms_read"], res["mean_service_ms_read"]),
        "read_miss_impr_pct": improvement(base["read_miss_ratio"], res["read_miss_ratio"]),
        "physical_reads_saved": base["physical_ios_read"] - res["physical_ios_read"],
        "write_service_impr_pct": improvement(base["mean_service_ms_write"], res["mean_service_ms_write"]),
        "reads_from_run": served.get("run", 0), "reads_from_heat": served.get("heat", 0),
        "reads_split": served.get("mixed", 0), "reads_from_home": served.get("home", 0),
        "ra_read_share": res["ra_read_share"], "runs_placed": res["runs"],
        "copy_in_sectors": res["copy_in_sectors"], "copy_back_sectors": res["copy_back_sectors"],
        "saturated": res["saturated"],
    }


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("alis", TITLE, scale)
    w = load(days=DAYS_TINY if scale == "tiny" else None)
    runner = Runner(w, seed)
    spec, no_ra = w.spec, without_read_ahead(w.spec)
    base = runner.baseline(spec)
    rows = [_row("baseline", base, base, mode="none", plan="none", disk="read-ahead")]
    rows.append(_row("area inserted, empty", runner.alis(AlisParams(), spec, empty=True), base, mode="none",
                     plan="none", disk="read-ahead"))
    for plan in ("realizable", "lookahead"):
        for mode in MODES:
            rows.append(_row(f"{mode} ({plan})", runner.alis(AlisParams(mode=mode, plan=plan), spec), base, mode=mode,
                             plan=plan, disk="read-ahead"))
    rows.append(_row("combined (realizable), reads-only heat", runner.alis(AlisParams(heat_writes=False), spec), base,
                     mode="combined", plan="realizable", disk="read-ahead"))
    base_off = runner.baseline(no_ra)
    rows.append(_row("baseline, no read-ahead", base_off, base_off, mode="none", plan="none", disk="no read-ahead"))
    rows.append(_row("combined (realizable), no read-ahead", runner.alis(AlisParams(), no_ra), base_off,
                     mode="combined", plan="realizable", disk="no read-ahead"))
    sweeps = SWEEPS[scale]
    sens = []
    for name in FIG10:
        for value in sweeps[name]:
            res = runner.alis(AlisParams(mode="run", **{name: value}), spec)
            sens.append(_row(f"run, {name}={value:g}", res, base, figure="10", parameter=name, value=float(value),
                             mode="run"))
    for mode in MODES:
        for value in sweeps["ra_share"]:
            res = runner.alis(AlisParams(mode=mode, ra_share=value), spec)
            sens.append(_row(f"{mode}, ra_share={value:g}", res, base, figure="15", parameter="ra_share",
                             value=float(value), mode=mode))
    out.tables["clustering"] = pa.Table.from_pylist(rows)
    out.tables["sensitivity"] = pa.Table.from_pylist(sens)
    by = {r["configuration"]: r for r in rows}
    _claims(out, by, sens, sweeps)
    _sections(out, w, rows, sens, runner)
    out.plots.append(("clustering.png", lambda p: _plot_main(p, by)))
    out.plots.append(("figure10.png", lambda p: _plot_sweeps(p, sens, "10", FIG10)))
    out.plots.append(("figure15.png", lambda p: _plot_sweeps(p, sens, "15", ("ra_share",))))
    return out.finish()


def _sweep(sens: list[dict[str, Any]], figure: str, parameter: str, mode: str) -> dict[float, float]:
    return {r["value"]: r["read_response_impr_pct"] for r in sens
            if r["figure"] == figure and r["parameter"] == parameter and r["mode"] == mode}


def _near_best(points: dict[float, float], at: float) -> tuple[bool, str]:
    best = max(points.values())
    text = ", ".join(f"{k:g}: {v:.1f} %" for k, v in sorted(points.items()))
    return bool(points[at] >= best - TOLERANCE_PP), text


def _claims(out: ExperimentOutput, by: dict[str, dict[str, Any]], sens: list[dict[str, Any]],
            sweeps: dict[str, tuple[float, ...]]) -> None:
    impr = {m: by[f"{m} (realizable)"]["read_response_impr_pct"] for m in MODES}
    look = {m: by[f"{m} (lookahead)"]["read_response_impr_pct"] for m in MODES}
    heat, runs, comb = impr["heat"], impr["run"], impr["combined"]
    out.claims.append(Claim(
        "combined beats either alone",
        "combined clustering's read-response improvement exceeds heat's and run's (realizable, daily)",
        "figure 14: combined clearly superior to either alone in practically all cases",
        f"combined {comb:.1f} %, heat {heat:.1f} %, run {runs:.1f} %", bool(comb > max(heat, runs))))
    out.claims.append(Claim(
        "read response improved in the server range",
        "combined clustering improves the mean read response time by 10-50 %",
        PAPER["combined"], f"{comb:.1f} %", bool(10.0 <= comb <= 50.0)))
    r = by["run (realizable)"]
    out.claims.append(Claim(
        "runs work through prefetch",
        "run clustering improves the read miss ratio at least as much as the read response time (relative)",
        "5.3: the improvement in read miss ratio significantly exceeds that in read response and service time",
        f"miss ratio {r['read_miss_impr_pct']:.1f} %, response {r['read_response_impr_pct']:.1f} %",
        bool(r["read_miss_impr_pct"] >= r["read_response_impr_pct"])))
    on, off = by["combined (realizable)"], by["combined (realizable), no read-ahead"]
    out.claims.append(Claim(
        "read-ahead turns order into fewer physical reads",
        "combined clustering saves more physical reads with the disk's read-ahead than with it off",
        "1, 3: ALIS transforms the request stream so that sequential prefetch downstream becomes effective",
        f"{on['physical_reads_saved']:,} saved with read-ahead, {off['physical_reads_saved']:,} without",
        bool(on["physical_reads_saved"] > off["physical_reads_saved"])))
    gap = {m: look[m] - impr[m] for m in MODES}
    out.claims.append(Claim(
        "history predicts heat better than runs",
        "lookahead's gain over realizable (points of read-response improvement) is smaller for heat than for runs",
        PAPER["lookahead"],
        f"gain heat {gap['heat']:.1f}, run {gap['run']:.1f}, combined {gap['combined']:.1f} points "
        f"(lookahead {look['heat']:.1f} / {look['run']:.1f} / {look['combined']:.1f} %)",
        bool(gap["heat"] < gap["run"])))
    c = by["combined (realizable)"]
    out.claims.append(Claim(
        "the area serves most reads (combined)",
        "more than half of the measured read requests are served from the reorganized area",
        "figure 12(c): the majority of disk reads are satisfied in the reorganized area (ours: read requests)",
        f"{100 * c['ra_read_share']:.1f} % ({c['reads_from_run']:,} run, {c['reads_from_heat']:,} heat, "
        f"{c['reads_split']:,} split)", bool(c["ra_read_share"] > 0.5)))
    out.claims.append(Claim(
        "RunHeat does not slow writes",
        "combined clustering's mean write service time is no worse than the baseline's",
        PAPER["write"], f"{c['write_service_impr_pct']:.1f} % ({fmt(c['write_service_ms'])} ms)",
        bool(c["write_service_impr_pct"] >= 0.0)))
    taus = _sweep(sens, "10", "tau", "run")
    ok, text = _near_best(taus, 9.0)
    out.claims.append(Claim(
        "context size: stable from about 8",
        f"tau = 9 within {TOLERANCE_PP:g} points of the best context size and not below the smallest",
        "figure 10(a): performance increases with the context size and stabilizes beyond about eight",
        text, bool(ok and taus[9.0] >= taus[min(taus)])))
    ok, text = _near_best(_sweep(sens, "10", "graph_share", "run"), 0.005)
    out.claims.append(Claim(
        "a 0.5 % graph suffices", f"graph of 0.5 % of the storage used within {TOLERANCE_PP:g} points of the best size",
        "figure 10(b): a graph smaller than 0.5 % of the storage used realizes most of the benefit", text, ok))
    betas = _sweep(sens, "10", "beta", "run")
    out.claims.append(Claim(
        "server workloads prefer a larger beta", "run clustering with beta 0.8 at least as good as with 0.1",
        "figure 10(c): stable over a wide range; server workloads prefer larger beta, PCs smaller",
        ", ".join(f"{k:g}: {v:.1f} %" for k, v in sorted(betas.items())), bool(betas[0.8] >= betas[0.1])))
    thr = _sweep(sens, "10", "threshold", "run")
    top = max(thr)
    out.claims.append(Claim(
        "selective thresholds hurt runs alone", f"run clustering with threshold 0.1 at least as good as with {top:g}",
        "figure 10(d): being more selective in picking the vertices tends to reduce performance",
        ", ".join(f"{k:g}: {v:.1f} %" for k, v in sorted(thr.items())), bool(thr[0.1] >= thr[top])))
    ok, text = _near_best(_sweep(sens, "15", "ra_share", "heat"), 0.10)
    out.claims.append(Claim(
        "heat clustering: a 10 % area suffices",
        f"heat with a 10 % area within {TOLERANCE_PP:g} points of its best size",
        "figure 15: less than 10 % of the storage used realizes practically all of heat clustering's benefit",
        text, ok))
    ok, text = _near_best(_sweep(sens, "15", "ra_share", "combined"), 0.15)
    out.claims.append(Claim(
        "combined: a 15 % area realizes most of the benefit",
        f"combined with a 15 % area within {TOLERANCE_PP:g} points of its best size",
        "figure 15 / 6.2: about 10 % for PCs, about 15 % for the server workloads", text, ok))


def _history_share(w: Workload) -> float:
    """Share of the measured reads (day 1 on) whose request extent was read on an earlier day: the most a
    plan from history can know about."""
    r = w.requests
    reads = np.flatnonzero(r.is_read)
    day = (r.arrival_us[reads] // DAY_US).astype(np.int64)
    key = r.device[reads].astype(np.int64) * (1 << 50) + r.lbn[reads] * (1 << 12) + r.sectors[reads]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    first_day = day[first][inverse]      # reads are in time order: a key's first read is its earliest
    later = day >= 1
    return float(np.mean(first_day[later] < day[later])) if later.any() else math.nan


def _sections(out: ExperimentOutput, w: Workload, rows: list[dict[str, Any]], sens: list[dict[str, Any]],
              runner: Runner) -> None:
    r = w.requests
    used = sum(w.device_sectors)
    span = "week" if out.scale == "full" else f"first {DAYS_TINY} days"
    setup = (f"## Setup\n\nhplajw {span}: {len(r):,} requests ({int(r.is_read.sum()):,} reads) on two traced disks, "
             f"concatenated into one volume of {used:,} sectors ({used * w.spec.sector_size / 1e6:.0f} MB) on one "
             f"{w.spec.name} ({100 * used / w.spec.capacity_sectors:.1f} % full); "
             "open loop at the trace's times, FCFS; reorganized area 15 % of the volume at 30 % into it, daily "
             "reorganization; day 0 is warm-up. Improvements are (baseline - ALIS) / baseline.")
    cols = ["configuration", "read_response_ms", "read_service_ms", "read_miss_ratio", "physical_reads",
            "write_service_ms", "read_response_impr_pct", "read_service_impr_pct", "read_miss_impr_pct",
            "write_service_impr_pct", "ra_read_share", "runs_placed"]
    paper = markdown_table([{"figure": k, "paper": v} for k, v in PAPER.items()], ["figure", "paper"])
    by = {x["configuration"]: x for x in rows}
    comb, runs = by["combined (realizable)"], by["run (realizable)"]
    hist = _history_share(w)
    empty = by["area inserted, empty"]
    reads_only = by["combined (realizable), reads-only heat"]
    best_alone = max(by["heat (realizable)"]["read_response_impr_pct"], runs["read_response_impr_pct"])
    ro = reads_only["read_response_impr_pct"]
    notes = [
        f"- {100 * hist:.0f} % of the measured reads touch a request extent already read on an earlier day: the rest "
        "cannot be planned from history, which is what the lookahead rows remove.",
        f"- With the area inserted but empty, read response changes by {-empty['read_response_impr_pct']:+.1f} % and "
        f"write service by {-empty['write_service_impr_pct']:+.1f} % (home data behind the area moves up; the "
        "volume spans under 1 % of the disk, so seeks stay short and heat clustering has little seek time to save).",
        f"- Combined clustering serves {100 * comb['ra_read_share']:.0f} % of the measured reads from the area and "
        f"run clustering alone {100 * runs['ra_read_share']:.0f} %; combined's run threshold is 0.4 (libs.alis's "
        "default, the paper's PC setting), run alone's 0.1.",
        f"- Heat clustering counts writes (the paper's default), so the write-hot blocks of this write-heavy trace "
        f"({100 * (1 - r.is_read.mean()):.0f} % writes) take area space and RunHeat sends their writes into the area; "
        f"counting reads only, combined clustering improves read response by {ro:.1f} % "
        f"({'above' if ro > best_alone else 'not above'} the better scheme alone, "
        f"{best_alone:.1f} %).",
        "- hplajw is one user's HP-UX workstation of 1992 (a PC-like workload), not one of the paper's servers; its "
        "one-week span is the paper's DS1 length.",
    ]
    sens_cols = ["figure", "parameter", "value", "mode", "read_response_impr_pct", "read_miss_impr_pct",
                 "ra_read_share", "runs_placed"]
    out.sections += [
        setup,
        "## Heat, run and combined clustering (ours)", markdown_table(rows, cols),
        "## The paper's figures", paper,
        "## Why this trace differs\n\n" + "\n".join(notes),
        "## Sensitivity (figure 10: run clustering alone; figure 15: area size)", markdown_table(sens, sens_cols),
    ]


def _plot_main(path: Path, by: dict[str, dict[str, Any]]) -> None:
    fig, (ax1, ax2) = new_figure(2, width=5.5)
    x = np.arange(len(MODES))
    for j, (key, label) in enumerate((("read_response_impr_pct", "read response"),
                                      ("read_service_impr_pct", "read service"),
                                      ("read_miss_impr_pct", "read miss ratio"))):
        ax1.bar(x + (j - 1) * 0.27, [by[f"{m} (realizable)"][key] for m in MODES], 0.27, label=label)
    ax1.set_xticks(x, MODES)
    ax1.set_ylabel("improvement over the baseline (%)")
    ax1.axhline(0, color="black", linewidth=0.6)
    ax1.legend()
    for j, plan in enumerate(("realizable", "lookahead")):
        ax2.bar(x + (j - 0.5) * 0.4, [by[f"{m} ({plan})"]["read_response_impr_pct"] for m in MODES], 0.4, label=plan)
    ax2.set_xticks(x, MODES)
    ax2.set_ylabel("read response improvement (%)")
    ax2.legend()
    save_figure(fig, path, "ALIS on hplajw (73LZX, resource-poor): clustering schemes (cf. figures 14, 19)")


def _plot_sweeps(path: Path, sens: list[dict[str, Any]], figure: str, parameters: tuple[str, ...]) -> None:
    fig, axes = new_figure(len(parameters), width=4.2 if len(parameters) > 1 else 6.0)
    for ax, name in zip(axes, parameters, strict=True):
        modes = sorted({r["mode"] for r in sens if r["figure"] == figure and r["parameter"] == name})
        for mode in modes:
            pts = sorted(_sweep(sens, figure, name, mode).items())
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
        ax.set_xlabel(name)
        ax.set_ylabel("read response improvement (%)")
        if name == "graph_share":
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
    title = "figure 10: run clustering's sensitivity" if figure == "10" else "figure 15: reorganized-area size"
    save_figure(fig, path, f"ALIS on hplajw, {title}")

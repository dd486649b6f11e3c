"""`five-cooling`: FIVE's table 6, the skewed (X/Y = 70/30) synthetic workload on the 32 disks of table 1,
files striped round robin with Gopt140 (computed: five.gopt140), Track (35 KB) and Cyl (385 KB) units, with
and without disk cooling, over arrival rates and over several seeds (each cell: mean and 95 % interval over the
seeds, saturated seeds counted); per seed, the hottest file and the load its units put on their disks; and
section 3.3's heat tracking on the simulator's tracker.

Choices where the paper is open (one line each, tested in tests/libs/experiments/test_five.py):
- Gopt140 is five.gopt140(seed) of the base seed's files, the unit five-striping uses, for every seed;
- cooling: every 100 requests, delta 5 %, whole extents (the file's striping units) as migration units,
  FIVE's same-file rule with the workload's files, tracker k = 10 with aging (sim.cooling's defaults);
- runs: 1,000,000 requests in every cell at full scale (FIVE's length), 3,000 at tiny scale; rates 20, 60, 100,
  120, 130 and 140/s at full scale (FIVE's 40, 80, 110 and 125 left out to fit the time budget; 140 added, our
  disks saturating later), 20, 60, 120 and 160/s at tiny scale;
- seeds: 10 at full scale (seed .. seed + 9; each its own files, ranking and requests), 2 at tiny scale; within a
  seed the same files, ranking and request sequence at every rate, only the arrival times scale;
- a cell is ∞ when any seed saturated (the count is shown), else the mean over seeds with a Student-t 95 %
  interval; the order-of-magnitude claim needs, for every method, a rate where the run without cooling saturated
  in at least half of the seeds and with cooling in none, or both finite and the lower bound without cooling at
  least 5x the upper bound with ("an order of magnitude", common.WORDING);
- saturated ("∞"): the backlog at the last arrival exceeds 1 % of the requests and grew over the second
  half (sim.stats), or more than 3,000 requests are outstanding (the run stops);
- queue length is time-averaged and counts the request in service (sim.stats); the hottest disk is the
  most utilized one; "cooling relieves the hottest disk" (Track at 120/s, FIVE's rate) is judged over the
  seeds where neither run saturated (a saturated run's queue grows until the run stops, so its length would
  measure the run);
- the hottest file's load: its share of the requests x rate x the expected service time of its largest part on
  one disk (the advisor's equation 16 with P = 1, seeks over the whole disk);
- "cooling frequency high in the first tenth": the moves per tenth of each run's arrival span, summed over the
  seeds whose cooled run did not saturate, in every (method, rate) cell with moves;
- heat tracking: the tracker on one unit requested every second, then 20 times a second, against a unit
  requested at 20/s throughout;
- the sensitivity run "no queue test" repeats, per method, the cooled runs that saturated at the rate where the
  method thrashes without cooling, with step 5's source-queue test off (CoolingWithoutQueueTest);
- the sensitivity run "paper unit" replays Gopt140 at 130/s (tiny: the top rate) without cooling with FIVE's
  87 KB unit on every seed, for the reason of "every method saturates by 130/s".
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.libs.experiments import five
from blockheat.libs.experiments.common import Claim, ExperimentOutput, fmt, markdown_table, new_figure, save_figure
from blockheat.libs.experiments.five import INF, MAX_OUTSTANDING
from blockheat.libs.plans.striping_advisor import expected_service_ms
from blockheat.sim import (
    CoolingConfig,
    DiskCooling,
    InterarrivalTracker,
    SimConfig,
    Simulation,
    Window,
    run_with_policy,
)

TITLE = "FIVE disk cooling on the skewed synthetic workload (FIVE table 6, section 3.3)"
METHODS = ("Gopt140", "Track", "Cyl")
#: Six of the paper's nine rates (1,000,000 requests each fit the time budget at six), then 140/s: our disks
#: serve a request faster than FIVE's (at 120/s the mean utilization is about 0.74 against the paper's 0.79).
RATES = (20, 60, 100, 120, 130, 140)
SCALE = {"full": {"requests": 1_000_000, "rates": RATES, "methods": METHODS, "seeds": 10},
         "tiny": {"requests": 3_000, "rates": (20, 60, 120, 160), "methods": METHODS, "seeds": 2}}
COOLING = CoolingConfig(every_requests=100, delta=0.05, k=10)
#: Student-t 0.975 quantiles by degrees of freedom (1..30), for the 95 % intervals over seeds.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
        2.042)

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


def units(base_seed: int) -> dict[str, int]:
    """Each method's striping unit (blocks): Gopt140 computed for the base seed's files (five.gopt140)."""
    return {"Gopt140": five.gopt140(base_seed).unit, "Track": five.UNITS["Track"], "Cyl": five.UNITS["Cyl"]}


class _EmptyQueues:
    """A simulation seen through Figure 5's step 5 with every disk's waiting queue read as empty."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)

    def disk_queue_lengths(self) -> np.ndarray:
        return np.zeros_like(self._sim.disk_queue_lengths())


class CoolingWithoutQueueTest(DiskCooling):
    """DiskCooling whose step 5 never vetoes a move for the source disk's queue (the sensitivity run)."""

    def on_interval(self, sim: Simulation, window: Window) -> Any:
        return super().on_interval(_EmptyQueues(sim), window)  # type: ignore[arg-type]


Maps = dict[tuple[int, int], tuple[five.StripedFiles, five.SharedArray]]


def run_point(method: str, unit: int, rate: float, cooling: bool, *, n_requests: int, seed: int,
              maps: Maps | None = None, variant: str = "figure 5") -> dict[str, Any]:
    """One (method, rate, cooling) run of `seed` as a table row; variant names a sensitivity run's rows ("figure 5"
    for table 6's runs; "no queue test" cools with CoolingWithoutQueueTest). move_tenths: the moves executed in
    each tenth of the run's arrival span."""
    w = five.workload(seed, n_requests, rate, "xy")
    maps = {} if maps is None else maps
    if (seed, unit) not in maps:
        striped = five.striped_file_units(w, unit)
        maps[(seed, unit)] = (striped, five.SharedArray(five.N_DISKS, striped.extent_map))
    striped, array = maps[(seed, unit)]
    n = len(w.requests)
    sim = Simulation(five.spec(), array, w.requests,
                     SimConfig(max_outstanding=MAX_OUTSTANDING, saturation_min_backlog=max(1, n // 100)),
                     np.random.default_rng(seed + 1), device_sectors=[w.logical_sectors])
    moves, vetoes, calls, tenths = 0, 0, 0, [0] * 10
    if cooling:
        kind = CoolingWithoutQueueTest if variant == "no queue test" else DiskCooling
        policy = kind(COOLING, unit_file=striped.unit_file)
        run_with_policy(sim, policy)
        moves, vetoes, calls = len(policy.moves), policy.outcomes.get("source_queue", 0), sum(policy.outcomes.values())
        tenths = move_tenths([m.time_us for m in policy.moves], float(w.requests.arrival_us[-1]))
    else:
        sim.run()
    r = sim.result()
    return {"seed": seed, "method": method, "unit_kb": unit, "rate_per_s": float(rate), "cooling": bool(cooling),
            "variant": variant,
            "label": method + ("-C" if cooling else ""), "requests": r.requests, "saturated": r.saturated,
            "mean_response_ms": r.mean_response_ms, "hottest_utilization": r.hottest_utilization,
            "mean_utilization": r.mean_utilization, "hottest_queue_length": r.hottest_queue_length,
            "mean_queue_length": r.mean_queue_length, "moves": moves, "cooling_calls": calls,
            "source_queue_vetoes": vetoes, "migration_ios": r.migration_ios, "move_tenths": tenths,
            "paper_response_ms": PAPER.get(int(rate), {}).get(method + ("-C" if cooling else ""))}


def move_tenths(times_us: list[float], end_us: float) -> list[int]:
    """How many of the moves at times_us fall in each tenth of [0, end_us] (a move at end_us in the last)."""
    idx = np.minimum((np.asarray(times_us, dtype=np.float64) * 10 / end_us).astype(np.int64), 9)
    return np.bincount(idx, minlength=10).tolist()


def cell(values: list[float], saturated: list[bool]) -> dict[str, Any]:
    """A table-6 cell over seeds: mean and Student-t 95 % half-width (inf and None when any seed saturated)."""
    n, k = len(values), int(sum(saturated))
    finite = [v for v, s in zip(values, saturated, strict=True) if not s]
    mean = float(np.mean(finite)) if finite else INF
    half = (T975[n - 2] * float(np.std(finite, ddof=1)) / math.sqrt(n) if n >= 2 else INF) if not k else None
    return {"seeds": n, "saturated_seeds": k, "mean_response_ms": INF if k else mean, "ci95_ms": half,
            "finite_mean_ms": mean if finite else None,
            "low_ms": INF if k else mean - (half or 0.0), "high_ms": INF if k else mean + (half or 0.0)}


def cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (method, rate, cooling) with the cell over seeds and the seeds' mean utilizations and moves."""
    out = []
    fig5 = [r for r in rows if r["variant"] == "figure 5"]
    for m, rate, c in dict.fromkeys((r["method"], r["rate_per_s"], r["cooling"]) for r in fig5):
        runs = [r for r in fig5 if (r["method"], r["rate_per_s"], r["cooling"]) == (m, rate, c)]
        out.append({"method": m, "rate_per_s": rate, "cooling": c, "label": m + ("-C" if c else ""),
                    **cell([r["mean_response_ms"] for r in runs], [r["saturated"] for r in runs]),
                    "hottest_utilization": float(np.mean([r["hottest_utilization"] for r in runs])),
                    "mean_utilization": float(np.mean([r["mean_utilization"] for r in runs])),
                    "hottest_queue_length": float(np.mean([r["hottest_queue_length"] for r in runs])),
                    "mean_queue_length": float(np.mean([r["mean_queue_length"] for r in runs])),
                    "moves": float(np.mean([r["moves"] for r in runs])),
                    "source_queue_vetoes": float(np.mean([r["source_queue_vetoes"] for r in runs])),
                    "cooling_calls": float(np.mean([r["cooling_calls"] for r in runs])),
                    "paper_response_ms": runs[0]["paper_response_ms"]})
    return out


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("five-cooling", TITLE, scale)
    cfg = SCALE[scale]
    unit = units(seed)
    seeds = list(range(seed, seed + cfg["seeds"]))
    rows = table6_runs(cfg, seeds, unit)
    rows += queue_test_runs(rows, cfg, unit)
    return report(out, cfg, seeds, unit, rows).finish()


def queue_test_runs(rows: list[dict[str, Any]], cfg: dict[str, Any], unit: dict[str, int]) -> list[dict[str, Any]]:
    """The sensitivity run "no queue test": per method, at the rate where it thrashes without cooling (saturated in
    at least half of the seeds; none: no run), the seeds whose cooled run saturated there, cooled again with step 5's
    queue test off."""
    table = cells(rows)
    out = []
    for m in cfg["methods"]:
        rate = thrashing_rate(table, m, cfg["rates"])
        if rate is None:
            continue
        for r in rows:
            if (r["variant"], r["method"], r["rate_per_s"], r["cooling"]) == ("figure 5", m, rate, True) \
                    and r["saturated"]:
                out.append(run_point(m, unit[m], rate, True, n_requests=cfg["requests"], seed=r["seed"],
                                     variant="no queue test"))
    return out


def queue_test(rows: list[dict[str, Any]], hot: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The "no queue test" runs per (method, rate): runs, seeds still saturated and rescued, moves, and the hottest
    file's largest unit's load (hottest_files) in each group."""
    runs = [r for r in rows if r["variant"] == "no queue test"]
    out = []
    for m, rate in dict.fromkeys((r["method"], r["rate_per_s"]) for r in runs):
        these = [r for r in runs if (r["method"], r["rate_per_s"]) == (m, rate)]
        load = _load(hot, m, rate)
        sat = [r["seed"] for r in these if r["saturated"]]
        ok = [r["seed"] for r in these if not r["saturated"]]
        out.append({"method": m, "rate_per_s": rate, "runs": len(these), "saturated": sat, "rescued": ok,
                    "moves": sum(r["moves"] for r in these), "saturated_loads": [load[x] for x in sat],
                    "rescued_loads": [load[x] for x in ok]})
    return out


def table6_runs(cfg: dict[str, Any], seeds: list[int], unit: dict[str, int]) -> list[dict[str, Any]]:
    """Every seed's table-6 runs (each method, rate, with and without cooling) and its "paper unit" run."""
    rows = []
    for s in seeds:
        maps: Maps = {}
        rows += [run_point(m, unit[m], rate, c, n_requests=cfg["requests"], seed=s, maps=maps)
                 for m in cfg["methods"] for rate in cfg["rates"] for c in (False, True)]
        rows.append(run_point("Gopt140", five.PAPER_GOPT140, saturation_rate(cfg), False, n_requests=cfg["requests"],
                              seed=s, maps=maps, variant="paper unit"))
    return rows


def report(out: ExperimentOutput, cfg: dict[str, Any], seeds: list[int], unit: dict[str, int],
           rows: list[dict[str, Any]]) -> ExperimentOutput:
    """The tables, claims, sections and plot of the runs."""
    table = cells(rows)
    hot = hottest_files(cfg, seeds, unit)
    out.tables["runs"] = pa.Table.from_pylist(rows)
    out.tables["responses"] = pa.Table.from_pylist(table)
    out.tables["hottest_files"] = pa.Table.from_pylist(hot)
    _claims(out, table, rows, hot, cfg, seeds[0])
    _sections(out, table, rows, hot, cfg, seeds, unit)
    out.plots.append(("response_vs_rate.png", lambda p: _plot(p, table)))
    return out


def saturation_rate(cfg: dict[str, Any]) -> float:
    """The rate of the claim "every method saturates by 130/s" (the highest rate when 130/s is not run)."""
    return 130.0 if 130 in cfg["rates"] else float(max(cfg["rates"]))


def relief(rows: list[dict[str, Any]], rate: float = 120.0) -> dict[str, Any]:
    """Track at `rate` over the seeds where neither run (with, without cooling) saturated: the mean over them of
    the hottest disk's utilization and queue length, and of all disks' (a saturated run's queue grows until
    the run stops, so its length measures the run, not the disk); over the same cooled runs, the calls, step-5
    vetoes and moves, the range of the hottest disk's utilization without cooling, and the seeds whose hottest
    queue grew with cooling."""
    runs = [r for r in rows if r["variant"] == "figure 5" and r["method"] == "Track" and r["rate_per_s"] == rate]
    seeds = sorted({r["seed"] for r in runs})
    ok = [s for s in seeds if not any(r["saturated"] for r in runs if r["seed"] == s)]
    out: dict[str, Any] = {"rate_per_s": rate, "seeds": len(seeds), "unsaturated_seeds": ok}
    for c, tag in ((False, "off"), (True, "on")):
        sel = [r for r in runs if r["cooling"] == c and r["seed"] in ok]
        for key in ("hottest_utilization", "hottest_queue_length", "mean_utilization", "mean_queue_length"):
            out[f"{key}_{tag}"] = float(np.mean([r[key] for r in sel])) if sel else math.nan
    off = {r["seed"]: r for r in runs if not r["cooling"] and r["seed"] in ok}
    on = {r["seed"]: r for r in runs if r["cooling"] and r["seed"] in ok}
    out.update({"calls": sum(r["cooling_calls"] for r in on.values()),
                "vetoes": sum(r["source_queue_vetoes"] for r in on.values()),
                "moves": sum(r["moves"] for r in on.values()),
                "hottest_off": [off[x]["hottest_utilization"] for x in ok],
                "queue_grew": [x for x in ok if on[x]["hottest_queue_length"] > off[x]["hottest_queue_length"]]})
    return out


def paper_unit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Gopt140 with FIVE's 87 KB unit at saturation_rate, without cooling: saturated seeds of seeds."""
    runs = [r for r in rows if r["variant"] == "paper unit"]
    return {"unit_kb": runs[0]["unit_kb"], "rate_per_s": runs[0]["rate_per_s"], "seeds": len(runs),
            "saturated_seeds": sum(r["saturated"] for r in runs)}


def _get(table: list[dict[str, Any]], method: str, rate: float, cooling: bool) -> dict[str, Any]:
    return next(r for r in table if r["method"] == method and r["rate_per_s"] == rate and r["cooling"] == cooling)


def _show(c: dict[str, Any]) -> str:
    if c["saturated_seeds"]:
        rest = f"; others {fmt(c['finite_mean_ms'])}" if c["finite_mean_ms"] is not None else ""
        return f"∞ ({c['saturated_seeds']}/{c['seeds']}{rest})"
    return f"{fmt(c['mean_response_ms'])} ± {fmt(c['ci95_ms'], 2)}"


def order_of_magnitude(off: dict[str, Any], on: dict[str, Any]) -> bool:
    """The claim's test on two cells ("an order of magnitude": at least 5x): off saturated in at least half of
    the seeds and on in none, or both finite and off's lower bound at least 5x on's upper bound."""
    if on["saturated_seeds"]:
        return False
    if 2 * off["saturated_seeds"] >= off["seeds"]:
        return True
    return not off["saturated_seeds"] and off["low_ms"] >= 5 * on["high_ms"]


def thrashing_rate(table: list[dict[str, Any]], method: str, rates: tuple[float, ...]) -> float | None:
    """The lowest rate at which `method` without cooling saturated in at least half of the seeds (None: none)."""
    for rate in sorted(rates):
        c = _get(table, method, rate, False)
        if 2 * c["saturated_seeds"] >= c["seeds"]:
            return float(rate)
    return None


def hottest_files(cfg: dict[str, Any], seeds: list[int], unit: dict[str, int]) -> list[dict[str, Any]]:
    """Per seed, the hottest file (class, size, share of requests) and, per method, its largest unit (one disk's
    part of the file: blocks) and that unit's load on its disk at each rate: share x rate x the expected service
    time of reading it alone (the advisor's equation 16 with P = 1; busy seconds per second)."""
    m = five.disk_model()
    out = []
    for s in seeds:
        w = five.workload(s, cfg["requests"], 100.0, "xy")
        files, counts = np.unique(w.requests.lbn, return_counts=True)
        k = int(np.argmax(counts))
        f = int(np.flatnonzero(w.file_start == files[k])[0])
        size, share = int(w.file_sectors[f]), float(counts[k] / len(w.requests))
        row: dict[str, Any] = {"seed": s, "file": f, "class": "ABC"[int(w.file_class[f])], "size_kb": size,
                               "share": share}
        for meth in cfg["methods"]:
            u = unit[meth]
            n_units = -(-size // u)
            per_disk = min(size, u * -(-n_units // five.N_DISKS))   # the file's units on one disk, in blocks
            row[f"{meth}_unit_blocks"] = per_disk
            service_s = expected_service_ms(m, float(per_disk), 1.0) / 1000.0
            for rate in cfg["rates"]:
                row[f"{meth}_load_{int(rate)}"] = share * float(rate) * service_s
        out.append(row)
    return out


def _load(hot: list[dict[str, Any]], method: str, rate: float) -> dict[int, float]:
    return {h["seed"]: h[f"{method}_load_{int(rate)}"] for h in hot}


def split_by_load(rows: list[dict[str, Any]], hot: list[dict[str, Any]], method: str, rate: float,
                  cooling: bool) -> dict[str, Any]:
    """The runs of (method, rate, cooling) split into saturated and finite seeds, with the hottest extent's load
    of each: separated when every saturated seed's load exceeds every finite seed's."""
    load = _load(hot, method, rate)
    runs = [r for r in rows if r["variant"] == "figure 5" and (r["method"], r["rate_per_s"], r["cooling"])
            == (method, rate, cooling)]
    sat = sorted(r["seed"] for r in runs if r["saturated"])
    ok = sorted(r["seed"] for r in runs if not r["saturated"])
    lo_sat = min((load[x] for x in sat), default=math.inf)
    hi_ok = max((load[x] for x in ok), default=-math.inf)
    return {"method": method, "rate_per_s": rate, "cooling": cooling, "saturated": sat, "finite": ok,
            "saturated_loads": [load[x] for x in sat], "finite_loads": [load[x] for x in ok],
            "separated": bool(sat and ok and lo_sat > hi_ok) or not sat or not ok}


def outcomes(rows: list[dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """What cooling changed near saturation, over the table-6 runs: saturated runs without cooling that cooling
    kept finite (rescued) and the reverse (lost); cells whose saturated seeds are the same either way; runs without
    cooling whose saturation the linear rule predicts (hottest-disk utilization at the lowest rate, times rate
    over that rate, at least 1); and, per method and seed, the cooled run at its lowest saturating rate: calls,
    step-5 vetoes (source queue) and moves, summed."""
    g = {(r["method"], r["rate_per_s"], r["cooling"], r["seed"]): r for r in rows if r["variant"] == "figure 5"}
    seeds = sorted({k[3] for k in g})
    rates = [float(r) for r in cfg["rates"]]
    light = min(rates)
    keys = [(m, r, s) for m in cfg["methods"] for r in rates for s in seeds]
    off = {k: g[(k[0], k[1], False, k[2])]["saturated"] for k in keys}
    on = {k: g[(k[0], k[1], True, k[2])]["saturated"] for k in keys}
    first = []
    for m in cfg["methods"]:
        for s in seeds:
            r = next((r for r in rates if on[(m, r, s)]), None)
            if r is not None:
                first.append(g[(m, r, True, s)])
    return {"light": light, "runs": len(keys), "saturated_off": sum(off.values()),
            "rescued": sum(off[k] and not on[k] for k in keys), "lost": sum(on[k] and not off[k] for k in keys),
            "cells": len(cfg["methods"]) * len(rates),
            "same_cells": sum(all(off[(m, r, s)] == on[(m, r, s)] for s in seeds)
                              for m in cfg["methods"] for r in rates),
            "predicted": sum((g[(m, light, False, s)]["hottest_utilization"] * r / light >= 1) == off[(m, r, s)]
                             for m, r, s in keys),
            "first_runs": len(first), "first_calls": sum(r["cooling_calls"] for r in first),
            "first_vetoes": sum(r["source_queue_vetoes"] for r in first), "first_moves": sum(r["moves"] for r in first)}


def tenths_by_cell(rows: list[dict[str, Any]], method: str, rate: float) -> list[int] | None:
    """The moves per tenth of the run, summed over the seeds whose cooled run did not saturate (None: none)."""
    runs = [r for r in rows if r["variant"] == "figure 5" and r["cooling"] and r["method"] == method
            and r["rate_per_s"] == rate and not r["saturated"]]
    return np.sum([r["move_tenths"] for r in runs], axis=0).tolist() if runs else None


def heat_step(k: int, before_per_s: float = 1.0, after_per_s: float = 20.0, blocks: float = 35.0) -> dict[str, Any]:
    """Section 3.3 on the tracker: one unit requested every 1/before_per_s s (3k requests), then every
    1/after_per_s s. The estimate after each of the first k + 2 requests at the new rate, over the estimate of a
    unit requested at the new rate from the start (the new frequency fully reflected: 1)."""
    n_old, n_new = 3 * k, k + 2
    t = np.concatenate([np.arange(n_old) / before_per_s, (n_old - 1) / before_per_s
                        + np.arange(1, n_new + 1) / after_per_s]) * 1e6
    steady = InterarrivalTracker(1, k)
    steady.observe(np.zeros(4 * k, dtype=np.int64), np.arange(4 * k) / after_per_s * 1e6, np.full(4 * k, blocks))
    target = float(steady.heat()[0])
    tr = InterarrivalTracker(1, k)
    tr.observe(np.zeros(n_old, dtype=np.int64), t[:n_old], np.full(n_old, blocks))
    ratios = []
    for i in range(n_old, n_old + n_new):
        tr.observe(np.zeros(1, dtype=np.int64), t[i:i + 1], np.full(1, blocks))
        ratios.append(float(tr.heat()[0]) / target)
    return {"k": k, "steady_heat": target, "ratio_after": ratios}


def _claims(out: ExperimentOutput, table: list[dict[str, Any]], rows: list[dict[str, Any]],
            hot: list[dict[str, Any]], cfg: dict[str, Any], seed: int) -> None:
    rates, methods = cfg["rates"], cfg["methods"]
    # Order of magnitude near saturation, for every method ("any striping strategy").
    found, notes = {}, []
    for m in methods:
        best = next((rate for rate in rates
                     if order_of_magnitude(_get(table, m, rate, False), _get(table, m, rate, True))), None)
        found[m] = best
        top = best if best is not None else thrashing_rate(table, m, rates)
        if top is None:
            top = float(max(rates))
        notes.append(f"{m} at {fmt(top)}/s: {_show(_get(table, m, top, False))} vs "
                     f"{_show(_get(table, m, top, True))} ms")
    o = outcomes(rows, cfg)
    reasons = [
        f"cooling rescued {o['rescued']} of the {o['saturated_off']} runs that saturated without it (and lost "
        f"{o['lost']}): in {o['same_cells']} of {o['cells']} (method, rate) cells the same seeds saturate with and "
        f"without cooling. A seed saturates at the first rate where its hottest disk's utilization without "
        f"cooling at {fmt(o['light'])}/s, times rate / {fmt(o['light'])}, reaches 1 ({o['predicted']} of "
        f"{o['runs']} runs follow that rule); that disk then has waiting requests from the start, and in each "
        f"method's and seed's first saturating run with cooling ({o['first_runs']} runs) Figure 5's step 5 vetoed "
        f"{o['first_vetoes']} of {o['first_calls']} calls ({o['first_moves']} moves in all)"]
    q = queue_test(rows, hot)
    if q:
        reasons.append(
            f"With the queue test off (sensitivity run on each method's saturated cooled runs at its thrashing rate) "
            f"{sum(len(x['saturated']) for x in q)} of {sum(x['runs'] for x in q)} still saturate: "
            + "; ".join(f"{x['method']} at {fmt(x['rate_per_s'])}/s {len(x['saturated'])} of {x['runs']} (hottest "
                        f"file's largest unit loads its disk to {_range(x['saturated_loads'])} in those, "
                        f"{_range(x['rescued_loads'])} in the rescued)" for x in q))
    holds = all(v is not None for v in found.values())
    out.claims.append(Claim(
        "cooling: an order of magnitude lower near saturation",
        "for every method, some rate where the run without cooling saturated in at least half of the seeds and "
        "with cooling in none, or both finite and without >= 5x with (95 % bounds)",
        "Gopt140 at 120/s: ∞ vs 152.74 ms; Track at 130/s: ∞ vs 429.76 ms; Cyl at 60/s: ∞ vs 157.58 ms",
        "; ".join(notes), holds, "" if holds else ". ".join(reasons),
        quote="When approaching the thrashing region, the response times of any striping strategy with cooling "
              "switched on are an order of magnitude lower compared with the same strategy with cooling turned off.",
        where="section 4.1.2, table 6", wording="order of magnitude"))
    light = min(rates)
    d_resp = {m: 100 * (_get(table, m, light, True)["mean_response_ms"]
                        / _get(table, m, light, False)["mean_response_ms"] - 1) for m in methods}
    d_util = {m: 100 * (_get(table, m, light, True)["mean_utilization"]
                        - _get(table, m, light, False)["mean_utilization"]) for m in methods}
    small = all(d_resp[m] <= 5.0 and d_util[m] <= 5.0 for m in methods)
    out.claims.append(Claim(
        "cooling costs little at light load",
        f"at {fmt(light)}/s, for every method, cooling raises the mean response by at most 5 % and the mean "
        "utilization by at most 5 points (means over seeds)",
        "20/s: +1.4 % (Gopt140), +2.5 % (Track), -1.7 % (Cyl)",
        ", ".join(f"{d_resp[m]:+.1f} % and {d_util[m]:+.2f} points ({m})" for m in methods), small,
        "" if small else "the migrations' load exceeds the reading of 'small' (see tables/responses.parquet)",
        quote="This leads to a small increase of the overall disk utilization, and this is why the cooling methods "
              "exhibit a slightly higher response time than the no-cooling methods under light load.",
        where="section 4.1.2, table 6", wording="small"))
    top = saturation_rate(cfg)
    sat = {m: _get(table, m, top, False) for m in methods}
    every = all(2 * c["saturated_seeds"] >= c["seeds"] for c in sat.values())
    tuned = five.gopt140(seed)
    p87 = paper_unit(rows)
    short = [m for m, c in sat.items() if 2 * c["saturated_seeds"] < c["seeds"]]
    x = relief(rows)
    why = []
    for m in short:
        y = split_by_load(rows, hot, m, top, False)
        why.append(f"{m}: {len(y['saturated'])} of {sat[m]['seeds']} seeds"
                   + (f" (hottest unit's load {_range(y['saturated_loads'])} in those, {_range(y['finite_loads'])} "
                      "in the others)" if y["saturated"] else f" (hottest unit's load {_range(y['finite_loads'])})"))
    unit_part = "" if "Gopt140" not in short else (
        f"; Gopt140 is {tuned.unit} KB (P-bar {tuned.p_bar}) rather than FIVE's 87 KB (P-bar 3): with 87 KB units "
        f"(sensitivity run) {p87['saturated_seeds']} of {p87['seeds']} seeds saturate at {fmt(top)}/s against "
        f"{sat['Gopt140']['saturated_seeds']} with {tuned.unit} KB"
        + (", enough for the test" if 2 * p87["saturated_seeds"] >= p87["seeds"] else ", still fewer than half"))
    out.claims.append(Claim(
        "without cooling every method saturates by 130/s",
        f"at {fmt(top)}/s every method without cooling saturated in at least half of the seeds",
        "130/s: ∞ for Gopt140, Track, Cyl",
        ", ".join(f"{m} {_show(c)}" for m, c in sat.items()), every,
        "" if every else
        f"saturated at {fmt(top)}/s: {'; '.join(why)}. A seed saturates where its hottest disk's utilization at "
        f"{fmt(o['light'])}/s, times rate / {fmt(o['light'])}, reaches 1 ({o['predicted']} of {o['runs']} runs), and "
        f"our table-1 disks serve faster than FIVE's (at 120/s Track's mean utilization over the seeds that did not "
        f"saturate is {fmt(x['mean_utilization_off'], 2)} against the paper's 0.79){unit_part}",
        quote="In fact, all methods without cooling started thrashing at an arrival rate of 130 requests per second "
              "or earlier.", where="section 4.1.2, table 6", wording="states"))
    n_ok = len(x["unsaturated_seeds"])
    ok = bool(n_ok and x["hottest_utilization_on"] < x["hottest_utilization_off"]
              and x["hottest_queue_length_on"] < x["hottest_queue_length_off"])
    out.claims.append(Claim(
        "cooling relieves the hottest disk",
        "Track at 120/s, means over the seeds where neither run saturated: hottest-disk utilization and queue "
        "length both lower with cooling",
        "0.94 and 10.3 without, 0.89 and 5.5 with (all disks: 0.79 and 3.5 without)",
        f"{n_ok} of {x['seeds']} seeds: {fmt(x['hottest_utilization_off'], 3)} and "
        f"{fmt(x['hottest_queue_length_off'], 3)} without, {fmt(x['hottest_utilization_on'], 3)} and "
        f"{fmt(x['hottest_queue_length_on'], 3)} with (all disks: {fmt(x['mean_utilization_off'], 3)} and "
        f"{fmt(x['mean_queue_length_off'], 3)} without)", ok if n_ok else None,
        "" if ok else "every seed saturated at 120/s" if not n_ok else
        f"the seeds that stay finite run their hottest disk at {_range(x['hottest_off'])} without cooling, so it "
        f"nearly always has waiting requests: Figure 5's step 5 vetoed {x['vetoes']} of {x['calls']} cooling calls "
        f"in their cooled runs ({x['moves']} moves), and the hottest disk's queue grew with cooling in seeds "
        f"{', '.join(map(str, x['queue_grew'])) or 'none'}",
        quote="The cooling procedure was able to reduce the utilization and the average queue length ... of the "
              "hottest disk down to 0.89 and 5.5, respectively, at $\\lambda=120$", where="section 4.1.2, table 6",
        wording="direction"))
    _cyl_claim(out, table, rows, hot, cfg)
    _tenth_claim(out, rows, cfg)
    h = heat_step(COOLING.k)
    k = h["k"]
    r = h["ratio_after"]
    full = abs(r[k - 1] - 1.0) < 1e-9
    out.claims.append(Claim(
        "heat tracking: a sudden rise is fully reflected after k requests",
        f"the tracker (k = {k}) on one unit requested at 1/s, then at 20/s: its estimate after k requests at the "
        "new rate equals (within 1e-9) a unit's requested at 20/s throughout",
        f"fully reflected after k = {k} requests",
        f"estimate over the new rate's after 1, {k - 2}, {k - 1}, {k} requests: "
        + ", ".join(f"{r[i]:.3f}" for i in (0, k - 3, k - 2, k - 1)), full,
        "" if full else "the tracker's estimate differs from section 3.3's rule (tests/sim/test_cooling.py)",
        quote="the new access frequency is fully reflected in the heat estimate after k requests",
        where="section 3.3", wording="states"))


def _range(values: list[float]) -> str:
    if not values:
        return "none"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"


def _cyl_claim(out: ExperimentOutput, table: list[dict[str, Any]], rows: list[dict[str, Any]],
               hot: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    rates = [r for r in cfg["rates"] if r >= 60]
    cells_ = {r: _get(table, "Cyl", r, False) for r in rates}
    holds = all(2 * c["saturated_seeds"] >= c["seeds"] for c in cells_.values())
    y = split_by_load(rows, hot, "Cyl", 60.0, False)
    light = _get(table, "Cyl", float(min(cfg["rates"])), False)
    util = max(r["hottest_utilization"] for r in rows if r["variant"] == "figure 5" and r["method"] == "Cyl"
               and r["rate_per_s"] == 60.0 and not r["cooling"] and not r["saturated"])
    reason = "" if holds else (
        f"at 60/s {len(y['saturated'])} of {len(y['saturated']) + len(y['finite'])} seeds saturate"
        + (f" (seeds {', '.join(map(str, y['saturated']))}, whose hottest file's largest Cyl unit alone loads its disk "
           f"to {_range(y['saturated_loads'])})" if y["saturated"] else "")
        + f"; in the others that unit loads its disk to {_range(y['finite_loads'])} and the hottest disk runs at "
        f"most at {fmt(util, 2)}: our Cyl serves faster than FIVE's ({fmt(light['mean_response_ms'])} ms at "
        f"{fmt(float(min(cfg['rates'])))}/s against 98.34)")
    out.claims.append(Claim(
        "Cyl without cooling saturates from 60/s",
        "Cyl without cooling saturated in at least half of the seeds at 60/s and every higher rate",
        "60/s: Cyl ∞ (Cyl-C 157.58 ms); ∞ at every higher rate",
        ", ".join(f"{fmt(r)}/s {_show(c)}" for r, c in cells_.items()), holds, reason,
        quote="60 62.81 47.05 ∞ 64.02 48.09 157.58", where="section 4.1.2, table 6 (row λ = 60)", wording="states"))


def _tenth_claim(out: ExperimentOutput, rows: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    cases = {(m, r): tenths_by_cell(rows, m, r) for m in cfg["methods"] for r in cfg["rates"]}
    cases = {key: t for key, t in cases.items() if t is not None and sum(t)}
    first = {key: t[0] > max(t[1:]) for key, t in cases.items()}
    n = sum(first.values())
    holds = bool(cases) and n == len(cases)
    worst = [f"{m} {fmt(r)}/s {t}" for (m, r), t in cases.items() if not first[(m, r)]][:3]
    out.claims.append(Claim(
        "cooling moves mostly in the first tenth, rarely after",
        "every cooled (method, rate) cell, moves summed over the seeds that did not saturate: more moves in the "
        "run's first tenth (of its arrival span) than in any later tenth",
        "high in the first tenth, then very infrequent",
        f"{n} of {len(cases)} cells" + (f"; e.g. Track 120/s per tenth {cases[('Track', 120.0)]}"
                                         if ("Track", 120.0) in cases else ""),
        holds, "" if holds else
        f"with {cfg['requests']:,} requests per run ({cfg['requests'] // COOLING.every_requests} demon calls), in "
        f"{len(cases) - n} cells a later tenth has as many moves as the first (per tenth: {'; '.join(worst)})",
        quote="the cooling frequency is high in the first tenth of the experiment, and as soon as the load is "
              "sufficiently balanced (as estimated by the heat bookkeeping) cooling is invoked only very "
              "infrequently", where="section 4.1.2", wording="direction"))


def _sections(out: ExperimentOutput, table: list[dict[str, Any]], rows: list[dict[str, Any]],
              hot: list[dict[str, Any]], cfg: dict[str, Any], seeds: list[int], unit: dict[str, int]) -> None:
    labels = [m + s for m in cfg["methods"] for s in ("", "-C")]
    t6 = []
    for rate in cfg["rates"]:
        row: dict[str, Any] = {"λ": rate}
        for m in cfg["methods"]:
            for c in (False, True):
                x = _get(table, m, rate, c)
                row[x["label"]] = f"{_show(x)} ({fmt(x['paper_response_ms'])})"
        t6.append(row)
    moves = [{"λ": rate, **{m + "-C": f"{fmt(_get(table, m, rate, True)['moves'], 3)} "
                                      f"({fmt(_get(table, m, rate, True)['source_queue_vetoes'], 3)})"
                            for m in cfg["methods"]}} for rate in cfg["rates"]]
    tenths = [{"cell": f"{m}-C {fmt(r)}/s", **{f"{i + 1}": t[i] for i in range(10)}}
              for m in cfg["methods"] for r in cfg["rates"] if (t := tenths_by_cell(rows, m, r)) is not None]
    sat = {(r["method"], r["rate_per_s"], r["cooling"], r["seed"]): r["saturated"] for r in rows
           if r["variant"] == "figure 5"}
    judged = [r for r in (100.0, 120.0, 130.0) if r in cfg["rates"]] or [float(max(cfg["rates"]))]
    light = float(min(cfg["rates"]))
    hot20 = {(r["method"], r["seed"]): r["hottest_utilization"] for r in rows if r["variant"] == "figure 5"
             and r["rate_per_s"] == light and not r["cooling"]}
    o = outcomes(rows, cfg)
    hot_rows = []
    for h in hot:
        row = {"seed": h["seed"], "file": h["file"], "class": h["class"], "size (KB)": h["size_kb"],
               "share": f"{100 * h['share']:.1f} %"}
        for m in cfg["methods"]:
            row[f"{m} unit (KB)"] = h[f"{m}_unit_blocks"]
            u = hot20[(m, h["seed"])]
            row[f"{m} hottest disk at {fmt(light)}/s (reaches 1 at)"] = f"{u:.2f} ({fmt(light / u, 3)}/s)"
            row[f"{m} load at {' / '.join(fmt(r) for r in judged)}/s"] = " / ".join(
                f"{h[f'{m}_load_{int(r)}']:.2f}" + (" ∞" if sat[(m, r, False, h["seed"])] else "")
                + (" ∞C" if sat[(m, r, True, h["seed"])] else "") for r in judged)
        hot_rows.append(row)
    tuned = five.gopt140(seeds[0])
    p87 = paper_unit(rows)
    out.sections += [
        f"## Setup\n\n{len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), {cfg['requests']:,} requests per run (FIVE: "
        "1,000,000), 32 disks of `five_table1`, detailed disk model, FCFS, files striped round robin; Gopt140 = "
        f"{unit['Gopt140']} KB (computed: R-bar {tuned.r_bar:.1f} KB, P-bar {tuned.p_bar}; FIVE's 87 KB has "
        "P-bar 3, see five-striping); cooling every 100 requests, delta 5 %, extents as migration units.",
        "## The hottest file of each seed\n\nThe X/Y = 70/30 skew over 2,000 active files sends about a tenth of "
        "all requests to the hottest file alone, so the outcome depends on which file each seed's (random) ranking "
        "puts on top. Per method: the file's largest part on one disk (KB) and that part's load on its disk "
        "(share x rate x its expected service time, equation 16 with P = 1), marked ∞ when the run without "
        "cooling saturated and ∞C when the run with cooling did; and the hottest disk's utilization without "
        f"cooling at {fmt(light)}/s with the rate at which it would reach 1, scaled linearly (the rule matches "
        f"{o['predicted']} of {o['runs']} runs without cooling: saturated where it reaches 1, finite where not). "
        "Cooling moves whole units: a load near or above 1 stays on one disk whatever cooling does.\n\n"
        + markdown_table(hot_rows, list(hot_rows[0])),
        "## Mean response time in ms over seeds: mean ± 95 % interval, or ∞ (saturated seeds / seeds; mean of "
        "the others); in brackets the paper's table 6", markdown_table(t6, ["λ", *labels]),
        "## Cooling moves executed, mean over seeds (in brackets: calls vetoed by step 5, the hottest disk had "
        "waiting requests)", markdown_table(moves, ["λ", *[m + "-C" for m in cfg["methods"]]]),
        "## Cooling moves per tenth of the run, summed over the seeds whose cooled run did not saturate",
        markdown_table(tenths, list(tenths[0])) if tenths else "no cooled run finished",
        "## Sensitivity: cooling without step 5's queue test, on each method's saturated cooled runs at the rate "
        "where it thrashes without cooling\n\n" + (markdown_table(
            [{"method": x["method"], "λ": x["rate_per_s"], "runs": x["runs"],
              "still saturated (seeds)": ", ".join(map(str, x["saturated"])) or "-",
              "rescued (seeds)": ", ".join(map(str, x["rescued"])) or "-", "moves": x["moves"],
              "hottest unit's load: saturated / rescued": f"{_range(x['saturated_loads'])} / "
                                                          f"{_range(x['rescued_loads'])}"}
             for x in queue_test(rows, hot)],
            ["method", "λ", "runs", "still saturated (seeds)", "rescued (seeds)", "moves",
             "hottest unit's load: saturated / rescued"]) if queue_test(rows, hot) else "no method thrashes"),
        f"## Sensitivity: Gopt140 with FIVE's 87 KB unit at {fmt(p87['rate_per_s'])}/s without cooling\n\n"
        f"{p87['saturated_seeds']} of {p87['seeds']} seeds saturated (with {unit['Gopt140']} KB: "
        f"{_get(table, 'Gopt140', p87['rate_per_s'], False)['saturated_seeds']} of "
        f"{_get(table, 'Gopt140', p87['rate_per_s'], False)['seeds']}).",
    ]


def _plot(path: Path, table: list[dict[str, Any]]) -> None:
    fig, (ax,) = new_figure(1, width=7.5)
    for i, m in enumerate(dict.fromkeys(r["method"] for r in table)):
        for c, style in ((False, "-"), (True, "--")):
            pts = sorted((r["rate_per_s"], r["mean_response_ms"], r["ci95_ms"]) for r in table if r["method"] == m
                         and r["cooling"] == c)
            ok = [p for p in pts if np.isfinite(p[1])]
            ax.errorbar([p[0] for p in ok], [p[1] for p in ok], yerr=[p[2] for p in ok], fmt=style, marker="o",
                        color=f"C{i}", label=m + ("-C" if c else ""), capsize=3)
            sat = [p[0] for p in pts if not np.isfinite(p[1])]
            ax.plot(sat, [5000] * len(sat), "x", color=f"C{i}", markersize=9)
    ax.set_xlabel("arrival rate λ (requests/s)")
    ax.set_ylabel("mean response time over seeds (ms, 95 % interval); x = saturated")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    save_figure(fig, path, "FIVE table 6: skewed workload, with (-C) and without cooling")

"""`alis`: ALIS's heat, run and combined clustering (Hsu, Smith, Young, sections 5 and 6) replayed on the
bundled hplajw week through the simulator's redirector, against the unreorganized disk, with the paper's PC
and server parameter sets, on a disk the week fills as the paper's traces fill theirs and on the shipped
36.7 GB member: table 2's baseline, the heat layouts of figure 6, the sweeps of figures 10 (run clustering
alone), 13 (combined against the threshold), 15 (area size), 16 (area offset) and 18 (reorganization
interval), figure 17's write counting, and figure 19's lookahead.

Choices where the paper is open or the trace differs (one line each, tested in
tests/libs/experiments/test_alis.py):
- parameter sets (5.1-5.3): PC beta 0.1, run threshold 0.1 alone and 0.4 combined; server beta 0.8,
  threshold 0.1 both; both alpha 0.8, tau 9, f 1, graph 0.5 % of the storage used, runs of at least tau
  units, sequential heat layout, writes counted in heat; hplajw (one user's workstation) runs the PC set;
- writes: RunHeat for both sets (the simulator's one write policy; the paper's PC default updates home), so
  "updating the runs slows PC writes" compares with the baseline, whose writes all go home;
- units: request extents for heat clustering too (the paper's figure 6 uses fixed units, 4 KB by default);
  figure 6 runs heat clustering alone with its area, 10 % of the volume 30 % into it;
- disks: "sized", the 73LZX's zones, skews, cache and heads with 33 cylinders a zone instead of 2,366, so the
  week's 337 MB fill 65.7 % of it (the paper: about 65 %, the closest member of the family per trace), its
  seek curve refitted to the 73LZX's 4.9 ms average and 0.6 ms one-cylinder seek over its 330 cylinders
  (members share the arm's stroke); "shipped", the 36.7 GB spec, 0.9 % full; claims are judged on "sized";
  both are resource-poor (no controller cache), so the resource-rich claims are not comparable;
- the two traced disks form one volume, device 1 after device 0 (the paper concatenates multi-volume
  workloads), on one disk from its outer edge; its RA (15 % of the sectors used) is inserted 30 % into it,
  moving the home data behind it up (the baseline keeps the plain volume, no area);
- replay: open loop at the trace's own times (not the paper's issue-window model), FCFS;
- warm-up: day 0 is simulated, not measured (the first realizable reorganization ends it); every figure is
  over the requests completing from day 1 on, figure 18's (and its baseline's) from the day its longest
  interval first reorganizes; the aged graph starts empty (eq. 2 from zero);
- improvement = (baseline - ALIS) / baseline of a figure (the paper's definition), in percent;
- the paper's words read as common.WORDING: "about" within ABOUT of its figure, "significantly"/"markedly"
  at least SIGNIFICANT times, "small" at most a third or SMALL_PP points, "most of the benefit" a small
  shortfall from the best value swept, "practically all" / "works well" within CLOSE of it (close);
- hplajw stands for the paper's PC class (its claims are the paper's); the server classes' claims are not
  comparable (no server trace);
- a plan's area offset does not change what it places (the directory is relative to the area), so one plan
  serves every offset and both disks;
- scale: full is the whole week with 4-8 values per swept parameter; tiny the first DAYS_TINY days (the
  runs found in the busy days 4-6 dominate the planning time) with 2-3 values each, the shipped disk's
  realizable rows only and figure 16 on the sized disk only.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.libs.experiments.common import (
    ABOUT,
    CLOSE,
    SIGNIFICANT,
    SMALL_PP,
    Claim,
    ExperimentOutput,
    about,
    close,
    fmt,
    markdown_table,
    new_figure,
    save_figure,
    significantly,
    small,
)
from blockheat.libs.experiments.placement import load_hplajw
from blockheat.sim import ALIS_MODES as MODES
from blockheat.sim import ALIS_REL_TOLERANCE as REL_TOLERANCE
from blockheat.sim import (
    DAY_US,
    AlisParams,
    AlisSetup,
    Concatenated,
    DiskArray,
    DiskSpec,
    Reorganization,
    Requests,
    SeekCurve,
    SimConfig,
    Simulation,
    load_spec,
    plan_schedule,
    volumes_for,
)
from blockheat.sim import prepare_alis as prepare
from blockheat.sim import run_alis_measured as run_measured

TITLE = ("ALIS heat, run and combined clustering on the hplajw week (ALIS sections 5 and 6, table 2, figures 6, 10, "
         "13-19)")
SPEC_NAME = "ibm_ultrastar_73lzx"
#: Figure 6's reorganized area (10 % of the volume, 30 % into it) and the paper's best sequential-layout gain
#: over its workloads (resource-poor, 4 KB units).
FIG6_RA_SHARE = 0.10
SEQUENTIAL_UP_TO_PCT = 29.0
#: The resource-rich configuration's controller cache, a share of the storage used (4.3).
RICH_CACHE_SHARE = 0.01
#: Storage used over disk capacity in the paper's runs (6.2: about 65 %, each trace on its closest 73LZX).
FILL = 0.65
DISKS = ("sized", "shipped")


@dataclass(frozen=True)
class ParameterSet:
    """One of the paper's per-class defaults: beta (eq. 2) and the edge-weight threshold of run clustering
    alone and combined with heat clustering."""

    beta: float
    threshold_run: float
    threshold_combined: float


#: 5.2.1 (beta: 0.1 PCs, 0.8 servers), 5.2.2 (threshold 0.1 for all), 5.3 (0.4 for PCs when combined).
SETS = {"pc": ParameterSet(0.1, 0.1, 0.4), "server": ParameterSet(0.8, 0.1, 0.1)}
#: Figure 10's panels (run clustering alone, PC set), figure 15's area sizes (and modes) and figure 16's area
#: offsets (and disks).
SWEEPS = {
    "full": {"tau": (2, 4, 9, 16), "graph_share": (0.0005, 0.001, 0.005, 0.01), "beta": (0.1, 0.3, 0.5, 0.8, 1.0),
             "threshold": (0.0, 0.1, 0.4, 1.0), "ra_share": (0.01, 0.05, 0.10, 0.15, 0.20),
             "ra_offset": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.85), "ra_share_modes": MODES,
             "ra_offset_disks": DISKS, "heat_layout": ("organ-pipe", "heat", "sequential"),
             "extent_bytes": (1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 30),
             "interval_days": (0.25, 0.5, 1.0, 2.0, 3.0)},
    "tiny": {"tau": (2, 9), "graph_share": (0.0005, 0.005), "beta": (0.1, 0.8), "threshold": (0.1, 1.0),
             "ra_share": (0.10, 0.15), "ra_offset": (0.0, 0.3), "ra_share_modes": ("heat", "combined"),
             "ra_offset_disks": ("sized",), "heat_layout": ("organ-pipe", "heat", "sequential"),
             "extent_bytes": (1 << 16, 1 << 24), "interval_days": (0.5, 1.0, 2.0)},
}
FIG10 = ("tau", "graph_share", "beta", "threshold")
#: Figure 10(a) again with runs of 2 units or more whatever tau (the paper's minimum run length is tau).
MIN_RUN_DECOUPLED = 2
DAYS_TINY = 4
#: The paper's figures (resource-poor unless noted; table 2 and sections 5-6).
PAPER = {
    "baseline": "table 2, P-Avg. resource-poor: read response 3.34 ms, read service 2.22 ms, read miss ratio 0.431, "
                "write service 1.41 ms (S-Avg.: 2.67, 1.91, 0.349, 1.32)",
    "heat": "up to 29 % (sequential layout, 4 KB units; figure A-1(d))",
    "organ pipe": "figures 6(a), A-1(a): the organ pipe layout degrades read response, most with small units",
    "combined": "PCs about 17 % (resource-poor), 14 % (resource-rich); base servers 37 %, merged servers 50 % (6.1)",
    "runs from the area": "figure 12(b): with run clustering only about 20-30 % of the PCs' disk reads come from the "
                          "area",
    "write": "6.3: for PCs, updating the runs markedly degrades write performance (their default updates home); "
             "servers: RunHeat 5-10 % better write service, up to 22 %",
    "lookahead": "lookahead beats history by about 40-50 % for run and combined clustering; small for heat (6.4)",
    "offset": "figure 16: an area 30-40 % into the space used works well for all workloads (disks about 65 % full)",
}
#: Table 2, P-Avg., resource-poor.
TABLE2_P_AVG = {"read_response_ms": 3.34, "read_service_ms": 2.22, "read_miss_ratio": 0.431, "write_service_ms": 1.41}
#: The reason a claim gets when it fails where no table of this experiment explains why (the pinned verdicts
#: in the tests catch every such change).
UNEXPLAINED = "no tested reason: differs from the paper on this run (values in the sensitivity tables)"
PC_COMBINED_PCT = 17.0
#: Figure 19: lookahead's gain over history for run and combined clustering, in points of improvement.
LOOKAHEAD_GAIN_PP = (40.0, 50.0)
PC_RUNS_FROM_AREA = (0.20, 0.30)


@dataclass(frozen=True, eq=False)
class Workload:
    requests: Requests
    spec: DiskSpec
    device_sectors: tuple[int, ...]

    @property
    def used_sectors(self) -> int:
        return sum(self.device_sectors)


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


def sized_disk(spec: DiskSpec, used_sectors: int, *, fill: float = FILL) -> DiskSpec:
    """`spec` with the same number of cylinders in each zone, as many as bring used_sectors / capacity
    closest to `fill`, and its seek curve refitted to the same average and one-cylinder seek over the new
    cylinders (a member of the same family: same heads, zones and arm stroke, fewer tracks).

        disk = sized_disk(load_spec("ibm_ultrastar_73lzx"), 657_396)     # 330 cylinders, 65.7 % full
    """
    if not 0.0 < fill <= 1.0:
        raise ValueError(f"fill must be in (0, 1], got {fill}")

    def build(per_zone: int) -> DiskSpec:
        zones = tuple(replace(z, first_cylinder=i * per_zone, last_cylinder=(i + 1) * per_zone - 1)
                      for i, z in enumerate(spec.zones))
        cylinders = per_zone * len(zones)
        seek = SeekCurve.fitted(average_ms=spec.mean_seek_ms(), single_cylinder_ms=float(spec.seek.time_ms(1)),
                                cylinders=cylinders)
        capacity_mb = cylinders * spec.surfaces * sum(z.sectors_per_track for z in zones) / len(zones) \
            * spec.sector_size / 1e6
        return replace(spec, name=f"{spec.name.split(' (')[0]} sized ({cylinders} cylinders, {capacity_mb:.0f} MB)",
                       cylinders=cylinders, zones=zones, seek=seek)

    per_track = sum((spec.surfaces * z.sectors_per_track) for z in spec.zones)
    guess = max(1, round(used_sectors / fill / per_track))
    candidates = [build(k) for k in (guess - 1, guess, guess + 1) if k >= 1]
    fits = [d for d in candidates if d.capacity_sectors >= used_sectors] or candidates[-1:]
    return min(fits, key=lambda d: abs(used_sectors / d.capacity_sectors - fill))


def without_read_ahead(spec: DiskSpec) -> DiskSpec:
    """The same disk with read-ahead off (its segments still hold the data a read brings in)."""
    return replace(spec, name=spec.name + ", no read-ahead", cache=replace(spec.cache, read_ahead_sectors=0))


def with_write_back(spec: DiskSpec) -> DiskSpec:
    """The same disk with its cache writing back (a write completes once in the cache)."""
    return replace(spec, name=spec.name + ", write-back", cache=replace(spec.cache, write_back=True))


def parameters(kind: str, mode: str = "combined", **changes: Any) -> AlisParams:
    """AlisParams with SETS[kind]'s beta and the threshold for `mode`; `changes` override any field.

        parameters("pc", "run", tau=2)      # beta 0.1, threshold 0.1, context size 2
    """
    s = SETS[kind]
    base: dict[str, Any] = {"beta": s.beta,
                            "threshold": s.threshold_combined if mode == "combined" else s.threshold_run}
    params = AlisParams(mode=mode, **{**base, **changes})
    # the same configuration, so one key: a minimum run length equal to tau is the default
    return replace(params, min_run_length=None) if params.min_run_length == params.tau else params


def days_to_threshold(beta: float, threshold: float) -> int:
    """Days of history before a sequence read once a day clears the run threshold, the aged graph starting
    empty: the least n with 1 - (1 - beta)^n >= threshold (eq. 2; the threshold is relative to one pass a
    day)."""
    if not 0.0 < beta <= 1.0:
        raise ValueError(f"beta must be in (0, 1], got {beta}")
    if threshold <= 0.0:
        return 1
    if threshold > 1.0 + REL_TOLERANCE:
        raise ValueError(f"a once-a-day sequence never reaches the threshold {threshold}")
    n = 1
    while 1.0 - (1.0 - beta) ** n < threshold * (1.0 - REL_TOLERANCE):
        n += 1
    return n


def improvement(base: float, new: float) -> float:
    """(base - new) / base in percent (the paper's improvement for smaller-is-better figures)."""
    return 100.0 * (base - new) / base if base and math.isfinite(base) and math.isfinite(new) else math.nan


def _plan_key(params: AlisParams) -> AlisParams:
    """params with the run-clustering fields at their defaults when heat clustering alone ignores them."""
    if params.mode != "heat":
        return params
    d = AlisParams()
    return replace(params, tau=d.tau, f=d.f, beta=d.beta, graph_share=d.graph_share, threshold=d.threshold,
                   min_run_length=d.min_run_length, include_writes=d.include_writes)


class Runner:
    """Runs and memoizes configurations of one workload: the baseline per disk, ALIS per parameters and
    disk, and each plan once (a plan does not depend on the disk or on the area's offset)."""

    def __init__(self, w: Workload, seed: int) -> None:
        self.w = w
        self.seed = seed
        self.cache: dict[Any, dict[str, Any]] = {}
        self.plans: dict[AlisParams, list[Reorganization]] = {}
        self.setups: dict[tuple[AlisParams, bool], AlisSetup] = {}

    def baseline(self, spec: DiskSpec, *, from_us: float = DAY_US) -> dict[str, Any]:
        """The unreorganized volume on `spec`, measured over the requests completing from from_us on."""
        key = ("baseline", spec.name, from_us)
        if key not in self.cache:
            sim = Simulation(spec, DiskArray(1, Concatenated()), self.w.requests, SimConfig(),
                             np.random.default_rng(self.seed), device_sectors=self.w.device_sectors)
            measured = self.w.requests.arrival_us >= from_us
            self.cache[key] = {**run_measured(sim, from_us=from_us), "ra_read_share": 0.0,
                               "served": {"home": int((self.w.requests.is_read & measured).sum())},
                               "written": {"home": int((~self.w.requests.is_read & measured).sum())},
                               "copy_in_sectors": 0, "copy_back_sectors": 0, "runs": 0, "runs_per_plan": [],
                               "run_lengths": []}
        return self.cache[key]

    def schedule(self, params: AlisParams) -> list[Reorganization]:
        key = replace(_plan_key(params), ra_offset=0.0)
        if key not in self.plans:
            volumes, dv, do = volumes_for(self.w.device_sectors, concatenated=True, ra_share=params.ra_share,
                                          ra_offset=params.ra_offset)
            self.plans[key] = plan_schedule(self.w.requests, volumes, params, sector_size=self.w.spec.sector_size,
                                            device_volume=dv, device_offset=do)
        return self.plans[key]

    def setup(self, params: AlisParams, *, empty: bool = False) -> AlisSetup:
        """The redirected workload of one configuration (the same on every disk of the sector size)."""
        key = (_plan_key(params), empty)
        if key not in self.setups:
            self.setups[key] = prepare(self.w.requests, params, sector_size=self.w.spec.sector_size,
                                       device_sectors=self.w.device_sectors, concatenated=True,
                                       schedule=[] if empty else self.schedule(params))
        return self.setups[key]

    def alis(self, params: AlisParams, spec: DiskSpec, *, empty: bool = False, from_us: float = DAY_US
             ) -> dict[str, Any]:
        """One ALIS configuration, measured over the requests completing from from_us on; empty: the area
        inserted but never filled (the layout's own cost)."""
        key = ("alis", params, spec.name, empty, from_us)
        if key not in self.cache:
            if spec.sector_size != self.w.spec.sector_size:
                raise ValueError(f"{spec.name} has {spec.sector_size}-byte sectors, the workload "
                                 f"{self.w.spec.sector_size}")
            setup = self.setup(params, empty=empty)
            need = sum(v.physical_sectors for v in setup.volumes)
            if need > spec.capacity_sectors:
                raise ValueError(f"the volume and its area take {need:,} sectors, {spec.name} has "
                                 f"{spec.capacity_sectors:,}")
            sim = setup.redirected.simulation(spec, SimConfig(), np.random.default_rng(self.seed))
            figures = run_measured(sim, from_us=from_us)
            measured = self.w.requests.arrival_us >= from_us
            served = setup.redirected.served(measured)
            reads = sum(served.values())
            red = setup.redirected
            sources = list(served)            # Redirected.served's keys, in the order of its source codes
            writes = np.bincount(red.source[~red.requests.is_read & measured], minlength=len(sources))
            lengths = [np.unique(r.directory.run_id[r.directory.run_id >= 0], return_counts=True)[1]
                       for r in setup.schedule]
            self.cache[key] = {**figures, "served": served,
                               "written": {name: int(writes[k]) for k, name in enumerate(sources)},
                               "ra_read_share": (reads - served["home"]) / reads if reads else math.nan,
                               "copy_in_sectors": int(setup.redirected.copy_in_sectors.sum()),
                               "copy_back_sectors": int(setup.redirected.copy_back_sectors.sum()),
                               "runs": sum(len(x) for x in lengths), "runs_per_plan": [len(x) for x in lengths],
                               "run_lengths": [int(n) for x in lengths for n in x]}
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
        "writes_to_run": res["written"].get("run", 0), "writes_to_heat": res["written"].get("heat", 0),
        "ra_read_share": res["ra_read_share"], "runs_placed": res["runs"],
        "copy_in_sectors": res["copy_in_sectors"], "copy_back_sectors": res["copy_back_sectors"],
        "saturated": res["saturated"],
    }


def _clustering(runner: Runner, disk: str, spec: DiskSpec, *, every: bool = True, full: bool = True
                ) -> list[dict[str, Any]]:
    """Figure 14's schemes with the PC set (realizable) on one disk; every: also the PC set's lookahead,
    the empty area and the disk without read-ahead; full: the server set's schemes and reads-only heat."""
    base = runner.baseline(spec)
    rows = [_row("baseline", base, base, disk=disk, set="-", mode="none", plan="none", read_ahead=True)]

    def add(label: str, params: AlisParams, kind: str, *, empty: bool = False) -> None:
        rows.append(_row(label, runner.alis(params, spec, empty=empty), base, disk=disk, set=kind,
                         mode="none" if empty else params.mode, plan="none" if empty else params.plan,
                         read_ahead=True))

    if every:
        add("area inserted, empty", parameters("pc"), "pc", empty=True)
    for plan in ("realizable", "lookahead") if every else ("realizable",):
        for mode in MODES:
            add(f"{mode} ({plan})", parameters("pc", mode, plan=plan), "pc")
    if every and full:
        add("combined (realizable), reads-only heat", parameters("pc", heat_writes=False), "pc")
    if every:   # figure 17's write policies: heat without writes counted, runs with writes in the graph
        add("heat (realizable), reads-only heat", parameters("pc", "heat", heat_writes=False), "pc")
        add("run (realizable), writes in the graph", parameters("pc", "run", include_writes=True), "pc")
    for mode in ("run", "combined") if full or every else ():   # heat alone ignores beta and the threshold
        add(f"{mode} (realizable), server set", parameters("server", mode), "server")
    if not every:
        return rows
    no_ra = without_read_ahead(spec)
    off = runner.baseline(no_ra)
    rows.append(_row("baseline, no read-ahead", off, off, disk=disk, set="-", mode="none", plan="none",
                     read_ahead=False))
    rows.append(_row("combined (realizable), no read-ahead", runner.alis(parameters("pc"), no_ra), off, disk=disk,
                     set="pc", mode="combined", plan="realizable", read_ahead=False))
    wb = runner.baseline(with_write_back(spec))
    rows.append(_row("baseline, write-back", wb, wb, disk=disk, set="-", mode="none", plan="none", read_ahead=True))
    return rows


def _sensitivity(runner: Runner, disks: dict[str, DiskSpec], sweeps: dict[str, tuple[Any, ...]]
                 ) -> list[dict[str, Any]]:
    """Figures 10 (PC set, run clustering alone; 10(a) also with runs of MIN_RUN_DECOUPLED units or more), 13
    (combined, the thresholds of 10(d)), 15 and 18 (each scheme's reorganization interval, all measured from
    the day the longest interval first reorganizes) on the sized disk, figure 16 (combined, PC set) on both
    disks."""
    sens = []

    def add(label: str, params: AlisParams, disk: str, figure: str, parameter: str, value: float,
            from_day: int = 1) -> None:
        b = runner.baseline(disks[disk], from_us=from_day * DAY_US)
        sens.append(_row(label, runner.alis(params, disks[disk], from_us=from_day * DAY_US), b, disk=disk,
                         figure=figure, parameter=parameter, value=float(value), mode=params.mode, from_day=from_day))

    for name in FIG10:
        for value in sweeps[name]:
            add(f"run, {name}={value:g}", parameters("pc", "run", **{name: value}), "sized", "10", name, value)
    for value in sweeps["tau"]:
        add(f"run, tau={value:g}, runs of {MIN_RUN_DECOUPLED}+", parameters(
            "pc", "run", tau=value, min_run_length=MIN_RUN_DECOUPLED), "sized", "10", "tau_min_run_2", value)
    for mode in sweeps["ra_share_modes"]:
        for value in sweeps["ra_share"]:
            add(f"{mode}, ra_share={value:g}", parameters("pc", mode, ra_share=value), "sized", "15", "ra_share", value)
    for disk in sweeps["ra_offset_disks"]:
        for value in sweeps["ra_offset"]:
            add(f"combined, ra_offset={value:g}", parameters("pc", ra_offset=value), disk, "16", "ra_offset", value)
    for value in sweeps["threshold"]:
        add(f"combined, threshold={value:g}", parameters("pc", "combined", threshold=value), "sized", "13", "threshold",
            value)
    start = math.ceil(max(sweeps["interval_days"]))
    for mode in MODES:
        for days in sweeps["interval_days"]:
            add(f"{mode}, interval={days:g} days", parameters("pc", mode, interval_s=days * DAY_US / 1e6), "sized",
                "18", "interval_days", days, start)
    return sens


def _layouts(runner: Runner, spec: DiskSpec, sweeps: dict[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Figure 6: heat clustering alone with each layout, and packed extents over extent sizes, with figure 6's
    area (FIG6_RA_SHARE of the volume, 30 % into it), daily, on `spec`."""
    base = runner.baseline(spec)
    rows = []
    for layout in sweeps["heat_layout"]:
        params = parameters("pc", "heat", heat_layout=layout, ra_share=FIG6_RA_SHARE)
        rows.append(_row(f"heat, {layout} layout", runner.alis(params, spec), base, parameter="layout", layout=layout,
                         extent_kb=math.nan))
    for size in sweeps["extent_bytes"]:
        params = parameters("pc", "heat", heat_layout="packed", extent_bytes=size, ra_share=FIG6_RA_SHARE)
        rows.append(_row(f"heat, packed extents of {size >> 10} KB", runner.alis(params, spec), base,
                         parameter="extent", layout="packed", extent_kb=float(size >> 10)))
    return rows


#: Run-length bins (units) of the run-length table; the last is open.
LENGTH_BINS = (2, 3, 5, 9, 17)


def _run_lengths(runner: Runner, spec: DiskSpec, taus: tuple[float, ...]) -> list[dict[str, Any]]:
    """Lengths of the runs placed over the week with each context size and runs of MIN_RUN_DECOUPLED units
    or more: how many are shorter than the default context size (the paper's minimum run length)."""
    out = []
    tau_default = AlisParams().tau
    for tau in taus:
        res = runner.alis(parameters("pc", "run", tau=int(tau), min_run_length=MIN_RUN_DECOUPLED), spec)
        n = np.asarray(res["run_lengths"], np.int64)
        row: dict[str, Any] = {"tau": int(tau), "runs_placed": len(n),
                               f"shorter_than_{tau_default}_share": float(np.mean(n < tau_default)) if len(n)
                               else math.nan}
        edges = (*LENGTH_BINS, np.iinfo(np.int64).max)
        for lo, hi in itertools.pairwise(edges):
            label = f"runs_{lo}" if hi == lo + 1 else (f"runs_{lo}_{hi - 1}" if hi < edges[-1] else f"runs_{lo}_up")
            row[label] = int(np.sum((n >= lo) & (n < hi)))
        out.append(row)
    return out


def _warm_up(runner: Runner, spec: DiskSpec) -> list[dict[str, Any]]:
    """Runs placed by each daily plan with beta and the threshold of both sets crossed (combined) and both
    sets' run clustering alone, with the days a once-a-day sequence needs to clear the threshold: which of
    the two parameters makes the PC set lose on one week."""
    base = runner.baseline(spec)["mean_response_ms_read"]
    out = []
    pc, server = SETS["pc"], SETS["server"]
    combos = [("combined", b, t) for b in (pc.beta, server.beta) for t in (pc.threshold_combined,
                                                                          server.threshold_combined)]
    combos += [("run", s.beta, s.threshold_run) for s in (pc, server)]
    names = {(pc.beta, pc.threshold_combined, "combined"): "pc", (server.beta, server.threshold_combined, "combined"):
             "server", (pc.beta, pc.threshold_run, "run"): "pc", (server.beta, server.threshold_run, "run"): "server"}
    for mode, beta, threshold in combos:
        res = runner.alis(AlisParams(mode=mode, beta=beta, threshold=threshold), spec)
        out.append({"mode": mode, "beta": beta, "threshold": threshold,
                    "set": names.get((beta, threshold, mode), "mixed"),
                    "days_to_threshold": days_to_threshold(beta, threshold),
                    "runs_per_plan": res["runs_per_plan"], "runs_placed": res["runs"],
                    "run_units": int(sum(res["run_lengths"])),
                    "read_response_impr_pct": improvement(base, res["mean_response_ms_read"])})
    return out


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("alis", TITLE, scale)
    w = load(days=DAYS_TINY if scale == "tiny" else None)
    runner = Runner(w, seed)
    disks = {"sized": sized_disk(w.spec, w.used_sectors), "shipped": w.spec}
    sweeps = SWEEPS[scale]
    # tiny: the shipped disk's PC rows only, no reads-only heat (the test suite's time)
    rows = [r for disk, spec in disks.items()
            for r in _clustering(runner, disk, spec, every=scale == "full" or disk == "sized", full=scale == "full")]
    sens = _sensitivity(runner, disks, sweeps)
    warm = _warm_up(runner, disks["sized"])
    lengths = _run_lengths(runner, disks["sized"], sweeps["tau"])
    layouts = _layouts(runner, disks["sized"], sweeps)
    out.tables["clustering"] = pa.Table.from_pylist(rows)
    out.tables["sensitivity"] = pa.Table.from_pylist(sens)
    out.tables["layouts"] = pa.Table.from_pylist(layouts)
    out.tables["warm_up"] = pa.Table.from_pylist(warm)
    out.tables["run_lengths"] = pa.Table.from_pylist(lengths)
    by = {(r["disk"], r["configuration"]): r for r in rows}
    facts = _facts(w)
    _claims(out, by, sens, warm, lengths, facts, w, layouts, disks)
    _sections(out, w, disks, rows, sens, warm, lengths, facts, layouts)
    out.plots.append(("clustering.png", lambda p: _plot_main(p, by)))
    out.plots.append(("figure10.png", lambda p: _plot_sweeps(p, sens, "10", FIG10)))
    out.plots.append(("figure13_18.png", lambda p: _plot_sweeps(p, sens, "13/18", ("threshold", "interval_days"))))
    out.plots.append(("figure15_16.png", lambda p: _plot_sweeps(p, sens, "15/16", ("ra_share", "ra_offset"))))
    return out.finish()


def _sweep(sens: list[dict[str, Any]], figure: str, parameter: str, mode: str, disk: str = "sized"
           ) -> dict[float, float]:
    return {r["value"]: r["read_response_impr_pct"] for r in sens if r["figure"] == figure
            and r["parameter"] == parameter and r["mode"] == mode and r["disk"] == disk}


def _facts(w: Workload) -> dict[str, float]:
    """Trace figures the reasons rest on, over the measured days (1 on), per (request extent, day) read:
    history: share of the measured reads whose extent was read on an earlier day; next_day: of the
    (extent, day) pairs read on an earlier day too, the share whose latest earlier day is the day before;
    writes: share of the requests that write."""
    r = w.requests
    reads = np.flatnonzero(r.is_read)
    day = (r.arrival_us[reads] // DAY_US).astype(np.int64)
    key = r.device[reads].astype(np.int64) * (1 << 50) + r.lbn[reads] * (1 << 12) + r.sectors[reads]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    first_day = day[first][inverse]      # reads are in time order: a key's first read is its earliest
    later = day >= 1
    pairs = np.unique(np.stack([inverse, day], axis=1), axis=0)       # (extent, day), sorted by both
    again = pairs[1:, 0] == pairs[:-1, 0]
    gap = (pairs[1:, 1] - pairs[:-1, 1])[again]
    return {"history": float(np.mean(first_day[later] < day[later])) if later.any() else math.nan,
            "next_day": float(np.mean(gap == 1)) if len(gap) else math.nan,
            "writes": float(1.0 - r.is_read.mean())}


def _points(points: dict[float, float]) -> str:
    return ", ".join(f"{k:g}: {v:.1f} %" for k, v in sorted(points.items()))


def _claims(out: ExperimentOutput, by: dict[tuple[str, str], dict[str, Any]], sens: list[dict[str, Any]],
            warm: list[dict[str, Any]], lengths: list[dict[str, Any]], facts: dict[str, float], w: Workload,
            layouts: list[dict[str, Any]], disks: dict[str, DiskSpec]) -> None:
    s = {k[1]: v for k, v in by.items() if k[0] == "sized"}
    x = {k[1]: v for k, v in by.items() if k[0] == "shipped"}
    impr = {m: s[f"{m} (realizable)"]["read_response_impr_pct"] for m in MODES}
    look = {m: s[f"{m} (lookahead)"]["read_response_impr_pct"] for m in MODES}
    heat, runs, comb = impr["heat"], impr["run"], impr["combined"]
    ro = s.get("combined (realizable), reads-only heat", {}).get("read_response_impr_pct", math.nan)
    shipped = "/".join(f"{x[f'{m} (realizable)']['read_response_impr_pct']:.1f}" for m in ("combined", "heat", "run"))
    holds = bool(comb > max(heat, runs))
    out.claims.append(Claim(
        "combined beats either alone",
        "PC set, sized disk: combined clustering's read-response improvement exceeds heat's and run's "
        "(realizable, daily)",
        "figure 14: combined clearly superior to either alone in practically all cases",
        f"combined {comb:.1f} %, heat {heat:.1f} %, run {runs:.1f} % (shipped disk: {shipped} %)", holds,
        "" if holds else UNEXPLAINED if not ro > max(heat, runs) else
        f"heat clustering counts this write-heavy trace's writes ({100 * facts['writes']:.0f} % of the requests), "
        f"whose blocks take area space: with reads-only heat combined improves by {ro:.1f} % "
        f"(the better scheme alone {max(heat, runs):.1f} %)",
        quote="In fact, the performance of the combined scheme is clearly superior to either technique alone in "
              "practically all the cases.",
        where="section 6.1, figures 14 and A-17", wording="direction"))
    run_share = s["run (realizable)"]["ra_read_share"]
    holds = about(comb, PC_COMBINED_PCT)
    out.claims.append(Claim(
        "PCs: read response about 17 % better",
        f"PC set, sized disk (resource-poor): combined clustering's improvement within {100 * ABOUT:g} % of 17 % "
        f"({PC_COMBINED_PCT * (1 - ABOUT):.1f}-{PC_COMBINED_PCT * (1 + ABOUT):.1f} %)", PAPER["combined"],
        f"{comb:.1f} % (shipped disk {x['combined (realizable)']['read_response_impr_pct']:.1f} %)", holds,
        "" if holds else
        f"hplajw repeats its reads more than the paper's PCs: run clustering alone serves {100 * run_share:.0f} % "
        f"of the measured reads from the area (the paper's PCs {100 * PC_RUNS_FROM_AREA[0]:.0f}-"
        f"{100 * PC_RUNS_FROM_AREA[1]:.0f} %, figure 12(b)), and "
        f"{100 * facts['history']:.0f} % of the measured reads re-read an extent read on an earlier day",
        quote="Specifically, the read response time for the PC workloads is improved on average by about 17% in the "
              "resource-poor environment and 14% in the resource-rich environment.",
        where="section 6.1, figure A-17", wording="about"))
    pc_set, srv = s["combined (realizable)"], s["combined (realizable), server set"]
    wc = {(r["mode"], r["beta"], r["threshold"]): r for r in warm}
    pc, server = SETS["pc"], SETS["server"]
    holds = bool(pc_set["read_response_impr_pct"] >= srv["read_response_impr_pct"])
    mine = wc[("combined", pc.beta, pc.threshold_combined)]
    warm_reason = (
        f"the aged graph starts empty and the replayed days give {len(mine['runs_per_plan'])} daily plans (the "
        f"paper warms up 20 days): with beta {pc.beta:g} a sequence read once a day needs "
        f"{days_to_threshold(pc.beta, pc.threshold_combined)} days to clear the PC threshold "
        f"{pc.threshold_combined:g}, so runs placed: {mine['runs_placed']} with the PC set, "
        f"{wc[('combined', server.beta, server.threshold_combined)]['runs_placed']} with the server set")
    out.claims.append(Claim(
        "the PC set suits a PC-like trace",
        "sized disk: combined clustering with the PC set (beta 0.1, threshold 0.4) better than or equal to the "
        "server set (beta 0.8, threshold 0.1)",
        "5.2.1: defaults good for a class of workloads, beta 0.1 for PCs and 0.8 for servers; 5.3: threshold 0.4 "
        "for PCs combined",
        f"PC set {pc_set['read_response_impr_pct']:.1f} %, server set {srv['read_response_impr_pct']:.1f} %", holds,
        "" if holds else
        warm_reason + "; with the server's beta alone "
        f"combined reaches {wc[('combined', server.beta, pc.threshold_combined)]['read_response_impr_pct']:.1f} %, "
        f"with the threshold {server.threshold_combined:g} alone "
        f"{wc[('combined', pc.beta, server.threshold_combined)]['read_response_impr_pct']:.1f} % (warm-up table)",
        quote="To reflect the likely situation that ALIS will be used with a default setting, we base our performance "
              "evaluation on parameter settings that are good for an entire class of workloads rather than on the "
              "best values for each individual workload. Therefore, the results in this paper assume a default β "
              "value of 0.1 for all the PC workloads and 0.8 for all the server workloads.",
        where="section 5.2.1", wording="direction"))
    base = s["baseline"]
    r = s["run (realizable)"]
    larger = max(r["read_response_impr_pct"], r["read_service_impr_pct"])
    holds = significantly(r["read_miss_impr_pct"], larger)
    per_read = {k: v["read_service_ms"] * v["reads"] / v["physical_reads"] for k, v in (("base", base), ("run", r))}
    out.claims.append(Claim(
        "runs work through prefetch",
        f"PC set, run clustering alone: the read miss ratio's improvement at least {SIGNIFICANT:g}x the larger of "
        "the read response and read service improvements",
        "5.3: the improvement in read miss ratio significantly exceeds that in read response and service time",
        f"miss ratio {r['read_miss_impr_pct']:.1f} %, response {r['read_response_impr_pct']:.1f} %, service "
        f"{r['read_service_impr_pct']:.1f} % (ratio {r['read_miss_impr_pct'] / larger:.2f})", holds,
        "" if holds else
        f"the paper's reason for the gap is that the reads left after run clustering take longer (the arm moves "
        f"between the runs and the home area's hot spots, only 20-30 % of its PCs' reads coming from the area); "
        f"here run clustering serves {100 * run_share:.0f} % of the measured reads from the area, and a physical read "
        f"costs {per_read['run']:.2f} ms of service against the baseline's {per_read['base']:.2f} ms, so the response "
        f"gain follows the {r['physical_reads_saved']:,} physical reads saved "
        f"({base['physical_reads']:,} -> {r['physical_reads']:,})",
        quote="In our analysis of run clustering, we observed that the improvement in read miss ratio significantly "
              "exceeds the improvement in read response and service time, especially for the PC workloads (e.g., "
              "Figures 14 and A-17).",
        where="section 5.3, figures 14 and A-17", wording="significantly"))
    on, off = s["combined (realizable)"], s["combined (realizable), no read-ahead"]
    holds = bool(on["physical_reads_saved"] > off["physical_reads_saved"])
    out.claims.append(Claim(
        "read-ahead turns order into fewer physical reads",
        "PC set: combined clustering saves more physical reads with the disk's read-ahead than with it off",
        "1, 3: ALIS transforms the request stream so that sequential prefetch downstream becomes effective",
        f"{on['physical_reads_saved']:,} saved with read-ahead, {off['physical_reads_saved']:,} without", holds,
        "" if holds else UNEXPLAINED,
        quote="Recall that the main benefit of ALIS is to transform the request stream so as to increase the "
              "effectiveness of sequential prefetch performed by the storage system downstream.",
        where="section 4.4", wording="direction"))
    gap = {m: look[m] - impr[m] for m in MODES}
    holds = small(gap["heat"], min(gap["run"], gap["combined"]))
    look_heat = s["heat (lookahead)"]
    out.claims.append(Claim(
        "history predicts heat better than runs",
        f"PC set: lookahead's gain over realizable (points of read-response improvement) for heat at most a third "
        f"of that for run and combined clustering, or at most {SMALL_PP:g} points",
        PAPER["lookahead"],
        f"gain heat {gap['heat']:.1f}, run {gap['run']:.1f}, combined {gap['combined']:.1f} points "
        f"(lookahead {look['heat']:.1f} / {look['run']:.1f} / {look['combined']:.1f} %)", holds,
        "" if holds else
        f"heat's gap is smaller than the runs' (the paper's order) but not small: each day's whole footprint fits "
        f"the area, so lookahead heat serves {100 * look_heat['ra_read_share']:.0f} % of the measured reads from "
        f"it, realizable heat {100 * s['heat (realizable)']['ra_read_share']:.0f} %; only "
        f"{100 * facts['history']:.0f} % of the measured reads re-read an extent read on an earlier day, the rest "
        "are first reads that no count from history can place",
        quote="Observe that for heat clustering, the difference is small, meaning that the workload characteristic "
              "heat clustering exploits is relatively stable.",
        where="section 6.4, figures 19 and A-22", wording="small"))
    lo, hi = LOOKAHEAD_GAIN_PP      # "about" a range: within ABOUT of either end, or between them
    holds = bool(all(lo * (1 - ABOUT) <= gap[m] <= hi * (1 + ABOUT) for m in ("run", "combined")))
    out.claims.append(Claim(
        "lookahead beats history by about 40-50 % (runs, combined)",
        f"PC set: lookahead's gain over realizable, in points of read-response improvement, within {100 * ABOUT:g} % "
        f"of {lo:g}-{hi:g} ({lo * (1 - ABOUT):g}-{hi * (1 + ABOUT):g} points) for run and combined clustering",
        PAPER["lookahead"], f"run {gap['run']:.1f}, combined {gap['combined']:.1f} points", holds,
        "" if holds else UNEXPLAINED,
        quote="With a reorganization frequency of once a day, having forward knowledge outperforms history-based "
              "prediction by about 4050%.",
        where="section 6.4, figures 19 and A-22 (the text's '4050%' is 40-50 %)", wording="about"))
    c = s["combined (realizable)"]
    holds = bool(c["ra_read_share"] > 0.5)
    out.claims.append(Claim(
        "the area serves most reads (combined)",
        "PC set: more than half of the measured read requests are served from the reorganized area",
        "figure 12(c): the majority of disk reads are satisfied in the reorganized area (ours: read requests)",
        f"{100 * c['ra_read_share']:.1f} % ({c['reads_from_run']:,} run, {c['reads_from_heat']:,} heat, "
        f"{c['reads_split']:,} split)", holds,
        "" if holds else
        f"only {100 * facts['history']:.0f} % of the measured reads re-read an extent read on an earlier day: the "
        "rest are first reads no plan from history can place",
        quote="But it is still the case that the majority of disk reads can be satisfied from the reorganized area.",
        where="section 5.3, figures 12(c) and A-14(c)", wording="states"))
    slower = -r["write_service_impr_pct"]
    holds = significantly(r["write_service_ms"], base["write_service_ms"])
    to_runs = r["writes_to_run"] / r["writes"] if r["writes"] else math.nan
    empty = s["area inserted, empty"]
    out.claims.append(Claim(
        "updating the runs slows PC writes",
        f"PC set, run clustering alone, writes to the run copies (RunHeat): mean write service time at least "
        f"{SIGNIFICANT:g}x the baseline's (whose writes all go home, as the paper's PC default's do)",
        PAPER["write"],
        f"{fmt(r['write_service_ms'])} ms against {fmt(base['write_service_ms'])} ms ({slower:+.1f} %; combined "
        f"{-c['write_service_impr_pct']:+.1f} %)", holds,
        "" if holds else
        f"writes are slower with the runs updated ({slower:+.1f} %), but only {r['writes_to_run']:,} of the "
        f"{r['writes']:,} measured writes ({100 * to_runs:.0f} %) fall on run copies, and the inserted area alone, "
        f"every write going home as under the paper's PC default, gives {fmt(empty['write_service_ms'])} ms (area "
        "inserted, empty): the simulator has no update-home policy to compare with",
        quote="For the PC workloads, updating the runs increases read performance slightly but markedly degrades "
              "write performance.",
        where="section 6.3, figures 17(b) and A-20(b)", wording="significantly"))
    taus = _sweep(sens, "10", "tau", "run")
    decoupled = _sweep(sens, "10", "tau_min_run_2", "run")
    holds = bool(all(taus[9.0] > v for k, v in taus.items() if k < 9.0))
    l9 = next(row for row in lengths if row["tau"] == 9)
    out.claims.append(Claim(
        "context size: stable from about 8",
        "PC set, run clustering: the improvement with tau = 9 above that with each smaller context size swept",
        "figure 10(a): performance increases with the context size and stabilizes beyond about eight",
        _points(taus), holds, "" if holds else
        f"the minimum run length is tau (the paper's rule) and hplajw's repeated sequences are short: with runs of "
        f"{MIN_RUN_DECOUPLED} units or more tau 9 improves by {decoupled[9.0]:.1f} % (tau 2: {decoupled[2.0]:.1f} %), "
        f"and {100 * l9['shorter_than_9_share']:.0f} % of the {l9['runs_placed']} runs it places are shorter than 9 "
        "units (run-length table)",
        quote="For our workloads, performance clearly increases with the context size and tends to stabilize beyond "
              "about eight.",
        where="section 5.2.1, figures 10(a) and A-8(a)", wording="direction"))
    ok, text = _most(_sweep(sens, "10", "graph_share", "run"), 0.005)
    out.claims.append(Claim(
        "a 0.5 % graph suffices",
        f"PC set, run clustering: a graph of 0.5 % of the storage used short of the best size by at most a third "
        f"of the best improvement or {SMALL_PP:g} points",
        "figure 10(b): a graph smaller than 0.5 % of the storage used realizes most of the benefit", text, ok,
        "" if ok else UNEXPLAINED,
        quote="Observe from the figures that a graph smaller than 0.5% of the storage used is sufficient to realize "
              "most of the benefit of run clustering.",
        where="section 5.2.1, figures 10(b) and A-8(b)", wording="small"))
    betas = _sweep(sens, "10", "beta", "run")
    holds = bool(betas[0.1] > betas[0.8])
    out.claims.append(Claim(
        "PCs prefer a smaller beta", "PC set, run clustering: beta 0.1 better than beta 0.8",
        "figure 10(c): stable over a wide range; PC workloads perform better with smaller beta (more history), "
        "servers with larger", _points(betas), holds,
        "" if holds else
        f"hplajw's repeats come back the next day: of the extents read on a measured day and on an earlier one, "
        f"{100 * facts['next_day']:.0f} % were last read the day before, so the newest day, which beta "
        f"{pc.beta:g} weighs at {pc.beta:g}, predicts best",
        quote="Observe that as in heat clustering, the workloads are relatively stable over a wide range of β values "
              "with the PC workloads performing better for smaller values of β , meaning when more history is taken "
              "into account, and the server workloads preferring larger values of β .",
        where="section 5.2.1, figures 10(c) and A-8(c)", wording="direction"))
    thr = _sweep(sens, "10", "threshold", "run")
    steps = [(a, b) for a, b in itertools.pairwise(sorted(thr)) if a >= SETS["pc"].threshold_run]
    worse = sum(thr[b] < thr[a] for a, b in steps)
    holds = bool(steps and worse > len(steps) / 2)
    out.claims.append(Claim(
        "selective thresholds hurt runs alone",
        f"PC set, run clustering: from the default {SETS['pc'].threshold_run:g} up (the paper excepts very small "
        "thresholds for PCs), a larger threshold is worse in more than half of the steps swept",
        "figure 10(d): being more selective in picking the vertices tends to reduce performance",
        f"{_points(thr)} ({worse} of {len(steps)} steps worse)", holds,
        "" if holds else UNEXPLAINED,
        quote="Observe that being more selective in picking the vertices tends to reduce performance except at very "
              "small threshold values for the PC workloads.",
        where="section 5.2.2, figures 10(d) and A-8(d)", wording="in general"))
    heat_sizes = _sweep(sens, "15", "ra_share", "heat")
    ok = close(heat_sizes[0.10], max(heat_sizes.values()))
    out.claims.append(Claim(
        "heat clustering: a 10 % area suffices",
        f"PC set: heat with a 10 % area within {100 * CLOSE:g} % of its best improvement over the sizes swept",
        "figure 15: less than 10 % of the storage used realizes practically all of heat clustering's benefit",
        _points(heat_sizes), ok, "" if ok else UNEXPLAINED,
        quote="Observe that for all our workloads, a reorganized area less than 10% the size of the storage used is "
              "sufficient to realize practically all the benefit of heat clustering.",
        where="section 6.2, figures 15 and A-18", wording="close"))
    ok, text = _most(_sweep(sens, "15", "ra_share", "combined"), 0.10)
    out.claims.append(Claim(
        "PCs, combined: a 10 % area realizes most of the benefit",
        f"PC set: combined with a 10 % area short of its best size by at most a third of the best improvement or "
        f"{SMALL_PP:g} points",
        "figure 15 / 6.2: about 10 % for all workloads but the servers (about 15 %)", text, ok,
        "" if ok else UNEXPLAINED,
        quote="Combining heat and run clustering, we find that by reorganizing only about 10% of the storage space, "
              "we are able achieve most of the potential performance improvement for all the workloads except the "
              "server workloads which require on average about 15%.",
        where="section 6.2, figures 15 and A-18", wording="small"))
    offs = _sweep(sens, "16", "ra_offset", "combined")
    best_at = max(offs[v] for v in (0.3, 0.4) if v in offs)
    ok = close(best_at, max(offs.values()))
    flat = _sweep(sens, "16", "ra_offset", "combined", "shipped")
    out.claims.append(Claim(
        "an area 30-40 % into the volume works well",
        f"PC set, sized disk: combined with the area 30 or 40 % into the volume within {100 * CLOSE:g} % of the best "
        "offset's improvement", PAPER["offset"],
        _points(offs) + (f" (shipped disk: {min(flat.values()):.1f}-{max(flat.values()):.1f} %)" if flat else ""), ok,
        "" if ok else UNEXPLAINED,
        quote="Empirically, we find that for all our workloads, locating the reorganized area at a byte offset 30-40% "
              "into the space used works well.",
        where="section 6.2, figures 16 and A-19", wording="close"))
    _layout_claims(out, layouts)
    _threshold_claims(out, sens)
    _write_claims(out, s)
    _interval_claims(out, sens)
    _context_claims(out, s, w, disks, srv)


def _most(points: dict[float, float], at: float) -> tuple[bool, str]:
    """"Most of the benefit" at `at`: its shortfall from the best point is small (WORDING "small")."""
    return small(max(points.values()) - points[at], max(points.values())), _points(points)


def _layout_claims(out: ExperimentOutput, layouts: list[dict[str, Any]]) -> None:
    lay = {r["layout"]: r for r in layouts if r["parameter"] == "layout"}
    op, seq = lay["organ-pipe"], lay["sequential"]
    holds = bool(op["read_response_impr_pct"] < 0.0)
    out.claims.append(Claim(
        "organ pipe performs very poorly",
        f"heat clustering alone, {100 * FIG6_RA_SHARE:.0f} % area, organ-pipe layout: read response worse than the "
        "baseline's (the paper's figure 6(a) degrades)",
        PAPER["organ pipe"],
        f"organ pipe {op['read_response_impr_pct']:.1f} %, heat layout {lay['heat']['read_response_impr_pct']:.1f} %, "
        f"sequential {seq['read_response_impr_pct']:.1f} % (miss ratio {op['read_miss_impr_pct']:.1f} / "
        f"{lay['heat']['read_miss_impr_pct']:.1f} / {seq['read_miss_impr_pct']:.1f} %)", holds,
        "" if holds else
        f"our heat units are whole request extents (the paper's figure 6 uses fixed units, 4 KB at its default), "
        f"so the organ pipe splits almost no request ({op['reads_split']} split reads of {op['reads']:,}): it loses "
        "prefetch as the paper says "
        f"(miss-ratio improvement {op['read_miss_impr_pct']:.1f} % against the sequential layout's "
        f"{seq['read_miss_impr_pct']:.1f} %) but keeps the shorter seeks of a packed hot area",
        quote="Observe that the organ pipe heuristic performs very poorly.",
        where="section 5.1.1, figures 6(a) and A-1(a)", wording="direction"))
    packed = {r["extent_kb"]: r for r in layouts if r["parameter"] == "extent"}
    ext = {k: r["read_response_impr_pct"] for k, r in packed.items()}
    miss = {k: r["read_miss_impr_pct"] for k, r in packed.items()}
    svc = {k: r["read_service_impr_pct"] for k, r in packed.items()}
    sizes = sorted(ext)
    steps = list(itertools.pairwise(sizes))
    holds = bool(all(ext[b] >= ext[a] for a, b in steps) and ext[sizes[-1]] > ext[sizes[0]])
    down = [(a, b) for a, b in steps if ext[b] < ext[a]]
    out.claims.append(Claim(
        "packed extents: larger extents, better",
        f"heat clustering alone, {100 * FIG6_RA_SHARE:.0f} % area, packed-extents layout: each larger extent size "
        "at least as good as the next smaller one, the largest better than the smallest",
        "figure 6(c): performance increases with the extent size up to the gigabyte range",
        ", ".join(f"{_size(k)}: {ext[k]:.2f} %" for k in sizes), holds,
        "" if holds else UNEXPLAINED if any(miss[b] < miss[a] for a, b in down) else
        "the paper's mechanism holds at every step: larger extents keep more of the home order and never lose "
        "prefetch (miss-ratio improvement " + ", ".join(f"{_size(k)} {miss[k]:.1f} %" for k in sizes) + "); the "
        "falls are positioning time within the area (" + ", ".join(
            f"{_size(a)} to {_size(b)}: read response {ext[a]:.2f} -> {ext[b]:.2f} %, read service "
            f"{svc[a]:.2f} -> {svc[b]:.2f} %" for a, b in down) + ")",
        quote="That the performance increases with extent sizes up to the gigabyte range implies that for laying out "
              "the hot reorganization units, preserving existing spatial locality is more important than "
              "concentrating the heat.",
        where="section 5.1.3, figures 6(c) and A-1(c)", wording="direction"))
    v = seq["read_response_impr_pct"]
    holds = bool(0.0 < v <= SEQUENTIAL_UP_TO_PCT)
    out.claims.append(Claim(
        "sequential heat layout: up to 29 %",
        f"heat clustering alone, {100 * FIG6_RA_SHARE:.0f} % area, sequential layout: read response improved, by at "
        f"most {SEQUENTIAL_UP_TO_PCT:g} % (the paper's largest over its workloads, resource-poor)",
        PAPER["heat"], f"{v:.1f} %", holds,
        "" if holds else f"{v:.1f} % is outside (0, {SEQUENTIAL_UP_TO_PCT:g}] %",
        quote="Observe from Figures 6(d) and A-1(d) that with a reorganization unit of 4 KB, the average read "
              "response time is improved by up to 29% in the resourcepoor environment and 31% in the resource-rich "
              "environment.",
        where="section 5.1.3, figures 6(d) and A-1(d)", wording="states"))


def _size(kb: float) -> str:
    return f"{kb / 1024 ** 2:g} GB" if kb >= 1024 ** 2 else f"{kb / 1024:g} MB" if kb >= 1024 else f"{kb:g} KB"


def _threshold_claims(out: ExperimentOutput, sens: list[dict[str, Any]]) -> None:
    comb = _sweep(sens, "13", "threshold", "combined")
    alone = _sweep(sens, "10", "threshold", "run")
    spread = {"combined": max(comb.values()) - min(comb.values()), "run": max(alone.values()) - min(alone.values())}
    holds = significantly(spread["run"], spread["combined"])
    out.claims.append(Claim(
        "combined: less sensitive to the threshold than runs alone",
        f"PC set, thresholds {', '.join(f'{t:g}' for t in sorted(comb))}: the spread (best - worst) of run "
        f"clustering alone at least {SIGNIFICANT:g}x that of combined clustering",
        "figure 13: compared with run clustering alone (figure 10(d)) the plots are much more stable",
        f"spread run {spread['run']:.1f} points, combined {spread['combined']:.1f} (combined: {_points(comb)})",
        holds, "" if holds else UNEXPLAINED,
        quote="Notice that compared to the case of run clustering alone (Figures 10(d) and A-8(d)), the plots are "
              "much more stable and the performance is less sensitive to the edge weight threshold, which is a nice "
              "property.",
        where="section 5.3, figures 13 and A-16", wording="significantly"))
    rows = {r["value"]: r for r in sens if r["figure"] == "13" and r["parameter"] == "threshold"}
    lo = SETS["pc"].threshold_run
    steps = [(a, b) for a, b in itertools.pairwise(sorted(comb)) if a >= lo]
    holds = bool(steps and all(comb[b] > comb[a] for a, b in steps))
    hi = steps[0][1] if steps else lo
    out.claims.append(Claim(
        "combined: larger thresholds, better",
        f"PC set, combined clustering: from the run default {lo:g} up, each larger threshold swept better than the "
        "next smaller one",
        "figure 13: performance is better with larger thresholds when heat clustering is added (PC default 0.4)",
        _points(comb), holds,
        "" if holds else
        f"the heat region does not take up what a selective threshold drops: from threshold {lo:g} to {hi:g} the "
        f"runs placed fall from {rows[lo]['runs_placed']:,} to {rows[hi]['runs_placed']:,} and the reads served "
        f"from runs from {rows[lo]['reads_from_run']:,} to {rows[hi]['reads_from_run']:,}, the reads from the heat "
        f"region rise from {rows[lo]['reads_from_heat']:,} to {rows[hi]['reads_from_heat']:,}, and the miss-ratio "
        f"improvement falls from {rows[lo]['read_miss_impr_pct']:.1f} to {rows[hi]['read_miss_impr_pct']:.1f} %",
        quote="As expected, the performance is better with larger threshold values when heat clustering is performed "
              "in addition to run clustering.",
        where="section 5.3, figures 13 and A-16", wording="direction"))


def _write_claims(out: ExperimentOutput, s: dict[str, dict[str, Any]]) -> None:
    h, hro = s["heat (realizable)"], s["heat (realizable), reads-only heat"]
    holds = bool(h["write_service_ms"] < hro["write_service_ms"] and h["read_response_ms"] < hro["read_response_ms"])
    out.claims.append(Claim(
        "counting writes in heat speeds writes and reads",
        "heat clustering alone: with writes counted, mean write service time and mean read response time both "
        "lower than with reads only",
        "figure 17(a): counting writes speeds up the writes and, for PCs, improves the reads",
        f"write service {fmt(h['write_service_ms'])} ms counted, {fmt(hro['write_service_ms'])} ms reads only; read "
        f"response {fmt(h['read_response_ms'])} / {fmt(hro['read_response_ms'])} ms", holds,
        "" if holds else UNEXPLAINED,
        quote="Incorporating writes in the reference count speeds up the writes and in the case of the PC workloads, "
              "also improves the read performance.",
        where="section 6.3, figures 17(a) and A-20(a)", wording="direction"))
    r, rw = s["run (realizable)"], s["run (realizable), writes in the graph"]
    holds = bool(rw["read_response_ms"] > r["read_response_ms"])
    cost = {k: v["read_service_ms"] * v["reads"] / v["physical_reads"] for k, v in (("with", rw), ("without", r))}
    out.claims.append(Claim(
        "writes in the access graph cost reads",
        "run clustering alone, PC set: mean read response time higher with writes in the access graph than with "
        "reads only",
        "figure 17(b): including writes in the graph helps some workloads' writes, lowers reads across the board",
        f"read response {fmt(rw['read_response_ms'])} ms with writes, {fmt(r['read_response_ms'])} ms reads only "
        f"(write service {fmt(rw['write_service_ms'])} / {fmt(r['write_service_ms'])} ms)", holds,
        "" if holds else UNEXPLAINED if rw["physical_reads"] <= r["physical_reads"] else
        f"the paper's loss is there in the physical reads (miss-ratio improvement {rw['read_miss_impr_pct']:.1f} % "
        f"against {r['read_miss_impr_pct']:.1f} %, {rw['physical_reads']:,} physical reads against "
        f"{r['physical_reads']:,}), but each costs less service ({cost['with']:.2f} ms against "
        f"{cost['without']:.2f} ms): the graph with writes places {rw['runs_placed']} runs (reads only: "
        f"{r['runs_placed']}) and serves {rw['reads_from_run']:,} reads from them (reads only: "
        f"{r['reads_from_run']:,})",
        quote="Note that including write requests in the access graph improves the write performance for some of the "
              "workloads but decreases read performance across the board.",
        where="section 6.3, figures 17(b) and A-20(b)", wording="direction"))
    sets = {"PC": s["combined (realizable)"], "server": s["combined (realizable), server set"]}
    holds = bool(all(v["write_service_impr_pct"] >= 0.0 for v in sets.values()))
    out.claims.append(Claim(
        "RunHeat does not degrade writes",
        "combined clustering with RunHeat, PC and server sets: mean write service time no worse than the baseline's",
        "figure 17(c): RunHeat degrades no workload's writes; about 5-10 % better for most, up to 22 %",
        ", ".join(f"{k} set {v['write_service_impr_pct']:.1f} %" for k, v in sets.items()), holds,
        "" if holds else UNEXPLAINED,
        quote="Furthermore, it does not degrade write performance for any of the workloads, and in fact achieves a "
              "sizeable improvement of about 5-10% in the average write service time for most of the workloads and "
              "up to 22% for the base server workloads in the resourcepoor environment.",
        where="section 6.3, figures 17(c) and A-20(c)", wording="direction"))


def _interval_claims(out: ExperimentOutput, sens: list[dict[str, Any]]) -> None:
    iv = {m: _sweep(sens, "18", "interval_days", m) for m in MODES}
    start = next(r["from_day"] for r in sens if r["figure"] == "18")
    rows = next(r for r in sens if r["figure"] == "18" and r["mode"] == "combined" and r["value"] == 1.0)
    daily = {m: iv[m][1.0] for m in MODES}
    sub = {m: {d: v for d, v in iv[m].items() if d < 1.0} for m in MODES}
    bad = [(m, d) for m in ("run", "combined") for d, v in sub[m].items() if v >= daily[m]]
    holds = bool(not bad and any(sub[m] for m in ("run", "combined")))
    out.claims.append(Claim(
        "more than once a day is worse (runs, combined)",
        f"PC set, measured from day {start} on: run and combined clustering reorganized more often than daily "
        "below their daily improvement, at every shorter interval swept",
        "figure 18: for run and combined clustering, reorganizing more than once a day performs poorly",
        "; ".join(f"{m} {_points(iv[m])}" for m in MODES), holds,
        "" if holds else
        "better than daily: " + ", ".join(f"{m} every {d:g} day ({iv[m][d]:.1f} % against {daily[m]:.1f} %)"
                                          for m, d in bad)
        + f"; heat clustering alone gains from shorter intervals too ({_points(iv['heat'])}), and combined "
        f"clustering serves most of its area reads from the heat region ({rows['reads_from_heat']:,} heat, "
        f"{rows['reads_from_run']:,} run, daily), so it follows heat clustering where runs alone do not",
        quote="Note that for run clustering and combined heat and run clustering, reorganizing more than once a day "
              "performs poorly.",
        where="section 6.4, figures 18 and A-21", wording="direction"))
    longer = sorted(d for d in iv["combined"] if d > 1.0)
    share = {(r["mode"], r["value"]): r["ra_read_share"] for r in sens if r["figure"] == "18"}
    lost = [(m, d) for m in MODES for d in longer if not small(daily[m] - iv[m][d], daily[m])]
    holds = bool(longer and not lost)
    out.claims.append(Claim(
        "less frequent reorganization costs little",
        f"PC set, measured from day {start} on: each scheme's loss from daily to every longer interval swept at most "
        f"a third of its daily improvement or at most {SMALL_PP:g} points (a weekly interval cannot be replayed on a "
        "week)",
        "figure 18: less frequent reorganization affects the improvement only gradually; daily to weekly is adequate",
        "; ".join(f"{m} daily {daily[m]:.1f} %, " + ", ".join(f"every {d:g} days {iv[m][d]:.1f} %" for d in longer)
                  for m in MODES), holds,
        "" if holds else UNEXPLAINED if any(share[(m, d)] >= share[(m, 1.0)] for m, d in lost) else
        "the plans serving the measured days are older (the paper sees the same on its seven-day DS1, 6.4) and the "
        "area serves fewer of the measured reads: " + ", ".join(
            f"{m} {100 * share[(m, 1.0)]:.0f} % daily, {100 * share[(m, d)]:.0f} % every {d:g} days" for m, d in lost),
        quote="They also show that less frequent reorganization tends to only affect the improvement gradually so "
              "that reorganizing daily to weekly is generally adequate.",
        where="section 6.4, figures 18 and A-21", wording="small"))


def _context_claims(out: ExperimentOutput, s: dict[str, dict[str, Any]], w: Workload, disks: dict[str, DiskSpec],
                    srv: dict[str, Any]) -> None:
    base, wb = s["baseline"], s["baseline, write-back"]
    paper = TABLE2_P_AVG
    ours = (f"read response {fmt(base['read_response_ms'])} ms (read service {fmt(base['read_service_ms'])} ms, "
            f"miss ratio {fmt(base['read_miss_ratio'], 3)}, write service {fmt(base['write_service_ms'])} ms)")
    holds = about(base["read_response_ms"], paper["read_response_ms"])
    out.claims.append(Claim(
        "baseline read response as table 2's PCs",
        f"sized disk, no ALIS: mean read response time within {100 * ABOUT:g} % of the P-Avg. resource-poor "
        f"{paper['read_response_ms']:g} ms", PAPER["baseline"], ours, holds,
        "" if holds else UNEXPLAINED,
        quote="| P-Avg. | 3.34 | 2.22 | 0.431 | 1.41 |", where="section 4.4, table 2 (resource-poor)",
        wording="about"))
    holds = about(base["write_service_ms"], paper["write_service_ms"])
    out.claims.append(Claim(
        "baseline write service as table 2's PCs",
        f"sized disk, no ALIS: mean write service time within {100 * ABOUT:g} % of the P-Avg. resource-poor "
        f"{paper['write_service_ms']:g} ms", PAPER["baseline"], f"{fmt(base['write_service_ms'])} ms", holds,
        "" if holds else
        f"the 73LZX spec writes through (write-back off, an assumption: the paper gives the resource-poor disk's "
        f"parameters only in figure 4): with write-back on the same baseline's writes take "
        f"{fmt(wb['write_service_ms'])} ms of service; the paper's {paper['write_service_ms']:g} ms lies between "
        "the two",
        quote="| P-Avg. | 3.34 | 2.22 | 0.431 | 1.41 |", where="section 4.4, table 2 (resource-poor)",
        wording="about"))
    out.claims.append(Claim(
        "servers: read response about 37 % better",
        "not measurable: the base server workloads' combined improvement (resource-poor) within "
        f"{100 * ABOUT:g} % of 37 %",
        PAPER["combined"], f"no server trace; the server set on hplajw: {srv['read_response_impr_pct']:.1f} %", None,
        "the paper's server traces (FS1, TS1, DS1 and their merge Sm; table 1: 9.78 M, 20 M and 6.64 M requests) "
        f"are not available here; hplajw ({len(w.requests):,} requests replayed) is one user's workstation, a "
        "PC-class trace, so the server set on it measures the parameters, not the class",
        quote="For the base server workloads on average, the improvement in read response time ranges from about 30% "
              "in the resource-rich environment to 37% in the resource-poor environment. The merged server workload "
              "is improved by as much as 50%.",
        where="section 6.1, figures 14 and A-17", wording="about"))
    disk = disks["sized"]
    cache_mb = disk.cache.segments * disk.cache.segment_sectors * disk.sector_size / 1e6
    rich_mb = RICH_CACHE_SHARE * w.used_sectors * w.spec.sector_size / 1e6
    out.claims.append(Claim(
        "resource-rich: read response about 14 % better",
        "not measurable: the PC workloads' combined improvement in the resource-rich configuration within "
        f"{100 * ABOUT:g} % of 14 %", PAPER["combined"],
        f"no controller cache; resource-poor {s['combined (realizable)']['read_response_impr_pct']:.1f} %", None,
        "the simulator models a disk's own segmented cache only, not the resource-rich configuration's controller "
        f"cache of {100 * RICH_CACHE_SHARE:g} % of the storage used with prefetch conditioned on the sequential run "
        f"seen; on hplajw that cache would hold {rich_mb:.2f} MB, less than the {cache_mb:.2f} MB disk cache the "
        "resource-poor disk already has, so no disk-cache setting stands in for it",
        quote="Specifically, the read response time for the PC workloads is improved on average by about 17% in the "
              "resource-poor environment and 14% in the resource-rich environment.",
        where="section 6.1, figure 14 (configuration: section 4.3, figure 4)", wording="about"))


def _sections(out: ExperimentOutput, w: Workload, disks: dict[str, DiskSpec], rows: list[dict[str, Any]],
              sens: list[dict[str, Any]], warm: list[dict[str, Any]], lengths: list[dict[str, Any]],
              facts: dict[str, float], layouts: list[dict[str, Any]]) -> None:
    r = w.requests
    used = w.used_sectors
    span = "week" if out.scale == "full" else f"first {DAYS_TINY} days"
    fills = "; ".join(f"{k}: {d.name}, {d.capacity_bytes / 1e9:.2f} GB, {100 * used / d.capacity_sectors:.1f} % full"
                      for k, d in disks.items())
    setup = (f"## Setup\n\nhplajw {span}: {len(r):,} requests ({int(r.is_read.sum()):,} reads) on two traced disks, "
             f"concatenated into one volume of {used:,} sectors ({used * w.spec.sector_size / 1e6:.0f} MB) laid out "
             f"from the outer edge of one disk ({fills}); open loop at the trace's times, FCFS; reorganized area 15 % "
             "of the volume at 30 % into it, daily reorganization; day 0 is warm-up. Parameter sets: "
             + "; ".join(f"{k} beta {s.beta:g}, run threshold {s.threshold_run:g} alone and "
                         f"{s.threshold_combined:g} combined" for k, s in SETS.items())
             + " (the rows without a set name run the PC set). Improvements are (baseline - ALIS) / baseline.")
    cols = ["configuration", "read_response_ms", "read_service_ms", "read_miss_ratio", "physical_reads",
            "write_service_ms", "writes_to_run", "read_response_impr_pct", "read_service_impr_pct",
            "read_miss_impr_pct", "write_service_impr_pct", "ra_read_share", "runs_placed"]
    paper = markdown_table([{"figure": k, "paper": v} for k, v in PAPER.items()], ["figure", "paper"])
    by = {(x["disk"], x["configuration"]): x for x in rows}
    notes = [
        f"- The sized disk's baseline reads respond in {by[('sized', 'baseline')]['read_response_ms']:.2f} ms "
        f"(the paper's PC average {TABLE2_P_AVG['read_response_ms']:.2f} ms), the shipped disk's in "
        f"{by[('shipped', 'baseline')]['read_response_ms']:.2f} ms: on a "
        f"{100 * used / disks['shipped'].capacity_sectors:.1f} % full disk seeks stay short and heat clustering has "
        "little seek time to save; the empty area costs "
        f"{-by[('sized', 'area inserted, empty')]['read_response_impr_pct']:.1f} % of read response on the sized "
        "disk (home data behind it moves up).",
        f"- {100 * facts['history']:.0f} % of the measured reads touch a request extent already read on an earlier "
        f"day, and of the extents read on a measured day and an earlier one {100 * facts['next_day']:.0f} % were last "
        "read the day before: the rest cannot be planned from history, which is what the lookahead rows remove.",
        f"- Heat clustering counts writes (the paper's default) and {100 * facts['writes']:.0f} % of the requests "
        "write; RunHeat (the simulator's one write policy) sends writes to the area's copies, where the paper's "
        "PC default updates home.",
        "- hplajw is one user's HP-UX workstation of 1992 (a PC-like workload), not one of the paper's servers; its "
        "one-week span is the paper's DS1 length, against the paper's 45 days with 20 of warm-up.",
        "- Both disks are the resource-poor configuration (the disk's own 8 MB cache with read-ahead); the "
        "simulator has no controller cache, so the paper's resource-rich figures (its main-text figures 6-22) are "
        "compared through their resource-poor twins (figures A-1 to A-25).",
    ]
    sens_cols = ["figure", "disk", "parameter", "value", "mode", "from_day", "read_response_impr_pct",
                 "read_miss_impr_pct", "ra_read_share", "runs_placed", "reads_from_run", "reads_from_heat"]
    layout_cols = ["configuration", "read_response_impr_pct", "read_service_impr_pct", "read_miss_impr_pct",
                   "write_service_impr_pct", "reads_split", "ra_read_share"]
    warm_rows = [{**x, "runs_per_plan": " ".join(str(n) for n in x["runs_per_plan"])} for x in warm]
    length_cols = list(lengths[0]) if lengths else []
    out.sections += [
        setup,
        "## Heat, run and combined clustering, sized disk (ours)",
        markdown_table([x for x in rows if x["disk"] == "sized"], cols),
        "## The same on the shipped 36.7 GB disk",
        markdown_table([x for x in rows if x["disk"] == "shipped"], cols),
        "## The paper's figures", paper,
        "## Why this trace differs\n\n" + "\n".join(notes),
        "## Warm-up: beta and the run threshold (sized disk)\n\nRuns placed by each daily plan (days 1 on); "
        "days_to_threshold: days a sequence read once a day needs before its aged weight, 1 - (1 - beta)^n, "
        "clears the threshold.",
        markdown_table(warm_rows, ["mode", "set", "beta", "threshold", "days_to_threshold", "runs_per_plan",
                                   "runs_placed", "run_units", "read_response_impr_pct"]),
        f"## Run lengths (figure 10(a)'s reason)\n\nRuns placed over the week by run clustering (PC set) with each "
        f"context size and runs of {MIN_RUN_DECOUPLED} units or more, by length in units.",
        markdown_table(lengths, length_cols),
        f"## Heat clustering's layouts (figure 6; sized disk, area {100 * FIG6_RA_SHARE:.0f} % of the volume, 30 % "
        "into it)\n\nOur units are request extents (the paper's figure 6: fixed units); packed extents of 1 GB and "
        "more hold the whole volume in one extent, the sequential layout.",
        markdown_table(layouts, layout_cols),
        "## Sensitivity (figure 10: run clustering alone; 13: combined against the threshold; 15: area size; 16: "
        "area offset; 18: reorganization interval)\n\nfrom_day: the first measured day (figure 18's rows start when "
        "the longest interval first reorganizes, their baseline too).",
        markdown_table(sens, sens_cols),
    ]


def _plot_main(path: Path, by: dict[tuple[str, str], dict[str, Any]]) -> None:
    fig, (ax,) = new_figure(1, width=7.0)
    x = np.arange(len(MODES))
    # heat clustering ignores beta and the threshold: one row serves both sets
    bars = [(f"{disk} disk, {kind} set", [(disk, f"{m} (realizable){'' if m == 'heat' or kind == 'pc' else suffix}")
                                          for m in MODES])
            for disk in DISKS for kind, suffix in (("pc", ""), ("server", ", server set"))]
    bars = [(label, keys) for label, keys in bars if all(k in by for k in keys)]
    width = 0.8 / len(bars)
    for j, (label, keys) in enumerate(bars):
        ax.bar(x + (j - (len(bars) - 1) / 2) * width, [by[k]["read_response_impr_pct"] for k in keys], width,
               label=label)
    ax.set_xticks(x, MODES)
    ax.set_ylabel("read response improvement (%)")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.legend()
    save_figure(fig, path, "ALIS on hplajw (73LZX, resource-poor): clustering schemes (cf. figure 14)")


def _plot_sweeps(path: Path, sens: list[dict[str, Any]], figure: str, parameters: tuple[str, ...]) -> None:
    fig, axes = new_figure(len(parameters), width=4.2 if len(parameters) > 2 else 5.5)
    for ax, name in zip(axes, parameters, strict=True):
        # figure 13's panel sets combined clustering against figure 10(d)'s run clustering alone
        shown = {"10", "13"} if figure == "13/18" and name == "threshold" else set(figure.split("/"))
        mine = [r for r in sens if r["parameter"] == name and r["figure"] in shown]
        for mode, disk in sorted({(r["mode"], r["disk"]) for r in mine}):
            pts = sorted((r["value"], r["read_response_impr_pct"]) for r in mine
                         if r["mode"] == mode and r["disk"] == disk)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{mode}, {disk} disk")
        if name == "tau":
            pts = sorted(_sweep(sens, "10", "tau_min_run_2", "run").items())
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="s", linestyle="--",
                    label=f"run, runs of {MIN_RUN_DECOUPLED}+ units")
        ax.set_xlabel(name)
        ax.set_ylabel("read response improvement (%)")
        if name == "graph_share":
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        if len(ax.get_lines()) > 1:
            ax.legend(fontsize="small")
        else:
            ax.set_title(ax.get_lines()[0].get_label(), fontsize="small")
    title = {"10": "figure 10: run clustering's sensitivity (PC set)",
             "13/18": "figures 13 and 18: the threshold (run alone, combined) and the reorganization interval "
                      "(PC set)",
             "15/16": "figures 15 and 16: reorganized-area size and offset (PC set)"}[figure]
    save_figure(fig, path, f"ALIS on hplajw, {title}")

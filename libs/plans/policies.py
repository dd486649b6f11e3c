"""The policy families of the scorecard and the planner: one registry entry per family with its name, its
parameter grid, the simulator scenario of each variant and how a simulated outcome becomes plan steps.
Pure logic (no Spark): jobs/policy_scores.py sweeps the variants, jobs/reorg_plan.py plans one of them.

    target = Target("hplajw", ("0", "1"), (1308114, 6680), spec, spec_param={"geometry": geometry})
    for family in families(["striped", "greedy"]):
        for v in family.variants(target, stats, SweepOptions()):
            v.policy_id, v.scenario        # "striped:five", {"layout": {"kind": "striped", ...}}

Every family reorganizes the same array: the trace's devices, one disk each (disk k holds device k,
devices in name order), replayed with the same spec, queue discipline, speed-up and seed, so the
as-traced scenario is every variant's baseline. Choices where the papers leave the scorecard open:
- the array's device sizes are the highest byte each device's requests address over the whole trace
  (all windows), rounded up to the spec's sectors: space beyond is taken as free (staging room);
- cooling starts from the current layout (as-traced, cut into extents of extent_bytes) rather than FIVE's
  round robin, so its moves are a plan from today's layout; its demon runs every 100 s of trace time (FIVE
  4.3's trace experiment; a period in time keeps its cost per day of trace, not per request); greedy
  allocation is FIVE's static layout from the window's own heats (heat_fraction 1: the whole window, a
  placement knowing the window) or from the first part of the window (heat_fraction 0.5), the whole window
  replayed either way;
- incremental greedy (sim.allocation.incremental_moves) starts from the current layout and moves only the extents
  whose move lowers the hottest disk's heat by more than it costs, at most SweepOptions.incremental_max_share
  of the data (default 10 %), each into free space after the target disk's data; today's greedy re-lays every
  extent;
- the striping methods are libs.plans.striping_advisor's global rows (five, five_phase_a, eq1, mpl_slope) for the
  window's mean request size and rate, each its own variant (same unit and width: one simulation);
- random (each request to a random disk) is a reference point only: it is not a data layout, so it
  cannot be planned;
- ALIS (sim.alis through sim.scenarios's "alis" policy, each device its own volume with its reorganized area,
  plans realizable from the window's own history) reorganizes every quarter of the window (at most the
  paper's day), one variant per mode and area placement (SweepOptions.alis_ra_offsets, default the paper's
  30 % and 1.0, the area after the volume, so installing it moves no home data: the plans' costs tell them apart);
  it applies only
  when the area fits next to each device on the
  disk; its plan is the placement it would install after the window (libs.plans.steps.alis_steps: the
  realizable directory of the interval after the window's last, planned from all of the window);
- track alignment (Lachesis) keeps the as-traced layout and reshapes the I/O (sim.tracks, `io` with report
  "requests": figures per traced request, so it ranks against the same baseline), one variant per I/O
  size in whole tracks; its plan is a host-side I/O rule per device (align_to_track steps, no data moves).

Extension points: a family is a PolicyFamily registered with register_family() (variants, and optionally
plan with what it needs, and not_applicable). PENDING_FAMILIES lists families the scorecard is to cover
that the simulator cannot score yet (none at present; the scorecard prints them).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from blockheat.libs.plans.striping_advisor import METHODS, DiskModel, FileStats, Workload, advise
from blockheat.libs.plans.types import BASELINE, Outcome, PlanPart, PolicyError, Target, Variant, WindowStats
from blockheat.sim import ALIS_MODES

__all__ = ["FAMILIES", "PENDING_FAMILIES", "PolicyFamily", "SweepOptions", "families", "register_family",
           "size_label"]

MIB = 1 << 20
COOLING_EVERY_S = 100.0          # FIVE section 4.3: cooling invoked every 100 s of the trace's time
ALIS_PAPER_RA_OFFSET = 0.30      # ALIS section 5: the reorganized area starts 30 % into the volume


@dataclass(frozen=True)
class SweepOptions:
    """The parameter grids: extent sizes for greedy and cooling, greedy's heat fractions, cooling's
    trigger (its period, delta) and the striping methods."""

    extent_bytes: tuple[int, ...] = (MIB,)
    heat_fractions: tuple[float, ...] = (1.0, 0.5)
    # The cooling demon's period: every cooling_every_s seconds of trace time (FIVE 4.3's trace experiment: "every
    # 100 seconds of the original time scale", so every 100 / speedup simulated seconds), or, when given, every
    # cooling_every_requests arrivals instead.
    cooling_every_s: float = COOLING_EVERY_S
    cooling_every_requests: int | None = None
    cooling_delta: float = 0.05
    striping_methods: tuple[str, ...] = ("five", "five_phase_a", "eq1", "mpl_slope")
    alis_modes: tuple[str, ...] = ALIS_MODES
    alis_ra_share: float = 0.15
    # Where the reorganized area goes, as a share of the volume: the paper's 0.30 (installing it shifts the
    # home data behind it once, a create_area step) or 1.0 (after the volume: only copies move).
    alis_ra_offsets: tuple[float, ...] = (ALIS_PAPER_RA_OFFSET, 1.0)
    alis_interval_s: float | None = None      # None: a quarter of the window, at most the paper's day
    # Incremental greedy: the most of the devices' bytes its moves may take (sim.allocation.incremental_moves).
    incremental_max_share: float = 0.1
    track_units: tuple[int, ...] = (1,)       # track alignment: I/Os of this many whole tracks
    track_merge_gap_ms: float = 10.0

    def __post_init__(self) -> None:
        if not self.extent_bytes or min(self.extent_bytes) <= 0:
            raise PolicyError(f"extent sizes must be positive, got {list(self.extent_bytes)}")
        if not self.heat_fractions or not all(0 < h <= 1 for h in self.heat_fractions):
            raise PolicyError(f"heat fractions must be in (0, 1], got {list(self.heat_fractions)}")
        if not (self.cooling_every_s > 0 and math.isfinite(self.cooling_every_s)):
            raise PolicyError(f"the cooling period must be a positive number of seconds, got {self.cooling_every_s}")
        if self.cooling_every_requests is not None and self.cooling_every_requests <= 0:
            raise PolicyError(f"cooling every N arrivals needs N > 0, got {self.cooling_every_requests}")
        if not self.alis_ra_offsets or not all(0.0 <= x <= 1.0 for x in self.alis_ra_offsets):
            raise PolicyError(f"ALIS area offsets must be in [0, 1], got {list(self.alis_ra_offsets)}")
        if not 0 <= self.incremental_max_share <= 1:
            raise PolicyError(f"the incremental move budget must be a share in [0, 1], got "
                              f"{self.incremental_max_share}")
        if not self.track_units or not all(isinstance(k, int) and k >= 1 for k in self.track_units):
            raise PolicyError(f"track units must be whole numbers of tracks >= 1, got {list(self.track_units)}")


@dataclass(frozen=True)
class PolicyFamily:
    """A registry entry: `variants` gives the parameter grid as Variants; `plan` turns an Outcome into a
    PlanPart (None: not plannable); `needs` names what the outcome must carry (None, "layout", "moves",
    "requests");
    `not_applicable` says why the family cannot run on a target (None: it can)."""

    name: str
    description: str
    variants: Callable[[Target, WindowStats, SweepOptions], list[Variant]]
    plan: Callable[[Outcome], PlanPart] | None = None
    needs: str | None = None
    not_applicable: Callable[[Target, WindowStats, SweepOptions], str | None] | None = None

    def why_not(self, target: Target, stats: WindowStats, opts: SweepOptions) -> str | None:
        return None if self.not_applicable is None else self.not_applicable(target, stats, opts)


def size_label(n_bytes: int) -> str:
    """1048576 -> "1MiB", 65536 -> "64KiB", 1000 -> "1000B"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n_bytes >= 1 << shift and n_bytes % (1 << shift) == 0:
            return f"{n_bytes >> shift}{unit}"
    return f"{n_bytes}B"


# --- the families ------------------------------------------------------------------------------------------


def _as_traced(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    return [Variant(BASELINE, BASELINE, {}, {"layout": {"kind": "as_traced"}},
                    note="the baseline: the current layout (device k on disk k)")]


def _plan_nothing(outcome: Outcome) -> PlanPart:
    return PlanPart([], {})


def _random(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    return [Variant("random", "random", {"seed": target.seed}, {"layout": {"kind": "random"}}, plannable=False,
                    note="reference point: each request goes to a random disk; not a data layout, nothing to plan")]


def _striped(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    unknown = sorted(set(opts.striping_methods) - set(METHODS))
    if unknown:
        raise PolicyError(f"striping methods {unknown} unknown; known: {list(METHODS)}")
    block = target.sector_bytes
    files = [FileStats(d, max(1.0, stats.device_mean_request_bytes[d] / block), float(s))
             for d, s in zip(target.devices, target.device_sectors, strict=True)
             if d in stats.device_mean_request_bytes]
    rate = stats.requests / stats.span_s * target.speedup if stats.span_s > 0 else None
    workload = Workload(max(1.0, stats.mean_request_bytes / block),
                        sum(target.device_sectors) / target.n_disks, rate or None)
    recs = advise(DiskModel.from_spec(target.spec), n_disks=target.n_disks, workload=workload, files=files)
    out = []
    for rec in recs:
        if rec.scope != "global" or rec.method not in opts.striping_methods:
            continue
        unit = rec.striping_unit_blocks
        params = {"method": rec.method, "unit_bytes": unit * block, "width": rec.width}
        if rec.width == 1:
            # The method stripes no file over more than one disk: each device stays whole on its own disk.
            out.append(Variant(f"striped:{rec.method}", "striped", params, {"layout": {"kind": "as_traced"}},
                               note=f"width 1 (unit {unit} blocks >= the mean device): no striping, each device "
                                    "stays on its own disk (the current layout)"))
            continue
        out.append(Variant(f"striped:{rec.method}", "striped", params,
                           {"layout": {"kind": "striped", "unit_sectors": unit, "width": rec.width}}))
    return out


def _plan_striped(outcome: Outcome) -> PlanPart:
    # lazy: steps imports pyspark (schemas/) and numba; the blockheat command loads this module at start
    from blockheat.libs.plans.steps import restripe_steps

    layout = outcome.variant.scenario["layout"]
    if layout.get("kind") == "as_traced":
        return PlanPart([], {"striping": [{"device": d, "unit_bytes": outcome.variant.params["unit_bytes"],
                                           "width": 1} for d in outcome.target.devices]})
    return restripe_steps(outcome.target, unit_sectors=int(layout["unit_sectors"]), width=int(layout["width"]))


def _greedy(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    out = []
    for size in opts.extent_bytes:
        sectors = target.extent_sectors(size)
        for fraction in opts.heat_fractions:
            out.append(Variant(f"greedy:{size_label(size)},heat={fraction:g}", "greedy",
                               {"extent_bytes": size, "heat_fraction": fraction},
                               {"layout": {"kind": "extents", "extent_sectors": sectors},
                                "policy": {"name": "greedy-allocation", "heat_fraction": fraction}}))
    return out


def _incremental(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    out = []
    for size in opts.extent_bytes:
        sectors = target.extent_sectors(size)
        out.append(Variant(f"incremental:{size_label(size)}", "incremental",
                           {"extent_bytes": size, "max_share": opts.incremental_max_share},
                           {"layout": {"kind": "extents", "extent_sectors": sectors},
                            "policy": {"name": "incremental-greedy", "max_share": opts.incremental_max_share}},
                           note=f"the current layout with only the moves that pay for themselves within the window, "
                                f"at most {opts.incremental_max_share:.0%} of the data"))
    return out


def _plan_extent_map(outcome: Outcome) -> PlanPart:
    # lazy: steps imports pyspark (schemas/) and numba; the blockheat command loads this module at start
    from blockheat.libs.plans.steps import extent_migration_steps

    if outcome.layout is None:
        raise PolicyError(f"{outcome.variant.policy_id}: the plan needs the scenario's extent map")
    return extent_migration_steps(outcome.target, outcome.layout)


def _cooling(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    if opts.cooling_every_requests is not None:
        period: dict[str, Any] = {"every_requests": opts.cooling_every_requests}
        params: dict[str, Any] = dict(period)
    else:                                       # trace seconds in params; the replay's seconds in the policy
        period = {"every_s": opts.cooling_every_s / target.speedup}
        params = {"every_s": opts.cooling_every_s}
    out = []
    for size in opts.extent_bytes:
        sectors = target.extent_sectors(size)
        out.append(Variant(f"cooling:{size_label(size)}", "cooling",
                           {"extent_bytes": size, **params, "delta": opts.cooling_delta},
                           {"layout": {"kind": "as_traced", "extent_sectors": sectors},
                            "policy": {"name": "cooling", **period, "delta": opts.cooling_delta}}))
    return out


def _plan_cooling(outcome: Outcome) -> PlanPart:
    # lazy: steps imports pyspark (schemas/) and numba; the blockheat command loads this module at start
    from blockheat.libs.plans.steps import cooling_steps

    if outcome.moves is None:
        raise PolicyError(f"{outcome.variant.policy_id}: the plan needs the scenario's cooling moves")
    return cooling_steps(outcome.target, outcome.moves)


def _alis_interval_s(stats: WindowStats, opts: SweepOptions) -> float:
    return opts.alis_interval_s or min(86_400.0, stats.span_s / 4)


def _alis(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    interval = _alis_interval_s(stats, opts)
    out = []
    for offset in opts.alis_ra_offsets:
        # The paper's placement keeps the plain ids ("alis:run"); others say where the area is ("alis:run,area@1").
        label = "" if offset == ALIS_PAPER_RA_OFFSET else f",area@{offset:g}"
        for mode in opts.alis_modes:
            params = {"mode": mode, "plan": "realizable", "interval_s": interval, "ra_share": opts.alis_ra_share,
                      "ra_offset": offset}
            out.append(Variant(f"alis:{mode}{label}", "alis", params,
                               {"layout": {"kind": "as_traced"}, "policy": {"name": "alis", **params}}))
    return out


def _plan_alis(outcome: Outcome) -> PlanPart:
    # lazy: steps and sim.alis import pyspark (schemas/) and numba; the blockheat command loads this module at start
    from blockheat.libs.plans.steps import alis_steps
    from blockheat.libs.plans.types import PlanError
    from blockheat.sim import AlisParams, plan_trace_window

    if outcome.requests is None or outcome.requests.num_rows == 0:
        raise PolicyError(f"{outcome.variant.policy_id}: the plan needs the window's requests")
    p, t = outcome.variant.params, outcome.target
    params = AlisParams(mode=str(p["mode"]), plan=str(p["plan"]), interval_s=float(p["interval_s"]),
                        ra_share=float(p["ra_share"]), ra_offset=float(p.get("ra_offset", ALIS_PAPER_RA_OFFSET)))
    # The placement to install now: the realizable plan serving the interval after the window's last one.
    last_us = max(int(x) for x in outcome.requests.column("ts_us").to_pylist())
    window = int(last_us // params.interval_us) + 1
    try:
        plan = plan_trace_window(outcome.requests, params, window=window, sector_size=t.sector_bytes,
                                 device_sectors=t.device_sectors, devices=t.devices)
    except ValueError as exc:
        raise PlanError(f"{outcome.variant.policy_id}: {exc}") from exc
    return alis_steps(t, plan, interval_s=params.interval_s)


def _track_aligned(target: Target, stats: WindowStats, opts: SweepOptions) -> list[Variant]:
    return [Variant(f"track-aligned:{k}track{'s' if k > 1 else ''}", "track-aligned",
                    {"tracks": k, "merge_gap_ms": opts.track_merge_gap_ms},
                    {"layout": {"kind": "as_traced"},
                     "io": {"kind": "track-aligned", "tracks": k, "merge_gap_ms": opts.track_merge_gap_ms,
                            "report": "requests"}},
                    note="host-side I/O shaping on the current layout; response per traced request")
            for k in opts.track_units]


def _plan_track_aligned(outcome: Outcome) -> PlanPart:
    # lazy: steps imports pyspark (schemas/) and numba; the blockheat command loads this module at start
    from blockheat.libs.plans.steps import track_alignment_steps

    io = outcome.variant.scenario["io"]
    return track_alignment_steps(outcome.target, tracks=int(io["tracks"]), merge_gap_ms=float(io["merge_gap_ms"]))


def _alis_not_applicable(target: Target, stats: WindowStats, opts: SweepOptions) -> str | None:
    from blockheat.sim import volumes_for  # lazy: numba; the blockheat command loads this module at start

    volumes, _, _ = volumes_for(target.device_sectors, concatenated=False, ra_share=opts.alis_ra_share,
                                ra_offset=ALIS_PAPER_RA_OFFSET)             # the offset does not change the size
    full = [f"{d} ({v.physical_sectors} sectors)" for d, v in zip(target.devices, volumes, strict=True)
            if v.physical_sectors > target.capacity_sectors]
    if full:
        return (f"a reorganized area of {opts.alis_ra_share:.0%} of the storage used does not fit next to device(s) "
                f"{', '.join(full)} on a disk of {target.capacity_sectors} sectors ({target.spec.name}); a larger "
                "disk spec (--spec) leaves room")
    if stats.span_s / 4 < 1.0 and not opts.alis_interval_s:
        return "the window is too short for reorganization intervals (a quarter of it is under a second)"
    return None


FAMILIES: dict[str, PolicyFamily] = {}

#: Families the scorecard is to cover that need simulator support not in the tree (name -> what is missing).
PENDING_FAMILIES: dict[str, str] = {}
NEEDS = (None, "layout", "moves", "requests")


def register_family(family: PolicyFamily) -> PolicyFamily:
    """Add a family to the registry (a second family of the same name is an error)."""
    if family.name in FAMILIES:
        raise PolicyError(f"policy family {family.name!r} is registered already")
    if family.needs not in NEEDS:
        raise PolicyError(f"policy family {family.name!r}: needs must be one of {list(NEEDS)}, got "
                          f"{family.needs!r}")
    FAMILIES[family.name] = family
    PENDING_FAMILIES.pop(family.name, None)
    return family


register_family(PolicyFamily(BASELINE, "the current layout: device k on disk k", _as_traced, _plan_nothing))
register_family(PolicyFamily("striped", "the devices striped over the array (libs.plans.striping_advisor's methods)",
                             _striped, _plan_striped))
register_family(PolicyFamily("random", "each request to a random disk (reference point)", _random))
register_family(PolicyFamily("greedy", "FIVE's static greedy allocation of extents by heat", _greedy,
                             _plan_extent_map, needs="layout"))
register_family(PolicyFamily("incremental", "FIVE's cooling rule applied offline: from the current layout, only the "
                                           "extents whose move lowers the hottest disk's heat by more than it costs",
                             _incremental, _plan_extent_map, needs="layout"))
register_family(PolicyFamily("cooling", "FIVE's disk cooling from the current layout", _cooling, _plan_cooling,
                             needs="moves"))
register_family(PolicyFamily("alis", "ALIS: hot data and runs copied to a reorganized area in each device, "
                                     "planned from the window's history (sim.alis)", _alis, _plan_alis,
                             needs="requests", not_applicable=_alis_not_applicable))
register_family(PolicyFamily("track-aligned", "Lachesis: I/O merged and cut at the disk's track boundaries on the "
                                              "current layout (sim.tracks)", _track_aligned, _plan_track_aligned))


def families(names: Iterable[str] | None = None) -> list[PolicyFamily]:
    """The registered families, all (registry order) or the named ones; the baseline always comes first."""
    if names is None:
        return list(FAMILIES.values())
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        if name not in FAMILIES:
            why = f" ({PENDING_FAMILIES[name]})" if name in PENDING_FAMILIES else ""
            raise PolicyError(f"policy family {name!r} is not available{why}; families: {list(FAMILIES)}")
    return [FAMILIES[BASELINE], *[FAMILIES[n] for n in wanted if n != BASELINE]]

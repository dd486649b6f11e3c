"""ALIS as a simulator policy: its parameters, the volumes a scenario's layout gives, and one call that plans
the reorganizations of a workload (libs.alis.plan, imported when first needed: it reuses libs.alis's numpy
cores), redirects the requests (sim.redirect) and builds the Simulation. Also the figures of a run measured
from a time on (the paper's warm-up).

    params = AlisParams(mode="combined", plan="realizable")
    setup = prepare(requests, params, sector_size=spec.sector_size, concatenated=True)
    sim = setup.redirected.simulation(spec, SimConfig(), np.random.default_rng(1))
    figures = run_measured(sim, from_us=setup.first_reorganization_us)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sim import _kernel as K
from sim.redirect import Redirected, Reorganization, Volume, redirect

if TYPE_CHECKING:
    from sim.engine import Simulation
    from sim.records import Requests

__all__ = ["MODES", "PLANS", "AlisParams", "AlisSetup", "prepare", "run_measured", "volumes_for"]

MODES = ("heat", "run", "combined")
PLANS = ("realizable", "lookahead")
LAYOUTS = ("sequential", "packed", "heat", "organ-pipe")   # libs.alis.layout.LAYOUTS (kept light to import)
#: libs.alis.runs.THRESHOLD and THRESHOLD_COMBINED (a test checks they agree).
RUN_THRESHOLD, RUN_THRESHOLD_COMBINED = 0.1, 0.4
DAY_S = 86_400.0


@dataclass(frozen=True)
class AlisParams:
    """ALIS's knobs with the paper's defaults (server settings: beta 0.8; the run threshold 0.1 alone, 0.4
    combined with heat clustering). mode: what fills the RA; plan: "realizable" (each interval's copies
    planned from the history up to its start) or "lookahead" (from the interval's own references);
    interval_s: reorganization interval; heat_writes: writes count in heat clustering (section 6.3);
    include_writes: writes build the access graph too (off: section 6.3); graph_share: the graph's size
    budget as a share of the storage used (19 bytes a vertex, 20 an edge); heat_layout / extent_bytes:
    the heat region's layout (libs.alis.layout.arrange)."""

    mode: str = "combined"
    plan: str = "realizable"
    interval_s: float = DAY_S
    ra_share: float = 0.15
    ra_offset: float = 0.30
    heat_layout: str = "sequential"
    extent_bytes: int = 1 << 30
    alpha: float = 0.8
    heat_writes: bool = True
    tau: int = 9
    f: float = 1.0
    beta: float = 0.8
    graph_share: float = 0.005
    threshold: float | None = None
    min_run_length: int | None = None
    include_writes: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ALIS mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.plan not in PLANS:
            raise ValueError(f"ALIS plan must be one of {', '.join(PLANS)}, got {self.plan!r}")
        if self.heat_layout not in LAYOUTS:
            raise ValueError(f"ALIS heat_layout must be one of {', '.join(LAYOUTS)}, got {self.heat_layout!r}")
        if not (self.interval_s > 0 and math.isfinite(self.interval_s)):
            raise ValueError(f"ALIS interval_s must be a positive number, got {self.interval_s!r}")
        if not 0.0 < self.ra_share <= 1.0:
            raise ValueError(f"ALIS ra_share must be in (0, 1], got {self.ra_share}")
        if not 0.0 <= self.ra_offset <= 1.0:
            raise ValueError(f"ALIS ra_offset must be in [0, 1], got {self.ra_offset}")
        for name in ("alpha", "beta", "f"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"ALIS {name} must be in [0, 1], got {getattr(self, name)}")
        if self.tau < 1:
            raise ValueError(f"ALIS tau (context size) must be >= 1, got {self.tau}")
        if not self.graph_share > 0:
            raise ValueError(f"ALIS graph_share must be > 0, got {self.graph_share}")
        if self.threshold is not None and self.threshold < 0:
            raise ValueError(f"ALIS threshold must be >= 0, got {self.threshold}")
        if self.min_run_length is not None and self.min_run_length < 1:
            raise ValueError(f"ALIS min_run_length must be >= 1, got {self.min_run_length}")
        if self.extent_bytes <= 0:
            raise ValueError(f"ALIS extent_bytes must be > 0, got {self.extent_bytes}")

    @property
    def interval_us(self) -> float:
        return self.interval_s * 1e6

    @property
    def run_threshold(self) -> float:
        if self.threshold is not None:
            return self.threshold
        return RUN_THRESHOLD_COMBINED if self.mode == "combined" else RUN_THRESHOLD

    @property
    def min_length(self) -> int:
        return self.tau if self.min_run_length is None else self.min_run_length


def volumes_for(device_sectors: Sequence[int], *, concatenated: bool, ra_share: float,
                ra_offset: float) -> tuple[list[Volume], np.ndarray, np.ndarray]:
    """(volumes, device_volume, device_offset): each traced device its own volume on its own disk, or
    (concatenated, the paper's choice for multi-volume workloads) all devices end to end in one volume on
    disk 0. Each volume gets an RA of ra_share of its size, ra_offset into it."""
    sizes = np.asarray(device_sectors, np.int64)
    if concatenated:
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        vol = Volume.with_area(0, int(sizes.sum()), ra_share=ra_share, ra_offset=ra_offset)
        return [vol], np.zeros(len(sizes), np.int64), offsets
    vols = [Volume.with_area(d, int(s), ra_share=ra_share, ra_offset=ra_offset) for d, s in enumerate(sizes)]
    return vols, np.arange(len(sizes), dtype=np.int64), np.zeros(len(sizes), np.int64)


@dataclass(frozen=True, eq=False)
class AlisSetup:
    """A workload prepared for an ALIS run: its volumes, the device mapping, the reorganizations and the
    redirected requests (Redirected.simulation builds the Simulation)."""

    params: AlisParams
    volumes: list[Volume]
    device_volume: np.ndarray
    device_offset: np.ndarray
    schedule: list[Reorganization]
    redirected: Redirected

    @property
    def first_reorganization_us(self) -> float:
        """When the first non-empty directory takes effect (inf: none)."""
        times = [r.time_us for r in self.schedule if len(r.directory)]
        return min(times) if times else math.inf


def prepare(requests: Requests, params: AlisParams, *, sector_size: int, device_sectors: Sequence[int] | None = None,
            concatenated: bool = False, capacity_sectors: int | None = None,
            schedule: Sequence[Reorganization] | None = None) -> AlisSetup:
    """Plan (unless a schedule is given) and redirect `requests` (spec sectors of sector_size bytes).

    device_sectors: each traced device's size (default: its highest address used, the paper's storage
    used); capacity_sectors: the disks' size, checked against each volume plus its RA.
    """
    n_dev = int(requests.device.max()) + 1 if len(requests) else 1
    if device_sectors is None:
        ends = np.zeros(n_dev, np.int64)
        if len(requests):
            np.maximum.at(ends, requests.device, requests.lbn + requests.sectors)
        sizes = np.maximum(ends, 1)
    else:
        sizes = np.asarray(device_sectors, np.int64)
    volumes, dv, do = volumes_for(sizes, concatenated=concatenated, ra_share=params.ra_share,
                                  ra_offset=params.ra_offset)
    if schedule is None:
        from libs.alis.plan import plan_schedule

        schedule = plan_schedule(requests, volumes, params, sector_size=sector_size, device_volume=dv,
                                 device_offset=do)
    out = redirect(requests, volumes, schedule, device_volume=dv, device_offset=do, capacity_sectors=capacity_sectors)
    return AlisSetup(params, volumes, dv, do, list(schedule), out)


#: run_measured's figures (ms; ratios; counts), over the requests completing from the given time on.
FIGURES = ("reads", "writes", "mean_response_ms_read", "mean_service_ms_read", "read_miss_ratio", "physical_ios_read",
           "mean_response_ms_write", "mean_service_ms_write", "physical_ios_write", "mean_response_ms")


def _totals(sim: Simulation) -> np.ndarray:
    sf = sim.core.sf
    return np.array([sf[K.A_N], sf[K.A_N + 1], sf[K.A_RESP], sf[K.A_SVC], sf[K.A_MISS_REQ_R], sf[K.A_PHYS],
                     sf[K.A_RESP + 1], sf[K.A_SVC + 1], sf[K.A_PHYS + 1]], np.float64)


def run_measured(sim: Simulation, *, from_us: float = 0.0) -> dict[str, Any]:
    """Run `sim` to the end and return FIGURES over the foreground requests that complete at or after
    from_us (the warm-up before it is simulated, not measured); "saturated" as sim.stats says."""
    before = np.zeros(9)
    if from_us > sim.now_us and math.isfinite(from_us):
        sim.run(until=from_us)
        before = _totals(sim)
    status = sim.run()
    n_r, n_w, resp_r, svc_r, miss_r, phys_r, resp_w, svc_w, phys_w = _totals(sim) - before

    def ratio(a: float, b: float) -> float:
        return float(a / b) if b > 0 else math.nan

    return {"reads": int(n_r), "writes": int(n_w), "mean_response_ms_read": ratio(resp_r, n_r) / 1000.0,
            "mean_service_ms_read": ratio(svc_r, n_r) / 1000.0, "read_miss_ratio": ratio(miss_r, n_r),
            "physical_ios_read": int(phys_r), "mean_response_ms_write": ratio(resp_w, n_w) / 1000.0,
            "mean_service_ms_write": ratio(svc_w, n_w) / 1000.0, "physical_ios_write": int(phys_w),
            "mean_response_ms": ratio(resp_r + resp_w, n_r + n_w) / 1000.0,
            "saturated": bool(status.saturated or sim.result().saturated)}

"""ALIS as a simulator policy: one call that plans the reorganizations of a workload (sim.alis.plan),
redirects the requests (sim.redirect) and builds the Simulation; and the figures of a run measured from a
time on (the paper's warm-up).

    params = AlisParams(mode="combined", plan="realizable")
    setup = prepare(requests, params, sector_size=spec.sector_size, concatenated=True)
    sim = setup.redirected.simulation(spec, SimConfig(), np.random.default_rng(1))
    figures = run_measured(sim, from_us=setup.first_reorganization_us)
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from blockheat.sim import _kernel as K
from blockheat.sim.alis.params import AlisParams
from blockheat.sim.alis.plan import plan_schedule, plan_schedule_chunks, volumes_for
from blockheat.sim.redirect import Redirected, RedirectStream, Reorganization, Volume, redirect

if TYPE_CHECKING:
    from blockheat.sim.engine import Simulation
    from blockheat.sim.records import Requests, StreamFacts

__all__ = ["FIGURES", "AlisSetup", "AlisStreamSetup", "prepare", "prepare_chunks", "run_measured"]


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
        schedule = plan_schedule(requests, volumes, params, sector_size=sector_size, device_volume=dv,
                                 device_offset=do)
    out = redirect(requests, volumes, schedule, device_volume=dv, device_offset=do, capacity_sectors=capacity_sectors)
    return AlisSetup(params, volumes, dv, do, list(schedule), out)


@dataclass(frozen=True, eq=False)
class AlisStreamSetup:
    """A workload read in chunks, prepared for a streamed ALIS run: its volumes, the device mapping, the
    reorganizations and the redirector of its chunks (RedirectStream, every chunk's virtual device of
    virtual_sectors); device_sectors: the run's devices, the volumes then the virtual device."""

    params: AlisParams
    volumes: list[Volume]
    device_volume: np.ndarray
    device_offset: np.ndarray
    schedule: list[Reorganization]
    stream: RedirectStream
    device_sectors: tuple[int, ...]


def prepare_chunks(chunks: Callable[[], Iterable[Requests]], facts: StreamFacts, params: AlisParams, *,
                   sector_size: int, device_sectors: Sequence[int] | None = None, concatenated: bool = False,
                   capacity_sectors: int | None = None) -> AlisStreamSetup:
    """prepare() for requests read a chunk at a time (each call of `chunks` a pass in arrival order; facts: theirs):
    the same volumes and schedule (sim.alis.plan.plan_schedule_chunks, two passes), and a RedirectStream for the
    replay's pass. Memory follows a chunk and the units, not the requests."""
    if device_sectors is None:
        sizes = np.maximum(np.asarray(facts.device_ends, np.int64), 1)
        if not len(sizes):
            sizes = np.ones(1, np.int64)
    else:
        sizes = np.asarray(device_sectors, np.int64)
    volumes, dv, do = volumes_for(sizes, concatenated=concatenated, ra_share=params.ra_share,
                                  ra_offset=params.ra_offset)
    largest = [1, 0]      # the most sectors one chunk's requests address (its virtual device's size); passes read

    def measured() -> Iterable[Requests]:
        for c in chunks():
            largest[0] = max(largest[0], int(c.sectors.sum(dtype=np.int64)))
            yield c
        largest[1] += 1

    schedule = plan_schedule_chunks(measured, facts.last_us if facts.count else None, volumes, params,
                                    sector_size=sector_size, device_volume=dv, device_offset=do)
    if not largest[1]:                    # no interval to plan: no pass has read the chunks
        for _ in measured():
            pass
    stream = RedirectStream(volumes, schedule, device_volume=dv, device_offset=do, capacity_sectors=capacity_sectors,
                            virtual_sectors=largest[0])
    return AlisStreamSetup(params, volumes, dv, do, schedule, stream,
                           (*[v.size_sectors for v in volumes], largest[0]))


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

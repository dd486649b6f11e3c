"""The simulation engine's typed Python face: run configuration, a workload on a disk array, and
`Simulation`, which validates, compiles the spec and the layout, owns the state arrays (growing pools when
the compiled loop in sim._kernel asks), and supports SimPy-style run(until) / step() so policies can act
between calls (remap events, migrations). Results come from sim.stats.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import numpy as np

from blockheat.sim import _kernel as K
from blockheat.sim.array import (
    SCHEDULERS,
    AsTraced,
    DiskArray,
    ExtentMap,
    ExtentTable,
    Layout,
    RandomDisk,
    RemapEvent,
    Striped,
)
from blockheat.sim.disk import DF_CLOCK, DF_PHASE, DF_RA_ST, DI_LAST_END, DI_RA_SEG, MODES, SG_LRU
from blockheat.sim.records import Requests, StreamFacts
from blockheat.sim.spec import P_SEGMENTS, P_ZERO_LATENCY, P_ZL_WRITES, DiskSpec
from blockheat.sim.stats import ResponseTally, RunResult, summarize

__all__ = ["ClosedLoop", "Policy", "PolicyBase", "SimConfig", "Simulation", "Status", "Window", "run_with_policy"]

logger = logging.getLogger(__name__)


#: Spindle rotation across a run's disks: "synchronized" (every platter at the same angle, the default) or
#: "independent" (unsynchronized arrays: each spindle at its own random angle and a speed off nominal by up
#: to +-SPINDLE_TOLERANCE, so the disks' relative angles drift a full turn every few seconds and a striped
#: request waits for the slowest of its disks' rotations: FIVE's equation 9, the SSA study's observation).
SPINDLES = ("synchronized", "independent")
SPINDLE_TOLERANCE = 0.005
#: Key of the random stream that draws the spindle speeds of a spec with an rpm error (with the run's seed).
RPM_ERROR_STREAM = 1
if (DF_PHASE, DF_CLOCK) != (K.DKF_PHASE, K.DKF_CLOCK) or DF_RA_ST != K.DK_F - 1:
    raise ImportError("sim.disk's DF_PHASE/DF_CLOCK/DF_RA_ST and sim._kernel's DKF_PHASE/DKF_CLOCK/DK_F disagree")


@dataclass(frozen=True)
class ClosedLoop:
    """Closed-loop replay: `outstanding` foreground requests in flight; the next one is issued think time
    after a completion (the request's own think_us when the workload has them, else think_ms)."""

    outstanding: int = 1
    think_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.outstanding <= 0:
            raise ValueError(f"closed loop outstanding must be > 0, got {self.outstanding}")
        if not self.think_ms >= 0:
            raise ValueError(f"closed loop think_ms must be >= 0, got {self.think_ms}")


@dataclass(frozen=True)
class SimConfig:
    """How to run: service-time mode, open-loop speed-up or closed loop, outputs, saturation rule.

    service: "detailed" (the disk model), "expected" (overhead + mean seek + half a rotation + transfer),
    "constant" (constant_ms per request), "exponential" (mean exponential_ms, for queueing checks).
    speedup: open-loop arrival times are divided by it (FIVE's alpha). interval_ms: time-series bins.
    spindles: "synchronized" (default) or "independent" platter angles across the disks (SPINDLES).
    Saturation: a run whose backlog exceeds max_outstanding stops early; at the end, a backlog that grew
    over the second half of the arrivals to more than max(saturation_min_backlog, saturation_fraction x
    arrivals) also counts as saturated (see sim.stats).
    """

    service: str = "detailed"
    constant_ms: float = 10.0
    exponential_ms: float = 10.0
    speedup: float = 1.0
    closed_loop: ClosedLoop | None = None
    zero_latency: bool | None = None
    spindles: str = "synchronized"
    per_request: bool = False
    interval_ms: float | None = None
    event_log: bool = False
    max_outstanding: int = 1_000_000
    saturation_min_backlog: int = 1000
    saturation_fraction: float = 0.01
    checkpoints: int = 20

    def __post_init__(self) -> None:
        if self.service not in MODES:
            raise ValueError(f"service must be one of {', '.join(MODES)}, got {self.service!r}")
        for name in ("constant_ms", "exponential_ms", "speedup"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if self.interval_ms is not None and not self.interval_ms > 0:
            raise ValueError(f"interval_ms must be > 0, got {self.interval_ms!r}")
        if self.max_outstanding <= 0:
            raise ValueError(f"max_outstanding must be > 0, got {self.max_outstanding}")
        if not 0 < self.saturation_fraction <= 1:
            raise ValueError(f"saturation_fraction must be in (0, 1], got {self.saturation_fraction}")
        if self.spindles not in SPINDLES:
            raise ValueError(f"spindles must be one of {', '.join(SPINDLES)}, got {self.spindles!r}")
        if self.checkpoints < 2:
            raise ValueError(f"checkpoints must be >= 2, got {self.checkpoints}")


class Status(NamedTuple):
    """Where a run call stopped: finished (workload drained), paused (until/max_events), saturated."""

    finished: bool
    saturated: bool
    now_us: float


def _max_parts(biggest: int, array: DiskArray) -> int:
    """The most sub-requests one request of `biggest` sectors (0: no request) becomes on the array."""
    lay = array.layout
    if biggest == 0:
        return 2
    if isinstance(lay, Striped):
        return biggest // lay.unit_sectors + 2
    if isinstance(lay, ExtentMap):
        smallest = min(e.sectors for e in lay.extents)
        return biggest // smallest + 2
    if isinstance(lay, ExtentTable):
        return biggest // int(lay.sectors.min()) + 2
    return 2 if not isinstance(lay, RandomDisk) else 1


def _without_remaps(layout: Layout) -> Layout:
    """The layout, refused when it carries remap events (a chunk_layout replaces the map and its schedule)."""
    if isinstance(layout, ExtentMap) and layout.remaps:
        raise ValueError("chunk_layout takes layouts without remaps")
    return layout


class Simulation:
    """One run: a spec, an array, a workload, a config and an injected random generator.

        sim = Simulation(spec, DiskArray(2), requests, SimConfig(), rng=np.random.default_rng(1))
        sim.run()                      # or run(until=t_us) repeatedly, step() for one event
        result = sim.result()          # sim.stats.RunResult
    """

    def __init__(self, spec: DiskSpec, array: DiskArray, requests: Requests, config: SimConfig,
                 rng: np.random.Generator, *, device_sectors: Sequence[int] | None = None,
                 more: Iterator[Requests] | None = None, facts: StreamFacts | None = None,
                 observe: Callable[[np.ndarray, np.ndarray], None] | None = None,
                 chunk_layout: Callable[[], Layout] | None = None) -> None:
        """more: the chunks that follow `requests` (a streamed run: no per-request output or event log; requests are
        loaded as the run reaches them, in closed loop as it issues them (with background requests, also before the
        run's clock passes the last one loaded), and dropped once answered, so memory follows the chunk and the
        requests in flight, in a closed loop with background traffic the requests between the loop's next issue and
        the clock); facts: the whole
        workload's (sim.records.StreamFacts), needed with more; observe: given the dropped requests' responses
        (float32, NaN: not answered) and flags, in request order, as the tally; chunk_layout: with more, the
        array's layout from each chunk of `more` on (called as the chunk is loaded; `array` holds the first one's),
        which may map only its chunk's requests: the requests loaded before it have all been issued (open loop, or
        a closed loop without background requests) and no remaps apply (sim.redirect.RedirectStream's pieces)."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if more is not None:
            if facts is None:
                raise ValueError("a streamed run (more=) needs the workload's facts")
            if config.per_request or config.event_log:
                raise ValueError("a streamed run has no per-request output or event log")
        if chunk_layout is not None:
            if more is None or facts is None:
                raise ValueError("chunk_layout needs a streamed run (more= and facts=)")
            if config.closed_loop is not None and facts.foreground < facts.count:
                raise ValueError("chunk_layout needs every loaded request issued before the next chunk: not in a "
                                 "closed loop with background requests")
            _without_remaps(array.layout)
        self._chunk_layout = chunk_layout
        self.spec = spec
        self.array = array
        self.config = config
        self.disk = spec.compile()
        if config.zero_latency is not None:
            self.disk.params[P_ZERO_LATENCY] = 1.0 if config.zero_latency else 0.0
            self.disk.params[P_ZL_WRITES] = self.disk.params[P_ZERO_LATENCY]
        self.requests = self._scaled(requests, config)
        self._more = None if more is None else (self._scaled(c, config) for c in more)
        if facts is None:
            r = self.requests
            n = len(r)
            facts = StreamFacts(n, int(np.count_nonzero(~r.is_background)) if n else 0,
                                int(r.sectors.max()) if n else 0, np.zeros(0, np.int64),
                                float(r.arrival_us[0]) if n else 0.0, float(r.arrival_us[-1]) if n else 0.0)
        elif config.speedup != 1.0:
            facts = facts.scaled(config.speedup)
        self.facts = facts
        self.tally = ResponseTally() if more is not None else None
        self._observe = observe
        self._keep_from: int | None = None
        self._req = self._arrays(self.requests)
        cap = spec.capacity_sectors
        self.dev_base, self.device_sectors = self._device_bases(self.requests, device_sectors,
                                                                None if more is None else facts.device_ends)
        self._check_fit(self.requests, array, cap)
        self.layout = array.compile(cap, self.dev_base)
        self.core, self.out = self._initial_state(rng)
        self._saturated_early = False

    @staticmethod
    def _arrays(r: Requests) -> K.ReqArrays:
        return K.ReqArrays(r.arrival_us, r.device, r.lbn, r.sectors, r.flags,
                           r.think_us if r.think_us is not None else np.zeros(0))

    @property
    def request_base(self) -> int:
        """The run's index of sim.requests[0] (0 unless streamed: then the oldest request still loaded)."""
        return int(self.core.si[K.SI_BASE])

    def keep_from(self, index: int) -> None:
        """Keep requests from this run index on loaded (a policy reads the requests of its window)."""
        self._keep_from = int(index)

    # -- setup ------------------------------------------------------------------------------------

    @staticmethod
    def _scaled(requests: Requests, config: SimConfig) -> Requests:
        if config.speedup == 1.0 or len(requests) == 0:
            return requests
        return replace(requests, arrival_us=requests.arrival_us / config.speedup)

    @staticmethod
    def _device_bases(requests: Requests, device_sectors: Sequence[int] | None,
                      device_ends: np.ndarray | None = None, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(each device's first logical sector, its size): device_sectors, else each device's highest sector
        addressed (device_ends when given: the whole workload's, else the requests'); errors name a request (by
        run index: first is requests[0]'s) beyond its device's given size."""
        ndev = int(requests.device.max()) + 1 if len(requests) else 1
        if device_ends is not None:
            ndev = max(ndev, len(device_ends))
        if device_sectors is None:
            ends = np.zeros(ndev, dtype=np.int64)
            if device_ends is not None:
                ends[:len(device_ends)] = device_ends
            elif len(requests):
                np.maximum.at(ends, requests.device, requests.lbn + requests.sectors)
            sizes = ends
        else:
            sizes = np.asarray(device_sectors, dtype=np.int64)
            if len(sizes) < ndev:
                raise ValueError(f"device_sectors has {len(sizes)} sizes, the workload has {ndev} devices")
            if len(requests):
                ends = requests.lbn + requests.sectors
                over = np.flatnonzero(ends > sizes[requests.device])
                if over.size:
                    i = int(over[0])
                    raise ValueError(f"request {first + i} ends at sector {ends[i]} of device {requests.device[i]}, "
                                     f"beyond its size {sizes[requests.device[i]]}")
        base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return base, sizes

    def _check_fit(self, requests: Requests, array: DiskArray, cap: int, first: int = 0) -> None:
        """Errors name the first request (by run index: first is requests[0]'s) the array cannot hold."""
        if len(requests) == 0:
            return
        lay = array.layout
        total = int(self.device_sectors.sum())
        ends = requests.lbn + requests.sectors
        if isinstance(lay, AsTraced):
            if int(requests.device.max()) >= array.n_disks:
                i = int(np.argmax(requests.device))
                raise ValueError(f"as-traced layout: request {first + i} is on device {requests.device[i]}, but the "
                                 f"array has {array.n_disks} disks")
            over = np.flatnonzero(ends > cap)
            if over.size:
                i = int(over[0])
                raise ValueError(f"as-traced layout: request {first + i} ends at sector {ends[i]}, beyond the disk "
                                 f"capacity {cap} ({self.spec.name})")
        elif isinstance(lay, Striped):
            width, unit = lay.width or array.n_disks, lay.unit_sectors
            k = (total - 1) // unit
            need = (k // width) * unit + (unit if k % width else (total - 1) % unit + 1)
            if need > cap:
                raise ValueError(f"striped layout: {total} logical sectors need {need} sectors per disk, beyond "
                                 f"the capacity {cap}")
        elif isinstance(lay, ExtentMap | ExtentTable):
            if total > lay.logical_sectors:
                raise ValueError(f"extent map covers {lay.logical_sectors} logical sectors, the workload "
                                 f"addresses {total}")
        elif isinstance(lay, RandomDisk):
            if int(requests.sectors.max()) > cap:
                raise ValueError(f"a request of {int(requests.sectors.max())} sectors exceeds the disk capacity {cap}")
        elif total > cap * array.n_disks:
            raise ValueError(f"concatenated layout: {total} logical sectors exceed {array.n_disks} disks of {cap}")

    def _initial_state(self, rng: np.random.Generator) -> tuple[K.Core, K.Out]:
        cfg = self.config
        facts = self.facts
        n = facts.count
        ndisk = self.array.n_disks
        si = np.zeros(K.SI_COUNT, dtype=np.int64)
        si[K.CI_MODE] = MODES[cfg.service]
        si[K.CI_SCHED] = SCHEDULERS[self.array.scheduler]
        si[K.CI_CLOSED] = 1 if cfg.closed_loop is not None else 0
        si[K.CI_MPL] = cfg.closed_loop.outstanding if cfg.closed_loop is not None else 0
        si[K.CI_ZL] = int(self.disk.params[P_ZERO_LATENCY])
        si[K.CI_PER_REQ] = 1 if cfg.per_request else 0
        si[K.CI_LOG] = 1 if cfg.event_log else 0
        si[K.CI_MAX_OUT] = cfg.max_outstanding
        si[K.CI_CP_EVERY] = max(1, n // cfg.checkpoints)
        parts = _max_parts(facts.max_sectors, self.array)
        si[K.CI_MARGIN] = parts + 4
        si[K.CI_SEED] = int(rng.integers(0, 2**62))
        si[K.CI_HAS_THINK] = 1 if self.requests.think_us is not None else 0
        si[K.CI_CYLS] = self.spec.cylinders
        si[K.CI_QSCAN] = K.QUEUE_SCAN_MAX
        si[K.SI_FREE] = -1
        si[K.CI_FG_TOTAL] = facts.foreground
        si[K.CI_MORE] = 0 if self._more is None else 2 if cfg.closed_loop is not None and facts.foreground < n else 1
        sf = np.zeros(K.SF_COUNT)
        sf[K.CF_CONST_US] = cfg.constant_ms * 1000.0
        sf[K.CF_EXP_US] = cfg.exponential_ms * 1000.0
        sf[K.CF_THINK_US] = cfg.closed_loop.think_ms * 1000.0 if cfg.closed_loop is not None else 0.0
        sf[K.CF_TS_W] = cfg.interval_ms * 1000.0 if cfg.interval_ms is not None else 0.0
        ts_k = 0
        if cfg.interval_ms is not None:
            ts_k = int(facts.last_us / sf[K.CF_TS_W]) + 16
        dk_i = np.zeros((ndisk, K.DK_I), dtype=np.int64)
        dk_i[:, [DI_RA_SEG, DI_LAST_END, K.DK_BUSY, K.DK_QHEAD, K.DK_QTAIL, K.DK_DHEAD, K.DK_DTAIL]] = -1
        nseg = int(self.disk.params[P_SEGMENTS]) + 1     # the read segments and the write segment
        seg = np.full((ndisk, 3, nseg), -1.0)          # sim.disk's fields (SG_*) by segment
        seg[:, SG_LRU, :] = 0.0
        heap = ndisk + (cfg.closed_loop.outstanding if cfg.closed_loop is not None else 0) + 4
        # SSTF and C-LOOK keep each cylinder's queue too (K.QUEUE_SCAN_MAX); FCFS needs none.
        ncyl = self.spec.cylinders if si[K.CI_SCHED] != SCHEDULERS["fcfs"] else 0
        core = K.Core(si=si, sf=sf, heap_f=np.zeros(heap), heap_i=np.zeros((heap, 3), dtype=np.int64),
                      slot_i=np.zeros((0, K.SLOT_I), dtype=np.int64), slot_f=np.zeros((0, K.SLOT_F)),
                      dk_i=dk_i, dk_f=np.zeros((ndisk, K.DK_F)), seg=seg,
                      cyl_q=np.full((ndisk, ncyl, 2), -1, dtype=np.int64),
                      cyl_blk=np.zeros((ndisk, -(-ncyl // K.CYL_BLOCK)), dtype=np.int64),
                      todo=np.zeros(ndisk + 8, dtype=np.int64), open_part=np.full(ndisk, -1, dtype=np.int64))
        core.dk_f[:, K.DKF_CLOCK] = 1.0
        if cfg.spindles == "independent":
            # Angles and speeds from a stream of their own (seeded from the run's seed, so the main random
            # stream and synchronized runs are unchanged).
            spindle_rng = np.random.default_rng(int(si[K.CI_SEED]))
            core.dk_f[:, K.DKF_PHASE] = spindle_rng.random(ndisk) * self.spec.rotation_ms * 1000.0
            core.dk_f[:, K.DKF_CLOCK] = 1.0 + spindle_rng.uniform(-SPINDLE_TOLERANCE, SPINDLE_TOLERANCE, ndisk)
        if self.spec.rpm_error_percent > 0.0:
            # The spec's rpm error (DiskSim's "Percent error in rpms"): each spindle's speed drawn once, uniform
            # within rpm +- the error, from a stream of its own. The disk's clock scales its mechanical times with
            # the rotation (a seek on a disk 0.5 % fast takes 0.5 % less), a second-order difference from DiskSim.
            err = self.spec.rpm_error_percent / 100.0
            rpm_rng = np.random.default_rng([int(si[K.CI_SEED]), RPM_ERROR_STREAM])
            core.dk_f[:, K.DKF_CLOCK] = 1.0 + rpm_rng.uniform(-err, err, ndisk)
        n = len(self.requests)                # the loaded ones
        out = K.Out(resp=np.full(n, np.nan, dtype=np.float32),
                    out_queue=np.full(n if cfg.per_request else 0, np.nan, dtype=np.float32),
                    out_service=np.full(n if cfg.per_request else 0, np.nan, dtype=np.float32),
                    ts=np.zeros((ts_k, K.TS_COLS)), ts_disk=np.zeros((ts_k, ndisk, 2)),
                    backlog=np.full(cfg.checkpoints + 1, -1, dtype=np.int64),
                    log_t=np.zeros(8 * n + 64 if cfg.event_log else 0),
                    log_i=np.zeros((8 * n + 64 if cfg.event_log else 0, 3), dtype=np.int64))
        core = self._grow_pool(core, max(64, 4 * parts + 8))
        if cfg.closed_loop is not None:
            t0 = float(self.requests.arrival_us[0]) if n else 0.0
            for _ in range(min(cfg.closed_loop.outstanding, int(si[K.CI_FG_TOTAL]))):
                K.heap_push(core.heap_f, core.heap_i, core.si, t0, K.PRIO_ISSUE, K.EV_ISSUE, 0)
                si[K.SI_ISSUES] += 1
        return core, out

    @staticmethod
    def _grow_pool(core: K.Core, size: int) -> K.Core:
        """The slot pool grown to `size` slots; the new slots join the free list."""
        old = core.slot_i.shape[0]
        if size <= old:
            return core
        slot_i = np.zeros((size, K.SLOT_I), dtype=np.int64)
        slot_i[:old] = core.slot_i
        slot_f = np.zeros((size, K.SLOT_F))
        slot_f[:old] = core.slot_f
        new = np.arange(old, size, dtype=np.int64)
        slot_i[new, K.S_NEXT] = np.append(new[1:], core.si[K.SI_FREE])
        core.si[K.SI_FREE] = old
        return core._replace(slot_i=slot_i, slot_f=slot_f)

    @staticmethod
    def _grow_log(out: K.Out) -> K.Out:
        size = 2 * len(out.log_t) + 64
        log_t = np.zeros(size)
        log_t[: len(out.log_t)] = out.log_t
        log_i = np.zeros((size, 3), dtype=np.int64)
        log_i[: len(out.log_i)] = out.log_i
        return out._replace(log_t=log_t, log_i=log_i)

    @staticmethod
    def _grow_ts(out: K.Out) -> K.Out:
        k = max(64, 2 * out.ts.shape[0])
        ts = np.zeros((k, K.TS_COLS))
        ts[: out.ts.shape[0]] = out.ts
        ts_disk = np.zeros((k, out.ts_disk.shape[1], 2))
        ts_disk[: out.ts_disk.shape[0]] = out.ts_disk
        return out._replace(ts=ts, ts_disk=ts_disk)

    # -- running ----------------------------------------------------------------------------------

    @property
    def now_us(self) -> float:
        return float(self.core.sf[K.SF_NOW])

    def run(self, until: float | None = None, *, max_events: int = -1) -> Status:
        """Run to `until` (us; None: to the end), or for max_events events."""
        limit = math.inf if until is None else float(until)
        if limit < self.now_us:
            raise ValueError(f"until={until} is before the current time {self.now_us} us")
        budget = max_events
        while True:
            before = int(self.core.si[K.SI_EVENTS])
            code = K.run_loop(self.core, self.out, self._req, self.layout, self.disk, limit, budget)
            if budget >= 0:
                budget = max(0, budget - (int(self.core.si[K.SI_EVENTS]) - before))
            if code == K.ST_GROW_POOL:
                self.core = self._grow_pool(self.core, 2 * self.core.slot_i.shape[0])
            elif code == K.ST_GROW_TS:
                self.out = self._grow_ts(self.out)
            elif code == K.ST_GROW_LOG:
                self.out = self._grow_log(self.out)
            elif code == K.ST_NEED_REQ:
                self._load_next()
            else:
                if code == K.ST_SATURATED:
                    self._saturated_early = True
                    logger.info("run stopped: %d requests outstanding exceed max_outstanding=%d",
                                int(self.core.si[K.SI_OUT]), self.config.max_outstanding)
                return Status(code == K.ST_DONE, code == K.ST_SATURATED, self.now_us)

    def _load_next(self) -> None:
        """The next chunk loaded behind the requests still in flight (or kept: keep_from); the answered ones
        before them leave, their responses into the tally."""
        si = self.core.si
        base = int(si[K.SI_BASE])
        resp = self.out.resp
        waiting = np.flatnonzero(np.isnan(resp))
        k = int(waiting[0]) if waiting.size else len(resp)
        if self._keep_from is not None:
            k = min(k, max(self._keep_from - base, 0))
        assert self.tally is not None
        assert self._more is not None
        self._retire(resp[:k], self.requests.flags[:k])
        nxt = next(self._more, None)
        while nxt is not None and not len(nxt):
            nxt = next(self._more, None)
        if nxt is None:
            si[K.CI_MORE] = 0
            nxt = Requests.empty()
        start = base + len(resp)
        if len(nxt):
            if (nxt.think_us is None) != (self.core.si[K.CI_HAS_THINK] == 0):
                raise ValueError(f"request {start} on: think times in some chunks only (all chunks or none)")
            if len(self.requests) and nxt.arrival_us[0] < self.requests.arrival_us[-1]:
                raise ValueError(f"request {start} arrives at {nxt.arrival_us[0]} us, before request {start - 1} at "
                                 f"{self.requests.arrival_us[-1]} us: chunks must continue in arrival order")
            self._device_bases(nxt, self.device_sectors, first=start)
            if self._chunk_layout is not None:
                self._relayout(self._chunk_layout(), int(nxt.sectors.max()))
            self._check_fit(nxt, self.array, self.spec.capacity_sectors, first=start)
        self.requests = Requests.concat([self.requests.rows(k, len(self.requests)), nxt])
        self._req = self._arrays(self.requests)
        self.out = self.out._replace(resp=np.concatenate([resp[k:], np.full(len(nxt), np.nan, np.float32)]))
        si[K.SI_BASE] = base + k

    def _relayout(self, layout: Layout, biggest: int) -> None:
        """The array's layout replaced for the next chunk (chunk_layout): the pool's margin grown if its requests
        can split into more parts."""
        self.array = replace(self.array, layout=_without_remaps(layout))
        self.layout = self.array.compile(self.spec.capacity_sectors, self.dev_base)
        si = self.core.si
        si[K.CI_MARGIN] = max(int(si[K.CI_MARGIN]), _max_parts(biggest, self.array) + 4)

    def _retire(self, resp: np.ndarray, flags: np.ndarray) -> None:
        assert self.tally is not None
        self.tally.add(resp, flags)
        if self._observe is not None:
            self._observe(resp, flags)

    def _tally_loaded(self) -> None:
        """A streamed run's loaded requests into the tally (once, when its figures are read)."""
        if self.tally is not None and self.tally.through < self.request_base + len(self.requests):
            skip = self.tally.through - self.request_base
            self._retire(self.out.resp[skip:], self.requests.flags[skip:])

    def step(self) -> Status:
        """Process one event."""
        return self.run(max_events=1)

    def schedule_remaps(self, events: Sequence[RemapEvent]) -> None:
        """Add remap events (at or after now) to an extent-map run; they merge with the pending schedule."""
        if not isinstance(self.array.layout, ExtentMap | ExtentTable):
            raise ValueError("remap events need an extent map layout (ExtentMap or ExtentTable)")
        lay = self.layout
        nxt = int(self.core.si[K.SI_NEXT_RM])
        n_ext = len(lay.ext_lstart)
        rows = []
        for j, e in enumerate(events):
            if e.time_us < self.now_us:
                raise ValueError(f"remap {j} at {e.time_us} us is before the current time {self.now_us} us")
            if not 0 <= e.extent < n_ext or not 0 <= e.disk < self.array.n_disks:
                raise ValueError(f"remap {j}: extent {e.extent} or disk {e.disk} out of range")
            if e.physical_start < 0 or e.physical_start + lay.ext_len[e.extent] > self.spec.capacity_sectors:
                raise ValueError(f"remap {j} moves extent {e.extent} past the disk capacity")
            rows.append((e.time_us, e.extent, e.disk, e.physical_start, int(e.migrate)))
        pending = list(zip(lay.rm_time[nxt:], lay.rm_ext[nxt:], lay.rm_disk[nxt:], lay.rm_pstart[nxt:],
                           lay.rm_migrate[nxt:], strict=True))
        merged = sorted(pending + rows, key=lambda r: r[0])
        done = (lay.rm_time[:nxt], lay.rm_ext[:nxt], lay.rm_disk[:nxt], lay.rm_pstart[:nxt], lay.rm_migrate[:nxt])
        cols = list(zip(*merged, strict=True)) if merged else [(), (), (), (), ()]
        self.layout = lay._replace(
            rm_time=np.concatenate([done[0], np.array(cols[0], dtype=np.float64)]),
            rm_ext=np.concatenate([done[1], np.array(cols[1], dtype=np.int64)]),
            rm_disk=np.concatenate([done[2], np.array(cols[2], dtype=np.int64)]),
            rm_pstart=np.concatenate([done[3], np.array(cols[3], dtype=np.int64)]),
            rm_migrate=np.concatenate([done[4], np.array(cols[4], dtype=np.int64)]))

    def disk_queue_lengths(self) -> np.ndarray:
        """Sub-requests waiting in each disk's queue now (migration copies included, the one in service not)."""
        return self.core.dk_i[:, K.DK_QLEN].copy()

    @property
    def saturated_early(self) -> bool:
        return self._saturated_early

    def completions(self) -> tuple[np.ndarray, np.ndarray]:
        """From the event log (SimConfig.event_log): each completed request's index and completion time (us), in
        completion order."""
        n = int(self.core.si[K.SI_LOG_N])
        kind, req = self.out.log_i[:n, 0], self.out.log_i[:n, 1]
        done = (kind == K.LOG_DONE) & (req >= 0)
        return req[done], self.out.log_t[:n][done]

    def result(self) -> RunResult:
        """The run's figures (sim.stats.RunResult), once the run has ended."""
        self._tally_loaded()
        return summarize(self)


@dataclass(frozen=True, eq=False)
class Window:
    """What happened between two policy calls: time span, the requests that arrived (run indices [first, end):
    sim.requests[i - sim.request_base]), and per-disk busy time and queue-length area (us) in the span."""

    start_us: float
    end_us: float
    first_request: int
    end_request: int
    disk_busy_us: np.ndarray
    disk_queue_area: np.ndarray


class Policy(Protocol):
    """A placement policy acting during a run (disk cooling, greedy allocation, ALIS redirection): every
    interval_us it sees the last window and answers with remap events (moves of extents, optionally with
    migration I/O) to apply from then on. Needs an ExtentMap layout when it returns events. A policy may
    also define next_stop_us(sim, start_us) -> float to choose each stop itself (e.g. every N arrivals)."""

    interval_us: float

    def start(self, sim: Simulation) -> None: ...

    def on_interval(self, sim: Simulation, window: Window) -> Sequence[RemapEvent]: ...


class PolicyBase:
    """Defaults for Policy: a one-second interval, nothing at start, no remaps."""

    interval_us: float = 1_000_000.0

    def start(self, sim: Simulation) -> None:
        return None

    def on_interval(self, sim: Simulation, window: Window) -> Sequence[RemapEvent]:
        return ()


def run_with_policy(sim: Simulation, policy: Policy) -> Status:
    """Run to the end, stopping every policy.interval_us (simulated) to let the policy remap extents."""
    if not policy.interval_us > 0:
        raise ValueError(f"policy interval_us must be > 0, got {policy.interval_us}")
    policy.start(sim)
    next_stop = getattr(policy, "next_stop_us", None)
    t0 = float(sim.requests.arrival_us[0]) if len(sim.requests) else 0.0
    start = max(sim.now_us, t0)
    while True:
        first = int(sim.core.si[K.SI_ARRIVED])
        sim.keep_from(first)                   # a streamed run keeps the window's requests for the policy
        busy = sim.core.dk_f[:, K.DKF_BUSY].copy()
        area = sim.core.dk_f[:, K.DKF_AREA].copy()
        until = start + policy.interval_us if next_stop is None else max(float(next_stop(sim, start)), start)
        status = sim.run(until=until)
        if status.finished or status.saturated:
            return status
        window = Window(start, sim.now_us, first, int(sim.core.si[K.SI_ARRIVED]),
                        sim.core.dk_f[:, K.DKF_BUSY] - busy, sim.core.dk_f[:, K.DKF_AREA] - area)
        events = policy.on_interval(sim, window)
        if events:
            sim.schedule_remaps(events)
        start = sim.now_us

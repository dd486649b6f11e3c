"""Scenarios: the format of one simulated scenario (a grid entry) and its replay over one partition of the
`requests` table, pyarrow in and out (what the Spark simulation stage runs in each task).

    cfg = ScenarioConfig.from_dict({"scenario_id": "s1", "spec": "hp_c2247a", "disks": 4,
                                    "layout": {"kind": "striped", "unit_sectors": 128}})
    row = simulate_partition(requests_table, cfg)          # one row, SIM_RESULT_SCHEMA
    row, series = simulate_partition_with_timeseries(requests_table, cfg)
    out = simulate_scenario(requests_table, cfg)           # + out.moves: the cooling policy's moves

Policies (the scenario's `policy` key) run here, inside the partition: "cooling" (sim.cooling's disk
cooling on an extent map), "greedy-allocation" (FIVE's static greedy extent map, heats computed from the
partition's own requests) and "alis" (sim.alis.policy: reorganizations planned from the partition's requests, the
requests redirected by sim.redirect). No pyspark here: jobs/ wraps these in applyInArrow.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.sim.alis.params import AlisParams
from blockheat.sim.alis.policy import prepare as prepare_alis
from blockheat.sim.alis.policy import prepare_chunks as prepare_alis_chunks
from blockheat.sim.allocation import (
    AllocationError,
    AllocUnit,
    greedy_disks,
    incremental_moves,
    round_robin_allocation,
    to_extent_map,
)
from blockheat.sim.array import (
    AsTraced,
    Concatenated,
    DiskArray,
    Extent,
    ExtentMap,
    ExtentTable,
    Layout,
    RandomDisk,
    RemapEvent,
    Striped,
    extent_index,
)
from blockheat.sim.cooling import CoolingConfig, DiskCooling, moves_table
from blockheat.sim.engine import ClosedLoop, SimConfig, Simulation, run_with_policy
from blockheat.sim.records import FLAG_BACKGROUND, Chunks, Requests, StreamFacts
from blockheat.sim.spec import DiskSpec, SpecError
from blockheat.sim.specs import from_geometry, resolve
from blockheat.sim.stats import RESULT_SCHEMA, ResponseTally, timeseries
from blockheat.sim.stats import _order_stats as order_stats
from blockheat.sim.tracker import add_unit_blocks
from blockheat.sim.tracks import (
    IoShaping,
    IoShapingError,
    ShapedRequests,
    io_shaping_from_dict,
    original_responses,
    shape_segments,
)
from blockheat.sim.workloads import from_arrow, mix, poisson_background

__all__ = [
    "POLICY_NAMES",
    "SIM_RESULT_SCHEMA",
    "AlisPolicy",
    "AsTracedExtents",
    "BackgroundTraffic",
    "CoolingPolicy",
    "GreedyAllocation",
    "RoundRobinExtents",
    "ScenarioConfig",
    "ScenarioError",
    "ScenarioOutput",
    "layout_from_dict",
    "partition_layout",
    "policy_from_dict",
    "simulate_chunks",
    "simulate_partition",
    "simulate_partition_with_timeseries",
    "simulate_requests",
    "simulate_scenario",
    "streams",
]

_KEY_FIELDS = [pa.field("scenario_id", pa.string(), False), pa.field("trace_id", pa.string(), True)]
#: simulate_partition output: scenario key, the partition's trace and devices, then RunResult's columns.
SIM_RESULT_SCHEMA = pa.schema([*_KEY_FIELDS, pa.field("devices", pa.list_(pa.string()), False),
                               *RESULT_SCHEMA])
POLICY_NAMES = ("cooling", "greedy-allocation", "incremental-greedy", "alis")
_COOLING_PARAMS = tuple(f.name for f in fields(CoolingConfig))
_GREEDY_PARAMS = ("extent_sectors", "heat_fraction")
_INCREMENTAL_PARAMS = (*_GREEDY_PARAMS, "max_share")
_ALIS_PARAMS = tuple(f.name for f in fields(AlisParams))


class ScenarioError(ValueError):
    """A scenario description is malformed; the message names the key and the bad value."""


@dataclass(frozen=True)
class BackgroundTraffic:
    """Poisson small random I/Os mixed into the trace (Lachesis's competing traffic) on one device."""

    rate_per_s: float
    size_bytes: int = 8192
    read_fraction: float = 0.5
    device: str | None = None   # default: the first device

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0 or self.size_bytes <= 0 or not 0 <= self.read_fraction <= 1:
            raise ScenarioError(f"background traffic needs rate_per_s > 0, size_bytes > 0 and read_fraction in "
                                f"[0, 1], got {self.rate_per_s}, {self.size_bytes}, {self.read_fraction}")


@dataclass(frozen=True)
class RoundRobinExtents:
    """`{"kind": "extents", "extent_sectors": N}`: each traced device cut into extents of N sectors (its
    last one shorter), dealt round robin over the array's disks with one cursor across devices, each disk
    packed from sector 0 (sim.allocation.round_robin_allocation); built once the partition's devices and
    their sizes are known, so a grid need not know a trace's size."""

    extent_sectors: int

    def __post_init__(self) -> None:
        _check_extent_sectors(self.extent_sectors)


@dataclass(frozen=True)
class AsTracedExtents:
    """`{"kind": "as_traced", "extent_sectors": N}`: the as-traced layout (device k on disk k, at its own
    addresses) as an extent map, each traced device cut into extents of N sectors (its last one shorter), for a
    policy that moves extents from today's layout (cooling); built once the partition's devices and their sizes
    are known, so a scenario carries the extent size and not the map."""

    extent_sectors: int

    def __post_init__(self) -> None:
        _check_extent_sectors(self.extent_sectors)


def _check_extent_sectors(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ScenarioError(f"extent_sectors must be a positive integer, got {value!r}")


COOLING_FILES = ("extent", "device")


@dataclass(frozen=True)
class CoolingPolicy:
    """`{"name": "cooling", ...CoolingConfig fields, "files"?}`: FIVE's disk cooling (sim.cooling) during the
    run. files: what FIVE's same-file rule (a target holds no other extent of the unit's file) sees as a
    file: "extent" (default; every extent its own file, so any disk but the source may take it: block traces
    carry no files, and with one file per device holding more extents than disks no move would ever be
    allowed) or "device" (the traced device, FIVE's rule as written)."""

    config: CoolingConfig = field(default_factory=CoolingConfig)
    files: str = "extent"

    def __post_init__(self) -> None:
        if self.files not in COOLING_FILES:
            raise ScenarioError(f"policy 'cooling': files must be one of {list(COOLING_FILES)}, got {self.files!r}")


@dataclass(frozen=True)
class GreedyAllocation:
    """`{"name": "greedy-allocation", "extent_sectors"?, "heat_fraction"?}`: FIVE's static greedy allocation
    (sim.allocation.greedy_allocation, file = traced device) of extents of extent_sectors (default: the
    layout's round-robin extent size). Heats are extent_heat's (512-byte blocks per second) computed in the
    partition from its own requests that arrive in the first heat_fraction of the trace's span (default 1:
    the whole trace, a placement that knows the future; e.g. 0.5: the first half's statistics, the whole
    trace is still simulated). Extents with no request in that part have heat 0.

    `{"name": "incremental-greedy", ..., "max_share"?}` (incremental=True): the current layout (device k on disk
    k) with only the moves of sim.allocation.incremental_moves applied, at most max_share (default 0.1) of the
    devices' sectors moved in all."""

    extent_sectors: int | None = None
    heat_fraction: float = 1.0
    incremental: bool = False
    max_share: float = 0.1

    @property
    def name(self) -> str:
        return "incremental-greedy" if self.incremental else "greedy-allocation"

    def __post_init__(self) -> None:
        if self.extent_sectors is not None and (isinstance(self.extent_sectors, bool)
                                                or not isinstance(self.extent_sectors, int)
                                                or self.extent_sectors <= 0):
            raise ScenarioError(f"policy {self.name!r}: extent_sectors must be a positive integer, got "
                                f"{self.extent_sectors!r}")
        if isinstance(self.heat_fraction, bool) or not isinstance(self.heat_fraction, int | float) \
                or not 0 < self.heat_fraction <= 1:
            raise ScenarioError(f"policy {self.name!r}: heat_fraction must be in (0, 1], got "
                                f"{self.heat_fraction!r}")
        if isinstance(self.max_share, bool) or not isinstance(self.max_share, int | float) \
                or not 0 <= self.max_share <= 1:
            raise ScenarioError(f"policy {self.name!r}: max_share must be in [0, 1], got {self.max_share!r}")


@dataclass(frozen=True)
class AlisPolicy:
    """`{"name": "alis", ...sim.alis.params.AlisParams fields}`: ALIS (mode heat, run or combined; plan realizable or
    lookahead) on an as-traced layout (each device its own volume and disk) or a concatenated one (all devices
    one volume on one disk); each volume gets its reorganized area inserted ra_offset into it, so the disks
    must hold the volume plus the area. Intervals are counted on the sped-up clock (interval_s / speedup)."""

    params: AlisParams = field(default_factory=AlisParams)


Policy = CoolingPolicy | GreedyAllocation | AlisPolicy


def policy_from_dict(data: Any) -> Policy | None:
    """{"name": "cooling" | "greedy-allocation", parameters...} (None: no policy) -> a policy; errors name
    the policy and the bad parameter."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ScenarioError(f"policy must be an object {{\"name\": {' | '.join(POLICY_NAMES)}, parameters...}}, got "
                            f"{data!r}")
    name = data.get("name")
    if name not in POLICY_NAMES:
        raise ScenarioError(f"policy: name must be one of {list(POLICY_NAMES)}, got {name!r}")
    params = {k: v for k, v in data.items() if k != "name"}
    allowed = (*_COOLING_PARAMS, "files") if name == "cooling" else (
        _ALIS_PARAMS if name == "alis" else _INCREMENTAL_PARAMS if name == "incremental-greedy" else _GREEDY_PARAMS)
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise ScenarioError(f"policy {name!r}: unknown parameter(s) {extra}; allowed: {sorted(allowed)}")
    if name in ("greedy-allocation", "incremental-greedy"):
        return GreedyAllocation(**params, incremental=name == "incremental-greedy")
    if name == "alis":
        try:
            return AlisPolicy(AlisParams(**params))
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"policy 'alis': {exc}") from exc
    if "every_s" in params and "every_requests" not in params:
        params["every_requests"] = None          # every_s alone replaces the default every 100 requests
    files = params.pop("files", "extent")
    try:
        return CoolingPolicy(CoolingConfig(**params), files)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"policy 'cooling': {exc}") from exc


@dataclass(frozen=True)
class ScenarioConfig:
    """Everything one simulated scenario needs besides the trace partition."""

    scenario_id: str
    spec: DiskSpec
    n_disks: int | None = None            # None: one disk per traced device
    layout: Layout | RoundRobinExtents | AsTracedExtents = field(default_factory=AsTraced)
    scheduler: str = "fcfs"
    sim: SimConfig = field(default_factory=SimConfig)
    seed: int = 0
    devices: tuple[str, ...] | None = None          # device order (default: sorted names)
    device_sectors: tuple[int, ...] | None = None   # logical size per device (default: highest address used)
    background: BackgroundTraffic | None = None
    policy: Policy | None = None
    io: IoShaping | None = None                     # request transform (sim.tracks), before background

    def __post_init__(self) -> None:
        if not self.scenario_id:
            raise ScenarioError("scenario_id must be a non-empty string")
        if self.n_disks is not None and self.n_disks <= 0:
            raise ScenarioError(f"disks must be > 0, got {self.n_disks}")
        pol, lay = self.policy, self.layout
        if self.io is not None and not isinstance(lay, AsTraced):
            raise ScenarioError(f"io {self.io.kind!r} cuts requests at the disk's own track boundaries: it needs "
                                f"layout kind 'as_traced', got {type(lay).__name__}")
        if isinstance(pol, CoolingPolicy):
            if not isinstance(lay, ExtentMap | RoundRobinExtents | AsTracedExtents):
                raise ScenarioError("policy 'cooling' moves extents: it needs layout kind 'extents' (e.g. "
                                    "{\"kind\": \"extents\", \"extent_sectors\": 2048}) or the as-traced layout in "
                                    "extents ({\"kind\": \"as_traced\", \"extent_sectors\": 2048}), got "
                                    + type(lay).__name__)
            if self.sim.closed_loop is not None:
                raise ScenarioError("policy 'cooling' runs open loop only: drop closed_loop")
        if isinstance(pol, AlisPolicy) and self.io is not None and self.io.report == "requests":
            raise ScenarioError("io report 'requests' maps each traced request to its pieces; policy 'alis' "
                                "redirects the pieces again: use report 'pieces'")
        if isinstance(pol, AlisPolicy) and not isinstance(lay, AsTraced | Concatenated):
            raise ScenarioError("policy 'alis' redirects to reorganized areas inside each volume: it needs layout "
                                "kind 'as_traced' or 'concatenated', got " + type(lay).__name__)
        if isinstance(pol, GreedyAllocation):
            if not isinstance(lay, AsTraced | RoundRobinExtents):
                raise ScenarioError(f"policy {pol.name!r} builds its own extent map: leave out 'layout' or "
                                    "give {\"kind\": \"extents\", \"extent_sectors\": N} (the extent size), got "
                                    + type(lay).__name__)
            size = lay.extent_sectors if isinstance(lay, RoundRobinExtents) else None
            if pol.extent_sectors is None and size is None:
                raise ScenarioError(f"policy {pol.name!r} needs extent_sectors (in the policy or the layout)")
            if pol.extent_sectors is not None and size is not None and pol.extent_sectors != size:
                raise ScenarioError(f"policy {pol.name!r}: extent_sectors {pol.extent_sectors} differs from "
                                    f"the layout's {size}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioConfig:
        """From one scenario of a grid file (keys documented in sim/README.md); unknown keys are errors."""

        allowed = {"scenario_id", "spec", "disks", "layout", "scheduler", "service", "constant_ms", "exponential_ms",
                   "speedup", "closed_loop", "zero_latency", "spindles", "interval_ms", "per_request",
                   "max_outstanding", "seed", "devices", "device_sectors", "background", "policy", "io"}
        extra = sorted(set(data) - allowed)
        if extra:
            raise ScenarioError(f"scenario: unknown key(s) {extra}; allowed: {sorted(allowed)}")
        if "scenario_id" not in data or "spec" not in data:
            raise ScenarioError("scenario: 'scenario_id' and 'spec' are required")
        raw_spec = data["spec"]
        try:
            if isinstance(raw_spec, str):
                spec = resolve(raw_spec)
            elif isinstance(raw_spec, Mapping) and set(raw_spec) == {"geometry"}:
                spec = from_geometry(raw_spec["geometry"])
            elif isinstance(raw_spec, Mapping):
                spec = DiskSpec.from_dict(raw_spec, source=f"scenario {data['scenario_id']!r} spec")
            else:
                raise ScenarioError(f"scenario spec must be a name, a path, a spec table or "
                                    f"{{'geometry': ...}}, got {raw_spec!r}")
        except SpecError as exc:
            raise ScenarioError(str(exc)) from exc
        closed = data.get("closed_loop")
        sim_kw: dict[str, Any] = {k: data[k] for k in ("service", "constant_ms", "exponential_ms", "speedup",
                                                      "zero_latency", "spindles", "interval_ms", "per_request",
                                                      "max_outstanding") if k in data}
        if closed is not None:
            if not isinstance(closed, Mapping) or set(closed) - {"outstanding", "think_ms"}:
                raise ScenarioError(f"closed_loop must be {{outstanding, think_ms}}, got {closed!r}")
            sim_kw["closed_loop"] = ClosedLoop(**closed)
        bg = data.get("background")
        policy = policy_from_dict(data.get("policy"))
        try:
            io = io_shaping_from_dict(data.get("io"))
        except IoShapingError as exc:
            raise ScenarioError(str(exc)) from exc
        try:
            return cls(
                scenario_id=str(data["scenario_id"]), spec=spec, n_disks=data.get("disks"),
                layout=layout_from_dict(data.get("layout", {"kind": "as_traced"})),
                scheduler=str(data.get("scheduler", "fcfs")), sim=SimConfig(**sim_kw), seed=int(data.get("seed", 0)),
                devices=tuple(data["devices"]) if data.get("devices") is not None else None,
                device_sectors=tuple(data["device_sectors"]) if data.get("device_sectors") is not None else None,
                background=BackgroundTraffic(**bg) if bg is not None else None, policy=policy, io=io,
            )
        except TypeError as exc:
            raise ScenarioError(f"scenario {data['scenario_id']!r}: {exc}") from exc


def layout_from_dict(data: Mapping[str, Any]) -> Layout | RoundRobinExtents | AsTracedExtents:
    """{"kind": "as_traced" | "concatenated" | "striped" | "random" | "extents", ...} -> a layout
    (`{"kind": "extents", "extent_sectors": N}` alone: round robin per device, and `{"kind": "as_traced",
    "extent_sectors": N}`: the as-traced layout in extents, both built with the partition)."""
    kind = data.get("kind")
    rest = {k: v for k, v in data.items() if k != "kind"}
    try:
        if kind == "as_traced" and not rest:
            return AsTraced()
        if kind == "as_traced" and set(rest) == {"extent_sectors"}:
            return AsTracedExtents(rest["extent_sectors"])
        if kind == "concatenated" and not rest:
            return Concatenated()
        if kind == "random" and not rest:
            return RandomDisk()
        if kind == "striped":
            return Striped(**rest)
        if kind == "extents":
            remaps = tuple(RemapEvent(**r) for r in rest.pop("remaps", ()))
            if set(rest) == {"extents"}:
                return ExtentMap(tuple(Extent(*e) for e in rest["extents"]), remaps)
            if set(rest) == {"logical_sectors", "extent_sectors", "disks"}:
                return ExtentMap.round_robin(rest["logical_sectors"], rest["extent_sectors"], rest["disks"], remaps)
            if set(rest) == {"extent_sectors"} and not remaps:
                return RoundRobinExtents(rest["extent_sectors"])
            raise ScenarioError("extents layout needs 'extents': [[logical_start, sectors, disk, physical_start], ...] "
                                "or logical_sectors, extent_sectors and disks (round robin), plus optional 'remaps', "
                                "or extent_sectors alone (round robin per device over the array's disks)")
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"layout {dict(data)!r}: {exc}") from exc
    raise ScenarioError(f"layout kind must be as_traced, concatenated, striped, random or extents (with their "
                        f"parameters only), got {dict(data)!r}")


def _trace_id(table: pa.Table) -> str | None:
    if "trace_id" not in table.column_names or table.num_rows == 0:
        return None
    ids = pc.unique(table.column("trace_id")).to_pylist()
    return str(ids[0]) if len(ids) == 1 else None


def _build(table: pa.Table, cfg: ScenarioConfig) -> tuple[Simulation, tuple[str, ...]]:
    sim, devices, _ = _build_traced(table, cfg)
    return sim, devices


def _build_traced(table: pa.Table, cfg: ScenarioConfig
                  ) -> tuple[Simulation, tuple[str, ...], tuple[ShapedRequests, Requests] | None]:
    """_build, plus (the pieces of each traced request, the traced requests on the simulated clock) when the
    scenario reports per traced request (io report "requests")."""
    requests, devices = from_arrow(table, sector_size=cfg.spec.sector_size, devices=cfg.devices)
    return _build_from_requests(requests, devices, cfg)


def _build_from_requests(requests: Requests, devices: tuple[str, ...], cfg: ScenarioConfig
                         ) -> tuple[Simulation, tuple[str, ...], tuple[ShapedRequests, Requests] | None]:
    """_build_traced from requests already converted (sim.workloads.from_arrow, the scenario's sector size and
    device order); the requests' arrays are only read, so several scenarios can share them."""
    traced: tuple[ShapedRequests, Requests] | None = None
    sim_cfg = cfg.sim
    if cfg.io is not None:
        try:
            shaped = cfg.io.shape(requests, cfg.spec)
        except IoShapingError as exc:
            raise ScenarioError(f"io {cfg.io.kind!r}: {exc}") from exc
        if cfg.io.report == "requests":
            traced = (shaped, requests if sim_cfg.speedup == 1.0 else
                      replace(requests, arrival_us=requests.arrival_us / sim_cfg.speedup))
            sim_cfg = replace(sim_cfg, per_request=True)
        requests = shaped.pieces
    rng = np.random.default_rng(cfg.seed)
    device_sectors = cfg.device_sectors
    if sim_cfg.speedup != 1.0:
        # Speed the trace up here, so background traffic is generated at its rate on the simulated clock.
        requests = replace(requests, arrival_us=requests.arrival_us / sim_cfg.speedup)
        sim_cfg = replace(sim_cfg, speedup=1.0)
    if cfg.background is not None:
        t_end = float(requests.arrival_us[-1]) if len(requests) else 0.0
        requests = mix(requests, _background(cfg, devices, t_end, lambda d: requests.lbn[requests.device == d], rng))
    n_disks = cfg.n_disks if cfg.n_disks is not None else max(1, len(devices))
    if isinstance(cfg.policy, AlisPolicy) and len(requests):
        try:
            setup = prepare_alis(requests, _alis_params(cfg), sector_size=cfg.spec.sector_size,
                                 device_sectors=device_sectors,
                                 concatenated=isinstance(cfg.layout, Concatenated),
                                 capacity_sectors=cfg.spec.capacity_sectors)
        except ValueError as exc:
            raise ScenarioError(f"policy 'alis': {exc}") from exc
        red = setup.redirected
        return red.simulation(cfg.spec, sim_cfg, rng, n_disks=max(n_disks, red.n_disks),
                              scheduler=cfg.scheduler), devices, traced
    layout = _partition_layout(cfg, _Workload(lambda: iter([requests]), requests), devices, n_disks, device_sectors)
    array = DiskArray(n_disks, layout, cfg.scheduler)
    sim = Simulation(cfg.spec, array, requests, sim_cfg, rng, device_sectors=device_sectors)
    return sim, devices, traced


def _background(cfg: ScenarioConfig, devices: tuple[str, ...], t_end: float,
                lbns_of: Callable[[int], np.ndarray], rng: np.random.Generator) -> Requests:
    """The scenario's background traffic over [0, t_end) (simulated clock), drawn from rng: its device's addresses
    span device_sectors, else the highest start address the device's requests use (lbns_of(device)) plus a
    request."""
    bg = cfg.background
    assert bg is not None
    if bg.device is not None and bg.device not in devices:
        raise ScenarioError(f"background device {bg.device!r} is not among {list(devices)}")
    dev = devices.index(bg.device) if bg.device is not None else 0
    size = max(1, -(-bg.size_bytes // cfg.spec.sector_size))
    span = (int(cfg.device_sectors[dev]) if cfg.device_sectors is not None
            else int(lbns_of(dev).max(initial=0) + size))
    return poisson_background(rng, rate_per_s=bg.rate_per_s, start_us=0.0, end_us=t_end,
                              address_sectors=max(span, size), size_sectors=size, read_fraction=bg.read_fraction,
                              device=dev)


def _merged(chunks: Iterator[Requests], background: Requests) -> Iterator[Requests]:
    """The chunks with the background requests merged in, in sim.workloads.mix's order (at equal times the
    trace's requests first): a background request goes with the first chunk whose last arrival is after it."""
    j = 0
    for c in chunks:
        if len(c):
            k = int(np.searchsorted(background.arrival_us, c.arrival_us[-1], side="left"))
            yield mix(c, background.rows(j, k))
            j = k
    if j < len(background):
        yield background.rows(j, len(background))


@dataclass(frozen=True, eq=False)
class _Workload:
    """The partition's requests as _partition_layout reads them: passes over their chunks (on the simulated clock),
    the whole of them when held (else None), and their facts (counted on first use when held)."""

    chunks: Chunks
    whole: Requests | None = None
    given: StreamFacts | None = None

    @cached_property
    def facts(self) -> StreamFacts:
        return self.given if self.given is not None else StreamFacts.of(self.chunks())


def _partition_layout(cfg: ScenarioConfig, work: _Workload, devices: tuple[str, ...], n_disks: int,
                      device_sectors: tuple[int, ...] | None) -> Layout:
    """The scenario's layout, with per-device extents (round robin, or greedy by the partition's heats)
    built now that the devices' sizes are known. An empty partition gets the as-traced layout."""

    greedy = cfg.policy if isinstance(cfg.policy, GreedyAllocation) else None
    if not isinstance(cfg.layout, RoundRobinExtents | AsTracedExtents) and greedy is None:
        return cfg.layout
    if work.facts.count == 0:
        return AsTraced()
    size = greedy.extent_sectors if greedy is not None and greedy.extent_sectors is not None \
        else cfg.layout.extent_sectors  # type: ignore[union-attr]
    if work.whole is not None:
        dev_base, dev_sectors = Simulation._device_bases(work.whole, device_sectors)
    else:
        dev_base, dev_sectors = Simulation._device_bases(Requests.empty(), device_sectors, work.facts.device_ends)
    names = [*devices, *[str(k) for k in range(len(devices), len(dev_sectors))]]   # background-only devices
    cap = cfg.spec.capacity_sectors
    try:
        if isinstance(cfg.layout, AsTracedExtents):           # device k on disk k, at its own addresses
            if len(dev_sectors) > n_disks:
                raise ScenarioError(f"the as-traced layout puts device k on disk k: {len(dev_sectors)} devices "
                                    f"need as many disks, the array has {n_disks}")
            return _extent_map(*_device_extents(dev_sectors, size))
        if greedy is None:
            units = [AllocUnit(names[k], j, 0.0, min(size, int(total) - start))
                     for k, total in enumerate(dev_sectors) for j, start in enumerate(range(0, int(total), size))]
            return to_extent_map(units, round_robin_allocation(units, n_disks, capacity_sectors=cap))
        # Greedy over arrays (1.3 M extents at 100 M requests on 40 disks): each device's extents in order.
        sectors, file_id = _device_extents(dev_sectors, size)
        heat = _extent_heat(work, dev_base, sectors, greedy.heat_fraction, cfg.spec.sector_size)
        if greedy.incremental:
            return _incremental_map(work.facts, sectors, file_id, heat, dev_sectors, n_disks, cfg, greedy)
        disk, _ = greedy_disks(file_id, heat, sectors, n_disks, cap, file_names=names)
    except AllocationError as exc:
        raise ScenarioError(f"extents of {size} sectors do not fit {n_disks} disks of {cap} sectors: {exc}") from exc
    return _extent_map(sectors, disk)


def _device_extents(dev_sectors: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each device cut into extents of `size` sectors (its last one shorter), devices in order: every extent's
    sectors and device index."""
    counts = [-(-int(total) // size) for total in dev_sectors]
    sectors = np.concatenate([np.minimum(size, int(total) - np.arange(0, int(total), size, dtype=np.int64))
                              for total in dev_sectors]).astype(np.int64)
    return sectors, np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def _incremental_map(facts: StreamFacts, sectors: np.ndarray, device: np.ndarray, heat: np.ndarray, dev_sectors: Any,
                     n_disks: int, cfg: ScenarioConfig, policy: GreedyAllocation) -> ExtentTable:
    """The current layout (device k on disk k, each extent at its own offset) with incremental_moves applied."""
    if n_disks < len(dev_sectors):
        raise ScenarioError(f"policy {policy.name!r} starts from the current layout: it needs a disk per device "
                            f"({len(dev_sectors)}), got {n_disks}")
    used = [int(x) for x in dev_sectors] + [0] * (n_disks - len(dev_sectors))
    window_s = max((facts.last_us - facts.first_us) / 1e6, 1.0)
    lstart = np.concatenate([[0], np.cumsum(sectors)[:-1]]).astype(np.int64)
    first = np.concatenate([[0], np.cumsum(np.asarray(dev_sectors, dtype=np.int64))[:-1]])
    pstart = lstart - first[device]
    disk = device.copy()
    budget = int(policy.max_share * int(np.sum(np.asarray(dev_sectors, dtype=np.int64))))
    for m in incremental_moves(heat, sectors, device, used, capacity_sectors=cfg.spec.capacity_sectors,
                               window_s=window_s, sector_bytes=cfg.spec.sector_size, max_sectors=budget):
        disk[m.extent], pstart[m.extent] = m.to_disk, m.to_start
    return ExtentTable(lstart, sectors, disk, pstart)


def _extent_map(sectors: np.ndarray, disk: np.ndarray) -> ExtentTable:
    """Extents of these sizes tiling the logical space in order, each on its disk, back to back there in logical
    order (sim.allocation.to_extent_map's placement), held as arrays (1.3 M extents at 100 M requests on 40 disks)."""
    pstart = np.zeros(len(sectors), dtype=np.int64)
    for d in np.unique(disk):
        on = np.flatnonzero(disk == d)
        pstart[on] = np.cumsum(sectors[on]) - sectors[on]
    return ExtentTable.tiling(sectors, disk, pstart)


def _extent_heat(work: _Workload, dev_base: np.ndarray, sectors: np.ndarray, fraction: float,
                 sector_size: int) -> np.ndarray:
    """extent_heat's heat per unit (512-byte blocks per second; units of these sizes tiling the devices in
    order) from the requests arriving in the first `fraction` of the span; the window is that part's length
    (1 s when it has none)."""
    lstart = np.concatenate([[0], np.cumsum(sectors)[:-1]]).astype(np.int64)
    index = extent_index(lstart, np.diff(lstart, append=lstart[-1] + 1))     # add_unit_blocks's own
    f = work.facts
    t_end = f.first_us + fraction * (f.last_us - f.first_us)
    counted = np.zeros(len(sectors))
    for c in work.chunks():
        end = int(np.searchsorted(c.arrival_us, t_end, side="right"))
        add_unit_blocks(counted, lstart, dev_base, c.device, c.lbn, c.sectors, 0, end, index=index)
        if end < len(c):
            break
    window_s = (t_end - f.first_us) / 1e6 if t_end > f.first_us else 1.0
    return counted * (sector_size / 512.0) / window_s


@dataclass(frozen=True, eq=False)
class ScenarioOutput:
    """One scenario's output: the result row (SIM_RESULT_SCHEMA), the time series (scenario key, then
    sim.stats.timeseries's columns; no rows without interval_ms) and the cooling policy's moves (scenario key,
    then sim.cooling.moves_table's columns; no rows without the policy)."""

    result: pa.Table
    series: pa.Table
    moves: pa.Table


def simulate_scenario(table: pa.Table, cfg: ScenarioConfig) -> ScenarioOutput:
    """Simulate one scenario over one partition of `requests` rows, its policy included."""
    requests, devices = from_arrow(table, sector_size=cfg.spec.sector_size, devices=cfg.devices)
    return simulate_requests(requests, devices, _trace_id(table), cfg)


def simulate_requests(requests: Requests, devices: tuple[str, ...], trace_id: str | None,
                      cfg: ScenarioConfig) -> ScenarioOutput:
    """simulate_scenario on requests already converted with the scenario's sector size and device order
    (sim.workloads.from_arrow / from_arrow_tables): a task simulating several scenarios of one array group
    converts its requests once. The requests are not modified."""
    sim, devices, traced = _build_from_requests(requests, devices, cfg)
    per_traced = None if traced is None else (
        lambda saturated: _per_traced_request(sim, *traced, saturated=saturated))
    return _run(sim, devices, trace_id, cfg, per_traced)


def streams(cfg: ScenarioConfig) -> bool:
    """Whether simulate_chunks replays the scenario a chunk at a time: without per-request output or an event log,
    with cooling (if any) every_s, and ALIS (if any) not in a closed loop with background traffic (the rest need the
    window whole). Background traffic is drawn whole: its size follows its rate and the window."""
    pol, sim = cfg.policy, cfg.sim
    return (not sim.per_request and not sim.event_log
            and not (isinstance(pol, AlisPolicy) and sim.closed_loop is not None and cfg.background is not None)
            and not (isinstance(pol, CoolingPolicy) and pol.config.every_requests is not None))


def simulate_chunks(chunks: Chunks, facts: StreamFacts, devices: tuple[str, ...], trace_id: str | None,
                    cfg: ScenarioConfig) -> ScenarioOutput:
    """simulate_requests over requests read a chunk at a time (each call of `chunks` a pass in arrival order;
    facts: theirs): a scenario that streams() holds one chunk and the requests in flight (a greedy allocation
    reads a pass for its heats first; io shaping shapes the chunks in segments no merged run spans,
    sim.tracks.shape_segments, after a pass that counts the pieces; background traffic is drawn whole, after a pass
    for its device's span, and merged into the chunks), the others gather the chunks first. The results
    are simulate_requests's on the chunks put together (mean responses to the last bits: sim.stats.ResponseTally)."""
    if not streams(cfg) or facts.count == 0:
        return simulate_requests(_gathered(chunks, facts), devices, trace_id, cfg)
    speedup = cfg.sim.speedup

    def scaled(r: Requests) -> Requests:
        return r if speedup == 1.0 else replace(r, arrival_us=r.arrival_us / speedup)

    traced = _TracedResponses() if cfg.io is not None and cfg.io.report == "requests" else None

    def replayed(feed: bool) -> Iterator[Requests]:
        if cfg.io is None:
            yield from (scaled(c) for c in chunks())
            return
        try:
            for segment, shaped in shape_segments(chunks(), cfg.spec, cfg.io):
                pieces = scaled(shaped.pieces)
                if feed and traced is not None:
                    traced.segment(shaped, scaled(segment).arrival_us, segment.flags, pieces.arrival_us)
                yield pieces
        except IoShapingError as exc:
            raise ScenarioError(f"io {cfg.io.kind!r}: {exc}") from exc

    if cfg.io is not None:
        facts = StreamFacts.of(replayed(False))
    elif speedup != 1.0:
        facts = facts.scaled(speedup)
    rng = np.random.default_rng(cfg.seed)
    source = replayed
    if cfg.background is not None:           # drawn first from the run's generator, as a gathered run draws it
        def lbns_of(d: int) -> np.ndarray:
            return np.array([c.lbn[c.device == d].max(initial=0) for c in replayed(False)], np.int64)

        background = _background(cfg, devices, facts.last_us, lbns_of, rng)

        def source(feed: bool) -> Iterator[Requests]:
            return _merged(replayed(feed), background)

        facts = facts.joined(StreamFacts.of([background]))
    n_disks = cfg.n_disks if cfg.n_disks is not None else max(1, len(devices))
    if isinstance(cfg.policy, AlisPolicy):
        return _run(_alis_chunks(source, facts, cfg, n_disks, rng), devices, trace_id, cfg, None)
    layout = _partition_layout(cfg, _Workload(lambda: source(False), None, facts), devices, n_disks,
                               cfg.device_sectors)
    rest = source(True)
    first = next(rest, Requests.empty())
    sim = Simulation(cfg.spec, DiskArray(n_disks, layout, cfg.scheduler), first, replace(cfg.sim, speedup=1.0),
                     rng, device_sectors=cfg.device_sectors, more=rest, facts=facts,
                     observe=None if traced is None else traced.observe)
    return _run(sim, devices, trace_id, cfg, None if traced is None else traced.row)


def _alis_chunks(source: Callable[[bool], Iterator[Requests]], facts: StreamFacts, cfg: ScenarioConfig, n_disks: int,
                 rng: np.random.Generator) -> Simulation:
    """A streamed ALIS run: planned in two passes over the chunks (sim.alis.policy.prepare_chunks), each chunk
    redirected as the run loads it, with a layout mapping its own pieces (Simulation's chunk_layout)."""
    try:
        setup = prepare_alis_chunks(lambda: source(False), facts, _alis_params(cfg), sector_size=cfg.spec.sector_size,
                                    device_sectors=cfg.device_sectors,
                                    concatenated=isinstance(cfg.layout, Concatenated),
                                    capacity_sectors=cfg.spec.capacity_sectors)
    except ValueError as exc:
        raise ScenarioError(f"policy 'alis': {exc}") from exc
    current: list[Layout] = []

    def redirected() -> Iterator[Requests]:
        for c in source(True):
            part = setup.stream.chunk(c)
            current[:] = [part.layout]
            yield part.requests

    rest = redirected()
    first = next(rest, Requests.empty())
    run_facts = replace(facts, device_ends=np.asarray(setup.device_sectors, np.int64))
    return Simulation(cfg.spec, DiskArray(max(n_disks, setup.stream.n_disks), current[0], cfg.scheduler), first,
                      replace(cfg.sim, speedup=1.0), rng, device_sectors=setup.device_sectors, more=rest,
                      facts=run_facts, chunk_layout=lambda: current[0])


def _alis_params(cfg: ScenarioConfig) -> AlisParams:
    """The scenario's ALIS parameters on the simulated clock (the interval divided by the speed-up)."""
    assert isinstance(cfg.policy, AlisPolicy)
    params = cfg.policy.params
    return params if cfg.sim.speedup == 1.0 else replace(params, interval_s=params.interval_s / cfg.sim.speedup)


def _gathered(chunks: Chunks, facts: StreamFacts) -> Requests:
    """The chunks put together, in arrays of facts.count requests filled chunk by chunk."""
    if facts.count == 0:
        return Requests.empty()
    cols = {"arrival_us": np.empty(facts.count), "device": np.empty(facts.count, np.int32),
            "lbn": np.empty(facts.count, np.int64), "sectors": np.empty(facts.count, np.int32),
            "flags": np.empty(facts.count, np.int8)}
    at = 0
    for c in chunks():
        for name, values in cols.items():
            values[at:at + len(c)] = getattr(c, name)
        at += len(c)
    if at != facts.count:
        raise ValueError(f"the chunks hold {at} requests, their facts {facts.count}")
    return Requests(**cols)


class _TracedResponses:
    """A streamed io run's responses per traced request (report "requests"): the pieces' responses as the run
    drops them, gathered per segment; once all of a segment's pieces have come (or the run ends), its requests'
    responses (sim.tracks.original_responses) go to a float64 ResponseTally."""

    def __init__(self) -> None:
        self.tally = ResponseTally(np.float64)
        self.segments: deque[tuple[ShapedRequests, np.ndarray, np.ndarray, np.ndarray]] = deque()
        self.pieces: list[np.ndarray] = []
        self.held = 0

    def segment(self, shaped: ShapedRequests, arrival_us: np.ndarray, flags: np.ndarray,
                piece_arrival_us: np.ndarray) -> None:
        """The next segment: its pieces, its requests' arrivals and flags, its pieces' arrivals (simulated clock)."""
        self.segments.append((shaped, arrival_us, flags, piece_arrival_us))

    def observe(self, resp: np.ndarray, flags: np.ndarray) -> None:
        """The next requests' responses (Simulation's observe): the traced pieces', background requests skipped."""
        mine = np.array(resp[(flags & FLAG_BACKGROUND) == 0], np.float32)
        self.pieces.append(mine)
        self.held += len(mine)
        self._drain(final=False)

    def _drain(self, final: bool) -> None:
        while self.segments and (final or self.held >= len(self.segments[0][3])):
            shaped, arrival_us, flags, piece_arrival_us = self.segments.popleft()
            n = len(piece_arrival_us)
            got = np.concatenate(self.pieces) if self.pieces else np.zeros(0, np.float32)
            use = got[:n] if len(got) >= n else np.concatenate([got, np.full(n - len(got), np.nan, np.float32)])
            self.pieces = [got[n:]] if len(got) > n else []
            self.held = max(len(got) - n, 0)
            self.tally.add(original_responses(shaped, arrival_us, piece_arrival_us, use), flags)

    def row(self, saturated: bool) -> dict[str, Any]:
        """The result row's request counts and response figures per traced request (_per_traced_request's)."""
        self._drain(final=True)
        reads, writes = self.tally.count((0,)), self.tally.count((1,))
        row: dict[str, Any] = {"requests": reads + writes, "reads": reads, "writes": writes}
        for label, classes in (("", (0, 1)), ("_read", (0,)), ("_write", (1,))):
            vals = self.tally.order_stats(classes) if not saturated else (math.inf,) * 5
            for name, v in zip(("mean", "p50", "p95", "p99", "max"), vals, strict=True):
                row[f"{name}_response_ms{label}"] = None if math.isnan(v) else v / 1000.0
        return row


def _run(sim: Simulation, devices: tuple[str, ...], trace_id: str | None, cfg: ScenarioConfig,
         per_traced: Callable[[bool], dict[str, Any]] | None) -> ScenarioOutput:
    """The built run to its end, its policy acting; its ScenarioOutput (per_traced: the row's figures per traced
    request, given whether the run saturated)."""
    moves = moves_table(())
    if isinstance(cfg.policy, CoolingPolicy) and isinstance(sim.array.layout, ExtentMap | ExtentTable):
        n_units = len(sim.layout.ext_lstart)
        cooling = DiskCooling(cfg.policy.config,
                              unit_file=np.arange(n_units, dtype=np.int64) if cfg.policy.files == "extent" else None)
        run_with_policy(sim, cooling)
        moves = cooling.moves_table()
    else:
        sim.run()
    row = {"scenario_id": cfg.scenario_id, "trace_id": trace_id, "devices": list(devices), **sim.result().as_row()}
    if per_traced is not None:
        row.update(per_traced(bool(row["saturated"])))
    result = pa.Table.from_pylist([row], schema=SIM_RESULT_SCHEMA)
    return ScenarioOutput(result, _keyed(timeseries(sim), cfg.scenario_id, trace_id),
                          _keyed(moves, cfg.scenario_id, trace_id))


def _per_traced_request(sim: Simulation, shaped: ShapedRequests, originals: Requests, *,
                        saturated: bool) -> dict[str, Any]:
    """The result row's request counts and response figures per traced request (io report "requests"):
    sim.tracks.original_responses over the foreground pieces; queue, service and I/O figures stay per piece."""
    pieces = sim.requests                            # on the simulated clock, like the originals passed
    fg = ~pieces.is_background
    resp = original_responses(shaped, originals.arrival_us, pieces.arrival_us[fg], sim.out.resp[fg])
    done = ~np.isnan(resp)
    is_read = originals.is_read
    row: dict[str, Any] = {"requests": int(done.sum()), "reads": int((done & is_read).sum()),
                           "writes": int((done & ~is_read).sum())}
    for label, mask in (("", done), ("_read", done & is_read), ("_write", done & ~is_read)):
        vals = order_stats(resp[mask]) if not saturated else (math.inf,) * 5
        for name, v in zip(("mean", "p50", "p95", "p99", "max"), vals, strict=True):
            row[f"{name}_response_ms{label}"] = None if math.isnan(v) else v / 1000.0
    return row


def _keyed(table: pa.Table, scenario_id: str, trace_id: str | None) -> pa.Table:
    """`table`'s rows behind the scenario key (scenario_id, trace_id)."""
    n = table.num_rows
    return pa.Table.from_arrays(
        [pa.array([scenario_id] * n, pa.string()), pa.array([trace_id] * n, pa.string()), *table.columns],
        schema=pa.schema([*_KEY_FIELDS, *table.schema]))


def simulate_partition_with_timeseries(table: pa.Table, cfg: ScenarioConfig) -> tuple[pa.Table, pa.Table]:
    """(one result row, SIM_RESULT_SCHEMA; the time series, ScenarioOutput.series: no rows without
    cfg.sim.interval_ms)."""
    out = simulate_scenario(table, cfg)
    return out.result, out.series


def simulate_partition(table: pa.Table, cfg: ScenarioConfig) -> pa.Table:
    """Simulate one scenario over one partition of `requests` rows; one row per scenario (SIM_RESULT_SCHEMA)."""
    return simulate_partition_with_timeseries(table, replace(cfg, sim=replace(cfg.sim, interval_ms=None)))[0]


def partition_layout(table: pa.Table, cfg: ScenarioConfig) -> Layout:
    """The layout the scenario runs with on this partition, extent maps built from the partition's devices and
    heats (round robin, greedy allocation) exactly as simulate_scenario builds them; for planning a move to it."""
    sim, _ = _build(table, cfg)
    return sim.array.layout

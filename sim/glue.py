"""Glue for the Spark stage: one scenario over one partition of the `requests` table, pyarrow in and out.

    cfg = ScenarioConfig.from_dict({"scenario_id": "s1", "spec": "hp_c2247a", "disks": 4,
                                    "layout": {"kind": "striped", "unit_sectors": 128}})
    row = simulate_partition(requests_table, cfg)          # one row, SIM_RESULT_SCHEMA
    row, series = simulate_partition_with_timeseries(requests_table, cfg)

No pyspark here: jobs/ wraps these in applyInArrow.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim.array import (
    AsTraced,
    Concatenated,
    DiskArray,
    Extent,
    ExtentMap,
    Layout,
    RandomDisk,
    RemapEvent,
    Striped,
)
from sim.engine import ClosedLoop, SimConfig, Simulation
from sim.spec import DiskSpec, SpecError
from sim.stats import RESULT_SCHEMA, TIMESERIES_SCHEMA, timeseries
from sim.workloads import from_arrow, mix, poisson_background

__all__ = [
    "SIM_RESULT_SCHEMA",
    "SIM_TIMESERIES_SCHEMA",
    "BackgroundTraffic",
    "ScenarioConfig",
    "ScenarioError",
    "layout_from_dict",
    "simulate_partition",
    "simulate_partition_with_timeseries",
]

_KEY_FIELDS = [pa.field("scenario_id", pa.string(), False), pa.field("trace_id", pa.string(), True)]
#: simulate_partition output: scenario key, the partition's trace and devices, then RunResult's columns.
SIM_RESULT_SCHEMA = pa.schema([*_KEY_FIELDS, pa.field("devices", pa.list_(pa.string()), False),
                               *RESULT_SCHEMA])
#: The time series: scenario key, then one row per interval (sim.stats.TIMESERIES_SCHEMA).
SIM_TIMESERIES_SCHEMA = pa.schema([*_KEY_FIELDS, *TIMESERIES_SCHEMA])


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
class ScenarioConfig:
    """Everything one simulated scenario needs besides the trace partition."""

    scenario_id: str
    spec: DiskSpec
    n_disks: int | None = None            # None: one disk per traced device
    layout: Layout = field(default_factory=AsTraced)
    scheduler: str = "fcfs"
    sim: SimConfig = field(default_factory=SimConfig)
    seed: int = 0
    devices: tuple[str, ...] | None = None          # device order (default: sorted names)
    device_sectors: tuple[int, ...] | None = None   # logical size per device (default: highest address used)
    background: BackgroundTraffic | None = None

    def __post_init__(self) -> None:
        if not self.scenario_id:
            raise ScenarioError("scenario_id must be a non-empty string")
        if self.n_disks is not None and self.n_disks <= 0:
            raise ScenarioError(f"disks must be > 0, got {self.n_disks}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioConfig:
        """From one scenario of a grid file (keys documented in sim/README.md); unknown keys are errors."""
        from sim.specs import from_geometry, resolve

        allowed = {"scenario_id", "spec", "disks", "layout", "scheduler", "service", "constant_ms", "exponential_ms",
                   "speedup", "closed_loop", "zero_latency", "interval_ms", "per_request", "max_outstanding",
                   "seed", "devices", "device_sectors", "background"}
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
                                                      "zero_latency", "interval_ms", "per_request",
                                                      "max_outstanding") if k in data}
        if closed is not None:
            if not isinstance(closed, Mapping) or set(closed) - {"outstanding", "think_ms"}:
                raise ScenarioError(f"closed_loop must be {{outstanding, think_ms}}, got {closed!r}")
            sim_kw["closed_loop"] = ClosedLoop(**closed)
        bg = data.get("background")
        try:
            return cls(
                scenario_id=str(data["scenario_id"]), spec=spec, n_disks=data.get("disks"),
                layout=layout_from_dict(data.get("layout", {"kind": "as_traced"})),
                scheduler=str(data.get("scheduler", "fcfs")), sim=SimConfig(**sim_kw), seed=int(data.get("seed", 0)),
                devices=tuple(data["devices"]) if data.get("devices") is not None else None,
                device_sectors=tuple(data["device_sectors"]) if data.get("device_sectors") is not None else None,
                background=BackgroundTraffic(**bg) if bg is not None else None,
            )
        except TypeError as exc:
            raise ScenarioError(f"scenario {data['scenario_id']!r}: {exc}") from exc


def layout_from_dict(data: Mapping[str, Any]) -> Layout:
    """{"kind": "as_traced" | "concatenated" | "striped" | "random" | "extents", ...} -> a layout."""
    kind = data.get("kind")
    rest = {k: v for k, v in data.items() if k != "kind"}
    try:
        if kind == "as_traced" and not rest:
            return AsTraced()
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
            raise ScenarioError("extents layout needs 'extents': [[logical_start, sectors, disk, physical_start], ...] "
                                "or logical_sectors, extent_sectors and disks (round robin), plus optional 'remaps'")
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
    requests, devices = from_arrow(table, sector_size=cfg.spec.sector_size, devices=cfg.devices)
    rng = np.random.default_rng(cfg.seed)
    device_sectors = cfg.device_sectors
    sim_cfg = cfg.sim
    if sim_cfg.speedup != 1.0:
        # Speed the trace up here, so background traffic is generated at its rate on the simulated clock.
        requests = replace(requests, arrival_us=requests.arrival_us / sim_cfg.speedup)
        sim_cfg = replace(sim_cfg, speedup=1.0)
    if cfg.background is not None:
        bg = cfg.background
        dev = devices.index(bg.device) if bg.device is not None else 0
        if bg.device is not None and bg.device not in devices:
            raise ScenarioError(f"background device {bg.device!r} is not among {list(devices)}")
        size = max(1, -(-bg.size_bytes // cfg.spec.sector_size))
        span = (int(device_sectors[dev]) if device_sectors is not None
                else int(requests.lbn[requests.device == dev].max(initial=0) + size))
        t_end = float(requests.arrival_us[-1]) if len(requests) else 0.0
        requests = mix(requests, poisson_background(rng, rate_per_s=bg.rate_per_s, start_us=0.0, end_us=t_end,
                                                    address_sectors=max(span, size), size_sectors=size,
                                                    read_fraction=bg.read_fraction, device=dev))
    n_disks = cfg.n_disks if cfg.n_disks is not None else max(1, len(devices))
    array = DiskArray(n_disks, cfg.layout, cfg.scheduler)
    sim = Simulation(cfg.spec, array, requests, sim_cfg, rng, device_sectors=device_sectors)
    return sim, devices


def simulate_partition_with_timeseries(table: pa.Table, cfg: ScenarioConfig) -> tuple[pa.Table, pa.Table]:
    """(one result row, SIM_RESULT_SCHEMA; the time series, SIM_TIMESERIES_SCHEMA: empty without
    cfg.sim.interval_ms)."""
    sim, devices = _build(table, cfg)
    sim.run()
    trace_id = _trace_id(table)
    row = {"scenario_id": cfg.scenario_id, "trace_id": trace_id, "devices": list(devices), **sim.result().as_row()}
    result = pa.Table.from_pylist([row], schema=SIM_RESULT_SCHEMA)
    series = timeseries(sim)
    n = series.num_rows
    series = pa.Table.from_arrays(
        [pa.array([cfg.scenario_id] * n, pa.string()), pa.array([trace_id] * n, pa.string()), *series.columns],
        schema=SIM_TIMESERIES_SCHEMA)
    return result, series


def simulate_partition(table: pa.Table, cfg: ScenarioConfig) -> pa.Table:
    """Simulate one scenario over one partition of `requests` rows; one row per scenario (SIM_RESULT_SCHEMA)."""
    return simulate_partition_with_timeseries(table, replace(cfg, sim=replace(cfg.sim, interval_ms=None)))[0]

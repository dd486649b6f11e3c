"""The types every policy family and every plan shares: the array a policy reorganizes (Target), the
window's figures (WindowStats), a scored variant (Variant), a simulated outcome (Outcome) and a planner's
answer (PlanPart) with its steps (Step) and the limits a plan carries (SafetyLimits). libs.plans.policies registers
the families on them; libs.plans.steps builds the steps, libs.plans.document the plan.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from blockheat.sim import DiskSpec, ExtentMap

__all__ = ["BASELINE", "Outcome", "PlanError", "PlanPart", "PlanRefusedError", "PolicyError", "SafetyLimits", "Step",
           "Target", "Variant", "WindowStats"]

BASELINE = "as-traced"


class PolicyError(ValueError):
    """A policy, family or parameter that does not exist or does not fit the target."""


class PlanError(ValueError):
    """A plan that cannot be built or read; the message names the policy, step or file."""


class PlanRefusedError(RuntimeError):
    """`plan check` found reasons not to apply a plan (stale, edited, over its limits); the message lists them."""


@dataclass(frozen=True)
class Step:
    """One step: copy `bytes` from (source_device, source_offset_bytes) to (dest_device, dest_offset_bytes)
    after the steps in depends_on (indices into the plan's steps)."""

    step_type: str
    group_id: str
    source_device: str
    source_offset_bytes: int
    dest_device: str
    dest_offset_bytes: int
    bytes: int
    depends_on: tuple[int, ...] = ()
    extent: int | None = None
    unit_bytes: int | None = None
    width: int | None = None
    time_us: float | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        from blockheat.schemas.reorg_plan_steps import STEP_TYPES  # lazy: the command's start loads no pyarrow

        if self.step_type not in STEP_TYPES:
            raise PlanError(f"step type {self.step_type!r}: use one of {list(STEP_TYPES)}")
        if self.bytes <= 0 or self.source_offset_bytes < 0 or self.dest_offset_bytes < 0:
            raise PlanError(f"step {self.step_type} of {self.source_device}@{self.source_offset_bytes}: bytes must "
                            f"be > 0 and offsets >= 0, got {self.bytes}, {self.dest_offset_bytes}")


@dataclass(frozen=True)
class SafetyLimits:
    """What whoever applies the plan must respect; a plan moving more than max_bytes fails `plan check`."""

    max_bytes: int = 64 << 30
    max_concurrent_moves_per_disk: int = 1
    throttle_mb_per_s: float = 50.0

    def __post_init__(self) -> None:
        if self.max_bytes < 0 or self.max_concurrent_moves_per_disk < 1 or not self.throttle_mb_per_s > 0:
            raise PlanError(f"safety limits need max_bytes >= 0, max_concurrent_moves_per_disk >= 1 and "
                            f"throttle_mb_per_s > 0, got {self.max_bytes}, {self.max_concurrent_moves_per_disk}, "
                            f"{self.throttle_mb_per_s}")


@dataclass(frozen=True)
class Target:
    """The array a policy reorganizes: the trace's devices, disk k = devices[k], each of device_sectors[k]
    logical sectors of the spec; how every scenario replays (spec, queue discipline, speed-up, seed).
    spec_param is the scenario's "spec" value that builds `spec` (a name, a path or {"geometry": ...})."""

    trace_id: str
    devices: tuple[str, ...]
    device_sectors: tuple[int, ...]
    spec: DiskSpec
    spec_param: Any
    scheduler: str = "clook"
    speedup: float = 1.0
    seed: int = 1

    def __post_init__(self) -> None:
        if not self.devices or len(self.devices) != len(self.device_sectors):
            raise PolicyError(f"target of trace {self.trace_id!r}: {len(self.devices)} devices and "
                              f"{len(self.device_sectors)} sizes")
        if min(self.device_sectors) <= 0:
            raise PolicyError(f"target of trace {self.trace_id!r}: device sizes must be > 0, got "
                              f"{list(self.device_sectors)}")
        over = [d for d, s in zip(self.devices, self.device_sectors, strict=True) if s > self.spec.capacity_sectors]
        if over:
            raise PolicyError(f"target of trace {self.trace_id!r}: device(s) {over} address more than the disk "
                              f"capacity of {self.spec.name} ({self.spec.capacity_sectors} sectors)")

    @property
    def n_disks(self) -> int:
        return len(self.devices)

    @property
    def sector_bytes(self) -> int:
        return int(self.spec.sector_size)

    @property
    def capacity_sectors(self) -> int:
        return int(self.spec.capacity_sectors)

    def base_scenario(self) -> dict[str, Any]:
        """The scenario keys every variant shares (sim.scenarios ScenarioConfig keys)."""
        return {"spec": self.spec_param, "scheduler": self.scheduler, "speedup": self.speedup, "seed": self.seed,
                "devices": list(self.devices), "device_sectors": list(self.device_sectors)}

    def extent_sectors(self, extent_bytes: int) -> int:
        if extent_bytes <= 0 or extent_bytes % self.sector_bytes:
            raise PolicyError(f"extent_bytes {extent_bytes} must be a positive multiple of the spec's sector "
                              f"({self.sector_bytes} bytes)")
        return extent_bytes // self.sector_bytes


@dataclass(frozen=True)
class WindowStats:
    """What parameter grids may use from the replayed window: its length (s), requests, mean request
    size (bytes) overall and per device (devices without requests are absent)."""

    span_s: float
    requests: int
    mean_request_bytes: float
    device_mean_request_bytes: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Variant:
    """One scored policy: id ("family" or "family:label"), parameters (JSON values) and the scenario keys
    it adds to Target.base_scenario() (layout, policy). plannable False: note says why."""

    policy_id: str
    family: str
    params: Mapping[str, Any]
    scenario: Mapping[str, Any]
    plannable: bool = True
    note: str | None = None

    @property
    def params_json(self) -> str:
        return json.dumps(dict(self.params), sort_keys=True)


@dataclass(frozen=True)
class Outcome:
    """What a family's planner gets: the variant, the target, and what the family `needs` from the run:
    "layout" the extent map the scenario ran with (built on an executor), "moves" the policy's moves in
    execution order (cooling_moves rows as dicts), "requests" the window's requests (Arrow: device, seq,
    ts_us, op, offset_bytes, size_bytes)."""

    variant: Variant
    target: Target
    layout: ExtentMap | None = None
    moves: Sequence[Mapping[str, Any]] | None = None
    requests: pa.Table | None = None


@dataclass(frozen=True)
class PlanPart:
    """A planner's answer: the steps (libs.plans.types.Step, in execution order) and the family's detail
    section of the plan (e.g. the striping unit and width per device); lookaside: ALIS's areas per device
    (the plan's `lookaside` section, its entries built from the copy steps), None for other families."""

    steps: list[Any]
    detail: dict[str, Any]
    lookaside: list[dict[str, Any]] | None = None

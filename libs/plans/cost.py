"""What a plan costs against what it gains, and the budgets that decide whether it is worth running. Pure logic.

- Move time on the modeled disks: each data-moving step is read on its source disk and written on its destination,
  each a positioning (the spec's mean seek + half a rotation) and the transfer at the media rate of the zone holding
  the offset (the bus's when slower). Steps on different disks overlap, one at a time per disk, so the plan takes
  its busiest disk's time, and no less than its bytes at the copy throttle.
- Idle time: on each device, the gaps of at least IDLE_MIN_S between a request's completion (arrival + its recorded
  response, or the arrival when none is recorded) and the next arrival, and the window's edges. A copy there meets
  no foreground I/O. The moves are to run in the next window's gaps, taken to be like this window's.
- Benefit: the response time saved over a window like this one (its requests x the drop of the simulated mean),
  beside the improvement of the mean and p95 and the hottest disk's utilization before and after, and the disk
  model's validation demerit (how far the model is from the traced drive).
- Net value = benefit - the disks' time the moves take (seconds per window); `plan --policy best` picks the largest.
- Budgets (MoveBudget; defaults an operator would accept): at most max_volume_share of each volume's bytes moved
  off it and the safety limit's bytes in all (SafetyLimits.max_bytes, 64 GiB), the moves within max_idle_share of
  each disk's idle time, and at least min_gain_per_gib improvement of the mean response per GiB moved. A plan over
  any of them is `not_worth_it`, its reason naming each breach with its numbers; nothing is cut (the cost section
  keeps the proposal's figures).
"""
from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from blockheat.libs.plans.types import Target
from blockheat.schemas import reorg_plan_steps as STEPS

__all__ = ["IDLE_MIN_S", "MOVE_MODEL", "MoveBudget", "breaches", "cost_benefit", "move_seconds"]

GIB = 1 << 30
IDLE_MIN_S = 1.0
MOVE_MODEL = ("per step: the spec's mean seek + half a rotation, then the transfer at the media rate of the zone "
              "holding the offset (the bus's when slower), read on the source disk and written on the destination; "
              "steps on different disks overlap, one at a time per disk; no faster than the copy throttle")
IDLE_MODEL = (f"gaps of at least {IDLE_MIN_S:g} s between a request's completion (arrival + recorded response) and "
              "the next arrival on the device, and the window's edges; the next window taken to be like this one")


@dataclass(frozen=True)
class MoveBudget:
    """What a plan may move and must gain: share of each volume, share of each disk's idle time, and the least
    improvement of the mean response per GiB moved."""

    max_volume_share: float = 0.10
    max_idle_share: float = 0.5
    min_gain_per_gib: float = 0.02

    def __post_init__(self) -> None:
        if not (0 < self.max_volume_share <= 1 and 0 < self.max_idle_share <= 1 and self.min_gain_per_gib >= 0):
            raise ValueError(f"budget needs shares in (0, 1] and min_gain_per_gib >= 0, got {self}")


def _zone_rates(target: Target) -> tuple[list[int], list[float]]:
    """Each zone's first sector and its media rate (bytes per second)."""
    spec = target.spec
    starts, rates, first = [], [], 0
    for z in spec.zones:
        starts.append(first)
        rates.append(z.logical_per_track * spec.sector_size * spec.rpm / 60.0)
        first += z.mapped_sectors(spec.surfaces)
    return starts, rates


def _transfer_s(target: Target, offset_bytes: int, n_bytes: int, zones: tuple[list[int], list[float]]) -> float:
    spec = target.spec
    starts, rates = zones
    zone = max(0, bisect.bisect_right(starts, offset_bytes // spec.sector_size) - 1)
    media = n_bytes / rates[zone]
    bus = spec.bus_ms_per_sector * (n_bytes / spec.sector_size) / 1000.0
    return (spec.mean_seek_ms() + spec.rotation_ms / 2.0) / 1000.0 + max(media, bus)


def move_seconds(target: Target, steps: Sequence[Any]) -> dict[str, float]:
    """Per device (disk), the seconds its reads and writes for the steps take (MOVE_MODEL); no data steps count."""
    zones = _zone_rates(target)
    busy = dict.fromkeys(target.devices, 0.0)
    for s in steps:
        get = s.get if isinstance(s, Mapping) else lambda k, s=s: getattr(s, k)
        if get("step_type") in STEPS.NO_DATA_STEP_TYPES:
            continue
        busy[get("source_device")] += _transfer_s(target, int(get("source_offset_bytes")), int(get("bytes")), zones)
        busy[get("dest_device")] += _transfer_s(target, int(get("dest_offset_bytes")), int(get("bytes")), zones)
    return busy


def cost_benefit(target: Target, steps: Sequence[Any], *, idle: Mapping[str, Any] | None, window: Mapping[str, Any],
                 score: Mapping[str, Any], baseline: Mapping[str, Any], validation_demerit_ms: float | None,
                 throttle_mb_per_s: float, budget: MoveBudget) -> dict[str, Any]:
    """The plan document's cost_benefit section for these steps (the proposal, before any budget decision). idle:
    {"per_device": [{"device", "idle_s", "periods", "longest"}], ...} from the window (None: not measured)."""
    moving = [s for s in steps if (s["step_type"] if isinstance(s, Mapping) else s.step_type)
              not in STEPS.NO_DATA_STEP_TYPES]
    size = {d: n * target.sector_bytes for d, n in zip(target.devices, target.device_sectors, strict=True)}
    read = dict.fromkeys(target.devices, 0)
    written = dict.fromkeys(target.devices, 0)
    own = dict.fromkeys(target.devices, 0)          # the volume's own data moved (not re-reads of staged copies)
    for s in moving:
        get = s.get if isinstance(s, Mapping) else lambda k, s=s: getattr(s, k)
        read[get("source_device")] += int(get("bytes"))
        written[get("dest_device")] += int(get("bytes"))
        if int(get("source_offset_bytes")) < size[get("source_device")]:
            own[get("source_device")] += int(get("bytes"))
    busy = move_seconds(target, moving)
    total = sum(read.values())           # every byte copied (a staged extent twice), as summary.bytes_to_move
    duration = max([*busy.values(), total / (throttle_mb_per_s * 1e6)]) if moving else 0.0
    idle_by_device = {d["device"]: d for d in (idle or {}).get("per_device", [])}
    per_disk = []
    for d in target.devices:
        idle_s = None if idle is None else float(idle_by_device.get(d, {}).get("idle_s", 0.0))
        used = None if idle_s is None or (idle_s == 0 and busy[d] > 0) else (busy[d] / idle_s if idle_s else 0.0)
        per_disk.append({"device": d, "bytes_read": read[d], "bytes_written": written[d],
                         "volume_share_moved": own[d] / size[d] if size[d] else 0.0, "move_s": busy[d],
                         "idle_s": idle_s, "idle_share_used": used})
    requests = int(window["requests"])
    before, after = baseline.get("mean_response_ms"), score.get("mean_response_ms")
    saved = requests * (before - after) / 1000.0 if before is not None and after is not None else None
    cost_s = sum(busy.values())
    improvement = score.get("improvement_mean")
    return {
        "move_model": MOVE_MODEL, "idle_model": IDLE_MODEL, "bytes_to_move": total, "n_moves": len(moving),
        "move_s": duration, "disk_busy_s": cost_s, "per_disk": per_disk,
        "idle": {"measured": False} if idle is None else {"measured": True, **idle},
        "benefit": {"mean_response": improvement, "p95_response": score.get("improvement_p95"),
                    "hottest_utilization_before": baseline.get("hottest_utilization"),
                    "hottest_utilization_after": score.get("hottest_utilization"),
                    "saved_response_s_per_window": saved, "validation_demerit_ms": validation_demerit_ms},
        "gain_per_gib": improvement / (total / GIB) if improvement is not None and total else None,
        "net_s_per_window": saved - cost_s if saved is not None else None,
        "budget": asdict(budget),
    }


def breaches(section: Mapping[str, Any], budget: MoveBudget, max_bytes: int) -> list[str]:
    """Why a proposal is not worth running under `budget` and the safety limit's max_bytes (empty: within every
    budget), each with its numbers. Idle time counts only where it was measured."""
    out = []
    if not section["n_moves"]:
        return out
    for d in section["per_disk"]:
        if d["volume_share_moved"] > budget.max_volume_share:
            out.append(f"moves {d['volume_share_moved']:.1%} of volume {d['device']}, over the "
                       f"{budget.max_volume_share:.0%} budget")
        used = d["idle_share_used"]
        if d["idle_s"] is not None and d["move_s"] > 0 and (used is None or used > budget.max_idle_share):
            got = "no idle time" if used is None else f"{used:.0%} of its {d['idle_s']:,.0f} s of idle time"
            out.append(f"the moves keep disk {d['device']} busy {d['move_s']:,.1f} s: {got} in a window like this "
                       f"one, over the {budget.max_idle_share:.0%} budget")
    if section["bytes_to_move"] > max_bytes:
        out.append(f"moves {section['bytes_to_move']:,} bytes, over the {max_bytes:,}-byte safety limit")
    gain = section["gain_per_gib"]
    if gain is not None and gain < budget.min_gain_per_gib:
        out.append(f"gains {gain:.2%} of the mean response per GiB moved, under the {budget.min_gain_per_gib:.2%} "
                   "minimum")
    return out

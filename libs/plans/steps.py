"""Reorganization plans: the steps of each policy family (restripe, extent migration with a safe order,
cooling moves in execution order), the plan document (schemas.reorg_plan_json), its ids, the staleness
check and the export formats. Pure logic: jobs/reorg_plan.py reads the inputs and writes the tables.

    part = extent_migration_steps(target, extent_map)          # steps in a safe order, cycles staged
    doc = build_plan(PlanInputs(...), part)                    # ids computed, schema-valid
    problems = check_plan(doc, now=now, versions={"sim_results": 7, ...})   # [] = may be reviewed / applied
    write_plan(doc, Path("plan.json"), "json"); read_plan(Path("plan.json")) == doc
    write_plan(doc, Path("plan.csv"), "csv"); read_plan(Path("plan.csv"), stored=load) == doc   # steps only

Choices (each tested in tests/jobs/test_reorg_plan.py):
- plan_id is the SHA-256 of the canonical JSON (sorted keys, no spaces, ASCII) of the whole document
  without plan_id: created_at and valid_until are covered, so extending a plan's validity is an edit
  that `plan check` detects; created_at is an input (--now; the DAG passes its logical date), so the
  same inputs at the same time give the same id. content_id leaves out plan_id, content_id, created_at
  and valid_until: the same decision on another day has the same content_id.
- non-finite figures (a saturated run's +inf response) are null in the document; `saturated` says why.
- extent migration (a static target layout from the current one): a move may run once every move whose
  source its destination overlaps has run (no data is overwritten before it is copied); when only
  cycles are left, the lowest-numbered move on a cycle (found by walking back along unmet dependencies)
  is first copied to free space past every disk's used and target area (the disk with the most room,
  ties: lowest), a `stage` step; ties between ready moves: lowest extent first.
- cooling moves keep the simulated order (time, then extent, then target disk for equal times); each
  depends on every earlier move it conflicts with (reads what it wrote, writes what it read or wrote).
- a restripe is one step per (device, disk) pair: the device's stripe units landing on that disk that
  are not already in place, done by one reshape of the volume manager (no dependencies between them);
  `width` is the number of disks the device's data spans.
- group_id: restripe steps share "restripe"; other steps are grouped by the connected components of
  their dependencies ("group-<first step>"): different groups may run concurrently.
- per-disk bytes: out = bytes of steps reading the disk, in = bytes of steps writing it (stage steps
  count, so staged data counts twice); align_to_track steps move nothing and count in neither, nor in
  bytes_to_move.
- track alignment is a host-side I/O rule, not a layout: one align_to_track step per device covering the
  whole device (unit_bytes = its first track's size, width = tracks per I/O), the rule and each device's
  track zones (first offset, track bytes, tracks) in detail.io_shaping.
- ALIS: per device with copies, first a create_area step (the reorganized area inserted ra_offset into the
  volume: its home data from the area's start on shifted up by the area's size, copied back to front; none
  when the area ends the volume), then one copy per lookaside entry in directory order (run copies by run,
  then heat copies, each by area offset): copy_run (group "<device>:run-<run id>") or copy_heat_unit (group
  "<device>:heat"), source = the home extent (volume address), destination = the copy's disk address (area
  start + area offset), each after its device's create_area. The document's `lookaside` section lists the
  areas and the directory; its entries are derived from the copy steps, so CSV and Parquet exports carry them
  in the step rows and the header holds only the areas.
- a plan proposes steps only when the simulated mean response improves on as-traced by at least
  min_improvement (default 1 %) and the policy's run is not saturated; otherwise status no_improvement,
  no steps, and the reason gives the figures;
- every plan carries its cost against its benefit (cost_benefit, libs.plans.cost); a proposal over a budget is
  status not_worth_it, no steps, the reason naming each breach with its numbers.
"""
from __future__ import annotations

import csv
import datetime as dt
import hashlib
import heapq
import io
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blockheat.libs.io import storage
from blockheat.libs.plans.cost import MoveBudget, breaches, cost_benefit
from blockheat.libs.plans.types import BASELINE, PlanPart, Target, Variant
from blockheat.schemas import reorg_plan_steps as STEPS
from blockheat.schemas.reorg_plan_json import SCHEMA_VERSION, schema_errors, validate_plan_document
from blockheat.sim import REGION_RUN, track_map

if TYPE_CHECKING:
    from blockheat.sim import ExtentMap, WindowPlan

__all__ = ["EXPORT_FORMATS", "PlanError", "PlanInputs", "PlanRefusedError", "SafetyLimits", "Step", "alis_steps",
           "build_plan", "canonical_json", "check_plan", "cooling_steps", "document_from_rows",
           "extent_migration_steps", "first_difference", "loads_strict", "lookaside_entries", "no_improvement_reason",
           "plan_ids", "plan_rows", "read_plan", "restripe_steps", "track_alignment_steps", "write_plan"]

EXPORT_FORMATS = ("json", "csv", "parquet")
DEVICE_BYTES_SOURCE = "highest byte the trace addresses on the device (space beyond is taken as free)"
APPLIES = "nothing: this tool never moves data; export and check are dry runs for review"
PARQUET_KEY = b"blockheat.plan"
_UNHASHED_FOR_CONTENT = ("plan_id", "content_id", "created_at", "valid_until")
_RESTRIPE_CHUNK = 1 << 22      # stripe units per numpy pass (bounds memory for tiny units)


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
        if self.step_type not in STEPS.STEP_TYPES:
            raise PlanError(f"step type {self.step_type!r}: use one of {list(STEPS.STEP_TYPES)}")
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


# --- steps of each family -----------------------------------------------------------------------------------


def _bases(target: Target) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(target.device_sectors)[:-1]]).astype(np.int64)


def restripe_steps(target: Target, *, unit_sectors: int, width: int, first_disk: int = 0) -> PlanPart:
    """The current layout (device k on disk k) -> the devices concatenated and striped in units of
    unit_sectors over `width` disks from first_disk (sim.array.Striped's mapping)."""
    n = target.n_disks
    if unit_sectors <= 0 or not 0 < width <= n or not 0 <= first_disk < n:
        raise PlanError(f"restripe needs unit_sectors > 0 and width, first_disk within {n} disks, got "
                        f"{unit_sectors}, {width}, {first_disk}")
    sizes = np.asarray(target.device_sectors, dtype=np.int64)
    bases = _bases(target)
    total = int(sizes.sum())
    moved = np.zeros((n, n), dtype=np.int64)
    first_src = np.full((n, n), np.iinfo(np.int64).max)
    first_dst = np.full((n, n), np.iinfo(np.int64).max)
    spans = np.zeros((n, n), dtype=bool)
    for lo in range(0, total, _RESTRIPE_CHUNK * unit_sectors):
        hi = min(total, lo + _RESTRIPE_CHUNK * unit_sectors)
        inner = bases[(bases > lo) & (bases < hi)]
        cuts = np.union1d(np.arange(lo, hi, unit_sectors, dtype=np.int64), inner)
        length = np.diff(np.append(cuts, hi))
        dev = np.searchsorted(bases, cuts, side="right") - 1
        src = cuts - bases[dev]
        k = cuts // unit_sectors
        disk = (first_disk + k % width) % n
        dst = (k // width) * unit_sectors + (cuts - k * unit_sectors)
        spans[dev, disk] = True
        away = (disk != dev) | (dst != src)
        np.add.at(moved, (dev[away], disk[away]), length[away])
        np.minimum.at(first_src, (dev[away], disk[away]), src[away])
        np.minimum.at(first_dst, (dev[away], disk[away]), dst[away])
    sb = target.sector_bytes
    steps, detail = [], []
    for d, name in enumerate(target.devices):
        dev_width = int(spans[d].sum())
        for k in range(n):
            if moved[d, k]:
                steps.append(Step("restripe", "restripe", name, int(first_src[d, k]) * sb, target.devices[k],
                                  int(first_dst[d, k]) * sb, int(moved[d, k]) * sb, unit_bytes=unit_sectors * sb,
                                  width=dev_width, note=f"stripe units of device {name} that land on "
                                                        f"{target.devices[k]} (every {width}th unit of the array)"))
        detail.append({"device": name, "unit_bytes": unit_sectors * sb, "width": dev_width, "stripe_width": width,
                       "first_disk": first_disk, "logical_offset_bytes": int(bases[d]) * sb,
                       "bytes": int(sizes[d]) * sb, "bytes_moved": int(moved[d].sum()) * sb})
    return PlanPart(steps, {"striping": detail})


@dataclass(frozen=True)
class _Move:
    extent: int
    src_disk: int
    src_start: int
    dst_disk: int
    dst_start: int
    sectors: int


def _overlapping(starts: np.ndarray, ends: np.ndarray, ids: np.ndarray, lo: int, hi: int) -> list[int]:
    """ids of the sorted, disjoint intervals [starts, ends) overlapping [lo, hi)."""
    i = int(np.searchsorted(ends, lo, side="right"))
    out = []
    while i < len(starts) and starts[i] < hi:
        out.append(int(ids[i]))
        i += 1
    return out


def extent_migration_steps(target: Target, layout: ExtentMap) -> PlanPart:
    """The current layout -> a static extent map (disk, physical start per extent), in a safe order."""
    if layout.remaps:
        raise PlanError("extent migration plans a static extent map; this one has remap events")
    bases, sizes = _bases(target), np.asarray(target.device_sectors, dtype=np.int64)
    if layout.logical_sectors != int(sizes.sum()):
        raise PlanError(f"the extent map covers {layout.logical_sectors} sectors, the devices {int(sizes.sum())}")
    moves, used_end = [], sizes.copy()
    for i, e in enumerate(layout.extents):
        d = int(np.searchsorted(bases, e.logical_start, side="right")) - 1
        src = e.logical_start - int(bases[d])
        if src + e.sectors > sizes[d]:
            raise PlanError(f"extent {i} crosses the end of device {target.devices[d]}")
        if e.disk >= target.n_disks:
            raise PlanError(f"extent {i} is placed on disk {e.disk}; the array has {target.n_disks}")
        used_end[e.disk] = max(used_end[e.disk], e.physical_start + e.sectors)
        if (e.disk, e.physical_start) != (d, src):
            moves.append(_Move(i, d, src, e.disk, e.physical_start, e.sectors))
    order, before = _safe_order(moves, target, used_end)
    staged = sum(1 for kind, _, _ in order if kind == "stage")
    part = _steps_from_order(moves, order, before, target)
    return PlanPart(part, {"extent_map": {"extents": len(layout.extents), "extents_moved": len(moves),
                                          "extents_staged": staged}})


def _safe_order(moves: Sequence[_Move], target: Target,
                used_end: np.ndarray) -> tuple[list[tuple[str, int, tuple[int, int] | None]], list[list[int]]]:
    """("stage" | "move", move index, staging place) in an order that never overwrites uncopied data, and
    per move the moves whose source its destination covers."""
    n = len(moves)
    by_disk: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for disk in {m.src_disk for m in moves}:
        ids = np.array(sorted((i for i, m in enumerate(moves) if m.src_disk == disk),
                              key=lambda i: moves[i].src_start), dtype=np.int64)
        by_disk[disk] = (np.array([moves[i].src_start for i in ids], dtype=np.int64),
                         np.array([moves[i].src_start + moves[i].sectors for i in ids], dtype=np.int64), ids)
    before: list[list[int]] = [[] for _ in range(n)]      # before[j]: moves whose source j's destination covers
    after: list[list[int]] = [[] for _ in range(n)]
    for j, m in enumerate(moves):
        if m.dst_disk in by_disk:
            for i in _overlapping(*by_disk[m.dst_disk], m.dst_start, m.dst_start + m.sectors):
                if i != j:
                    before[j].append(i)
                    after[i].append(j)
    waiting = [len(b) for b in before]
    done = [False] * n
    vacated = [False] * n
    ready = [j for j in range(n) if waiting[j] == 0]
    heapq.heapify(ready)
    free_at = used_end.astype(np.int64).copy()
    out: list[tuple[str, int, tuple[int, int] | None]] = []

    def vacate(i: int) -> None:
        vacated[i] = True
        for j in after[i]:
            waiting[j] -= 1
            if waiting[j] == 0 and not done[j]:
                heapq.heappush(ready, j)

    left, lowest = n, 0
    while left:
        if not ready:
            while done[lowest]:
                lowest += 1
            j = _on_cycle(lowest, before, vacated)
            room = target.capacity_sectors - free_at
            disk = int(np.argmax(room))
            if room[disk] < moves[j].sectors:
                raise PlanError(f"extent {moves[j].extent} is on a cycle of moves and no disk has "
                                f"{moves[j].sectors} free sectors to stage it")
            out.append(("stage", j, (disk, int(free_at[disk]))))
            free_at[disk] += moves[j].sectors
            vacate(j)
            continue
        j = heapq.heappop(ready)
        if done[j]:
            continue
        done[j] = True
        left -= 1
        out.append(("move", j, None))
        if not vacated[j]:
            vacate(j)
    return out, before


def _on_cycle(start: int, before: list[list[int]], vacated: list[bool]) -> int:
    """Walk back from `start` along unmet dependencies (lowest first) until a move repeats: it is on a cycle."""
    seen: set[int] = set()
    j = start
    while j not in seen:
        seen.add(j)
        j = min(i for i in before[j] if not vacated[i])
    return j


def _steps_from_order(moves: Sequence[_Move], order: Sequence[tuple[str, int, tuple[int, int] | None]],
                      before: Sequence[Sequence[int]], target: Target) -> list[Step]:
    sb, names = target.sector_bytes, target.devices
    vacated_by: dict[int, int] = {}        # move -> the step that copied its source away
    staged_at: dict[int, tuple[int, int, int]] = {}
    raw: list[dict[str, Any]] = []
    for kind, j, place in order:
        m = moves[j]
        if kind == "stage":
            assert place is not None
            staged_at[j] = (place[0], place[1], len(raw))
            raw.append({"step_type": "stage", "source_device": names[m.src_disk],
                        "source_offset_bytes": m.src_start * sb, "dest_device": names[place[0]],
                        "dest_offset_bytes": place[1] * sb, "depends_on": (), "extent": m.extent,
                        "note": "copied to free space first: its move is on a cycle"})
            vacated_by[j] = len(raw) - 1
            continue
        deps = sorted({vacated_by[i] for i in before[j]})
        if j in staged_at:
            disk, start, stage_step = staged_at[j]
            deps = sorted({*deps, stage_step})
            src_dev, src_off = names[disk], start * sb
        else:
            src_dev, src_off = names[m.src_disk], m.src_start * sb
            vacated_by[j] = len(raw)
        raw.append({"step_type": "migrate_extent", "source_device": src_dev, "source_offset_bytes": src_off,
                    "dest_device": names[m.dst_disk], "dest_offset_bytes": m.dst_start * sb,
                    "depends_on": tuple(deps), "extent": m.extent, "note": None})
    sizes = [moves[j].sectors * sb for _, j, _ in order]
    groups = _groups([r["depends_on"] for r in raw])
    return [Step(r["step_type"], groups[k], r["source_device"], r["source_offset_bytes"], r["dest_device"],
                 r["dest_offset_bytes"], sizes[k], r["depends_on"], extent=r["extent"], note=r["note"])
            for k, r in enumerate(raw)]


def _groups(depends: Sequence[Sequence[int]]) -> list[str]:
    """group-<first step> for each step's connected component of the dependency graph."""
    parent = list(range(len(depends)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for j, deps in enumerate(depends):
        for i in deps:
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [f"group-{root(i)}" for i in range(len(depends))]


def cooling_steps(target: Target, moves: Sequence[Mapping[str, Any]]) -> PlanPart:
    """The cooling policy's moves (cooling_moves rows) as steps in execution order, with their conflicts."""
    rows = sorted(moves, key=lambda r: (float(r["time_us"]), int(r["unit"]), int(r["to_disk"])))
    sb, names, n = target.sector_bytes, target.devices, len(rows)
    for r in rows:
        if not (0 <= int(r["from_disk"]) < target.n_disks and 0 <= int(r["to_disk"]) < target.n_disks):
            raise PlanError(f"cooling move of extent {r['unit']} at {r['time_us']} us names a disk outside the "
                            f"{target.n_disks}-disk array")
    col = {k: np.array([int(r[k]) for r in rows], dtype=np.int64)
           for k in ("from_disk", "from_physical_start", "to_disk", "to_physical_start", "sectors")}
    s_end = col["from_physical_start"] + col["sectors"]
    d_end = col["to_physical_start"] + col["sectors"]

    def hits(disk: np.ndarray, lo: np.ndarray, hi: np.ndarray, j: int, d: int, a: int, b: int) -> np.ndarray:
        return (disk[:j] == d) & (lo[:j] < b) & (a < hi[:j])

    raw_deps = []
    for j in range(n):
        sd, ss, se = int(col["from_disk"][j]), int(col["from_physical_start"][j]), int(s_end[j])
        dd, ds, de = int(col["to_disk"][j]), int(col["to_physical_start"][j]), int(d_end[j])
        conflict = (hits(col["to_disk"], col["to_physical_start"], d_end, j, sd, ss, se)
                    | hits(col["from_disk"], col["from_physical_start"], s_end, j, dd, ds, de)
                    | hits(col["to_disk"], col["to_physical_start"], d_end, j, dd, ds, de))
        raw_deps.append(tuple(int(i) for i in np.flatnonzero(conflict)))
    groups = _groups(raw_deps)
    steps, detail = [], []
    for j, r in enumerate(rows):
        steps.append(Step("migrate_extent", groups[j], names[int(r["from_disk"])],
                          int(r["from_physical_start"]) * sb, names[int(r["to_disk"])],
                          int(r["to_physical_start"]) * sb, int(r["sectors"]) * sb, raw_deps[j],
                          extent=int(r["unit"]), time_us=float(r["time_us"])))
        detail.append({"order": j, "time_us": float(r["time_us"]), "extent": int(r["unit"]),
                       "from_device": names[int(r["from_disk"])], "to_device": names[int(r["to_disk"])],
                       "bytes": int(r["sectors"]) * sb, **{k: _finite(r[k]) for k in (
                           "unit_heat", "source_heat_before", "source_heat_after", "target_heat_before",
                           "target_heat_after")}})
    return PlanPart(steps, {"cooling_moves": detail, "heat_unit": "spec sectors per second (the tracker's)"})


def track_alignment_steps(target: Target, *, tracks: int, merge_gap_ms: float) -> PlanPart:
    """Track-aligned I/O as a host-side rule: one align_to_track step per device (no data moves) and, in
    detail.io_shaping, the rule and each device's track zones from the spec's boundary table (sim.tracks)."""
    if tracks < 1:
        raise PlanError(f"track alignment needs tracks >= 1, got {tracks}")
    m, sb = track_map(target.spec), target.sector_bytes
    devices, steps = [], []
    for d, sectors in zip(target.devices, target.device_sectors, strict=True):
        zones = [{"first_offset_bytes": int(m.first_lbn[z]) * sb, "track_bytes": int(m.spt[z]) * sb,
                  "tracks": int(min(m.tracks[z], -(-(sectors - m.first_lbn[z]) // m.spt[z])))}
                 for z in range(len(m.spt)) if m.first_lbn[z] < sectors]
        devices.append({"device": d, "bytes": sectors * sb, "zones": zones})
        steps.append(Step("align_to_track", f"{d}:io", d, 0, d, 0, sectors * sb, unit_bytes=zones[0]["track_bytes"],
                          width=tracks, note=f"host I/O rule: merge sequential requests (gap <= {merge_gap_ms:g} ms), "
                                             f"issue them cut at track boundaries, {tracks} track(s) per I/O; no data "
                                             "moves"))
    rule = {"kind": "track-aligned", "tracks": tracks, "merge_gap_ms": merge_gap_ms, "spec": target.spec.name}
    return PlanPart(steps, {"io_shaping": {"rule": rule, "devices": devices}})


def _run_group(device: str, run_id: int) -> str:
    return f"{device}:run-{run_id}"


def alis_steps(target: Target, plan: WindowPlan, *, interval_s: float) -> PlanPart:
    """The ALIS placement serving plan.window (sim.alis.plan.plan_trace_window, one volume per device in
    target order) as steps: each device's create_area, then its lookaside directory's copies."""
    if tuple(plan.volume_names) != tuple(target.devices):
        raise PlanError(f"ALIS plan volumes {list(plan.volume_names)} are not the target's devices "
                        f"{list(target.devices)} (one volume per device)")
    if plan.sector_size != target.sector_bytes:
        raise PlanError(f"ALIS plan in {plan.sector_size}-byte sectors, the target's are {target.sector_bytes}")
    sb, d = target.sector_bytes, plan.directory
    steps: list[Step] = []
    areas = []
    for v, (name, vol) in enumerate(zip(target.devices, plan.volumes, strict=True)):
        mine = np.flatnonzero(d.volume == v)
        if vol.physical_sectors > target.capacity_sectors:
            raise PlanError(f"device {name}: the volume with its reorganized area ({vol.physical_sectors} sectors) "
                            f"does not fit on {target.spec.name} ({target.capacity_sectors} sectors)")
        areas.append({"device": name, "volume_bytes": vol.size_sectors * sb, "ra_start_bytes": vol.ra_start * sb,
                      "ra_bytes": vol.ra_sectors * sb, "ra_used_bytes": d.ra_end(v) * sb})
        if not len(mine):
            continue
        deps: tuple[int, ...] = ()
        tail = vol.size_sectors - vol.ra_start
        if tail > 0:
            deps = (len(steps),)
            steps.append(Step("create_area", f"{name}:area", name, (vol.disk_start + vol.ra_start) * sb, name,
                              (vol.disk_start + vol.ra_start + vol.ra_sectors) * sb, tail * sb,
                              note=f"insert the reorganized area ({vol.ra_sectors * sb} bytes) at {vol.ra_start * sb}: "
                                   "the home data from there on moves up by its size, copied back to front"))
        order = mine[np.lexsort((d.ra_sector[mine], d.run_id[mine], d.region[mine]))]
        for i in order.tolist():
            run = d.region[i] == REGION_RUN
            steps.append(Step("copy_run" if run else "copy_heat_unit",
                              _run_group(name, int(d.run_id[i])) if run else f"{name}:heat", name,
                              int(d.home_sector[i]) * sb, name, vol.ra_address(int(d.ra_sector[i])) * sb,
                              int(d.sectors[i]) * sb, deps, extent=int(d.unit_id[i])))
    copies = [s for s in steps if s.step_type != "create_area"]
    detail = {"alis": {"window": int(plan.window), "interval_s": float(interval_s),
                       "run_copies": sum(s.step_type == "copy_run" for s in copies),
                       "heat_copies": sum(s.step_type == "copy_heat_unit" for s in copies),
                       # Installing the area is once per volume; the copies are each reorganization's.
                       "create_area_bytes": sum(s.bytes for s in steps if s.step_type == "create_area"),
                       "copy_bytes": sum(s.bytes for s in copies),
                       "addresses": "source: home (volume) address; destination: the copy's disk address"}}
    return PlanPart(steps, detail, lookaside=areas)


def lookaside_entries(steps: Sequence[Mapping[str, Any]], areas: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The lookaside directory (home extent -> reorganized-area location) from a plan's copy steps (dicts
    with step, step_type, group_id, source_device, source_offset_bytes, dest_offset_bytes, bytes, extent)."""
    start = {a["device"]: int(a["ra_start_bytes"]) for a in areas}
    out = []
    for s in steps:
        if s["step_type"] not in ("copy_run", "copy_heat_unit"):
            continue
        dev = s["source_device"]
        run = s["step_type"] == "copy_run"
        out.append({"step": s["step"], "device": dev, "region": "run" if run else "heat",
                    "run_id": int(s["group_id"].rsplit(":run-", 1)[1]) if run else None, "unit_id": s["extent"],
                    "home_offset_bytes": s["source_offset_bytes"], "size_bytes": s["bytes"],
                    "ra_offset_bytes": s["dest_offset_bytes"] - start[dev], "ra_address_bytes": s["dest_offset_bytes"]})
    return out


# --- the plan document ----------------------------------------------------------------------------------------


def _finite(x: Any) -> Any:
    """JSON has no infinity: non-finite floats become null (saturated figures carry a `saturated` flag)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return _finite(float(value))
    return _finite(value)


def canonical_json(doc: Any) -> str:
    """Sorted keys, no spaces, ASCII, no NaN/infinity: the bytes the ids hash."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def loads_strict(text: str | bytes, where: str) -> Any:
    """JSON text parsed strictly: a key repeated in any object (at any depth) or NaN / Infinity is a PlanError
    naming `where` (json.loads alone keeps a repeated key's last value, so a forged first value would go unseen)."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise PlanError(f"{where}: duplicate key {key!r} in a JSON object")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise PlanError(f"{where}: {name} is not a JSON value")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first field path (`steps[3].dest_offset_bytes`, `valid_until`) where two documents differ in canonical
    form (canonical_json), None where they do not. Keys in sorted order, except that at the top level plan_id and
    content_id (hashes of the rest) come last; a key or list item present in one only is a difference at its path."""
    if canonical_json(a) == canonical_json(b):
        return None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = sorted(set(a) | set(b), key=lambda k: (not path and k in ("plan_id", "content_id"), k))
        for key in keys:
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return where
            found = first_difference(a[key], b[key], where)
            if found is not None:
                return found
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return f"{path}[{i}]"
            found = first_difference(a[i], b[i], f"{path}[{i}]")
            if found is not None:
                return found
    return path or "(the whole document)"


def _sha(doc: Any) -> str:
    return hashlib.sha256(canonical_json(doc).encode("ascii")).hexdigest()


def plan_ids(doc: Mapping[str, Any]) -> tuple[str, str]:
    """(plan_id, content_id) of a document (any plan_id or content_id in it is ignored)."""
    content = _sha({k: v for k, v in doc.items() if k not in _UNHASHED_FOR_CONTENT})
    body = {k: v for k, v in doc.items() if k != "plan_id"}
    body["content_id"] = content
    return _sha(body), content


def iso_utc(t: dt.datetime) -> str:
    if t.tzinfo is None:
        raise PlanError(f"time {t} has no time zone (plans use UTC)")
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: str) -> dt.datetime:
    """ISO-8601 (a trailing Z or an offset; no zone: UTC) -> an aware datetime."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise PlanError(f"time {text!r} is not ISO-8601 (e.g. 2026-01-02T03:04:05Z)") from exc
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


_FIGURE_KEYS = ("saturated", "mean_response_ms", "p95_response_ms", "p99_response_ms", "mean_service_ms",
                "mean_queue_ms", "hottest_utilization", "utilization_max_over_mean", "migration_mb", "remaps")


@dataclass(frozen=True)
class PlanInputs:
    """Everything a plan is built from. score / baseline: their policy_scores rows; sim / baseline_sim:
    their sim_results rows (scenario_json, disk_physical_ios, disk_utilization, simulated_s); tables: the
    Delta versions read; validation: the evidence's validation section."""

    target: Target
    variant: Variant
    description: str
    window: Mapping[str, Any]
    tables: Mapping[str, int]
    score: Mapping[str, Any]
    baseline: Mapping[str, Any]
    sim: Mapping[str, Any]
    baseline_sim: Mapping[str, Any]
    validation: Mapping[str, Any]
    created_at: dt.datetime
    valid_for: dt.timedelta = dt.timedelta(hours=24)
    limits: SafetyLimits = field(default_factory=SafetyLimits)
    min_improvement: float = 0.01
    idle: Mapping[str, Any] | None = None          # the window's idle time per device (libs.plans.cost); None: not
    # measured
    budget: MoveBudget = field(default_factory=MoveBudget)


def _balance(sim_row: Mapping[str, Any], window_s: float) -> dict[str, Any]:
    ios = [float(x) for x in sim_row["disk_physical_ios"]]
    per_disk = [x / window_s for x in ios] if window_s > 0 else [0.0 for _ in ios]
    mean = sum(per_disk) / len(per_disk) if per_disk else 0.0
    return {"per_disk": per_disk, "utilization": [_finite(float(u)) for u in sim_row["disk_utilization"]],
            "max_over_mean": max(per_disk) / mean if mean > 0 else None}


def no_improvement_reason(inp: PlanInputs, steps: Sequence[Step] | None = None) -> str | None:
    """Why the plan proposes nothing, or None when it proposes its steps (steps None: not built yet)."""
    pid = inp.variant.policy_id
    if inp.variant.family == BASELINE:
        return f"{pid} is the current layout: nothing to move"
    p, b = inp.score["mean_response_ms"], inp.baseline["mean_response_ms"]
    if inp.score["saturated"]:
        return (f"{pid} saturates the array in the simulator over window {inp.window['window_id']}; no moves are "
                "proposed")
    imp = inp.score["improvement_mean"]
    if imp is not None and imp < inp.min_improvement:
        return (f"{pid}: simulated mean response {p:.4g} ms against {b:.4g} ms as traced over window "
                f"{inp.window['window_id']} ({imp:+.1%}), below the minimum improvement of "
                f"{inp.min_improvement:.1%}; no moves are proposed")
    if steps is not None and not steps:
        return f"{pid}: the simulated layout equals the current one; nothing to move"
    return None


def build_plan(inp: PlanInputs, part: PlanPart) -> dict[str, Any]:
    """The plan document (schemas.reorg_plan_json) with its ids."""
    t, v = inp.target, inp.variant
    reason = no_improvement_reason(inp, part.steps)
    status = "no_improvement" if reason is not None else "proposed"
    costs = cost_benefit(t, part.steps if reason is None else [], idle=inp.idle, window=inp.window, score=inp.score,
                         baseline=inp.baseline, validation_demerit_ms=inp.validation.get("demerit_ms"),
                         throttle_mb_per_s=inp.limits.throttle_mb_per_s, budget=inp.budget)
    over = breaches(costs, inp.budget, inp.limits.max_bytes) if reason is None else []
    if over:
        status = "not_worth_it"
        imp = inp.score["improvement_mean"]
        reason = (f"{v.policy_id}: not worth running: " + "; ".join(over) + f" (for {imp:+.1%} mean response over "
                  f"window {inp.window['window_id']}); no moves are proposed")
    steps = [] if reason is not None else list(part.steps)
    per_disk = {d: {"device": d, "bytes_in": 0, "bytes_out": 0} for d in t.devices}
    moving = [s for s in steps if s.step_type not in STEPS.NO_DATA_STEP_TYPES]
    for s in moving:
        per_disk[s.source_device]["bytes_out"] += s.bytes
        per_disk[s.dest_device]["bytes_in"] += s.bytes
    moved = sum(s.bytes for s in moving)
    window_s = (inp.window["end_us"] - inp.window["start_us"]) / 1e6
    devices = [{"device": d, "disk": k, "bytes": n * t.sector_bytes}
               for k, (d, n) in enumerate(zip(t.devices, t.device_sectors, strict=True))]
    start = {"kind": "as-traced", "sector_bytes": t.sector_bytes, "devices": devices}
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "created_at": iso_utc(inp.created_at),
        "valid_until": iso_utc(inp.created_at + inp.valid_for),
        "status": status,
        "reason": reason,
        "target": {
            "trace_id": t.trace_id, "array_group": str(inp.sim["array_group"]), "devices": devices,
            "device_bytes_source": DEVICE_BYTES_SOURCE,
            "array": {"n_disks": t.n_disks, "spec": t.spec.name, "sector_bytes": t.sector_bytes,
                      "capacity_bytes": t.capacity_sectors * t.sector_bytes, "cylinders": int(t.spec.cylinders),
                      "surfaces": int(t.spec.surfaces), "rpm": float(t.spec.rpm), "scheduler": t.scheduler,
                      "speedup": float(t.speedup)},
            "start_layout": {"kind": "as-traced", "fingerprint": _sha(start)},
        },
        "inputs": {"trace_id": t.trace_id, "window": dict(inp.window), "tables": dict(sorted(inp.tables.items()))},
        "policy": {"policy_id": v.policy_id, "family": v.family, "description": inp.description,
                   "params": dict(v.params)},
        "steps": [{"step": k, **{c: (list(x) if isinstance(x, tuple) else x) for c, x in asdict(s).items()}}
                  for k, s in enumerate(steps)],
        "summary": {"n_steps": len(steps), "bytes_to_move": moved, "per_disk": list(per_disk.values()),
                    "heat_balance": {"metric": "physical I/Os per second per disk over the window (simulated); "
                                               "utilization = busy share",
                                     "before": _balance(inp.baseline_sim, window_s),
                                     "after": _balance(inp.sim, window_s)}},
        "safety": {**asdict(inp.limits), "within_limits": moved <= inp.limits.max_bytes,
                   "estimated_copy_s": moved / (inp.limits.throttle_mb_per_s * 1e6), "applies": APPLIES},
        "evidence": {
            "grid_id": str(inp.sim["grid_id"]), "scenario_id": str(inp.sim["scenario_id"]),
            "baseline_scenario_id": str(inp.baseline_sim["scenario_id"]),
            "scenario": json.loads(inp.sim["scenario_json"]), "window": dict(inp.window),
            "predicted": {k: inp.score[k] for k in _FIGURE_KEYS},
            "baseline": {k: inp.baseline[k] for k in _FIGURE_KEYS},
            "improvement": {"mean_response": inp.score["improvement_mean"],
                            "p95_response": inp.score["improvement_p95"]},
            "validation": dict(inp.validation),
        },
        "detail": part.detail if reason is None else {},
        "cost_benefit": costs,
    }
    if part.lookaside is not None and reason is None:
        doc["lookaside"] = {"areas": part.lookaside, "entries": lookaside_entries(doc["steps"], part.lookaside)}
    doc = _clean(doc)
    plan_id, content_id = plan_ids(doc)
    doc = {"plan_id": plan_id, "content_id": content_id, **doc}
    validate_plan_document(doc)
    return doc


def plan_scope(doc: Mapping[str, Any]) -> dict[str, str]:
    """The rows a plan read, as column = value: its trace, its window and its scored grid (a commit to an
    input table that replaced only other rows leaves the plan fresh; see libs.io.tables.scoped_version)."""
    return {"trace_id": str(doc["target"]["trace_id"]), "window_id": str(doc["inputs"]["window"]["window_id"]),
            "grid_id": str(doc["evidence"]["grid_id"])}


def check_plan(doc: Mapping[str, Any], *, now: dt.datetime, versions: Mapping[str, int | None]) -> list[str]:
    """Why the plan must not be applied (empty: it may): a document that breaks the schema, ids that do not
    match its contents, valid_until passed, an input table whose rows in the plan's scope changed after the
    version the plan read (versions: table -> the latest version changing them, libs.io.tables.scoped_version
    with since = the version read; None: gone or recreated), more bytes than its limit."""
    errors = schema_errors(doc)
    if errors:
        return [f"not a valid plan document: {'; '.join(errors[:5])}"]
    problems = []
    plan_id, content_id = plan_ids(doc)
    if plan_id != doc["plan_id"] or content_id != doc["content_id"]:
        problems.append(f"hash mismatch: the document hashes to {plan_id}, it claims {doc['plan_id']} (edited "
                        f"after it was built)")
    until = parse_utc(doc["valid_until"])
    if now > until:
        problems.append(f"stale: valid until {doc['valid_until']}, now {iso_utc(now)}")
    for table, version in doc["inputs"]["tables"].items():
        current = versions.get(table)
        if current is None or current > version:
            now_at = "now gone or recreated" if current is None else f"changed in version {current}"
            problems.append(f"stale: input table {table} changed since the plan read it (read version {version}, "
                            f"{now_at})")
    if not doc["safety"]["within_limits"] or doc["summary"]["bytes_to_move"] > doc["safety"]["max_bytes"]:
        problems.append(f"over limit: moves {doc['summary']['bytes_to_move']} bytes, the limit is "
                        f"{doc['safety']['max_bytes']}")
    return problems


def plan_rows(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the reorg_plans row, the reorg_plan_steps rows) of a document."""
    ev = doc["evidence"]
    row = {"trace_id": doc["target"]["trace_id"], "plan_id": doc["plan_id"], "content_id": doc["content_id"],
           "schema_version": doc["schema_version"], "created_at": doc["created_at"],
           "valid_until": doc["valid_until"], "window_id": doc["inputs"]["window"]["window_id"],
           "policy_id": doc["policy"]["policy_id"], "family": doc["policy"]["family"], "status": doc["status"],
           "reason": doc["reason"], "n_steps": doc["summary"]["n_steps"],
           "bytes_to_move": doc["summary"]["bytes_to_move"],
           "predicted_mean_response_ms": ev["predicted"]["mean_response_ms"],
           "baseline_mean_response_ms": ev["baseline"]["mean_response_ms"],
           "improvement_mean": ev["improvement"]["mean_response"],
           "validation_demerit_ms": ev["validation"]["demerit_ms"], "plan_json": canonical_json(doc)}
    steps = [{"trace_id": row["trace_id"], "plan_id": doc["plan_id"], **s} for s in doc["steps"]]
    return row, steps


# --- export ----------------------------------------------------------------------------------------------------

_STEP_KINDS = {name: kind for name, kind, _ in STEPS.FIELDS}


def _header(doc: Mapping[str, Any]) -> str:
    """The document without its steps (the rows) and without the lookaside entries (derived from the rows)."""
    head = {k: v for k, v in doc.items() if k != "steps"}
    if "lookaside" in head:
        head["lookaside"] = {k: v for k, v in head["lookaside"].items() if k != "entries"}
    return canonical_json(head)


def write_plan(doc: Mapping[str, Any], path: str | Path, fmt: str) -> Path | str:
    """Write the plan: json (the document), csv (the steps table: a line of the reorg_plan_steps columns, then one
    row per step, depends_on as 1;2;3; each row names its trace and plan, the rest of the document is the stored
    plan's) or parquet (the steps, the header in the schema metadata under blockheat.plan). The header leaves out
    the lookaside entries: the copy steps' rows carry them. Each reads back to the same document (read_plan).
    `path`: a local file (its directory created) or an object-store URI (libs.io.storage: one PUT); returns it (a
    Path when local)."""
    if fmt not in EXPORT_FORMATS:
        raise PlanError(f"export format {fmt!r}: use one of {list(EXPORT_FORMATS)}")
    _, steps = plan_rows(doc)
    if fmt == "json":
        data = (json.dumps(doc, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(STEPS.COLUMNS)
        for s in steps:
            writer.writerow([_csv_cell(s[c]) for c in STEPS.COLUMNS])
        data = buf.getvalue().encode()
    else:
        table = pa.Table.from_pylist(steps, schema=STEPS.ARROW_SCHEMA)
        sink = pa.BufferOutputStream()
        pq.write_table(table.replace_schema_metadata({PARQUET_KEY: _header(doc).encode("ascii")}), sink)
        data = sink.getvalue().to_pybytes()
    local = _local_path(path)
    if local is None:
        where = storage.normalize(path)
        storage.write_bytes(where, data)
        return where
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return local


def _local_path(path: str | Path) -> Path | None:
    """A local file's path (a file:// URI's too); None for an object-store URI."""
    kind = storage.scheme(path)
    if kind == "":
        return Path(path)
    return Path(storage.normalize(path)) if kind == "file" else None


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _csv_value(name: str, text: str, where: str) -> Any:
    kind = _STEP_KINDS[name]
    try:
        if kind == "array<long>":
            return [int(x) for x in text.split(";")] if text else []
        if text == "" and kind != "string":
            return None
        if kind == "long":
            return int(text)
        if kind == "double":
            return float(text)
    except ValueError as exc:
        raise PlanError(f"{where}: column {name}: {text!r} is not a {kind}") from exc
    return None if text == "" and name == "note" else text


def read_plan(path: str | Path, fmt: str | None = None, *,
              stored: Callable[[str], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A plan written by write_plan (format from the extension unless given), from a local file or an
    object-store URI (libs.io.storage), parsed strictly: a key repeated in the JSON (the export, the Parquet header
    metadata) is refused, the CSV and Parquet step columns must be reorg_plan_steps' (names, order, Parquet types),
    and every step row's trace_id and plan_id must be the header's target.trace_id and plan_id. A CSV export holds
    the steps only: its header is the one of the stored plan its rows name (`stored`: plan id -> that document).
    Errors (PlanError) name the file and the line, row or key."""
    path = _local_path(path) or storage.normalize(path)
    fmt = fmt or os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    if fmt not in EXPORT_FORMATS:
        raise PlanError(f"{path}: unknown plan format {fmt!r} (use {', '.join(EXPORT_FORMATS)})")
    try:
        data = storage.read_bytes(os.fspath(path))
        if fmt == "json":
            doc = loads_strict(data, str(path))
            if not isinstance(doc, dict):
                raise PlanError(f"{path}: not a plan document (a JSON object), got {type(doc).__name__}")
            return doc
        if fmt == "csv":
            reader = csv.reader(data.decode().splitlines())
            header = next(reader, None)
            if header is None or tuple(header) != STEPS.COLUMNS:
                raise PlanError(f"{path}: line 1 must be the step columns {list(STEPS.COLUMNS)} (a blockheat plan "
                                "export)")
            rows = []
            for n, cells in enumerate(reader, start=2):
                if len(cells) != len(header):
                    raise PlanError(f"{path}: line {n}: {len(cells)} cells, expected {len(header)}")
                rows.append({c: _csv_value(c, x, f"{path}: line {n}") for c, x in zip(header, cells, strict=True)})
            return _with_step_rows(_stored_header(rows, stored, str(path)), rows, f"{path}: the stored plan",
                                   lambda i: f"{path}: line {i + 2}")
        table = pq.read_table(pa.BufferReader(data))
        meta = (table.schema.metadata or {}).get(PARQUET_KEY)
        if meta is None:
            raise PlanError(f"{path}: no {PARQUET_KEY.decode()} metadata (not a blockheat plan export)")
        _check_step_columns(table.schema, str(path))
        head = loads_strict(meta, f"{path}: {PARQUET_KEY.decode()} metadata")
        return _with_step_rows(head, table.to_pylist(), f"{path}: {PARQUET_KEY.decode()} metadata",
                               lambda i: f"{path}: row {i} (from 0)")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc}") from exc


def _stored_header(rows: Sequence[Mapping[str, Any]], stored: Callable[[str], Mapping[str, Any]] | None,
                   where: str) -> Any:
    """The header of the stored plan a CSV export's rows name (the first row's plan_id; _with_step_rows checks
    every row against it)."""
    if not rows:
        raise PlanError(f"{where}: no step rows, so no plan id: check the plan by its id, or export it as json")
    if stored is None:
        raise PlanError(f"{where}: a CSV export holds the steps only; read it with the stored plans")
    return json.loads(_header(stored(str(rows[0]["plan_id"]))))


def _check_step_columns(schema: pa.Schema, where: str) -> None:
    """The Parquet export's columns must be reorg_plan_steps' columns, in order, with their types."""
    names = tuple(schema.names)
    if names != STEPS.COLUMNS:
        missing = [c for c in STEPS.COLUMNS if c not in names]
        extra = [c for c in names if c not in STEPS.COLUMNS]
        raise PlanError(f"{where}: the step columns must be {list(STEPS.COLUMNS)}, got {list(names)} (missing "
                        f"{missing}, extra {extra})")
    for want in STEPS.ARROW_SCHEMA:
        got = schema.field(want.name).type
        if got != want.type:
            raise PlanError(f"{where}: column {want.name} is {got}, expected {want.type}")


def _with_step_rows(head: Any, rows: Sequence[Mapping[str, Any]], where: str,
                    place: Callable[[int], str]) -> dict[str, Any]:
    """The document from its header (the document without steps and lookaside entries, _header) and its step
    rows (reorg_plan_steps columns, in order): each row's trace_id and plan_id must be the header's target.trace_id
    and plan_id (PlanError naming place(row index) and the column); the lookaside entries are rebuilt from the
    copy steps. `where` names the header in errors."""
    if not isinstance(head, dict):
        raise PlanError(f"{where}: not a plan header (a JSON object), got {type(head).__name__}")
    lookaside = head.get("lookaside")
    if "steps" in head or (isinstance(lookaside, dict) and "entries" in lookaside):
        key = "steps" if "steps" in head else "lookaside.entries"
        raise PlanError(f"{where}: the header carries {key}, which the step rows hold")
    target = head.get("target")
    ids = {"trace_id": ("target.trace_id", target.get("trace_id") if isinstance(target, dict) else None),
           "plan_id": ("plan_id", head.get("plan_id"))}
    for name, value in ids.values():
        if not isinstance(value, str):
            raise PlanError(f"{where}: the header has no {name} (a string), got {value!r}")
    steps = []
    for i, row in enumerate(rows):
        missing = [c for c in STEPS.COLUMNS if c not in row]
        if missing or len(row) != len(STEPS.COLUMNS):
            raise PlanError(f"{place(i)}: the step columns must be {list(STEPS.COLUMNS)}, got {list(row)}")
        for column, (name, value) in ids.items():
            if row[column] != value:
                raise PlanError(f"{place(i)}: column {column} is {row[column]!r}, the plan's {name} is {value!r}")
        steps.append({k: v for k, v in row.items() if k not in ids})
    doc = {**head, "steps": steps}
    if isinstance(lookaside, dict) and "areas" in lookaside:
        try:
            doc["lookaside"] = {**lookaside, "entries": lookaside_entries(steps, lookaside["areas"])}
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
            raise PlanError(f"{where}: the lookaside directory cannot be rebuilt from the copy steps: {exc!r}") \
                from exc
    return doc


def document_from_rows(row: Mapping[str, Any], step_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A stored plan's document recomputed from its rows: the reorg_plans row's plan_json (parsed strictly) with
    its steps from the reorg_plan_steps rows (in step order). The rows must be exactly the document's (plan_rows),
    every column compared, plan_json byte for byte: else PlanError naming the table, the row and the column (for
    plan_json, the first differing field)."""
    name = f"reorg_plans row {row.get('plan_id')}"
    stored = loads_strict(row["plan_json"], f"{name}: plan_json")
    if not isinstance(stored, dict):
        raise PlanError(f"{name}: plan_json is not a plan document (a JSON object)")
    if stored.get("plan_id") != row.get("plan_id"):
        raise PlanError(f"{name} holds a document claiming id {stored.get('plan_id')!r}")
    n_steps = len(stored["steps"]) if isinstance(stored.get("steps"), list) else None
    if n_steps != len(step_rows):
        raise PlanError(f"{name}: reorg_plan_steps holds {len(step_rows)} rows of the plan, its plan_json "
                        f"{n_steps if n_steps is not None else 'no'} steps")
    head = {k: v for k, v in stored.items() if k != "steps"}
    if isinstance(head.get("lookaside"), dict):
        head["lookaside"] = {k: v for k, v in head["lookaside"].items() if k != "entries"}
    ordered = sorted(step_rows, key=lambda r: r["step"] if isinstance(r.get("step"), int) else -1)
    doc = _with_step_rows(head, ordered, f"{name}: plan_json",
                          lambda i: f"reorg_plan_steps row step {ordered[i].get('step')} of plan {row.get('plan_id')}")
    try:
        want, _ = plan_rows(doc)
    except (KeyError, TypeError) as exc:
        raise PlanError(f"{name}: plan_json is not a plan document: no field {exc}") from exc
    if row["plan_json"] != want["plan_json"]:
        at = first_difference(stored, doc)
        raise PlanError(f"{name}: plan_json differs from the reorg_plan_steps rows at {at}"
                        if at else f"{name}: plan_json is not in canonical form (canonical_json)")
    for column, value in want.items():
        if column not in row or row[column] != value:
            raise PlanError(f"{name}: column {column} is {row.get(column)!r}, its plan_json gives {value!r}")
    extra = sorted(set(row) - set(want))
    if extra:
        raise PlanError(f"{name}: columns {extra} are not reorg_plans columns")
    return doc

"""The steps of each reorganization policy family: restripe, extent migration in a safe order, cooling moves in
execution order, track alignment and ALIS copies. Pure logic: libs.plans.document makes a plan document of them and
jobs/reorg_plan.py reads the inputs and writes the tables.

    part = extent_migration_steps(target, extent_map)          # steps in a safe order, cycles staged
    doc = build_plan(PlanInputs(...), part)                    # libs.plans.document

Choices (each tested in tests/jobs/test_reorg_plan.py):
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
- track alignment is a host-side I/O rule, not a layout: one align_to_track step per device covering the
  whole device (unit_bytes = its first track's size, width = tracks per I/O), the rule and each device's
  track zones (first offset, track bytes, tracks) in detail.io_shaping.
- ALIS: per device with copies, first a create_area step (the reorganized area inserted ra_offset into the
  volume: its home data from the area's start on shifted up by the area's size, copied back to front; none
  when the area ends the volume), then one copy per lookaside entry in directory order (run copies by run,
  then heat copies, each by area offset): copy_run (group "<device>:run-<run id>") or copy_heat_unit (group
  "<device>:heat"), source = the home extent (volume address), destination = the copy's disk address (area
  start + area offset), each after its device's create_area.
"""
from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from blockheat.libs.plans.document import finite
from blockheat.libs.plans.types import PlanError, PlanPart, Step, Target
from blockheat.sim import REGION_RUN, track_map

if TYPE_CHECKING:
    from blockheat.sim import ExtentMap, WindowPlan

__all__ = ["alis_steps", "cooling_steps", "extent_migration_steps", "restripe_steps", "track_alignment_steps"]

_RESTRIPE_CHUNK = 1 << 22      # stripe units per numpy pass (bounds memory for tiny units)


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
                       "bytes": int(r["sectors"]) * sb, **{k: finite(r[k]) for k in (
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

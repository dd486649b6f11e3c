"""Track boundaries of a disk spec (Lachesis's ACCESS DELAY BOUNDARIES) and the request transforms built on
them: track-aligned I/O (back-to-back sequential requests merged, then cut at track boundaries, as the
Lachesis paper transforms its DB2 traces) and its baseline, fixed-size I/O of the same total.

    tracks = track_map(spec)                 # vectorised lookups: track_of, start_of, bounds
    table = track_boundaries(spec)           # one row per mapped track (TRACK_SCHEMA)
    aligned = align_to_tracks(requests, spec)
    fixed = fixed_size_io(requests, spec, io_bytes=384 * 1024)

Choices where the paper is open (one line each, tested in tests/sim/test_tracks.py):
- merged: requests of one device with the same flags (op, background) where each starts at the sector the
  previous one of the run ended, arriving at most merge_gap_ms after it; interleaved streams merge apart;
- a merged run arrives with its first request; its pieces arrive together, in address order, and the run's
  think time (closed loop) follows its last piece;
- track-aligned pieces cover `tracks` whole tracks counted from track 0 of the disk (units of k tracks, like
  stripe units), clipped to the run; runs smaller than min_bytes pass whole;
- fixed-size pieces are io_bytes from the run's start (the last one shorter), wherever the tracks lie;
- per traced request (shape_requests / IoShaping.shape): it completes when the last piece holding any of its
  sectors completes, response = that time - its own arrival, 0 when its data was fetched before it was
  issued (a later request of a merged run, served from the host's buffer).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from blockheat.sim.records import Requests
from blockheat.sim.spec import DiskSpec

__all__ = [
    "IO_KINDS",
    "IO_REPORTS",
    "TRACK_SCHEMA",
    "IoShaping",
    "IoShapingError",
    "ShapedRequests",
    "TrackMap",
    "align_to_tracks",
    "fixed_size_io",
    "io_shaping_from_dict",
    "merge_sequential",
    "original_responses",
    "shape_requests",
    "shape_segments",
    "track_boundaries",
    "track_map",
]

#: One row per mapped track, in logical block order. skew_sectors: the physical slot (sector time after
#: the index mark) where the track's first sector passes under the head, as sim.disk.locate computes it.
TRACK_SCHEMA = pa.schema([
    pa.field("track", pa.int64(), False),
    pa.field("zone", pa.int32(), False),
    pa.field("cylinder", pa.int32(), False),
    pa.field("head", pa.int32(), False),
    pa.field("first_lbn", pa.int64(), False),
    pa.field("sectors", pa.int32(), False),
    pa.field("offset_bytes", pa.int64(), False),
    pa.field("size_bytes", pa.int64(), False),
    pa.field("skew_sectors", pa.int32(), False),
])

IO_KINDS = ("track-aligned", "fixed")
#: IoShaping.report: the run's response figures per issued piece, or per traced (original) request.
IO_REPORTS = ("pieces", "requests")


class IoShapingError(ValueError):
    """A request transform got bad parameters or requests it cannot place; the message names them."""


@dataclass(frozen=True, eq=False)
class TrackMap:
    """A spec's mapped tracks in runs: run r holds tracks first_track[r] .. first_track[r] + tracks[r] - 1,
    each of spt[r] blocks, from block first_lbn[r] on (usually one run per zone). Spare, slipped and
    management-area tracks hold no blocks, so they are absent; a track mapped only in part (behind a zone's
    empty front) is a run of its own."""

    name: str
    sector_size: int
    first_lbn: np.ndarray       # int64 [runs]
    first_track: np.ndarray     # int64 [runs]
    tracks: np.ndarray          # int64 [runs]
    spt: np.ndarray             # int64 [runs]

    @property
    def capacity_sectors(self) -> int:
        return int(self.first_lbn[-1] + self.tracks[-1] * self.spt[-1])

    @property
    def n_tracks(self) -> int:
        return int(self.first_track[-1] + self.tracks[-1])

    def _check_lbn(self, lbn: np.ndarray) -> None:
        bad = np.flatnonzero((lbn < 0) | (lbn >= self.capacity_sectors))
        if bad.size:
            raise IoShapingError(f"sector {int(lbn[bad[0]])} is outside {self.name} (0..{self.capacity_sectors - 1})")

    def track_of(self, lbn: np.ndarray | int) -> np.ndarray:
        """Global track index (0-based, unmapped tracks not counted) of each logical block."""
        x = np.asarray(lbn, dtype=np.int64)
        self._check_lbn(np.atleast_1d(x))
        z = np.searchsorted(self.first_lbn, x, side="right") - 1
        out: np.ndarray = self.first_track[z] + (x - self.first_lbn[z]) // self.spt[z]
        return out

    def start_of(self, track: np.ndarray | int) -> np.ndarray:
        """First block of each global track; track n_tracks gives the capacity (the end of the last track)."""
        t = np.asarray(track, dtype=np.int64)
        if np.any((t < 0) | (t > self.n_tracks)):
            raise IoShapingError(f"track numbers must be in 0..{self.n_tracks} for {self.name}")
        z = np.minimum(np.searchsorted(self.first_track, t, side="right") - 1, len(self.spt) - 1)
        out: np.ndarray = self.first_lbn[z] + (t - self.first_track[z]) * self.spt[z]
        return out

    def bounds(self, lbn: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """(first block, end block exclusive) of the track holding each block."""
        t = self.track_of(lbn)
        return self.start_of(t), self.start_of(t + 1)


def _runs(spec: DiskSpec) -> list[tuple[int, int, int, int, int]]:
    """(zone, first physical track in the zone, first logical sector in it, tracks, blocks per track) for
    every run of whole or partial mapped tracks, in logical block order (the pieces sim.spec compiles)."""
    out = []
    for i, z in enumerate(spec.zones):
        lspt = z.logical_per_track
        for track, sector, n in z.pieces(spec.surfaces):
            if sector:
                part = min(n, lspt - sector)
                out.append((i, track, sector, 1, part))
                track, n = track + 1, n - part
            if n:
                out.append((i, track, 0, n // lspt, lspt))
    return out


def track_map(spec: DiskSpec) -> TrackMap:
    """The spec's mapped tracks (zones as sim.spec compiles them: empty fronts, slipped and spare tracks
    unmapped, spare sectors at each track's end not counted), in logical runs: runs of equal track size
    that a slipped track separates on the platter follow each other in block numbers, so they are one."""
    merged: list[list[int]] = []
    for _zone, _first, _sector, n, size in _runs(spec):
        if merged and merged[-1][1] == size:
            merged[-1][0] += n
        else:
            merged.append([n, size])
    tracks = np.array([m[0] for m in merged], dtype=np.int64)
    spt = np.array([m[1] for m in merged], dtype=np.int64)
    first_lbn = np.concatenate([[0], np.cumsum(tracks * spt)[:-1]]).astype(np.int64)
    first_track = np.concatenate([[0], np.cumsum(tracks)[:-1]]).astype(np.int64)
    return TrackMap(spec.name, spec.sector_size, first_lbn, first_track, tracks, spt)


def track_boundaries(spec: DiskSpec) -> pa.Table:
    """Every mapped track of the spec (TRACK_SCHEMA), in logical block order: where each starts, its size
    (its mapped blocks), its cylinder and head, and the physical slot of its first mapped block (the zone's
    first-block offset plus the track skew per head switch and the cylinder skew per cylinder switch over the
    zone's physical tracks, modulo the track size)."""
    cols: dict[str, list[np.ndarray]] = {f.name: [] for f in TRACK_SCHEMA}
    track0 = lbn0 = 0
    for i, first, sector, n, size in _runs(spec):
        z = spec.zones[i]
        k = np.arange(n, dtype=np.int64)
        cz, head = np.divmod(first + k, spec.surfaces)
        spt = z.sectors_per_track
        cols["track"].append(track0 + k)
        cols["zone"].append(np.full(n, i))
        cols["cylinder"].append(z.first_cylinder + cz)
        cols["head"].append(head)
        cols["first_lbn"].append(lbn0 + k * size)
        track0, lbn0 = track0 + n, lbn0 + n * size
        cols["sectors"].append(np.full(n, size))
        cols["skew_sectors"].append((z.first_block_offset + sector + cz * ((spec.surfaces - 1) * z.track_skew
                                                                         + z.cylinder_skew)
                                     + head * z.track_skew) % spt)
    arrays = {name: np.concatenate(parts) for name, parts in cols.items() if parts}
    arrays["offset_bytes"] = arrays["first_lbn"] * spec.sector_size
    arrays["size_bytes"] = arrays["sectors"] * spec.sector_size
    return pa.Table.from_arrays([pa.array(arrays[f.name], f.type) for f in TRACK_SCHEMA], schema=TRACK_SCHEMA)


# -------------------------------------------------------------------------------------------------
# Request transforms.


def merge_sequential(requests: Requests, *, max_gap_us: float) -> tuple[Requests, np.ndarray]:
    """Back-to-back sequential requests merged into runs: a request joins the open run of its device and
    flags that ends at its first sector, if it arrives at most max_gap_us after the run's latest request.
    Returns the runs (arrival of their first request, think time of their last) and how many input
    requests each run holds."""
    runs, run_of = _merge(requests, max_gap_us)
    return runs, np.bincount(run_of, minlength=len(runs)).astype(np.int64)


def _merge(requests: Requests, max_gap_us: float) -> tuple[Requests, np.ndarray]:
    """merge_sequential's runs and each input request's run."""
    if isinstance(max_gap_us, bool) or not isinstance(max_gap_us, int | float) or not max_gap_us >= 0:
        raise IoShapingError(f"merge gap must be >= 0 us, got {max_gap_us!r}")
    run_of, heads, total, last = _merge_runs(requests.arrival_us, requests.device, requests.lbn, requests.sectors,
                                             requests.flags, float(max_gap_us))
    if total.size and total.max() > np.iinfo(np.int32).max:
        raise IoShapingError(f"a merged run of {int(total.max())} sectors is too long; lower merge_gap_ms")
    think = None if requests.think_us is None else requests.think_us[last]
    del last
    runs = Requests(requests.arrival_us[heads], requests.device[heads], requests.lbn[heads],
                    total.astype(np.int32), requests.flags[heads], think)
    return runs, run_of


_H_DEV = np.int64(-4417276706812531889)      # 0xC2B2AE3D27D4EB4F as int64
_H_FL = np.int64(0x165667B19E3779F9)
_H_END = np.int64(-7046029254386353131)      # 0x9E3779B97F4A7C15 as int64


@njit(cache=True, inline="always")
def _slot(dev: int, fl: int, end: int, mask: int) -> int:  # pragma: no cover
    return (end * _H_END + dev * _H_DEV + fl * _H_FL) & mask


@njit(cache=True, nogil=True)
def _merge_runs(arrival: np.ndarray, device: np.ndarray, lbn: np.ndarray, sectors: np.ndarray, flags: np.ndarray,
                max_gap_us: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """_merge's pass over the requests in arrival order: each request's run (numbered by first request), and
    per run its first request, its sectors in all and its last request.
    The open runs (device, flags, end sector) -> run live in an open-addressing table (linear probing,
    deletion by backward shift); entries too old to be joined (their run's last request more than max_gap_us
    before the current one: a lookup finding one starts a new run, as finding none does) are dropped when the
    table fills, so it holds about the requests of one merge gap, not of the trace."""
    n = arrival.shape[0]
    run_of = np.empty(n, dtype=np.int64)
    last_t = np.empty(max(n, 1))
    heads = np.empty(n, dtype=np.int64)
    total = np.empty(n, dtype=np.int64)
    last = np.empty(n, dtype=np.int64)
    cap = 1024
    k_dev = np.full(cap, -1, dtype=np.int64)       # -1: empty slot
    k_fl = np.zeros(cap, dtype=np.int64)
    k_end = np.zeros(cap, dtype=np.int64)
    v_run = np.zeros(cap, dtype=np.int64)
    used = 0
    runs = 0
    for i in range(n):
        t = arrival[i]
        dev = np.int64(device[i])
        fl = np.int64(flags[i])
        start = np.int64(lbn[i])
        mask = cap - 1
        h = _slot(dev, fl, start, mask)             # pop (dev, fl, start)
        r = -1
        while k_dev[h] >= 0:
            if k_dev[h] == dev and k_fl[h] == fl and k_end[h] == start:
                r = v_run[h]
                hole = h
                k = h
                while True:                         # backward-shift deletion
                    k = (k + 1) & mask
                    if k_dev[k] < 0:
                        break
                    home = _slot(k_dev[k], k_fl[k], k_end[k], mask)
                    stays = (hole < home <= k) if hole < k else (home > hole or home <= k)
                    if not stays:
                        k_dev[hole], k_fl[hole], k_end[hole], v_run[hole] = k_dev[k], k_fl[k], k_end[k], v_run[k]
                        hole = k
                k_dev[hole] = -1
                used -= 1
                break
            h = (h + 1) & mask
        if r < 0 or t - last_t[r] > max_gap_us:
            r = runs
            runs += 1
            heads[r] = i
            total[r] = 0
        last_t[r] = t
        total[r] += sectors[i]
        last[r] = i
        run_of[i] = r
        if 2 * (used + 1) > cap:                    # rebuild without the stale entries (grown if need be)
            live = 0
            for j in range(cap):
                if k_dev[j] >= 0 and t - last_t[v_run[j]] <= max_gap_us:
                    live += 1
            new_cap = cap
            while 4 * (live + 1) > new_cap:
                new_cap *= 2
            o_dev, o_fl, o_end, o_run = k_dev, k_fl, k_end, v_run
            k_dev = np.full(new_cap, -1, dtype=np.int64)
            k_fl = np.zeros(new_cap, dtype=np.int64)
            k_end = np.zeros(new_cap, dtype=np.int64)
            v_run = np.zeros(new_cap, dtype=np.int64)
            mask = new_cap - 1
            used = 0
            for j in range(cap):
                if o_dev[j] >= 0 and t - last_t[o_run[j]] <= max_gap_us:
                    g = _slot(o_dev[j], o_fl[j], o_end[j], mask)
                    while k_dev[g] >= 0:
                        g = (g + 1) & mask
                    k_dev[g], k_fl[g], k_end[g], v_run[g] = o_dev[j], o_fl[j], o_end[j], o_run[j]
                    used += 1
            cap = new_cap
        end = start + sectors[i]                    # insert (dev, fl, end) -> r, overwriting
        h = _slot(dev, fl, end, mask)
        while k_dev[h] >= 0 and not (k_dev[h] == dev and k_fl[h] == fl and k_end[h] == end):
            h = (h + 1) & mask
        if k_dev[h] < 0:
            used += 1
        k_dev[h], k_fl[h], k_end[h], v_run[h] = dev, fl, end, r
    return run_of, heads[:runs], total[:runs], last[:runs]


#: How a run is cut (_cut_kernel's kind): at track boundaries, or in fixed-size pieces from its start.
_CUT_TRACKS, _CUT_FIXED = 0, 1


@njit(cache=True, nogil=True, inline="always")
def _track_of(x: int, first_lbn: np.ndarray, first_track: np.ndarray, spt: np.ndarray) -> int:  # pragma: no cover
    z = np.searchsorted(first_lbn, x, side="right") - 1
    return first_track[z] + (x - first_lbn[z]) // spt[z]


@njit(cache=True, nogil=True, inline="always")
def _start_of(t: int, first_lbn: np.ndarray, first_track: np.ndarray, spt: np.ndarray) -> int:  # pragma: no cover
    z = min(np.searchsorted(first_track, t, side="right") - 1, len(spt) - 1)
    return first_lbn[z] + (t - first_track[z]) * spt[z]


@njit(cache=True, nogil=True)
def _track_counts(lbn: np.ndarray, sectors: np.ndarray, tracks: int, first_lbn: np.ndarray, first_track: np.ndarray,
                  spt: np.ndarray) -> np.ndarray:  # pragma: no cover
    """Units of `tracks` tracks (counted from track 0) each run [lbn, lbn + sectors) touches."""
    out = np.empty(len(lbn), np.int64)
    for r in range(len(lbn)):
        lo = lbn[r]
        out[r] = (_track_of(lo + sectors[r] - 1, first_lbn, first_track, spt) // tracks
                  - _track_of(lo, first_lbn, first_track, spt) // tracks + 1)
    return out


@njit(cache=True, nogil=True)
def _cut_kernel(lbn: np.ndarray, sectors: np.ndarray, arrival: np.ndarray, device: np.ndarray, flags: np.ndarray,
                think: np.ndarray, big: np.ndarray, counts: np.ndarray, kind: int, size: int, tracks: int,
                first_lbn: np.ndarray, first_track: np.ndarray, spt: np.ndarray, n_tracks: int,
                p_arrival: np.ndarray, p_device: np.ndarray, p_lbn: np.ndarray, p_sectors: np.ndarray,
                p_flags: np.ndarray, p_think: np.ndarray) -> None:  # pragma: no cover
    """_split's pieces written into the p_ arrays (think: empty when the runs have none)."""
    with_think = len(think) > 0
    p = 0
    for r in range(len(lbn)):
        lo = lbn[r]
        hi = lo + sectors[r]
        c = counts[r]
        unit0 = _track_of(lo, first_lbn, first_track, spt) // tracks if kind == _CUT_TRACKS and big[r] else 0
        for k in range(c):
            a, b = lo, hi
            if big[r]:
                if kind == _CUT_TRACKS:
                    unit = unit0 + k
                    s = _start_of(min(unit * tracks, n_tracks), first_lbn, first_track, spt)
                    e = _start_of(min((unit + 1) * tracks, n_tracks), first_lbn, first_track, spt)
                else:
                    s = lo + k * size
                    e = s + size
                a, b = max(lo, s), min(hi, e)
            p_arrival[p] = arrival[r]
            p_device[p] = device[r]
            p_flags[p] = flags[r]
            p_lbn[p] = a
            p_sectors[p] = b - a
            if with_think:
                p_think[p] = think[r] if k == c - 1 else 0.0
            p += 1


def _split(runs: Requests, big: np.ndarray, counts: np.ndarray, kind: int, size: int = 0, tracks: int = 1,
           m: TrackMap | None = None) -> _Cut:
    """Cut each big run (its sectors from runs.lbn on) into counts pieces: with kind _CUT_TRACKS piece k spans
    the (k + 1)-th unit of `tracks` tracks the run touches, with _CUT_FIXED `size` sectors from the run's start +
    k x size; clipped to the run. Other runs stay whole. The pieces (in run order) arrive with their run, the
    run's think time follows its last piece."""
    counts = np.where(big, counts, 1).astype(np.int64)
    total = int(counts.sum())
    arrival, device = np.empty(total), np.empty(total, np.int32)
    lbn, sectors, flags = np.empty(total, np.int64), np.empty(total, np.int32), np.empty(total, np.int8)
    think = np.zeros(total) if runs.think_us is not None else np.zeros(0)
    zones = (m.first_lbn, m.first_track, m.spt, m.n_tracks) if m is not None else \
        (np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1, np.int64), 0)
    _cut_kernel(runs.lbn, runs.sectors, runs.arrival_us, runs.device, runs.flags,
                runs.think_us if runs.think_us is not None else np.zeros(0), big, counts, kind, size, tracks,
                zones[0], zones[1], zones[2], zones[3], arrival, device, lbn, sectors, flags, think)
    return _Cut(Requests(arrival, device, lbn, sectors, flags, think if runs.think_us is not None else None),
                runs.lbn, counts)


@dataclass(frozen=True, eq=False)
class _Cut:
    """Pieces, the first sector of the runs they were cut from and how many pieces each run has (pieces in run
    order); only the runs' starts are kept, so the runs' other columns are freed once cut."""

    pieces: Requests
    run_start: np.ndarray       # int64 [runs]
    counts: np.ndarray


def _prepare(requests: Requests, spec: DiskSpec, merge: bool, merge_gap_ms: float) -> tuple[Requests, np.ndarray]:
    if len(requests) and int((requests.lbn + requests.sectors).max()) > spec.capacity_sectors:
        i = int(np.argmax(requests.lbn + requests.sectors))
        raise IoShapingError(f"request {i} ends at sector {int(requests.lbn[i] + requests.sectors[i])}, beyond "
                             f"the capacity {spec.capacity_sectors} of {spec.name}")
    if not merge:
        return requests, np.arange(len(requests), dtype=np.int64)
    runs, run_of = _merge(requests, merge_gap_ms * 1000.0)
    return runs, run_of


def align_to_tracks(requests: Requests, spec: DiskSpec, *, tracks: int = 1, merge: bool = True,
                    merge_gap_ms: float = 10.0, min_bytes: int = 0) -> Requests:
    """Lachesis's trace transformation: back-to-back sequential requests merged into one large I/O (merge),
    then cut at track boundaries into I/Os of `tracks` whole tracks (the first and last clipped to the run).
    Addresses are the disk's own (the as-traced layout). Runs smaller than min_bytes pass whole.

        aligned = align_to_tracks(requests, load("maxtor_atlas_10k3"))    # one I/O per track touched
    """
    return _align_to_tracks(requests, spec, tracks, merge, merge_gap_ms, min_bytes)[0].pieces


def _align_to_tracks(requests: Requests, spec: DiskSpec, tracks: int, merge: bool, merge_gap_ms: float,
                     min_bytes: int) -> tuple[_Cut, np.ndarray]:
    _check_int("tracks", tracks, 1)
    _check_int("min_bytes", min_bytes, 0)
    runs, run_of = _prepare(requests, spec, merge, merge_gap_ms)
    if len(runs) == 0:
        return _Cut(runs, runs.lbn, np.zeros(0, np.int64)), run_of
    m = track_map(spec)
    if int(runs.lbn.min()) < 0:
        m.track_of(runs.lbn.min())                          # raises, naming the sector
    counts = _track_counts(runs.lbn, runs.sectors, tracks, m.first_lbn, m.first_track, m.spt)
    big = runs.sectors.astype(np.int64) * spec.sector_size >= min_bytes
    return _split(runs, big, counts, _CUT_TRACKS, tracks=tracks, m=m), run_of


def fixed_size_io(requests: Requests, spec: DiskSpec, *, io_bytes: int, merge: bool = True,
                  merge_gap_ms: float = 10.0, min_bytes: int = 0) -> Requests:
    """The baseline of align_to_tracks: merged runs cut into I/Os of io_bytes from each run's start (the last
    one shorter), wherever the track boundaries fall. io_bytes must be a whole number of sectors.

        unaligned = fixed_size_io(requests, spec, io_bytes=384 * 1024)   # DB2's 768-block prefetch
    """
    return _fixed_size_io(requests, spec, io_bytes, merge, merge_gap_ms, min_bytes)[0].pieces


def _fixed_size_io(requests: Requests, spec: DiskSpec, io_bytes: int, merge: bool, merge_gap_ms: float,
                   min_bytes: int) -> tuple[_Cut, np.ndarray]:
    _check_int("io_bytes", io_bytes, 1)
    _check_int("min_bytes", min_bytes, 0)
    if io_bytes % spec.sector_size:
        raise IoShapingError(f"io_bytes must be a multiple of the sector size {spec.sector_size} of {spec.name}, "
                             f"got {io_bytes}")
    size = io_bytes // spec.sector_size
    runs, run_of = _prepare(requests, spec, merge, merge_gap_ms)
    if len(runs) == 0:
        return _Cut(runs, runs.lbn, np.zeros(0, np.int64)), run_of
    big = runs.sectors.astype(np.int64) * spec.sector_size >= min_bytes
    return _split(runs, big, -(-runs.sectors.astype(np.int64) // size), _CUT_FIXED, size=size), run_of


def _check_int(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise IoShapingError(f"{name} must be an integer >= {least}, got {value!r}")


@dataclass(frozen=True, eq=False)
class ShapedRequests:
    """A transform's pieces (what the simulator replays) and, per traced request in input order, the first
    and last piece holding any of its sectors (pieces of one request are consecutive)."""

    pieces: Requests
    first_piece: np.ndarray     # int64 [originals]
    last_piece: np.ndarray      # int64 [originals]


@njit(cache=True, nogil=True)
def _origins_kernel(lbn: np.ndarray, sectors: np.ndarray, run_of: np.ndarray, run_start: np.ndarray,
                    counts: np.ndarray, p_lbn: np.ndarray, p_sectors: np.ndarray, first: np.ndarray,
                    last: np.ndarray) -> None:  # pragma: no cover
    """_origins' first and last piece of each request: binary searches among its run's pieces (consecutive, in
    address order, covering the run)."""
    p_first = np.empty(len(counts) + 1, np.int64)
    p_first[0] = 0
    for r in range(len(counts)):
        p_first[r + 1] = p_first[r] + counts[r]
    for q in range(len(lbn)):
        r = run_of[q]
        lo_rel = lbn[q] - run_start[r]
        end_rel = lo_rel + sectors[q]
        a, b = p_first[r], p_first[r + 1]          # the first piece ending after lo_rel
        while a < b:
            mid = (a + b) // 2
            if p_lbn[mid] - run_start[r] + p_sectors[mid] > lo_rel:
                b = mid
            else:
                a = mid + 1
        first[q] = a
        a, b = p_first[r], p_first[r + 1]          # the last piece starting before end_rel
        while a < b:
            mid = (a + b) // 2
            if p_lbn[mid] - run_start[r] < end_rel:
                a = mid + 1
            else:
                b = mid
        last[q] = a - 1


def _origins(requests: Requests, cut: _Cut, run_of: np.ndarray) -> ShapedRequests:
    """Map each traced request to its pieces: within its run, the pieces ending after its first sector up
    to the last one starting before its end."""
    n = len(requests)
    first, last = np.empty(n, np.int64), np.empty(n, np.int64)
    if n:
        _origins_kernel(requests.lbn, requests.sectors, np.asarray(run_of, np.int64), cut.run_start, cut.counts,
                        cut.pieces.lbn, cut.pieces.sectors, first, last)
    return ShapedRequests(cut.pieces, first, last)


def shape_requests(requests: Requests, spec: DiskSpec, io: IoShaping) -> ShapedRequests:
    """io's transform of `requests` with each traced request's pieces (ShapedRequests), for reporting
    per traced request (original_responses).

        shaped = shape_requests(requests, spec, IoShaping("track-aligned"))
        shaped.pieces                    # what align_to_tracks returns
    """
    if io.kind == "track-aligned":
        cut, run_of = _align_to_tracks(requests, spec, io.tracks, io.merge, io.merge_gap_ms, io.min_bytes)
    else:
        assert io.io_bytes is not None
        cut, run_of = _fixed_size_io(requests, spec, io.io_bytes, io.merge, io.merge_gap_ms, io.min_bytes)
    return _origins(requests, cut, run_of)


def shape_segments(chunks: Iterable[Requests], spec: DiskSpec, io: IoShaping) -> Iterator[tuple[Requests,
                                                                                                 ShapedRequests]]:
    """shape_requests over requests read in chunks (in arrival order): they are cut into segments no run of
    merged requests spans, and each segment is shaped alone, which shapes it as the whole would be; yields
    (segment, its ShapedRequests). A segment ends where the next request arrives more than merge_gap_ms after it,
    or, where no such gap falls in the requests held, before the first run that starts after every earlier run
    has ended and can take no later request (_closed_cut). A segment holds about a chunk; only one merged run
    longer than the chunks keeps more."""
    gap_us = io.merge_gap_ms * 1000.0 if io.merge else -math.inf
    held: list[Requests] = []
    for chunk in chunks:
        if not len(chunk):
            continue
        held.append(chunk)
        pending = Requests.concat(held)
        gaps = np.flatnonzero(np.diff(pending.arrival_us) > gap_us)
        cut = int(gaps[-1]) + 1 if gaps.size else _closed_cut(pending, gap_us)
        if cut:
            segment = pending.rows(0, cut)
            yield segment, io.shape(segment, spec)
            held = [pending.rows(cut, len(pending))]
        else:
            held = [pending]
    if held:
        segment = Requests.concat(held)
        yield segment, io.shape(segment, spec)


def _closed_cut(requests: Requests, gap_us: float) -> int:
    """The largest index c > 0 at which the requests can be cut with the merge unchanged: every run that starts
    before c ends before c, and its last request arrived more than gap_us before the last one held, so no later
    request joins it; 0 when there is none."""
    _, heads, _, last = _merge_runs(requests.arrival_us, requests.device, requests.lbn, requests.sectors,
                                    requests.flags, float(gap_us))
    if len(heads) < 2:
        return 0
    done = np.logical_and.accumulate(requests.arrival_us[last] < requests.arrival_us[-1] - gap_us)
    reach = np.maximum.accumulate(last)
    ok = np.flatnonzero(done[:-1] & (reach[:-1] < heads[1:]))     # cut before run r + 1
    return int(heads[ok[-1] + 1]) if ok.size else 0


def original_responses(shaped: ShapedRequests, original_arrival_us: np.ndarray, piece_arrival_us: np.ndarray,
                       piece_response_us: np.ndarray) -> np.ndarray:
    """Response (us) of each traced request: the latest completion (arrival + response) of its pieces minus
    its own arrival, at least 0 (data fetched before the request was issued); NaN when a piece never
    completed. Arrivals on the simulated clock (sped up like the pieces')."""
    n = len(shaped.first_piece)
    if n == 0:
        return np.zeros(0)
    if len(piece_arrival_us) != len(shaped.pieces) or len(piece_response_us) != len(shaped.pieces):
        raise IoShapingError(f"{len(shaped.pieces)} pieces, but {len(piece_arrival_us)} arrivals and "
                             f"{len(piece_response_us)} responses")
    done = np.append(np.asarray(piece_arrival_us, np.float64) + np.asarray(piece_response_us, np.float64), 0.0)
    # reduceat over [first, last + 1) pairs: even outputs are each request's max (NaN propagates).
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2], bounds[1::2] = shaped.first_piece, shaped.last_piece + 1
    latest = np.maximum.reduceat(done, bounds)[0::2]
    out: np.ndarray = np.maximum(latest - np.asarray(original_arrival_us, np.float64), 0.0)
    return out


@dataclass(frozen=True)
class IoShaping:
    """A scenario's request transform (the grid's `io` key), applied to the trace before background traffic
    is mixed in: `{"kind": "track-aligned", "tracks"?, "merge"?, "merge_gap_ms"?, "min_bytes"?}` or
    `{"kind": "fixed", "io_bytes", "merge"?, "merge_gap_ms"?, "min_bytes"?}`; `"report": "requests"` gives
    the run's response figures per traced request (original_responses) instead of per piece."""

    kind: str
    io_bytes: int | None = None
    tracks: int = 1
    merge: bool = True
    merge_gap_ms: float = 10.0
    min_bytes: int = 0
    report: str = "pieces"

    def __post_init__(self) -> None:
        if self.kind not in IO_KINDS:
            raise IoShapingError(f"io: kind must be one of {list(IO_KINDS)}, got {self.kind!r}")
        if self.kind == "fixed" and self.io_bytes is None:
            raise IoShapingError("io 'fixed' needs io_bytes")
        if self.kind == "track-aligned" and self.io_bytes is not None:
            raise IoShapingError("io 'track-aligned' sizes its I/Os in whole tracks: give 'tracks', not io_bytes")
        if self.kind == "fixed" and self.tracks != 1:
            raise IoShapingError("io 'fixed' sizes its I/Os in bytes: give 'io_bytes', not tracks")
        if not isinstance(self.merge, bool):
            raise IoShapingError(f"io: merge must be true or false, got {self.merge!r}")
        if self.report not in IO_REPORTS:
            raise IoShapingError(f"io: report must be one of {list(IO_REPORTS)}, got {self.report!r}")
        if isinstance(self.merge_gap_ms, bool) or not isinstance(self.merge_gap_ms, int | float) \
                or not self.merge_gap_ms >= 0:
            raise IoShapingError(f"io: merge_gap_ms must be a number >= 0, got {self.merge_gap_ms!r}")
        _check_int("io: tracks", self.tracks, 1)
        _check_int("io: min_bytes", self.min_bytes, 0)
        if self.io_bytes is not None:
            _check_int("io: io_bytes", self.io_bytes, 1)

    def shape(self, requests: Requests, spec: DiskSpec) -> ShapedRequests:
        """The pieces with each traced request's pieces (shape_requests)."""
        return shape_requests(requests, spec, self)

    def apply(self, requests: Requests, spec: DiskSpec) -> Requests:
        if self.kind == "track-aligned":
            return align_to_tracks(requests, spec, tracks=self.tracks, merge=self.merge,
                                   merge_gap_ms=self.merge_gap_ms, min_bytes=self.min_bytes)
        assert self.io_bytes is not None
        return fixed_size_io(requests, spec, io_bytes=self.io_bytes, merge=self.merge,
                             merge_gap_ms=self.merge_gap_ms, min_bytes=self.min_bytes)


_IO_KEYS = tuple(f.name for f in fields(IoShaping))


def io_shaping_from_dict(data: Any) -> IoShaping | None:
    """The grid's `io` value (None: requests as traced) -> IoShaping; errors name the bad key or value."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise IoShapingError(f"io must be an object {{\"kind\": {' | '.join(IO_KINDS)}, ...}}, got {data!r}")
    extra = sorted(set(data) - set(_IO_KEYS))
    if extra:
        raise IoShapingError(f"io: unknown key(s) {extra}; allowed: {sorted(_IO_KEYS)}")
    return IoShaping(**data)

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa

from sim.records import Requests
from sim.spec import DiskSpec

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
    """A spec's mapped tracks by zone: zone z holds tracks first_track[z] .. first_track[z] + tracks[z] - 1,
    each of spt[z] sectors, from block first_lbn[z] on. Spare tracks hold no blocks, so they are absent."""

    name: str
    sector_size: int
    first_lbn: np.ndarray       # int64 [zones]
    first_track: np.ndarray     # int64 [zones]
    tracks: np.ndarray          # int64 [zones]
    spt: np.ndarray             # int64 [zones]

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
        """Global track index (0-based, spare tracks not counted) of each logical block."""
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


def track_map(spec: DiskSpec) -> TrackMap:
    """The spec's tracks per zone (zones as sim.spec compiles them: spare tracks end each zone, unmapped)."""
    tracks = np.array([z.cylinders * spec.surfaces - z.spare_tracks for z in spec.zones], dtype=np.int64)
    spt = np.array([z.sectors_per_track for z in spec.zones], dtype=np.int64)
    first_lbn = np.concatenate([[0], np.cumsum(tracks * spt)[:-1]]).astype(np.int64)
    first_track = np.concatenate([[0], np.cumsum(tracks)[:-1]]).astype(np.int64)
    return TrackMap(spec.name, spec.sector_size, first_lbn, first_track, tracks, spt)


def track_boundaries(spec: DiskSpec) -> pa.Table:
    """Every mapped track of the spec (TRACK_SCHEMA), in logical block order: where each starts, its size,
    its cylinder and head, and the skew of its first sector (from 0 at the start of each zone, growing by
    the track skew per head switch and the cylinder skew per cylinder switch, modulo the track size)."""
    cols: dict[str, list[np.ndarray]] = {f.name: [] for f in TRACK_SCHEMA}
    m = track_map(spec)
    for i, z in enumerate(spec.zones):
        k = np.arange(m.tracks[i], dtype=np.int64)
        cz, head = np.divmod(k, spec.surfaces)
        spt = z.sectors_per_track
        cols["track"].append(m.first_track[i] + k)
        cols["zone"].append(np.full(len(k), i))
        cols["cylinder"].append(z.first_cylinder + cz)
        cols["head"].append(head)
        cols["first_lbn"].append(m.first_lbn[i] + k * spt)
        cols["sectors"].append(np.full(len(k), spt))
        cols["skew_sectors"].append((cz * ((spec.surfaces - 1) * z.track_skew + z.cylinder_skew)
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
    runs, counts, _ = _merge(requests, max_gap_us)
    return runs, counts


def _merge(requests: Requests, max_gap_us: float) -> tuple[Requests, np.ndarray, np.ndarray]:
    """merge_sequential plus each input request's run."""
    if isinstance(max_gap_us, bool) or not isinstance(max_gap_us, int | float) or not max_gap_us >= 0:
        raise IoShapingError(f"merge gap must be >= 0 us, got {max_gap_us!r}")
    n = len(requests)
    run_of = np.empty(n, dtype=np.int64)
    open_runs: dict[tuple[int, int, int], int] = {}     # (device, flags, end sector) -> run
    last_t: list[float] = []
    for i, (t, dev, lbn, sec, fl) in enumerate(zip(requests.arrival_us.tolist(), requests.device.tolist(),
                                                   requests.lbn.tolist(), requests.sectors.tolist(),
                                                   requests.flags.tolist(), strict=True)):
        r = open_runs.pop((dev, fl, lbn), -1)
        if r < 0 or t - last_t[r] > max_gap_us:
            r = len(last_t)
            last_t.append(t)
        last_t[r] = t
        run_of[i] = r
        open_runs[(dev, fl, lbn + sec)] = r
    # Runs are numbered in order of their first request, so a stable sort keeps each run's requests in order.
    order = np.argsort(run_of, kind="stable")
    starts = np.searchsorted(run_of[order], np.arange(len(last_t)))
    counts = np.diff(np.r_[starts, n]).astype(np.int64)
    total = np.add.reduceat(requests.sectors.astype(np.int64)[order], starts) if n else np.zeros(0, np.int64)
    if total.size and total.max() > np.iinfo(np.int32).max:
        raise IoShapingError(f"a merged run of {int(total.max())} sectors is too long; lower merge_gap_ms")
    heads = order[starts]
    think = None if requests.think_us is None else requests.think_us[order[starts + counts - 1]]
    runs = Requests(requests.arrival_us[heads], requests.device[heads], requests.lbn[heads],
                    total.astype(np.int32), requests.flags[heads], think)
    return runs, counts, run_of


def _pieces(runs: Requests, cut_start: np.ndarray, cut_end: np.ndarray, counts: np.ndarray) -> Requests:
    """The runs cut into counts[i] pieces each, piece j of run i spanning [cut_start, cut_end) (flat)."""
    idx = np.repeat(np.arange(len(runs)), counts)
    think = None
    if runs.think_us is not None:
        last = np.cumsum(counts) - 1
        think = np.zeros(len(idx))
        think[last] = runs.think_us
    return Requests(runs.arrival_us[idx], runs.device[idx], cut_start.astype(np.int64),
                    (cut_end - cut_start).astype(np.int32), runs.flags[idx], think)


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., counts[i] - 1 for each i, concatenated."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    out: np.ndarray = np.arange(total, dtype=np.int64) - starts
    return out


def _split(runs: Requests, big: np.ndarray, first: np.ndarray, end: np.ndarray, counts: np.ndarray,
           starts_of: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]) -> _Cut:
    """Cut each big run [first, end) into counts pieces, piece k of run r spanning starts_of(r, k) clipped to
    the run; other runs stay whole."""
    counts = np.where(big, counts, 1)
    rank = _ranks(counts)
    run = np.repeat(np.arange(len(runs)), counts)
    lo = np.repeat(first, counts)
    hi = np.repeat(end, counts)
    s, e = starts_of(run, rank)
    cut_start = np.where(np.repeat(big, counts), np.maximum(lo, s), lo)
    cut_end = np.where(np.repeat(big, counts), np.minimum(hi, e), hi)
    return _Cut(_pieces(runs, cut_start, cut_end, counts), runs, counts)


@dataclass(frozen=True, eq=False)
class _Cut:
    """Pieces, the runs they were cut from and how many pieces each run has (pieces in run order)."""

    pieces: Requests
    runs: Requests
    counts: np.ndarray


def _prepare(requests: Requests, spec: DiskSpec, merge: bool, merge_gap_ms: float) -> tuple[Requests, np.ndarray]:
    if len(requests) and int((requests.lbn + requests.sectors).max()) > spec.capacity_sectors:
        i = int(np.argmax(requests.lbn + requests.sectors))
        raise IoShapingError(f"request {i} ends at sector {int(requests.lbn[i] + requests.sectors[i])}, beyond "
                             f"the capacity {spec.capacity_sectors} of {spec.name}")
    if not merge:
        return requests, np.arange(len(requests), dtype=np.int64)
    runs, _, run_of = _merge(requests, merge_gap_ms * 1000.0)
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
        return _Cut(runs, runs, np.zeros(0, np.int64)), run_of
    m = track_map(spec)
    first = runs.lbn
    end = runs.lbn + runs.sectors
    unit0 = m.track_of(first) // tracks
    unit1 = m.track_of(end - 1) // tracks
    big = runs.sectors.astype(np.int64) * spec.sector_size >= min_bytes

    def starts_of(run: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        unit = unit0[run] + rank
        return m.start_of(np.minimum(unit * tracks, m.n_tracks)), m.start_of(np.minimum((unit + 1) * tracks,
                                                                                        m.n_tracks))

    return _split(runs, big, first, end, unit1 - unit0 + 1, starts_of), run_of


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
        return _Cut(runs, runs, np.zeros(0, np.int64)), run_of
    first = runs.lbn
    end = runs.lbn + runs.sectors
    big = runs.sectors.astype(np.int64) * spec.sector_size >= min_bytes

    def starts_of(run: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = first[run] + rank * size
        return s, s + size

    return _split(runs, big, first, end, -(-runs.sectors.astype(np.int64) // size), starts_of), run_of


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


def _origins(requests: Requests, cut: _Cut, run_of: np.ndarray) -> ShapedRequests:
    """Map each traced request to its pieces: within its run, the pieces ending after its first sector up
    to the last one starting before its end (run-relative keys: run * 2^32 + offset, runs < 2^31 sectors)."""
    if len(requests) == 0:
        return ShapedRequests(cut.pieces, np.zeros(0, np.int64), np.zeros(0, np.int64))
    run_start = cut.runs.lbn.astype(np.int64)
    piece_run = np.repeat(np.arange(len(cut.runs), dtype=np.int64), cut.counts)
    base = piece_run << 32
    piece_lo = base + (cut.pieces.lbn - run_start[piece_run])
    piece_hi = piece_lo + cut.pieces.sectors.astype(np.int64)
    key = run_of << 32
    lo = key + (requests.lbn - run_start[run_of])
    hi = lo + requests.sectors.astype(np.int64)
    first = np.searchsorted(piece_hi, lo, side="right").astype(np.int64)
    last = (np.searchsorted(piece_lo, hi, side="left") - 1).astype(np.int64)
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

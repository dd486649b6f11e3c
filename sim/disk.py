"""Service-time model of one disk, compiled with numba: head position, seek, rotation, sector-by-track
transfer with head and cylinder switches, overheads, bus transfer, and the segmented read-ahead cache.

All functions take the arrays of a compiled spec (sim.spec.DiskArrays) and the per-disk state rows the
engine owns; times are microseconds (float64) on the simulation clock. Compiled without reference counting
like the engine's loop that calls them (sim._kernel's docstring says why).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.spec import (
    P_AVG_SEEK_US,
    P_BUS_US,
    P_BUS_WRITE_US,
    P_CAPACITY,
    P_HEAD_SWITCH_US,
    P_OH_HIT_US,
    P_OH_MISS_US,
    P_OH_WRITE_US,
    P_READ_AHEAD,
    P_READ_BUS_START,
    P_ROT_US,
    P_SEG_SECTORS,
    P_SEGMENTS,
    P_SURFACES,
    P_WRITE_BACK,
    P_WRITE_SETTLE_US,
    Z_CSKEW,
    Z_FIRST_CYL,
    Z_FIRST_LBN,
    Z_SPT,
    Z_TSKEW,
)

# Service-time modes.
MODE_DETAILED, MODE_EXPECTED, MODE_CONSTANT, MODE_EXPONENTIAL = 0, 1, 2, 3
MODES = {"detailed": MODE_DETAILED, "expected": MODE_EXPECTED, "constant": MODE_CONSTANT,
         "exponential": MODE_EXPONENTIAL}

# Per-disk integer state columns (engine array `di`), shared with the engine.
DI_CYL, DI_HEAD, DI_RA_SEG, DI_LRU = 0, 1, 2, 3
# Per-disk float state columns (engine array `df`): the active read-ahead stream; DF_PHASE and DF_CLOCK (later
# columns of the same array, sim._kernel) give the disk its own clock t' = t x clock + phase (us), 0 and 1 on
# every disk for synchronized spindles.
DF_RA_T0, DF_RA_L0, DF_RA_TARGET, DF_RA_RATE = 0, 1, 2, 3
DF_PHASE, DF_CLOCK = 7, 8
# Cache segment columns (engine array `seg`, float64 [disks, segments, 3]).
SG_START, SG_END, SG_LRU = 0, 1, 2

# Outcome flags returned with a service time.
F_HIT, F_PHYSICAL, F_DESTAGE = 1, 2, 4


@njit(cache=True, nogil=True, _nrt=False)
def zone_of(zones: np.ndarray, lbn: int) -> int:  # pragma: no cover
    """Index of the zone holding logical block lbn (binary search over the zones' first blocks)."""
    lo = 0
    hi = zones.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if zones[mid, Z_FIRST_LBN] <= lbn:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True, nogil=True, _nrt=False)
def locate(zones: np.ndarray, surfaces: int, lbn: int) -> tuple[int, int, int, int, int]:  # pragma: no cover
    """Logical block -> (cylinder, head, sector in track, sectors per track, physical slot of sector 0).

    Sector s of a track passes under the head at slot (s + skew) mod spt; the skew of a track grows by the
    track skew at each head switch and by the cylinder skew at each cylinder switch, from 0 at the start of
    its zone.
    """
    z = zone_of(zones, lbn)
    off = lbn - zones[z, Z_FIRST_LBN]
    spt = zones[z, Z_SPT]
    track = off // spt
    s = off - track * spt
    cz = track // surfaces
    head = track - cz * surfaces
    skew = (cz * ((surfaces - 1) * zones[z, Z_TSKEW] + zones[z, Z_CSKEW]) + head * zones[z, Z_TSKEW]) % spt
    return zones[z, Z_FIRST_CYL] + cz, head, s, spt, skew


@njit(cache=True, nogil=True, _nrt=False)
def cylinder_of(zones: np.ndarray, surfaces: int, lbn: int) -> int:  # pragma: no cover
    return locate(zones, surfaces, lbn)[0]


@njit(cache=True, nogil=True, _nrt=False)
def stream_rate(zones: np.ndarray, params: np.ndarray, lbn: int) -> float:  # pragma: no cover
    """Sequential media rate (sectors per us) in the zone of lbn: each track costs a revolution plus its
    track skew (which the skew sizes to cover the head switch)."""
    z = zone_of(zones, lbn)
    spt = zones[z, Z_SPT]
    return float(spt / (params[P_ROT_US] * (spt + zones[z, Z_TSKEW]) / spt))


@njit(cache=True, nogil=True, _nrt=False)
def media_access(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, cur_cyl: int, cur_head: int,
                 t: float, earliest: float, lbn: int, n: int, is_write: bool,
                 zero_latency: bool) -> tuple[float, float, int, int]:  # pragma: no cover
    """Position the head from (cur_cyl, cur_head) starting at time t, then transfer n sectors from lbn.

    Rotation is read from the clock: the platter angle at time t is (t mod rotation) / rotation, with
    sector slot 0 at angle 0. `earliest` holds the first sector back (a write waits for its data on the
    bus). Returns (time the first sector is done, time the last sector is done, final cylinder, head).
    """
    rot = params[P_ROT_US]
    surfaces = int(params[P_SURFACES])
    hs = params[P_HEAD_SWITCH_US]
    settle = params[P_WRITE_SETTLE_US] if is_write else 0.0
    cyl, head, s, spt, skew = locate(zones, surfaces, lbn)
    dist = abs(cyl - cur_cyl)
    if dist > 0:
        t += seek_us[dist]
    elif head != cur_head:
        t += hs
    t += settle
    if t < earliest:
        t = earliest
    t_first = -1.0
    remaining = n
    while True:
        k = min(remaining, spt - s)
        st = rot / spt
        pos = (t % rot) / st                    # head position in slots, [0, spt)
        rel = pos - ((s + skew) % spt)          # slots past the start of the first wanted sector
        if rel < 0.0:
            rel += spt
        j = math.ceil(rel)
        if zero_latency and k > 1 and 0 < j < k:
            # Lands inside the wanted run: read j..k-1, let the gap pass, read s..j-1 (one revolution).
            t += (j - rel) * st
            first = t + st
            t += spt * st
        else:
            wait = spt - rel if rel > 0.0 else 0.0
            t += wait * st
            first = t + st
            t += k * st
        if t_first < 0.0:
            t_first = first
        remaining -= k
        if remaining <= 0:
            break
        lbn += k
        ncyl, nhead, s, spt, skew = locate(zones, surfaces, lbn)
        if ncyl != cyl:
            t += seek_us[abs(ncyl - cyl)]
        else:
            t += hs
        t += settle
        cyl = ncyl
        head = nhead
    return t_first, t, cyl, head


@njit(cache=True, nogil=True, _nrt=False)
def disk_access(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray, d: int,
                t: float, earliest: float, lbn: int, n: int, is_write: bool,
                zero_latency: bool) -> tuple[float, float]:  # pragma: no cover
    """media_access on disk d from its head position and on its own clock (t' = t x clock + phase: the
    spindle's angle and speed), moving the head; returns (first sector done, last sector done) in run time."""
    ph = df[d, DF_PHASE]
    c = df[d, DF_CLOCK]
    tf, te, cyl, head = media_access(zones, seek_us, params, di[d, DI_CYL], di[d, DI_HEAD], t * c + ph,
                                     earliest * c + ph, lbn, n, is_write, zero_latency)
    di[d, DI_CYL] = cyl
    di[d, DI_HEAD] = head
    return (tf - ph) / c, (te - ph) / c


@njit(cache=True, nogil=True, _nrt=False)
def expected_service(zones: np.ndarray, params: np.ndarray, lbn: int, n: int,
                     is_write: bool) -> float:  # pragma: no cover
    """Expected-value mode: overhead + mean seek + half a rotation + n sectors at the zone's media rate."""
    spt = locate(zones, int(params[P_SURFACES]), lbn)[3]
    oh = params[P_OH_WRITE_US] if is_write else params[P_OH_MISS_US]
    rot = params[P_ROT_US]
    return float(oh + params[P_AVG_SEEK_US] + 0.5 * rot + n * rot / spt)


@njit(cache=True, nogil=True, _nrt=False)
def _ra_progress(df: np.ndarray, d: int, now: float) -> float:  # pragma: no cover
    """First sector not yet read by disk d's read-ahead stream at time now."""
    t0 = df[d, DF_RA_T0]
    if now <= t0:
        return float(df[d, DF_RA_L0])
    p = df[d, DF_RA_L0] + math.floor((now - t0) * df[d, DF_RA_RATE])
    return float(min(p, df[d, DF_RA_TARGET]))


@njit(cache=True, nogil=True, _nrt=False)
def settle_read_ahead(zones: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray, seg: np.ndarray,
                      d: int, now: float, stop: bool) -> None:  # pragma: no cover
    """Bring disk d's read-ahead up to time now; with stop, abort it (the head stays where it got to)."""
    s = di[d, DI_RA_SEG]
    if s < 0:
        return
    p = _ra_progress(df, d, now)
    seg[d, s, SG_END] = p
    if stop or p >= df[d, DF_RA_TARGET]:
        last = int(p) - 1
        if last >= df[d, DF_RA_L0]:
            cyl, head, _s, _spt, _skew = locate(zones, int(params[P_SURFACES]), last)
            di[d, DI_CYL] = cyl
            di[d, DI_HEAD] = head
        di[d, DI_RA_SEG] = -1


@njit(cache=True, nogil=True, _nrt=False)
def _touch(di: np.ndarray, seg: np.ndarray, d: int, s: int) -> None:  # pragma: no cover
    di[d, DI_LRU] += 1
    seg[d, s, SG_LRU] = di[d, DI_LRU]


@njit(cache=True, nogil=True, _nrt=False)
def _extend_read_ahead(params: np.ndarray, df: np.ndarray, seg: np.ndarray, d: int, s: int,
                       want_end: float) -> None:  # pragma: no cover
    """Push the active stream's target to want_end + read-ahead, sliding the segment window forward."""
    target = max(want_end, min(want_end + params[P_READ_AHEAD], params[P_CAPACITY]))
    if target > df[d, DF_RA_TARGET]:
        df[d, DF_RA_TARGET] = target
    size = params[P_SEG_SECTORS]
    if df[d, DF_RA_TARGET] - seg[d, s, SG_START] > size:
        seg[d, s, SG_START] = df[d, DF_RA_TARGET] - size


@njit(cache=True, nogil=True, _nrt=False)
def _start_stream(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                  d: int, s: int, t: float, l0: float) -> None:  # pragma: no cover
    """Start read-ahead into segment s at sector l0: position the head from where it is at time t."""
    surfaces = int(params[P_SURFACES])
    first = int(l0)
    tf, _te = disk_access(zones, seek_us, params, di, df, d, t, t, first, 1, False, False)
    _c, _h, _s, spt, _k = locate(zones, surfaces, first)
    di[d, DI_RA_SEG] = s
    df[d, DF_RA_T0] = tf - params[P_ROT_US] / spt
    df[d, DF_RA_L0] = l0
    df[d, DF_RA_TARGET] = l0
    df[d, DF_RA_RATE] = stream_rate(zones, params, first)


@njit(cache=True, nogil=True, _nrt=False)
def _stream_service(params: np.ndarray, df: np.ndarray, d: int, now: float, end: float, n: int,
                    oh: float) -> float:  # pragma: no cover
    """Service of a read fed by the active stream: bus transfer overlapped with the stream's arrival."""
    t_data = df[d, DF_RA_T0] + (end - df[d, DF_RA_L0]) / df[d, DF_RA_RATE]
    bus = params[P_BUS_US]
    return float(max(oh + n * bus, t_data - now + bus))


@njit(cache=True, nogil=True, _nrt=False)
def detailed_service(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                     seg: np.ndarray, d: int, now: float, lbn: int, n: int, is_write: bool, destage: bool,
                     zero_latency: bool) -> tuple[float, int]:  # pragma: no cover
    """Serve one sub-request on disk d starting at now; returns (service time us, outcome flags).

    Reads, in order: a full hit in a segment costs the hit overhead and the bus transfer (and restarts
    read-ahead when less than the read-ahead amount is left beyond the request); a read starting inside
    the active read-ahead stream waits for the stream; a read starting inside or right after a cached
    segment restarts the stream there (a partial hit, counted as physical); anything else is a miss: abort
    read-ahead, read from the media, start the bus transfer once read_bus_start_fraction of the sectors are
    buffered, and start read-ahead after the last sector into the least recently used segment.
    Writes invalidate overlapping segments; with write-back they finish after the bus transfer and leave a
    destage job (F_DESTAGE); without, the media write may not overtake the data on the bus.
    """
    nseg = int(params[P_SEGMENTS])
    end = lbn + n
    cap = params[P_CAPACITY]
    if destage:
        settle_read_ahead(zones, params, di, df, seg, d, now, True)
        tf, te = disk_access(zones, seek_us, params, di, df, d, now, now, lbn, n, True, False)
        return te - now, F_PHYSICAL
    if not is_write:
        bus = params[P_BUS_US]
        oh_hit = params[P_OH_HIT_US]
        settle_read_ahead(zones, params, di, df, seg, d, now, False)
        active = di[d, DI_RA_SEG]
        for s in range(nseg):
            if seg[d, s, SG_START] <= lbn and end <= seg[d, s, SG_END]:
                _touch(di, seg, d, s)
                if active == s:
                    _extend_read_ahead(params, df, seg, d, s, end)
                elif (active < 0 and params[P_READ_AHEAD] > 0 and seg[d, s, SG_END] < cap
                      and seg[d, s, SG_END] - end < params[P_READ_AHEAD]):
                    _start_stream(zones, seek_us, params, di, df, d, s, now + oh_hit, seg[d, s, SG_END])
                    _extend_read_ahead(params, df, seg, d, s, end)
                return oh_hit + n * bus, F_HIT
        if active >= 0 and seg[d, active, SG_START] <= lbn <= df[d, DF_RA_TARGET]:
            _extend_read_ahead(params, df, seg, d, active, end)
            _touch(di, seg, d, active)
            return _stream_service(params, df, d, now, end, n, oh_hit), F_HIT
        for s in range(nseg):
            # With zero latency a read starting just past a segment (nothing of it cached) is a miss read out
            # of order, not a stream restarted at its first sector (Lachesis's aligned scan after a seek).
            if (seg[d, s, SG_START] <= lbn <= seg[d, s, SG_END] and seg[d, s, SG_END] < cap
                    and not (zero_latency and lbn >= seg[d, s, SG_END])):
                settle_read_ahead(zones, params, di, df, seg, d, now, True)
                _start_stream(zones, seek_us, params, di, df, d, s, now + oh_hit, seg[d, s, SG_END])
                _extend_read_ahead(params, df, seg, d, s, end)
                _touch(di, seg, d, s)
                return _stream_service(params, df, d, now, end, n, oh_hit), F_PHYSICAL
        settle_read_ahead(zones, params, di, df, seg, d, now, True)
        t0 = now + params[P_OH_MISS_US]
        tf, te = disk_access(zones, seek_us, params, di, df, d, t0, t0, lbn, n, False, zero_latency)
        # The bus starts once the fraction of the sectors is buffered (time interpolated over the transfer).
        k0 = max(1.0, math.ceil(params[P_READ_BUS_START] * n))
        t_k0 = tf + (te - tf) * (k0 - 1.0) / (n - 1.0) if n > 1 else tf
        done = max(te + bus, t_k0 + n * bus)
        if nseg > 0:
            victim = 0
            for s in range(1, nseg):
                if seg[d, s, SG_LRU] < seg[d, victim, SG_LRU]:
                    victim = s
            size = params[P_SEG_SECTORS]
            seg[d, victim, SG_START] = max(lbn, end - size)
            seg[d, victim, SG_END] = end
            _touch(di, seg, d, victim)
            target = min(end + params[P_READ_AHEAD], cap, seg[d, victim, SG_START] + size)
            if target > end:
                di[d, DI_RA_SEG] = victim
                df[d, DF_RA_T0] = te
                df[d, DF_RA_L0] = end
                df[d, DF_RA_TARGET] = target
                df[d, DF_RA_RATE] = stream_rate(zones, params, end)
        return done - now, F_PHYSICAL
    # Write.
    bus = params[P_BUS_WRITE_US]
    settle_read_ahead(zones, params, di, df, seg, d, now, True)
    for s in range(nseg):
        if seg[d, s, SG_START] < end and lbn < seg[d, s, SG_END]:
            seg[d, s, SG_START] = -1.0
            seg[d, s, SG_END] = -1.0
    oh = params[P_OH_WRITE_US]
    if params[P_WRITE_BACK] > 0.0:
        return oh + n * bus, F_DESTAGE
    t0 = now + oh
    st = params[P_ROT_US] / locate(zones, int(params[P_SURFACES]), lbn)[3]
    earliest = t0 + max(bus, n * bus - (n - 1) * st)
    tf, te = disk_access(zones, seek_us, params, di, df, d, t0, earliest, lbn, n, True, zero_latency)
    return te - now, F_PHYSICAL

"""Service-time model of one disk, compiled with numba: head position, seek, rotation, sector-by-track
transfer with head and cylinder switches, overheads, bus transfer, and the segmented read-ahead cache.

All functions take the arrays of a compiled spec (sim.spec.DiskArrays) and the per-disk state rows the
engine owns; times are microseconds (float64) on the simulation clock. Compiled without reference counting
like the engine's loop that calls them (sim._kernel's docstring says why).
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from blockheat.sim.spec import (
    P_AVG_SEEK_US,
    P_BUS_US,
    P_BUS_WRITE_US,
    P_CAPACITY,
    P_CPL_READ_US,
    P_CPL_WRITE_US,
    P_DATA_PREP_US,
    P_DISC_READ_AW_US,
    P_DISC_READ_US,
    P_DISC_WRITE_IF_SEEK,
    P_DISC_WRITE_US,
    P_HEAD_SWITCH_US,
    P_HOLD_READ,
    P_HOLD_WRITE,
    P_IMMED_PARTIAL,
    P_MARK_BY_REQ,
    P_MIN_WRITE_SEEK_US,
    P_OH_HIT_AW_US,
    P_OH_HIT_US,
    P_OH_MISS_AW_US,
    P_OH_MISS_US,
    P_OH_WRITE_AW_US,
    P_OH_WRITE_US,
    P_RA_OVER_REQ,
    P_RA_TO,
    P_READ_AHEAD,
    P_READ_BUS_START,
    P_READ_HITS_ON_WRITES,
    P_RESEL_FIRST_US,
    P_RESEL_OTHER_US,
    P_ROT_US,
    P_SEG_SECTORS,
    P_SEGMENTS,
    P_SURFACES,
    P_WRITE_BACK,
    P_WRITE_MARK,
    P_WRITE_SEG,
    P_WRITE_SETTLE_US,
    P_XD_CMD_US,
    P_XD_DELAY_US,
    P_XD_DISC2_US,
    P_XD_DISC_US,
    P_XD_ON,
    P_XD_SEEK_DELTA_US,
    P_ZL_WRITES,
    Z_CSKEW,
    Z_FIRST_CYL,
    Z_FIRST_LBN,
    Z_FIRST_SECTOR,
    Z_FIRST_TRACK,
    Z_LSPT,
    Z_OFFSET,
    Z_SPT,
    Z_TSKEW,
)

# Service-time modes.
MODE_DETAILED, MODE_EXPECTED, MODE_CONSTANT, MODE_EXPONENTIAL = 0, 1, 2, 3
MODES = {"detailed": MODE_DETAILED, "expected": MODE_EXPECTED, "constant": MODE_CONSTANT,
         "exponential": MODE_EXPONENTIAL}

# Per-disk integer state columns (engine array `di`), shared with the engine: head position, the segment
# being read ahead into, the LRU clock, whether the last host request was a write, and where it ended.
DI_CYL, DI_HEAD, DI_RA_SEG, DI_LRU, DI_LAST_WRITE, DI_LAST_END = 0, 1, 2, 3, 4, 5
#: DiskSim's disk with extra write disconnects writes no block before min(blocks, 10) of a request of fewer than 45
#: blocks, or 15 of a larger one, are buffered (disksim_diskcache.c, disk_buffer_block_available).
XD_START_SMALL, XD_START_LARGE_FROM, XD_START_LARGE = 10, 45, 15
# Per-disk float state columns (engine array `df`): the active read-ahead stream; DF_PHASE and DF_CLOCK (later
# columns of the same array, sim._kernel) give the disk its own clock t' = t x clock + phase (us), 0 and 1 on
# every disk for synchronized spindles.
DF_RA_T0, DF_RA_L0, DF_RA_TARGET, DF_RA_RATE = 0, 1, 2, 3
DF_PHASE, DF_CLOCK = 7, 8
#: When the actuator is free again after a read-ahead stopped in a track switch (that switch runs out first); the
#: active stream's first block on the track it switches to (its L0 when it starts with a switch) and its sector
#: time before that switch.
DF_ACT_FREE, DF_RA_L1, DF_RA_ST = 11, 12, 13
# Cache segment fields (engine array `seg`, float64 [disks, 3, segments]: one row per field, so a pass over a
# disk's segments reads contiguous memory and compiles to vector compares).
SG_START, SG_END, SG_LRU = 0, 1, 2

# Outcome flags returned with a service time.
F_HIT, F_PHYSICAL, F_DESTAGE = 1, 2, 4


@njit(cache=True, nogil=True, _nrt=False)
def zone_of(zones: np.ndarray, lbn: int) -> int:  # pragma: no cover
    """Index of the zone holding logical block lbn: the last zone whose first block is at or before it (zone 0
    for any block before that), by a binary search whose steps depend only on the number of zones (each a
    select, not a branch that random addresses mispredict)."""
    base = 0
    n = zones.shape[0]
    while n > 1:
        half = n // 2
        base = base + half if zones[base + half, Z_FIRST_LBN] <= lbn else base
        n -= half
    return base


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def locate_run(zones: np.ndarray, surfaces: int,
               lbn: int) -> tuple[int, int, int, int, int, int]:  # pragma: no cover
    """Logical block -> (cylinder, head, logical sector in track, physical sectors per track, physical slot
    of logical sector 0, logical sectors per track).

    Logical sector s of a track passes under the head at slot (s + skew) mod spt; the skew of a physical
    track is the zone's first-block offset plus the track skew per head switch and the cylinder skew per
    cylinder switch over the zone's physical tracks (slipped and empty ones included).
    """
    z = zone_of(zones, lbn)
    lspt = zones[z, Z_LSPT]
    off = lbn - zones[z, Z_FIRST_LBN] + zones[z, Z_FIRST_SECTOR]
    track = zones[z, Z_FIRST_TRACK] + off // lspt
    s = off % lspt
    spt = zones[z, Z_SPT]
    cz = track // surfaces
    head = track - cz * surfaces
    skew = (zones[z, Z_OFFSET] + cz * ((surfaces - 1) * zones[z, Z_TSKEW] + zones[z, Z_CSKEW])
            + head * zones[z, Z_TSKEW]) % spt
    return zones[z, Z_FIRST_CYL] + cz, head, s, spt, skew, lspt


@njit(cache=True, nogil=True, _nrt=False)
def locate(zones: np.ndarray, surfaces: int, lbn: int) -> tuple[int, int, int, int, int]:  # pragma: no cover
    """Logical block -> (cylinder, head, sector in track, sectors per track, physical slot of sector 0)."""
    cyl, head, s, spt, skew, _lspt = locate_run(zones, surfaces, lbn)
    return cyl, head, s, spt, skew


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def cylinder_of(zones: np.ndarray, surfaces: int, lbn: int) -> int:  # pragma: no cover
    """locate(...)[0] without the sector and skew arithmetic: two divisions where locate does three."""
    z = zone_of(zones, lbn)
    track = zones[z, Z_FIRST_TRACK] + (lbn - zones[z, Z_FIRST_LBN] + zones[z, Z_FIRST_SECTOR]) // zones[z, Z_LSPT]
    return zones[z, Z_FIRST_CYL] + track // surfaces


# Below this quotient t x (1 / m) is within a quarter of t / m, so its floor is off by at most one (2^50).
EXACT_QUOTIENT = 1125899906842624.0


@intrinsic
def fma(typingctx, a, b, c):  # type: ignore[no-untyped-def]  # pragma: no cover
    """a x b + c rounded once (LLVM's llvm.fma: the processor's fused multiply-add where it has one)."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        f64 = ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f64, [f64, f64, f64]), "llvm.fma.f64")
        cast = [context.cast(builder, v, t, types.float64) for v, t in zip(args, signature.args, strict=True)]
        return builder.call(fn, cast)

    return sig, codegen


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def mod_positive(t: float, m: float) -> float:  # pragma: no cover
    """t % m for t >= 0 and m > 0, bit for bit (the remainder is exact), without the C library's fmod, whose loop
    over the exponent gap cost a tenth of a replay, nor a division on the path from t: q = floor(t x (1 / m)) is off
    by at most one, which the sign of fma(-q, m, t) or its reaching m tells (rounding keeps both); for the right q
    the remainder t - q m is a multiple of ulp(m) below m in size, so one fused multiply-add gives it exactly. A
    negative t, a quotient from 2^50 on and NaN take the library's %."""
    if 0.0 <= t < m:
        return t + 0.0                          # -0.0 % m is 0.0
    q = math.floor(t * (1.0 / m))
    if not 0.0 <= q < EXACT_QUOTIENT:
        return t % m
    r = fma(-q, m, t)
    if r < 0.0:
        r = fma(1.0 - q, m, t)
    elif r >= m:
        r = fma(-1.0 - q, m, t)
    return r


@njit(cache=True, nogil=True, _nrt=False)
def stream_rate(zones: np.ndarray, params: np.ndarray, lbn: int) -> float:  # pragma: no cover
    """Sequential media rate (sectors per us) in the zone of lbn: each track's logical sectors cost a
    revolution plus its track skew (which the skew sizes to cover the head switch)."""
    z = zone_of(zones, lbn)
    spt = zones[z, Z_SPT]
    return float(zones[z, Z_LSPT] / (params[P_ROT_US] * (spt + zones[z, Z_TSKEW]) / spt))


@njit(cache=True, nogil=True, _nrt=False)
def head_move_us(seek_us: np.ndarray, params: np.ndarray, cur_cyl: int, cur_head: int, cyl: int, head: int,
                 is_write: bool) -> float:  # pragma: no cover
    """Seek or head switch from (cur_cyl, cur_head) to (cyl, head); a write adds the write settle (which
    may be negative) whenever the head moves, never below zero in all."""
    dist = abs(cyl - cur_cyl)
    if dist > 0:
        move = seek_us[dist]
    elif head != cur_head:
        move = params[P_HEAD_SWITCH_US]
    else:
        return 0.0
    if is_write:
        move = max(0.0, move + params[P_WRITE_SETTLE_US])
    return float(move)


@njit(cache=True, nogil=True, _nrt=False)
def media_access(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, cur_cyl: int, cur_head: int,
                 t: float, earliest: float, lbn: int, n: int, is_write: bool,
                 zero_latency: bool) -> tuple[float, float, int, int]:  # pragma: no cover
    """Position the head from (cur_cyl, cur_head) starting at time t, then transfer n sectors from lbn.

    Rotation is read from the clock: the platter angle at time t is (t mod rotation) / rotation, with
    sector slot 0 at angle 0. `earliest` holds the first sector back (a write waits for its data on the
    bus). Returns (time the first sector is done, time the last sector is done, final cylinder, head).
    """
    loc = locate_run(zones, int(params[P_SURFACES]), lbn)
    move = head_move_us(seek_us, params, cur_cyl, cur_head, loc[0], loc[1], is_write)
    return media_access_from(zones, seek_us, params, loc, move, t, earliest, lbn, n, is_write, zero_latency)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def media_access_from(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray,
                      loc: tuple[int, int, int, int, int, int], move: float, t: float, earliest: float, lbn: int,
                      n: int, is_write: bool, zero_latency: bool) -> tuple[float, float, int, int]:  # pragma: no cover
    """media_access with lbn's locate_run and the first head movement (head_move_us from the current position)
    already known (a write works them out first, for when the head is in place)."""
    rot = params[P_ROT_US]
    surfaces = int(params[P_SURFACES])
    cyl, head, s, spt, skew, lspt = loc
    t += move
    if t < earliest:
        t = earliest
    t_first = -1.0
    remaining = n
    while True:
        k = min(remaining, lspt - s)
        st = rot / spt
        pos = mod_positive(t, rot) / st         # head position in slots, [0, spt)
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
        ncyl, nhead, s, spt, skew, lspt = locate_run(zones, surfaces, lbn)
        t += head_move_us(seek_us, params, cyl, head, ncyl, nhead, is_write)
        cyl = ncyl
        head = nhead
    return t_first, t, cyl, head


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def disk_access(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray, d: int,
                t: float, earliest: float, lbn: int, n: int, is_write: bool,
                zero_latency: bool) -> tuple[float, float]:  # pragma: no cover
    """media_access on disk d from its head position and on its own clock (t' = t x clock + phase: the
    spindle's angle and speed), moving the head; returns (first sector done, last sector done) in run time."""
    loc = locate_run(zones, int(params[P_SURFACES]), lbn)
    move = head_move_us(seek_us, params, di[d, DI_CYL], di[d, DI_HEAD], loc[0], loc[1], is_write)
    return disk_access_from(zones, seek_us, params, di, df, d, t, earliest, lbn, n, is_write, zero_latency, loc, move)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def disk_access_from(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                     d: int, t: float, earliest: float, lbn: int, n: int, is_write: bool, zero_latency: bool,
                     loc: tuple[int, int, int, int, int, int], move: float) -> tuple[float, float]:  # pragma: no cover
    """disk_access with lbn's locate_run and the first head movement already known (media_access_from)."""
    ph = df[d, DF_PHASE]
    c = df[d, DF_CLOCK]
    # Two calls, not one with selected arguments: measured, the one call replays the C2247A row of bench/sim.py
    # 10-20 % slower (LLVM specializes each inlined copy).
    if c == 1.0 and ph == 0.0:              # the run's clock (synchronized spindles): the same values, no division
        tf, te, cyl, head = media_access_from(zones, seek_us, params, loc, move, t, earliest, lbn, n, is_write,
                                              zero_latency)
    else:
        tf, te, cyl, head = media_access_from(zones, seek_us, params, loc, move, t * c + ph, earliest * c + ph, lbn,
                                              n, is_write, zero_latency)
        tf = (tf - ph) / c
        te = (te - ph) / c
    di[d, DI_CYL] = cyl
    di[d, DI_HEAD] = head
    return tf, te


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


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def settle_read_ahead(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                      seg: np.ndarray, d: int, now: float, stop: bool) -> None:  # pragma: no cover
    """Bring disk d's read-ahead up to time now; with stop, abort it (the head stays where it got to; unless the
    spec disconnects in a seek, a track switch under way runs out first, see _stop_in_switch)."""
    s = di[d, DI_RA_SEG]
    if s < 0:
        return
    if stop and params[P_DISC_WRITE_IF_SEEK] == 0.0:
        l0 = df[d, DF_RA_L0]
        l1 = df[d, DF_RA_L1]
        t_sw = df[d, DF_RA_T0] + (l1 - l0) * df[d, DF_RA_ST]
        if now >= t_sw and l1 < df[d, DF_RA_TARGET]:
            _stop_in_switch(zones, seek_us, params, di, df, seg, d, s, now, t_sw)
            return
        # Still on its first track: one sector per sector time.
        p = min(l0 + max(0.0, math.floor((now - df[d, DF_RA_T0]) / df[d, DF_RA_ST])), l1, df[d, DF_RA_TARGET])
    else:
        p = _ra_progress(df, d, now)
    seg[d, SG_END, s] = p
    if stop or p >= df[d, DF_RA_TARGET]:
        _park_head(zones, params, di, d, p, df[d, DF_RA_L0])
        di[d, DI_RA_SEG] = -1


@njit(cache=True, nogil=True, _nrt=False)
def _park_head(zones: np.ndarray, params: np.ndarray, di: np.ndarray, d: int, p: float,
               first: float) -> bool:  # pragma: no cover
    """Put disk d's head on the track of sector p - 1, the last a stream read, when the stream (from sector
    `first`) read any; whether it did."""
    if p - 1 < first:
        return False
    cyl, head, _s, _spt, _skew = locate(zones, int(params[P_SURFACES]), int(p) - 1)
    di[d, DI_CYL] = cyl
    di[d, DI_HEAD] = head
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _stop_in_switch(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                    seg: np.ndarray, d: int, s: int, now: float, t_sw: float) -> None:  # pragma: no cover
    """Stop disk d's read-ahead (into segment s) at time now, once it has read its first track and switched (or
    is switching, from t_sw) to the next, as DiskSim does when a disk does not disconnect in a seek: the head is
    on the new track and the actuator is busy until the switch is done (DF_ACT_FREE: the next request's
    positioning starts that much later). Past the switch the stream's progress is its mean rate, as for a stream
    not stopped."""
    surfaces = int(params[P_SURFACES])
    l1 = df[d, DF_RA_L1]
    frm = locate_run(zones, surfaces, int(l1) - 1)         # the switch starts from the track before l1
    nxt = locate_run(zones, surfaces, int(l1))
    sw = head_move_us(seek_us, params, frm[0], frm[1], nxt[0], nxt[1], False)
    in_switch = now < t_sw + sw
    p = l1 if in_switch else max(l1, _ra_progress(df, d, now))
    seg[d, SG_END, s] = p
    if in_switch:
        df[d, DF_ACT_FREE] = t_sw + sw
    if not _park_head(zones, params, di, d, p, l1):
        di[d, DI_CYL] = nxt[0]
        di[d, DI_HEAD] = nxt[1]
    di[d, DI_RA_SEG] = -1


@njit(cache=True, nogil=True, _nrt=False)
def _touch(di: np.ndarray, seg: np.ndarray, d: int, s: int) -> None:  # pragma: no cover
    di[d, DI_LRU] += 1
    seg[d, SG_LRU, s] = di[d, DI_LRU]


@njit(cache=True, nogil=True, _nrt=False)
def _ra_limit(zones: np.ndarray, params: np.ndarray, end: float) -> float:  # pragma: no cover
    """Where read-ahead after a read ending at block `end` stops: the capacity, or the end of the track or
    cylinder holding block end - 1 (cache.read_ahead_to)."""
    cap = params[P_CAPACITY]
    mode = int(params[P_RA_TO])
    if mode == 0 or end <= 0:
        return float(cap)
    surfaces = int(params[P_SURFACES])
    last = int(end) - 1
    _c, head, s, _spt, _k, lspt = locate_run(zones, surfaces, last)
    limit = last - s + lspt
    if mode == 2:
        limit += (surfaces - 1 - head) * lspt
    return float(min(limit, cap))


@njit(cache=True, nogil=True, _nrt=False)
def _extend_read_ahead(zones: np.ndarray, params: np.ndarray, df: np.ndarray, seg: np.ndarray, d: int, s: int,
                       want_end: float) -> None:  # pragma: no cover
    """Push the active stream's target to want_end + read-ahead (within its limit); the segment's window
    slides forward when read-ahead may replace requested data, else the target stops at the segment's end."""
    size = params[P_SEG_SECTORS]
    target = max(want_end, min(want_end + params[P_READ_AHEAD], _ra_limit(zones, params, want_end)))
    if params[P_RA_OVER_REQ] == 0.0:
        target = max(want_end, min(target, seg[d, SG_START, s] + size))
    if target > df[d, DF_RA_TARGET]:
        df[d, DF_RA_TARGET] = target
    if df[d, DF_RA_TARGET] - seg[d, SG_START, s] > size:
        seg[d, SG_START, s] = df[d, DF_RA_TARGET] - size


@njit(cache=True, nogil=True, _nrt=False)
def _start_stream(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                  d: int, s: int, t: float, l0: float) -> None:  # pragma: no cover
    """Start read-ahead into segment s at sector l0: position the head from where it is at time t."""
    surfaces = int(params[P_SURFACES])
    first = int(l0)
    tf, _te = disk_access(zones, seek_us, params, di, df, d, t, t, first, 1, False, False)
    _c, _h, s0, spt, _k, lspt = locate_run(zones, surfaces, first)
    di[d, DI_RA_SEG] = s
    df[d, DF_RA_T0] = tf - params[P_ROT_US] / spt
    df[d, DF_RA_L0] = l0
    df[d, DF_RA_L1] = first + lspt - s0             # positioned on l0's track: it switches at that track's end
    df[d, DF_RA_ST] = params[P_ROT_US] / spt
    df[d, DF_RA_TARGET] = l0
    df[d, DF_RA_RATE] = stream_rate(zones, params, first)


@njit(cache=True, nogil=True, _nrt=False)
def _stream_service(params: np.ndarray, df: np.ndarray, d: int, now: float, end: float, n: int,
                    oh: float) -> float:  # pragma: no cover
    """Service of a read fed by the active stream: bus transfer overlapped with the stream's arrival."""
    t_data = df[d, DF_RA_T0] + (end - df[d, DF_RA_L0]) / df[d, DF_RA_RATE]
    bus = params[P_BUS_US]
    return float(max(oh + params[P_DATA_PREP_US] + n * bus, t_data - now + bus) + params[P_CPL_READ_US])


@njit(cache=True, nogil=True, _nrt=False)
def _deferred(params: np.ndarray, buffered: float, n: int, after_write: bool) -> float:  # pragma: no cover
    """For a disk that does not send a partial hit's buffered sectors at once: the read's miss overhead when fewer
    than the read water mark's sectors of it are buffered (it waits like a miss), else 0 (sent at once)."""
    if buffered >= _mark_sectors(params, params[P_READ_BUS_START], n):
        return 0.0
    return float(params[P_OH_MISS_AW_US] if after_write else params[P_OH_MISS_US])


@njit(cache=True, nogil=True, _nrt=False)
def _stream_after_disconnect(params: np.ndarray, df: np.ndarray, d: int, now: float, lbn: int, n: int,
                             after_write: bool) -> float:  # pragma: no cover
    """Service of a read fed by the active stream that does not transfer its first buffered sectors at once:
    the miss overhead and a disconnection, reselection (first, data preparation) once the read water mark's
    sectors are buffered, then the bus overlapped with the stream."""
    oh_miss = params[P_OH_MISS_AW_US] if after_write else params[P_OH_MISS_US]
    disc = params[P_DISC_READ_AW_US] if after_write else params[P_DISC_READ_US]
    k0 = _mark_sectors(params, params[P_READ_BUS_START], n)
    rate = df[d, DF_RA_RATE]
    t_mark = df[d, DF_RA_T0] + (lbn + k0 - df[d, DF_RA_L0]) / rate
    t_data = df[d, DF_RA_T0] + (lbn + n - df[d, DF_RA_L0]) / rate
    bus = params[P_BUS_US]
    start = max(t_mark, now + oh_miss + disc) + params[P_RESEL_FIRST_US] + params[P_DATA_PREP_US]
    return float(max(start + n * bus, t_data + bus) - now + params[P_CPL_READ_US])


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _lru(di: np.ndarray, seg: np.ndarray, d: int, nseg: int) -> int:  # pragma: no cover
    victim = 0
    for s in range(1, nseg):
        if seg[d, SG_LRU, s] < seg[d, SG_LRU, victim]:
            victim = s
    return victim


@njit(cache=True, nogil=True, _nrt=False)
def _mark_sectors(params: np.ndarray, fraction: float, n: int) -> int:  # pragma: no cover
    """A water mark in sectors, at least 1, at most n, as DiskSim sets it: by request, the fraction of the request
    (of the segment when the request is larger) rounded down; by segment, the fraction of the segment rounded up."""
    size = params[P_SEG_SECTORS]
    if params[P_MARK_BY_REQ] > 0.0:
        k = math.floor(fraction * (min(n, size) if size > 0 else n))
    else:
        k = math.ceil(fraction * size)
    return int(min(n, max(1, k)))


@njit(cache=True, nogil=True, _nrt=False)
def _write_stalls(rot: float, st: float, bus: float, bus_start: float, tf: float, te: float, n: int,
                  j: int) -> float:  # pragma: no cover
    """Revolutions (us) a write loses when the media outruns a slower bus: sector k (0-based) is written only if
    its data are in (bus_start + (k + 1) bus) when its pass starts, else it comes round a revolution later.
    tf, te: first and last sector done as positioned; j: the request's sectors on its first track (the time
    the track switches add, te - tf - (n - 1) st, is counted from sector j on). Only for a bus slower than
    the media (bus > st) and n > 1, as its caller checks."""
    slope = bus - st
    t0 = tf - st
    g = te - tf - (n - 1) * st
    extra = 0.0
    k = 1
    while k < n:
        before = k < j
        hi = min(n, j) if before else n
        slack = t0 + (0.0 if before else g) + extra - bus_start - bus     # sector k waits iff k * slope > slack
        kf = max(k, math.floor(slack / slope) + 1)
        if kf >= hi:
            k = hi
        else:
            extra += rot
            k = kf
    return extra


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _write_service(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                   d: int, now: float, lbn: int, n: int, after_write: bool,
                   sequential: bool) -> float:  # pragma: no cover
    """A write through to the media (DiskSim's write path without fast writes).

    A write that follows a write and does not start where it ended disconnects before its data (the extra write
    disconnect): its own command overhead, then disconnect, inter-disconnect delay and first reselection before
    the data; positioning starts seek_delta after the command. Any other write takes its command overhead and
    data preparation and moves its data at once, positioning from the end of the command overhead. Either way
    positioning waits the rest of a track switch a stopped read-ahead ran out, the head reaches the track no
    sooner than minimum_write_seek after positioning starts, and no sector is written before its data are in: a
    disk with extra write disconnects (DiskSim's HP model) starts once min(n, 10) blocks (15 from 45 up) are
    buffered and loses a revolution where the media outruns the data (_write_stalls); other disks start late
    enough that it never does. Once all data are in the disk
    disconnects (the write disconnect overhead, or the second disconnect after an extra one); it reselects
    (first reselection, other after an extra disconnect) when the media work and the disconnection are both
    done, then the completion overhead. A write larger than its segment refills it at the write water mark;
    each refill that leaves the media without data (the mark's sectors take less time to write than
    reconnecting) costs a revolution, unless the disk holds the bus through the write (the bus then follows
    the media)."""
    bus = params[P_BUS_WRITE_US]
    prep = params[P_DATA_PREP_US]
    surfaces = int(params[P_SURFACES])
    # Selects, not branches: whether the previous request was a write alternates with the workload.
    xd = params[P_XD_ON] > 0.0 and after_write and not sequential
    t_cmd = now + (params[P_XD_CMD_US] if xd else params[P_OH_WRITE_AW_US] if after_write else params[P_OH_WRITE_US])
    bus_start = t_cmd + prep + (params[P_XD_DISC_US] + params[P_XD_DELAY_US] + params[P_RESEL_FIRST_US] if xd else 0.0)
    mech = t_cmd + (params[P_XD_SEEK_DELTA_US] if xd else 0.0) + max(0.0, df[d, DF_ACT_FREE] - now)
    disc = params[P_XD_DISC2_US] if xd else params[P_DISC_WRITE_US]
    resel_end = params[P_RESEL_OTHER_US] if xd else params[P_RESEL_FIRST_US]
    loc = locate_run(zones, surfaces, lbn)
    st = params[P_ROT_US] / loc[3]
    size = params[P_SEG_SECTORS]
    # A disk with extra write disconnects (DiskSim's HP model) starts writing once min(n, 10) blocks (15 from 45
    # up) are buffered, and then writes each block only if its data are in (see _write_stalls); other disks start
    # late enough that the media never outruns the data.
    hp = params[P_XD_ON] > 0.0
    first = min(n, XD_START_SMALL) if n < XD_START_LARGE_FROM else XD_START_LARGE
    earliest = max(bus_start + (first * bus if hp else max(bus, n * bus - (n - 1) * st)),
                   mech + params[P_MIN_WRITE_SEEK_US])
    move = head_move_us(seek_us, params, di[d, DI_CYL], di[d, DI_HEAD], loc[0], loc[1], True)
    tf, te = disk_access_from(zones, seek_us, params, di, df, d, mech, earliest, lbn, n, True,
                              params[P_ZL_WRITES] > 0.0, loc, move)
    j = loc[5] - loc[2]
    if hp and bus > st and n > 1 and (n > j or tf - st - bus_start - bus < (n - 1) * (bus - st)):
        te += _write_stalls(params[P_ROT_US], st, bus, bus_start, tf, te, n, j)     # the media may outrun the bus
    bus_end = bus_start + n * bus
    if size > 0 and n > size:
        low = _mark_sectors(params, params[P_WRITE_MARK], n)
        refills = math.ceil((n - size) / max(1.0, size - low))
        if params[P_HOLD_WRITE] == 0.0 and low * st < params[P_RESEL_OTHER_US] + prep + bus:
            te += refills * params[P_ROT_US]
    return float(max(te, bus_end + disc) + resel_end + params[P_CPL_WRITE_US] - now)


@njit(cache=True, nogil=True, _nrt=False)
def _first_track_mark(params: np.ndarray, loc: tuple[int, int, int, int, int, int], tf: float,
                      k0: int) -> float:  # pragma: no cover
    """When the k0-th sector of a read whose first sector (at loc) is done at tf is buffered, k0 on that track:
    one sector time apart."""
    return tf + (k0 - 1) * params[P_ROT_US] / loc[3]


@njit(cache=True, nogil=True, _nrt=False)
def _read_across_tracks(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                        d: int, tm: float, t_disc: float, disc: float, lbn: int, n: int, k0: int,
                        loc: tuple[int, int, int, int, int, int], move: float, tf: float,
                        te: float) -> float:  # pragma: no cover
    """When a read miss crossing a track switch (positioned from tm, its sectors done tf..te) has crossed the bus.
    The water mark's k0 sectors are in one sector time apart on the first track, else when a transfer of k0
    sectors from the same start would end; the bus starts then (not before t_disc, when the disconnection, disc,
    after the command is done). A disk holding the bus sends
    at the bus's rate but waits, at the switch, for the next track's first sector; one that does not, see
    _read_bus_released."""
    bus = params[P_BUS_US]
    j = loc[5] - loc[2]
    if k0 <= j:
        t_k0 = _first_track_mark(params, loc, tf, k0)
    else:
        cyl, head = di[d, DI_CYL], di[d, DI_HEAD]
        t_k0 = disk_access_from(zones, seek_us, params, di, df, d, tm, tm, lbn, k0, False, False, loc, move)[1]
        di[d, DI_CYL] = cyl                 # the whole read's access left the head at its end
        di[d, DI_HEAD] = head
    t_k0 = max(t_k0, t_disc)
    if params[P_HOLD_READ] == 0.0:
        return _read_bus_released(params, tf, te, n, k0, t_k0, disc)
    last_st = params[P_ROT_US] / locate_run(zones, int(params[P_SURFACES]), lbn + n - 1)[3]
    return float(max(te + bus, t_k0 + params[P_RESEL_FIRST_US] + params[P_DATA_PREP_US] + n * bus,
                     te - (n - j - 1) * last_st + (n - j) * bus))


@njit(cache=True, nogil=True, _nrt=False)
def _read_bus_released(params: np.ndarray, tf: float, te: float, n: int, mark: int, t_res: float,
                       disc: float) -> float:  # pragma: no cover
    """When a read miss's last sector has crossed the bus, for a disk that does not hold the bus for the whole
    read: sector k (1-based) is buffered at tf + (k - 1)(te - tf)/(n - 1); from the reselection at t_res the
    disk sends what is buffered, and more as it arrives while the bus is busy; when it has sent all it has it
    disconnects (disc) and reselects once `mark` more sectors (or the rest) are buffered (first reselection
    and data preparation each time)."""
    bus = params[P_BUS_US]
    resel = params[P_RESEL_FIRST_US] + params[P_DATA_PREP_US]
    gap = (te - tf) / (n - 1)
    t = t_res + resel
    sent = 0
    while True:
        while True:                         # send what is buffered by t, then what came in meanwhile
            have = n if t >= te else math.floor((t - tf) / gap) + 1
            if have <= sent:
                break
            t += (have - sent) * bus
            sent = have
            if sent >= n:
                return float(t)
        want = min(n, sent + mark)
        t = max(tf + (want - 1) * gap, t + disc) + resel


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _holds(seg: np.ndarray, d: int, k: int, lbn: int, end: int, cap: float,
           not_zl: bool) -> tuple[bool, bool]:  # pragma: no cover
    """Whether disk d's segment k holds the whole read [lbn, end), and whether the read starts inside it or right
    after it below the capacity (a partial hit; not right after it with zero latency: not_zl False); both without
    branches."""
    s_start = seg[d, SG_START, k]
    s_end = seg[d, SG_END, k]
    inside = s_start <= lbn
    return inside & (end <= s_end), inside & (lbn <= s_end) & (s_end < cap) & (not_zl | (lbn < s_end))


@njit(cache=True, nogil=True, _nrt=False)
def _lowest_bit(mask: np.int64, none: int) -> int:  # pragma: no cover
    """Index of mask's lowest set bit (a power of two's log2 is exact in a float64), `none` when it has none."""
    if mask == 0:
        return none
    return int(math.log2(float(mask & -mask)))


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def detailed_service(zones: np.ndarray, seek_us: np.ndarray, params: np.ndarray, di: np.ndarray, df: np.ndarray,
                     seg: np.ndarray, d: int, now: float, lbn: int, n: int, is_write: bool, destage: bool,
                     zero_latency: bool) -> tuple[float, int]:  # pragma: no cover
    """Serve one sub-request on disk d starting at now; returns (service time us, outcome flags).

    Command overheads depend on the previous request (read or write); every host request ends with the
    completion overhead. Reads, in order: a full hit in a segment (the write segment too, when read hits on
    write data are allowed) costs the hit overhead, data preparation and the bus transfer (and restarts
    read-ahead when less than the read-ahead amount is left beyond the request); a read starting inside the
    active read-ahead stream waits for the stream; a read starting inside or right after a cached read
    segment restarts the stream there (a partial hit, counted as physical); anything else is a miss: abort
    read-ahead, read from the media, reselect once the read water mark's sectors are buffered, prepare and
    transfer (never ahead of the media), and read ahead after the last sector into the least recently used
    read segment, up to the read-ahead limit. Writes invalidate overlapping read data and leave theirs in
    the write segment (or the least recently used read segment when there is no dedicated one); with
    write-back they finish after the bus transfer and leave a destage job (F_DESTAGE), else see
    _write_service.
    """
    nseg = int(params[P_SEGMENTS])
    end = lbn + n
    cap = params[P_CAPACITY]
    if destage:
        settle_read_ahead(zones, seek_us, params, di, df, seg, d, now, True)
        tf, te = disk_access(zones, seek_us, params, di, df, d, now, now, lbn, n, True, False)
        return te - now, F_PHYSICAL
    after_write = di[d, DI_LAST_WRITE] > 0
    sequential = lbn == di[d, DI_LAST_END]
    di[d, DI_LAST_WRITE] = 1 if is_write else 0
    di[d, DI_LAST_END] = end
    if not is_write:
        bus = params[P_BUS_US]
        prep = params[P_DATA_PREP_US]
        cpl = params[P_CPL_READ_US]
        oh_hit = params[P_OH_HIT_AW_US] if after_write else params[P_OH_HIT_US]
        settle_read_ahead(zones, seek_us, params, di, df, seg, d, now, False)
        active = di[d, DI_RA_SEG]
        searched = nseg + 1 if params[P_READ_HITS_ON_WRITES] > 0.0 and params[P_WRITE_SEG] > 0.0 else nseg
        # One pass finds the first segment holding the whole read (a full hit) and the first read segment the read
        # starts inside or right after (a partial hit; with zero latency a read starting just past a segment is
        # not one: it is a miss read out of order, not a stream restarted at its first sector, as Lachesis's
        # aligned scan after a seek), without branches.
        not_zl = not zero_latency
        if searched < 63:                   # as bit masks: the pass compiles to vector compares
            hits = np.int64(0)
            starts = np.int64(0)
            for k in range(searched):
                whole, near = _holds(seg, d, k, lbn, end, cap, not_zl)
                hits |= np.int64(whole) << k
                starts |= np.int64(near) << k
            hit = _lowest_bit(hits, searched)
            partial = _lowest_bit(starts & ((np.int64(1) << nseg) - 1), searched)
        else:
            hit = searched
            partial = searched
            for k in range(searched):
                whole, near = _holds(seg, d, k, lbn, end, cap, not_zl)
                hit = min(hit, k if whole else searched)
                partial = min(partial, k if near & (k < nseg) else searched)
        if hit < searched:
            s = hit
            _touch(di, seg, d, s)
            if active == s:
                _extend_read_ahead(zones, params, df, seg, d, s, end)
            elif (s < nseg and active < 0 and params[P_READ_AHEAD] > 0 and seg[d, SG_END, s] < cap
                  and seg[d, SG_END, s] - end < params[P_READ_AHEAD]
                  and seg[d, SG_END, s] < _ra_limit(zones, params, end)):
                _start_stream(zones, seek_us, params, di, df, d, s, now + oh_hit, seg[d, SG_END, s])
                _extend_read_ahead(zones, params, df, seg, d, s, end)
            return oh_hit + prep + n * bus + cpl, F_HIT
        # A partial hit not sent at once (immediate_partial_hit false) waits for the water mark like a miss: the
        # stream's start and the service come from _deferred (kept out of the common path's code).
        if active >= 0 and seg[d, SG_START, active] <= lbn <= df[d, DF_RA_TARGET]:
            _extend_read_ahead(zones, params, df, seg, d, active, end)
            _touch(di, seg, d, active)
            if (params[P_IMMED_PARTIAL] == 0.0
                    and _deferred(params, _ra_progress(df, d, now) - lbn, n, after_write) > 0.0):
                return _stream_after_disconnect(params, df, d, now, lbn, n, after_write), F_HIT
            return _stream_service(params, df, d, now, end, n, oh_hit), F_HIT
        if partial < searched:
            s = partial
            settle_read_ahead(zones, seek_us, params, di, df, seg, d, now, True)
            late = (_deferred(params, seg[d, SG_END, s] - lbn, n, after_write)
                    if params[P_IMMED_PARTIAL] == 0.0 else 0.0)
            _start_stream(zones, seek_us, params, di, df, d, s, now + (late if late > 0.0 else oh_hit),
                          seg[d, SG_END, s])
            _extend_read_ahead(zones, params, df, seg, d, s, end)
            _touch(di, seg, d, s)
            if late > 0.0:
                return _stream_after_disconnect(params, df, d, now, lbn, n, after_write), F_PHYSICAL
            return _stream_service(params, df, d, now, end, n, oh_hit), F_PHYSICAL
        settle_read_ahead(zones, seek_us, params, di, df, seg, d, now, True)
        oh_miss = params[P_OH_MISS_AW_US] if after_write else params[P_OH_MISS_US]
        disc = params[P_DISC_READ_AW_US] if after_write else params[P_DISC_READ_US]
        t0 = now + oh_miss
        # Positioning waits the rest of a track switch the stopped read-ahead ran out (DiskSim adds the two delays).
        tm = t0 + max(0.0, df[d, DF_ACT_FREE] - now)
        loc = locate_run(zones, int(params[P_SURFACES]), lbn)
        move = head_move_us(seek_us, params, di[d, DI_CYL], di[d, DI_HEAD], loc[0], loc[1], False)
        tf, te = disk_access_from(zones, seek_us, params, di, df, d, tm, tm, lbn, n, False, zero_latency, loc, move)
        # The bus starts once the read water mark's sectors are buffered (one sector time apart on the first
        # track; with zero latency, sectors out of order, interpolated over the transfer), not before the
        # disconnection after the command is done (it runs beside the media work).
        k0 = _mark_sectors(params, params[P_READ_BUS_START], n)
        j = loc[5] - loc[2]
        if n > j and not zero_latency:
            done = _read_across_tracks(zones, seek_us, params, di, df, d, tm, t0 + disc, disc, lbn, n, k0, loc,
                                       move, tf, te) + cpl
        else:
            if n == 1:
                t_k0 = tf
            elif zero_latency:
                t_k0 = tf + (te - tf) * (k0 - 1.0) / (n - 1.0)
            else:
                t_k0 = _first_track_mark(params, loc, tf, k0)
            t_k0 = max(t_k0, t0 + disc)
            if params[P_HOLD_READ] > 0.0 or n == 1:
                done = max(te + bus, t_k0 + params[P_RESEL_FIRST_US] + prep + n * bus) + cpl
            else:
                done = _read_bus_released(params, tf, te, n, k0, t_k0, disc) + cpl
        if nseg > 0:
            victim = _lru(di, seg, d, nseg)
            size = params[P_SEG_SECTORS]
            seg[d, SG_START, victim] = max(lbn, end - size)
            seg[d, SG_END, victim] = end
            _touch(di, seg, d, victim)
            target = min(end + params[P_READ_AHEAD], _ra_limit(zones, params, end))
            if params[P_RA_OVER_REQ] == 0.0:
                target = min(target, seg[d, SG_START, victim] + size)
            if target > end:
                if target - seg[d, SG_START, victim] > size:
                    seg[d, SG_START, victim] = target - size
                di[d, DI_RA_SEG] = victim
                df[d, DF_RA_T0] = te
                df[d, DF_RA_L0] = end
                # The request's last track: the stream reads on to its end, then switches (at once when the
                # request ended it).
                if n < j:
                    df[d, DF_RA_L1] = lbn + j
                    df[d, DF_RA_ST] = params[P_ROT_US] / loc[3]
                else:
                    last = locate_run(zones, int(params[P_SURFACES]), end - 1)
                    df[d, DF_RA_L1] = end + last[5] - last[2] - 1
                    df[d, DF_RA_ST] = params[P_ROT_US] / last[3]
                df[d, DF_RA_TARGET] = target
                df[d, DF_RA_RATE] = stream_rate(zones, params, end)
        return done - now, F_PHYSICAL
    # Write.
    settle_read_ahead(zones, seek_us, params, di, df, seg, d, now, True)
    for k in range(nseg + 1):                   # drop overlapping cached data (branch-free: vector compares)
        s_start = seg[d, SG_START, k]
        s_end = seg[d, SG_END, k]
        overlaps = (s_start < end) & (lbn < s_end)
        seg[d, SG_START, k] = -1.0 if overlaps else s_start
        seg[d, SG_END, k] = -1.0 if overlaps else s_end
    if nseg > 0:
        w = nseg if params[P_WRITE_SEG] > 0.0 else _lru(di, seg, d, nseg)
        keep = params[P_READ_HITS_ON_WRITES] > 0.0
        seg[d, SG_START, w] = max(lbn, end - params[P_SEG_SECTORS]) if keep else -1.0
        seg[d, SG_END, w] = end if keep else -1.0
        _touch(di, seg, d, w)
    if params[P_WRITE_BACK] > 0.0:
        oh = params[P_OH_WRITE_AW_US] if after_write else params[P_OH_WRITE_US]
        return oh + params[P_DATA_PREP_US] + n * params[P_BUS_WRITE_US] + params[P_CPL_WRITE_US], F_DESTAGE
    return _write_service(zones, seek_us, params, di, df, d, now, lbn, n, after_write, sequential), F_PHYSICAL

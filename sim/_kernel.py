"""The compiled event loop behind sim.engine: state layout (column constants) and `run_loop`.

One numba function runs the loop with every state array bound to a local once per call, so no event
pays for passing the state around (numba reference-counts each array argument of a non-inlined call).
Shaped like SimPy: `now`, a binary heap of (time, priority, seq) events (disk completions and closed-loop
issues), plus two time-sorted streams merged in (arrivals and remap events). Same-time events run in
priority order completions < remaps < issues < arrivals, then by seq: runs are deterministic.

Every function here and in sim.disk is compiled without numba's reference counting (`_nrt=False`): the
caller's Core, Out, ReqArrays, LayoutArrays and DiskArrays own every array for the whole call, so nothing
can be freed under the loop; with it, each helper call would take and drop a reference on each of its
array arguments, two atomic updates per array per call, several times the loop's own cost. Nothing
here may allocate (numba refuses to compile an allocation without it): scratch arrays live in Core. The helpers
every request passes through are inlined into run_loop (`inline="always"`, here and in sim.disk): a call passes each
array argument as seven scalars, more than the small helpers' own work.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from blockheat.sim.array import (
    LAYOUT_AS_TRACED,
    LAYOUT_CONCAT,
    LAYOUT_RANDOM,
    LAYOUT_STRIPED,
    LP_CAPACITY,
    LP_DISKS,
    LP_FIRST,
    LP_KIND,
    LP_SHIFT,
    LP_UNIT,
    LP_WIDTH,
    LayoutArrays,
    extent_at,
    index_slot,
)
from blockheat.sim.disk import (
    DI_CYL,
    F_DESTAGE,
    F_HIT,
    F_PHYSICAL,
    MODE_CONSTANT,
    MODE_DETAILED,
    MODE_EXPECTED,
    cylinder_of,
    detailed_service,
    expected_service,
)
from blockheat.sim.prefetch import prefetch_read
from blockheat.sim.records import FLAG_BACKGROUND, FLAG_READ
from blockheat.sim.spec import P_SURFACES, DiskArrays

# Status codes returned by run_loop.
# ST_NEED_REQ: the loaded requests have all arrived (closed loop: all been issued, or, with background requests among
# those that follow, the next event is not before the last one loaded) and more follow (si[CI_MORE]): load the next
# ones.
ST_DONE, ST_PAUSED, ST_GROW_POOL, ST_GROW_TS, ST_GROW_LOG, ST_SATURATED, ST_NEED_REQ = range(7)
# Event priorities at equal times (lower first) and heap event kinds.
PRIO_DONE, PRIO_REMAP, PRIO_ISSUE, PRIO_ARRIVAL = 0, 1, 2, 3
EV_DONE, EV_ISSUE = 0, 1
# Slot kinds of sub-requests.
K_READ, K_WRITE, K_DESTAGE, K_MIG_READ, K_MIG_WRITE = range(5)
# Parent flags.
PFL_READ, PFL_MISS, PFL_BG, PFL_MIG = 1, 2, 4, 8
# Event-log kinds.
LOG_ARRIVE, LOG_START, LOG_PART_DONE, LOG_DONE, LOG_REMAP = range(5)

# si (int64): run scalars, then configuration.
(SI_NEXT_ARR, SI_NEXT_FG, SI_NEXT_RM, SI_SEQ, SI_HEAP_N, SI_FREE, SI_USED, SI_OUT, SI_DONE, SI_ARRIVED,
 SI_LOG_N, SI_EVENTS, SI_RNG, SI_STARTED,
 CI_MODE, CI_SCHED, CI_CLOSED, CI_MPL, CI_ZL, CI_PER_REQ, CI_LOG, CI_MAX_OUT, CI_CP_EVERY, CI_MARGIN,
 CI_SEED, CI_HAS_THINK, CI_CYLS, CI_FG_TOTAL, SI_ISSUES, SI_QSEQ, CI_QSCAN, SI_BASE, CI_MORE) = range(33)
SI_COUNT = 33
# Request indices are the run's own (0 = its first request); the loaded ReqArrays and Out's per-request arrays
# hold requests SI_BASE, SI_BASE + 1, ... (a streamed run loads them in chunks; CI_MORE: 1 more follow, 2 more follow
# in a closed loop with background requests).
# sf (float64): run scalars, configuration, then accumulators (A_x + 0 for reads, + 1 for writes).
(SF_NOW, SF_T_FIRST, SF_T_LAST, SF_OUT_LAST, CF_CONST_US, CF_EXP_US, CF_THINK_US, CF_TS_W,
 A_N, _A_N_W, A_RESP, _A_RESP_W, A_QUEUE, _A_QUEUE_W, A_SVC, _A_SVC_W, A_PHYS, _A_PHYS_W, A_PARTS, _A_PARTS_W,
 A_MISS_REQ_R, A_HIT_PARTS, A_MIG_IOS, A_MIG_SECTORS, A_MIG_BUSY, A_REMAPS, A_DESTAGE_IOS, A_DESTAGE_BUSY,
 A_BG_N, A_BG_RESP, A_MAX_OUT, A_OUT_AREA, A_SECT, _A_SECT_W, SF_T_EVENT,
 A_MIG_IOS_R, A_MIG_SECTORS_R, A_MIG_BUSY_R) = range(38)
SF_COUNT = 38
# A_MIG_IOS / A_MIG_SECTORS / A_MIG_BUSY count all migration I/O; the _R ones its reads (the rest are writes).
# Slot pool (shared by sub-requests and their parent requests): int columns, float columns.
# A queued sub-request: S_NEXT / S_QPREV link its disk's queue (arrival order), S_CNEXT the queue of its
# cylinder (SSTF, C-LOOK, an indexed queue), S_QSEQ numbers the indexed slots in queue order (ties between
# cylinders).
S_DISK, S_LBN, S_N, S_PARENT, S_NEXT, S_KIND, S_CYL, S_FLAGS, S_QPREV, S_CNEXT, S_QSEQ = range(11)
PA_REQ, PA_PENDING, PA_FLAGS, PA_MDISK, _PA_NEXT, PA_MLBN, PA_MN = range(7)
SLOT_I = 11
#: SSTF and C-LOOK scan a queue of at most this many sub-requests (si[CI_QSCAN], set from it); a longer one is
#: indexed by cylinder until it empties (Core.cyl_q / cyl_blk: per disk and cylinder its queue, per block of
#: CYL_BLOCK cylinders how many hold one) and searched there, so a saturated disk's picks do not grow with its
#: backlog, while short queues pay nothing for the index. Both give the same pick.
QUEUE_SCAN_MAX = 256
CYL_BLOCK = 64
SB_ENQ, SB_START, SB_SVC = range(3)
PF_ISSUE, PF_QUEUE, PF_SVC = range(3)
SLOT_F = 3
# Per-disk ints: columns 0-5 belong to the disk model (sim.disk DI_*), then the engine's.
# DK_INDEXED: the disk's queue is also kept per cylinder (from when it outgrew CI_QSCAN until it empties).
DK_BUSY, DK_QHEAD, DK_QTAIL, DK_QLEN, DK_DHEAD, DK_DTAIL, DK_NSYS, DK_IOS, DK_MAXQ, DK_NSYS_R, DK_INDEXED = range(6, 17)
DK_I = 17
# Per-disk floats: columns 0-3 belong to the disk model (sim.disk DF_*), then the engine's.
DKF_LAST, DKF_AREA, DKF_BUSY = range(4, 7)
DKF_PHASE, DKF_CLOCK = 7, 8     # sim.disk.DF_PHASE / DF_CLOCK: the disk's own clock
# Read share of busy time and of the number-in-system area (reads: foreground and migration reads; the
# write share is the rest: writes, migration writes, destages).
DKF_BUSY_R, DKF_AREA_R = 9, 10
# Columns 11-13 belong to the disk model (sim.disk.DF_ACT_FREE, DF_RA_L1, DF_RA_ST).
DK_F = 14
# Heap int columns.
HK_KEY, HK_KIND, HK_ARG = range(3)
# Time-series columns (ts) and per-disk series (ts_disk[..., 0] = queue-length area, 1 = busy time).
TS_ARR, TS_DONE, TS_RESP_SUM, TS_RESP_MAX, TS_OUT_AREA = range(5)
TS_COLS = 5

INF = math.inf


class ReqArrays(NamedTuple):
    """The workload columns (think_us empty when the workload has none)."""

    arrival_us: np.ndarray
    device: np.ndarray
    lbn: np.ndarray
    sectors: np.ndarray
    flags: np.ndarray
    think_us: np.ndarray


class Core(NamedTuple):
    """Hot state: scalars, event heap, slot pool, per-disk state, cache segments."""

    si: np.ndarray
    sf: np.ndarray
    heap_f: np.ndarray
    heap_i: np.ndarray
    slot_i: np.ndarray
    slot_f: np.ndarray
    dk_i: np.ndarray
    dk_f: np.ndarray
    seg: np.ndarray
    cyl_q: np.ndarray       # int64 [disks, cylinders, 2]: each cylinder's queue (head, tail slot); [., 0, 2]: FCFS
    cyl_blk: np.ndarray     # int64 [disks, blocks]: cylinders of the block with a queue
    todo: np.ndarray        # int64 [disks + 8]: scratch, the disks an event touched
    open_part: np.ndarray   # int64 [disks]: scratch, -1 between arrivals (a request's latest part per disk)


class Out(NamedTuple):
    """Outputs: per-request results, time series, backlog checkpoints, event log."""

    resp: np.ndarray
    out_queue: np.ndarray
    out_service: np.ndarray
    ts: np.ndarray
    ts_disk: np.ndarray
    backlog: np.ndarray
    log_t: np.ndarray
    log_i: np.ndarray


@njit(cache=True, nogil=True, _nrt=False)
def u01(seed: np.uint64, counter: np.int64) -> float:  # pragma: no cover
    """Counter-based uniform in [0, 1) (splitmix64 of seed + counter): no generator state to carry."""
    z = seed + np.uint64(counter) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True, _nrt=False)
def heap_push(heap_f: np.ndarray, heap_i: np.ndarray, si: np.ndarray, t: float, prio: int, kind: int,
              arg: int) -> None:  # pragma: no cover
    i = si[SI_HEAP_N]
    si[SI_HEAP_N] = i + 1
    key = (prio << 56) | si[SI_SEQ]
    si[SI_SEQ] += 1
    while i > 0:
        parent = (i - 1) // 2
        pt = heap_f[parent]
        if pt < t or (pt == t and heap_i[parent, HK_KEY] < key):
            break
        heap_f[i] = pt
        heap_i[i, HK_KEY] = heap_i[parent, HK_KEY]
        heap_i[i, HK_KIND] = heap_i[parent, HK_KIND]
        heap_i[i, HK_ARG] = heap_i[parent, HK_ARG]
        i = parent
    heap_f[i] = t
    heap_i[i, HK_KEY] = key
    heap_i[i, HK_KIND] = kind
    heap_i[i, HK_ARG] = arg


@njit(cache=True, nogil=True, _nrt=False)
def heap_pop(heap_f: np.ndarray, heap_i: np.ndarray, si: np.ndarray) -> None:  # pragma: no cover
    n = si[SI_HEAP_N] - 1
    si[SI_HEAP_N] = n
    if n == 0:
        return
    t = heap_f[n]
    key = heap_i[n, HK_KEY]
    kind = heap_i[n, HK_KIND]
    arg = heap_i[n, HK_ARG]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (heap_f[c + 1] < heap_f[c]
                          or (heap_f[c + 1] == heap_f[c] and heap_i[c + 1, HK_KEY] < heap_i[c, HK_KEY])):
            c += 1
        if t < heap_f[c] or (t == heap_f[c] and key < heap_i[c, HK_KEY]):
            break
        heap_f[i] = heap_f[c]
        heap_i[i, HK_KEY] = heap_i[c, HK_KEY]
        heap_i[i, HK_KIND] = heap_i[c, HK_KIND]
        heap_i[i, HK_ARG] = heap_i[c, HK_ARG]
        i = c
    heap_f[i] = t
    heap_i[i, HK_KEY] = key
    heap_i[i, HK_KIND] = kind
    heap_i[i, HK_ARG] = arg


@njit(cache=True, nogil=True, _nrt=False)
def log_event(si: np.ndarray, log_t: np.ndarray, log_i: np.ndarray, t: float, kind: int, req: int,
              disk: int) -> None:  # pragma: no cover
    k = si[SI_LOG_N]
    log_t[k] = t
    log_i[k, 0] = kind
    log_i[k, 1] = req
    log_i[k, 2] = disk
    si[SI_LOG_N] = k + 1


@njit(cache=True, nogil=True, _nrt=False)
def spread(ts: np.ndarray, col: int, w: float, t0: float, t1: float, rate: float) -> None:  # pragma: no cover
    """Add rate x overlap to column col of each interval [k w, (k+1) w) that [t0, t1) overlaps."""
    k = int(t0 / w)
    while t0 < t1:
        edge = (k + 1) * w
        e = edge if edge < t1 else t1
        ts[k, col] += rate * (e - t0)
        t0 = e
        k += 1


@njit(cache=True, nogil=True, _nrt=False)
def spread_disk(ts_disk: np.ndarray, d: int, col: int, w: float, t0: float, t1: float,
                rate: float) -> None:  # pragma: no cover
    k = int(t0 / w)
    while t0 < t1:
        edge = (k + 1) * w
        e = edge if edge < t1 else t1
        ts_disk[k, d, col] += rate * (e - t0)
        t0 = e
        k += 1


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def disk_count(dk_i: np.ndarray, dk_f: np.ndarray, ts_disk: np.ndarray, w: float, d: int, now: float,
               delta: int, is_read: bool) -> None:  # pragma: no cover
    """Integrate disk d's number in system (queued + in service; and its reads) up to now, then change it by
    delta (a read's when is_read)."""
    last = dk_f[d, DKF_LAST]
    nsys = dk_i[d, DK_NSYS]
    if nsys > 0 and now > last:
        dk_f[d, DKF_AREA] += nsys * (now - last)
        dk_f[d, DKF_AREA_R] += dk_i[d, DK_NSYS_R] * (now - last)
        if w > 0.0:
            spread_disk(ts_disk, d, 0, w, last, now, float(nsys))
    dk_f[d, DKF_LAST] = now
    if is_read:
        dk_i[d, DK_NSYS_R] += delta
    nsys += delta
    dk_i[d, DK_NSYS] = nsys
    if nsys > dk_i[d, DK_MAXQ]:
        dk_i[d, DK_MAXQ] = nsys


@njit(cache=True, nogil=True, _nrt=False)
def outstanding(si: np.ndarray, sf: np.ndarray, ts: np.ndarray, w: float, now: float,
                delta: int) -> None:  # pragma: no cover
    last = sf[SF_OUT_LAST]
    out = si[SI_OUT]
    if out > 0 and now > last:
        sf[A_OUT_AREA] += out * (now - last)
        if w > 0.0:
            spread(ts, TS_OUT_AREA, w, last, now, float(out))
    sf[SF_OUT_LAST] = now
    out += delta
    si[SI_OUT] = out
    if out > sf[A_MAX_OUT]:
        sf[A_MAX_OUT] = out


@njit(cache=True, nogil=True, _nrt=False)
def new_slot(slot_i: np.ndarray, si: np.ndarray) -> int:  # pragma: no cover
    s = int(si[SI_FREE])
    si[SI_FREE] = slot_i[s, S_NEXT]
    si[SI_USED] += 1
    slot_i[s, S_NEXT] = -1
    return s


@njit(cache=True, nogil=True, _nrt=False)
def free_slot(slot_i: np.ndarray, si: np.ndarray, s: int) -> None:  # pragma: no cover
    slot_i[s, S_NEXT] = si[SI_FREE]
    si[SI_FREE] = s
    si[SI_USED] -= 1


@njit(cache=True, nogil=True, _nrt=False)
def new_part(slot_i: np.ndarray, slot_f: np.ndarray, si: np.ndarray, zones: np.ndarray, surfaces: int, d: int,
             lbn: int, n: int, parent: int, kind: int, now: float, need_cyl: bool) -> int:  # pragma: no cover
    """A sub-request in a new slot; its cylinder only when need_cyl (a scheduler or a service mode reads it)."""
    s = new_slot(slot_i, si)
    slot_i[s, S_DISK] = d
    slot_i[s, S_LBN] = lbn
    slot_i[s, S_N] = n
    slot_i[s, S_PARENT] = parent
    slot_i[s, S_KIND] = kind
    slot_i[s, S_CYL] = cylinder_of(zones, surfaces, lbn) if need_cyl else -1
    slot_i[s, S_FLAGS] = 0
    slot_f[s, SB_ENQ] = now
    return int(s)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def enqueue(slot_i: np.ndarray, dk_i: np.ndarray, dk_f: np.ndarray, ts_disk: np.ndarray, w: float, d: int,
            s: int, now: float, si: np.ndarray, cyl_q: np.ndarray, cyl_blk: np.ndarray) -> None:  # pragma: no cover
    """Append slot s to disk d's queue (destages to its background queue) and to its cylinder's."""
    if slot_i[s, S_KIND] == K_DESTAGE:
        tail = dk_i[d, DK_DTAIL]
        if tail < 0:
            dk_i[d, DK_DHEAD] = s
        else:
            slot_i[tail, S_NEXT] = s
        dk_i[d, DK_DTAIL] = s
        return
    tail = dk_i[d, DK_QTAIL]
    slot_i[s, S_NEXT] = -1
    slot_i[s, S_QPREV] = tail
    if tail < 0:
        dk_i[d, DK_QHEAD] = s
    else:
        slot_i[tail, S_NEXT] = s
    dk_i[d, DK_QTAIL] = s
    dk_i[d, DK_QLEN] += 1
    if dk_i[d, DK_INDEXED] != 0:
        _cyl_append(slot_i, cyl_q, cyl_blk, d, s, si)
    disk_count(dk_i, dk_f, ts_disk, w, d, now, 1, slot_i[s, S_KIND] in (K_READ, K_MIG_READ))


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _cyl_append(slot_i: np.ndarray, cyl_q: np.ndarray, cyl_blk: np.ndarray, d: int, s: int,
                si: np.ndarray) -> None:  # pragma: no cover
    """Append queued slot s to its cylinder's queue on disk d, numbered after every slot indexed before it."""
    slot_i[s, S_QSEQ] = si[SI_QSEQ]
    si[SI_QSEQ] += 1
    c = slot_i[s, S_CYL]
    slot_i[s, S_CNEXT] = -1
    ct = cyl_q[d, c, 1]
    if ct < 0:
        cyl_q[d, c, 0] = s
        cyl_blk[d, c // CYL_BLOCK] += 1
    else:
        slot_i[ct, S_CNEXT] = s
    cyl_q[d, c, 1] = s


@njit(cache=True, nogil=True, _nrt=False)
def _cyl_at_or_after(cyl_q: np.ndarray, cyl_blk: np.ndarray, d: int, x: int) -> int:  # pragma: no cover
    """The lowest cylinder >= x holding a queued sub-request on disk d, -1: none."""
    ncyl = cyl_q.shape[1]
    x = max(x, 0)
    if x >= ncyl:
        return -1
    b = x // CYL_BLOCK
    for c in range(x, min((b + 1) * CYL_BLOCK, ncyl)):
        if cyl_q[d, c, 0] >= 0:
            return c
    for bb in range(b + 1, cyl_blk.shape[1]):
        if cyl_blk[d, bb] > 0:
            for c in range(bb * CYL_BLOCK, min((bb + 1) * CYL_BLOCK, ncyl)):
                if cyl_q[d, c, 0] >= 0:
                    return c
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def _cyl_at_or_before(cyl_q: np.ndarray, cyl_blk: np.ndarray, d: int, x: int) -> int:  # pragma: no cover
    """The highest cylinder <= x holding a queued sub-request on disk d, -1: none."""
    x = min(x, cyl_q.shape[1] - 1)
    if x < 0:
        return -1
    b = x // CYL_BLOCK
    for c in range(x, b * CYL_BLOCK - 1, -1):
        if cyl_q[d, c, 0] >= 0:
            return c
    for bb in range(b - 1, -1, -1):
        if cyl_blk[d, bb] > 0:
            for c in range((bb + 1) * CYL_BLOCK - 1, bb * CYL_BLOCK - 1, -1):
                if cyl_q[d, c, 0] >= 0:
                    return c
    return -1


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def pick(slot_i: np.ndarray, dk_i: np.ndarray, sched: int, span: int, d: int, cyl_q: np.ndarray,
         cyl_blk: np.ndarray, scan_max: int, si: np.ndarray) -> int:  # pragma: no cover
    """Remove and return disk d's next slot: FCFS (0), SSTF (1) or C-LOOK (2) over its queue (ties go to
    the earliest queued); destages only when the queue is empty; -1 when there is nothing. A queue that grew
    past scan_max is indexed by cylinder until it empties, and searched there instead of scanned (the same
    slot)."""
    head = dk_i[d, DK_QHEAD]
    if head < 0:
        s = int(dk_i[d, DK_DHEAD])
        if s >= 0:
            dk_i[d, DK_DHEAD] = slot_i[s, S_NEXT]
            if slot_i[s, S_NEXT] < 0:
                dk_i[d, DK_DTAIL] = -1
            slot_i[s, S_NEXT] = -1
        return s
    best = head
    cyl0 = dk_i[d, DI_CYL]
    if sched != 0 and dk_i[d, DK_INDEXED] == 0 and dk_i[d, DK_QLEN] > scan_max and cyl_q.shape[1] > 0:
        cur = head                          # index the queue by cylinder, in queue order
        while cur >= 0:
            _cyl_append(slot_i, cyl_q, cyl_blk, d, cur, si)
            cur = slot_i[cur, S_NEXT]
        dk_i[d, DK_INDEXED] = 1
    if sched != 0 and dk_i[d, DK_INDEXED] == 0:
        best_key = 1 << 62
        cur = head
        while cur >= 0:
            c = slot_i[cur, S_CYL]
            # SSTF: distance; C-LOOK: ahead of the head in cylinder order, then wrap to the lowest.
            key = abs(c - cyl0) if sched == 1 else (c - cyl0 if c >= cyl0 else c + span)
            if key < best_key:
                best_key = key
                best = cur
            cur = slot_i[cur, S_NEXT]
    elif sched != 0:
        up = _cyl_at_or_after(cyl_q, cyl_blk, d, cyl0)
        if sched == 2:
            c = up if up >= 0 else _cyl_at_or_after(cyl_q, cyl_blk, d, 0)
        else:
            down = _cyl_at_or_before(cyl_q, cyl_blk, d, cyl0)
            if up < 0 or (down >= 0 and cyl0 - down < up - cyl0):
                c = down
            elif down < 0 or up - cyl0 < cyl0 - down:
                c = up
            else:                           # as near below as above (or at cyl0): the earlier queued
                c = down if slot_i[cyl_q[d, down, 0], S_QSEQ] <= slot_i[cyl_q[d, up, 0], S_QSEQ] else up
        best = cyl_q[d, c, 0]
    prev = -1 if best == head else slot_i[best, S_QPREV]    # FCFS takes the head: no load of its link
    nxt = slot_i[best, S_NEXT]
    if prev < 0:
        dk_i[d, DK_QHEAD] = nxt
    else:
        slot_i[prev, S_NEXT] = nxt
    if nxt < 0:
        dk_i[d, DK_QTAIL] = prev
    else:
        slot_i[nxt, S_QPREV] = prev
    slot_i[best, S_NEXT] = -1
    dk_i[d, DK_QLEN] -= 1
    if dk_i[d, DK_INDEXED] != 0:            # the earliest queued of its cylinder: its cylinder queue's head
        c = slot_i[best, S_CYL]
        cn = slot_i[best, S_CNEXT]
        cyl_q[d, c, 0] = cn
        if cn < 0:
            cyl_q[d, c, 1] = -1
            cyl_blk[d, c // CYL_BLOCK] -= 1
        if dk_i[d, DK_QLEN] == 0:           # every cylinder queue is empty again
            dk_i[d, DK_INDEXED] = 0
    return int(best)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def map_unit(lp: np.ndarray, ext_lstart: np.ndarray, ext_len: np.ndarray, ext_disk: np.ndarray,
             ext_pstart: np.ndarray, ext_index: np.ndarray, dev: int, lbn: int, logical: int, req: int,
             seed: np.uint64) -> tuple[int, int, int]:  # pragma: no cover
    """(disk, physical sector, sectors left in this mapping unit) for one logical sector."""
    kind = lp[LP_KIND]
    cap = lp[LP_CAPACITY]
    if kind == LAYOUT_AS_TRACED:
        return dev, lbn, cap - lbn
    if kind == LAYOUT_CONCAT:
        disk = logical // cap
        p = logical - disk * cap
        return disk, p, cap - p
    if kind == LAYOUT_STRIPED:
        unit = lp[LP_UNIT]
        width = lp[LP_WIDTH]
        k = logical // unit
        off = logical - k * unit
        return (lp[LP_FIRST] + k % width) % lp[LP_DISKS], (k // width) * unit + off, unit - off
    if kind == LAYOUT_RANDOM:
        u = u01(seed, (np.int64(1) << 40) + req)
        disk = min(int(u * lp[LP_DISKS]), lp[LP_DISKS] - 1)
        return disk, logical % cap, 1 << 62
    lo = extent_at(ext_lstart, ext_index, lp[LP_SHIFT], logical)
    off = logical - ext_lstart[lo]
    return ext_disk[lo], ext_pstart[lo] + off, ext_len[lo] - off


#: How many arrivals ahead run_loop asks for an extent layout's index entry (the extent's row: half as many).
EXTENT_AHEAD = 8


@njit(cache=True, nogil=True, _nrt=False)
def run_loop(core: Core, out: Out, req: ReqArrays, lay: LayoutArrays, disk: DiskArrays, until: float,
             max_events: int) -> int:  # pragma: no cover
    """Process events in (time, priority, seq) order until the time `until`, max_events events (-1: no
    limit), the end of the workload, a pool that must grow, or saturation; returns the status code."""
    si = core.si
    sf = core.sf
    heap_f = core.heap_f
    heap_i = core.heap_i
    slot_i = core.slot_i
    slot_f = core.slot_f
    dk_i = core.dk_i
    dk_f = core.dk_f
    seg = core.seg
    cyl_q = core.cyl_q
    cyl_blk = core.cyl_blk
    resp_out = out.resp
    out_queue = out.out_queue
    out_service = out.out_service
    ts = out.ts
    ts_disk = out.ts_disk
    backlog = out.backlog
    log_t = out.log_t
    log_i = out.log_i
    arrival = req.arrival_us
    device = req.device
    lbns = req.lbn
    sectors = req.sectors
    rflags = req.flags
    think_us = req.think_us
    lp = lay.params
    ext_lstart = lay.ext_lstart
    ext_len = lay.ext_len
    ext_disk = lay.ext_disk
    ext_pstart = lay.ext_pstart
    ext_index = lay.ext_index
    rm_time = lay.rm_time
    dev_base = lay.dev_base
    zones = disk.zones
    seek_us = disk.seek_us
    params = disk.params

    base = si[SI_BASE]
    n_req = base + arrival.shape[0]
    more = si[CI_MORE] != 0
    bg_more = si[CI_MORE] == 2
    n_disk = dk_i.shape[0]
    n_rm = rm_time.shape[0]
    surfaces = int(params[P_SURFACES])
    cap = lp[LP_CAPACITY]
    random_layout = lp[LP_KIND] == LAYOUT_RANDOM
    # An extent layout's lookup of an arriving request (map_unit) misses the cache in the index, then in the
    # extent's row: both are asked for ahead, the index EXTENT_AHEAD arrivals before, the row half as many.
    n_index = ext_index.shape[0]
    extent_layout = n_index > 0 and lp[LP_KIND] not in (LAYOUT_AS_TRACED, LAYOUT_CONCAT, LAYOUT_STRIPED,
                                                          LAYOUT_RANDOM)
    ext_shift = lp[LP_SHIFT]
    w = sf[CF_TS_W]
    margin = si[CI_MARGIN]
    logging = si[CI_LOG] != 0
    closed = si[CI_CLOSED] != 0
    mode = si[CI_MODE]
    sched = si[CI_SCHED]
    need_cyl = sched != 0 or mode != MODE_DETAILED    # S_CYL's readers: the schedulers, the simple modes
    span = si[CI_CYLS]
    scan_max = si[CI_QSCAN]
    zero_latency = si[CI_ZL] != 0
    per_req = si[CI_PER_REQ] != 0
    has_think = si[CI_HAS_THINK] != 0
    seed = np.uint64(si[CI_SEED])
    max_out = si[CI_MAX_OUT]
    cp_every = si[CI_CP_EVERY]
    # The next arrival count with a backlog checkpoint (a multiple of cp_every; none when cp_every is 0).
    next_cp = (si[SI_ARRIVED] // cp_every + 1) * cp_every if cp_every > 0 else -1
    todo = core.todo
    open_part = core.open_part
    events = 0
    while True:
        if max_events >= 0 and events >= max_events:
            return ST_PAUSED
        if slot_i.shape[0] - si[SI_USED] < margin:
            return ST_GROW_POOL
        if logging and si[SI_LOG_N] + 4 * margin + 16 > log_t.shape[0]:
            return ST_GROW_LOG
        if bg_more:                     # the loop's next request past the background ones (an issue takes it)
            i = si[SI_NEXT_FG]
            while i < n_req and rflags[i - base] & FLAG_BACKGROUND:
                i += 1
            si[SI_NEXT_FG] = i
        if more and (si[SI_NEXT_FG] if closed else si[SI_NEXT_ARR]) >= n_req:
            return ST_NEED_REQ
        # The next event: heap top, next remap, or next open-loop arrival (in closed loop, background only).
        which = -1
        t_best = INF
        key_best = 0
        if si[SI_HEAP_N] > 0:
            t_best = heap_f[0]
            key_best = heap_i[0, HK_KEY]
            which = 0
        jr = si[SI_NEXT_RM]
        if jr < n_rm:
            t = rm_time[jr]
            key = PRIO_REMAP << 56
            if which < 0 or t < t_best or (t == t_best and key < key_best):
                t_best = t
                key_best = key
                which = 1
        ia = si[SI_NEXT_ARR]
        if closed:
            while ia < n_req and not rflags[ia - base] & FLAG_BACKGROUND:
                ia += 1
            si[SI_NEXT_ARR] = ia
        if ia < n_req:
            t = arrival[ia - base]
            if which < 0 or t < t_best or (t == t_best and key_best > (PRIO_ARRIVAL << 56)):
                t_best = t
                which = 2
        elif bg_more and (which < 0 or n_req == base or t_best >= arrival[n_req - 1 - base]):
            return ST_NEED_REQ          # a background arrival of the next requests may come first
        if which < 0:
            return ST_DONE
        if t_best > until:
            if until > sf[SF_NOW]:
                sf[SF_NOW] = until
            return ST_PAUSED
        if w > 0.0 and int(t_best / w) + 1 >= ts.shape[0]:
            return ST_GROW_TS
        now = t_best
        sf[SF_NOW] = now
        sf[SF_T_EVENT] = now
        events += 1
        si[SI_EVENTS] += 1
        ntodo = 0
        arrive = -1

        if which == 0:
            kind = heap_i[0, HK_KIND]
            d = heap_i[0, HK_ARG]
            heap_pop(heap_f, heap_i, si)
            if kind == EV_ISSUE:
                i = si[SI_NEXT_FG]
                while i < n_req and rflags[i - base] & FLAG_BACKGROUND:
                    i += 1
                si[SI_NEXT_FG] = i + 1 if i < n_req else i
                if i < n_req:
                    arrive = i
            else:
                # ---- disk d finished its slot s ----
                s = dk_i[d, DK_BUSY]
                dk_i[d, DK_BUSY] = -1
                svc = slot_f[s, SB_SVC]
                start = slot_f[s, SB_START]
                dk_f[d, DKF_BUSY] += svc
                if w > 0.0:
                    spread_disk(ts_disk, d, 1, w, start, now, 1.0)
                skind = slot_i[s, S_KIND]
                is_read = skind in (K_READ, K_MIG_READ)
                if is_read:
                    dk_f[d, DKF_BUSY_R] += svc
                sflags = slot_i[s, S_FLAGS]
                p = slot_i[s, S_PARENT]
                if sflags & F_PHYSICAL:
                    dk_i[d, DK_IOS] += 1
                todo[ntodo] = d
                ntodo += 1
                if logging and skind in (K_DESTAGE, K_MIG_READ, K_MIG_WRITE):
                    log_event(si, log_t, log_i, now, LOG_PART_DONE, -1, d)
                if skind == K_DESTAGE:
                    sf[A_DESTAGE_IOS] += 1.0
                    sf[A_DESTAGE_BUSY] += svc
                    free_slot(slot_i, si, s)
                elif skind in (K_MIG_READ, K_MIG_WRITE):
                    disk_count(dk_i, dk_f, ts_disk, w, d, now, -1, is_read)
                    sf[A_MIG_IOS] += 1.0
                    sf[A_MIG_SECTORS] += slot_i[s, S_N]
                    sf[A_MIG_BUSY] += svc
                    if skind == K_MIG_READ:
                        sf[A_MIG_IOS_R] += 1.0
                        sf[A_MIG_SECTORS_R] += slot_i[s, S_N]
                        sf[A_MIG_BUSY_R] += svc
                        nd = slot_i[p, PA_MDISK]
                        ws = new_part(slot_i, slot_f, si, zones, surfaces, nd, slot_i[p, PA_MLBN],
                                      slot_i[p, PA_MN], p, K_MIG_WRITE, now, need_cyl)
                        enqueue(slot_i, dk_i, dk_f, ts_disk, w, nd, ws, now, si, cyl_q, cyl_blk)
                        todo[ntodo] = nd
                        ntodo += 1
                    else:
                        free_slot(slot_i, si, p)
                    free_slot(slot_i, si, s)
                else:
                    disk_count(dk_i, dk_f, ts_disk, w, d, now, -1, is_read)
                    c = 0 if skind == K_READ else 1
                    pf = slot_i[p, PA_FLAGS]
                    if not pf & PFL_BG:
                        sf[A_PARTS + c] += 1.0
                        sf[A_SECT + c] += slot_i[s, S_N]
                        if sflags & F_PHYSICAL:
                            sf[A_PHYS + c] += 1.0
                        if sflags & F_HIT:
                            sf[A_HIT_PARTS] += 1.0
                    if sflags & F_PHYSICAL and c == 0:
                        pf |= PFL_MISS
                        slot_i[p, PA_FLAGS] = pf
                    slot_f[p, PF_QUEUE] = start - slot_f[s, SB_ENQ]
                    slot_f[p, PF_SVC] += svc
                    slot_i[p, PA_PENDING] -= 1
                    i = slot_i[p, PA_REQ]
                    if logging:
                        log_event(si, log_t, log_i, now, LOG_PART_DONE, i, d)
                    free_slot(slot_i, si, s)
                    if slot_i[p, PA_PENDING] == 0:
                        # ---- request i complete (fork-join: its slowest part just finished) ----
                        r = now - slot_f[p, PF_ISSUE]
                        resp_out[i - base] = r
                        if per_req:
                            out_queue[i - base] = slot_f[p, PF_QUEUE]
                            out_service[i - base] = slot_f[p, PF_SVC]
                        if pf & PFL_BG:
                            sf[A_BG_N] += 1.0
                            sf[A_BG_RESP] += r
                        else:
                            sf[A_N + c] += 1.0
                            sf[A_RESP + c] += r
                            sf[A_QUEUE + c] += slot_f[p, PF_QUEUE]
                            sf[A_SVC + c] += slot_f[p, PF_SVC]
                            if c == 0 and pf & PFL_MISS:
                                sf[A_MISS_REQ_R] += 1.0
                        if w > 0.0:
                            k = int(now / w)
                            ts[k, TS_DONE] += 1.0
                            ts[k, TS_RESP_SUM] += r
                            if r > ts[k, TS_RESP_MAX]:
                                ts[k, TS_RESP_MAX] = r
                        si[SI_DONE] += 1
                        sf[SF_T_LAST] = now
                        outstanding(si, sf, ts, w, now, -1)
                        if logging:
                            log_event(si, log_t, log_i, now, LOG_DONE, i, -1)
                        if closed and not pf & PFL_BG and si[SI_ISSUES] < si[CI_FG_TOTAL]:
                            think = think_us[i - base] if has_think else sf[CF_THINK_US]
                            heap_push(heap_f, heap_i, si, now + think, PRIO_ISSUE, EV_ISSUE, 0)
                            si[SI_ISSUES] += 1
                        free_slot(slot_i, si, p)
        elif which == 1:
            # ---- remap event jr: the extent moves now; the copy (if any) is queued as migration I/O ----
            si[SI_NEXT_RM] = jr + 1
            k = lay.rm_ext[jr]
            old_disk = ext_disk[k]
            old_p = ext_pstart[k]
            ext_disk[k] = lay.rm_disk[jr]
            ext_pstart[k] = lay.rm_pstart[jr]
            sf[A_REMAPS] += 1.0
            if logging:
                log_event(si, log_t, log_i, now, LOG_REMAP, k, lay.rm_disk[jr])
            if lay.rm_migrate[jr] != 0:
                p = new_slot(slot_i, si)
                slot_i[p, PA_REQ] = -1 - jr
                slot_i[p, PA_FLAGS] = PFL_MIG
                slot_i[p, PA_PENDING] = 1
                slot_i[p, PA_MDISK] = lay.rm_disk[jr]
                slot_i[p, PA_MLBN] = lay.rm_pstart[jr]
                slot_i[p, PA_MN] = ext_len[k]
                slot_f[p, PF_ISSUE] = now
                s = new_part(slot_i, slot_f, si, zones, surfaces, old_disk, old_p, ext_len[k], p, K_MIG_READ, now,
                              need_cyl)
                enqueue(slot_i, dk_i, dk_f, ts_disk, w, old_disk, s, now, si, cyl_q, cyl_blk)
                todo[ntodo] = old_disk
                ntodo += 1
        else:
            si[SI_NEXT_ARR] = ia + 1
            arrive = ia

        if arrive >= 0:
            # ---- request i enters the array: fork over the mapping units, queue the parts ----
            i = arrive
            if extent_layout:
                j = i + EXTENT_AHEAD
                if j < n_req:
                    ahead = dev_base[device[j - base]] + lbns[j - base]
                    prefetch_read(ext_index, index_slot(ext_index, ext_shift, ahead))
                j = i + EXTENT_AHEAD // 2
                if j < n_req:
                    ahead = dev_base[device[j - base]] + lbns[j - base]
                    e = ext_index[index_slot(ext_index, ext_shift, ahead)]
                    prefetch_read(ext_lstart, e)
                    prefetch_read(ext_disk, e)
                    prefetch_read(ext_pstart, e)
                    prefetch_read(ext_len, e)
            fl = rflags[i - base]
            p = new_slot(slot_i, si)
            slot_i[p, PA_REQ] = i
            pf = 0
            if fl & FLAG_READ:
                pf |= PFL_READ
            if fl & FLAG_BACKGROUND:
                pf |= PFL_BG
            slot_i[p, PA_FLAGS] = pf
            slot_i[p, PA_PENDING] = 0
            slot_f[p, PF_ISSUE] = now
            slot_f[p, PF_QUEUE] = 0.0
            slot_f[p, PF_SVC] = 0.0
            dev = device[i - base]
            lbn = lbns[i - base]
            n = int(sectors[i - base])
            logical = dev_base[dev] + lbn
            skind = K_READ if fl & FLAG_READ else K_WRITE
            # Pieces physically contiguous on one disk form one sub-request, as a striping driver issues
            # them: each piece joins the request's latest part on its disk when it continues that part
            # (units k, k + width, ... of a stripe) or ends where it begins; otherwise it opens a new part.
            # Parts are chained through S_NEXT and queued in the order they were opened once all are known.
            first = -1
            last = -1
            while n > 0:
                d, pl, run = map_unit(lp, ext_lstart, ext_len, ext_disk, ext_pstart, ext_index, dev, lbn, logical, i,
                                      seed)
                if random_layout and pl + n > cap:
                    pl = cap - n
                k = n if n < run else run
                o = open_part[d]
                if o >= 0 and slot_i[o, S_LBN] + slot_i[o, S_N] == pl:
                    slot_i[o, S_N] += k
                elif o >= 0 and pl + k == slot_i[o, S_LBN]:
                    slot_i[o, S_LBN] = pl
                    slot_i[o, S_N] += k
                    if need_cyl:
                        slot_i[o, S_CYL] = cylinder_of(zones, surfaces, pl)
                else:
                    s = new_part(slot_i, slot_f, si, zones, surfaces, d, pl, k, p, skind, now, need_cyl)
                    open_part[d] = s
                    if last >= 0:
                        slot_i[last, S_NEXT] = s
                    else:
                        first = s
                    last = s
                    slot_i[p, PA_PENDING] += 1
                    if ntodo < todo.shape[0]:
                        todo[ntodo] = d
                    ntodo += 1
                n -= k
                lbn += k
                logical += k
            s = first
            while s >= 0:
                nxt = slot_i[s, S_NEXT]
                slot_i[s, S_NEXT] = -1
                d = slot_i[s, S_DISK]
                open_part[d] = -1
                enqueue(slot_i, dk_i, dk_f, ts_disk, w, d, s, now, si, cyl_q, cyl_blk)
                s = nxt
            si[SI_ARRIVED] += 1
            if si[SI_STARTED] == 0:
                si[SI_STARTED] = 1
                sf[SF_T_FIRST] = now
                sf[SF_OUT_LAST] = now
            outstanding(si, sf, ts, w, now, 1)
            if w > 0.0:
                ts[int(now / w), TS_ARR] += 1.0
            if si[SI_ARRIVED] == next_cp:
                j = next_cp // cp_every
                if j < backlog.shape[0]:
                    backlog[j] = si[SI_OUT]
                next_cp += cp_every
            if logging:
                log_event(si, log_t, log_i, now, LOG_ARRIVE, i, -1)

        # ---- start service on every touched disk that is idle ----
        if ntodo > todo.shape[0]:
            for d in range(n_disk):
                todo[d] = d
            ntodo = n_disk
        for q in range(ntodo):
            d = todo[q]
            if dk_i[d, DK_BUSY] >= 0:
                continue
            s = pick(slot_i, dk_i, sched, span, d, cyl_q, cyl_blk, scan_max, si)
            if s < 0:
                continue
            skind = slot_i[s, S_KIND]
            lbn = slot_i[s, S_LBN]
            n = slot_i[s, S_N]
            is_write = skind in (K_WRITE, K_DESTAGE, K_MIG_WRITE)
            if mode == MODE_DETAILED:
                svc, sflags = detailed_service(zones, seek_us, params, dk_i, dk_f, seg, d, now, lbn, n, is_write,
                                               skind == K_DESTAGE, zero_latency)
            else:
                sflags = F_PHYSICAL
                if mode == MODE_EXPECTED:
                    svc = expected_service(zones, params, lbn, n, is_write)
                elif mode == MODE_CONSTANT:
                    svc = sf[CF_CONST_US]
                else:
                    u = u01(seed, si[SI_RNG])
                    si[SI_RNG] += 1
                    svc = -sf[CF_EXP_US] * math.log(1.0 - u)
                dk_i[d, DI_CYL] = slot_i[s, S_CYL]
            if sflags & F_DESTAGE:
                ds = new_part(slot_i, slot_f, si, zones, surfaces, d, lbn, n, -1, K_DESTAGE, now, need_cyl)
                enqueue(slot_i, dk_i, dk_f, ts_disk, w, d, ds, now, si, cyl_q, cyl_blk)
            slot_i[s, S_FLAGS] = sflags
            slot_f[s, SB_START] = now
            slot_f[s, SB_SVC] = svc
            dk_i[d, DK_BUSY] = s
            heap_push(heap_f, heap_i, si, now + svc, PRIO_DONE, EV_DONE, d)
            if logging:
                p = slot_i[s, S_PARENT]
                log_event(si, log_t, log_i, now, LOG_START, slot_i[p, PA_REQ] if p >= 0 else -1, d)

        if arrive >= 0 and not closed and si[SI_OUT] > max_out:
            return ST_SATURATED

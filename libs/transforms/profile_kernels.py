"""The profile's compiled loops (numba): the per-window rounding and histogram cells, and the block pass over a
device's requests in time order (libs.transforms.profile, libs.table_io.profile)."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _code_of(v: int) -> int:  # pragma: no cover - compiled
    """round_significant_code of one value."""
    if v < 10_000:
        return v
    step = 1
    e = 0
    limit = 10_000
    while v >= limit:                  # multiplications, not divisions
        step *= 10
        e += 1
        if limit > 100_000_000_000_000_000:
            break                      # the next limit would overflow: v < 2**63 < 10 * limit
        limit *= 10
    r = np.int64(np.float64(v) / np.float64(step))   # a float division (an int64 one costs 40-90 cycles),
    rest = v - r * step                                  # corrected to the exact quotient
    if rest < 0:
        r -= 1
        rest += step
    elif rest >= step:
        r += 1
        rest -= step
    if 2 * rest >= step:
        r += 1
    if r == 10_000:
        r = 1_000
        e += 1
    return 10_000 + 9_000 * (e - 1) + (r - 1_000)


@numba.njit(cache=True)
def round_significant_code(values: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Non-negative int64 values rounded as libs.transforms.profile.round_significant_np rounds them
    (4 significant digits, half up), in integers, as small codes in the same order: v itself below 10,000, else
    10,000 + 9,000 * (e - 1) + (m - 1,000) for the rounded value m * 10**e (1,000 <= m <= 9,999)."""
    out = np.empty_like(values)
    for i in range(len(values)):
        out[i] = _code_of(values[i])
    return out


CHUNK = 8                      # blocks per hash-table entry: a request's blocks share one or two entries
NEVER = np.iinfo(np.int64).min


@numba.njit(cache=True)
def _grown(keys: np.ndarray, last: np.ndarray):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The table at twice the size, every entry placed again."""
    size = 2 * len(keys)
    bits = 0
    while (1 << bits) < size:
        bits += 1
    new_keys = np.zeros(size, np.int64)
    new_last = np.empty((size, last.shape[1]), np.int64)
    for i in range(len(keys)):
        if keys[i] != 0:
            j = np.int64((np.uint64(keys[i] - 1) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
            while new_keys[j] != 0:
                j = (j + 1) & (size - 1)
            new_keys[j] = keys[i]
            new_last[j, :] = last[i, :]
    return new_keys, new_last


@numba.njit(cache=True, inline="always")
def _count(counts: np.ndarray, touched: np.ndarray, nt: int, v: int) -> int:  # pragma: no cover - compiled
    """Counts v under its value code; a code's first count appends it to touched[:nt]. The new nt."""
    return _count_code(counts, touched, nt, _code_of(v))


@numba.njit(cache=True, inline="always")
def _count_code(counts: np.ndarray, touched: np.ndarray, nt: int, c: int) -> int:  # pragma: no cover - compiled
    """_count of a value whose code c is known."""
    if counts[c] == 0:
        touched[nt] = c
        nt += 1
    counts[c] += 1
    return nt


@numba.njit(cache=True)
def _room(cells: np.ndarray, nc: int, more: int) -> np.ndarray:  # pragma: no cover - compiled
    """cells (rows of (group, value, count), nc used), grown to take `more` rows."""
    if nc + more <= len(cells):
        return cells
    grown = np.empty((max(2 * len(cells), nc + more), 3), np.int64)
    grown[:nc] = cells[:nc]
    return grown


@numba.njit(cache=True)
def _flush(cells: np.ndarray, nc: int, k: int, counts: np.ndarray, touched: np.ndarray,
           nt: int):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Appends window k's (k, code, count) cells in code order to cells[:nc] (grown when full) and
    clears its counts."""
    cells = _room(cells, nc, nt)
    if 16 * nt < len(counts):
        for c in np.sort(touched[:nt]):
            cells[nc, 0] = k
            cells[nc, 1] = c
            cells[nc, 2] = counts[c]
            counts[c] = 0
            nc += 1
    else:                                  # many codes: a scan of the counts beats a sort
        for c in range(len(counts)):
            if counts[c]:
                cells[nc, 0] = k
                cells[nc, 1] = c
                cells[nc, 2] = counts[c]
                counts[c] = 0
                nc += 1
    return cells, nc


@numba.njit(cache=True, inline="always")
def _shift_of(d: int) -> int:  # pragma: no cover - compiled
    """log2(d) when d is a power of two, else -1."""
    if d <= 0 or d & (d - 1):
        return -1
    s = 0
    while (1 << s) < d:
        s += 1
    return s


@numba.njit(cache=True, inline="always")
def _div(x: int, d: int, shift: int) -> int:  # pragma: no cover - compiled
    """x // d (x >= 0), by a shift when d is a power of two (a division costs ~30 cycles)."""
    return x >> shift if shift >= 0 else x // d


@numba.njit(cache=True)
def _grow(a: np.ndarray, size: int, fill: float = 0) -> np.ndarray:  # pragma: no cover - compiled
    """a in an array of at least `size` (twice a's length or more), the new part `fill`."""
    if size <= len(a):
        return a
    out = np.full(max(2 * len(a), size), fill, a.dtype)
    out[:len(a)] = a
    return out


@numba.njit(cache=True)
def block_pass(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray, window_us: int, block_bytes: int,
               extent_bytes: int, region_bytes: int, buckets: int, bucket: int, codes: int,
               seen_blocks: np.ndarray, seen_last: np.ndarray):  # type: ignore[no-untyped-def]  # pragma: no cover

    """The block pass over one device's requests in time order (byte ranges [lo, hi)), keeping the blocks
    and extents of the address regions r (region_bytes, a multiple of both block_bytes and
    extent_bytes) with r % buckets == bucket, in one loop: every block access's previous access to
    the same block comes from an open-addressing table of the last access per block (CHUNK blocks
    per entry).

    Returns per window (starts `win`, in time order): the reuse times' count (= re-accesses), sum, sum of
    squares and maximum, footprint (blocks first accessed in the window) and accesses; the reuse
    times' (window index, value code, count) cells sorted by window and code; the whole trace's
    distinct blocks, accesses and re-accesses; one (window start, extent) per request and extent
    it touches; and the last access of every block afterwards (blocks, ts_us; in no order). seen_blocks,
    seen_last: the blocks accessed before these requests and their last access (empty: none)."""
    n = len(ts)
    bshift, eshift, rshift = _shift_of(block_bytes), _shift_of(extent_bytes), _shift_of(region_bytes)
    bits = 12
    keys = np.zeros(1 << bits, np.int64)              # chunk of CHUNK blocks + 1; 0: empty
    last = np.empty((1 << bits, CHUNK), np.int64)     # last access per block of the chunk; NEVER: none
    used = 0
    for i in range(len(seen_blocks)):                 # the earlier accesses' table
        b = seen_blocks[i]
        chunk = b // CHUNK
        if 2 * (used + 1) > len(keys):
            keys, last = _grown(keys, last)
            bits += 1
        j = np.int64((np.uint64(chunk) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
        while keys[j] != 0 and keys[j] != chunk + 1:
            j = (j + 1) & (len(keys) - 1)
        if keys[j] == 0:
            keys[j] = chunk + 1
            last[j, :] = NEVER
            used += 1
        last[j, b % CHUNK] = seen_last[i]
    m = 64                                            # per-window arrays, grown
    win = np.empty(m, np.int64)
    rn = np.zeros(m, np.int64)
    rs = np.zeros(m, np.float64)
    rs2 = np.zeros(m, np.float64)
    rmx = np.full(m, -np.inf)
    fnew = np.zeros(m, np.int64)
    facc = np.zeros(m, np.int64)
    ext_w = np.empty(max(n, 16), np.int64)
    ext_id = np.empty(max(n, 16), np.int64)
    counts = np.zeros(codes, np.int64)
    touched = np.empty(codes, np.int64)
    cells = np.empty((1 << 12, 3), np.int64)          # (window index, code, count), grown
    nc = 0
    nt = 0
    k = -1
    w = 0
    w_end = 0
    t_ext = 0
    distinct = 0
    total = 0
    again_all = 0
    c_n, c_s, c_s2, c_mx, c_new, c_acc = 0, 0.0, 0.0, -np.inf, 0, 0
    # The previous reuse time and its code: the blocks of a request written together come back together, with one
    # reuse time, so most blocks skip the rounding.
    last_d, last_code = -1, 0
    for i in range(n):
        t = ts[i]
        if k < 0 or t >= w_end:                       # a new window (requests come in time order)
            if k >= 0:                                # the last one's sums, kept in locals meanwhile
                rn[k], rs[k], rs2[k], rmx[k], fnew[k], facc[k] = c_n, c_s, c_s2, c_mx, c_new, c_acc
            c_n, c_s, c_s2, c_mx, c_new, c_acc = 0, 0.0, 0.0, -np.inf, 0, 0
            if nt:
                cells, nc = _flush(cells, nc, k, counts, touched, nt)
                nt = 0
            if window_us > 0:
                w = (t // window_us) * window_us
                w_end = w + window_us
            else:
                w_end = np.iinfo(np.int64).max
            k += 1
            if k == m:
                m *= 2
                win, rn, fnew, facc = _grow(win, m), _grow(rn, m), _grow(fnew, m), _grow(facc, m)
                rs, rs2, rmx = _grow(rs, m), _grow(rs2, m), _grow(rmx, m, -np.inf)
            win[k] = w
        first, final = lo[i], hi[i] - 1
        for r in range(_div(first, region_bytes, rshift), _div(final, region_bytes, rshift) + 1):
            if buckets > 1 and r % buckets != bucket:
                continue
            a = max(first, r * region_bytes)
            z = min(final, (r + 1) * region_bytes - 1)
            e0, e1 = _div(a, extent_bytes, eshift), _div(z, extent_bytes, eshift)
            if t_ext + e1 - e0 + 1 > len(ext_id):
                ext_w = _grow(ext_w, t_ext + e1 - e0 + 1)
                ext_id = _grow(ext_id, t_ext + e1 - e0 + 1)
            for e in range(e0, e1 + 1):
                ext_w[t_ext] = w
                ext_id[t_ext] = e
                t_ext += 1
            chunk = -1
            j = 0
            for b in range(_div(a, block_bytes, bshift), _div(z, block_bytes, bshift) + 1):
                if b // CHUNK != chunk:
                    chunk = b // CHUNK
                    if 2 * (used + 1) > len(keys):
                        keys, last = _grown(keys, last)
                        bits += 1
                    mask = len(keys) - 1
                    j = np.int64((np.uint64(chunk) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
                    while keys[j] != 0 and keys[j] != chunk + 1:
                        j = (j + 1) & mask
                    if keys[j] == 0:
                        keys[j] = chunk + 1
                        last[j, :] = NEVER
                        used += 1
                total += 1
                c_acc += 1
                p = last[j, b % CHUNK]
                if p == NEVER:
                    c_new += 1
                    distinct += 1
                else:
                    d = t - p
                    if d < 0:
                        raise ValueError("a block's earlier access is later than this request: a state from "
                                         "after these requests")
                    if d != last_d:
                        last_d, last_code = d, _code_of(d)
                    nt = _count_code(counts, touched, nt, last_code)
                    c_n += 1
                    df = np.float64(d)
                    c_s += df
                    c_s2 += df * df
                    if df > c_mx:
                        c_mx = df
                    again_all += 1
                    if window_us > 0 and p < w:         # last accessed in an earlier window
                        c_new += 1
                last[j, b % CHUNK] = t
    if k >= 0:
        rn[k], rs[k], rs2[k], rmx[k], fnew[k], facc[k] = c_n, c_s, c_s2, c_mx, c_new, c_acc
    if nt:
        cells, nc = _flush(cells, nc, k, counts, touched, nt)
    m = k + 1
    held = 0
    for i in range(len(keys)):
        if keys[i] != 0:
            for c in range(CHUNK):
                if last[i, c] != NEVER:
                    held += 1
    out_blocks = np.empty(held, np.int64)
    out_last = np.empty(held, np.int64)
    held = 0
    for i in range(len(keys)):
        if keys[i] != 0:
            for c in range(CHUNK):
                if last[i, c] != NEVER:
                    out_blocks[held] = (keys[i] - 1) * CHUNK + c
                    out_last[held] = last[i, c]
                    held += 1
    return (win[:m], rn[:m], rs[:m], rs2[:m], rmx[:m], fnew[:m], facc[:m],
            cells[:nc, 0].copy(), cells[:nc, 1].copy(), cells[:nc, 2].copy(),
            distinct, total, again_all, ext_w[:t_ext].copy(), ext_id[:t_ext].copy(), out_blocks, out_last)


@numba.njit(cache=True)
def group_cells(gid: np.ndarray, values: np.ndarray, groups: int, coded: bool,
                codes: int):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """A distribution's finest groups and cells from rows sorted by group (gid nondecreasing, 0..groups-1)
    with non-negative int64 values: per group the count, sum, sum of squares and maximum, and the
    (group, value, count) cells sorted by group and value, the value as round_significant_code's code
    when `coded` (counted in a table of `codes` entries), else exact (sorted per group)."""
    n = len(gid)
    g_n = np.zeros(groups, np.int64)
    g_s = np.zeros(groups, np.float64)
    g_s2 = np.zeros(groups, np.float64)
    g_mx = np.full(groups, -np.inf)
    cells = np.empty((1 << 12, 3), np.int64)
    nc = 0
    counts = np.zeros(codes if coded else 1, np.int64)
    touched = np.empty(codes if coded else 1, np.int64)
    nt = 0
    a = 0
    while a < n:
        g = gid[a]
        b = a
        while b < n and gid[b] == g:
            v = values[b]
            f = np.float64(v)
            g_n[g] += 1
            g_s[g] += f
            g_s2[g] += f * f
            if f > g_mx[g]:
                g_mx[g] = f
            if coded:
                nt = _count(counts, touched, nt, v)
            b += 1
        if coded:
            cells, nc = _flush(cells, nc, g, counts, touched, nt)
            nt = 0
        else:
            run = np.sort(values[a:b])
            cells = _room(cells, nc, len(run))
            i = 0
            while i < len(run):
                j = i
                while j < len(run) and run[j] == run[i]:
                    j += 1
                cells[nc, 0] = g
                cells[nc, 1] = run[i]
                cells[nc, 2] = j - i
                nc += 1
                i = j
        a = b
    return g_n, g_s, g_s2, g_mx, cells[:nc, 0].copy(), cells[:nc, 1].copy(), cells[:nc, 2].copy()

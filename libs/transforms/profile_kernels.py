"""The profile's compiled loops (numba): the per-window rounding and histogram cells, and the block pass over a
device's requests in time order (libs.transforms.profile, libs.table_io.profile)."""
from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from blockheat.libs.transforms.int_kernels import div, mask_of, pmod, shift_of
from blockheat.sim import prefetch_write

_POW10 = np.array([10 ** k for k in range(19)], np.int64)
_INV10 = np.array([1.0 / 10 ** k for k in range(19)], np.float64)
# For a value of bit length b, the exponent e (its step 10**e, 4 significant digits kept) of the smallest one,
# 2**(b - 1): a value of that length has this e or the next.
_E_OF_BITS = np.array([max(0, len(str(1 << (b - 1))) - 4) if b else 0 for b in range(65)], np.int64)


@numba.njit(cache=True, inline="always")
def _code_of(v: int) -> int:  # pragma: no cover - compiled
    """round_significant_code of one value: its exponent from its bit length (one comparison corrects it), the
    quotient by a multiplication corrected to the exact one."""
    if v < 10_000:
        return v
    if v >= 1_000_000_000_000_000_000:    # 19 digits, int64's most (the power table ends at 10**18)
        e = 15
    else:
        e = _E_OF_BITS[64 - leading_zeros(np.uint64(v))]
        if v >= _POW10[e + 4]:
            e += 1
    step = _POW10[e]
    r = np.int64(np.float64(v) * _INV10[e])
    rest = v - r * step
    while rest < 0:
        r -= 1
        rest += step
    while rest >= step:
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


WORDS = 8                      # int64 words per block-table entry, one 64-byte cache line: the chunk's key and the
CHUNK = WORDS - 1              # last access of its CHUNK blocks (a request's blocks share one or two entries)
NEVER = np.iinfo(np.int64).min
_HASH = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _home(key: int, bits: int) -> int:  # pragma: no cover - compiled
    """A key's first slot in a table of 2**bits entries (Fibonacci hashing)."""
    return np.int64((np.uint64(key) * _HASH) >> np.uint64(64 - bits))


@numba.njit(cache=True)
def _new_table(bits: int, words: int) -> np.ndarray:  # pragma: no cover - compiled
    """An empty open-addressing table of 2**bits entries of `words` int64 words each (the key + 1, 0: empty; then
    the entry's values), starting on a 64-byte boundary (an entry of WORDS words is one cache line)."""
    raw = np.zeros((1 << bits) * words + WORDS, np.int64)
    skip = (-(raw.ctypes.data // 8)) % WORDS
    return raw[skip:skip + (1 << bits) * words]


@numba.njit(cache=True, inline="always")
def _slot(table: np.ndarray, bits: int, key: int, words: int) -> int:  # pragma: no cover - compiled
    """The index of the key's entry (its first word), or of the empty entry where it would go (linear probing)."""
    mask = (1 << bits) - 1
    j = _home(key, bits)
    while table[j * words] != 0 and table[j * words] != key + 1:
        j = (j + 1) & mask
    return j * words


@numba.njit(cache=True)
def _grown(table: np.ndarray, bits: int, words: int):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The table at twice the size (bits + 1), every entry placed again."""
    new = _new_table(bits + 1, words)
    for i in range(0, len(table), words):
        if table[i] != 0:
            at = _slot(new, bits + 1, table[i] - 1, words)
            new[at:at + words] = table[i:i + words]
    return new, bits + 1


@numba.njit(cache=True, inline="always")
def _entry(table: np.ndarray, bits: int, used: int, key: int, words: int,
           fill: int):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The table's entry (its first word's index) for a key, added when new with its values `fill` (the table
    grown past three quarters full: a table 3/8 to 3/4 full, where half full took a third more memory and was no
    faster, its entries cache lines and the probes' next lines fetched by the hardware): (table, bits, used, index)."""
    if 4 * (used + 1) > 3 * (1 << bits):
        table, bits = _grown(table, bits, words)
    at = _slot(table, bits, key, words)
    if table[at] == 0:
        table[at] = key + 1
        table[at + 1:at + words] = fill
        used += 1
    return table, bits, used, at


@numba.njit(cache=True, inline="always")
def _count(counts: np.ndarray, touched: np.ndarray, nt: int, v: int) -> int:  # pragma: no cover - compiled
    """Counts v under its value code; a code's first count appends it to touched[:nt]. The new nt."""
    return _count_code(counts, touched, nt, _code_of(v))


@numba.njit(cache=True, inline="always")
def _count_run(counts: np.ndarray, touched: np.ndarray, nt: int, c: int, n: int) -> int:  # pragma: no cover
    """Counts n values of code c (its first count notes c in touched[nt]); the new nt."""
    if counts[c] == 0:
        touched[nt] = c
        nt += 1
    counts[c] += n
    return nt


@numba.njit(cache=True, inline="always")
def _count_code(counts: np.ndarray, touched: np.ndarray, nt: int, c: int) -> int:  # pragma: no cover - compiled
    """_count of a value whose code c is known."""
    return _count_run(counts, touched, nt, c, 1)


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


@numba.njit(cache=True)
def _grow(a: np.ndarray, size: int, fill: float = 0) -> np.ndarray:  # pragma: no cover - compiled
    """a in an array of at least `size` (twice a's length or more), the new part `fill`."""
    if size <= len(a):
        return a
    out = np.full(max(2 * len(a), size), fill, a.dtype)
    out[:len(a)] = a
    return out


@numba.njit(cache=True)
def _extents_flush(w: int, table: np.ndarray, bits: int, extents: np.ndarray, nw: int, ext_w: np.ndarray,
                   ext_id: np.ndarray, ext_n: np.ndarray, ne: int):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Appends the window's (w, extent, requests) for its extents[:nw] (their table's entries: the extent and its
    count) to ext_*[:ne] (grown when full), then empties the table (every entry in it is the window's)."""
    if ne + nw > len(ext_id):
        ext_w, ext_id, ext_n = _grow(ext_w, ne + nw), _grow(ext_id, ne + nw), _grow(ext_n, ne + nw)
    for i in range(nw):                   # every entry found before any is emptied: the probe chains stay whole
        at = _slot(table, bits, extents[i], 2)
        ext_w[ne] = w
        ext_id[ne] = extents[i]
        ext_n[ne] = table[at + 1]
        extents[i] = at
        ne += 1
    for i in range(nw):
        table[extents[i]] = 0
        table[extents[i] + 1] = 0
    return ext_w, ext_id, ext_n, ne


@numba.njit(cache=True)
def block_pass(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray, window_us: int, block_bytes: int,
               extent_bytes: int, region_bytes: int, buckets: int, bucket: int, codes: int,
               seen_blocks: np.ndarray, seen_last: np.ndarray):  # type: ignore[no-untyped-def]  # pragma: no cover

    """The block pass over one device's requests in time order (byte ranges [lo, hi)), keeping the blocks
    and extents of the address regions r (region_bytes, a multiple of both block_bytes and
    extent_bytes) with r % buckets == bucket, in one loop: every block access's previous access to
    the same block comes from an open-addressing table of the last access per block (CHUNK blocks
    per entry, an entry a cache line, fetched a few requests ahead).

    Returns per window (starts `win`, in time order): the reuse times' count (= re-accesses), sum, sum of
    squares and maximum, footprint (blocks first accessed in the window) and accesses; the reuse
    times' (window index, value code, count) cells sorted by window and code; the whole trace's
    distinct blocks, accesses and re-accesses; per window and extent touched, (window start, extent, requests
    touching it) (by window, extents in no order); and the last access of every block afterwards (blocks, ts_us;
    in no order). seen_blocks, seen_last: the blocks accessed before these requests and their last access (empty:
    none)."""
    n = len(ts)
    bshift, eshift, rshift = shift_of(block_bytes), shift_of(extent_bytes), shift_of(region_bytes)
    b_mask = mask_of(buckets)
    bits = 12
    table = _new_table(bits, WORDS)
    used = 0
    for i in range(len(seen_blocks)):                 # the earlier accesses' table
        b = seen_blocks[i]
        table, bits, used, at = _entry(table, bits, used, b // CHUNK, WORDS, NEVER)
        table[at + 1 + b % CHUNK] = seen_last[i]
    m = 64                                            # per-window arrays, grown
    win = np.empty(m, np.int64)
    rn = np.zeros(m, np.int64)
    rs = np.zeros(m, np.float64)
    rs2 = np.zeros(m, np.float64)
    rmx = np.full(m, -np.inf)
    fnew = np.zeros(m, np.int64)
    facc = np.zeros(m, np.int64)
    ebits = 10                                        # the window's extents: (extent, requests touching it)
    etable = _new_table(ebits, 2)
    extents = np.empty(1 << ebits, np.int64)          # the window's extents in the table, in the order first touched
    net = 0
    ext_w = np.empty(1 << 12, np.int64)
    ext_id = np.empty(1 << 12, np.int64)
    ext_n = np.empty(1 << 12, np.int64)
    ne = 0
    counts = np.zeros(codes, np.int64)
    touched = np.empty(codes, np.int64)
    cells = np.empty((1 << 12, 3), np.int64)          # (window index, code, count), grown
    nc = 0
    nt = 0
    k = -1
    w = 0
    w_end = 0
    distinct = 0
    total = 0
    again_all = 0
    c_n, c_s, c_s2, c_mx, c_new, c_acc = 0, 0.0, 0.0, -np.inf, 0, 0
    # The previous reuse time and its code: the blocks of a request written together come back together, with one
    # reuse time, so most blocks skip the rounding.
    last_d, last_code = -1, 0
    # Consecutive reuse times of one code are counted as a run (its code and length), not one by one.
    run_code, run_n = -1, 0
    ahead = 16                                        # the request whose first and last entries are fetched meanwhile
    for i in range(n):
        if i + ahead < n:
            prefetch_write(table, _home(div(lo[i + ahead], block_bytes, bshift) // CHUNK, bits) * WORDS)
            prefetch_write(table, _home(div(hi[i + ahead] - 1, block_bytes, bshift) // CHUNK, bits) * WORDS)
        t = ts[i]
        if k < 0 or t >= w_end:                       # a new window (requests come in time order)
            if k >= 0:                                # the last one's sums, kept in locals meanwhile
                rn[k], rs[k], rs2[k], rmx[k], fnew[k], facc[k] = c_n, c_s, c_s2, c_mx, c_new, c_acc
            c_n, c_s, c_s2, c_mx, c_new, c_acc = 0, 0.0, 0.0, -np.inf, 0, 0
            if run_n:
                nt = _count_run(counts, touched, nt, run_code, run_n)
                run_n = 0
            if nt:
                cells, nc = _flush(cells, nc, k, counts, touched, nt)
                nt = 0
            if net:
                ext_w, ext_id, ext_n, ne = _extents_flush(w, etable, ebits, extents, net, ext_w, ext_id, ext_n, ne)
                net = 0
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
        for r in range(div(first, region_bytes, rshift), div(final, region_bytes, rshift) + 1):
            if buckets > 1 and pmod(r, buckets, b_mask) != bucket:
                continue
            a = max(first, r * region_bytes)
            z = min(final, (r + 1) * region_bytes - 1)
            for e in range(div(a, extent_bytes, eshift), div(z, extent_bytes, eshift) + 1):
                etable, ebits, known, at = _entry(etable, ebits, net, e, 2, 0)
                if known > net:                       # the window's first touch of the extent
                    extents = _grow(extents, known)
                    extents[net] = e
                    net = known
                etable[at + 1] += 1
            chunk = -1
            at = 0
            for b in range(div(a, block_bytes, bshift), div(z, block_bytes, bshift) + 1):
                q = b // CHUNK
                if q != chunk:
                    chunk = q
                    table, bits, used, at = _entry(table, bits, used, chunk, WORDS, NEVER)
                total += 1
                c_acc += 1
                slot = at + 1 + (b - q * CHUNK)
                p = table[slot]
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
                    if last_code != run_code:
                        if run_n:
                            nt = _count_run(counts, touched, nt, run_code, run_n)
                        run_code, run_n = last_code, 0
                    run_n += 1
                    c_n += 1
                    df = np.float64(d)
                    c_s += df
                    c_s2 += df * df
                    if df > c_mx:
                        c_mx = df
                    again_all += 1
                    if window_us > 0 and p < w:         # last accessed in an earlier window
                        c_new += 1
                table[slot] = t
    if k >= 0:
        rn[k], rs[k], rs2[k], rmx[k], fnew[k], facc[k] = c_n, c_s, c_s2, c_mx, c_new, c_acc
    if run_n:
        nt = _count_run(counts, touched, nt, run_code, run_n)
    if nt:
        cells, nc = _flush(cells, nc, k, counts, touched, nt)
    if net:
        ext_w, ext_id, ext_n, ne = _extents_flush(w, etable, ebits, extents, net, ext_w, ext_id, ext_n, ne)
    m = k + 1
    held = 0
    for i in range(0, len(table), WORDS):
        if table[i] != 0:
            for c in range(CHUNK):
                if table[i + 1 + c] != NEVER:
                    held += 1
    out_blocks = np.empty(held, np.int64)
    out_last = np.empty(held, np.int64)
    held = 0
    for i in range(0, len(table), WORDS):
        if table[i] != 0:
            for c in range(CHUNK):
                if table[i + 1 + c] != NEVER:
                    out_blocks[held] = (table[i] - 1) * CHUNK + c
                    out_last[held] = table[i + 1 + c]
                    held += 1
    return (win[:m], rn[:m], rs[:m], rs2[:m], rmx[:m], fnew[:m], facc[:m],
            cells[:nc, 0].copy(), cells[:nc, 1].copy(), cells[:nc, 2].copy(),
            distinct, total, again_all, ext_w[:ne].copy(), ext_id[:ne].copy(), ext_n[:ne].copy(), out_blocks,
            out_last)


EXACT_COUNTED = 1 << 17      # exact values below this are counted in a table (1 MiB), not sorted per group


@numba.njit(cache=True)
def group_cells(gid: np.ndarray, values: np.ndarray, groups: int, coded: bool,
                codes: int):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """A distribution's finest groups and cells from rows sorted by group (gid nondecreasing, 0..groups-1)
    with non-negative int64 values: per group the count, sum, sum of squares and maximum, and the
    (group, value, count) cells sorted by group and value, the value as round_significant_code's code
    when `coded` (counted in a table of `codes` entries), else exact (counted in a table of the values when they
    are below EXACT_COUNTED, else sorted per group)."""
    n = len(gid)
    g_n = np.zeros(groups, np.int64)
    g_s = np.zeros(groups, np.float64)
    g_s2 = np.zeros(groups, np.float64)
    g_mx = np.full(groups, -np.inf)
    cells = np.empty((1 << 12, 3), np.int64)
    nc = 0
    table = codes if coded else 0
    if not coded and n:
        top = values.max()
        if top < EXACT_COUNTED:
            table = top + 1
    counted = table > 0
    counts = np.zeros(max(table, 1), np.int64)
    touched = np.empty(max(table, 1), np.int64)
    nt = 0
    a = 0
    while a < n:
        g = gid[a]
        b = a
        c_s, c_s2, c_mx = g_s[g], g_s2[g], g_mx[g]    # in locals over the group's run: no store-to-load chain
        while b < n and gid[b] == g:
            v = values[b]
            f = np.float64(v)
            c_s += f
            c_s2 += f * f
            if f > c_mx:
                c_mx = f
            if coded:
                nt = _count(counts, touched, nt, v)
            elif counted:
                nt = _count_code(counts, touched, nt, v)
            b += 1
        g_n[g] += b - a
        g_s[g], g_s2[g], g_mx[g] = c_s, c_s2, c_mx
        if counted:
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


EXACT_LIMIT = 1 << 53        # the integer path's values stay below this (exact as float64)


@numba.njit(cache=True)
def gap_cells(gid: np.ndarray, code: np.ndarray, ts: np.ndarray, offset: np.ndarray, size: np.ndarray, groups: int,
              before_ts: np.ndarray, before_end: np.ndarray, has_before: np.ndarray, thresholds: np.ndarray,
              codes: int):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The distributions a request's previous one on its device gives, in one pass over rows sorted by (device
    code, ts) whose finest groups are gid (nondecreasing, 0..groups-1): metric 0 the seek distance |offset -
    previous end|, 1 the interarrival time, 2 + k the interarrival times above thresholds[k] (idle periods), each
    as group_cells gives it (values coded) from the rows that have a previous request (thresholds ascending). A
    device's first row's previous request is (before_ts, before_end)[code] when has_before[code], else it has
    none.

    Returns (ok, is_seq, n, s, s2, mx, key, value code, count): ok False (the rest meaningless) when a value is
    negative or not below EXACT_LIMIT; is_seq per row (it starts where its previous request ended); per metric
    and group (metrics x groups) the count, sum, sum of squares and maximum; the cells, keyed group * metrics +
    metric, sorted by key and code."""
    n = len(ts)
    metrics = 2 + len(thresholds)
    is_seq = np.zeros(n, np.bool_)
    g_n = np.zeros((metrics, groups), np.int64)
    g_s = np.zeros((metrics, groups), np.float64)
    g_s2 = np.zeros((metrics, groups), np.float64)
    g_mx = np.full((metrics, groups), -np.inf)
    counts = np.zeros(metrics * codes, np.int64)      # metric m's counts at m * codes + value code
    touched = np.empty(metrics * codes, np.int64)
    nt = np.zeros(metrics, np.int64)
    a_n = np.zeros(metrics, np.int64)                 # the group's sums so far, per metric
    a_s = np.zeros(metrics, np.float64)
    a_s2 = np.zeros(metrics, np.float64)
    a_mx = np.full(metrics, -np.inf)
    cells = np.empty((1 << 12, 3), np.int64)
    nc = 0
    for i in range(n):
        c = code[i]
        if i > 0 and code[i - 1] == c:
            p_ts, p_end, has = ts[i - 1], offset[i - 1] + size[i - 1], True
        else:
            p_ts, p_end, has = before_ts[c], before_end[c], has_before[c]
        if has:
            seek = abs(offset[i] - p_end)
            gap = ts[i] - p_ts
            if seek >= EXACT_LIMIT or gap < 0 or gap >= EXACT_LIMIT:
                return False, is_seq, g_n, g_s, g_s2, g_mx, cells[:0, 0], cells[:0, 1], cells[:0, 2]
            is_seq[i] = seek == 0
            k = _code_of(seek)
            f = np.float64(seek)
            a_n[0] += 1
            a_s[0] += f
            a_s2[0] += f * f
            if f > a_mx[0]:
                a_mx[0] = f
            if counts[k] == 0:
                touched[nt[0]] = k
                nt[0] += 1
            counts[k] += 1
            k = _code_of(gap)                         # one code for the interarrival time and its idle periods
            f = np.float64(gap)
            for m in range(1, metrics):
                if m >= 2 and gap <= thresholds[m - 2]:
                    break                             # thresholds ascending: none further
                a_n[m] += 1
                a_s[m] += f
                a_s2[m] += f * f
                if f > a_mx[m]:
                    a_mx[m] = f
                at = m * codes + k
                if counts[at] == 0:
                    touched[m * codes + nt[m]] = k
                    nt[m] += 1
                counts[at] += 1
        if i + 1 == n or gid[i + 1] != gid[i]:         # the group's last row: its sums and cells, metric by metric
            g = gid[i]
            for m in range(metrics):
                if a_n[m]:
                    g_n[m, g], g_s[m, g], g_s2[m, g], g_mx[m, g] = a_n[m], a_s[m], a_s2[m], a_mx[m]
                    a_n[m], a_s[m], a_s2[m], a_mx[m] = 0, 0.0, 0.0, -np.inf
                    cells, nc = _flush(cells, nc, g * metrics + m, counts[m * codes:(m + 1) * codes],
                                       touched[m * codes:(m + 1) * codes], nt[m])
                    nt[m] = 0
    return True, is_seq, g_n, g_s, g_s2, g_mx, cells[:nc, 0].copy(), cells[:nc, 1].copy(), cells[:nc, 2].copy()


@numba.njit(cache=True)
def device_bursts(code: np.ndarray, w: np.ndarray, ts: np.ndarray, bin_us: int, start: int, stop: int
                  ):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The burst bins (ts // bin_us) of rows sorted by (device code, ts), w their window starts, in one pass: the
    bins inside the span [start, stop) summed per device (whole) and per (device, window): their requests, the
    sum of their squared request counts and the largest count; the bins reaching outside the span as runs (device,
    window, bin, requests). Returns (outside code, w, bin, n), (whole code, n, s, mx), (window code, w, n, s, mx),
    each in (device, window, bin) order. The outputs' arrays are sized by a first pass (the devices, windows and
    rows outside the span: a few rows per device and window, not one per request)."""
    n = len(ts)
    # a row's bin is inside the span when first <= ts < end (the span's first and last bin edges inside it)
    first = np.iinfo(np.int64).min if start == np.iinfo(np.int64).min else -((-start) // bin_us) * bin_us
    end = np.iinfo(np.int64).max if stop == np.iinfo(np.int64).max else (stop // bin_us) * bin_us
    nh_max = ng_max = 1
    no_max = 0
    for i in range(n):
        if i and code[i] != code[i - 1]:
            nh_max += 1
            ng_max += 1
        elif i and w[i] != w[i - 1]:
            ng_max += 1
        if ts[i] < first or ts[i] >= end:
            no_max += 1
    o_code, o_w, o_b, o_n = (np.empty(no_max, np.int64), np.empty(no_max, np.int64), np.empty(no_max, np.int64),
                             np.empty(no_max, np.int64))
    h_code, h_n, h_s, h_mx = (np.empty(nh_max, np.int64), np.empty(nh_max, np.int64), np.empty(nh_max, np.int64),
                              np.empty(nh_max, np.int64))
    g_code, g_w, g_n = np.empty(ng_max, np.int64), np.empty(ng_max, np.int64), np.empty(ng_max, np.int64)
    g_s, g_mx = np.empty(ng_max, np.int64), np.empty(ng_max, np.int64)
    no, nh, ng = 0, 0, 0
    b = 0
    last = -1                       # the previous inside row
    c_h = c_g = 0                   # requests in the open (device, bin) and (device, window, bin)
    a_hn = a_hs = a_hmx = 0         # the open device's bins so far, and the open window's
    a_gn = a_gs = a_gmx = 0
    for i in range(n + 1):
        inside = False
        if i < n:
            b = ts[i] // bin_us
            inside = first <= ts[i] < end            # as counted above: the arrays hold every row outside
            if not inside:
                if no and o_code[no - 1] == code[i] and o_w[no - 1] == w[i] and o_b[no - 1] == b:
                    o_n[no - 1] += 1
                else:
                    o_code[no], o_w[no], o_b[no], o_n[no] = code[i], w[i], b, 1
                    no += 1
                continue
        if last >= 0:
            lb = ts[last] // bin_us
            new_code = i == n or code[i] != code[last]
            new_window = new_code or w[i] != w[last]
            if new_window or b != lb:             # the (device, window, bin) closes
                a_gn += c_g
                a_gs += c_g * c_g
                a_gmx = max(a_gmx, c_g)
                c_g = 0
            if new_window:
                g_code[ng], g_w[ng], g_n[ng], g_s[ng], g_mx[ng] = code[last], w[last], a_gn, a_gs, a_gmx
                ng += 1
                a_gn = a_gs = a_gmx = 0
            if new_code or b != lb:               # the (device, bin) closes
                a_hn += c_h
                a_hs += c_h * c_h
                a_hmx = max(a_hmx, c_h)
                c_h = 0
            if new_code:
                h_code[nh], h_n[nh], h_s[nh], h_mx[nh] = code[last], a_hn, a_hs, a_hmx
                nh += 1
                a_hn = a_hs = a_hmx = 0
        if i < n:
            c_h += 1
            c_g += 1
            last = i
    return ((o_code[:no].copy(), o_w[:no].copy(), o_b[:no].copy(), o_n[:no].copy()),
            (h_code[:nh].copy(), h_n[:nh].copy(), h_s[:nh].copy(), h_mx[:nh].copy()),
            (g_code[:ng].copy(), g_w[:ng].copy(), g_n[:ng].copy(), g_s[:ng].copy(), g_mx[:ng].copy()))

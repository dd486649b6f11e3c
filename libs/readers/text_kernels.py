"""A compiled parser for the plain delimited lines of the clean text path (readers.clean_text): one pass over a
range's bytes gives each used field's values, and gives up (a negative return) at anything outside its plain
grammar, so the caller parses that range with pyarrow's CSV reader instead.

The plain grammar: ASCII only, no carriage return, every line the first line's number of fields, no empty line;
an integer field is 1-18 decimal digits; a decimal field is 1-11 digits, optionally a point and 1-9 digits; a
text field is non-empty with no space at either end. by_device then regroups a parsed range's rows by device for
the range's files. Pure: arrays in, arrays out.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: Field roles (one per column index of the line; indices past the array are skipped).
SKIP, DIGITS, DECIMAL, TEXT = 0, 1, 2, 3
#: Distinct values a text field may take in one range (its table's size is twice that).
MAX_DISTINCT = 1 << 15
#: A text field with at most this many distinct values so far is matched against each before it is hashed (an
#: operation field switching between Read and Write, a few disks interleaved).
_FEW = 8
_TABLE = 2 * MAX_DISTINCT
_NEWLINE, _SPACE, _POINT = 10, 32, 46
_CR = 13

#: Negative returns of parse_plain: why it gave up.
GAVE_UP = {-1: "a byte not ASCII or a carriage return", -2: "a line with another number of fields",
           -3: "an empty line", -4: "an integer field not 1-18 plain digits",
           -5: "a decimal field outside the plain form", -6: "a text field empty or padded",
           -7: "too many distinct values of a text field"}


@njit(cache=True, nogil=True)
def lines_upper_bound(data: np.ndarray) -> int:  # pragma: no cover - compiled by numba
    """Rows parse_plain can return for these bytes: the newlines, plus one for a last line without one."""
    count = 1
    for c in data:
        count += c == _NEWLINE
    return count


@njit(cache=True, nogil=True, inline="always")
def _field_end(data: np.ndarray, i: int, delimiter: int) -> int:  # pragma: no cover - compiled by numba
    """The index of the delimiter or newline that ends the field from data[i] (len(data) at the data's end), or -1
    at a byte not ASCII or a carriage return before it."""
    n = data.shape[0]
    while i < n:
        c = data[i]
        if c == delimiter or c == _NEWLINE:  # noqa: SIM109 (numba: plain comparisons)
            break
        if c >= 128 or c == _CR:
            return -1
        i += 1
    return i


@njit(cache=True, nogil=True)
def parse_plain(data: np.ndarray, delimiter: int, roles: np.ndarray, slots: np.ndarray, decimal_digits: int,
                numbers: np.ndarray, codes: np.ndarray, value_start: np.ndarray, value_length: np.ndarray,
                distinct: np.ndarray, fields_out: np.ndarray) -> int:  # pragma: no cover - compiled by numba
    """Parse the lines of `data` (uint8). roles[i]: the role of field i; slots[i]: its row in `numbers` (DIGITS,
    DECIMAL) or in `codes` (TEXT). DIGITS give the integer; DECIMAL the value times 10**decimal_digits, floored;
    TEXT a code per distinct value in order of first appearance, whose first occurrence is value_start[slot, code]
    (byte offset) and value_length[slot, code], distinct[slot] codes in all; fields_out[0] the fields of a line.
    Returns the number of lines, or a negative key of GAVE_UP."""
    n = data.shape[0]
    nroles = roles.shape[0]
    ntext = codes.shape[0]
    tables = np.zeros((max(ntext, 1), _TABLE), np.int32)        # code + 1 per hash slot, 0 when free
    hashes = np.zeros((max(ntext, 1), MAX_DISTINCT), np.uint64)
    last = np.full(max(ntext, 1), -1, np.int64)                 # the previous line's code per text slot
    scale = 1
    for _ in range(decimal_digits):
        scale *= 10
    fields = -1
    row = 0
    i = 0
    while i < n:
        if data[i] == _NEWLINE:
            return -3
        col = 0
        while True:                                             # one field per turn
            role = roles[col] if col < nroles else SKIP
            start = i
            if role == DIGITS:
                value = 0
                while i < n:
                    d = np.uint64(data[i]) - np.uint64(48)       # wraps past 9 for any byte but a digit
                    if d > 9:
                        break
                    value = value * 10 + np.int64(d)
                    i += 1
                if i == start or i - start > 18 or (i < n and data[i] != delimiter and data[i] != _NEWLINE):
                    return -4
                numbers[slots[col], row] = value
            elif role == DECIMAL:
                whole = 0
                while i < n:
                    c = np.int64(data[i])
                    d = c - 48
                    if d < 0 or d > 9:
                        break
                    whole = whole * 10 + d
                    i += 1
                digits = i - start
                if digits == 0 or digits > 11:
                    return -5
                part = 0
                taken = 0
                if i < n and data[i] == _POINT:
                    i += 1
                    at = i
                    while i < n:
                        c = np.int64(data[i])
                        d = c - 48
                        if d < 0 or d > 9:
                            break
                        if taken < decimal_digits:
                            part = part * 10 + d
                            taken += 1
                        i += 1
                    if i == at or i - at > 9:
                        return -5
                while taken < decimal_digits:
                    part *= 10
                    taken += 1
                if i < n and data[i] != delimiter and data[i] != _NEWLINE:
                    return -5
                numbers[slots[col], row] = whole * scale + part
            elif role == TEXT:
                s = slots[col]
                code = last[s]
                if code >= 0:                   # most often the previous line's value, else one of a few known ones
                    tries = distinct[s] if distinct[s] <= _FEW else 1
                    for t in range(tries):
                        c = code if t == 0 else (t - 1 if t - 1 < code else t)   # the previous, then the others
                        at = value_start[s, c]
                        length = value_length[s, c]
                        k = 0
                        i = start
                        while k < length and i < n and data[i] == data[at + k]:
                            i += 1
                            k += 1
                        if k == length and (i == n or data[i] == delimiter or data[i] == _NEWLINE):
                            break
                    else:
                        c = -1
                    if c >= 0:
                        code = c
                        last[s] = code
                        codes[s, row] = code
                    else:
                        i = start
                        code = -1
                if code < 0:
                    i = _field_end(data, start, delimiter)
                    if i < 0:
                        return -1
                    h = np.uint64(14695981039346656037)                 # FNV-1a
                    for k in range(start, i):
                        h = (h ^ np.uint64(data[k])) * np.uint64(1099511628211)
                    length = i - start
                    if length == 0 or data[start] == _SPACE or data[i - 1] == _SPACE:
                        return -6
                    probe = np.int64(h & np.uint64(_TABLE - 1))
                    while tables[s, probe] != 0:
                        other = tables[s, probe] - 1
                        if hashes[s, other] == h and value_length[s, other] == length:
                            at = value_start[s, other]
                            equal = True
                            for k in range(length):
                                if data[at + k] != data[start + k]:
                                    equal = False
                                    break
                            if equal:
                                code = other
                                break
                        probe = (probe + 1) & (_TABLE - 1)
                    if code < 0:
                        code = distinct[s]
                        if code >= MAX_DISTINCT:
                            return -7
                        distinct[s] = code + 1
                        tables[s, probe] = code + 1
                        hashes[s, code] = h
                        value_start[s, code] = start
                        value_length[s, code] = length
                    last[s] = code
                    codes[s, row] = code
            else:
                i = _field_end(data, i, delimiter)
                if i < 0:
                    return -1
            if i < n and data[i] == delimiter:
                i += 1
                col += 1
                continue
            break                                               # a newline or the end of the data
        if fields < 0:
            fields = col + 1
            fields_out[0] = fields
        elif col + 1 != fields:
            return -2
        row += 1
        i += 1                                                  # past the newline
    return row


#: by_device's totals per device, by column.
TOTALS = ("n", "reads", "bytes_read", "bytes_written", "ts_min", "ts_max", "first_index")


@njit(cache=True, nogil=True)
def by_device(codes: np.ndarray, devices: int, seq_base: int, ts: np.ndarray, ts_base: int, is_read: np.ndarray,
              offset: np.ndarray, size: np.ndarray, response: np.ndarray, queue: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                         np.ndarray, np.ndarray]:  # pragma: no cover - compiled by numba
    """A range's parsed requests (line order; codes: each one's device, 0 <= code < devices) regrouped by device in
    one pass, a device's in line order, devices in code order (what a stable sort by code gives): (starts
    (devices + 1: device d's rows are [starts[d], starts[d + 1])), seq (seq_base + the line's index), ts - ts_base,
    op (0 read, 1 write), offset, size, response, queue (each empty when given empty), totals (devices, TOTALS):
    requests, reads, bytes read and written, lowest and highest ts (raw), first line's index)."""
    n = codes.shape[0]
    starts = np.zeros(devices + 1, np.int64)
    for i in range(n):
        starts[codes[i] + 1] += 1
    for d in range(devices):
        starts[d + 1] += starts[d]
    at = starts[:devices].copy()
    seq, ts_out = np.empty(n, np.int64), np.empty(n, np.int64)
    offset_out, size_out = np.empty(n, np.int64), np.empty(n, np.int64)
    op = np.empty(n, np.int32)
    response_out = np.empty(response.shape[0], np.float64)
    queue_out = np.empty(queue.shape[0], np.float64)
    totals = np.zeros((devices, 7), np.int64)
    for d in range(devices):
        totals[d, 4] = np.iinfo(np.int64).max
        totals[d, 5] = np.iinfo(np.int64).min
    for i in range(n):
        d = codes[i]
        j = at[d]
        at[d] = j + 1
        t, s, r = ts[i], size[i], is_read[i]
        seq[j] = seq_base + i
        ts_out[j] = t - ts_base
        op[j] = 0 if r else 1
        offset_out[j] = offset[i]
        size_out[j] = s
        if response_out.shape[0]:
            response_out[j] = response[i]
        if queue_out.shape[0]:
            queue_out[j] = queue[i]
        if r:
            totals[d, 1] += 1
            totals[d, 2] += s
        else:
            totals[d, 3] += s
        totals[d, 4] = min(totals[d, 4], t)
        totals[d, 5] = max(totals[d, 5], t)
    for d in range(devices):                    # the count and first line from where the device's rows went
        totals[d, 0] = starts[d + 1] - starts[d]
        totals[d, 6] = seq[starts[d]] - seq_base if totals[d, 0] else -1
    return starts, seq, ts_out, op, offset_out, size_out, response_out, queue_out, totals

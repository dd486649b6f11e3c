"""The ranges every reader checks its numbers against where it reads them; a number outside is a rejected
record (reasons below), never an error of the whole ingest and never a wrapped value."""
from __future__ import annotations

LONG_MAX = (1 << 63) - 1
# Microseconds between 1601-01-01 (Windows FILETIME epoch) and 1970-01-01.
FILETIME_UNIX_OFFSET_US = 11_644_473_600_000_000
# Plausible timestamps, in us from the format's zero: 0 <= ts < 2100-01-01 as Unix time (1970-2100 for absolute
# ones, under 130 years since trace start or boot for relative ones); durations (response, queue) 0 to the same.
TS_MAX_US = 4_102_444_800_000_000

# Reject reasons of the checks (beside the format's own: bad_timestamp, bad_offset, nonpositive_size, ...).
TS_OUT_OF_RANGE = "ts_out_of_range"          # timestamp outside [0, TS_MAX_US) from the format's zero
OFFSET_OVERFLOW = "offset_overflow"          # offset (or offset + size) in bytes past 2^63 - 1
SIZE_OVERFLOW = "size_overflow"              # size in bytes past 2^63 - 1
NEGATIVE_RESPONSE = "negative_response"
NEGATIVE_QUEUE = "negative_queue"
BAD_RESPONSE = "bad_response"                # not a finite number, or above TS_MAX_US
BAD_QUEUE = "bad_queue"


def ts_zero_us(epoch: str | None) -> int:
    """The raw timestamp (us) that is 0 in TS_MAX_US's scale: 1970-01-01 for FILETIME timestamps, else 0."""
    return FILETIME_UNIX_OFFSET_US if epoch == "filetime" else 0

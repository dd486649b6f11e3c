"""Text trace formats as Spark Column expressions: one raw line in, the canonical fields out.

Every delimited format (MSR, SPC, Alibaba, Tencent, DiskSim, user CSV) is a CsvLayout parsed by
one function; blkparse has its own parser. No Python UDFs: all parsing runs inside the JVM.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from blockheat.libs.readers import limits
from blockheat.libs.readers.limits import FILETIME_UNIX_OFFSET_US as FILETIME_UNIX_OFFSET_US

# Time units a column may be in, as (kind, multiplier to microseconds).
TIME_UNITS = ("s", "ms", "us", "ns", "filetime")
# Canonical fields a layout can map from columns.
FIELDS = ("ts", "device", "op", "offset", "size", "response", "queue")


@dataclass(frozen=True)
class CsvLayout:
    """A delimited block-trace layout: which column holds what, and in which unit."""

    name: str
    expected: str                       # the layout as a person reads it, for error messages
    columns: Mapping[str, int]          # canonical field -> 0-based column index
    min_columns: int
    max_columns: int | None = None      # None: extra trailing columns are ignored
    delimiter: str = ","                # a Java regex; whitespace formats use r"\s+"
    device_columns: tuple[int, ...] = ()   # joined with "_" (MSR: Hostname_DiskNumber)
    device_const: str | None = None     # used when the format has no device column
    ts_unit: str = "us"
    ts_epoch: str | None = None         # "unix", "filetime" or None (relative to trace start)
    offset_unit_bytes: int = 1
    size_unit_bytes: int = 1
    response_unit: str = "us"
    queue_unit: str = "us"
    read_ops: tuple[str, ...] = ("R",)
    write_ops: tuple[str, ...] = ("W",)
    op_flags_read_bit: int | None = None   # DiskSim: op from a flags integer, this bit set = read
    skip_header_lines: int = 0
    comment_prefix: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.columns) - set(FIELDS)
        if unknown:
            raise ValueError(f"layout {self.name}: unknown fields {sorted(unknown)}; known: {FIELDS}")
        for unit in (self.ts_unit, self.response_unit, self.queue_unit):
            if unit not in TIME_UNITS:
                raise ValueError(f"layout {self.name}: time unit {unit!r} not one of {TIME_UNITS}")
        if self.offset_unit_bytes <= 0 or self.size_unit_bytes <= 0:
            raise ValueError(f"layout {self.name}: unit sizes must be > 0")
        if "op" not in self.columns:
            raise ValueError(f"layout {self.name}: an op column is required")
        for needed in ("offset", "size"):
            if needed not in self.columns:
                raise ValueError(f"layout {self.name}: a {needed} column is required")


MSR = CsvLayout(
    name="msr",
    expected="MSR Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
    columns={"ts": 0, "op": 3, "offset": 4, "size": 5, "response": 6},
    min_columns=7, max_columns=7, device_columns=(1, 2),
    ts_unit="filetime", ts_epoch="filetime", response_unit="filetime",
    read_ops=("Read",), write_ops=("Write",),
)
SPC = CsvLayout(
    name="spc",
    expected="UMass/SPC CSV: ASU,LBA,Size,Opcode,Timestamp[,...]",
    columns={"device": 0, "offset": 1, "size": 2, "op": 3, "ts": 4},
    min_columns=5, offset_unit_bytes=512, ts_unit="s",
    read_ops=("r", "R"), write_ops=("w", "W"),
)
ALIBABA = CsvLayout(
    name="alibaba",
    expected="Alibaba CSV: device_id,opcode,offset,length,timestamp",
    columns={"device": 0, "op": 1, "offset": 2, "size": 3, "ts": 4},
    min_columns=5, max_columns=5, ts_unit="us", ts_epoch="unix",
)
TENCENT = CsvLayout(
    name="tencent",
    expected="Tencent CBS CSV: Timestamp,Offset,Size,IOType,VolumeID",
    columns={"ts": 0, "offset": 1, "size": 2, "op": 3, "device": 4},
    min_columns=5, max_columns=5, ts_unit="s", ts_epoch="unix",
    offset_unit_bytes=512, size_unit_bytes=512, read_ops=("0",), write_ops=("1",),
)
DISKSIM_ASCII = CsvLayout(
    name="disksim-ascii",
    expected="DiskSim ascii: arrival_ms device block_number size_blocks flags",
    columns={"ts": 0, "device": 1, "offset": 2, "size": 3, "op": 4},
    min_columns=5, max_columns=5, delimiter=r"\s+", ts_unit="ms",
    offset_unit_bytes=512, size_unit_bytes=512, op_flags_read_bit=0,
)
# The validation traces have no timestamps: the trace is closed-loop, so arrival n+1 is arrival n
# plus access time n plus idle gap n (see readers.records.derive_closed_loop_ts).
DISKSIM_VALIDATE = CsvLayout(
    name="disksim-validate",
    expected="DiskSim validate: op class block_number size_blocks access_time_us idle_gap_us",
    columns={"op": 0, "offset": 2, "size": 3, "response": 4, "queue": 5},
    min_columns=6, max_columns=6, delimiter=r"\s+", device_const="0",
    offset_unit_bytes=512, size_unit_bytes=512, read_ops=("R",), write_ops=("W",),
)

LAYOUTS: dict[str, CsvLayout] = {
    layout.name: layout for layout in (MSR, SPC, ALIBABA, TENCENT, DISKSIM_ASCII, DISKSIM_VALIDATE)
}


PARSED_COLUMNS = ("device", "ts_raw_us", "op", "offset_bytes", "size_bytes", "response_us", "queue_us",
                  "reason", "message")


def staged(df: DataFrame, stages: list[dict[str, Column]], keep: tuple[str, ...]) -> DataFrame:
    """Apply column definitions stage by stage, then drop the temporaries.

    Each stage is its own projection, so a field used by many checks is computed once: inside
    CASE WHEN branches Spark does not share common subexpressions, and one flat projection
    re-split every line once per check (10x slower). Spark keeps such projections apart.
    """
    temporaries: list[str] = []
    for stage in stages:
        df = df.select("*", *[c.alias(n) for n, c in stage.items()])
        temporaries += [n for n in stage if n not in keep]
    return df.drop(*temporaries)


def time_to_us(text: Column, unit: str, name: str | None = None) -> Column:
    """A numeric text field in `unit` -> whole microseconds (long, floored), null if not a number or
    past a long.

    Integer units (filetime, ns, us) of a named column use exact long arithmetic; fractional
    seconds use decimals, so 0.000001 s stays exact (a double would not, nor for FILETIME's 1.3e17).
    """
    if name is not None and unit in ("filetime", "ns", "us"):
        divisor = {"filetime": 10, "ns": 1000, "us": 1}[unit]
        return F.expr(f"try_cast({name} AS BIGINT) div {divisor}")
    scale = {"s": "1000000", "ms": "1000", "us": "1", "ns": "0.001", "filetime": "0.1"}[unit]
    return F.floor(F.try_multiply(text.try_cast("decimal(38,9)"), F.lit(scale).cast("decimal(20,6)"))
                   ).try_cast("bigint")


def is_number(text: Column, unit: str) -> Column:
    """Whether a time field's text is a number at all (an integer for integer units, else a finite
    decimal), so that a null time_to_us is an out-of-range number rather than no number."""
    if unit in ("filetime", "ns", "us"):
        return F.coalesce(F.regexp_like(text, F.lit(r"^[+-]?[0-9]+$")), F.lit(False))
    value = text.try_cast("double")
    return F.coalesce(value.isNotNull() & ~F.isnan(value) & (F.abs(value) < F.lit(float("inf"))), F.lit(False))


def duration_to_us(text: Column, unit: str) -> Column:
    """A duration field (response, queue) -> microseconds as double (keeps fractions)."""
    scale = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "filetime": 0.1}[unit]
    return text.try_cast("double") * F.lit(scale)


def first_reason(checks: list[tuple[Column, str, Column]]) -> tuple[Column, Column]:
    """Ordered (condition, code, message) checks -> (reason, message) of the first that holds."""
    reason: Column = F.lit(None).cast("string")
    message: Column = F.lit(None).cast("string")
    for cond, code, msg in reversed(checks):
        reason = F.when(cond, F.lit(code)).otherwise(reason)
        message = F.when(cond, msg).otherwise(message)
    return reason, message


def _said(prefix: str, text: Column) -> Column:
    return F.concat(F.lit(prefix), F.coalesce(text, F.lit("<missing>")))


def integer_bytes(text: Column, unit_bytes: int) -> tuple[Column, Column]:
    """An integer text field in units of unit_bytes -> (the integer, bytes): each null when it is not
    an integer or past a long (integer_checks tells which)."""
    value = text.try_cast("bigint")
    return value, F.try_multiply(value, F.lit(unit_bytes).cast("bigint"))


def integer_checks(field: str, text: Column, value: Column, in_bytes: Column, unit_bytes: int,
                   *, positive: bool) -> list[tuple[Column, str, Column]]:
    """Checks of one integer field read by integer_bytes: not an integer, negative (or not positive),
    past 2^63 - 1 bytes."""
    integer = F.coalesce(F.regexp_like(text, F.lit(r"^[+-]?[0-9]+$")), F.lit(False))
    minus = F.coalesce(F.startswith(text, F.lit("-")), F.lit(False))
    unit = "" if unit_bytes == 1 else f" x {unit_bytes} bytes"
    if positive:
        sign = ((value <= 0) | (value.isNull() & minus), "nonpositive_size",
                F.concat(F.lit(f"{field} is not positive: "), text))
    else:
        sign = ((value < 0) | (value.isNull() & minus), "negative_offset",
                F.concat(F.lit(f"negative {field}: "), text))
    return [
        (value.isNull() & ~integer, f"bad_{field}", _said(f"{field} is not an integer: ", text)),
        sign,
        (in_bytes.isNull(), limits.SIZE_OVERFLOW if positive else limits.OFFSET_OVERFLOW,
         F.concat(F.lit(f"{field} "), text, F.lit(f"{unit} is past 2^63 - 1 bytes"))),
    ]


def duration_checks(field: str, text: Column | None, us: Column | None) -> list[tuple[Column, str, Column]]:
    """A duration (response, queue) given as text: a finite number from 0 to limits.TS_MAX_US, or empty."""
    if text is None or us is None:
        return []
    given = text.isNotNull() & (text != "")
    finite = us.isNotNull() & ~F.isnan(us) & (F.abs(us) < F.lit(float("inf")))
    bad, negative = ((limits.BAD_RESPONSE, limits.NEGATIVE_RESPONSE) if field == "response"
                     else (limits.BAD_QUEUE, limits.NEGATIVE_QUEUE))
    return [
        (given & ~finite, bad, _said(f"{field} time is not a finite number: ", text)),
        (given & (us < 0), negative, F.concat(F.lit(f"negative {field} time: "), text)),
        (given & (us > limits.TS_MAX_US), bad,
         F.concat(F.lit(f"{field} time "), text, F.lit(f" is above {limits.TS_MAX_US} us"))),
    ]


def request_checks(ts: Column, ts_text: Column, ts_number: Column, ts_zero_us: int, op: Column, op_text: Column,
                   offset: tuple[Column, Column, Column, int], size: tuple[Column, Column, Column, int],
                   device: Column, *, absolute: bool = False) -> list[tuple[Column, str, Column]]:
    """The checks every format shares, in the order their reasons are reported. offset and size are
    (text, integer, bytes, unit in bytes) as integer_bytes reads them; ts_number whether the time text is
    a number (is_number); ts_zero_us the raw timestamp of the plausible range's zero (limits.ts_zero_us);
    absolute: timestamps of an epoch (the zero is 1970-01-01), else relative to the trace's start."""
    off_text, off_value, off_bytes, off_unit = offset
    size_text, size_value, size_bytes, size_unit = size
    ts_range = (ts.isNull() | (ts < ts_zero_us) | (ts >= ts_zero_us + limits.TS_MAX_US))
    return [
        (ts.isNull() & ~ts_number, "bad_timestamp", _said("timestamp is not a number: ", ts_text)),
        (op.isNull(), "unknown_op", _said("unknown op: ", op_text)),       # what the record is, before its ranges
        (ts_range, limits.TS_OUT_OF_RANGE, F.concat(
            F.lit("timestamp "), ts_text,
            F.lit(f" is outside the plausible range (0 to {limits.TS_MAX_US} us from "
                  f"{'1970-01-01' if absolute else 'the trace zero'})"))),
        *integer_checks("offset", off_text, off_value, off_bytes, off_unit, positive=False),
        *integer_checks("size", size_text, size_value, size_bytes, size_unit, positive=True),
        (F.try_add(off_bytes, size_bytes).isNull(), limits.OFFSET_OVERFLOW, F.concat(
            F.lit("request end (offset "), off_text, F.lit(" + size "), size_text, F.lit(") is past 2^63 - 1 bytes"))),
        (device.isNull() | (device == ""), "bad_device", F.lit("empty device")),
    ]


def parse_csv(df: DataFrame, layout: CsvLayout, raw: str = "raw") -> DataFrame:
    """Add PARSED_COLUMNS to `df` from its line column `raw`. Line-level problems become a reason
    (and message), never an error."""
    line = F.col(raw)
    text = F.trim(line) if layout.delimiter == r"\s+" else line
    cols = layout.columns
    wanted = sorted(set(cols.values()) | set(layout.device_columns))
    t = {i: F.col(f"_t{i}") for i in wanted}
    split_stage = {"_parts": F.split(text, layout.delimiter)}
    text_stage: dict[str, Column] = {f"_t{i}": F.trim(F.get(F.col("_parts"), i)) for i in wanted}
    text_stage["_ncols"] = F.size(F.col("_parts"))
    if layout.device_columns:
        device = F.concat_ws("_", *[t[i] for i in layout.device_columns])
    elif "device" in cols:
        device = t[cols["device"]]
    else:
        device = F.lit(layout.device_const or "0")
    op_text = t[cols["op"]]
    if layout.op_flags_read_bit is not None:
        flags = op_text.try_cast("bigint")
        op = F.when(flags.isNull(), None).when(
            F.shiftright(flags, layout.op_flags_read_bit).bitwiseAND(1) == 1, "R").otherwise("W")
    else:
        op = F.when(op_text.isin(*layout.read_ops), "R").when(op_text.isin(*layout.write_ops), "W")
    ts_text = t[cols["ts"]] if "ts" in cols else F.lit(None).cast("string")
    off_text, size_text = t[cols["offset"]], t[cols["size"]]
    off_value, off_bytes = integer_bytes(off_text, layout.offset_unit_bytes)
    size_value, size_bytes = integer_bytes(size_text, layout.size_unit_bytes)
    durations = {field: (t[cols[field]], duration_to_us(t[cols[field]], unit)) if field in cols else (None, None)
                 for field, unit in (("response", layout.response_unit), ("queue", layout.queue_unit))}
    typed_stage = {
        "device": device,
        "_ts": (time_to_us(ts_text, layout.ts_unit, f"_t{cols['ts']}")
                if "ts" in cols else F.lit(0).cast("bigint")),
        "_ts_number": is_number(ts_text, layout.ts_unit) if "ts" in cols else F.lit(True),
        "op": op,
        "_offset": off_value,
        "offset_bytes": off_bytes,
        "_size": size_value,
        "size_bytes": size_bytes,
        "response_us": durations["response"][1] if "response" in cols else F.lit(None).cast("double"),
        "queue_us": durations["queue"][1] if "queue" in cols else F.lit(None).cast("double"),
    }
    ncols = F.col("_ncols")
    if layout.max_columns is None:
        count_bad = ncols < layout.min_columns
        expected_n = f"at least {layout.min_columns}"
    else:
        count_bad = (ncols < layout.min_columns) | (ncols > layout.max_columns)
        expected_n = (str(layout.min_columns) if layout.min_columns == layout.max_columns
                      else f"{layout.min_columns}-{layout.max_columns}")
    line_checks = [(F.trim(line) == "", "blank_line", F.lit("blank line"))]
    if layout.comment_prefix:
        line_checks.append((F.startswith(F.trim(line), F.lit(layout.comment_prefix)),
                            "comment_line", F.lit("comment line")))
    line_checks.append((count_bad, "column_count", F.concat(
        F.lit(f"expected {expected_n} columns, found "), ncols.cast("string"))))
    c = F.col
    zero = limits.ts_zero_us(layout.ts_epoch)
    reason, message = first_reason(line_checks + request_checks(
        c("_ts"), ts_text, c("_ts_number"), zero, c("op"), op_text,
        (off_text, c("_offset"), c("offset_bytes"), layout.offset_unit_bytes),
        (size_text, c("_size"), c("size_bytes"), layout.size_unit_bytes), c("device"),
        absolute=layout.ts_epoch is not None)
        + duration_checks("response", durations["response"][0], c("response_us") if "response" in cols else None)
        + duration_checks("queue", durations["queue"][0], c("queue_us") if "queue" in cols else None))
    return staged(df, [split_stage, text_stage, typed_stage,
                       {"reason": reason, "message": message, "ts_raw_us": in_range_ts(c("_ts"), zero)}],
                  keep=PARSED_COLUMNS)


def in_range_ts(ts: Column, zero_us: int) -> Column:
    """The timestamp, null outside the plausible range (a rejected record that later checks, such as the
    scan's time order, do not compare with)."""
    return F.when((ts >= zero_us) & (ts < zero_us + limits.TS_MAX_US), ts)


BLKPARSE_EXPECTED = "blkparse text: MAJ,MIN CPU SEQ TIMESTAMP PID ACTION RWBS SECTOR + NSECTORS [PROCESS]"
_BLK_HEAD = r"^\s*(\d+),(\d+)\s+(\d+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*(.*)$"
_BLK_RANGE = r"^(\d+)\s+\+\s+(\d+)"
# What blkparse prints besides events: "CPU0 (8,0):", " Reads Queued: ...", "Throughput (R/W): ...", a
# per-process header "kjournald (225)", "Input file sda.blktrace.0 added". Any other line is an error.
_BLK_SUMMARY = r"^\s*([A-Za-z][A-Za-z0-9 ./,()_-]*:(\s|$)|[^\s:]+ \([0-9]+\)\s*$|Input file \S+ added\s*$)"


def parse_blkparse(df: DataFrame, raw: str = "raw") -> DataFrame:
    """Add PARSED_COLUMNS (and blk_action) from blkparse lines. D (issue) events are requests; C
    (complete) events give response times. Summary and message lines are kept as informational
    rejects (nothing is lost), any other line that is not an event is an error (`unknown_line`);
    flushes and discards carry no data and are `no_data`."""
    line = F.col(raw)
    c = F.col
    text_stage = {f"_h{i}": F.regexp_extract(line, _BLK_HEAD, i) for i in (1, 2, 5, 7, 8, 9)}
    text_stage["_is_event"] = F.regexp_like(line, F.lit(_BLK_HEAD))
    text_stage["_looks_like_event"] = F.regexp_like(line, F.lit(r"^\s*\d+,\d+\s"))
    text_stage["_is_summary"] = F.regexp_like(line, F.lit(_BLK_SUMMARY))
    range_stage = {
        "_has_range": F.regexp_like(c("_h9"), F.lit(_BLK_RANGE)),
        "_sector": F.regexp_extract(c("_h9"), _BLK_RANGE, 1),
        "_nsect": F.regexp_extract(c("_h9"), _BLK_RANGE, 2),
    }
    rwbs = c("_h8")
    sector, sector_bytes = integer_bytes(c("_sector"), 512)
    nsect, nsect_bytes = integer_bytes(c("_nsect"), 512)
    typed_stage = {
        "device": F.concat(c("_h1"), F.lit(","), c("_h2")),
        "_ts": time_to_us(c("_h5"), "s"),
        "op": F.when(F.contains(rwbs, F.lit("R")), "R").when(F.contains(rwbs, F.lit("W")), "W"),
        "_offset": sector,
        "offset_bytes": sector_bytes,
        "_size": nsect,
        "size_bytes": nsect_bytes,
        "response_us": F.lit(None).cast("double"),
        "queue_us": F.lit(None).cast("double"),
        "blk_action": c("_h7"),
    }
    action = c("blk_action")
    no_data = ~c("_has_range") | F.contains(rwbs, F.lit("D")) | c("op").isNull() | (c("_nsect") == "0")
    checks = [
        (F.trim(line) == "", "blank_line", F.lit("blank line")),
        (~c("_looks_like_event") & c("_is_summary"), "summary_line",
         F.lit("not an event line (blkparse summary or header)")),
        (~c("_looks_like_event"), "unknown_line", F.lit("neither a blkparse event nor a summary line")),
        (~c("_is_event"), "parse_error", F.lit(f"malformed event line; expected {BLKPARSE_EXPECTED}")),
        ((action == "C") & ~no_data, "completion_event",
         F.lit("completion event (gives its request's response time)")),
        (action != "D", "ignored_event", F.concat(F.lit("event "), action, F.lit(" is not an issue (D) event"))),
        (no_data, "no_data", F.concat(F.lit("issue event with no data transfer: "), rwbs, F.lit(" "), c("_h9"))),
    ]
    reason, message = first_reason(checks + request_checks(
        c("_ts"), c("_h5"), is_number(c("_h5"), "s"), 0, c("op"), rwbs,
        (c("_sector"), c("_offset"), c("offset_bytes"), 512), (c("_nsect"), c("_size"), c("size_bytes"), 512),
        c("device")))
    return staged(df, [text_stage, range_stage, typed_stage,
                       {"reason": reason, "message": message, "ts_raw_us": in_range_ts(c("_ts"), 0)}],
                  keep=(*PARSED_COLUMNS, "blk_action"))


def custom_layout(columns: Mapping[str, int], **options: object) -> CsvLayout:
    """A user-described CSV layout (`--format csv`), validated like the built-in ones."""
    base = CsvLayout(name="csv", expected="", columns=dict(columns),
                     min_columns=max(columns.values()) + 1)
    layout = replace(base, **options)  # type: ignore[arg-type]
    described = ",".join(f"{name}@{idx}" for name, idx in sorted(columns.items(), key=lambda kv: kv[1]))
    return replace(layout, expected=f"CSV with columns {described} (delimiter {layout.delimiter!r})")

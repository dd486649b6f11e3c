"""Text trace formats as Spark Column expressions: one raw line in, the canonical fields out.

Every delimited format (MSR, SPC, Alibaba, Tencent, DiskSim, user CSV) is a CsvLayout parsed by
one function; blkparse has its own parser. No Python UDFs: all parsing runs inside the JVM.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import Column
from pyspark.sql import functions as F

# Time units a column may be in, as (kind, multiplier to microseconds).
TIME_UNITS = ("s", "ms", "us", "ns", "filetime")
# Canonical fields a layout can map from columns.
FIELDS = ("ts", "device", "op", "offset", "size", "response", "queue")
# Microseconds between 1601-01-01 (Windows FILETIME epoch) and 1970-01-01.
FILETIME_UNIX_OFFSET_US = 11_644_473_600_000_000


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


@dataclass(frozen=True)
class ParsedColumns:
    """What every text or binary parser yields for one record (Columns; null where absent)."""

    device: Column
    ts_raw_us: Column          # microseconds, absolute in the format's epoch or relative
    op: Column
    offset_bytes: Column
    size_bytes: Column
    response_us: Column
    queue_us: Column
    reason: Column             # null when the record is a request, else a short code
    message: Column
    extra: dict[str, Column] = field(default_factory=dict)

    def select_list(self) -> list[Column]:
        base = [
            self.device.alias("device"), self.ts_raw_us.alias("ts_raw_us"), self.op.alias("op"),
            self.offset_bytes.alias("offset_bytes"), self.size_bytes.alias("size_bytes"),
            self.response_us.alias("response_us"), self.queue_us.alias("queue_us"),
            self.reason.alias("reason"), self.message.alias("message"),
        ]
        return base + [c.alias(n) for n, c in self.extra.items()]


def time_to_us(text: Column, unit: str) -> Column:
    """A numeric text field in `unit` -> whole microseconds (long, floored), null if not a number.

    Decimal arithmetic keeps 0.000001 s exact and FILETIME's 1.3e17 ticks exact (a double would not).
    """
    scale = {"s": "1000000", "ms": "1000", "us": "1", "ns": "0.001", "filetime": "0.1"}[unit]
    return F.floor(text.try_cast("decimal(38,9)") * F.lit(scale).cast("decimal(20,6)")).cast("bigint")


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


def request_checks(ts: Column, ts_text: Column, op: Column, op_text: Column, offset: Column,
                   offset_text: Column, size: Column, size_text: Column,
                   device: Column) -> list[tuple[Column, str, Column]]:
    """The checks every format shares, in the order their reasons are reported."""
    return [
        (ts.isNull(), "bad_timestamp", F.concat(F.lit("timestamp is not a number: "), F.coalesce(ts_text, F.lit("<missing>")))),
        (op.isNull(), "unknown_op", F.concat(F.lit("unknown op: "), F.coalesce(op_text, F.lit("<missing>")))),
        (offset.isNull(), "bad_offset", F.concat(F.lit("offset is not an integer: "), F.coalesce(offset_text, F.lit("<missing>")))),
        (offset < 0, "negative_offset", F.concat(F.lit("negative offset: "), offset_text)),
        (size.isNull(), "bad_size", F.concat(F.lit("size is not an integer: "), F.coalesce(size_text, F.lit("<missing>")))),
        (size <= 0, "nonpositive_size", F.concat(F.lit("size is not positive: "), size_text)),
        (device.isNull() | (device == ""), "bad_device", F.lit("empty device")),
    ]


def parse_csv(line: Column, layout: CsvLayout) -> ParsedColumns:
    """Parse one line of a delimited layout. Line-level problems become a reason, never an error."""
    text = F.trim(line) if layout.delimiter == r"\s+" else line
    parts = F.split(text, layout.delimiter)
    ncols = F.size(parts)

    def col(i: int) -> Column:
        return F.trim(F.get(parts, i))

    cols = layout.columns
    ts_text = col(cols["ts"]) if "ts" in cols else F.lit(None).cast("string")
    ts = time_to_us(ts_text, layout.ts_unit) if "ts" in cols else F.lit(0).cast("bigint")
    if layout.device_columns:
        device = F.concat_ws("_", *[col(i) for i in layout.device_columns])
    elif "device" in cols:
        device = col(cols["device"])
    else:
        device = F.lit(layout.device_const or "0")
    op_text = col(cols["op"])
    if layout.op_flags_read_bit is not None:
        flags = op_text.try_cast("bigint")
        op = F.when(flags.isNull(), None).when(
            F.shiftright(flags, layout.op_flags_read_bit).bitwiseAND(1) == 1, "R").otherwise("W")
    else:
        op = (F.when(op_text.isin(*layout.read_ops), "R")
              .when(op_text.isin(*layout.write_ops), "W"))
    offset_text, size_text = col(cols["offset"]), col(cols["size"])
    offset = offset_text.try_cast("bigint") * F.lit(layout.offset_unit_bytes)
    size = size_text.try_cast("bigint") * F.lit(layout.size_unit_bytes)
    response = (duration_to_us(col(cols["response"]), layout.response_unit)
                if "response" in cols else F.lit(None).cast("double"))
    queue = (duration_to_us(col(cols["queue"]), layout.queue_unit)
             if "queue" in cols else F.lit(None).cast("double"))
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
    reason, message = first_reason(
        line_checks + request_checks(ts, ts_text, op, op_text, offset, offset_text, size, size_text, device))
    return ParsedColumns(device, ts, op, offset, size, response, queue, reason, message)


BLKPARSE_EXPECTED = "blkparse text: MAJ,MIN CPU SEQ TIMESTAMP PID ACTION RWBS SECTOR + NSECTORS [PROCESS]"
_BLK_HEAD = r"^\s*(\d+),(\d+)\s+(\d+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*(.*)$"
_BLK_RANGE = r"^(\d+)\s+\+\s+(\d+)"


def parse_blkparse(line: Column) -> ParsedColumns:
    """Parse one blkparse line. D (issue) events are requests; C (complete) events give response time.

    Summary and message lines are kept as informational rejects (nothing is lost); flushes and
    discards carry no data and are `no_data`.
    """
    head = lambda i: F.regexp_extract(line, _BLK_HEAD, i)  # noqa: E731
    is_event = F.regexp_like(line, F.lit(_BLK_HEAD))
    looks_like_event = F.regexp_like(line, F.lit(r"^\s*\d+,\d+\s"))
    device = F.concat(head(1), F.lit(","), head(2))
    ts_text = head(5)
    ts = time_to_us(ts_text, "s")
    action, rwbs, rest = head(7), head(8), head(9)
    has_range = F.regexp_like(rest, F.lit(_BLK_RANGE))
    sector_text = F.regexp_extract(rest, _BLK_RANGE, 1)
    nsect_text = F.regexp_extract(rest, _BLK_RANGE, 2)
    offset = sector_text.try_cast("bigint") * F.lit(512)
    size = nsect_text.try_cast("bigint") * F.lit(512)
    op = F.when(F.contains(rwbs, F.lit("R")), "R").when(F.contains(rwbs, F.lit("W")), "W")
    no_data = (~has_range | F.contains(rwbs, F.lit("D")) | op.isNull() | (nsect_text == "0"))
    checks = [
        (F.trim(line) == "", "blank_line", F.lit("blank line")),
        (~looks_like_event, "summary_line", F.lit("not an event line (blkparse summary or header)")),
        (~is_event, "parse_error", F.lit(f"malformed event line; expected {BLKPARSE_EXPECTED}")),
        ((action == "C") & ~no_data, "completion_event", F.lit("completion event (gives its request's response time)")),
        (action != "D", "ignored_event", F.concat(F.lit("event "), action, F.lit(" is not an issue (D) event"))),
        (no_data, "no_data", F.concat(F.lit("issue event with no data transfer: "), rwbs, F.lit(" "), rest)),
    ]
    reason, message = first_reason(
        checks + request_checks(ts, ts_text, op, rwbs, offset, sector_text, size, nsect_text, device))
    return ParsedColumns(
        device, ts, op, offset, size, F.lit(None).cast("double"), F.lit(None).cast("double"),
        reason, message, extra={"blk_action": action},
    )


def custom_layout(columns: Mapping[str, int], **options: object) -> CsvLayout:
    """A user-described CSV layout (`--format csv`), validated like the built-in ones."""
    base = CsvLayout(name="csv", expected="", columns=dict(columns),
                     min_columns=max(columns.values()) + 1)
    layout = replace(base, **options)  # type: ignore[arg-type]
    described = ",".join(f"{name}@{idx}" for name, idx in sorted(columns.items(), key=lambda kv: kv[1]))
    return replace(layout, expected=f"CSV with columns {described} (delimiter {layout.delimiter!r})")

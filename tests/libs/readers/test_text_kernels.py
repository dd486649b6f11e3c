"""The compiled parser of plain delimited lines (readers.text_kernels) behind the clean text path: on what it takes,
exactly the values of pyarrow's reader with the path's checks; on anything else it gives up with its reason, and
the range is parsed by pyarrow's reader as before."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from blockheat.libs.readers import clean_text
from blockheat.libs.readers import text_kernels as TK
from blockheat.libs.readers.clean_text import NotClean, parse_range
from blockheat.libs.readers.text_formats import ALIBABA, MSR, SPC, TENCENT

AGREE = Path(__file__).parents[2] / "data" / "agree"


def arrow_only(data, layout, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(clean_text, "_plain_fields", lambda _data, _layout: None)
        return parse_range(data, layout, tolerance_us=None)


def assert_same(a, b):
    assert [a.device_names[c] for c in a.device_codes] == [b.device_names[c] for c in b.device_codes]
    for name in ("ts_raw_us", "is_read", "offset_bytes", "size_bytes"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name
    assert a.response_us.equals(b.response_us)
    assert a.queue_us.equals(b.queue_us)


def gave_up(data: bytes, layout=MSR) -> str:
    """GAVE_UP's reason for data under the layout's roles (as clean_text._plain_fields sets them)."""
    numeric, text = clean_text._numeric_columns(layout), clean_text._text_columns(layout)
    roles, slots = np.zeros(8, np.int64), np.zeros(8, np.int64)
    for k, i in enumerate(sorted(numeric)):
        roles[i], slots[i] = TK.DIGITS, k
    for k, i in enumerate(sorted(text)):
        roles[i], slots[i] = TK.TEXT, k
    raw = np.frombuffer(data, np.uint8)
    rows = TK.lines_upper_bound(raw)
    n = TK.parse_plain(raw, ord(layout.delimiter), roles, slots, 0, np.empty((len(numeric), rows), np.int64),
                       np.empty((len(text), rows), np.int32), np.empty((len(text), TK.MAX_DISTINCT), np.int64),
                       np.empty((len(text), TK.MAX_DISTINCT), np.int64), np.zeros(len(text), np.int64),
                       np.zeros(1, np.int64))
    return TK.GAVE_UP.get(n, f"{n} lines")


@pytest.mark.parametrize(("layout", "name"), [(MSR, "msr_fix_0.csv"), (MSR, "msr_fix_1.csv"),
                                              (ALIBABA, "alibaba.csv"), (TENCENT, "tencent.csv")])
def test_the_fixtures_parse_plain_to_pyarrows_values(layout, name, monkeypatch):
    data = (AGREE / name).read_bytes()
    assert clean_text._plain_fields(data, layout) is not None
    assert_same(parse_range(data, layout, tolerance_us=None), arrow_only(data, layout, monkeypatch))


def test_a_generated_msr_range_parses_plain_to_pyarrows_values(monkeypatch):
    rng = np.random.default_rng(3)
    n = 20_000
    ts = 128_166_372_000_000_000 + np.cumsum(rng.integers(0, 50_000, n))
    hosts = np.array(["web", "src1", "prxy", "w"])[rng.integers(0, 4, n)]
    lines = [f"{t},{h},{d},{op},{o},{s},{r}" for t, h, d, op, o, s, r in zip(
        ts.tolist(), hosts.tolist(), rng.integers(0, 12, n).tolist(), np.where(rng.random(n) < 0.4, "Read", "Write"),
        (rng.integers(0, 1 << 50, n) * 512).tolist(), rng.integers(1, 1 << 20, n).tolist(),
        rng.integers(0, 10 ** 12, n).tolist(), strict=True)]
    lines[7] = f"{ts[7]},web,0,Read,999999999999999999,1,123456789012"    # 18 digits: the longest it takes
    data = ("\n".join(lines)).encode()                                        # no newline after the last line
    plain = parse_range(data, MSR, tolerance_us=None)
    assert len(plain) == n
    assert clean_text._plain_fields(data, MSR) is not None
    assert_same(plain, arrow_only(data, MSR, monkeypatch))
    assert plain.offset_bytes[7] == 999_999_999_999_999_999
    assert plain.response_us[7].as_py() == 123456789012 * 0.1
    assert sorted(plain.device_names) == sorted({line.split(",")[1] + "_" + line.split(",")[2] for line in lines})


def test_decimal_seconds_are_scaled_and_floored_as_the_general_paths_decimals(monkeypatch):
    data = b"1538352000.000001,1,8,0,7\n0.5,1,8,1,7\n12.0000019,1,8,1,7\n00000000007,1,8,1,7\n"
    assert clean_text._plain_fields(data, TENCENT) is not None
    p = parse_range(data, TENCENT, tolerance_us=None)
    assert p.ts_raw_us.tolist() == [1_538_352_000_000_001, 500_000, 12_000_001, 7_000_000]
    assert_same(p, arrow_only(data, TENCENT, monkeypatch))


@pytest.mark.parametrize(("data", "layout", "why"), [
    ("1,srv,0,Read,4096,4096,1\n1,sr\u00e9,0,Read,4096,4096,1\n", MSR, "a byte not ASCII or a carriage return"),
    ("1,srv,0,Read,4096,4096,1\r\n", MSR, "an integer field not 1-18 plain digits"),
    ("1,srv,0,Read\r,4096,4096,1\n", MSR, "a byte not ASCII or a carriage return"),
    ("1,srv,0,Read,4096,4096,1\n1,srv,0,Read,4096,4096\n", MSR, "a line with another number of fields"),
    ("1,srv,0,Read,4096,4096,1\n\n1,srv,0,Read,4096,4096,1\n", MSR, "an empty line"),
    ("\n1,srv,0,Read,4096,4096,1\n", MSR, "an empty line"),
    ("1,srv,0,Read,+4096,4096,1\n", MSR, "an integer field not 1-18 plain digits"),
    ("1,srv,0,Read,0x10,4096,1\n", MSR, "an integer field not 1-18 plain digits"),
    ("1,srv,0,Read,4096,4096,\n", MSR, "an integer field not 1-18 plain digits"),
    ("1,srv,0,Read,1234567890123456789,4096,1\n", MSR, "an integer field not 1-18 plain digits"),
    ("1,srv,0,Read,4096,4096,1.5\n", MSR, "an integer field not 1-18 plain digits"),
    ("1,srv, 0,Read,4096,4096,1\n", MSR, "a text field empty or padded"),
    ("1,,0,Read,4096,4096,1\n", MSR, "a text field empty or padded"),
    ("1,srv,0,Read ,4096,4096,1\n", MSR, "a text field empty or padded"),
], ids=["utf8", "crlf-number", "cr-text", "fields", "blank", "blank-first", "plus", "hex", "empty-number",
        "19-digits", "fraction", "padded", "empty-text", "padded-op"])
def test_anything_outside_the_plain_grammar_gives_up_with_its_reason(data, layout, why, monkeypatch):
    raw = data.encode()
    assert gave_up(raw, layout) == why
    assert clean_text._plain_fields(raw, layout) is None
    try:                                   # and the range goes to pyarrow's reader as before the parser existed
        expected = arrow_only(raw, layout, monkeypatch)
    except NotClean as exc:
        with pytest.raises(NotClean, match=str(exc)[:20].replace("(", ".").replace(")", ".")):
            parse_range(raw, layout, tolerance_us=None)
    else:
        assert_same(parse_range(raw, layout, tolerance_us=None), expected)


@pytest.mark.parametrize(("ts", "why"), [("1.1234567891", "more than 9 decimals"), (".5", "no whole digits"),
                                         ("5.", "no decimals after the point"), ("123456789012.5", "12 whole digits"),
                                         ("1e3", "an exponent"), ("-1.5", "a sign")])
def test_decimal_timestamps_outside_the_plain_form_give_up(ts, why):
    data = f"{ts},1,8,0,7\n".encode()
    assert clean_text._plain_fields(data, TENCENT) is None, why


def test_more_distinct_values_than_the_table_holds_give_up_and_parse_with_pyarrow(monkeypatch):
    count = TK.MAX_DISTINCT + 1
    data = "".join(f"{i},W,0,512,{1_577_836_800_000_000 + i}\n" for i in range(count)).encode()
    assert gave_up(data, ALIBABA) == "too many distinct values of a text field"
    p = parse_range(data, ALIBABA, tolerance_us=None)
    assert len(p.device_names) == count
    assert_same(p, arrow_only(data, ALIBABA, monkeypatch))
    fewer = b"".join(data.splitlines(keepends=True)[:TK.MAX_DISTINCT])
    assert clean_text._plain_fields(fewer, ALIBABA) is not None


def test_a_layout_with_a_column_both_number_and_text_is_not_for_the_parser():
    from blockheat.libs.readers.text_formats import custom_layout
    layout = custom_layout({"ts": 0, "op": 1, "offset": 2, "size": 3, "device": 2})
    assert clean_text._plain_fields(b"1577836800000000,R,7,512\n", layout) is None
    assert SPC.columns["ts"] == 4          # seconds with decimals: the parser's DECIMAL role


@pytest.mark.parametrize("with_values", [True, False])
def test_by_device_regroups_a_range_as_a_stable_sort_by_device_and_sums_each(with_values):
    """TK.by_device against numpy's stable argsort by device code: the same rows in the same order, and each
    device's totals (a code with no row: zero requests)."""
    rng = np.random.default_rng(11)
    n, devices = 5_000, 6
    codes = rng.choice(np.array([0, 1, 2, 4, 5], np.int32), n)          # device 3 has no request
    ts = 1_000 + np.cumsum(rng.integers(0, 100, n))
    is_read = rng.random(n) < 0.35
    offset, size = rng.integers(0, 1 << 40, n), rng.integers(1, 1 << 20, n)
    response = rng.random(n) * 1000 if with_values else np.zeros(0)
    starts, seq, ts_out, op, off, sz, resp, queue, totals = TK.by_device(
        codes, devices, 700, ts, 1_000, is_read, offset, size, response, np.zeros(0))
    order = np.argsort(codes, kind="stable")
    assert starts.tolist() == [0, *np.cumsum(np.bincount(codes, minlength=devices)).tolist()]
    assert (seq == 700 + order).all()
    assert (ts_out == ts[order] - 1_000).all()
    assert (op == np.where(is_read[order], 0, 1)).all()
    assert (off == offset[order]).all()
    assert (sz == size[order]).all()
    assert (resp == response[order]).all() if with_values else len(resp) == 0
    assert len(queue) == 0
    for d in range(devices):
        rows = codes == d
        if not rows.any():
            assert totals[d, 0] == 0
            continue
        assert dict(zip(TK.TOTALS, totals[d].tolist(), strict=True)) == {
            "n": rows.sum(), "reads": (rows & is_read).sum(), "bytes_read": size[rows & is_read].sum(),
            "bytes_written": size[rows & ~is_read].sum(), "ts_min": ts[rows].min(), "ts_max": ts[rows].max(),
            "first_index": np.flatnonzero(rows)[0]}


def test_a_duration_column_is_regrouped_whole_all_null_or_taken_row_by_row():
    """write_task's double columns in by_device's order: regrouped values (no null), all nulls, or some nulls
    taken by the rows' line indexes."""
    import pyarrow as pa

    order = np.array([2, 0, 1])
    seq = order + 40                                   # by_device's seq of those rows, from seq_base 40
    full = pa.array([1.0, 2.0, 3.0])
    values = clean_text.regroup_values(full)
    assert not values.flags.writeable
    assert values.tolist() == [1.0, 2.0, 3.0]
    assert clean_text._regrouped(full, values, np.array([3.0, 1.0, 2.0]), seq, 40).to_pylist() == [3.0, 1.0, 2.0]
    none = pa.nulls(3, pa.float64())
    assert len(clean_text.regroup_values(none)) == 0
    assert clean_text._regrouped(none, clean_text.regroup_values(none), np.zeros(0), seq, 40).to_pylist() == [None] * 3
    some = pa.array([1.0, None, 3.0])
    assert clean_text._regrouped(some, clean_text.regroup_values(some), np.zeros(0), seq, 40).to_pylist() == [
        3.0, 1.0, None]


def test_a_text_value_is_matched_among_a_few_known_ones_even_a_prefix_of_another(monkeypatch):
    """A text field with at most TK._FEW distinct values so far is matched against each (not only the previous
    line's) before it is hashed: "1" against "10" and "10" against "1" stay apart, and past _FEW values the
    hash table takes over; the values are pyarrow's."""
    disks = ["1", "10", "1", "1", "10", *[str(k) for k in range(2, 14)], "10", "1", "13", "7"]
    lines = [f"128166372003061629,h,{d},{'Read' if k % 3 else 'Write'},{k * 512},4096,{k}"
             for k, d in enumerate(disks)]
    data = ("\n".join(lines) + "\n").encode()
    plain = parse_range(data, MSR, tolerance_us=None)
    assert clean_text._plain_fields(data, MSR) is not None
    assert_same(plain, arrow_only(data, MSR, monkeypatch))
    assert [plain.device_names[c] for c in plain.device_codes] == [f"h_{d}" for d in disks]
    assert plain.is_read.tolist() == [bool(k % 3) for k in range(len(disks))]

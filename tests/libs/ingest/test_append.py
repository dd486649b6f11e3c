"""Append ingest (libs.ingest.append): a trace built file by file equals the trace ingested whole, every record is
accounted for per file and per batch, and what cannot be appended is refused with nothing written."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from blockheat.libs.ingest.pipeline import IngestError
from blockheat.libs.io import delta_log
from blockheat.libs.io.inputs import InputError
from tests.builders import MSR_T0, ingest, table_digest, trace_row, write_msr

DAY_US = 86_400_000_000
AGREE = Path(__file__).parents[2] / "data" / "agree"


def day_rows(day: int, n: int = 60) -> list[tuple[int, int, str, int, int]]:
    """n requests of one day on disks 0 and 1 (every third on disk 1), spread over the day's first hours."""
    return [(day * DAY_US + 1_000_000 + i * 97_000_000, i % 3 // 2, "R" if i % 4 else "W", (i * 7919 % 512) * 4096,
             4096 * (1 + i % 3)) for i in range(n)]


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("days")
    return [write_msr(folder / f"day{d}.csv", day_rows(d)) for d in range(3)]


def warehouse_of(cfg: Any) -> Path:
    return Path(cfg.warehouse)


def catalog(spark: Any, trace_id: str) -> dict[str, Any]:
    row = trace_row(spark, trace_id)
    assert row is not None
    return {k: v for k, v in row.items() if k not in ("trace_id", "ingested_at")}


def requests_files(cfg: Any, trace_id: str) -> dict[str, list[str]]:
    """device -> its requests files (add paths) in the trace's latest snapshot."""
    snap = delta_log.snapshot(str(warehouse_of(cfg) / "requests"))
    out: dict[str, list[str]] = {}
    for add in snap.files:
        if add["partitionValues"]["trace_id"] == trace_id:
            out.setdefault(add["partitionValues"]["device"], []).append(add["path"])
    return {d: sorted(p) for d, p in out.items()}


def test_a_trace_appended_day_by_day_equals_the_trace_ingested_whole(spark: Any, spark_cfg: Any,
                                                                     days: list[Path]) -> None:
    wh = warehouse_of(spark_cfg)
    whole = ingest(spark, spark_cfg, "msr", "ap-whole", days)
    first = ingest(spark, spark_cfg, "msr", "ap-days", days[:1])
    assert first.trace["records_read"] == 60
    first_files = requests_files(spark_cfg, "ap-days")
    for n, day in enumerate(days[1:], start=2):
        added = ingest(spark, spark_cfg, "msr", "ap-days", [day], append=True)
        assert sum(d["records"] for d in added.per_device) == 60
        assert added.trace["records_read"] == 60 * n
    # Every column of every request equal, source_file, seq and ts_us included (the same origin, seq going on).
    for table in ("requests", "rejected_records"):
        assert (table_digest(spark, wh, table, "ap-days") == table_digest(spark, wh, table, "ap-whole")), table
    appended, ingested = catalog(spark, "ap-days"), catalog(spark, "ap-whole")
    assert appended == ingested
    assert appended["records_read"] == 180
    assert appended["span_us"] == 2 * DAY_US + 59 * 97_000_000
    assert [f["path"] for f in appended["source_files"]] == [str(d) for d in days]
    assert dict(appended["options"])["ts_origin_raw_us"] == str((MSR_T0 + 10_000_000) // 10)
    assert whole.trace["records_read"] == 180
    # Each batch added its own files (as many per device as the first): none rewritten.
    final = requests_files(spark_cfg, "ap-days")
    assert {d: len(p) for d, p in final.items()} == {d: 3 * len(p) for d, p in first_files.items()}
    assert all(set(p) <= set(final[d]) for d, p in first_files.items())


def test_a_file_already_in_the_trace_is_refused_naming_both(spark: Any, spark_cfg: Any, days: list[Path],
                                                           tmp_path: Path) -> None:
    ingest(spark, spark_cfg, "msr", "ap-dup", days[:2])
    before = catalog(spark, "ap-dup")
    copy = tmp_path / "again.csv"
    copy.write_bytes(days[1].read_bytes())
    with pytest.raises(IngestError, match=rf"^{copy}: already in trace ap-dup as {days[1]} \(the same SHA-256, "
                                          r"[0-9a-f]{16}\.\.\.\); nothing written$"):
        ingest(spark, spark_cfg, "msr", "ap-dup", [copy], append=True)
    twin = tmp_path / "twin.csv"
    twin.write_bytes(days[2].read_bytes())
    with pytest.raises(InputError, match=rf"^{twin}: the same content as {days[2]} \(SHA-256 [0-9a-f]{{16}}"):
        ingest(spark, spark_cfg, "msr", "ap-dup", [days[2], twin], append=True)
    assert catalog(spark, "ap-dup") == before


def test_what_cannot_be_appended_is_refused(spark: Any, spark_cfg: Any, days: list[Path], tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"trace 'ap-none' is not in the catalog under .*: nothing to append to"):
        ingest(spark, spark_cfg, "msr", "ap-none", days[:1], append=True)
    ingest(spark, spark_cfg, "msr", "ap-refuse", days[1:2])
    before = catalog(spark, "ap-refuse")
    with pytest.raises(IngestError, match=r"trace ap-refuse holds msr records: --format vscsi files cannot be"):
        ingest(spark, spark_cfg, "vscsi", "ap-refuse", [AGREE / "dev0.v1.vscsi"], append=True)
    # Day 0 is before the trace's first record (day 1): never appended, overlap allowed or not.
    with pytest.raises(IngestError, match=rf"^{days[0]}: starts 86,[0-9,]+ us \(86,[0-9,.]+ s\) before trace "
                                          r"ap-refuse's first record: an append cannot go before"):
        ingest(spark, spark_cfg, "msr", "ap-refuse", days[:1], append=True, allow_overlap=True)
    # A file starting inside the trace (times from its first record, day 1 + 1 s): refused without --allow-overlap.
    inside = write_msr(tmp_path / "inside.csv", [(DAY_US + 5_000_000_000, 0, "R", 0, 4096)])
    with pytest.raises(IngestError, match=rf"^{inside}: starts at 4,999,000,000 us \(4,999\.000 s\) into trace "
                                          r"ap-refuse, before its end at 5,723,000,000 us .*--allow-overlap"):
        ingest(spark, spark_cfg, "msr", "ap-refuse", [inside], append=True)
    # More than 1% of the batch rejected (the whole trace would be under it): refused.
    bad = tmp_path / "bad.csv"
    write_msr(bad, day_rows(2, 50))
    bad.write_text(bad.read_text() + "not,a,record\n")
    with pytest.raises(IngestError, match=r"1 of 51 records rejected \(1\.96%\), above the limit of 1\.00%"):
        ingest(spark, spark_cfg, "msr", "ap-refuse", [bad], append=True)
    assert catalog(spark, "ap-refuse") == before


def test_an_appended_batch_accounts_for_every_record_per_file(spark: Any, spark_cfg: Any, days: list[Path],
                                                              tmp_path: Path) -> None:
    wh = warehouse_of(spark_cfg)
    ingest(spark, spark_cfg, "msr", "ap-count", days[:1])
    late = write_msr(tmp_path / "late.csv", day_rows(1, 200))
    late.write_text(late.read_text() + "128166372000000000,h,0,Flush,0,0,0\n")   # an unknown op: rejected
    added = ingest(spark, spark_cfg, "msr", "ap-count", [days[2], late], append=True)
    row = added.trace
    assert (row["records_read"], row["records_accepted"], row["records_rejected"]) == (60 + 60 + 201, 320, 1)
    requests = delta_log.read(str(wh / "requests"), ["seq", "source_file"], {"trace_id": "ap-count"}).to_pylist()
    rejected = delta_log.read(str(wh / "rejected_records"), ["source_file", "position", "reason"],
                              {"trace_id": "ap-count"}).to_pylist()
    per_file = {str(p): sum(r["source_file"] == str(p) for r in requests + rejected) for p in (days[0], days[2], late)}
    assert per_file == {str(days[0]): 60, str(days[2]): 60, str(late): 201}
    assert rejected == [{"source_file": str(late), "position": 201, "reason": "unknown_op"}]
    # seq numbers every record read, across the appends: the first file's 0-59, then on in file order.
    assert sorted(r["seq"] for r in requests) == [s for s in range(321) if s != 320]


def test_an_overlapping_append_re_sorts_only_the_files_it_reaches_into(spark: Any, spark_cfg: Any,
                                                                       days: list[Path], tmp_path: Path) -> None:
    wh = warehouse_of(spark_cfg)
    ingest(spark, spark_cfg, "msr", "ap-over", days)
    before = requests_files(spark_cfg, "ap-over")
    # Late-arriving records of disk 0 inside day 1, between its requests.
    extra = [(DAY_US + 1_500_000 + i * 190_000_000, 0, "W", 8192 * i, 512) for i in range(5)]
    late = write_msr(tmp_path / "late-day1.csv", extra)
    ingest(spark, spark_cfg, "msr", "ap-over", [late], append=True, allow_overlap=True)
    after = requests_files(spark_cfg, "ap-over")
    root = str(wh / "requests")

    def span(path: str) -> tuple[int, int, int]:
        ts = pq.read_table(delta_log.file_path(root, path), columns=["ts_us"]).column("ts_us").to_pylist()
        return min(ts), max(ts), len(ts)

    # Disk 1 is untouched; of disk 0's files, those the late rows' time range meets are replaced by one file that
    # holds their rows and the late ones, sorted; the others stay.
    assert after["h_1"] == before["h_1"]
    late_lo, late_hi = DAY_US + 500_000, DAY_US + 500_000 + 4 * 190_000_000
    met = {p for p in before["h_0"] if span(p)[0] <= late_hi and span(p)[1] >= late_lo}
    assert met
    assert set(before["h_0"]) - met <= set(after["h_0"])
    (resorted,) = set(after["h_0"]) - set(before["h_0"])
    assert set(after["h_0"]) == (set(before["h_0"]) - met) | {resorted}
    table = pq.read_table(delta_log.file_path(root, resorted), columns=["seq", "ts_us"])
    ts, seq = table.column("ts_us").to_pylist(), table.column("seq").to_pylist()
    assert sorted(zip(ts, seq, strict=True)) == list(zip(ts, seq, strict=True))
    assert len(ts) == sum(span(p)[2] for p in met) + 5
    assert ts[:2] == [DAY_US, DAY_US + 500_000]
    assert sorted(seq)[-5:] == list(range(180, 185))
    # The same requests as one ingest of every file, in the same order.
    both = ingest(spark, spark_cfg, "msr", "ap-over-whole", [*days, late])
    assert both.trace["records_read"] == 185
    for table_name in ("requests", "rejected_records"):
        assert (table_digest(spark, wh, table_name, "ap-over") == table_digest(spark, wh, table_name, "ap-over-whole"))
    assert catalog(spark, "ap-over") == catalog(spark, "ap-over-whole")


def test_the_binary_and_general_paths_append_too(spark: Any, spark_cfg: Any, days: list[Path]) -> None:
    """vSCSI (decoded by tasks) and blkparse (Spark's text reader): one file appended after another equals the two
    ingested together."""
    wh = warehouse_of(spark_cfg)
    cases = (("vscsi", [AGREE / "dev0.v1.vscsi", AGREE / "dev1.v1.vscsi"], {}),
             ("msr", days, {"fast_text": False}))
    for fmt, files, options in cases:
        ingest(spark, spark_cfg, fmt, f"ap-{fmt}-whole", files, **options)
        ingest(spark, spark_cfg, fmt, f"ap-{fmt}", files[:1], **options)
        ingest(spark, spark_cfg, fmt, f"ap-{fmt}", files[1:], append=True, allow_overlap=True, **options)
        for table in ("requests", "rejected_records"):
            assert table_digest(spark, wh, table, f"ap-{fmt}") == table_digest(spark, wh, table, f"ap-{fmt}-whole")
        assert catalog(spark, f"ap-{fmt}") == catalog(spark, f"ap-{fmt}-whole")

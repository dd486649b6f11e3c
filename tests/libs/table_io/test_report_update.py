"""The report's distributions after an append, the new requests' counts added to the stored ones
(libs.table_io.report), equal counting the whole trace: the bundled hplajw week ingested a day at a time."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from blockheat.libs.table_io.report import METRICS, report_cdfs
from tests.builders import ingest

POINTS = [i / 100 for i in range(101)]


def test_report_counts_added_day_by_day_equal_the_whole_trace(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                                              caplog: pytest.LogCaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from blockheat.libs.table_io import report as RP

    wh = spark_cfg.warehouse
    ingest(spark, spark_cfg, "hp-srt", "ru-whole", hplajw_days)
    want = report_cdfs(spark, wh, "ru-whole", POINTS, full=True)
    ingest(spark, spark_cfg, "hp-srt", "ru-days", hplajw_days[:1])
    report_cdfs(spark, wh, "ru-days", POINTS)
    caplog.set_level(logging.INFO, logger="blockheat.libs.table_io.device_pass")
    monkeypatch.setattr(RP, "CHUNK_ROWS", 1_000)           # each night's requests split over tasks by time ...
    monkeypatch.setattr(RP, "parallelism", lambda _spark: 4)
    tasks: list[list[tuple[str, str, Any]]] = []
    real = RP.time_pieces
    monkeypatch.setattr(RP, "time_pieces", lambda *a, **k: tasks.append(real(*a, **k)) or tasks[-1])
    for day in hplajw_days[1:]:
        ingest(spark, spark_cfg, "hp-srt", "ru-days", [day], append=True)
        caplog.clear()
        got = report_cdfs(spark, wh, "ru-days", POINTS)
        assert any("after the stored counts" in r.getMessage() for r in caplog.records)   # the new requests only
    assert set(want) == set(METRICS)
    assert {m: sorted(c) for m, c in got.items()} == {m: sorted(c) for m, c in want.items()}
    assert got == want                                # every device, operation and percentile, exactly
    # ... every night but the first appended: five tasks over the two devices
    assert [len(night) for night in tasks] == [2, 5, 5, 5, 5, 5]
    assert len(want["interarrival_us"]) >= 2
    assert len(want["size_bytes"]) >= 4
    # A second ingest of the trace (files no longer extending the stored ones) is counted whole.
    ingest(spark, spark_cfg, "hp-srt", "ru-days", hplajw_days[3:])
    caplog.clear()
    again = report_cdfs(spark, wh, "ru-days", POINTS)
    assert not any("after the stored counts" in r.getMessage() for r in caplog.records)
    ingest(spark, spark_cfg, "hp-srt", "ru-ref", hplajw_days[3:])
    assert again == report_cdfs(spark, wh, "ru-ref", POINTS, full=True)


def test_report_counts_in_parts_equal_counting_whole(spark: Any, spark_cfg: Any, hplajw: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A device read in parts of a few thousand requests (each part's first gap from the part before): the same
    distributions as read whole."""
    from blockheat.libs.table_io import report as RP
    from tests.conftest import HPLAJW_TRACE_ID

    whole = report_cdfs(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID, POINTS, full=True)
    monkeypatch.setattr(RP, "CHUNK_ROWS", 1_500)
    assert report_cdfs(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID, POINTS, full=True) == whole
    # Split by time over tasks as on a machine of 6 cores (each piece's first gap added by the driver).
    tasks: list[list[tuple[str, str, Any]]] = []
    real = RP.time_pieces
    monkeypatch.setattr(RP, "time_pieces", lambda *a, **k: tasks.append(real(*a, **k)) or tasks[-1])
    monkeypatch.setattr(RP, "parallelism", lambda _spark: 6)
    assert report_cdfs(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID, POINTS, full=True) == whole
    names = [name for name, _, _ in tasks[0]]
    assert len(names) >= 5
    assert {n.split("#")[0] for n in names} == {"0", "1"}
    assert "0#2" in names

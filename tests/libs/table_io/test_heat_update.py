"""Extent and disk heat brought up to date night by night (libs.table_io.heat_update) equal the full computation:
the bundled hplajw week ingested a day at a time, with the heat job after each day (each night's windows read in
parts, the busiest device's split over two tasks), against the whole week ingested at once and computed whole."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from blockheat.jobs.extent_heat import HeatConfig, run
from blockheat.libs.table_io import heat as H
from blockheat.libs.table_io import heat_update as HU
from blockheat.libs.table_io.heat import HeatParams
from blockheat.libs.table_io.heat_update import HeatState
from tests.builders import ingest, table_digest

TABLES = ("extent_heat", "disk_heat")
DAY_US = 86_400_000_000


def digests(spark: Any, cfg: Any, trace_id: str) -> dict[str, str]:
    return {t: table_digest(spark, Path(cfg.warehouse), t, trace_id) for t in TABLES}


def test_heat_updated_day_by_day_equals_the_full_computation(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                                             caplog: pytest.LogCaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    wh = Path(spark_cfg.warehouse)
    ingest(spark, spark_cfg, "hp-srt", "hu-whole", hplajw_days)
    run(spark, spark_cfg, HeatConfig("hu-whole", window_us=600_000_000), full=True)
    expected = digests(spark, spark_cfg, "hu-whole")

    ingest(spark, spark_cfg, "hp-srt", "hu-days", hplajw_days[:1])
    run(spark, spark_cfg, HeatConfig("hu-days", window_us=600_000_000))          # no state yet: whole
    versions = []
    monkeypatch.setattr(HU, "CHUNK_ROWS", 800)             # each night's windows read in parts of about 800 requests
    monkeypatch.setattr(H, "CHUNK_ROWS", 800)              # ... and the busiest device split over two tasks
    tasks: list[list[tuple[str, str, Any]]] = []
    real_pieces = HU.pieces
    monkeypatch.setattr(HU, "pieces", lambda *a: tasks.append(real_pieces(*a)) or tasks[-1])
    caplog.set_level(logging.INFO, logger="blockheat.libs.table_io.heat_update")
    for day in hplajw_days[1:]:
        ingest(spark, spark_cfg, "hp-srt", "hu-days", [day], append=True)
        run(spark, spark_cfg, HeatConfig("hu-days", window_us=600_000_000))
        state = HeatState.load(wh, "hu-days", HeatParams(span_us=0, window_us=600_000_000, width=2, disks=2))
        assert state is not None
        versions.append(state.version)
    assert digests(spark, spark_cfg, "hu-days") == expected
    assert len(set(versions)) == 6                                               # a state per night
    # Device 0 is split over the two cores every night but the first (its requests of day 2 are below what a split
    # needs: more than CHUNK_ROWS and more than 3/4 of the night's).
    assert [[name for name, _, _ in night] for night in tasks] == [["0", "1"]] + [["0#0", "0#1", "1"]] * 5
    # Each night computed only its own day's windows (day 3 moves device 1 in the striped volume: its disk rows
    # are rebuilt from the state's counts, not from the requests).
    updated = [re.fullmatch(r"extent heat hu-days: windows \[(\d+), (\d+)\) us computed again, the rest kept",
                            r.getMessage()) for r in caplog.records if "computed again" in r.getMessage()]
    spans = [(int(m.group(1)), int(m.group(2))) for m in updated if m]
    assert [lo for lo, _ in spans] == [d * DAY_US for d in range(1, 7)]
    assert all(lo < hi <= lo + DAY_US and hi % 600_000_000 == 0 for lo, hi in spans)
    # Run again with nothing new: the same tables; --full gives them too.
    run(spark, spark_cfg, HeatConfig("hu-days", window_us=600_000_000))
    assert digests(spark, spark_cfg, "hu-days") == expected
    run(spark, spark_cfg, HeatConfig("hu-days", window_us=600_000_000), full=True)
    assert digests(spark, spark_cfg, "hu-days") == expected


def test_a_trace_ingested_again_is_computed_whole(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    # The same days ingested again change every window: the update gives way to the full computation, and the
    # tables are those of the first computation.
    ingest(spark, spark_cfg, "hp-srt", "hu-again", hplajw_days[:2])
    run(spark, spark_cfg, HeatConfig("hu-again", window_us=600_000_000))
    expected = digests(spark, spark_cfg, "hu-again")
    ingest(spark, spark_cfg, "hp-srt", "hu-again", hplajw_days[:2])
    caplog.set_level(logging.INFO, logger="blockheat.libs.table_io.heat_update")
    run(spark, spark_cfg, HeatConfig("hu-again", window_us=600_000_000))
    messages = [r.getMessage() for r in caplog.records if r.name == "blockheat.libs.table_io.heat_update"]
    assert messages == ["extent heat hu-again: every window changed: computed whole"]
    assert digests(spark, spark_cfg, "hu-again") == expected

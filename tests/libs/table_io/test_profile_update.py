"""The trace profile after an append, merged from the stored partial aggregates and the new requests only
(libs.table_io.profile_state), equals the profile of the whole trace: the bundled hplajw week ingested a day at a
time with the profile after each day, against the whole week ingested at once and profiled whole."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from blockheat.libs.io.tables import trace_info, trace_rows
from blockheat.libs.table_io import profile as PF
from blockheat.libs.table_io.changes import requests_state
from blockheat.libs.table_io.profile_state import ProfileState
from tests.builders import ingest

WINDOW_US = 3_600_000_000
DAY_US = 86_400_000_000
RESUMED = "profile: the requests from"


def profile_rows(spark: Any, cfg: Any, trace_id: str) -> dict[tuple, float | None]:
    return {(r["scope"], r["device"], r["window_start_us"], r["window_us"], r["metric"]): r["value"]
            for r in trace_rows(spark, Path(cfg.warehouse), "trace_profile", trace_id)}


def profile(spark: Any, cfg: Any, trace_id: str, **kw: Any) -> int:
    span = int(trace_info(spark, cfg.warehouse, trace_id)["span_us"])
    return PF.profile_trace(spark, cfg.warehouse, trace_id, span_us=span, window_us=WINDOW_US, **kw)


def stored_stop(spark: Any, cfg: Any, trace_id: str) -> int:
    """The end of the requests the stored state covers (it must be usable for the trace as it is)."""
    _, sha256 = requests_state(cfg.warehouse, trace_id)
    devices = {r["device"] for r in trace_rows(spark, Path(cfg.warehouse), "trace_profile", trace_id)} - {"*"}
    kept = ProfileState(cfg.warehouse, trace_id, WINDOW_US, 1 << 20).load(sha256, devices)
    assert kept is not None
    return kept.stop


def assert_equal(got: dict, want: dict) -> None:
    """The same groups and metrics, the same None values, and the same numbers: bit for bit but for sums of
    squares' rounding (a float sum in another order), 1e-12 relative."""
    assert got.keys() == want.keys()
    assert {k for k, v in got.items() if v is None} == {k for k, v in want.items() if v is None}
    assert {k: v for k, v in got.items() if v is not None} == pytest.approx(
        {k: v for k, v in want.items() if v is not None}, rel=1e-12)


@pytest.fixture(scope="module")
def whole(spark: Any, spark_cfg: Any, hplajw_days: list[Path]) -> dict:
    ingest(spark, spark_cfg, "hp-srt", "pu-whole", hplajw_days)
    profile(spark, spark_cfg, "pu-whole", full=True)
    return profile_rows(spark, spark_cfg, "pu-whole")


@pytest.mark.parametrize("sizes", [{}, {"rows_per_part": 4_000, "block_rows": 3_000}],
                         ids=["device tasks", "spans and buckets"])
def test_profile_merged_day_by_day_equals_the_whole_trace(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                                          whole: dict, sizes: dict,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    trace = f"pu-days-{len(sizes)}"
    ingest(spark, spark_cfg, "hp-srt", trace, hplajw_days[:1])
    caplog.set_level(logging.INFO, logger="blockheat.libs.table_io.profile")
    profile(spark, spark_cfg, trace, **sizes)                                      # no state yet: whole
    stops = [stored_stop(spark, spark_cfg, trace)]
    for day in hplajw_days[1:]:
        ingest(spark, spark_cfg, "hp-srt", trace, [day], append=True)
        caplog.clear()
        written = profile(spark, spark_cfg, trace, **sizes)
        assert any(RESUMED in r.getMessage() for r in caplog.records)              # resumed, not whole
        assert written == len(profile_rows(spark, spark_cfg, trace))
        stops.append(stored_stop(spark, spark_cfg, trace))
    # each night's state ends after that night's last request, within its day
    assert all(d * DAY_US < stop <= (d + 1) * DAY_US + 1 for d, stop in enumerate(stops))
    got = profile_rows(spark, spark_cfg, trace)
    assert got[("trace", "*", 0, 0, "requests")] == whole[("trace", "*", 0, 0, "requests")] > 40_000
    assert_equal(got, whole)
    # Nothing new: the same rows again, from the state alone; --full gives them too.
    caplog.clear()
    profile(spark, spark_cfg, trace, **sizes)
    assert any(RESUMED in r.getMessage() for r in caplog.records)
    assert_equal(profile_rows(spark, spark_cfg, trace), whole)
    profile(spark, spark_cfg, trace, full=True, **sizes)
    assert_equal(profile_rows(spark, spark_cfg, trace), whole)


def test_profile_after_a_new_ingest_is_whole(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A trace ingested again (its files no longer extend the stored ones) is profiled whole, whatever state the
    first ingest left."""
    ingest(spark, spark_cfg, "hp-srt", "pu-again", hplajw_days[2:4])
    profile(spark, spark_cfg, "pu-again")
    ingest(spark, spark_cfg, "hp-srt", "pu-again", hplajw_days[:2])
    caplog.set_level(logging.INFO, logger="blockheat.libs.table_io.profile")
    caplog.clear()
    profile(spark, spark_cfg, "pu-again")
    assert not any(RESUMED in r.getMessage() for r in caplog.records)
    ingest(spark, spark_cfg, "hp-srt", "pu-again-ref", hplajw_days[:2])
    profile(spark, spark_cfg, "pu-again-ref", full=True)
    assert_equal(profile_rows(spark, spark_cfg, "pu-again"), profile_rows(spark, spark_cfg, "pu-again-ref"))

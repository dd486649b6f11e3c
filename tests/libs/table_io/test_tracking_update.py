"""Heat tracking resumed night by night (libs.table_io.tracking_update) equals tracking the whole trace: the bundled
hplajw week ingested a day at a time, tracked after each day, against the whole week tracked at once."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from blockheat.jobs.heat_tracking import track_ks
from blockheat.libs.table_io.tracking import relative_errors_files, sorted_pieces
from tests.builders import ingest, table_digest

KS = (2, 5, 10)
PERIOD = 1_800_000_000


def digest(spark: Any, cfg: Any, trace_id: str) -> str:
    return table_digest(spark, Path(cfg.warehouse), "heat_tracking", trace_id)


def test_tracking_resumed_day_by_day_equals_tracking_the_whole_trace(spark: Any, spark_cfg: Any,
                                                                     hplajw_days: list[Path],
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    ingest(spark, spark_cfg, "hp-srt", "tu-whole", hplajw_days)
    whole = track_ks(spark, spark_cfg, "tu-whole", KS, aging_period_us=PERIOD, full=True)
    expected = digest(spark, spark_cfg, "tu-whole")

    ingest(spark, spark_cfg, "hp-srt", "tu-days", hplajw_days[:1])
    written = track_ks(spark, spark_cfg, "tu-days", KS, aging_period_us=PERIOD)          # no state yet: whole
    caplog.set_level(logging.INFO, logger="blockheat.libs.table_io.tracking_update")
    errors = relative_errors_files(spark, spark_cfg.warehouse, "tu-days", ks=KS, extent_bytes=1 << 20,
                                   aging_period_us=PERIOD)
    for day in hplajw_days[1:]:
        ingest(spark, spark_cfg, "hp-srt", "tu-days", [day], append=True)
        added = track_ks(spark, spark_cfg, "tu-days", KS, aging_period_us=PERIOD)
        written = {k: written[k] + added[k] for k in KS}
        before = errors
        errors = relative_errors_files(spark, spark_cfg.warehouse, "tu-days", ks=KS, extent_bytes=1 << 20,
                                       aging_period_us=PERIOD)           # the new checkpoints' errors only
        assert all(errors[k]["checkpoints"] > before[k]["checkpoints"] for k in KS)
    assert digest(spark, spark_cfg, "tu-days") == expected
    # The evaluation's errors, kept sorted night by night: the whole week's checkpoints, median and mean.
    want = relative_errors_files(spark, spark_cfg.warehouse, "tu-whole", ks=KS, extent_bytes=1 << 20,
                                 aging_period_us=PERIOD, full=True)
    for k in KS:
        assert (errors[k]["checkpoints"], errors[k]["median"]) == (want[k]["checkpoints"], want[k]["median"])
        assert errors[k]["mean"] == pytest.approx(want[k]["mean"], rel=1e-12)
    assert written == whole                                  # each night added only its own checkpoints' rows
    resumed = [r.getMessage() for r in caplog.records if "tracked on from the stored state" in r.getMessage()]
    assert len(resumed) == 6
    # Nothing new: the same rows; --full gives them too.
    track_ks(spark, spark_cfg, "tu-days", KS, aging_period_us=PERIOD)
    assert digest(spark, spark_cfg, "tu-days") == expected
    track_ks(spark, spark_cfg, "tu-days", KS, aging_period_us=PERIOD, full=True)
    assert digest(spark, spark_cfg, "tu-days") == expected


def test_tracking_in_parts_equals_tracking_whole(spark: Any, spark_cfg: Any, hplajw_days: list[Path],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each device read in parts of whole aging periods, a few thousand requests each, every part tracked after
    the history the part before left: the same rows as one part."""
    from blockheat.libs.table_io import tracking_update as TU

    ingest(spark, spark_cfg, "hp-srt", "tu-parts", hplajw_days[:3])
    track_ks(spark, spark_cfg, "tu-parts", KS, aging_period_us=PERIOD, full=True)
    whole = digest(spark, spark_cfg, "tu-parts")
    monkeypatch.setattr(TU, "CHUNK_ROWS", 1_000)
    track_ks(spark, spark_cfg, "tu-parts", KS, aging_period_us=PERIOD, full=True)
    assert digest(spark, spark_cfg, "tu-parts") == whole


@pytest.mark.parametrize("blocks", [4096, 1 << 40])
def test_sorted_pieces_of_time_ordered_and_shuffled_requests(blocks):
    """Pieces by (extent, ts_us, seq): one counting sort by extent when the requests come in time order (ties of
    ts_us by seq; a stable sort where the extents spread too wide for a count each), the three-key sort otherwise;
    the same pieces either way."""
    rng = np.random.default_rng(11)
    n = 20_000
    ts = np.sort(rng.integers(0, 5_000, n))                 # many equal times
    rows = pa.table({"ts_us": ts, "seq": np.arange(n), "offset_bytes": rng.integers(0, blocks, n) * 4096,
                     "size_bytes": rng.integers(1, 600, n) * 1024})
    ordered = sorted_pieces(rows, 1 << 16)
    shuffled = sorted_pieces(rows.take(rng.permutation(n)), 1 << 16)
    ext, ts_p, seq, _ = ordered
    assert np.all(np.lexsort((seq, ts_p, ext)) == np.arange(len(ext)))       # sorted by (extent, ts_us, seq)
    assert len(np.unique(ext)) > 100
    for a, b in zip(ordered, shuffled, strict=True):
        assert np.array_equal(a, b)

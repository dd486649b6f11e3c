"""A failed ingest leaves nothing behind: a gzip cut short fails naming the file, with no staged copy left."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from blockheat.libs.io.inputs import InputError
from tests.builders import ingest, table_count, write_msr

LINES = 40_000          # about 2.4 MB of MSR text: Spark reads past the first 64 KB the driver checks


@pytest.fixture(scope="module")
def whole_gzip(tmp_path_factory) -> bytes:
    source = write_msr(tmp_path_factory.mktemp("cut") / "trace.csv",
                       [(i * 1000, i % 2, "R" if i % 3 else "W", i * 4096, 4096) for i in range(LINES)])
    return gzip.compress(source.read_bytes())


def staging_contents(warehouse: Path) -> list[str]:
    staging = warehouse / "_staging"
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*")) if staging.exists() else []


@pytest.mark.parametrize(("name", "keep"), [
    ("cut.csv.gz", 0.5),            # Spark's own codec: the read fails in a task, past the driver's check
    ("cut-small.csv.gz", 0.002),    # cut within the first 64 KB: the driver's format check meets the end
    ("cut-gzip.csv", 0.5),          # gzip by its magic bytes: decompressed into the staging location
])
def test_truncated_gzip_fails_naming_the_file_and_leaves_no_staged_copy(spark, spark_cfg, tmp_path, whole_gzip,
                                                                        name, keep):
    path = tmp_path / name
    path.write_bytes(whole_gzip[:int(len(whole_gzip) * keep)])
    trace = "cut-" + name.replace(".", "-")
    with pytest.raises(InputError) as failed:
        ingest(spark, spark_cfg, "msr", trace, [path])
    assert str(failed.value).startswith(f"{path}: corrupt gzip data")
    assert "Compressed file ended before the end-of-stream marker was reached" in str(failed.value)
    assert staging_contents(spark_cfg.warehouse) == []
    for table in ("requests", "rejected_records", "traces"):
        assert table_count(spark, table, trace) == 0, table

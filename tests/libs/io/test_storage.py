"""libs.io.storage's Parquet files."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blockheat.libs.io import storage


def test_write_parquet_without_dictionaries_keeps_the_rows_in_plain_pages(tmp_path):
    table = pa.table({"block": np.arange(50_000, dtype=np.int64) * 7, "last": np.repeat(np.arange(5, dtype=np.int64),
                                                                                         10_000)})
    plain, coded = tmp_path / "a" / "plain.parquet", tmp_path / "b" / "coded.parquet"
    storage.write_parquet(str(plain), table, dictionary=False)       # (the directories are made)
    storage.write_parquet(str(coded), table)
    assert pq.read_table(plain).equals(table)
    assert pq.read_table(coded).equals(table)
    for path, expected in ((plain, [False, False]), (coded, [True, True])):
        chunks = [pq.ParquetFile(path).metadata.row_group(0).column(c) for c in range(2)]
        assert [chunk.has_dictionary_page for chunk in chunks] == expected

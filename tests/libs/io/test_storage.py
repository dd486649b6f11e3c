"""libs.io.storage's Parquet files."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blockheat.libs.io import storage


def test_write_parquet_gives_dictionary_pages_to_text_columns_only(tmp_path):
    table = pa.table({"block": np.arange(50_000, dtype=np.int64) * 7,
                      "last": np.repeat(np.arange(5, dtype=np.int64), 10_000),
                      "device": pa.array(["a", "b"] * 25_000),
                      "op": pa.array(["R", "W"] * 25_000).dictionary_encode()})
    path = tmp_path / "a" / "blocks.parquet"
    storage.write_parquet(str(path), table)                     # (the directories are made)
    assert pq.read_table(path, read_dictionary=["op"]).equals(table)
    chunks = [pq.ParquetFile(path).metadata.row_group(0).column(c) for c in range(4)]
    assert [chunk.has_dictionary_page for chunk in chunks] == [False, False, True, True]
    assert storage.dictionary_columns(table.schema) == ["device", "op"]

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


def test_parquet_options_pack_integers_and_times_and_leave_pages_uncompressed(tmp_path):
    n = 100_000
    ts = np.cumsum(np.random.default_rng(3).integers(0, 2_000, n)).astype(np.int64)
    table = pa.table({"seq": np.arange(n, dtype=np.int64), "ts_us": ts,
                      "at": pa.array(ts, pa.timestamp("us", tz="UTC")), "size": np.full(n, 4096, np.int32),
                      "response": np.linspace(0.0, 1.0, n), "is_read": np.arange(n) % 3 == 0,
                      "op": pa.array(["R", "W"] * (n // 2)).dictionary_encode()})
    path = tmp_path / "requests.parquet"
    storage.write_parquet(str(path), table)
    assert pq.read_table(path, read_dictionary=["op"]).equals(table)
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {group.column(c).path_in_schema: group.column(c) for c in range(group.num_columns)}
    packed = {name for name, chunk in chunks.items() if "DELTA_BINARY_PACKED" in chunk.encodings}
    assert packed == {"seq", "ts_us", "at", "size"}
    assert {chunk.compression for chunk in chunks.values()} == {"UNCOMPRESSED"}
    assert [name for name, chunk in chunks.items() if chunk.has_dictionary_page] == ["op"]
    # consecutive numbers take well under a byte a row; times 0-2,000 us apart 11 bits a row
    assert chunks["seq"].total_compressed_size < n // 20
    assert chunks["ts_us"].total_compressed_size < n * 12 // 8
    assert storage.parquet_options(table.schema)["column_encoding"] == dict.fromkeys(
        ["seq", "ts_us", "at", "size"], "DELTA_BINARY_PACKED")

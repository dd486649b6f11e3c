"""Arrow columns as Python values without pandas, which pyarrow loads (a fifth of a second) to convert a time-zoned
timestamp: such timestamps, nested ones too, are cast to naive UTC ones before to_pylist(). And a column's rows
equal to a value as a numpy mask, a dictionary column compared by its dictionary."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["equal_mask", "naive_type", "utc_values"]


def naive_type(t: pa.DataType) -> pa.DataType:
    """`t` with every time-zoned timestamp in it (in maps, lists and structs too) made naive, of the same unit."""
    import pyarrow as pa  # lazy: a served `blockheat sql` loads pyarrow while the server computes

    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp(t.unit)
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(naive_type(t.key_type)), t.item_field.with_type(naive_type(t.item_type)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        make = pa.list_ if pa.types.is_list(t) else pa.large_list
        return make(t.value_field.with_type(naive_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(naive_type(t.field(i).type)) for i in range(t.num_fields)])
    return t


def utc_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """column.to_pylist(), time-zoned timestamps given as naive datetimes in UTC."""
    naive = naive_type(column.type)
    return (column.cast(naive) if naive != column.type else column).to_pylist()


def equal_mask(column: pa.ChunkedArray | pa.Array, value: Any) -> np.ndarray:
    """column == value per row as a numpy bool array (a null is not equal). A dictionary column (the requests'
    `op`) is compared by its few dictionary entries and those looked up by the indices, not decoded row by row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = np.empty(sum(len(chunk) for chunk in chunks), bool)
    at = 0
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            hit = np.append(pc.equal(chunk.dictionary, value).fill_null(False).to_numpy(zero_copy_only=False), False)
            indices = chunk.indices.fill_null(-1) if chunk.null_count else chunk.indices
            np.take(hit, indices.to_numpy(), out=out[at:at + len(chunk)])     # -1 (null): the appended False
        else:
            out[at:at + len(chunk)] = pc.equal(chunk, value).fill_null(False).to_numpy(zero_copy_only=False)
        at += len(chunk)
    return out

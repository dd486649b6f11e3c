"""Arrow columns as numpy masks and Python values."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from blockheat.libs.io.arrow_values import equal_mask, utc_values


def test_equal_mask_of_dictionary_chunks_with_their_own_dictionaries_and_nulls() -> None:
    first = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 1, 0], pa.int32()), pa.array(["W", "R"]))
    second = pa.DictionaryArray.from_arrays(pa.array([0, 0, 1], pa.int32()), pa.array(["R", "W"]))
    column = pa.chunked_array([first, second.slice(1), pa.DictionaryArray.from_arrays(
        pa.array([], pa.int32()), pa.array([], pa.string()))])
    assert equal_mask(column, "R").tolist() == [False, True, False, True, False, True, False]
    assert column.to_pylist() == ["W", "R", None, "R", "W", "R", "W"]


def test_equal_mask_of_plain_strings_and_of_nothing() -> None:
    assert equal_mask(pa.array(["R", None, "W", "R"]), "R").tolist() == [True, False, False, True]
    assert equal_mask(pa.chunked_array([], pa.string()), "R").dtype == np.bool_
    assert len(equal_mask(pa.chunked_array([], pa.string()), "R")) == 0


def test_utc_values_of_zoned_timestamps_are_naive_utc() -> None:
    t = pa.array([dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)], pa.timestamp("us", "Europe/Paris"))
    assert utc_values(t) == [dt.datetime(2026, 1, 2, 3, 4, 5)]

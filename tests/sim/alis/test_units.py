"""sim.alis.units.KeyTable: the graph tasks' extent key -> unit id lookups."""
from __future__ import annotations

import numpy as np
import pytest

from blockheat.sim.alis.units import KeyTable


def test_key_table_finds_every_key_and_nothing_else():
    rng = np.random.default_rng(3)
    keys = rng.choice(1 << 62, 200_000, replace=False)
    values = rng.integers(0, 1 << 40, len(keys))
    table = KeyTable(keys, values)
    absent = np.setdiff1d(rng.integers(0, 1 << 62, 50_000), keys)
    needles = np.concatenate([keys[::-1], absent, [-1, -(1 << 40)]])
    got = table.get(needles)
    assert got[: len(keys)].tolist() == values[::-1].tolist()
    assert (got[len(keys):] == -1).all()
    assert table.get(absent[:3], missing=-7).tolist() == [-7] * 3


def test_key_table_of_colliding_and_repeated_keys():
    keys = np.arange(0, 64 * 1024, 64, dtype=np.int64)      # one stride: their slots collide often
    table = KeyTable(np.concatenate([keys, keys[:5]]), np.concatenate([np.arange(len(keys)), [99] * 5]))
    assert table.get(keys).tolist() == list(range(len(keys)))   # a repeated key keeps its first value
    assert table.get(keys + 1).tolist() == [-1] * len(keys)
    assert KeyTable(np.zeros(0, np.int64), np.zeros(0, np.int64)).get(np.array([0, 5])).tolist() == [-1, -1]
    with pytest.raises(ValueError, match="must not be negative"):
        KeyTable(np.array([3, -2]), np.array([0, 1]))

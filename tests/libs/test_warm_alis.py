"""ALIS's part of the warm-up `make venv` runs (libs/warm.py's `alis` step): the per-device build
finds runs (the seeded trace gives the same counts every time) and the Spark build's own loops are compiled."""
from __future__ import annotations

from numba import types


def read_only_signature(dispatcher) -> bool:  # type: ignore[no-untyped-def]
    return any(isinstance(t, types.Array) and not t.mutable for sig in dispatcher.signatures for t in sig)


def test_the_alis_warm_up_builds_graphs_and_finds_runs() -> None:
    from blockheat.libs import warm
    from blockheat.libs.alis import graph
    from blockheat.sim.alis import graph as core
    from blockheat.sim.alis import runs

    assert warm.alis() == 1_298
    assert read_only_signature(runs._csr)                        # a stored graph's weights
    assert graph._split_by_bucket.signatures                     # the Spark build's loops
    assert [str(t) for t in core._cut.signatures[0][1:3]] == ["array(int32, 1d, C)"] * 2

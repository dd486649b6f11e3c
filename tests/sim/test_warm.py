"""The warm-up `make venv` runs to fill numba's cache (libs/warm.py): every scenario shape replays its whole
trace, ALIS's cores find runs, and the loops the jobs call on Arrow columns are compiled for read-only arrays
too (numba compiles those again, as a type of their own: unwarmed, each test worker and Spark Python worker
would compile them on first use)."""
from __future__ import annotations

from numba import types

from blockheat.sim import warm


def read_only_signature(dispatcher) -> bool:
    return any(isinstance(t, types.Array) and not t.mutable for sig in dispatcher.signatures for t in sig)


def test_a_frozen_array_is_a_read_only_copy():
    a = warm.frozen(warm.np.arange(3))
    assert not a.flags.writeable
    assert a.tolist() == [0, 1, 2]


def test_every_warm_up_scenario_replays_every_request():
    from blockheat.sim.tracker import _heat

    assert len(warm.SCENARIOS) == 11
    assert warm.trace().num_rows == 2_000
    assert warm.compile_all() == 11 * 2_000
    from blockheat.sim.stats import _classify
    from blockheat.sim.tracker import _add_blocks

    assert _heat.signatures                                      # the tracker's heat, asked once
    assert _add_blocks.signatures                                # the greedy scenario's extent heats
    assert [(str(sig[0]), str(sig[2])) for sig in _classify.signatures] == [   # a streamed run's tallies: the
        ("array(float32, 1d, C)", "array(float32, 2d, C)"),                  # engine's float32 responses, the
        ("array(float64, 1d, C)", "array(float64, 2d, C)")]                  # track-aligned runs' float64 ones


def test_the_alis_warm_up_finds_runs_on_writable_and_read_only_weights():
    from blockheat.sim.alis import graph, runs, units

    assert warm.compile_alis() == 2 * 3
    assert read_only_signature(runs._csr)                        # a stored graph's weights
    assert graph._pair_keys.signatures
    assert [str(t) for t in graph._cut.signatures[0][1:3]] == ["array(int32, 1d, C)"] * 2
    assert units._find.signatures                                # the graph tasks' unit lookups


def test_the_kernels_the_jobs_call_on_arrow_columns_are_compiled_read_only():
    from blockheat.libs import warm as libs_warm
    from blockheat.libs.readers import srt
    from blockheat.libs.transforms import heat_kernels as HK
    from blockheat.libs.transforms import profile_kernels as PK
    from blockheat.libs.transforms import tracking_kernels as TK

    assert set(libs_warm.compile_all(only=("profile", "tracking", "heat", "srt"))) == {
        "profile", "tracking", "heat", "srt"}
    for kernel in (HK.extent_range, HK.touched_extents, HK.device_grids, HK.disks_of, PK.block_pass,
                   PK.gap_cells, PK.device_bursts,        # the profile's tasks, through run_task on a Parquet file
                   TK.unit_pieces, TK.pieces_by_extent, TK.extent_pieces, srt._walk_records):
        assert read_only_signature(kernel), kernel
    # the tracking tasks' calls (rows_of_pieces): a whole pass (seen_before None) and one resumed (an array)
    assert {"none", "array(int64, 1d, C)"} <= {str(sig[-1]) for sig in TK.track.signatures}

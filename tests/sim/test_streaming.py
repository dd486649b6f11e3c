"""Streamed runs (sim.engine.Simulation with `more`, sim.scenarios.simulate_chunks): the bundled HP week replayed
a chunk at a time gives the whole replay's figures, time series and cooling moves, holding only the chunk and the
requests in flight; sim.stats.ResponseTally's order statistics equal _order_stats's."""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from blockheat.libs.readers.srt import read_srt
from blockheat.sim.alis.params import AlisParams
from blockheat.sim.alis.policy import prepare as prepare_alis
from blockheat.sim.alis.policy import prepare_chunks
from blockheat.sim.array import DiskArray, Striped
from blockheat.sim.engine import ClosedLoop, SimConfig, Simulation
from blockheat.sim.records import FLAG_BACKGROUND, FLAG_READ, Requests, StreamFacts
from blockheat.sim.scenarios import ScenarioConfig, simulate_chunks, simulate_requests, streams
from blockheat.sim.select import float_of_bits, select_bits, top16_counts
from blockheat.sim.specs import load
from blockheat.sim.spill import SpilledRequests
from blockheat.sim.stats import ResponseTally, _order_stats
from blockheat.sim.tracks import IoShaping, shape_requests, shape_segments
from blockheat.sim.workloads import mix, poisson_background
from tests.sim.conftest import HPLAJW_TRACE

COLUMNS = ("arrival_us", "device", "lbn", "sectors", "flags")
DEVICES = ("0", "1")


@pytest.fixture(scope="module")
def week() -> Requests:
    """ajw.1week.srt's 44,519 requests in arrival order, in hp_c2247a sectors (512 B), devices 0 and 1."""
    _, cols, _, _ = read_srt(str(HPLAJW_TRACE))
    ts = (cols["enqueue_s"] * 1_000_000 + cols["enqueue_us"]).astype(np.float64)
    order = np.argsort(ts, kind="stable")
    size = cols["size_bytes"][order].astype(np.int64)
    return Requests.build(ts[order] - ts[order][0], cols["disk"][order], cols["sector"][order],
                          np.maximum(1, -(-size // 512)), (cols["ioflags"][order] & 1) == 1)


def cut(r: Requests, sizes: list[int]) -> list[Requests]:
    """The requests in consecutive chunks of these sizes (the last takes the rest)."""
    edges = [0, *np.cumsum(sizes).tolist(), len(r)]
    return [Requests(*(getattr(r, c)[a:b] for c in COLUMNS)) for a, b in itertools.pairwise(edges)
            if b > a]


def same_rows(a: pa.Table, b: pa.Table) -> None:
    """Equal rows, mean responses to 1e-12 (a streamed run sums them chunk by chunk)."""
    ra, rb = a.to_pylist(), b.to_pylist()
    assert len(ra) == len(rb)
    for x, y in zip(ra, rb, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            if k.startswith("mean_response_ms") and x[k] is not None and math.isfinite(x[k]):
                assert y[k] == pytest.approx(x[k], rel=1e-12), k
            else:
                assert y[k] == x[k], k


SCENARIOS: dict[str, dict[str, Any]] = {
    "as-traced": {"speedup": 20.0, "interval_ms": 60_000.0},
    "striped": {"disks": 3, "layout": {"kind": "striped", "unit_sectors": 16}, "speedup": 50.0},
    "extents": {"disks": 3, "layout": {"kind": "extents", "extent_sectors": 4096}, "speedup": 50.0},
    "greedy": {"disks": 3, "layout": {"kind": "extents", "extent_sectors": 4096}, "speedup": 50.0,
               "policy": {"name": "greedy-allocation", "heat_fraction": 0.5}},
    "incremental": {"disks": 3, "layout": {"kind": "extents", "extent_sectors": 4096}, "speedup": 50.0,
                    "policy": {"name": "incremental-greedy", "max_share": 0.2}},
    "cooling": {"disks": 3, "layout": {"kind": "extents", "extent_sectors": 2048}, "speedup": 400.0,
                "interval_ms": 1000.0, "policy": {"name": "cooling", "every_s": 0.5, "delta": 0.01}},
    "saturated": {"disks": 1, "layout": {"kind": "concatenated"}, "speedup": 20_000.0},
    # io shaping a segment at a time: merged runs never span a segment, responses per traced request or per piece
    "track-aligned": {"speedup": 20.0, "io": {"kind": "track-aligned", "tracks": 1, "report": "requests"}},
    "fixed": {"speedup": 20.0, "io": {"kind": "fixed", "io_bytes": 4096, "merge_gap_ms": 50.0}},
    "unmerged": {"speedup": 20.0, "io": {"kind": "track-aligned", "merge": False, "report": "requests"}},
    "saturated-track": {"disks": 2, "speedup": 20_000.0, "io": {"kind": "track-aligned", "report": "requests"}},
    # background traffic drawn whole, merged into the chunks
    "background": {"speedup": 20.0, "background": {"rate_per_s": 2.0}},
    "background-greedy": {"disks": 3, "layout": {"kind": "extents", "extent_sectors": 4096}, "speedup": 50.0,
                          "policy": {"name": "greedy-allocation", "heat_fraction": 0.5},
                          "background": {"rate_per_s": 5.0, "device": "1", "read_fraction": 0.2}},
    # both: the background merged into the shaped chunks, its pieces left out of the traced requests' responses
    "background-track": {"speedup": 20.0, "background": {"rate_per_s": 2.0},
                         "io": {"kind": "track-aligned", "tracks": 1, "report": "requests"}},
    "background-fixed": {"speedup": 20.0, "background": {"rate_per_s": 5.0, "device": "1", "read_fraction": 0.3},
                         "io": {"kind": "fixed", "io_bytes": 4096, "merge_gap_ms": 50.0}},
    # closed loop: a chunk is loaded when the run has issued every request held
    "closed-loop": {"closed_loop": {"outstanding": 4, "think_ms": 2.0}},
    "closed-track": {"closed_loop": {"outstanding": 4, "think_ms": 2.0},
                     "io": {"kind": "track-aligned", "tracks": 1, "report": "requests"}},
    "closed-fixed": {"closed_loop": {"outstanding": 4, "think_ms": 1.0},
                     "io": {"kind": "fixed", "io_bytes": 4096, "merge_gap_ms": 50.0}},
    # a closed loop with open-loop background traffic: the next requests loaded before the clock passes the last
    "closed-background": {"closed_loop": {"outstanding": 4, "think_ms": 2.0}, "background": {"rate_per_s": 2.0}},
    "closed-background-track": {"closed_loop": {"outstanding": 2, "think_ms": 0.0},
                                "background": {"rate_per_s": 20.0, "device": "1", "read_fraction": 0.5},
                                "io": {"kind": "track-aligned", "tracks": 1, "report": "requests"}},
    "closed-striped": {"disks": 3, "layout": {"kind": "striped", "unit_sectors": 16},
                       "closed_loop": {"outstanding": 8, "think_ms": 0.0}},
    "alis": {"speedup": 20.0, "policy": {"name": "alis", "interval_s": 86_400.0}},
    "alis-concatenated": {"disks": 1, "layout": {"kind": "concatenated"}, "speedup": 20.0,
                          "policy": {"name": "alis", "mode": "heat", "plan": "lookahead", "interval_s": 43_200.0}},
    "alis-closed": {"closed_loop": {"outstanding": 4, "think_ms": 2.0},
                    "policy": {"name": "alis", "mode": "run", "interval_s": 86_400.0}},
    "alis-background": {"speedup": 20.0, "background": {"rate_per_s": 2.0},
                        "policy": {"name": "alis", "interval_s": 86_400.0}},
    "alis-fixed": {"speedup": 20.0, "io": {"kind": "fixed", "io_bytes": 4096, "merge_gap_ms": 50.0},
                   "policy": {"name": "alis", "interval_s": 86_400.0}},
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_streamed_scenario_gives_the_whole_replays_figures(week: Requests, name: str) -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": name, "spec": "hp_c2247a", **SCENARIOS[name]})
    assert streams(cfg)
    whole = simulate_requests(week, DEVICES, "hplajw", cfg)
    chunks = cut(week, [1000, 1, 2499, 7000] * 4)
    streamed = simulate_chunks(lambda: iter(chunks), StreamFacts.of(chunks), DEVICES, "hplajw", cfg)
    same_rows(whole.result, streamed.result)
    assert streamed.series.equals(whole.series)
    assert streamed.moves.equals(whole.moves)
    row = streamed.result.to_pylist()[0]
    if not name.startswith("saturated"):
        assert row["requests"] == (73_384 if name.endswith("fixed") else len(week))    # fixed: its 4 KiB pieces
    if name.startswith("background"):
        assert row["bg_requests"] > 1000                 # the background drawn over the window, all of it served
    if name == "cooling":
        assert streamed.moves.num_rows == 25             # the demon moves extents: the moves are compared
    if name.startswith("saturated"):
        assert row["saturated"]
        assert math.isinf(row["p95_response_ms"])
    if name == "alis":           # the same week and speed-up, reads served from the reorganized areas
        assert row["mean_response_ms"] == pytest.approx(1434.44165, rel=1e-8)
    if name == "as-traced":      # the week on its two disks at 20x (its write bursts queue when sped up)
        assert row["p95_response_ms"] == pytest.approx(8380.189, abs=1e-3)
        assert row["mean_response_ms"] == pytest.approx(1471.01368, rel=1e-8)
        assert streamed.series.num_rows == whole.series.num_rows > 100


def test_a_streamed_run_holds_the_chunk_and_the_requests_in_flight(week: Requests) -> None:
    spec = load("hp_c2247a")
    chunks = cut(week, [500] * 100)
    cfg = SimConfig(speedup=50.0)
    sim = Simulation(spec, DiskArray(3, Striped(16)), chunks[0], cfg, np.random.default_rng(1), more=iter(chunks[1:]),
                     facts=StreamFacts.of(chunks))
    held = []
    while not sim.run(until=sim.now_us + 60e6).finished:
        held.append(len(sim.requests))
    whole = Simulation(spec, DiskArray(3, Striped(16)), week, cfg, np.random.default_rng(1))
    whole.run()
    assert max(held) <= 500 + int(sim.result().max_outstanding)
    assert sim.request_base + len(sim.requests) == len(week)
    assert sim.result().p99_response_ms == whole.result().p99_response_ms
    assert sim.result().events == whole.result().events


def test_a_streamed_closed_loop_holds_the_chunk_and_the_requests_in_flight(week: Requests) -> None:
    spec = load("hp_c2247a")
    chunks = cut(week, [500] * 100)
    cfg = SimConfig(closed_loop=ClosedLoop(outstanding=6, think_ms=1.0))
    sim = Simulation(spec, DiskArray(2), chunks[0], cfg, np.random.default_rng(1), more=iter(chunks[1:]),
                     facts=StreamFacts.of(chunks))
    held = []
    while not sim.run(until=sim.now_us + 5e6).finished:
        held.append(len(sim.requests))
    whole = Simulation(spec, DiskArray(2), week, cfg, np.random.default_rng(1))
    whole.run()
    assert len(held) > 50
    assert max(held) < 1000                             # a chunk and the few in flight, never the week
    assert sim.result().mean_response_ms == pytest.approx(whole.result().mean_response_ms, rel=1e-12)
    assert sim.result().p99_response_ms == whole.result().p99_response_ms
    assert sim.result().events == whole.result().events == 2 * len(week)
    # Background requests (open loop) among them: the next chunk is loaded before the clock passes the last
    # request loaded, so every background arrival comes at its time, as in the whole run. (The loop issues the
    # week's requests long before their traced times here, so the requests from the first background request not
    # yet arrived on stay held.)
    flags = week.flags.copy()
    flags[::7] |= FLAG_BACKGROUND
    with_bg = Requests(week.arrival_us, week.device, week.lbn, week.sectors, flags)
    mixed = cut(with_bg, [500] * 100)
    sim = Simulation(spec, DiskArray(2), mixed[0], cfg, np.random.default_rng(1), more=iter(mixed[1:]),
                     facts=StreamFacts.of(mixed))
    sim.run()
    whole = Simulation(spec, DiskArray(2), with_bg, cfg, np.random.default_rng(1))
    whole.run()
    got, want = sim.result(), whole.result()
    assert got.events == want.events == 2 * len(week)
    assert got.bg_requests == want.bg_requests == len(range(0, len(week), 7))
    assert got.mean_response_ms == pytest.approx(want.mean_response_ms, rel=1e-12)
    assert got.p99_response_ms == want.p99_response_ms
    # Think times in some chunks only: refused where they stop.
    think = [Requests(*(getattr(c, n) for n in COLUMNS), np.ones(len(c))) for c in chunks[:2]] + chunks[2:]
    sim = Simulation(spec, DiskArray(2), think[0], cfg, np.random.default_rng(1), more=iter(think[1:]),
                     facts=StreamFacts.of(think))
    with pytest.raises(ValueError, match="request 1000 on: think times in some chunks only"):
        sim.run()


def test_a_streamed_alis_run_maps_only_its_chunks_pieces(week: Requests) -> None:
    # Each chunk is redirected as the run loads it; the layout holds the volumes' home data, that chunk's pieces and
    # the padding to the virtual device's size, never the week's pieces, and the run is the whole replay's.
    spec = load("hp_c2247a")
    chunks = cut(week, [2000] * 30)
    facts = StreamFacts.of(chunks)
    params = AlisParams(interval_s=86_400.0)
    setup = prepare_chunks(lambda: iter(chunks), facts, params, sector_size=512, capacity_sectors=spec.capacity_sectors)
    whole = prepare_alis(week, params, sector_size=512, capacity_sectors=spec.capacity_sectors)
    assert [len(r.directory) for r in setup.schedule] == [len(r.directory) for r in whole.schedule]
    parts = []

    def redirected() -> Iterator[Requests]:
        for c in chunks[1:]:
            parts.append(setup.stream.chunk(c))
            yield parts[-1].requests

    parts.append(setup.stream.chunk(chunks[0]))
    sim = Simulation(spec, DiskArray(2, parts[0].layout), parts[0].requests, SimConfig(speedup=20.0),
                     np.random.default_rng(1), device_sectors=setup.device_sectors, more=redirected(),
                     facts=replace(facts, device_ends=np.array(setup.device_sectors)),
                     chunk_layout=lambda: parts[-1].layout)
    mapped = []
    while not sim.run(until=sim.now_us + 600e6).finished:
        mapped.append(len(sim.layout.ext_lstart))
    ref = whole.redirected.simulation(spec, SimConfig(speedup=20.0), np.random.default_rng(1))
    ref.run()
    assert len(mapped) > 20
    assert max(mapped) <= max(len(p.layout) for p in parts) < len(ref.layout.ext_lstart) / 5
    assert sum(int(p.pieces.sum()) for p in parts) > 5000             # requests redirected in every part of the week
    assert sim.result().mean_response_ms == pytest.approx(ref.result().mean_response_ms, rel=1e-12)
    assert (sim.result().p99_response_ms, sim.result().events) == (ref.result().p99_response_ms, ref.result().events)
    # A closed loop with background requests may hold requests of earlier chunks not yet issued: refused.
    with pytest.raises(ValueError, match="chunk_layout needs every loaded request issued before the next chunk"):
        Simulation(spec, DiskArray(2, parts[0].layout), parts[0].requests,
                   SimConfig(closed_loop=ClosedLoop(outstanding=2)), np.random.default_rng(1),
                   device_sectors=setup.device_sectors, more=iter([]),
                   facts=replace(facts, foreground=facts.count - 1, device_ends=np.array(setup.device_sectors)),
                   chunk_layout=lambda: parts[-1].layout)


def test_chunks_out_of_arrival_order_are_refused_naming_the_request(week: Requests) -> None:
    a, b = cut(week, [300, 300])[:2]
    with pytest.raises(ValueError, match="chunk 1 starts at"):
        StreamFacts.of([b, a])
    sim = Simulation(load("hp_c2247a"), DiskArray(2), b, SimConfig(), np.random.default_rng(1), more=iter([a]),
                     facts=StreamFacts.of([b]))
    with pytest.raises(ValueError, match="request 300 arrives at"):
        sim.run()


def test_io_shaping_streams_in_segments_that_no_merged_run_spans(week: Requests) -> None:
    io = IoShaping("track-aligned", merge_gap_ms=10.0)
    spec = load("hp_c2247a")
    segments = list(shape_segments(cut(week, [3000] * 20), spec, io))
    assert len(segments) == 16          # one per chunk, ending at its last gap of more than 10 ms, and the rest
    whole = shape_requests(week, spec, io)
    assert sum(len(s) for s, _ in segments) == len(week)
    pieces = Requests.concat(shaped.pieces for _, shaped in segments)
    for name in COLUMNS:
        assert np.array_equal(getattr(pieces, name), getattr(whole.pieces, name))
    for segment, _ in segments[:-1]:
        assert len(segment) >= 2000
    gapless = [Requests.build(np.arange(50, dtype=np.float64) * 1000.0, np.zeros(50), np.arange(50) * 8,
                              np.full(50, 8), np.ones(50, bool))]
    assert [len(s) for s, _ in shape_segments(gapless * 1, spec, io)] == [50]     # one run: one segment


def _streams(n: int, seed: int) -> Requests:
    """n requests 1 ms apart (no gap of 10 ms) from three interleaved sequential streams on one device, each
    jumping to a random address with probability 1/20 (runs of about 20 requests, read and write streams)."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, 3, n)
    jump = rng.random(n) < 0.05
    sectors = rng.integers(1, 17, n)
    at = rng.integers(0, 200_000, 3) * 8
    lbn = np.empty(n, np.int64)
    for i in range(n):
        k = stream[i]
        if jump[i]:
            at[k] = rng.integers(0, 200_000) * 8
        lbn[i] = at[k]
        at[k] += sectors[i]
    return Requests.build(np.arange(n, dtype=np.float64) * 1000.0, np.zeros(n), lbn, sectors, stream != 2)


@pytest.mark.parametrize("kind", ["track-aligned", "fixed"])
def test_a_trace_without_gaps_streams_in_segments_cut_between_closed_runs(kind: str) -> None:
    """No arrival gap of merge_gap_ms anywhere: the segments end where every run begun has ended and is too old
    to be joined (a chunk's worth each, not the whole trace), and their pieces and per-request piece ranges are
    the whole shaping's."""
    requests = _streams(30_000, 11)
    spec = load("hp_c2247a")
    io = IoShaping(kind, io_bytes=8192 if kind == "fixed" else None, merge_gap_ms=10.0)
    segments = list(shape_segments(cut(requests, [3000] * 10), spec, io))
    whole = shape_requests(requests, spec, io)
    assert sum(len(s) for s, _ in segments) == len(requests)
    assert len(segments) == 11          # one cut in each chunk, and the rest
    assert max(len(s) for s, _ in segments) < 2 * 3000       # not the whole trace: about a chunk
    pieces = Requests.concat(shaped.pieces for _, shaped in segments)
    for name in COLUMNS:
        assert np.array_equal(getattr(pieces, name), getattr(whole.pieces, name))
    base = np.cumsum([0] + [len(shaped.pieces) for _, shaped in segments[:-1]])
    for field in ("first_piece", "last_piece"):
        got = np.concatenate([getattr(shaped, field) + b for (_, shaped), b in zip(segments, base, strict=True)])
        assert np.array_equal(got, getattr(whole, field))
    assert len(whole.pieces) < len(requests)           # runs were merged


def test_joined_facts_are_the_merged_workloads_facts(week: Requests) -> None:
    chunks = cut(week, [9000] * 4)
    background = poisson_background(np.random.default_rng(2), rate_per_s=0.5, start_us=1e6,
                                    end_us=float(week.arrival_us[-1]), address_sectors=3_000_000, size_sectors=64,
                                    device=3)
    joined = StreamFacts.of(chunks).joined(StreamFacts.of([background]))
    merged = StreamFacts.of([mix(week, background)])
    for name in ("count", "foreground", "max_sectors", "first_us", "last_us"):
        assert getattr(joined, name) == getattr(merged, name), name
    assert joined.device_ends.tolist() == merged.device_ends.tolist()
    assert len(joined.device_ends) == 4                 # the background's device 3 beyond the week's two
    assert StreamFacts.of(chunks).joined(StreamFacts.of([])).count == len(week)


def test_what_needs_the_whole_window_gathers_the_chunks(week: Requests) -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "cb", "spec": "hp_c2247a", "speedup": 20.0,
                                    "background": {"rate_per_s": 2.0}, "per_request": True})
    assert not streams(cfg)
    assert not streams(ScenarioConfig.from_dict({"scenario_id": "a", "spec": "hp_c2247a",
                                                 "closed_loop": {"outstanding": 2}, "background": {"rate_per_s": 1.0},
                                                 "policy": {"name": "alis"}}))
    assert not streams(ScenarioConfig.from_dict({"scenario_id": "c", "spec": "hp_c2247a", "disks": 2,
                                                 "layout": {"kind": "extents", "extent_sectors": 2048},
                                                 "policy": {"name": "cooling", "every_requests": 100}}))
    chunks = cut(week, [9000] * 4)
    streamed = simulate_chunks(lambda: iter(chunks), StreamFacts.of(chunks), DEVICES, "hplajw", cfg)
    assert streamed.result.equals(simulate_requests(week, DEVICES, "hplajw", cfg).result)
    assert streamed.result.column("bg_requests")[0].as_py() > 0


def test_the_tally_gives_order_statistics_equal_to_one_sort() -> None:
    rng = np.random.default_rng(7)
    resp = np.concatenate([rng.exponential(12_000.0, 50_000), np.full(3000, 8_333.25), rng.random(100)])
    resp = rng.permutation(resp).astype(np.float32)
    resp[rng.random(len(resp)) < 0.01] = np.nan                          # not answered
    flags = (rng.random(len(resp)) < 0.6).astype(np.int8) * FLAG_READ
    flags[rng.random(len(resp)) < 0.05] |= FLAG_BACKGROUND
    tally = ResponseTally()
    for a in range(0, len(resp), 7919):
        tally.add(resp[a:a + 7919], flags[a:a + 7919])
    fg, done, read = (flags & FLAG_BACKGROUND) == 0, ~np.isnan(resp), (flags & FLAG_READ) != 0
    for classes, mask in (((0, 1), fg & done), ((0,), fg & done & read), ((1,), fg & done & ~read)):
        want, got = _order_stats(resp[mask]), tally.order_stats(classes)
        assert got[1:] == want[1:]
        assert got[0] == pytest.approx(want[0], rel=1e-12)
    assert tally.through == len(resp)
    assert all(math.isnan(v) for v in ResponseTally().order_stats((0, 1)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_select_bits_is_the_sorted_keys_kth_across_passes(dtype: type) -> None:
    """Non-negative floats' bits in three arrays per pass, many equal and many sharing their top 16 or 32 bits."""
    rng = np.random.default_rng(11)
    values = np.concatenate([rng.exponential(3.0, 40_000), np.full(5000, 2.0), 2.0 + rng.random(3000) * 1e-6,
                             rng.random(200) * 1e-30, np.zeros(7)]).astype(dtype)
    keys = rng.permutation(values).view(np.uint32 if dtype is np.float32 else np.uint64)
    parts = np.array_split(keys, 3)
    top = np.bincount(keys >> keys.dtype.type(keys.dtype.itemsize * 8 - 16), minlength=1 << 16)
    assert np.array_equal(sum(top16_counts(p) for p in parts), top)
    ordered, sorted_values = np.sort(keys), np.sort(values)
    for k in (0, 6, 7, 100, 20_000, 40_000, 42_500, 45_001, len(keys) - 1):
        assert select_bits(lambda: iter(parts), top, k) == int(ordered[k])
        assert float_of_bits(int(ordered[k]), dtype) == float(sorted_values[k])


def test_spilled_requests_read_back_as_written_in_chunks(week: Requests, tmp_path: Any) -> None:
    with SpilledRequests(tmp_path, chunk_requests=4096) as spill:
        for c in cut(week, [10_000, 3, 20_000]):
            spill.append(c)
        back = list(spill())
        assert [len(c) for c in back] == [4096] * 10 + [len(week) - 40_960]
        again = Requests.concat(spill())
        for name in COLUMNS:
            assert np.array_equal(getattr(again, name), getattr(week, name))
        facts, want = spill.facts(), StreamFacts.of([week])
        assert (facts.count, facts.max_sectors, facts.first_us, facts.last_us) == \
            (44_519, want.max_sectors, 0.0, want.last_us)
        assert facts.device_ends.tolist() == want.device_ends.tolist()
        with pytest.raises(ValueError, match="starts at"):
            spill.append(cut(week, [5])[0])
        cfg = ScenarioConfig.from_dict({"scenario_id": "s", "spec": "hp_c2247a", **SCENARIOS["striped"]})
        same_rows(simulate_requests(week, DEVICES, "h", cfg).result,
                  simulate_chunks(spill, spill.facts(), DEVICES, "h", cfg).result)
    assert not list(tmp_path.iterdir())                    # the scratch directory is gone

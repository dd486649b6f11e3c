"""Disk specs: the shipped files load and say what their sources say; bad files are refused with the bad
value named; TOML and JSON agree; the HP 335H spec is what the trace header builds."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from blockheat.sim.spec import DiskSpec, SeekCurve, SpecError, load_spec_file
from blockheat.sim.specs import SHIPPED, from_geometry, from_srt_header, load, resolve
from tests.sim.conftest import HPLAJW_TRACE, toy_spec


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_spec_loads_with_notes(name: str) -> None:
    spec = load(name)
    assert spec.sources
    assert spec.assumed
    assert spec.capacity_sectors > 0
    assert spec.compile().seek_us.shape == (spec.cylinders,)


def test_c2247a_matches_published_parameters() -> None:
    s = load("hp_c2247a")
    assert (s.capacity_sectors, s.cylinders, s.surfaces, s.rpm, s.sector_size) == (2_054_864, 2051, 13, 5400, 512)
    assert [z.sectors_per_track for z in s.zones] == [96, 92, 88, 84, 80, 72, 64, 56]
    assert [z.first_cylinder for z in s.zones] == [0, 559, 761, 902, 1052, 1194, 1520, 1794]
    seek = s.seek.time_ms(np.array([1, 6, 7, 10, 11, 299, 300, 2050]))
    expect = [2.89, 4.65, 4.52, 4.99, 3.81 + 0.33 * math.sqrt(11), 3.81 + 0.33 * math.sqrt(299),
              7.75 + 0.0059 * 300, 7.75 + 0.0059 * 2050]
    np.testing.assert_allclose(seek, expect, rtol=1e-12)
    assert (s.overhead.read_miss_ms, s.overhead.read_hit_ms, s.overhead.write_ms) == (0.55821, 0.95343, 0.82391)
    # DiskSim's two buffer segments: one for reads, one for writes (tests/sim/test_spec_c2247a.py: every value).
    assert (s.cache.segments, s.cache.write_segment, s.cache.segment_sectors, s.cache.read_ahead_sectors,
            s.cache.write_back) == (1, True, 256, 128, False)


def test_paper_specs_match_their_tables() -> None:
    five = load("five_table1")
    assert five.capacity_sectors * five.sector_size == 552_475 * 1024          # 539 MB of 1 KB blocks
    assert five.seek.average_ms(five.cylinders) == pytest.approx(12.0, abs=1e-9)
    atlas = load("maxtor_atlas_10k3")
    assert atlas.cylinders * atlas.surfaces == 124_088
    assert (atlas.zones[0].sectors_per_track, atlas.zones[-1].sectors_per_track) == (686, 396)
    assert atlas.zero_latency
    assert atlas.head_switch_ms == 0.6
    ssa = load("ssa_table1")
    assert ssa.rotation_ms / 2 == pytest.approx(4.17, abs=0.01)
    assert ssa.seek.average_ms(ssa.cylinders) == pytest.approx(8.8, abs=1e-9)
    ibm = load("ibm_ultrastar_73lzx")
    assert ibm.capacity_bytes / 1e9 == pytest.approx(36.7, abs=0.05)
    assert ibm.cache.segments * ibm.cache.segment_sectors * 512 == 8 << 20


def test_fitted_seek_curve_hits_average_and_single_cylinder() -> None:
    curve = SeekCurve.fitted(average_ms=7.0, single_cylinder_ms=1.5, cylinders=3000)
    assert curve.average_ms(3000) == pytest.approx(7.0, abs=1e-9)
    assert float(curve.time_ms(1)) == pytest.approx(1.5, abs=1e-12)
    with pytest.raises(SpecError, match="single_cylinder_ms < average_ms"):
        SeekCurve.fitted(average_ms=2.0, single_cylinder_ms=3.0, cylinders=3000)


def test_hp335h_spec_is_built_from_the_trace_header() -> None:
    from blockheat.libs.readers.srt import parse_srt_header

    header = parse_srt_header(HPLAJW_TRACE.read_bytes()[: 1 << 20])
    built = from_srt_header(header, 0).to_dict()
    shipped = load("hp_335h").to_dict()
    for d in (built, shipped):
        d.pop("name")
        d.pop("description", None)
    assert built == shipped
    spec = load("hp_335h")
    assert (spec.zones[0].sectors_per_track, spec.surfaces, spec.cylinders, spec.rpm) == (113, 8, 1449, 4002)
    assert float(spec.seek.time_ms(600)) == pytest.approx(10.84 + 0.012 * 600)   # linear piece from 597
    assert float(spec.seek.time_ms(100)) == pytest.approx(3.45 + 0.616 * 10)      # sqrt piece below 597


def test_from_geometry_row_like_the_traces_table() -> None:
    geom = {"device": "0", "disk_type": "hp335h", "sector_size": 256, "sectors_per_track": 113,
            "tracks_per_cylinder": 8, "cylinders": 1449, "rpm": 4002, "head_switch_us": 1000,
            "overhead_us": 1100, "sector_skew": 12, "seek_params": [616, 3450, 597, 10840, 12, 2500],
            "block_size": 8192, "raw": {"bustype": "hp_ib"}}
    spec = from_geometry(geom)
    assert spec.capacity_sectors == 113 * 8 * 1449
    assert spec.bus_ms_per_sector == pytest.approx(0.256)
    with pytest.raises(SpecError, match=r"expected 6 seek_params .* got \[1, 2\]"):
        from_geometry({**geom, "seek_params": [1, 2]})
    with pytest.raises(SpecError, match="missing 'rpm'"):
        from_geometry({**geom, "rpm": None})


def test_toml_and_json_give_the_same_spec(tmp_path: Path) -> None:
    (tmp_path / "d.toml").write_text("""
name = "toy"
sector_size = 512
cylinders = 100
surfaces = 2
rpm = 6000
head_switch_ms = 0.5
[[zones]]
first_cylinder = 0
last_cylinder = 99
sectors_per_track = 100
[seek.linear]
c_ms = 1.0
e_ms = 0.01
[overhead_ms]
read_hit = 0.1
read_miss = 0.2
write = 0.3
""")
    (tmp_path / "d.json").write_text(json.dumps(toy_spec().to_dict()))
    assert load_spec_file(tmp_path / "d.toml") == load_spec_file(tmp_path / "d.json") == toy_spec()
    assert resolve(tmp_path / "d.toml").name == "toy"


@pytest.mark.parametrize(("change", "message"), [
    ({"rpm": 0}, r"rpm must be > 0, got 0"),
    ({"cylinders": 120}, r"zones end at cylinder 99, but the disk has 120 cylinders"),
    ({"zones": [{"first_cylinder": 1, "last_cylinder": 99, "sectors_per_track": 100}]},
     r"first_cylinder must be 0 .* got 1"),
    ({"zones": [{"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 100, "track_skew": 100}]},
     r"track_skew must be in \[0, sectors_per_track=100\), got 100"),
    ({"seek": {"table": [[1, 2.0], [10, 3.0]]}}, r"does not cover distance 11"),
    ({"seek": {"table": [[1, "x"]]}}, r"table\[0\] must be \[distance, ms\], got \[1, 'x'\]"),
    ({"cache": {"segments": 2, "segment_sectors": 64, "read_ahead_sectors": 128}},
     r"read_ahead_sectors 128 exceeds segment_sectors 64"),
    ({"spindle": 3}, r"unknown key\(s\) 'spindle'"),
    ({"read_bus_start_fraction": 1.5}, r"read_bus_start_fraction must be in \[0, 1\], got 1.5"),
])
def test_bad_spec_is_refused_naming_the_value(change: dict[str, object], message: str) -> None:
    data = toy_spec().to_dict()
    data.update(change)
    with pytest.raises(SpecError, match=message):
        DiskSpec.from_dict(data)


def test_unknown_spec_name_lists_the_shipped_ones() -> None:
    with pytest.raises(SpecError, match=r"neither a shipped spec .*hp_c2247a"):
        resolve("no_such_disk")


@pytest.mark.parametrize(("change", "message"), [
    ({"cache": {"segments": 1e12, "segment_sectors": 64}},
     r"d\.json: cache: segments must be at most 4,096 \(it sizes the disk model's arrays\), got 1,000,000,000,000"),
    ({"cache": {"segments": 2, "segment_sectors": 1 << 40}}, r"d\.json: cache: segment_sectors must be at most"),
    ({"cylinders": 10**12}, r"d\.json: cylinders must be at most 4,194,304 .*got 1,000,000,000,000"),
    ({"cylinders": 10**12, "seek": {"fit": {"average_ms": 8.0, "single_cylinder_ms": 1.0}}},
     r"d\.json: cylinders must be at most 4,194,304"),
    ({"surfaces": 1 << 20}, r"d\.json: surfaces must be at most 1,024"),
    ({"zones": [{"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 1 << 30}]},
     r"d\.json: zones\[0\]: sectors_per_track must be at most 1,048,576"),
])
def test_spec_numbers_that_size_memory_are_bounded(tmp_path: Path, change: dict[str, object], message: str) -> None:
    data = toy_spec().to_dict()
    data.update(change)
    (tmp_path / "d.json").write_text(json.dumps(data))
    with pytest.raises(SpecError, match=message):
        load_spec_file(tmp_path / "d.json")


def test_spec_built_in_code_is_bounded_before_any_allocation() -> None:
    import dataclasses

    from blockheat.sim.spec import CacheSpec
    with pytest.raises(SpecError, match=r"spec 'toy' cache: segments must be at most 4,096"):
        dataclasses.replace(toy_spec(), cache=CacheSpec(segments=10**12, segment_sectors=64))
    with pytest.raises(SpecError, match=r"spec 'toy': cylinders must be at most 4,194,304"):
        dataclasses.replace(toy_spec(), cylinders=10**12)

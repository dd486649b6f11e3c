"""The shipped HP C2247A spec is DiskSim 4.0's validated model of the drive, translated field by field: each
translated value against the DiskSim parameter file and line it comes from (data/disksim/hp_c2247a/), and
that line, read from the file, still says so."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from blockheat.sim.specs import load

ROOT = Path(__file__).resolve().parents[2]
DISKSIM = ROOT / "data" / "disksim" / "hp_c2247a"
SPEC = load("hp_c2247a")

# (what the spec holds, its value, DiskSim file:line, the parameter named on that line, its value there).
TRANSLATED = [
    ("cylinders", SPEC.cylinders, "hp_c2247a_validate.model:3", "Number of cylinders", 2051),
    ("surfaces", SPEC.surfaces, "hp_c2247a_validate.model:2", "Number of data surfaces", 13),
    ("capacity", SPEC.capacity_sectors, "hp_c2247a_validate.model:4", "Block count", 2054864),
    ("rpm", SPEC.rpm, "hp_c2247a_validate.model:182", "Rotation speed (in rpms)", 5400),
    ("head switch", SPEC.head_switch_ms, "hp_c2247a_validate.model:181", "Head switch time", 0.89),
    ("write settle", SPEC.write_settle_ms, "hp_c2247a_validate.model:160", "Add. write settling delay", 0.65),
    ("seek sqrt boundary", SPEC.seek.sqrt_below, "hp_c2247a_validate.model:162", None, 300),
    ("seek sqrt a", SPEC.seek.sqrt_a_ms, "hp_c2247a_validate.model:163", None, 3.81),
    ("seek sqrt b", SPEC.seek.sqrt_b_ms, "hp_c2247a_validate.model:164", None, 0.33),
    ("seek linear c", SPEC.seek.linear_c_ms, "hp_c2247a_validate.model:165", None, 7.75),
    ("seek linear e", SPEC.seek.linear_e_ms, "hp_c2247a_validate.model:166", None, 0.0059),
    ("seek 1 cylinder", SPEC.seek.table[0][1], "hp_c2247a_validate.model:170", None, 2.89),
    ("seek 10 cylinders", SPEC.seek.table[9][1], "hp_c2247a_validate.model:179", None, 4.99),
    ("read bus", SPEC.bus_ms_per_sector, "hp_c2247a.parv:93", "Read block transfer time", 0.1701),
    ("write bus", SPEC.bus_write_ms_per_sector, "hp_c2247a.parv:94", "Write block transfer time", 0.18686),
    ("read water mark", SPEC.read_bus_start_fraction, "hp_c2247a.diskspecs:39", "High (read) water mark", 0.75),
    ("write water mark", SPEC.cache.write_water_mark, "hp_c2247a.diskspecs:38", "Low (write) water mark", 0.75),
    ("marks by request", SPEC.cache.water_marks_by == "request", "hp_c2247a.diskspecs:40",
     "Set watermark by reqsize", 1),
    ("read hit after read", SPEC.overhead.read_hit_ms, "hp_c2247a.diskspecs:58", "Read hit over. after read",
     0.95343),
    ("read hit after write", SPEC.overhead.read_hit_after_write_ms, "hp_c2247a.diskspecs:59",
     "Read hit over. after write", 0.95343),
    ("read miss after read", SPEC.overhead.read_miss_ms, "hp_c2247a.diskspecs:60", "Read miss over. after read",
     0.55821),
    ("read miss after write", SPEC.overhead.read_miss_after_write_ms, "hp_c2247a.diskspecs:61",
     "Read miss over. after write", 0.55821),
    ("write after read", SPEC.overhead.write_ms, "hp_c2247a.diskspecs:64", "Write miss over. after read", 0.82391),
    ("write after write", SPEC.overhead.write_after_write_ms, "hp_c2247a.diskspecs:65",
     "Write miss over. after write", 0.82391),
    ("read completion", SPEC.overhead.read_completion_ms, "hp_c2247a.diskspecs:66", "Read completion overhead",
     0.05665),
    ("write completion", SPEC.overhead.write_completion_ms, "hp_c2247a.diskspecs:67", "Write completion overhead",
     0.05045),
    ("data preparation", SPEC.bus_protocol.data_preparation_ms, "hp_c2247a.diskspecs:68",
     "Data preparation overhead", 0.02519),
    ("first reselect", SPEC.bus_protocol.first_reselect_ms, "hp_c2247a.diskspecs:69", "First reselect overhead",
     0.16249),
    ("other reselect", SPEC.bus_protocol.other_reselect_ms, "hp_c2247a.diskspecs:70", "Other reselect overhead",
     0.12883),
    ("extra write disconnect", SPEC.bus_protocol.extra_write_disconnect, "hp_c2247a.diskspecs:74",
     "Extra write disconnect", 1),
    ("extradisc command", SPEC.bus_protocol.extra_command_ms, "hp_c2247a.diskspecs:75",
     "Extradisc command overhead", 0.64244),
    ("extradisc disconnect", SPEC.bus_protocol.extra_disconnect_ms, "hp_c2247a.diskspecs:76",
     "Extradisc disconnect overhead", 0.04551),
    ("extradisc delay", SPEC.bus_protocol.inter_disconnect_delay_ms, "hp_c2247a.diskspecs:77",
     "Extradisc inter-disconnect delay", 0.42885),
    ("extradisc seek delta", SPEC.bus_protocol.seek_delta_ms, "hp_c2247a.diskspecs:79", "Extradisc seek delta",
     0.25),
    ("read disconnect after read", SPEC.bus_protocol.read_disconnect_ms, "hp_c2247a.diskspecs:71",
     "Read disconnect afterread", 0.02266),
    ("read disconnect after write", SPEC.bus_protocol.read_disconnect_after_write_ms, "hp_c2247a.diskspecs:72",
     "Read disconnect afterwrite", 0.04551),
    ("write disconnect", SPEC.bus_protocol.write_disconnect_ms, "hp_c2247a.diskspecs:73", "Write disconnect overhead",
     0.16565),
    ("extradisc 2nd disconnect", SPEC.bus_protocol.extra_second_disconnect_ms, "hp_c2247a.diskspecs:78",
     "Extradisc 2nd disconnect overhead", 0.13437),
    ("minimum write seek", SPEC.bus_protocol.minimum_write_seek_ms, "hp_c2247a.diskspecs:80",
     "Minimum seek delay", 0.6),
    ("disconnect write if seek", SPEC.bus_protocol.disconnect_write_if_seek, "hp_c2247a.diskspecs:54",
     "Disconnect write if seek", 0),
    ("segments: read + write", SPEC.cache.segments + SPEC.cache.write_segment, "hp_c2247a.diskspecs:34",
     "Number of buffer segments", 2),
    ("separate write segment", SPEC.cache.write_segment, "hp_c2247a.diskspecs:37", "Use separate write segment", 1),
    ("segment size", SPEC.cache.segment_sectors, "hp_c2247a.diskspecs:36", "Segment size (in blks)", 256),
    ("read-ahead", SPEC.cache.read_ahead_sectors, "hp_c2247a.diskspecs:45", "Maximum read-ahead (blks)", 128),
    ("read-ahead stop", {"track": 1, "cylinder": 2, "segment": 3}[SPEC.cache.read_ahead_to], "hp_c2247a.diskspecs:43",
     "Buffer continuous read", 3),
    ("read-ahead over requested", SPEC.cache.read_ahead_over_requested, "hp_c2247a.diskspecs:46",
     "Read-ahead over requested", 1),
    ("read hits on write data", SPEC.cache.read_hits_on_write_data, "hp_c2247a.diskspecs:12",
     "Allow read hits on write data", 1),
    ("write-back", SPEC.cache.write_back, "hp_c2247a.diskspecs:49", "Fast write level", 0),
    ("rpm error", SPEC.rpm_error_percent, "hp_c2247a_validate.model:183", "Percent error in rpms", 0.0),
    ("sector by sector", SPEC.calc_sector_by_sector, "hp_c2247a.diskspecs:41", "Calc sector by sector", 1),
    ("hold bus for reads", SPEC.bus_protocol.hold_bus_read, "hp_c2247a.diskspecs:6", "Hold bus entire read xfer", 1),
    ("hold bus for writes", SPEC.bus_protocol.hold_bus_write, "hp_c2247a.diskspecs:7", "Hold bus entire write xfer",
     0),
    ("caching", SPEC.cache.enable_caching, "hp_c2247a.diskspecs:42", "Enable caching in buffer", 1),
    ("partial hit at once", SPEC.cache.immediate_partial_hit, "hp_c2247a.diskspecs:57", "Immed transfer partial hit",
     1),
]
# Zones: (field, model line of zone 0) and every zone's block starts 16-25 lines after the previous one.
ZONE_FIELDS = [("first_cylinder", "First cylinder number"), ("last_cylinder", "Last cylinder number"),
               ("sectors_per_track", "Blocks per track"), ("first_block_offset", "Offset of first block"),
               ("empty_front_sectors", "Empty space at zone front"), ("track_skew", "Skew for track switch"),
               ("cylinder_skew", "Skew for cylinder switch"), ("spare_tracks", "Number of spares")]
ZONE_LINES = [11, 36, 55, 72, 88, 104, 121, 137]      # "First cylinder number" of each zone in the model file


def _line(cite: str) -> str:
    name, number = cite.split(":")
    return (DISKSIM / name).read_text().splitlines()[int(number) - 1]


def _number(text: str) -> float:
    return float(re.findall(r"-?\d+(?:\.\d+)?", text.split("=")[-1])[0])


@pytest.mark.parametrize(("what", "ours", "cite", "parameter", "disksim"), TRANSLATED,
                         ids=[t[0] for t in TRANSLATED])
def test_translated_value_matches_its_disksim_line(what, ours, cite, parameter, disksim) -> None:
    line = _line(cite)
    if parameter is not None:
        assert parameter in line, f"{cite} is {line.strip()!r}, not {parameter!r}"
    assert _number(line) == pytest.approx(disksim, abs=1e-9), f"{cite}: {line.strip()!r}"
    assert float(ours) == pytest.approx(disksim, abs=1e-9), what


def test_every_zone_matches_the_model_file() -> None:
    assert len(SPEC.zones) == len(ZONE_LINES) == 8
    for zone, first in zip(SPEC.zones, ZONE_LINES, strict=True):
        for k, (field, parameter) in enumerate(ZONE_FIELDS):
            line = _line(f"hp_c2247a_validate.model:{first + k}")
            assert parameter in line
            assert getattr(zone, field) == _number(line), (first, field)
        # The slips list follows the zone's fields, one track per line, up to the closing bracket.
        lines = (DISKSIM / "hp_c2247a_validate.model").read_text().splitlines()[first - 1 + len(ZONE_FIELDS):]
        assert lines[0].strip() == "slips = ["
        slips = [int(x.strip().rstrip(",")) for x in lines[1:lines.index("            ],")]]
        assert list(zone.slips) == slips


def test_the_spec_says_where_it_reads_disksim_its_own_way() -> None:
    # Nothing chosen against a trace: the notes name the source files and the readings the model makes.
    assert "hp_c2247a.diskspecs" in SPEC.sources["all"]
    assert {"slips", "skew_origin", "read_water_mark", "write_reconnect", "not_modelled"} <= set(SPEC.assumed)
    assert not any("trace" in note and "chosen" in note for note in SPEC.assumed.values())

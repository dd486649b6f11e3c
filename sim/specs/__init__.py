"""Shipped disk specs (JSON or TOML files in this directory, each with its sources and assumptions) and the
builder of a spec from a trace's recorded geometry (the `traces.geometry` struct or an SRT header)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from blockheat.sim.spec import CacheSpec, DiskSpec, Overheads, SeekCurve, SpecError, Zone, load_spec_file

__all__ = ["SHIPPED", "from_geometry", "from_srt_header", "load", "resolve"]

DIR = Path(__file__).parent
SHIPPED = ("hp_c2247a", "hp_335h", "five_table1", "ibm_ultrastar_73lzx", "maxtor_atlas_10k3", "ssa_table1")

#: Host bus rates assumed for SRT `bustype` values (bytes per second); the header names the bus only.
BUS_BYTES_PER_S = {"hp_ib": 1_000_000.0}


def load(name: str) -> DiskSpec:
    """A shipped spec by name (see SHIPPED)."""
    if name not in SHIPPED:
        raise SpecError(f"no shipped spec {name!r}; shipped: {', '.join(SHIPPED)}")
    toml = DIR / f"{name}.toml"
    return load_spec_file(toml if toml.exists() else DIR / f"{name}.json")


def resolve(name_or_path: str | Path) -> DiskSpec:
    """A shipped spec name, or a path to a .json/.toml spec file."""
    text = str(name_or_path)
    if text in SHIPPED:
        return load(text)
    path = Path(text)
    if not path.exists():
        raise SpecError(f"spec {text!r} is neither a shipped spec ({', '.join(SHIPPED)}) nor a file")
    return load_spec_file(path)


def _get(geom: Mapping[str, Any], key: str) -> Any:
    value = geom.get(key)
    if value is None:
        raise SpecError(f"geometry of device {geom.get('device')!r}: missing {key!r}")
    return value


def from_geometry(geom: Mapping[str, Any]) -> DiskSpec:
    """A DiskSpec from one `traces.geometry` entry (HP SRT header fields).

    Taken from the geometry: sector size, sectors per track (one zone), tracks per cylinder, cylinders,
    rpm, head switch, command overhead (for every command), sector skew (as the track skew) and the six
    seekparms. Assumed, because the header does not say (each is recorded in the spec's `assumed`):
    seekparms = (b, a, boundary, c, e, t1) in microseconds, read as a + b*sqrt(d) below `boundary`
    cylinders, c + e*d from there, and t1 for a one-cylinder seek; the cylinder skew equals the sector
    skew; no on-board cache and no write settle; the host bus rate from BUS_BYTES_PER_S by `bustype`
    (raw map), with the bus transfer after the media transfer.
    """
    device = geom.get("device")
    spt = int(_get(geom, "sectors_per_track"))
    heads = int(_get(geom, "tracks_per_cylinder"))
    cylinders = int(_get(geom, "cylinders"))
    sector = int(_get(geom, "sector_size"))
    skew = int(geom.get("sector_skew") or 0) % spt
    params = [int(x) for x in (geom.get("seek_params") or [])]
    if len(params) != 6:
        raise SpecError(f"geometry of device {device!r}: expected 6 seek_params (b, a, boundary, c, e, t1 in us), "
                        f"got {params!r}")
    b, a, boundary, c, e, t1 = params
    raw = dict(geom.get("raw") or {})
    bustype = str(raw.get("bustype", ""))
    bus_rate = BUS_BYTES_PER_S.get(bustype)
    overhead_ms = int(_get(geom, "overhead_us")) / 1000.0
    name = f"{geom.get('disk_type') or 'disk'} (device {device}, from trace geometry)"
    assumed = {
        "seek": f"seekparms {params} read as (b, a, boundary, c, e, t1) us: a + b sqrt(d) for d < {boundary}, "
                "c + e d beyond, t1 for d = 1 (the header does not name the fields)",
        "cylinder_skew": "equal to the sector skew",
        "cache": "none (the header describes no on-board cache)",
        "write_settle_ms": "0",
        "overhead_ms": "the header's single overhead for reads and writes alike",
        "bus_ms_per_sector": (f"{bustype} at {bus_rate / 1e6:g} MB/s, after the media transfer" if bus_rate
                              else f"bus type {bustype!r} unknown: no bus time"),
    }
    return DiskSpec(
        name=name, sector_size=sector, cylinders=cylinders, surfaces=heads, rpm=float(_get(geom, "rpm")),
        zones=(Zone(0, cylinders - 1, spt, track_skew=skew, cylinder_skew=skew),),
        seek=SeekCurve(table=((1.0, t1 / 1000.0),), sqrt_a_ms=a / 1000.0, sqrt_b_ms=b / 1000.0,
                       sqrt_below=float(boundary), linear_c_ms=c / 1000.0, linear_e_ms=e / 1000.0),
        head_switch_ms=int(_get(geom, "head_switch_us")) / 1000.0, write_settle_ms=0.0,
        overhead=Overheads(overhead_ms, overhead_ms, overhead_ms),
        bus_ms_per_sector=sector / bus_rate * 1000.0 if bus_rate else 0.0,
        read_bus_start_fraction=1.0,
        cache=CacheSpec(), zero_latency=False,
        sources={"geometry": "trace header: sectorsize, nspt, ntpc, ncyl, rpm, headswitch, overhead, sectorskew, "
                             "seekparms, bustype"},
        assumed=assumed,
    )


def from_srt_header(header: Any, disk: int = 0) -> DiskSpec:
    """The spec of one disk of a parsed SRT header (libs.readers.srt.parse_srt_header output)."""
    if disk not in header.disks:
        raise SpecError(f"SRT header describes disks {sorted(header.disks)}, not {disk}")
    d = header.disks[disk]
    return from_geometry({
        "device": str(disk), "disk_type": d.disktype, "sector_size": d.sector_size,
        "sectors_per_track": d.sectors_per_track, "tracks_per_cylinder": d.tracks_per_cylinder,
        "cylinders": d.cylinders, "rpm": d.rpm, "head_switch_us": d.head_switch_us,
        "overhead_us": d.overhead_us, "sector_skew": d.sector_skew, "seek_params": list(d.seek_params),
        "block_size": d.block_size, "raw": dict(d.raw),
    })

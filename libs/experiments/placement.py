"""`placement`: the striping-vs-placement study's tables 1-3 and figures 3-5 (original placement, best static
("dynamic") placement, striping at 32 and 64 KB, random) replayed on the bundled hplajw week with a constant
access time, so that only the load balance differs between placements.

Choices where the paper is open or the trace differs (one line each, tested in
tests/libs/experiments/test_placement.py):
- access time 25 ms per disk access: the paper used each system's average access time (20 ms Seagate, 10 ms
  HP C2247); 25 ms is the hplajw trace's own measured mean access time on its HP 335H (sim/README.md);
- the atomic data sets of the best static placement are the traced devices (each one disk's worth), every
  assignment of devices to distinct disks is simulated and the lowest mean queue time kept (the paper's
  exhaustive search); with two devices on two disks the only other assignment swaps them;
- queue length is the time-averaged number waiting (the one in service excluded: L - utilization), which
  matches the paper's figures by Little's law; queue time is per request, of its slowest disk access;
- striping spreads the two devices' full capacity, concatenated, over the two disks; the extra requests
  are the disk accesses beyond one per request (pieces of a request that are contiguous on one disk are
  one access, as a striping driver issues them);
- random: each request to a uniformly random disk, three seeds, the middle one by mean queue time (the paper's
  "middle set of values for three simulations");
- figures 3-4 (floating imbalance): each disk's mean waiting queue per second under the best whole-device
  placement; floating means the longest queue is off the week's busiest disk in at least a quarter of the
  seconds with a queue (the paper gives no number);
- figure 5 (array size): 1, 2, 4 and 7 copies of the week, copy j rotated in time by j / copies of the week
  (the paper combined other traces of one benchmark), conventional: each copy's devices on their own disks;
- table 3 (reads and writes per disk): the week striped at 32 KB on its 2 disks, per-disk counts from busy time;
- sensitivity (the failing claims' reasons): the same week striped (32 and 64 KB) and random over 3, 4, 8 and 14
  disks (3 and 14 at tiny scale; 14: table 2's count) against the 2-disk original (more disks leave the
  original's queues as they are); striping with every request cut to one sector (no unit crossings); table 3
  under random placement;
- scale: the whole week at both scales (all placements, figure 5 and the sensitivity take a few seconds).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.data import HPLAJW_TRACE
from blockheat.libs.experiments.common import (
    Claim,
    ExperimentOutput,
    about,
    fmt,
    markdown_table,
    new_figure,
    save_figure,
)
from blockheat.libs.readers.srt import read_srt
from blockheat.sim import (
    AsTraced,
    DiskArray,
    DiskSpec,
    Extent,
    ExtentMap,
    Layout,
    RandomDisk,
    Requests,
    SimConfig,
    Simulation,
    Striped,
    timeseries,
)
from blockheat.sim import spec_from_srt_header as from_srt_header

TITLE = ("Striping vs placement: load balance on the hplajw week (tables 1-3, figures 3-5 of the striping-vs-placement "
         "study)")
TRACE = HPLAJW_TRACE
ACCESS_MS = 25.0
STRIPE_BYTES = (32 * 1024, 64 * 1024)
#: Disk counts of the sensitivity run by scale.
SENSITIVITY_DISKS = {"full": (3, 4, 8, 14), "tiny": (3, 14)}
#: Figure 5: copies of the week combined (2 disks each: 2, 4, 8 and 14 disks, table 2's count last).
COPIES = (1, 2, 4, 7)
#: Table 1's striping (32 KB) queue time as % of the original's.
PAPER_PCT_ORIG = 42.42

#: The paper's queue-time figures (ms) and disk accesses: table 1 (TPC-B, 3 disks, 20 ms), table 2 (database
#: benchmark, 14 disks, 10 ms). "dynamic" is the paper's best conventional placement.
PAPER = {
    "table 1": {"original": (35.798, 397.65, 28995), "dynamic": (24.030, 280.87, 28995),
                "striped 32 KB": (15.185, 163.19, 28996), "random": (15.204, 181.34, 28995)},
    "table 2": {"original": (46.338, 6405.85, 1045846), "dynamic": (46.309, 6405.85, 1045846),
                "striped 32 KB": (2.652, 101.44, 1122893), "random": (1.476, 56.89, 1045846),
                "striped 64 KB": (3.117, 215.28, 1084358)},
}


@dataclass(frozen=True)
class Workload:
    requests: Requests
    spec: DiskSpec
    device_sectors: tuple[int, ...]


def load_hplajw(limit: int | None = None) -> Workload:
    """The hplajw week as simulator requests in arrival order (device = traced disk, addresses in the HP
    335H's 256-byte sectors), with each device's capacity, rounded down to whole 64 KB stripe units (so the
    striped space fits the disks), as its logical size."""
    header, cols, _, _ = read_srt(str(TRACE))
    spec = from_srt_header(header, 0)
    ts = (cols["enqueue_s"] * 1_000_000 + cols["enqueue_us"]).astype(np.float64)
    order = np.argsort(ts, kind="stable")[:limit]
    dev = cols["disk"][order].astype(np.int64)
    byte = cols["sector"][order].astype(np.int64) * np.array([header.disks[int(d)].sector_size for d in dev])
    size = cols["size_bytes"][order].astype(np.int64)
    lbn = byte // spec.sector_size
    sectors = -(-(byte + size) // spec.sector_size) - lbn
    req = Requests.build(ts[order], dev, lbn, sectors, (cols["ioflags"][order] & 1) == 1)
    n_dev = int(dev.max()) + 1
    unit = max(STRIPE_BYTES) // spec.sector_size
    size = spec.capacity_sectors // unit * unit
    if int((lbn + sectors).max()) > size:
        raise ValueError(f"hplajw addresses beyond {size} sectors")
    return Workload(req, spec, tuple([size] * n_dev))


def simulate(w: Workload, n_disks: int, layout: Layout, seed: int = 0) -> dict[str, Any]:
    """One placement, constant access time: the paper's metrics as a row."""
    sim = Simulation(w.spec, DiskArray(n_disks, layout), w.requests,
                     SimConfig(service="constant", constant_ms=ACCESS_MS, per_request=True),
                     np.random.default_rng(seed), device_sectors=w.device_sectors)
    assert sim.run().finished
    r = sim.result()
    waiting = [float(q - u) for q, u in zip(r.disk_queue_length, r.disk_utilization, strict=True)]
    return {"requests": r.requests, "disk_accesses": r.physical_ios, "extra_accesses": r.physical_ios - r.requests,
            "queue_length": waiting, "queue_length_total": float(np.mean(waiting)),
            "mean_queue_ms": r.mean_queue_ms, "max_queue_ms": float(np.max(sim.out.out_queue)) / 1000.0,
            "mean_response_ms": r.mean_response_ms, "utilization": list(r.disk_utilization),
            "max_disk_queue": list(r.disk_max_queue), "saturated": r.saturated}


def device_placements(w: Workload, n_disks: int) -> list[tuple[tuple[int, ...], ExtentMap]]:
    """Every assignment of whole devices to distinct disks, as extent maps (device k -> disk p[k] at 0)."""
    n_dev = len(w.device_sectors)
    base = np.concatenate([[0], np.cumsum(w.device_sectors)[:-1]])
    out = []
    for perm in itertools.permutations(range(n_disks), n_dev):
        extents = tuple(Extent(int(base[k]), int(w.device_sectors[k]), perm[k], 0) for k in range(n_dev))
        out.append((perm, ExtentMap(extents)))
    return out


def run(scale: str = "full", seed: int = 1) -> ExperimentOutput:
    out = ExperimentOutput("placement", TITLE, scale)
    w = load_hplajw()
    n_disks = len(w.device_sectors)
    rows: list[dict[str, Any]] = []

    def add(name: str, detail: str, row: dict[str, Any]) -> None:
        rows.append({"placement": name, "detail": detail, **row})

    add("original", "device k on disk k, as traced", simulate(w, n_disks, AsTraced()))
    best = None
    for perm, layout in device_placements(w, n_disks):
        row = simulate(w, n_disks, layout)
        if best is None or row["mean_queue_ms"] < best[1]["mean_queue_ms"]:
            best = (perm, row)
    assert best is not None
    add("dynamic", f"best of {len(device_placements(w, n_disks))} whole-device placements: devices on disks "
                   f"{list(best[0])}", best[1])
    for nbytes in STRIPE_BYTES:
        unit = nbytes // w.spec.sector_size
        add(f"striped {nbytes // 1024} KB", f"unit {unit} sectors over {n_disks} disks",
            simulate(w, n_disks, Striped(unit_sectors=unit)))
    add("random", f"uniform random disk per request, middle of seeds {seed}..{seed + 2}",
        middle_random(w, n_disks, seed))
    orig = rows[0]["mean_queue_ms"]
    for r in rows:
        r["pct_orig"] = 100.0 * r["mean_queue_ms"] / orig if orig > 0 else float("nan")
    out.tables["placements"] = pa.Table.from_pylist(rows)
    sens = [more_disks(w, n, orig, seed) for n in SENSITIVITY_DISKS[scale]]
    out.tables["sensitivity"] = pa.Table.from_pylist(sens)
    one = simulate(one_sector(w), n_disks, Striped(unit_sectors=STRIPE_BYTES[0] // w.spec.sector_size))
    arrays = [array_size(w, k, seed) for k in COPIES]
    out.tables["array_size"] = pa.Table.from_pylist(arrays)
    balance = read_write_balance(w, n_disks, Striped(unit_sectors=STRIPE_BYTES[0] // w.spec.sector_size))
    balance["random"] = read_write_balance(w, n_disks, RandomDisk(), seed)["spread"]
    out.tables["read_write_balance"] = pa.Table.from_pylist(balance["disks"])
    floats = floating(w, n_disks)
    by = {r["placement"]: r for r in rows}
    _claims(out, by, w, sens, one, arrays, balance, floats)
    _sections(out, rows, w, sens, one, arrays, balance, floats)
    out.plots.append(("queue_lengths.png", lambda p: _plot(p, rows)))
    return out.finish()


def middle_random(w: Workload, n_disks: int, seed: int) -> dict[str, Any]:
    """Random placement over n_disks: the middle of three seeds by mean queue time (the paper's rule)."""
    return sorted((simulate(w, n_disks, RandomDisk(), seed=seed + k) for k in range(3)),
                  key=lambda r: r["mean_queue_ms"])[1]


def one_sector(w: Workload) -> Workload:
    """The week with every request cut to its first sector: the same disks under any placement, no request
    crossing a stripe unit (the 'striping close to random' claim's sensitivity; access time is constant)."""
    r = w.requests
    return Workload(Requests(r.arrival_us, r.device, r.lbn, np.ones_like(r.sectors), r.flags), w.spec,
                    w.device_sectors)


def combined(w: Workload, copies: int) -> Workload:
    """`copies` traces combined as figure 5 combines its traces: copy j is the week rotated by j / copies of its
    span (arrival times modulo the span, so the copies' bursts fall at different times) on its own devices
    2j, 2j + 1, ...; the requests in arrival order."""
    r = w.requests
    t0 = float(r.arrival_us[0])
    span = float(r.arrival_us[-1]) - t0 + 1.0
    n_dev = len(w.device_sectors)
    arrival = np.concatenate([(r.arrival_us - t0 + j * span / copies) % span + t0 for j in range(copies)])
    order = np.argsort(arrival, kind="stable")
    device = np.concatenate([r.device + n_dev * j for j in range(copies)])[order].astype(np.int32)
    req = Requests(arrival[order], device, np.tile(r.lbn, copies)[order], np.tile(r.sectors, copies)[order],
                   np.tile(r.flags, copies)[order])
    return Workload(req, w.spec, w.device_sectors * copies)


def array_size(w: Workload, copies: int, seed: int) -> dict[str, Any]:
    """Figure 5's point for `copies` combined weeks: conventional (each copy's devices on its own disks, as
    traced), striped 32 KB and random over all the disks; mean queue times and % of the conventional."""
    c = combined(w, copies)
    n = len(c.device_sectors)
    o = simulate(c, n, AsTraced())
    s = simulate(c, n, Striped(unit_sectors=STRIPE_BYTES[0] // w.spec.sector_size))
    rnd = middle_random(c, n, seed)
    return {"copies": copies, "disks": n, "requests": o["requests"], "conventional (ms)": o["mean_queue_ms"],
            "striped 32 KB (ms)": s["mean_queue_ms"], "random (ms)": rnd["mean_queue_ms"],
            "striped % conventional": 100.0 * s["mean_queue_ms"] / o["mean_queue_ms"],
            "random % conventional": 100.0 * rnd["mean_queue_ms"] / o["mean_queue_ms"]}


def read_write_balance(w: Workload, n_disks: int, layout: Layout, seed: int = 0) -> dict[str, Any]:
    """Table 3 for the week under `layout`: each disk's reads, writes and their time-averaged waiting queue
    lengths (reads and writes per disk from the busy time: every access takes ACCESS_MS), each column's
    largest deviation from its mean over the disks, and the share of the reads and of the writes on the five
    busiest 32 KB units."""
    sim = Simulation(w.spec, DiskArray(n_disks, layout), w.requests,
                     SimConfig(service="constant", constant_ms=ACCESS_MS), np.random.default_rng(seed),
                     device_sectors=w.device_sectors)
    assert sim.run().finished
    r = sim.result()
    span_ms = r.simulated_s * 1000.0
    busy_r = np.array(r.disk_utilization_read)
    busy_w = np.array(r.disk_utilization) - busy_r
    cols = {"reads": np.rint(busy_r * span_ms / ACCESS_MS), "writes": np.rint(busy_w * span_ms / ACCESS_MS),
            "read queue length": np.array(r.disk_queue_length_read) - busy_r,
            "write queue length": np.array(r.disk_queue_length_write) - busy_w}
    disks = [{"disk": d, **{k: float(v[d]) for k, v in cols.items()}} for d in range(n_disks)]
    spread = {k: float(np.max(np.abs(v / v.mean() - 1.0))) for k, v in cols.items()}
    base = np.concatenate([[0], np.cumsum(w.device_sectors)[:-1]])
    units = (base[w.requests.device] + w.requests.lbn) // (STRIPE_BYTES[0] // w.spec.sector_size)
    is_read = w.requests.is_read
    hot = {k: float(np.sort(np.bincount(units[sel]))[-5:].sum() / sel.sum())
           for k, sel in (("reads", is_read), ("writes", ~is_read))}
    return {"disks": disks, "spread": spread, "hot_units_share": hot}


def floating(w: Workload, n_disks: int, interval_ms: float = 1000.0) -> dict[str, Any]:
    """Figures 3-4's sampled queue lengths under the best whole-device placement (the original here): each
    disk's mean waiting queue per interval; of the intervals with any queue, how many have their longest
    queue on a disk other than the week's busiest."""
    sim = Simulation(w.spec, DiskArray(n_disks, AsTraced()), w.requests,
                     SimConfig(service="constant", constant_ms=ACCESS_MS, interval_ms=interval_ms),
                     np.random.default_rng(0), device_sectors=w.device_sectors)
    if not sim.run().finished:
        raise RuntimeError("the floating-imbalance replay stopped early")
    k = timeseries(sim).num_rows
    width = interval_ms * 1000.0
    waiting = (sim.out.ts_disk[:k, :, 0] - sim.out.ts_disk[:k, :, 1]) / width
    busiest = int(np.argmax(sim.result().disk_utilization))
    queued = waiting.max(axis=1) > 0
    elsewhere = queued & (np.argmax(waiting, axis=1) != busiest)
    share = 100.0 * np.bincount(w.requests.device, minlength=n_disks) / len(w.requests)
    return {"intervals": k, "queued": int(queued.sum()), "elsewhere": int(elsewhere.sum()),
            "pct_elsewhere": 100.0 * float(elsewhere.sum()) / max(1, int(queued.sum())), "busiest": busiest,
            "busiest_share_pct": float(share[busiest])}


def extra_ratio(w: Workload, *, distinct: bool = False) -> float:
    """Extra accesses at 64 KB over those at 32 KB on the traced disk count (over each distinct request extent
    once when distinct)."""
    base = np.concatenate([[0], np.cumsum(w.device_sectors)[:-1]])
    first = base[w.requests.device] + w.requests.lbn
    last = first + w.requests.sectors - 1
    if distinct:
        pairs = np.unique(np.stack([first, last]), axis=1)
        first, last = pairs[0], pairs[1]
    n = len(w.device_sectors)

    def extra(unit: int) -> int:
        return int((np.minimum(n, last // unit - first // unit + 1) - 1).sum())

    small, large = (b // w.spec.sector_size for b in STRIPE_BYTES)
    return extra(large) / extra(small)


def more_disks(w: Workload, n_disks: int, original_ms: float, seed: int) -> dict[str, Any]:
    """The week striped (32 and 64 KB) and random over n_disks: mean queue times, % of the original's, extra
    accesses, busiest over mean disk utilization, and the criteria of the claims whose reasons it supports."""
    row: dict[str, Any] = {"disks": n_disks}
    for nbytes in STRIPE_BYTES:
        r = simulate(w, n_disks, Striped(unit_sectors=nbytes // w.spec.sector_size))
        kb = nbytes // 1024
        row |= {f"striped {kb} KB (ms)": r["mean_queue_ms"], f"striped {kb} KB % orig": 100 * r["mean_queue_ms"]
                / original_ms, f"extra {kb} KB": r["extra_accesses"],
                f"busiest / mean {kb} KB": _busiest(r)}
    rnd = middle_random(w, n_disks, seed)
    row |= {"random (ms)": rnd["mean_queue_ms"], "random % orig": 100 * rnd["mean_queue_ms"] / original_ms}
    row["striping about 42 %"] = about(row["striped 32 KB % orig"], PAPER_PCT_ORIG)
    row["64 KB more imbalance"] = bool(row["striped 64 KB (ms)"] > row["striped 32 KB (ms)"])
    return row


def _busiest(row: dict[str, Any]) -> float:
    return max(row["utilization"]) / float(np.mean(row["utilization"]))


def _from(sens: list[dict[str, Any]], key: str) -> str:
    held = [r["disks"] for r in sens if r[key]]
    return f"holds at {', '.join(map(str, held))} disks" if held else "holds at none"


def _claims(out: ExperimentOutput, by: dict[str, dict[str, Any]], w: Workload, sens: list[dict[str, Any]],
            one: dict[str, Any], arrays: list[dict[str, Any]], balance: dict[str, Any],
            floats: dict[str, Any]) -> None:
    o, dyn, s32, s64, rnd = (by[k] for k in ("original", "dynamic", "striped 32 KB", "striped 64 KB", "random"))
    n_disks = len(w.device_sectors)
    top = 100 * float(np.bincount(w.requests.device).max()) / len(w.requests)
    gap = s32["mean_queue_ms"] / rnd["mean_queue_ms"] - 1.0
    one_gap = one["mean_queue_ms"] / rnd["mean_queue_ms"] - 1.0
    out.claims.append(Claim(
        "striping close to random",
        "striping (32 KB)'s mean queue time within 10 % of random placement's",
        "table 1: 15.185 vs 15.204 ms (-0.1 %)",
        f"{fmt(s32['mean_queue_ms'])} vs {fmt(rnd['mean_queue_ms'])} ms ({100 * gap:+.1f} %)", bool(abs(gap) <= 0.10),
        "" if abs(gap) <= 0.10 else
        f"hplajw's requests cross 32 KB units ({s32['extra_accesses']:,} extra accesses for {s32['requests']:,} "
        f"requests; TPC-B's 2 KB requests: 1 for 28,995): with every request cut to its first sector (sensitivity: "
        f"the same disks, no crossing) striping queues {fmt(one['mean_queue_ms'])} ms, {100 * one_gap:+.2f} % from "
        "random",
        quote="Disk striping provides a load balance which is almost exactly equal to random load balance.",
        where="section 7.2, table 1", wording="close"))
    ratio = o["mean_queue_ms"] / s32["mean_queue_ms"]
    out.claims.append(Claim(
        "striping significantly improves load balance",
        "the original's mean queue time at least 1.25x striping (32 KB)'s",
        "table 1: 2.36x (35.798 vs 15.185 ms); table 2: 17.5x (46.338 vs 2.652 ms)",
        f"{ratio:.2f}x ({fmt(o['mean_queue_ms'])} vs {fmt(s32['mean_queue_ms'])} ms)", bool(ratio >= 1.25),
        "" if ratio >= 1.25 else "see the placements table",
        quote="While a more optimal load balance may be possible for some very well understood and well-controlled "
              "environments, disk striping should provide significantly improved load balance with reduced complexity "
              "for many applications.",
        where="abstract; section 7.2, tables 1-2", wording="significantly"))
    ok = about(s32["pct_orig"], PAPER_PCT_ORIG)
    out.claims.append(Claim(
        "striping at about 42 % of the original's queue time",
        f"striping (32 KB)'s mean queue time as % of the original's within 20 % of {PAPER_PCT_ORIG}",
        f"table 1 (3 disks): {PAPER_PCT_ORIG} % (random 42.47 %)",
        f"{s32['pct_orig']:.1f} % (random {rnd['pct_orig']:.1f} %)", bool(ok),
        "" if ok else
        f"the trace has {n_disks} disks with {top:.0f} % of its requests on one, so spreading at best halves that "
        f"disk's load; over more disks (sensitivity) the claim {_from(sens, 'striping about 42 %')} ("
        + ", ".join(f"{r['disks']}: {r['striped 32 KB % orig']:.0f} %" for r in sens) + ")",
        quote="% Orig 100.00 67.13 42.42 42.47", where="section 7.2, table 1", wording="about"))
    x, xd = extra_ratio(w), extra_ratio(w, distinct=True)
    paper_x = (1084358 - 1045846) / (1122893 - 1045846)
    ok = about(x, paper_x)
    out.claims.append(Claim(
        "doubling the unit halves the extra accesses",
        f"extra disk accesses at 64 KB over those at 32 KB within 20 % of table 2's {paper_x:.3f}",
        f"table 2: 38,512 vs 77,047 ({paper_x:.3f})",
        f"{s64['extra_accesses']:,} vs {s32['extra_accesses']:,} ({x:.3f})", bool(ok),
        "" if ok else
        f"a few request extents that straddle a 32 KB boundary recur all week; over each distinct extent once "
        f"the ratio is {xd:.3f}",
        quote="To reduce the number of additional accesses in the striped subsystem, we simulated the use of a larger "
              "stripe unit. This reduces the number of additional accesses, but increases the second effect described "
              "above.",
        where="section 7.2, table 2", wording="about"))
    more = bool(s64["mean_queue_ms"] > s32["mean_queue_ms"])
    out.claims.append(Claim(
        "larger units: more imbalance",
        "64 KB units give a longer mean queue time than 32 KB (the paper's sign of imbalance)",
        "table 2: 3.117 vs 2.652 ms (queue length 0.079 vs 0.069)",
        f"{fmt(s64['mean_queue_ms'])} vs {fmt(s32['mean_queue_ms'])} ms (queue length "
        f"{fmt(s64['queue_length_total'])} vs {fmt(s32['queue_length_total'])})", more,
        "" if more else
        f"on {n_disks} disks the 64 KB units are no less balanced (busiest over mean disk busy "
        f"{_busiest(s64):.2f} vs {_busiest(s32):.2f}) and cross fewer unit boundaries ({s64['extra_accesses']:,} "
        f"extra accesses vs {s32['extra_accesses']:,}); over "
        f"more disks (sensitivity) the claim {_from(sens, '64 KB more imbalance')} (busiest over mean disk busy "
        + ", ".join(f"{r['disks']}: {r['busiest / mean 64 KB']:.2f} vs {r['busiest / mean 32 KB']:.2f}" for r in sens)
        + ")",
        quote="The floating load imbalance suffered by the striped subsystem due to small hot spots outweighs the "
              "benefit of reducing the number of additional requests, causing the amount of queuing (represented by "
              "queue lengths and queue times) to increase.",
        where="section 7.2, table 2", wording="direction"))
    n_place = len(device_placements(w, n_disks))
    gain = bool(dyn["mean_queue_ms"] < o["mean_queue_ms"])
    out.claims.append(Claim(
        "dynamic placement reduces the original's imbalance",
        "the best whole-device placement's mean queue time below the original's",
        "table 1: 67.13 % of the original (24.030 vs 35.798 ms); table 2: 99.94 %",
        f"{dyn['pct_orig']:.2f} % ({fmt(dyn['mean_queue_ms'])} vs {fmt(o['mean_queue_ms'])} ms)",
        True if gain else None,
        "" if gain else
        f"the trace's atomic data sets are its {n_disks} devices, one disk each: the {n_place} whole-device "
        f"placements are the original and its mirror (identical queues), so no placement can move load between "
        f"disks; the paper's 3 disks held more data sets than disks",
        quote="Dynamic data placement can reduce the fixed load imbalance, but is still plagued by floating load "
              "imbalance, which accounts for most of the difference between this placement scheme and disk striping.",
        where="section 7.2, table 1", wording="direction"))
    cut = 1.0 - s32["mean_response_ms"] / dyn["mean_response_ms"]
    out.claims.append(Claim(
        "striping's response gain over dynamic placement about 20 %",
        "striping (32 KB)'s mean response time below the best whole-device placement's by 20 % +- a fifth (16-24 %)",
        "table 1: about 20 % (44 to 35.2 ms); table 2: more than 77 % (56.3 to 12.7 ms)",
        f"{100 * cut:.0f} % ({fmt(dyn['mean_response_ms'])} to {fmt(s32['mean_response_ms'])} ms)",
        True if about(cut, 0.20) and gain else (False if gain else None),
        "" if about(cut, 0.20) and gain else
        "our dynamic placement is the original (no whole-device placement moves load, as in the claim above), so "
        "striping's gain here includes the fixed imbalance the paper's dynamic placement removed first",
        quote="While disk striping does provide a better load balance than dynamic data placement by removing the "
              "small amount of fixed load imbalance and by reducing the effects of floating load imbalance, it only "
              "improves the average response time by about 20 percent (from 44 milliseconds to 35.2 milliseconds).",
        where="section 7.2, table 1", wording="about"))
    ok = bool(floats["pct_elsewhere"] >= 25.0)
    out.claims.append(Claim(
        "floating load imbalance: the busiest disk moves",
        "1 s samples of each disk's waiting queue under the best whole-device placement: in at least a quarter of "
        "the seconds with a queue, the longest is on a disk other than the week's busiest",
        "figures 3-4: the hottest disks change within minutes",
        f"{floats['elsewhere']:,} of {floats['queued']:,} seconds with a queue ({floats['pct_elsewhere']:.1f} %)",
        ok,
        "" if ok else
        f"hplajw's imbalance is fixed: disk {floats['busiest']} holds {floats['busiest_share_pct']:.0f} % of the "
        f"requests and the longer queue in {100 - floats['pct_elsewhere']:.0f} % of the seconds with a queue",
        quote="The sporadic movement of the disk queue lengths show the existence of floating load imbalance in the "
              "TPC-B environment. Not only do the access patterns change, but they do so frequently and with "
              "considerable magnitude.",
        where="section 7.1, figures 3-4"))
    pct = [a["striped % conventional"] for a in arrays]
    falls = bool(all(b < a for a, b in itertools.pairwise(pct)))
    out.claims.append(Claim(
        "combined traces: striping gains more over conventional placement",
        "figure 5's setup with 1, 2, 4 and 7 copies of the week (each rotated in time; conventional: each copy on "
        "its own 2 disks): striping (32 KB)'s mean queue time as % of the conventional falls with every copy added",
        "figure 5: striping does better relative to conventional for the combined traces",
        ", ".join(f"{a['disks']} disks {a['striped % conventional']:.1f} %" for a in arrays), falls,
        "" if falls else "see the array size table",
        quote="We see that striping does better relative to conventional data placement for the combined traces than "
              "it did for the individual trace.",
        where="section 8.1, figure 5", wording="direction"))
    ms = [a["striped 32 KB (ms)"] for a in arrays]
    keeps = bool(all(m <= ms[0] for m in ms[1:]))
    out.claims.append(Claim(
        "striping keeps its load balance as the array grows",
        "in figure 5's setup, striping (32 KB)'s mean queue time with more copies (and disks) no longer than with one",
        "figure 5: striping maintains its load balance as the subsystem grows",
        ", ".join(f"{a['disks']} disks {fmt(a['striped 32 KB (ms)'])} ms" for a in arrays), keeps,
        "" if keeps else "see the array size table",
        quote="The most important point, however, is that striping maintains its load balance as the size of the "
              "subsystem increases.",
        where="section 8.1, figure 5", wording="direction"))
    spread = balance["spread"]
    ok = bool(all(v <= 0.10 for v in spread.values()))
    hot, rnd_spread = balance["hot_units_share"], balance["random"]
    out.claims.append(Claim(
        "striping balances reads and writes",
        f"striped 32 KB over {n_disks} disks: each disk's reads, writes, read and write waiting queue lengths within "
        "10 % of their mean over the disks",
        "table 3: reads 78,542..79,056, writes 1,300..1,353, queue lengths within 6.5 % of their mean",
        ", ".join(f"{k} ±{100 * v:.1f} %" for k, v in spread.items()), ok,
        "" if ok else
        f"small hot spots: the five busiest 32 KB units take {100 * hot['writes']:.0f} % of the writes "
        f"({100 * hot['reads']:.0f} % of the reads), so where those units fall sets each disk's share; random "
        f"placement (sensitivity) spreads the same requests to within "
        + ", ".join(f"{k} ±{100 * v:.1f} %" for k, v in rnd_spread.items()),
        quote="These data show that read requests (and write requests) are balanced among the disks in the subsystem.",
        where="section 8.3, table 3", wording="close"))


def _sections(out: ExperimentOutput, rows: list[dict[str, Any]], w: Workload, sens: list[dict[str, Any]],
              one: dict[str, Any], arrays: list[dict[str, Any]], balance: dict[str, Any],
              floats: dict[str, Any]) -> None:
    n = len(w.requests)
    span_h = float(w.requests.arrival_us[-1] - w.requests.arrival_us[0]) / 3.6e9
    head = (f"## Setup\n\nhplajw week: {n:,} requests over {span_h:.1f} h on {len(w.device_sectors)} HP 335H disks; "
            f"constant access time {ACCESS_MS:g} ms per disk access (the trace's measured mean access time); open "
            "loop, FCFS.")
    ours = []
    for r in rows:
        row = {"placement": r["placement"]}
        for d, q in enumerate(r["queue_length"]):
            row[f"queue length disk {d}"] = q
        row.update({"queue length total": r["queue_length_total"], "queue time average (ms)": r["mean_queue_ms"],
                    "% orig": r["pct_orig"], "queue time maximum (ms)": r["max_queue_ms"],
                    "number of requests": r["disk_accesses"], "extra": r["extra_accesses"]})
        ours.append(row)
    cols = list(ours[0])
    paper_rows = []
    for table, values in PAPER.items():
        o = values["original"][0]
        for name, (q, qmax, nreq) in values.items():
            paper_rows.append({"paper": table, "placement": name, "queue time average (ms)": q,
                               "% orig": 100 * q / o, "queue time maximum (ms)": qmax, "number of requests": nreq})
    detail = markdown_table([{"placement": r["placement"], "detail": r["detail"]} for r in rows],
                            ["placement", "detail"])
    rw = [{"disk": d["disk"], "reads": int(d["reads"]), "read queue length": fmt(d["read queue length"], 3),
           "writes": int(d["writes"]), "write queue length": fmt(d["write queue length"], 3)} for d in balance["disks"]]
    out.sections += [
        head, "## Ours (the paper's metrics)", markdown_table(ours, cols), detail,
        "## The paper's (tables 1 and 2, other traces and disks: compare the % orig column)",
        markdown_table(paper_rows, ["paper", "placement", "queue time average (ms)", "% orig",
                                    "queue time maximum (ms)", "number of requests"]),
        "## Sensitivity: the same week over more disks (the failing claims' reasons)\n\n"
        "Striped and random placements over n disks; % orig against the traced 2-disk placement.",
        markdown_table(sens, list(sens[0])),
        f"## Sensitivity: requests cut to one sector\n\nStriped 32 KB with every request cut to its first sector "
        f"(no request crosses a unit; the same disks): mean queue time {fmt(one['mean_queue_ms'])} ms, "
        f"{one['extra_accesses']} extra accesses.",
        "## Array size (figure 5)\n\nCopies of the week, copy j rotated in time by j / copies of the week, each on its "
        "own devices: conventional keeps each copy's devices on their own disks, striping and random spread all "
        "copies over all the disks.", markdown_table(arrays, list(arrays[0])),
        "## Reads and writes per disk, striped 32 KB (table 3)", markdown_table(rw, list(rw[0])),
        f"## Sampled queue lengths (figures 3-4)\n\n1 s samples of each disk's mean waiting queue under the best "
        f"whole-device placement: {floats['queued']:,} of {floats['intervals']:,} seconds have a queue; in "
        f"{floats['elsewhere']:,} the longest is on a disk other than the week's busiest (disk {floats['busiest']}).",
    ]


def _plot(path: Path, rows: list[dict[str, Any]]) -> None:
    fig, (ax1, ax2) = new_figure(2, width=5.5)
    names = [r["placement"] for r in rows]
    n_disks = len(rows[0]["queue_length"])
    width = 0.8 / n_disks
    x = np.arange(len(rows))
    for d in range(n_disks):
        ax1.bar(x + d * width, [r["queue_length"][d] for r in rows], width, label=f"disk {d}")
    ax1.set_xticks(x + 0.4 - width / 2, names, rotation=20)
    ax1.set_ylabel("mean queue length (waiting)")
    ax1.set_yscale("log")
    ax1.legend()
    ax2.bar(x - 0.2, [r["mean_queue_ms"] for r in rows], 0.4, label="mean")
    ax2.bar(x + 0.2, [r["max_queue_ms"] for r in rows], 0.4, label="max")
    ax2.set_xticks(x, names, rotation=20)
    ax2.set_ylabel("queue time (ms)")
    ax2.set_yscale("log")
    ax2.legend()
    save_figure(fig, path, f"hplajw, constant {ACCESS_MS:g} ms access: queue length per disk and queue time")

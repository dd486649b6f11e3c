"""`placement`: the striping-vs-placement study's tables 1-2 (original placement, best static ("dynamic")
placement, striping at 32 and 64 KB, random) replayed on the bundled hplajw week with a constant access
time, so that only the load balance differs between placements.

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
- sensitivity (the failing claims' reasons): the same week striped (32 and 64 KB) and random over 3, 4, 8 and 14
  disks (3 and 14 at tiny scale; 14: table 2's count) against the 2-disk original (more disks leave the
  original's queues as they are);
- scale: the whole week at both scales (all placements and the sensitivity take about two seconds).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.data import HPLAJW_TRACE
from blockheat.libs.experiments.common import Claim, ExperimentOutput, fmt, markdown_table, new_figure, save_figure
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
)
from blockheat.sim import spec_from_srt_header as from_srt_header

TITLE = "Striping vs placement: load balance on the hplajw week (tables 1-2 of the striping-vs-placement study)"
TRACE = HPLAJW_TRACE
ACCESS_MS = 25.0
STRIPE_BYTES = (32 * 1024, 64 * 1024)
#: Disk counts of the sensitivity run by scale.
SENSITIVITY_DISKS = {"full": (3, 4, 8, 14), "tiny": (3, 14)}

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
    randoms = sorted((simulate(w, n_disks, RandomDisk(), seed=seed + k) for k in range(3)),
                     key=lambda r: r["mean_queue_ms"])
    add("random", f"uniform random disk per request, middle of seeds {seed}..{seed + 2}", randoms[1])
    orig = rows[0]["mean_queue_ms"]
    for r in rows:
        r["pct_orig"] = 100.0 * r["mean_queue_ms"] / orig if orig > 0 else float("nan")
    out.tables["placements"] = pa.Table.from_pylist(rows)
    sens = [more_disks(w, n, orig, seed) for n in SENSITIVITY_DISKS[scale]]
    out.tables["sensitivity"] = pa.Table.from_pylist(sens)
    by = {r["placement"]: r for r in rows}
    _claims(out, by, w, sens)
    _sections(out, rows, w, sens)
    out.plots.append(("queue_lengths.png", lambda p: _plot(p, rows)))
    return out.finish()


def _far_below(s32_pct: float, rnd_pct: float) -> bool:
    return bool(s32_pct <= 50 and rnd_pct <= 50)


def more_disks(w: Workload, n_disks: int, original_ms: float, seed: int) -> dict[str, Any]:
    """The week striped (32 and 64 KB) and random over n_disks: mean queue times, % of the original's, extra
    accesses, busiest over mean disk utilization, and the two failing claims' criteria."""
    row: dict[str, Any] = {"disks": n_disks}
    for nbytes in STRIPE_BYTES:
        r = simulate(w, n_disks, Striped(unit_sectors=nbytes // w.spec.sector_size))
        kb = nbytes // 1024
        row |= {f"striped {kb} KB (ms)": r["mean_queue_ms"], f"striped {kb} KB % orig": 100 * r["mean_queue_ms"]
                / original_ms, f"extra {kb} KB": r["extra_accesses"],
                f"busiest / mean {kb} KB": _busiest(r)}
    rnd = sorted((simulate(w, n_disks, RandomDisk(), seed=seed + k) for k in range(3)),
                 key=lambda r: r["mean_queue_ms"])[1]
    row |= {"random (ms)": rnd["mean_queue_ms"], "random % orig": 100 * rnd["mean_queue_ms"] / original_ms}
    row["both far below"] = _far_below(row["striped 32 KB % orig"], row["random % orig"])
    row["64 KB more imbalance"] = bool(row["striped 64 KB (ms)"] > row["striped 32 KB (ms)"])
    return row


def _busiest(row: dict[str, Any]) -> float:
    return max(row["utilization"]) / float(np.mean(row["utilization"]))


def _from(sens: list[dict[str, Any]], key: str) -> str:
    held = [r["disks"] for r in sens if r[key]]
    return f"holds at {', '.join(map(str, held))} disks" if held else "holds at none"


def _claims(out: ExperimentOutput, by: dict[str, dict[str, Any]], w: Workload, sens: list[dict[str, Any]]) -> None:
    o, s32, s64, rnd = by["original"], by["striped 32 KB"], by["striped 64 KB"], by["random"]
    n_disks = len(w.device_sectors)
    top = 100 * float(np.bincount(w.requests.device).max()) / len(w.requests)
    gap = o["mean_queue_ms"] - rnd["mean_queue_ms"]
    closed = (o["mean_queue_ms"] - s32["mean_queue_ms"]) / gap if gap > 0 else float("nan")
    out.claims.append(Claim(
        "striping close to random",
        "striping (32 KB) closes >= 75 % of the original-to-random gap in mean queue time",
        "table 1: 100 % (15.19 vs 15.20 ms); table 2: 97 % (2.65 vs 1.48 ms, orig 46.3)",
        f"{100 * closed:.0f} % ({fmt(s32['mean_queue_ms'])} vs {fmt(rnd['mean_queue_ms'])} ms, orig "
        f"{fmt(o['mean_queue_ms'])})", bool(closed >= 0.75),
        "" if closed >= 0.75 else "with two disks striping's extra accesses weigh against random's none "
        "(sensitivity table: queue times by disk count)"))
    far = _far_below(s32["pct_orig"], rnd["pct_orig"])
    out.claims.append(Claim(
        "both far below the original",
        "striping (32 KB) and random each <= 50 % of the original mean queue time",
        "table 1: 42 % and 42 %; table 2: 5.7 % and 3.2 %",
        f"{s32['pct_orig']:.1f} % and {rnd['pct_orig']:.1f} %", far,
        "" if far else
        f"the trace has {n_disks} disks with {top:.0f} % of its requests on one, so spreading at best halves that "
        f"disk's load; over more disks (sensitivity) the claim {_from(sens, 'both far below')} ("
        + ", ".join(f"{r['disks']}: {r['striped 32 KB % orig']:.0f} % and {r['random % orig']:.0f} %" for r in sens)
        + ")"))
    out.claims.append(Claim(
        "larger units: fewer extra requests",
        "64 KB units cause fewer extra disk accesses than 32 KB",
        "table 2: 38,512 vs 77,047",
        f"{s64['extra_accesses']:,} vs {s32['extra_accesses']:,}",
        bool(s64["extra_accesses"] < s32["extra_accesses"]),
        "" if s64["extra_accesses"] < s32["extra_accesses"] else "regression: fewer unit crossings must mean "
        "fewer extra accesses"))
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
        + ")"))


def _sections(out: ExperimentOutput, rows: list[dict[str, Any]], w: Workload, sens: list[dict[str, Any]]) -> None:
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
    out.sections += [
        head, "## Ours (the paper's metrics)", markdown_table(ours, cols), detail,
        "## The paper's (tables 1 and 2, other traces and disks: compare the % orig column)",
        markdown_table(paper_rows, ["paper", "placement", "queue time average (ms)", "% orig",
                                    "queue time maximum (ms)", "number of requests"]),
        "## Sensitivity: the same week over more disks (the failing claims' reasons)\n\n"
        "Striped and random placements over n disks; % orig against the traced 2-disk placement.",
        markdown_table(sens, list(sens[0])),
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

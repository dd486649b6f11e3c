"""Validation against real drives: replay a DiskSim validation trace closed loop (one request out, the
recorded idle gap after each completion) or an HP SRT trace open loop, and compare simulated with
measured access times: means and the demerit figure (RMS horizontal distance between the two CDFs)."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from blockheat.sim.array import DiskArray
from blockheat.sim.engine import ClosedLoop, SimConfig, Simulation
from blockheat.sim.records import Requests
from blockheat.sim.spec import DiskSpec
from blockheat.sim.specs import from_srt_header

__all__ = [
    "DeviceComparison",
    "ValidationResult",
    "ValidationTrace",
    "closed_loop_simulation",
    "demerit_ms",
    "disksim_demerit_ms",
    "plot_cdfs",
    "read_validation_trace",
    "validate_closed_loop",
    "validate_srt",
]

logger = logging.getLogger(__name__)

VALIDATE_BLOCK_BYTES = 512


class ValidationTraceError(ValueError):
    """A DiskSim validation trace line is malformed; the message names the line."""


@dataclass(frozen=True, eq=False)
class ValidationTrace:
    """Columns of a DiskSim validate trace: op R/W, cache class, block, size (512-byte blocks), measured
    access time and idle gap after completion (us)."""

    is_read: np.ndarray
    cache_class: np.ndarray
    block: np.ndarray
    blocks: np.ndarray
    access_us: np.ndarray
    idle_us: np.ndarray

    def __len__(self) -> int:
        return len(self.block)


def read_validation_trace(path: str | Path) -> ValidationTrace:
    """Parse `op class block_number size_blocks access_time_us idle_gap_us` lines (blank lines skipped)."""
    ops, classes, block, blocks, access, idle = [], [], [], [], [], []
    with open(path, encoding="ascii", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6 or parts[0] not in ("R", "W"):
                raise ValidationTraceError(f"{path}:{lineno}: expected 'R|W class block size access_us idle_us', "
                                           f"got {line.strip()[:80]!r}")
            try:
                b, n, a, g = int(parts[2]), int(parts[3]), float(parts[4]), float(parts[5])
            except ValueError:
                raise ValidationTraceError(f"{path}:{lineno}: bad number in {line.strip()[:80]!r}") from None
            if b < 0 or n <= 0 or a < 0 or g < 0:
                raise ValidationTraceError(f"{path}:{lineno}: negative block/time or non-positive size in "
                                           f"{line.strip()[:80]!r}")
            ops.append(parts[0] == "R")
            classes.append(parts[1])
            block.append(b)
            blocks.append(n)
            access.append(a)
            idle.append(g)
    if not block:
        raise ValidationTraceError(f"{path}: no requests")
    return ValidationTrace(np.array(ops), np.array(classes), np.array(block, dtype=np.int64),
                           np.array(blocks, dtype=np.int64), np.array(access), np.array(idle))


def _samples(measured_us: np.ndarray, simulated_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two samples a demerit compares, as float64; both must be non-empty."""
    a = np.asarray(measured_us, dtype=np.float64)
    b = np.asarray(simulated_us, dtype=np.float64)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("demerit needs two non-empty samples")
    return a, b


def demerit_ms(measured_us: np.ndarray, simulated_us: np.ndarray) -> float:
    """Root-mean-square horizontal distance (ms) between the two empirical CDFs.

    Equal sample sizes: the RMS of the differences of the sorted values. Otherwise both quantile
    functions are compared at the midpoints of max(n1, n2) equal probability steps.
    """
    a, b = (np.sort(x) for x in _samples(measured_us, simulated_us))
    if len(a) != len(b):
        m = max(len(a), len(b))
        p = (np.arange(m) + 0.5) / m
        a = np.quantile(a, p, method="inverted_cdf")
        b = np.quantile(b, p, method="inverted_cdf")
    return float(np.sqrt(np.mean((a - b) ** 2)) / 1000.0)


#: DiskSim 4.0's access-time distribution (its statdefs: 1,750 buckets, scale 1000, "Start 0 step 1 grow 1"): bucket
#: starts in us, from 0 in 1 us steps, each step growing by 1 % of the start (integer arithmetic, as DiskSim's).
DISKSIM_BUCKETS = 1750
#: DiskSim's `rms` tool compares the two CDFs at this many equal probability steps.
DISKSIM_RMS_STEPS = 10_000


def _disksim_bucket_starts() -> np.ndarray:
    starts = np.empty(DISKSIM_BUCKETS, dtype=np.int64)
    value = 0
    for i in range(DISKSIM_BUCKETS):
        starts[i] = value
        value += 1 + value // 100
    return starts


_DISKSIM_STARTS = _disksim_bucket_starts()


def _disksim_cdf(values_us: np.ndarray) -> np.ndarray:
    """Cumulative fraction at each bucket start as DiskSim prints it: bucket i counts the samples whose whole
    microseconds lie in [start[i-1], start[i]) (the last bucket everything above); fractions rounded to six
    decimals, as DiskSim prints them and its `rms` tool reads them."""
    idx = np.minimum(np.searchsorted(_DISKSIM_STARTS, np.floor(values_us), side="right"), DISKSIM_BUCKETS - 1)
    return np.round(np.cumsum(np.bincount(idx, minlength=DISKSIM_BUCKETS)) / len(values_us), 6)


def disksim_demerit_ms(measured_us: np.ndarray, simulated_us: np.ndarray) -> float:
    """The demerit as DiskSim 4.0's `rms` tool computes it, the measure of DiskSim's published validation figures:
    both samples in DiskSim's access-time distribution, each CDF's quantile linearly interpolated between bucket
    starts at 10,000 equal probability steps, the RMS of the distances (ms). Coarser than `demerit_ms`: buckets
    grow to 1 % of their start (0.15 ms at 15 ms)."""
    a, b = _samples(measured_us, simulated_us)
    x = _DISKSIM_STARTS / 1000.0
    # the tool's probability points: 0.0001 added up in double precision while at most 1.0
    steps = np.cumsum(np.full(DISKSIM_RMS_STEPS + 1, 1.0 / DISKSIM_RMS_STEPS))
    steps = steps[steps <= 1.0]

    def quantiles(y: np.ndarray) -> np.ndarray:
        i = np.searchsorted(y, steps, side="left")
        return x[i - 1] + (steps - y[i - 1]) / (y[i] - y[i - 1]) * (x[i] - x[i - 1])

    d = quantiles(_disksim_cdf(a)) - quantiles(_disksim_cdf(b))
    return float(np.sqrt(np.mean(d * d)))


@dataclass(frozen=True, eq=False)
class ValidationResult:
    """Measured and simulated access times (us) of one replay, with the summary figures (per operation too when
    `is_read` says which requests are reads)."""

    label: str
    measured_us: np.ndarray
    simulated_us: np.ndarray
    is_read: np.ndarray | None = None

    @property
    def requests(self) -> int:
        return len(self.measured_us)

    @property
    def measured_mean_ms(self) -> float:
        return float(np.mean(self.measured_us) / 1000.0)

    @property
    def simulated_mean_ms(self) -> float:
        return float(np.mean(self.simulated_us) / 1000.0)

    @property
    def demerit_ms(self) -> float:
        return demerit_ms(self.measured_us, self.simulated_us)

    @property
    def disksim_demerit_ms(self) -> float:
        return disksim_demerit_ms(self.measured_us, self.simulated_us)

    def summary(self) -> dict[str, float | int]:
        return {"requests": self.requests, "measured_mean_ms": round(self.measured_mean_ms, 4),
                "simulated_mean_ms": round(self.simulated_mean_ms, 4), "demerit_ms": round(self.demerit_ms, 4),
                "disksim_demerit_ms": round(self.disksim_demerit_ms, 4)}

    def by_operation(self) -> dict[str, ValidationResult]:
        """The reads' and the writes' own results ("read", "write"; an operation with no request is left out)."""
        if self.is_read is None:
            raise ValueError(f"{self.label}: the replay did not record which requests are reads")
        parts = {}
        for op, mask in (("read", self.is_read), ("write", ~self.is_read)):
            if mask.any():
                parts[op] = ValidationResult(f"{self.label} {op}s", self.measured_us[mask], self.simulated_us[mask])
        return parts

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per operation ("all", then "read" and "write"), for a table."""
        parts = {"all": self, **self.by_operation()} if self.is_read is not None else {"all": self}
        return [{"op": op, **r.summary()} for op, r in parts.items()]


def closed_loop_simulation(spec: DiskSpec, trace: ValidationTrace, *, copies: int = 1, seed: int = 0) -> Simulation:
    """The validation replay, not yet run: the trace (`copies` times end to end) on one disk of `spec`, closed loop
    with one request outstanding: request k+1 is issued idle_us[k] after request k completes (the format's rule).
    The trace's 512-byte blocks become the spec's sectors (a request covers every sector its bytes touch)."""
    byte = trace.block * VALIDATE_BLOCK_BYTES
    lbn = byte // spec.sector_size
    sectors = -(-(byte + trace.blocks * VALIDATE_BLOCK_BYTES) // spec.sector_size) - lbn
    n = len(trace) * copies
    req = Requests.build(np.zeros(n), np.zeros(n), np.tile(lbn, copies), np.tile(sectors, copies),
                         np.tile(trace.is_read, copies), think_us=np.tile(trace.idle_us, copies))
    return Simulation(spec, DiskArray(1), req, SimConfig(closed_loop=ClosedLoop(outstanding=1)),
                      rng=np.random.default_rng(seed), device_sectors=[spec.capacity_sectors])


def validate_closed_loop(spec: DiskSpec, trace: ValidationTrace, *, seed: int = 0) -> ValidationResult:
    """Replay closed loop with one request outstanding (closed_loop_simulation); each simulated access time is that
    request's response time."""
    sim = closed_loop_simulation(spec, trace, seed=seed)
    status = sim.run()
    if not status.finished:
        raise RuntimeError(f"closed-loop replay stopped early at {status.now_us} us")
    return ValidationResult(spec.name, trace.access_us, sim.out.resp.astype(np.float64),
                            np.asarray(trace.is_read, dtype=bool))


@dataclass(frozen=True, eq=False)
class DeviceComparison:
    """Per device of an SRT trace: the trace's own access times (stop - start) against the simulated
    device busy time per request."""

    device: int
    result: ValidationResult
    spec_name: str


def validate_srt(header: Any, cols: Mapping[str, np.ndarray], *, spec: DiskSpec | None = None,
                 scheduler: str = "clook", seed: int = 0) -> list[DeviceComparison]:
    """Replay an HP SRT trace open loop (arrival = enqueue time), each device on its own disk built from
    the header (or `spec`), and compare access times per device.

    header, cols: the parsed header and decoded record columns (libs.readers.srt.read_srt's first two).

        header, cols, _, _ = read_srt("ajw.1week.srt")
        comparisons = validate_srt(header, cols)
    """

    out = []
    for device in sorted(int(d) for d in np.unique(cols["disk"])):
        m = cols["disk"] == device
        dspec = spec if spec is not None else from_srt_header(header, device)
        ts = (cols["enqueue_s"][m] * 1_000_000 + cols["enqueue_us"][m]).astype(np.float64)
        order = np.argsort(ts, kind="stable")
        size = cols["size_bytes"][m][order]
        byte = cols["sector"][m][order] * header.disks[device].sector_size
        lbn = byte // dspec.sector_size
        sectors = -(-(byte + size) // dspec.sector_size) - lbn
        is_read = (cols["ioflags"][m][order] & 1) == 1
        req = Requests.build(ts[order], np.zeros(len(ts)), lbn, sectors, is_read)
        sim = Simulation(dspec, DiskArray(1, scheduler=scheduler), req, SimConfig(per_request=True),
                         rng=np.random.default_rng(seed), device_sectors=[dspec.capacity_sectors])
        sim.run()
        measured = (cols["stop_us"][m] - cols["start_us"][m])[order].astype(np.float64)
        simulated = sim.out.out_service.astype(np.float64)
        out.append(DeviceComparison(device, ValidationResult(f"device {device}", measured, simulated, is_read),
                                    dspec.name))
    return out


def plot_cdfs(results: list[ValidationResult], path: str | Path, *, title: str) -> Path:
    """Draw measured and simulated access-time CDFs (one panel per result) into a PNG file."""
    # lazy: matplotlib only where a figure is drawn; `blockheat sim validate` starts without it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.2), squeeze=False)
    for ax, r in zip(axes[0], results, strict=True):
        for data, label, style in ((r.measured_us, "measured", "-"), (r.simulated_us, "simulated", "--")):
            x = np.sort(data) / 1000.0
            ax.step(x, np.arange(1, len(x) + 1) / len(x), style, where="post",
                    label=f"{label} (mean {np.mean(x):.2f} ms)")
        ax.set_xlabel("access time (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_title(f"{r.label}: demerit {r.demerit_ms:.3f} ms")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    logger.info("CDF plot written to %s", out)
    return out

"""Striping-unit advisor: FIVE's two-phase choice of the degree of parallelism (Scheuermann, Weikum and
Zabback, sections 2.1-2.3, equations 1-25 and Figure 2), the published rules it is compared with (FIVE's
equation 1 = Lee and Katz's rule; Chen and Patterson's MPL-slope rule as the SSA study quotes it), and the
simulator's exhaustive best (Gbest) with each method's distance from it. Pure numpy; no Spark.

    model = DiskModel.from_spec(load("five_table1"))
    recs = advise(model, n_disks=32, workload=Workload(mean_request_blocks=260, mean_file_blocks=260,
                                                       rate_per_s=140.0))

Units: times in ms, sizes in the spec's blocks (sectors), rates in requests per second.
Choices where the paper leaves details open (each tested in tests/libs/plans/test_striping_advisor.py):
- e and f of equation 8 are a least-squares line through the spec's seek curve over the distances
  equation 7 can produce, [C(1 - a), C - 1] ("the expected value of the seek distance lies in the linear
  part"); E[D_seek] of equation 7 is capped at C - 1 (it passes C beyond P = 133);
- the controller overhead of a read miss (0 for FIVE's disk) is added to every (sub-)request's service time;
- Phase A searches P = 1 .. floor(R) without the bound D: Figure 2's step 1 has none, and FIVE's Gopt
  of 8 KB for R = 260 KB on 32 disks implies P >= 33; Phase B searches P-bar = 1 .. min(D, floor(R-bar));
- the single-disk seek distance of Phase B has P(0) = 1/C and P(z) = 2(C - z)/C^2 for z >= 1 (equation 4
  taken at z = 0 would make the probabilities sum to (C + 1)/C);
- equation 25's "log" is the natural logarithm (the expected maximum of P normal variables);
- a file's P_eff = min(P_opt,i, P-bar R_i / R-bar) is kept real and floored at 1;
- a rule's striping unit is rounded up to whole blocks (at least 1); MPL <= 1 gives the smallest unit;
- a unit's degree of parallelism for a request of R blocks is R/SU (aligned, rounded up) or the expected
  runs touched by a randomly placed request, 1 + (R - 1)/SU, capped at D; predictions use it.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from blockheat.sim import DiskSpec, Requests, SimConfig

__all__ = [
    "A_SEEK",
    "B_SEEK",
    "DiskModel",
    "DiskQueue",
    "FileStats",
    "PhaseA",
    "PhaseB",
    "Recommendation",
    "Workload",
    "advise",
    "default_sweep",
    "effective_parallelism",
    "eq1_unit",
    "estimate_mpl",
    "exact_max_seek_distance",
    "expected_max_rotation_ms",
    "expected_max_seek_distance",
    "expected_service_ms",
    "expected_transfer_ms",
    "fit_seek_line",
    "fork_join_response_ms",
    "mg1_response",
    "mpl_slope_unit",
    "parallelism_of_unit",
    "phase_a",
    "phase_b",
    "predicted_response_ms",
    "recommendation_rows",
    "response_at",
    "seek_distribution",
    "service_derivative",
    "simulated_response",
    "striping_unit",
    "striping_width",
    "subrequest_moments",
    "with_gbest",
]

#: Constants of equation 7, E[D_seek] = C (1 - a - b ln P).
A_SEEK = 0.577
B_SEEK = -0.118
#: Chen and Patterson's MPL-slope coefficient for a 16-disk array (as the SSA study quotes it).
MPL_SLOPE = 0.25

METHODS = ("five", "five_phase_a", "eq1", "mpl_slope")


# -------------------------------------------------------------------------------------------------
# The disk, as FIVE's formulas see it.

@dataclass(frozen=True, eq=False)
class DiskModel:
    """What equations 4-25 need from a disk spec. Times in ms, sizes in the spec's blocks.

    seek_ms_by_distance[d] is the spec's seek time for a distance of d cylinders (0 for d = 0).
    """

    cylinders: int                 # C
    rotation_ms: float             # ROT
    blocks_per_track: float        # B
    tracks_per_cylinder: int       # T
    head_switch_ms: float          # t_hs
    cylinder_switch_ms: float      # t_cs: a seek of distance 1
    seek_e_ms: float               # e of equation 8 (ms per cylinder)
    seek_f_ms: float               # f of equation 8
    mean_seek_ms: float            # the spec's average seek (L of the rules is this + ROT / 2)
    overhead_ms: float             # controller overhead per (sub-)request
    block_bytes: int
    seek_ms_by_distance: np.ndarray

    def __post_init__(self) -> None:
        if self.cylinders < 2 or self.rotation_ms <= 0 or self.blocks_per_track <= 0 or self.tracks_per_cylinder <= 0:
            raise ValueError(f"disk model needs >= 2 cylinders and positive rotation, blocks per track and tracks "
                             f"per cylinder, got {self.cylinders}, {self.rotation_ms}, {self.blocks_per_track}, "
                             f"{self.tracks_per_cylinder}")
        if len(self.seek_ms_by_distance) != self.cylinders:
            raise ValueError(f"seek_ms_by_distance needs {self.cylinders} values, got {len(self.seek_ms_by_distance)}")

    @classmethod
    def from_spec(cls, spec: DiskSpec) -> DiskModel:
        """C, ROT, T and the seek curve from the spec; B is the mean sectors per track over all tracks
        (zoned disks); e and f fitted to the curve (fit_seek_line)."""
        tracks = sum(z.cylinders * spec.surfaces - z.spare_tracks for z in spec.zones)
        seek = spec.seek.time_ms(np.arange(spec.cylinders))
        e, f = fit_seek_line(seek)
        return cls(cylinders=spec.cylinders, rotation_ms=spec.rotation_ms,
                   blocks_per_track=spec.capacity_sectors / tracks, tracks_per_cylinder=spec.surfaces,
                   head_switch_ms=spec.head_switch_ms, cylinder_switch_ms=float(seek[1]), seek_e_ms=e, seek_f_ms=f,
                   mean_seek_ms=spec.mean_seek_ms(), overhead_ms=spec.overhead.read_miss_ms,
                   block_bytes=spec.sector_size, seek_ms_by_distance=seek)

    @property
    def latency_ms(self) -> float:
        """Mean positioning time: average seek plus half a rotation (L of equation 1)."""
        return self.mean_seek_ms + self.rotation_ms / 2.0

    @property
    def transfer_blocks_per_ms(self) -> float:
        """Media rate B / ROT (X of equation 1), head and cylinder switches left out."""
        return self.blocks_per_track / self.rotation_ms


def fit_seek_line(seek_ms_by_distance: np.ndarray) -> tuple[float, float]:
    """(e, f) of equation 8: least squares over distances [ceil(C (1 - a)), C - 1] of the seek curve."""
    c = len(seek_ms_by_distance)
    lo = min(math.ceil(c * (1.0 - A_SEEK)), c - 2)
    d = np.arange(lo, c, dtype=np.float64)
    e, f = np.polyfit(d, np.asarray(seek_ms_by_distance, dtype=np.float64)[lo:], 1)
    return float(e), float(f)


# -------------------------------------------------------------------------------------------------
# Phase A: expected service time of a request of R blocks over P disks (equations 6-17).

def exact_max_seek_distance(cylinders: int, p: int) -> float:
    """Equation 6: E[max of P seek distances] = C (1 - prod_{i=1..P} 2i / (2i + 1))."""
    i = np.arange(1, p + 1, dtype=np.float64)
    return float(cylinders * (1.0 - np.prod(2.0 * i / (2.0 * i + 1.0))))


def expected_max_seek_distance(cylinders: int, p: float) -> float:
    """Equation 7: E[D_seek] = C (1 - a - b ln P), capped at C - 1."""
    return min(cylinders * (1.0 - A_SEEK - B_SEEK * math.log(p)), cylinders - 1.0)


def expected_max_rotation_ms(rotation_ms: float, p: float) -> float:
    """Equation 11: E[T_rot] = P / (P + 1) ROT."""
    return p / (p + 1.0) * rotation_ms


def expected_transfer_ms(m: DiskModel, r: float, p: float) -> float:
    """Equation 15: transfer of R/P blocks with (R/P - 1)/B head and (R/P - 1)/(TB) cylinder switches."""
    per_disk = r / p
    b, tb = m.blocks_per_track, m.blocks_per_track * m.tracks_per_cylinder
    return ((per_disk - 1.0) / b - (per_disk - 1.0) / tb) * m.head_switch_ms + (per_disk - 1.0) / tb * \
        m.cylinder_switch_ms + per_disk / b * m.rotation_ms


def expected_service_ms(m: DiskModel, r: float, p: float) -> float:
    """Equation 16: E[T_serv(R, P)] = e E[D_seek] + f + P/(P+1) ROT + E[t_trans(R, P)] (+ overhead)."""
    seek = m.seek_e_ms * expected_max_seek_distance(m.cylinders, p) + m.seek_f_ms
    return m.overhead_ms + seek + expected_max_rotation_ms(m.rotation_ms, p) + expected_transfer_ms(m, r, p)


def service_derivative(m: DiskModel, r: float, p: float) -> float:
    """Equation 17: dE[T_serv(R, P)]/dP (where equation 7 is not capped)."""
    b, tb, rot = m.blocks_per_track, m.blocks_per_track * m.tracks_per_cylinder, m.rotation_ms
    return (rot / (p + 1.0) - m.seek_e_ms * m.cylinders * B_SEEK / p - p * rot / (p + 1.0) ** 2
            + (r / (p * p * tb) - r / (p * p * b)) * m.head_switch_ms - r / (p * p * tb) * m.cylinder_switch_ms
            - r * rot / (p * p * b))


@dataclass(frozen=True)
class PhaseA:
    """The optimal integer P for requests of R blocks and E[T_serv] for every P searched (index P - 1)."""

    p_opt: int
    service_ms: tuple[float, ...]


def phase_a(m: DiskModel, r: float, *, p_max: int | None = None) -> PhaseA:
    """Minimize equation 16 over P = 1 .. p_max (default floor(R): at least one block per disk)."""
    if not r >= 1:
        raise ValueError(f"request size must be >= 1 block, got {r}")
    top = max(1, math.floor(r)) if p_max is None else p_max
    curve = tuple(expected_service_ms(m, r, p) for p in range(1, top + 1))
    return PhaseA(int(np.argmin(curve)) + 1, curve)


# -------------------------------------------------------------------------------------------------
# Phase B: M/G/1 per disk and the fork-join approximation (equations 18-25).

def seek_distribution(m: DiskModel) -> tuple[np.ndarray, np.ndarray]:
    """(seek times ms, probabilities) of one disk's seek between two independent uniform cylinders."""
    c = m.cylinders
    z = np.arange(c, dtype=np.float64)
    prob = np.where(z == 0, 1.0 / c, 2.0 * (c - z) / (c * c))
    return m.seek_ms_by_distance, prob


def subrequest_moments(m: DiskModel, s: float) -> tuple[float, float, float]:
    """E[t], E[t^2], E[t^3] of a sub-request of S blocks: seek (the spec's curve over the distance
    distribution) + rotation (uniform over [0, ROT], equation 9 with P = 1) + transfer (constant,
    equation 15 with P = 1) + overhead. The density of the sum is the convolution of the seek's point
    masses with the uniform rotation (a mixture of boxes [s_z + c, s_z + c + ROT)), integrated exactly."""
    times, prob = seek_distribution(m)
    lo = times + expected_transfer_ms(m, s, 1.0) + m.overhead_ms
    hi = lo + m.rotation_ms
    return tuple(float(np.sum(prob * (hi ** (k + 1) - lo ** (k + 1))) / ((k + 1) * m.rotation_ms))
                 for k in (1, 2, 3))  # type: ignore[return-value]


@dataclass(frozen=True)
class DiskQueue:
    """One disk as an M/G/1 queue: utilization (eq 20), c^2 (eq 22), response mean (eq 21) and variance (eq 23)."""

    rho: float
    cv2: float
    mean_ms: float
    var_ms2: float


def mg1_response(moments: tuple[float, float, float], arrivals_per_ms: float) -> DiskQueue:
    """Equations 20-23 for service-time moments (ms, ms^2, ms^3) and an arrival rate per ms; an
    unstable queue (rho >= 1) has infinite mean and variance."""
    m1, m2, m3 = moments
    var = m2 - m1 * m1
    cv2 = var / (m1 * m1)
    rho = arrivals_per_ms * m1
    if rho >= 1.0:
        return DiskQueue(rho, cv2, math.inf, math.inf)
    mean = m1 + rho * m1 * (1.0 + cv2) / (2.0 * (1.0 - rho))
    var_r = var + arrivals_per_ms * m3 / (3.0 * (1.0 - rho)) + arrivals_per_ms ** 2 * m2 ** 2 / (4.0 * (1.0 - rho) ** 2)
    return DiskQueue(rho, cv2, mean, var_r)


def fork_join_response_ms(mean_ms: float, var_ms2: float, p: float) -> float:
    """Equation 25: the slowest of P sub-requests, each with response mean and variance as given."""
    if math.isinf(mean_ms):
        return math.inf
    sd = math.sqrt(var_ms2)
    if p <= 3:
        return mean_ms + sd * (p - 1.0) / math.sqrt(2.0 * p - 1.0)
    return mean_ms + sd * math.sqrt(2.0 * math.log(p))


def response_at(m: DiskModel, r: float, rate_per_s: float, n_disks: int, p: float) -> tuple[DiskQueue, float]:
    """Equations 18-25 at degree of parallelism P: the disk's queue and E[T_resp(R, P)]."""
    lam_i = rate_per_s * p / n_disks / 1000.0            # eq 18, per ms
    q = mg1_response(subrequest_moments(m, r / p), lam_i)  # eq 19: S = R / P
    return q, fork_join_response_ms(q.mean_ms, q.var_ms2, p)


@dataclass(frozen=True)
class PhaseB:
    """P-bar (None when no P sustains the rate) and, per P searched (index P - 1), rho and E[T_resp]."""

    p_bar: int | None
    rho: tuple[float, ...]
    response_ms: tuple[float, ...]


def phase_b(m: DiskModel, r: float, rate_per_s: float, n_disks: int) -> PhaseB:
    """Minimize equation 25 over P-bar = 1 .. min(D, floor(R-bar)) among the P with rho < 1 (eq 20)."""
    if not r >= 1 or not rate_per_s > 0 or n_disks <= 0:
        raise ValueError(f"phase B needs R >= 1 block, a positive rate and disks, got {r}, {rate_per_s}, {n_disks}")
    top = min(n_disks, max(1, math.floor(r)))
    rows = [response_at(m, r, rate_per_s, n_disks, p) for p in range(1, top + 1)]
    resp = tuple(t for _, t in rows)
    best = int(np.argmin(resp)) + 1
    return PhaseB(best if math.isfinite(resp[best - 1]) else None, tuple(q.rho for q, _ in rows), resp)


# -------------------------------------------------------------------------------------------------
# Section 2.3: effective parallelism, striping unit and width (Figure 2, steps 3 and 4).

def effective_parallelism(p_opt: int, p_bar: int | None, *, r_file: float | None = None,
                          r_mean: float | None = None) -> float:
    """Step 3: min(P_opt, P-bar) globally, min(P_opt,i, P-bar R_i / R-bar) for a file; P_opt alone
    without Phase B. Floored at 1."""
    if p_bar is None:
        return float(p_opt)
    scaled = float(p_bar) if r_file is None or r_mean is None else p_bar * r_file / r_mean
    return max(1.0, min(float(p_opt), scaled))


def striping_unit(r: float, file_blocks: float, p_eff: float, *, aligned: bool | None = None) -> int:
    """Step 4 (blocks): ceil((R - 1)/(P - 1)) when requests may start inside a run, ceil(R / P) when they
    start at run boundaries; the file size when P = 1. aligned=None applies Figure 2's test: unaligned
    exactly when 1 < R < L."""
    if p_eff <= 1.0:
        return max(1, math.ceil(file_blocks))
    unaligned = (1 < r < file_blocks) if aligned is None else not aligned
    return max(1, math.ceil((r - 1.0) / (p_eff - 1.0) if unaligned else r / p_eff))


def striping_width(file_blocks: float, unit: int, n_disks: int) -> int:
    """Step 4: SW = min(D, ceil(L / SU))."""
    return max(1, min(n_disks, math.ceil(file_blocks / unit)))


# -------------------------------------------------------------------------------------------------
# The rules FIVE and the SSA study compare with.

def eq1_unit(latency_ms: float, rate_blocks_per_ms: float, mpl: float, r: float, n_disks: int) -> float:
    """FIVE's equation 1 (Chen et al. [12, 48]), the formula the SSA study gives as Lee and Katz's:
    SU = sqrt(L X (M - 1) R / D), in the unit of R."""
    return math.sqrt(latency_ms * rate_blocks_per_ms * max(mpl - 1.0, 0.0) * r / n_disks)


def mpl_slope_unit(latency_ms: float, rate_blocks_per_ms: float, mpl: float, *, slope: float = MPL_SLOPE,
                   sector: float = 1.0) -> float:
    """Chen and Patterson's rule as the SSA study quotes it: S L X (M - 1) + one sector, in blocks."""
    return slope * latency_ms * rate_blocks_per_ms * max(mpl - 1.0, 0.0) + sector


def parallelism_of_unit(r: float, unit: float, n_disks: int, *, aligned: bool) -> float:
    """Disks a request of R blocks touches with striping unit SU: ceil(R / SU) when requests start at run
    boundaries, else the expected runs of a randomly placed request 1 + (R - 1)/SU; at most D."""
    runs = math.ceil(r / unit) if aligned else 1.0 + (r - 1.0) / unit
    return float(min(n_disks, max(1.0, runs)))


def predicted_response_ms(m: DiskModel, r: float, rate_per_s: float | None, n_disks: int, p: float) -> float:
    """Equation 25 at P under the arrival rate (infinite when a disk saturates); equation 16 without one."""
    if rate_per_s is None or rate_per_s <= 0:
        return expected_service_ms(m, r, p)
    return response_at(m, r, rate_per_s, n_disks, p)[1]


# -------------------------------------------------------------------------------------------------
# The advisor.

@dataclass(frozen=True)
class Workload:
    """The global inputs: mean request size R-bar and file size L-bar (blocks), arrival rate lambda-bar
    (None: Phase A only), multiprogramming level for the rules (None: estimated, see estimate_mpl) and
    request alignment (None: Figure 2's test)."""

    mean_request_blocks: float
    mean_file_blocks: float
    rate_per_s: float | None = None
    mpl: float | None = None
    aligned: bool | None = None

    def __post_init__(self) -> None:
        if not self.mean_request_blocks >= 1 or not self.mean_file_blocks >= 1:
            raise ValueError(f"R-bar and L-bar must be at least one block, got {self.mean_request_blocks} and "
                             f"{self.mean_file_blocks}")
        if self.rate_per_s is not None and not self.rate_per_s >= 0:
            raise ValueError(f"rate_per_s must be >= 0, got {self.rate_per_s}")


@dataclass(frozen=True)
class FileStats:
    """One file (a traced device or an address region): its mean request size and size in blocks."""

    name: str
    mean_request_blocks: float
    file_blocks: float


@dataclass(frozen=True)
class Recommendation:
    """One method's answer for the whole array (file "*") or one file."""

    scope: str                      # "global" or the file kind ("device", "region")
    file: str
    method: str
    mean_request_blocks: float
    file_blocks: float
    parallelism: float              # the P the unit was derived from, or the unit's P for the rules
    phase_a_p: int | None
    phase_b_p: int | None
    striping_unit_blocks: int
    width: int
    aligned: bool
    predicted_response_ms: float | None
    prediction: str                 # "eq25", "eq16" or "" (none)
    simulated_response_ms: float | None = None
    gbest_unit_blocks: int | None = None
    distance_from_gbest: float | None = None


def estimate_mpl(m: DiskModel, w: Workload) -> float:
    """Little's law with the unstriped service time: M = max(1, lambda-bar E[T_serv(R-bar, 1)]), the
    requests in service at once when each occupies one disk for its service time (1 without a rate)."""
    if not w.rate_per_s:
        return 1.0
    return max(1.0, w.rate_per_s / 1000.0 * expected_service_ms(m, w.mean_request_blocks, 1.0))


def _is_aligned(w: Workload, r: float, file_blocks: float) -> bool:
    return (not 1 < r < file_blocks) if w.aligned is None else w.aligned


def advise(m: DiskModel, *, n_disks: int, workload: Workload, files: Sequence[FileStats] = (),
           file_scope: str = "device", simulate: Callable[[int], float] | None = None,
           sweep_units: Iterable[int] | None = None) -> list[Recommendation]:
    """Every method's striping unit, width and predicted response, globally and per file.

    Global rows: five (P_eff = min(P_opt, P-bar)), five_phase_a (P_opt alone, the light-load "Opt"),
    eq1, mpl_slope, and with `simulate` (unit in blocks -> simulated mean response in ms, inf when
    saturated) gbest: the best of a sweep (sweep_units, default default_sweep, plus every method's unit),
    each global row then carrying its simulated response and its distance from Gbest (response / Gbest's
    - 1). File rows: five and five_phase_a with the file's R_i and L_i (predicted by equation 16, the
    request alone; the queueing model is global), and five_global: the global unit with the file's width.
    """
    if n_disks <= 0:
        raise ValueError(f"n_disks must be > 0, got {n_disks}")
    r, big_l, lam = workload.mean_request_blocks, workload.mean_file_blocks, workload.rate_per_s
    a = phase_a(m, r)
    b = phase_b(m, r, lam, n_disks) if lam else None
    p_bar = b.p_bar if b is not None else None
    if b is not None and p_bar is None:
        # No degree of parallelism sustains the rate: Figure 2 has no answer; fall back to P = 1 (the
        # least device-busy time per request) and let the prediction say infinity.
        p_bar = 1
    aligned = _is_aligned(workload, r, big_l)
    prediction = "eq25" if lam else "eq16"
    out: list[Recommendation] = []

    def unit_row(method: str, unit: int, p_from: float | None, pa: int | None, pb: int | None) -> Recommendation:
        p_unit = parallelism_of_unit(r, unit, n_disks, aligned=aligned)
        return Recommendation("global", "*", method, r, big_l, p_from if p_from is not None else p_unit, pa, pb,
                              unit, striping_width(big_l, unit, n_disks), aligned,
                              predicted_response_ms(m, r, lam, n_disks, p_unit), prediction)

    p_eff = effective_parallelism(a.p_opt, p_bar)
    su = striping_unit(r, big_l, p_eff, aligned=workload.aligned)
    out.append(unit_row("five", su, p_eff, a.p_opt, p_bar))
    out.append(unit_row("five_phase_a", striping_unit(r, big_l, a.p_opt, aligned=workload.aligned),
                        float(a.p_opt), a.p_opt, None))
    mpl = workload.mpl if workload.mpl is not None else estimate_mpl(m, workload)
    x = m.transfer_blocks_per_ms
    out.append(unit_row("eq1", max(1, math.ceil(eq1_unit(m.latency_ms, x, mpl, r, n_disks))), None, None, None))
    out.append(unit_row("mpl_slope", max(1, math.ceil(mpl_slope_unit(m.latency_ms, x, mpl))), None, None, None))

    for f in files:
        fa = phase_a(m, f.mean_request_blocks)
        f_aligned = _is_aligned(workload, f.mean_request_blocks, f.file_blocks)
        for method, p in (("five", effective_parallelism(fa.p_opt, p_bar, r_file=f.mean_request_blocks, r_mean=r)),
                          ("five_phase_a", float(fa.p_opt))):
            unit = striping_unit(f.mean_request_blocks, f.file_blocks, p, aligned=workload.aligned)
            p_unit = parallelism_of_unit(f.mean_request_blocks, unit, n_disks, aligned=f_aligned)
            out.append(Recommendation(file_scope, f.name, method, f.mean_request_blocks, f.file_blocks, p, fa.p_opt,
                                      p_bar if method == "five" else None, unit,
                                      striping_width(f.file_blocks, unit, n_disks), f_aligned,
                                      expected_service_ms(m, f.mean_request_blocks, p_unit), "eq16"))
        p_unit = parallelism_of_unit(f.mean_request_blocks, su, n_disks, aligned=f_aligned)
        out.append(Recommendation(file_scope, f.name, "five_global", f.mean_request_blocks, f.file_blocks, p_unit,
                                  a.p_opt, p_bar, su, striping_width(f.file_blocks, su, n_disks), f_aligned,
                                  expected_service_ms(m, f.mean_request_blocks, p_unit), "eq16"))

    if simulate is not None:
        out = with_gbest(out, m, simulate, sweep_units, n_disks=n_disks, workload=workload)
    return out


def default_sweep(m: DiskModel) -> list[int]:
    """Powers of two up to a cylinder, plus a track and a cylinder (FIVE's Track and Cyl), in blocks."""
    track = round(m.blocks_per_track)
    cylinder = track * m.tracks_per_cylinder
    units = {1 << i for i in range(cylinder.bit_length()) if 1 << i <= cylinder}
    return sorted(units | {track, cylinder})


def with_gbest(recs: Sequence[Recommendation], m: DiskModel, simulate: Callable[[int], float],
               sweep_units: Iterable[int] | None, *, n_disks: int, workload: Workload) -> list[Recommendation]:
    """Simulate every unit of the sweep and every global method's unit; add the gbest row and, on each
    global row, its simulated response and distance from Gbest."""
    glob = [x for x in recs if x.scope == "global"]
    units = sorted(set(sweep_units if sweep_units is not None else default_sweep(m))
                   | {x.striping_unit_blocks for x in glob})
    if not units or min(units) <= 0:
        raise ValueError(f"sweep units must be positive block counts, got {units}")
    simulated = {u: float(simulate(u)) for u in units}
    best = min(units, key=lambda u: (simulated[u], u))
    best_ms = simulated[best]

    def distance(ms: float) -> float | None:
        if math.isinf(best_ms):
            return None
        return ms / best_ms - 1.0 if best_ms > 0 else None

    r, big_l = workload.mean_request_blocks, workload.mean_file_blocks
    aligned = _is_aligned(workload, r, big_l)
    p_best = parallelism_of_unit(r, best, n_disks, aligned=aligned)
    gbest = Recommendation("global", "*", "gbest", r, big_l, p_best, None, None, best,
                           striping_width(big_l, best, n_disks), aligned,
                           predicted_response_ms(m, r, workload.rate_per_s, n_disks, p_best),
                           "eq25" if workload.rate_per_s else "eq16")
    out = []
    for x in [*recs, gbest]:
        if x.scope == "global":
            ms = simulated[x.striping_unit_blocks]
            x = replace(x, simulated_response_ms=ms, gbest_unit_blocks=best, distance_from_gbest=distance(ms))
        out.append(x)
    return out


def simulated_response(spec: DiskSpec, requests: Requests, *, n_disks: int, config: SimConfig | None = None,
                       seed: int = 1, device_sectors: Sequence[int] | None = None) -> Callable[[int], float]:
    """A `simulate` for advise: the mean response (ms, inf when saturated) of the workload striped over
    n_disks with a given unit (blocks), each run from the same seed."""
    # lazy: numba; the blockheat command loads this module at start (through libs.plans.policies)
    from blockheat.sim import DiskArray, SimConfig, Simulation, Striped

    cfg = config if config is not None else SimConfig()

    def run(unit: int) -> float:
        sim = Simulation(spec, DiskArray(n_disks, Striped(unit_sectors=unit)), requests, cfg,
                         rng=np.random.default_rng(seed), device_sectors=device_sectors)
        sim.run()
        res = sim.result()
        return math.inf if res.saturated else float(res.mean_response_ms)

    return run


def recommendation_rows(recs: Iterable[Recommendation], *, block_bytes: int) -> list[dict[str, Any]]:
    """Rows for schemas.striping_recommendations (without the trace and advice keys): sizes in bytes too."""
    rows = []
    for x in recs:
        rows.append({
            "scope": x.scope, "file": x.file, "method": x.method,
            "mean_request_bytes": x.mean_request_blocks * block_bytes, "file_bytes": x.file_blocks * block_bytes,
            "parallelism": x.parallelism, "phase_a_p": x.phase_a_p, "phase_b_p": x.phase_b_p,
            "striping_unit_blocks": x.striping_unit_blocks, "striping_unit_bytes": x.striping_unit_blocks * block_bytes,
            "width": x.width, "aligned": x.aligned, "predicted_response_ms": x.predicted_response_ms,
            "prediction": x.prediction, "simulated_response_ms": x.simulated_response_ms,
            "gbest_unit_bytes": None if x.gbest_unit_blocks is None else x.gbest_unit_blocks * block_bytes,
            "distance_from_gbest": x.distance_from_gbest,
        })
    return rows

"""The striping-unit advisor against hand computations: FIVE's equations 6, 7, 11, 15-17 (Phase A), 18-25
(Phase B), Figure 2's steps 3-4, equation 1 / Lee and Katz (SSA Table 3), the MPL-slope rule, and the
Gbest bookkeeping. No Spark."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from blockheat.libs.plans import striping_advisor as S
from blockheat.sim.spec import DiskSpec
from blockheat.sim.specs import load


def hand_spec() -> DiskSpec:
    """100 cylinders x 4 tracks x 10 blocks, 6000 rpm (ROT = 10 ms), head switch 1 ms, seek 2 + 0.1 d ms
    (so t_cs = 2.1 ms and the fitted e, f are exactly 0.1, 2), no overheads."""
    return DiskSpec.from_dict({
        "name": "hand", "sector_size": 512, "cylinders": 100, "surfaces": 4, "rpm": 6000,
        "zones": [{"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 10}],
        "seek": {"linear": {"c_ms": 2.0, "e_ms": 0.1}}, "head_switch_ms": 1.0,
    })


@pytest.fixture
def m() -> S.DiskModel:
    return S.DiskModel.from_spec(hand_spec())


def tiny_model(**changes: object) -> S.DiskModel:
    """Three cylinders with seeks 0, 2, 3 ms (distance 0, 1, 2), ROT 10 ms, 10 blocks per track."""
    kw: dict[str, object] = {
        "cylinders": 3, "rotation_ms": 10.0, "blocks_per_track": 10.0, "tracks_per_cylinder": 4,
        "head_switch_ms": 1.0, "cylinder_switch_ms": 2.0, "seek_e_ms": 0.5, "seek_f_ms": 1.5,
        "mean_seek_ms": 14 / 9, "overhead_ms": 0.0, "block_bytes": 512,
        "seek_ms_by_distance": np.array([0.0, 2.0, 3.0]),
    }
    kw.update(changes)
    return S.DiskModel(**kw)  # type: ignore[arg-type]


# -- the disk model ------------------------------------------------------------------------------

def test_disk_model_reads_the_spec(m: S.DiskModel) -> None:
    assert (m.cylinders, m.rotation_ms, m.blocks_per_track, m.tracks_per_cylinder) == (100, 10.0, 10.0, 4)
    assert (m.head_switch_ms, m.cylinder_switch_ms) == (1.0, pytest.approx(2.1))
    assert (m.seek_e_ms, m.seek_f_ms) == (pytest.approx(0.1), pytest.approx(2.0))


def test_seek_line_is_fitted_over_the_distances_equation_7_reaches() -> None:
    # FIVE's Table 1 disk: sqrt shape below 478 cylinders, c + e d above; eq 7 starts at 0.423 x 1435 = 607,
    # inside the linear piece, so the fit recovers its c and e; a fit from distance 1 would not.
    spec = load("five_table1")
    m = S.DiskModel.from_spec(spec)
    assert m.seek_e_ms == pytest.approx(spec.seek.linear_e_ms, rel=1e-9)
    assert m.seek_f_ms == pytest.approx(spec.seek.linear_c_ms, rel=1e-9)
    whole = np.polyfit(np.arange(1, 1435), spec.seek.time_ms(np.arange(1, 1435)), 1)
    assert abs(whole[0] / m.seek_e_ms - 1) > 0.05


# -- Phase A ---------------------------------------------------------------------------------------

def test_eq6_exact_expected_maximum_seek_distance() -> None:
    assert S.exact_max_seek_distance(100, 1) == pytest.approx(100 / 3)
    assert S.exact_max_seek_distance(100, 2) == pytest.approx(100 * (1 - 2 / 3 * 4 / 5))


def test_eq7_approximate_expected_maximum_seek_distance() -> None:
    assert S.expected_max_seek_distance(100, 1) == pytest.approx(42.3)
    assert S.expected_max_seek_distance(100, 4) == pytest.approx(100 * (0.423 + 0.118 * math.log(4)))  # 58.66
    # Beyond P = e^(0.577/0.118) = 133 equation 7 passes C; it is capped at C - 1.
    assert S.expected_max_seek_distance(100, 200) == 99.0


def test_eq11_expected_maximum_rotation() -> None:
    assert S.expected_max_rotation_ms(10.0, 1) == 5.0
    assert S.expected_max_rotation_ms(10.0, 3) == 7.5


def test_eq15_transfer_with_head_and_cylinder_switches(m: S.DiskModel) -> None:
    # R = 41, P = 2: 20.5 blocks per disk; (19.5/10 - 19.5/40) x 1 + 19.5/40 x 2.1 + 20.5/10 x 10
    assert S.expected_transfer_ms(m, 41, 2) == pytest.approx(1.4625 + 1.02375 + 20.5)
    # One block per disk: no switches, a tenth of a rotation.
    assert S.expected_transfer_ms(m, 3, 3) == pytest.approx(1.0)


def test_eq16_expected_service_time(m: S.DiskModel) -> None:
    seek = 0.1 * 100 * (1 - 0.577 + 0.118 * math.log(2)) + 2.0     # 7.047913
    rot = 2 / 3 * 10.0                                              # 6.666667
    trans = 1.4625 + 1.02375 + 20.5                                 # 22.98625
    assert S.expected_service_ms(m, 41, 2) == pytest.approx(seek + rot + trans)   # 36.70083
    assert S.expected_service_ms(m, 41, 2) == pytest.approx(36.70083, abs=1e-5)


def test_eq17_is_the_derivative_of_eq16(m: S.DiskModel) -> None:
    for r, p in ((41.0, 2.0), (300.0, 7.5), (1000.0, 20.0)):
        h = 1e-5
        numeric = (S.expected_service_ms(m, r, p + h) - S.expected_service_ms(m, r, p - h)) / (2 * h)
        assert S.service_derivative(m, r, p) == pytest.approx(numeric, rel=1e-6)


def test_phase_a_picks_the_integer_minimum_where_eq17_changes_sign(m: S.DiskModel) -> None:
    steep = replace(m, seek_e_ms=1.0)        # e C b = -11.8 ms: an optimum well inside 1 .. R
    a = S.phase_a(steep, 400)
    assert len(a.service_ms) == 400                      # P = 1 .. floor(R)
    assert 1 < a.p_opt < 400
    assert a.service_ms[a.p_opt - 1] == min(a.service_ms)
    assert S.service_derivative(steep, 400, a.p_opt - 1) < 0 < S.service_derivative(steep, 400, a.p_opt + 1)
    assert S.phase_a(steep, 400, p_max=10).p_opt == 10   # a bound below the optimum binds


def test_phase_a_is_not_capped_at_the_number_of_disks() -> None:
    # FIVE's disk, R = 260 blocks: the service-time optimum lies beyond 32 disks, as FIVE's Gopt of
    # 8 KB (ceil(260/P) = 8 needs P >= 33) implies; the light-load unit then spreads a request over all.
    m = S.DiskModel.from_spec(load("five_table1"))
    a = S.phase_a(m, 260)
    assert a.p_opt > 32
    rec = {x.method: x for x in S.advise(m, n_disks=32, workload=S.Workload(260, 260))}["five_phase_a"]
    assert rec.striping_unit_blocks == math.ceil(260 / a.p_opt)
    assert rec.width == 32


# -- Phase B ---------------------------------------------------------------------------------------

def test_subrequest_moments_are_those_of_the_convolution_by_hand() -> None:
    # Seek over 3 cylinders: P(0) = 1/3, P(1) = 4/9, P(2) = 2/9 -> X in {0, 2, 3} ms:
    # E[X] = 14/9, E[X^2] = 34/9, E[X^3] = 86/9. One block: transfer ROT/B = 1 ms, so Y = X + 1:
    # E[Y] = 23/9, E[Y^2] = 71/9, E[Y^3] = 239/9. Rotation U ~ U(0, 10): 5, 100/3, 250.
    # E[Y+U] = 68/9; E[(Y+U)^2] = 71/9 + 2 (23/9) 5 + 100/3 = 601/9;
    # E[(Y+U)^3] = 239/9 + 3 (71/9) 5 + 3 (23/9)(100/3) + 250 = 5854/9.
    m1, m2, m3 = S.subrequest_moments(tiny_model(), 1.0)
    assert (m1, m2, m3) == (pytest.approx(68 / 9), pytest.approx(601 / 9), pytest.approx(5854 / 9))


def test_subrequest_mean_on_a_full_size_disk(m: S.DiskModel) -> None:
    # Linear seek 2 + 0.1 d over 100 cylinders: E[seek] = 2 (1 - 1/C) + 0.1 (C^2 - 1)/(3C) = 1.98 + 3.333;
    # half a rotation; 20 blocks: (19/10 - 19/40) x 1 + 19/40 x 2.1 + 2 x 10 = 22.4225.
    m1, _, _ = S.subrequest_moments(m, 20.0)
    assert m1 == pytest.approx(1.98 + 0.1 * 9999 / 300 + 5.0 + 1.425 + 0.9975 + 20.0)


def test_eq20_to_23_mg1_disk() -> None:
    m1, m2, m3 = 68 / 9, 601 / 9, 5854 / 9
    lam = 0.05                                                   # 50 sub-requests per second
    q = S.mg1_response((m1, m2, m3), lam)
    rho = lam * m1                                               # eq 20: 0.37778
    var = m2 - m1 * m1                                           # 9.6914
    assert q.rho == pytest.approx(rho)
    assert q.cv2 == pytest.approx(var / m1 ** 2)                 # eq 22: 0.16977
    # eq 21 equals Pollaczek-Khinchine: S + lambda E[S^2] / (2 (1 - rho)) = 7.5556 + 2.6830
    assert q.mean_ms == pytest.approx(m1 + lam * m2 / (2 * (1 - rho)))
    assert q.mean_ms == pytest.approx(10.2386, abs=1e-4)
    # eq 23: 9.6914 + 17.4226 + 7.1986
    assert q.var_ms2 == pytest.approx(var + lam * m3 / (3 * (1 - rho)) + lam ** 2 * m2 ** 2 / (4 * (1 - rho) ** 2))
    assert q.var_ms2 == pytest.approx(34.313, abs=1e-3)


def test_unstable_disk_has_infinite_response() -> None:
    q = S.mg1_response((10.0, 120.0, 2000.0), 0.1)               # rho = 1
    assert q.rho == pytest.approx(1.0)
    assert math.isinf(q.mean_ms)
    assert math.isinf(S.fork_join_response_ms(q.mean_ms, q.var_ms2, 2))


def test_eq25_fork_join_correction() -> None:
    assert S.fork_join_response_ms(10.0, 16.0, 1) == 10.0
    assert S.fork_join_response_ms(10.0, 16.0, 2) == pytest.approx(10 + 4 / math.sqrt(3))          # 12.309
    assert S.fork_join_response_ms(10.0, 16.0, 3) == pytest.approx(10 + 4 * 2 / math.sqrt(5))      # 13.578
    assert S.fork_join_response_ms(10.0, 16.0, 4) == pytest.approx(10 + 4 * math.sqrt(2 * math.log(4)))  # 16.660


def test_eq18_19_wire_rate_and_size_per_disk() -> None:
    # R = 2 blocks over P = 2 of D = 4 disks at 100 requests/s: S = 1 block, lambda_i = 50/s.
    q, t = S.response_at(tiny_model(), 2.0, 100.0, 4, 2)
    assert q.rho == pytest.approx(0.05 * 68 / 9)
    assert t == pytest.approx(10.2386 + math.sqrt(34.313) / math.sqrt(3), abs=1e-3)


def test_phase_b_respects_the_sustainable_throughput(m: S.DiskModel) -> None:
    b = S.phase_b(m, 50.0, 60.0, 8)
    assert len(b.rho) == 8
    for p in range(1, 9):
        m1 = S.subrequest_moments(m, 50.0 / p)[0]
        assert b.rho[p - 1] == pytest.approx(60.0 * p / 8 / 1000 * m1)
    sustainable = [p for p in range(1, 9) if b.rho[p - 1] < 1]
    assert sustainable
    assert len(sustainable) < 8
    assert all(math.isinf(b.response_ms[p - 1]) for p in range(1, 9) if p not in sustainable)
    assert b.p_bar in sustainable
    assert b.response_ms[b.p_bar - 1] == min(b.response_ms)
    assert S.phase_b(m, 50.0, 1000.0, 8).p_bar is None         # even P = 1 saturates


# -- Figure 2, steps 3 and 4 -----------------------------------------------------------------------

def test_step3_effective_parallelism() -> None:
    assert S.effective_parallelism(5, 3) == 3.0
    assert S.effective_parallelism(2, 3) == 2.0
    assert S.effective_parallelism(5, None) == 5.0                                 # Phase A only
    assert S.effective_parallelism(5, 3, r_file=100, r_mean=200) == 1.5            # P-bar R_i / R-bar
    assert S.effective_parallelism(5, 3, r_file=10, r_mean=200) == 1.0             # floored at 1


def test_step4_striping_unit_and_width() -> None:
    assert S.striping_unit(260, 1000, 3) == 130             # 1 < R < L: ceil((R - 1)/(P - 1))
    assert S.striping_unit(260, 260, 3) == 87               # whole-file requests: ceil(260/3), FIVE's Gopt-140
    assert S.striping_unit(260, 1000, 3, aligned=True) == 87
    assert S.striping_unit(260, 260, 3, aligned=False) == 130
    assert S.striping_unit(1, 1000, 4) == 1                 # single blocks
    assert S.striping_unit(260, 1000, 1) == 1000            # P = 1: the whole file
    assert S.striping_width(260, 87, 32) == 3
    assert S.striping_width(10_000, 87, 32) == 32


def test_parallelism_of_a_unit() -> None:
    assert S.parallelism_of_unit(260, 87, 32, aligned=True) == 3.0
    assert S.parallelism_of_unit(260, 87, 32, aligned=False) == pytest.approx(1 + 259 / 87)
    assert S.parallelism_of_unit(260, 1, 32, aligned=True) == 32.0


# -- the other rules -------------------------------------------------------------------------------

# SSA Table 3 (Lee/Katz columns): request KB -> BSU KB at MPL 2 and MPL 4, on 4 disks with 8.8 ms seek +
# 4.17 ms rotational latency and 7.9 MB/s (MB = 1024 KB).
SSA_TABLE_3 = {8: (14, 25), 128: (58, 100), 1024: (164, 284), 2048: (232, 401), 4096: (328, 568)}


@pytest.mark.parametrize(("request_kb", "expected"), SSA_TABLE_3.items())
def test_eq1_is_lee_and_katz_rule_of_ssa_table_3(request_kb: int, expected: tuple[int, int]) -> None:
    positioning_ms, kb_per_ms = 8.8 + 4.17, 7.9 * 1024 / 1000
    got = tuple(round(S.eq1_unit(positioning_ms, kb_per_ms, mpl, request_kb, 4)) for mpl in (2, 4))
    assert got == expected


def test_eq1_by_hand_and_without_concurrency() -> None:
    assert S.eq1_unit(10.0, 2.0, 5, 100, 8) == pytest.approx(math.sqrt(1000))
    assert S.eq1_unit(10.0, 2.0, 1, 100, 8) == 0.0


def test_mpl_slope_rule() -> None:
    # 1/4 x 12.97 ms x 8.0896 KB/ms x (2 - 1) + one 0.5 KB sector = 26.73 KB
    assert S.mpl_slope_unit(12.97, 7.9 * 1024 / 1000, 2, sector=0.5) == pytest.approx(0.25 * 12.97 * 8.0896 + 0.5)
    assert S.mpl_slope_unit(12.97, 8.0, 1) == 1.0


def test_mpl_estimate_by_littles_law(m: S.DiskModel) -> None:
    w = S.Workload(41, 1000, rate_per_s=100.0)
    assert S.estimate_mpl(m, w) == pytest.approx(0.1 * S.expected_service_ms(m, 41, 1))
    assert S.estimate_mpl(m, S.Workload(41, 1000)) == 1.0


# -- the advisor -----------------------------------------------------------------------------------

def test_advise_global_rows_follow_figure_2(m: S.DiskModel) -> None:
    w = S.Workload(50.0, 2000.0, rate_per_s=60.0, mpl=4.0)
    recs = {(x.scope, x.file, x.method): x for x in S.advise(
        m, n_disks=8, workload=w, files=[S.FileStats("dev0", 100.0, 4000.0)])}
    a, b = S.phase_a(m, 50.0), S.phase_b(m, 50.0, 60.0, 8)
    assert b.p_bar is not None
    assert 1 < b.p_bar < a.p_opt
    five = recs[("global", "*", "five")]
    p_eff = min(a.p_opt, b.p_bar)
    assert (five.phase_a_p, five.phase_b_p, five.parallelism) == (a.p_opt, b.p_bar, p_eff)
    assert five.striping_unit_blocks == math.ceil(49 / (p_eff - 1))           # 1 < R < L: unaligned
    assert five.width == min(8, math.ceil(2000 / five.striping_unit_blocks))
    p_unit = 1 + 49 / five.striping_unit_blocks
    assert five.predicted_response_ms == pytest.approx(S.response_at(m, 50.0, 60.0, 8, p_unit)[1])
    eq1 = recs[("global", "*", "eq1")]
    assert eq1.striping_unit_blocks == math.ceil(math.sqrt(m.latency_ms * 1.0 * 3 * 50 / 8))    # X = 10/10
    assert recs[("global", "*", "mpl_slope")].striping_unit_blocks == math.ceil(0.25 * m.latency_ms * 3 + 1)
    f = recs[("device", "dev0", "five")]
    fa = S.phase_a(m, 100.0)
    assert f.parallelism == max(1.0, min(fa.p_opt, b.p_bar * 100 / 50))
    glob = recs[("device", "dev0", "five_global")]
    assert glob.striping_unit_blocks == five.striping_unit_blocks
    assert glob.width == min(8, math.ceil(4000 / five.striping_unit_blocks))


def test_unsustainable_rate_falls_back_to_one_disk_per_request(m: S.DiskModel) -> None:
    five = next(x for x in S.advise(m, n_disks=8, workload=S.Workload(50.0, 2000.0, rate_per_s=1000.0))
                if x.method == "five")
    assert (five.phase_b_p, five.parallelism, five.striping_unit_blocks) == (1, 1.0, 2000)
    assert math.isinf(five.predicted_response_ms)


def test_gbest_is_the_best_of_the_sweep_and_distances_are_relative(m: S.DiskModel) -> None:
    calls: list[int] = []

    def simulate(unit: int) -> float:
        calls.append(unit)
        return abs(unit - 8) + 20.0

    recs = S.advise(m, n_disks=8, workload=S.Workload(50.0, 2000.0, rate_per_s=60.0, mpl=4.0),
                    files=[S.FileStats("dev0", 50.0, 4000.0)], simulate=simulate, sweep_units=[1, 2, 4, 8, 16])
    glob = [x for x in recs if x.scope == "global"]
    assert sorted(calls) == sorted({1, 2, 4, 8, 16} | {x.striping_unit_blocks for x in glob})   # each unit once
    gbest = next(x for x in glob if x.method == "gbest")
    assert (gbest.striping_unit_blocks, gbest.simulated_response_ms, gbest.distance_from_gbest) == (8, 20.0, 0.0)
    for x in glob:
        assert x.gbest_unit_blocks == 8
        assert x.distance_from_gbest == pytest.approx((abs(x.striping_unit_blocks - 8) + 20.0) / 20.0 - 1)
    assert all(x.simulated_response_ms is None for x in recs if x.scope != "global")


def test_simulated_response_sweeps_the_stripe_unit_in_the_simulator() -> None:
    from blockheat.sim.records import Requests
    from tests.sim.conftest import toy_spec

    # One 40-sector read on an idle 4-disk array: 10-sector units read 10 sectors on each disk at once.
    reqs = Requests.build(np.array([0.0]), np.zeros(1), np.array([0]), np.array([40]), np.array([True]))
    simulate = S.simulated_response(toy_spec(), reqs, n_disks=4, device_sectors=[4000])
    assert simulate(10) < simulate(40)
    assert math.isfinite(simulate(40))


def test_recommendation_rows_carry_bytes(m: S.DiskModel) -> None:
    rows = S.recommendation_rows(S.advise(m, n_disks=8, workload=S.Workload(20.0, 200.0)), block_bytes=512)
    five = next(r for r in rows if r["method"] == "five")
    assert five["striping_unit_bytes"] == five["striping_unit_blocks"] * 512
    assert five["mean_request_bytes"] == 20.0 * 512
    assert five["prediction"] == "eq16"


# -- the job -----------------------------------------------------------------------------------------

def test_advice_inputs_from_profile_rows() -> None:
    from blockheat.jobs.striping_advice import AdviceConfig, advice_inputs

    def row(scope: str, device: str, metric: str, value: float, window_us: int = 0) -> dict[str, object]:
        return {"scope": scope, "device": device, "window_us": window_us, "metric": metric, "value": value}

    profile = [row("trace", "*", "size_bytes_mean", 6144.0), row("trace", "*", "rate_per_s", 20.0),
               row("trace", "*", "rate_per_s", 99.0, window_us=3_600_000_000),        # a window: ignored
               row("device", "a", "size_bytes_mean", 4096.0), row("device", "b", "size_bytes_mean", 8192.0)]
    sizes = {"a": 1 << 20, "b": 3 << 20}
    w, files = advice_inputs(profile, sizes, block_bytes=1024, cfg=AdviceConfig("t", speedup=5.0))
    assert (w.mean_request_blocks, w.rate_per_s, w.mean_file_blocks) == (6.0, 100.0, 2048.0)
    assert files == [S.FileStats("a", 4.0, 1024.0), S.FileStats("b", 8.0, 3072.0)]
    w, _ = advice_inputs(profile, sizes, block_bytes=1024, cfg=AdviceConfig("t", light_load=True))
    assert w.rate_per_s is None
    regions = [{"device": "b", "start_bytes": 2 << 20, "mean_size_bytes": 2048.0}]
    _, files = advice_inputs(profile, sizes, block_bytes=1024, cfg=AdviceConfig("t", region_bytes=2 << 20),
                             regions=regions)
    assert files == [S.FileStats(f"b:{2 << 20}", 2.0, 1024.0)]                      # the last 1 MiB of b


def test_striping_advice_job_writes_its_rows(spark, spark_cfg) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    from blockheat.jobs.striping_advice import AdviceConfig, run
    from blockheat.libs.io.tables import read_table, replace_rows
    from blockheat.schemas import striping_recommendations as SR
    from blockheat.schemas import trace_profile as TP
    from blockheat.schemas import traces
    from tests.builders import make_requests

    # 40 reads of 8 KiB on devices h_0 / h_1 alternately, one every 0.25 s; catalog and profile rows by hand
    # (the profile job's metric names), so the test runs only this job.
    reqs = [(f"h_{i % 2}", i, i * 250_000, "R", (i * 37 % 64) * 8192, 8192) for i in range(40)]
    replace_rows(make_requests(spark, reqs, "advise-t"), spark, spark_cfg.warehouse, "requests",
                 {"trace_id": "advise-t"})
    catalog = ("advise-t", "hand", [], None, None, 9_750_000, ["h_0", "h_1"], 40, 40, 0, {}, 40, 0, 40 * 8192, 0,
               dt.datetime(2026, 1, 1, tzinfo=dt.UTC), {}, [])
    replace_rows(spark.createDataFrame([catalog], traces.SPARK_SCHEMA), spark, spark_cfg.warehouse, "traces",
                 {"trace_id": "advise-t"})
    devices = ["h_0", "h_1"]
    rows = [("", "trace", "*", 0, 0, "size_bytes_mean", 8192.0), ("", "trace", "*", 0, 0, "rate_per_s", 4.0)]
    rows += [("", "device", d, 0, 0, "size_bytes_mean", 8192.0) for d in devices]
    replace_rows(spark.createDataFrame(rows, TP.SPARK_SCHEMA), spark, spark_cfg.warehouse, TP.TABLE,
                 {"trace_id": "advise-t"})
    got = run(spark, spark_cfg, AdviceConfig("advise-t", n_disks=4, gbest=True, sweep_units=(2, 8)))
    table = [r.asDict() for r in read_table(spark, spark_cfg.warehouse, SR.TABLE, "advise-t").collect()]
    assert sorted(table, key=lambda r: (r["scope"], r["file"], r["method"])) == \
        sorted(got, key=lambda r: (r["scope"], r["file"], r["method"]))
    by = {(r["scope"], r["file"], r["method"]): r for r in got}
    five = by[("global", "*", "five")]
    assert (five["advice_id"], five["n_disks"], five["block_bytes"], five["rate_per_s"]) == \
        ("five_table1x4", 4, 1024, 4.0)
    # Each device's size is its highest address used.
    ends = {f"h_{k}": max((i * 37 % 64) * 8192 + 8192 for i in range(40) if i % 2 == k) for k in (0, 1)}
    expected = {(x.scope, x.file, x.method): x for x in S.advise(
        S.DiskModel.from_spec(load("five_table1")), n_disks=4,
        workload=S.Workload(8.0, sum(ends.values()) / 2 / 1024, rate_per_s=4.0),
        files=[S.FileStats(d, 8.0, ends[d] / 1024) for d in devices])}
    for key, x in expected.items():
        assert (by[key]["striping_unit_blocks"], by[key]["width"]) == (x.striping_unit_blocks, x.width), key
        assert by[key]["predicted_response_ms"] == pytest.approx(x.predicted_response_ms), key
    gbest = by[("global", "*", "gbest")]
    assert gbest["gbest_unit_bytes"] in {2 * 1024, 8 * 1024, *(r["striping_unit_bytes"] for r in got)}
    assert all(r["simulated_response_ms"] is not None for r in got if r["scope"] == "global")
    assert {(r["scope"], r["file"]) for r in got if r["scope"] == "device"} == {("device", d) for d in devices}

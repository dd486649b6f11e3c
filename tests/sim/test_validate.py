"""Validation against real drives: the demerit figure, the closed-loop replay rule, and the pinned figures
of the shipped specs on the bundled HP C2247A and hplajw traces."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from blockheat.libs.readers.srt import read_srt
from blockheat.sim.specs import load
from blockheat.sim.validate import (
    ValidationResult,
    ValidationTraceError,
    demerit_ms,
    disksim_demerit_ms,
    plot_cdfs,
    read_validation_trace,
    validate_closed_loop,
    validate_srt,
)
from tests.sim import pins
from tests.sim.conftest import C2247A_TRACE, HPLAJW_TRACE, REPO, toy_spec

#: DiskSim 4.0's own access time of each request of the C2247A trace (data/disksim/README.md).
DISKSIM_C2247A = REPO / "data/disksim/hp_c2247a/hp_c2247a_disksim40_access_ms.txt"

# Pins hold to 4 decimals on this machine; the tolerance leaves room for floating-point differences of
# other CPUs (the closed loop feeds simulated times back into the rotational phase).
TOL = 0.02


def test_demerit_is_the_rms_horizontal_distance_between_cdfs() -> None:
    a = np.array([1000.0, 2000.0, 3000.0])
    assert demerit_ms(a, a[::-1]) == 0.0
    assert demerit_ms(a, a + 500.0) == pytest.approx(0.5)               # a shift moves every quantile
    assert demerit_ms(a, np.array([1000.0, 2000.0, 6000.0])) == pytest.approx(np.sqrt(9 / 3))
    # Unequal sizes compare quantile functions: 2 copies of a sample are the same distribution.
    assert demerit_ms(a, np.repeat(a, 2)) == pytest.approx(0.0)


def test_disksim_demerit_buckets_the_cdfs_as_disksims_rms_tool() -> None:
    # Under 100 us the buckets are 1 us wide: {10, 20} against {30, 40} us is a shift of 20 us at every quantile.
    assert disksim_demerit_ms(np.array([10.0, 20.0]), np.array([30.0, 40.0])) == pytest.approx(0.020)
    # At 15 ms a bucket is 149 us wide ([14,863, 15,012) us): two samples in it are the same distribution ...
    assert disksim_demerit_ms(np.array([14_900.0]), np.array([15_000.0])) == 0.0
    assert demerit_ms(np.array([14_900.0]), np.array([15_000.0])) == pytest.approx(0.1)   # ... exactly 0.1 ms apart
    # ... and a sample one bucket up moves every interpolated quantile by about a bucket's width (149-151 us).
    assert disksim_demerit_ms(np.array([14_900.0]), np.array([15_100.0])) == pytest.approx(0.150, abs=1e-3)
    with pytest.raises(ValueError, match="non-empty"):
        disksim_demerit_ms(np.array([]), np.array([1.0]))


def test_closed_loop_replay_issues_after_completion_plus_idle_gap(tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text("R Miss 0 1 5000.0 1000.0\nR Miss 4000 1 6000.0 0.0\nW Miss 0 2 7000.0 0.0\n")
    vt = read_validation_trace(trace)
    res = validate_closed_loop(toy_spec(), vt)
    assert res.requests == 3
    assert res.measured_mean_ms == pytest.approx(6.0)
    # First request at t=0 on the toy disk: 200 us overhead (slot 2), wait 98 slots, read 1: 10,100 us.
    assert res.simulated_us[0] == pytest.approx(10_100.0)


def test_validation_trace_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_text("R Miss 0 1 5000.0 1000.0\nX Miss 0 1 1.0 1.0\n")
    with pytest.raises(ValidationTraceError, match=r"bad.trace:2: expected 'R\|W class"):
        read_validation_trace(bad)


@pytest.fixture(scope="module")
def c2247a() -> ValidationResult:
    return validate_closed_loop(load("hp_c2247a"), read_validation_trace(C2247A_TRACE))


def test_hp_c2247a_validation_figures(c2247a: ValidationResult) -> None:
    res = c2247a
    got = res.summary()
    assert got["requests"] == pins.C2247A["requests"] == 9999
    assert got["measured_mean_ms"] == pytest.approx(15.30, abs=0.005)   # the trace's own figure
    # The goals of the faithful spec (DiskSim's own model of the drive: demerit 0.094 ms, 0.090 by its rms tool):
    # mean within 1 %, demerit at most 0.15 ms ...
    assert abs(res.simulated_mean_ms / res.measured_mean_ms - 1) < 0.01
    assert res.demerit_ms <= 0.15
    # ... and the model's pinned figures.
    assert got["simulated_mean_ms"] == pytest.approx(pins.C2247A["simulated_mean_ms"], abs=TOL)
    assert got["demerit_ms"] == pytest.approx(pins.C2247A["demerit_ms"], abs=TOL)
    # Sequential reads the drive served from its cache are served from the simulated cache too.
    hit = (res.measured_us < 2500) & read_validation_trace(C2247A_TRACE).is_read
    assert np.mean(res.simulated_us[hit] < 2500) > 0.95


def test_hp_c2247a_past_disksim_by_both_measures(c2247a: ValidationResult) -> None:
    disksim_us = np.loadtxt(DISKSIM_C2247A) * 1000.0
    measured_us = read_validation_trace(C2247A_TRACE).access_us
    assert len(disksim_us) == c2247a.requests == 9999
    assert disksim_us.mean() / 1000.0 == pytest.approx(15.3147, abs=1e-4)       # DiskSim's mean access time
    # The measure reproduces DiskSim's `rms` tool on DiskSim's own run (it prints rms = 0.089932) ...
    assert disksim_demerit_ms(measured_us, disksim_us) == pytest.approx(0.089932, abs=1e-6)
    assert demerit_ms(measured_us, disksim_us) == pytest.approx(0.0939, abs=1e-4)
    # ... and the model is closer to the drive than DiskSim by either measure: at most 0.090 ms by DiskSim's.
    assert c2247a.disksim_demerit_ms == pytest.approx(pins.C2247A["disksim_demerit_ms"], abs=TOL)
    assert c2247a.disksim_demerit_ms <= 0.090
    assert c2247a.disksim_demerit_ms < disksim_demerit_ms(measured_us, disksim_us)
    assert c2247a.demerit_ms < demerit_ms(measured_us, disksim_us)
    # Request by request the model follows DiskSim: 9,996 of the 9,999 within 10 us.
    assert np.sum(np.abs(c2247a.simulated_us - disksim_us) <= 10.0) >= 9990


def test_hp_c2247a_reads_and_writes_apart(c2247a: ValidationResult) -> None:
    res = c2247a
    parts = res.by_operation()
    assert sorted(parts) == ["read", "write"]
    assert parts["read"].requests + parts["write"].requests == res.requests
    for op, pin in pins.C2247A_BY_OP.items():
        got = parts[op].summary()
        assert got["requests"] == pin["requests"]
        assert got["measured_mean_ms"] == pytest.approx(pin["measured_mean_ms"], abs=1e-4)
        assert got["simulated_mean_ms"] == pytest.approx(pin["simulated_mean_ms"], abs=TOL)
        assert got["demerit_ms"] == pytest.approx(pin["demerit_ms"], abs=TOL)
        assert got["disksim_demerit_ms"] == pytest.approx(pin["disksim_demerit_ms"], abs=TOL)
        # Each operation within 1.5 % of its measured mean, demerit under 0.3 ms.
        assert abs(parts[op].simulated_mean_ms / parts[op].measured_mean_ms - 1) < 0.015
        assert parts[op].demerit_ms < 0.3
    # The request-weighted means of the parts are the mean of all.
    weighted = sum(p.simulated_mean_ms * p.requests for p in parts.values()) / res.requests
    assert weighted == pytest.approx(res.simulated_mean_ms)
    assert [r["op"] for r in res.rows()] == ["all", "read", "write"]


def test_by_operation_splits_the_samples() -> None:
    res = ValidationResult("toy", np.array([1000.0, 2000.0, 4000.0]), np.array([1000.0, 3000.0, 4000.0]),
                           np.array([True, False, True]))
    parts = res.by_operation()
    assert parts["read"].measured_mean_ms == pytest.approx(2.5)
    assert parts["write"].demerit_ms == pytest.approx(1.0)       # one sample each: |2000 - 3000| us
    assert parts["read"].demerit_ms == 0.0
    with pytest.raises(ValueError, match="did not record which requests are reads"):
        ValidationResult("toy", res.measured_us, res.simulated_us).by_operation()


def test_hplajw_per_device_figures() -> None:
    got = {c.device: c.result.summary() for c in validate_srt(*read_srt(str(HPLAJW_TRACE))[:2])}
    assert sorted(got) == [0, 1]
    for device, pin in pins.HPLAJW.items():
        g = got[device]
        assert g["requests"] == pin["requests"]
        assert g["measured_mean_ms"] == pytest.approx(pin["measured_mean_ms"], abs=1e-4)   # the trace's stop - start
        assert g["simulated_mean_ms"] == pytest.approx(pin["simulated_mean_ms"], abs=TOL)
        assert g["demerit_ms"] == pytest.approx(pin["demerit_ms"], abs=TOL)


def test_cdf_plot_is_written(tmp_path: Path) -> None:
    res = validate_closed_loop(toy_spec(), read_validation_trace(_small(tmp_path)))
    out = plot_cdfs([res, res], tmp_path / "cdf.png", title="two panels")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _small(tmp_path: Path) -> Path:
    p = tmp_path / "small.trace"
    p.write_text("".join(f"R Miss {100 * k} 4 {3000.0 + 100 * k} 500.0\n" for k in range(20)))
    return p

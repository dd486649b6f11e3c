"""The `placement` experiment (whole hplajw week at both scales): each claim's verdict and reason, the
placements' figures against independent computations, the more-disks sensitivity behind the failing claims'
reasons, outputs and the command. No Spark."""
from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

import blockheat.libs.experiments
from blockheat.jobs.cli.main import main
from blockheat.libs.experiments import EXPERIMENTS, run_experiment
from blockheat.libs.experiments.placement import SENSITIVITY_DISKS, Workload, load_hplajw


@pytest.fixture(scope="module")
def placement():
    return run_experiment("placement", scale="tiny")


def _extra_accesses(w: Workload, unit: int, n_disks: int) -> int:
    """Accesses beyond one per request: a request touching m stripe units on n disks costs min(n, m) accesses."""
    first = np.concatenate([[0], np.cumsum(w.device_sectors)[:-1]])[w.requests.device] + w.requests.lbn
    last = first + w.requests.sectors - 1
    return int((np.minimum(n_disks, last // unit - first // unit + 1) - 1).sum())


def test_placement_claims(placement) -> None:
    # hplajw on 2 disks: striping and random spread device 0's 95 % of the load, but with only two disks
    # striping stays above half the original queue time, and the 64 KB unit's fewer crossings win.
    assert {c.claim: c.holds for c in placement.claims} == {
        "striping close to random": True, "both far below the original": False,
        "larger units: fewer extra requests": True, "larger units: more imbalance": False}
    reasons = {c.claim: c.reason for c in placement.claims}
    assert reasons["both far below the original"].startswith(
        "the trace has 2 disks with 95 % of its requests on one, so spreading at best halves that disk's load; "
        "over more disks (sensitivity) the claim holds at 3, 14 disks (3: 38 % and 26 %, 14: 12 % and 5 %)")
    assert reasons["larger units: more imbalance"].startswith(
        "on 2 disks the 64 KB units are no less balanced (busiest over mean disk busy 1.02 vs 1.14) and cross "
        "fewer unit boundaries (7,405 extra accesses vs 10,881); over more disks (sensitivity) the claim holds at "
        "14 disks (busiest over mean disk busy 3: 1.11 vs 1.09, 14: 3.21 vs 1.94)")
    assert reasons["striping close to random"] == reasons["larger units: fewer extra requests"] == ""


def test_placement_figures(placement) -> None:
    rows = {r["placement"]: r for r in placement.tables["placements"].to_pylist()}
    assert list(rows) == ["original", "dynamic", "striped 32 KB", "striped 64 KB", "random"]
    assert {r["requests"] for r in rows.values()} == {44_519}
    # The only other whole-device placement swaps the two devices: the same queues, mirrored.
    assert rows["dynamic"]["mean_queue_ms"] == rows["original"]["mean_queue_ms"]
    w = load_hplajw()
    for name, unit in (("striped 32 KB", 128), ("striped 64 KB", 256)):
        extra = _extra_accesses(w, unit, 2)
        assert rows[name]["extra_accesses"] == extra
        assert rows[name]["disk_accesses"] == 44_519 + extra
    assert rows["random"]["extra_accesses"] == rows["original"]["extra_accesses"] == 0
    q = {k: v["mean_queue_ms"] for k, v in rows.items()}
    assert q["random"] < q["striped 64 KB"] < q["striped 32 KB"] < q["original"]
    assert rows["original"]["queue_length"][1] < 1e-4 < rows["original"]["queue_length"][0]   # device 1 idles
    assert round(q["original"], 1) == 100.6


def test_more_disks_sensitivity(placement) -> None:
    # The reasons' support: 95 % of the week's requests are on device 0 (42,252 of 44,519); over 3 disks
    # striping and random already fall below half the original; over 14 (the paper's table 2) the 64 KB units
    # pile up more (busiest disk over the mean) and queue longer than 32 KB. (Full scale adds 4 and 8 disks.)
    w = load_hplajw()
    assert np.bincount(w.requests.device).tolist() == [42_252, 2_267]
    sens = {r["disks"]: r for r in placement.tables["sensitivity"].to_pylist()}
    assert tuple(sens) == SENSITIVITY_DISKS["tiny"] == (3, 14)
    assert SENSITIVITY_DISKS["full"] == (3, 4, 8, 14)
    assert [(sens[n]["both far below"], sens[n]["64 KB more imbalance"]) for n in (3, 14)] == [(True, False),
                                                                                              (True, True)]
    assert [(round(sens[n]["striped 32 KB % orig"], 1), round(sens[n]["random % orig"], 1))
            for n in (3, 14)] == [(37.9, 25.6), (12.0, 5.3)]
    assert (round(sens[14]["striped 64 KB (ms)"], 2), round(sens[14]["striped 32 KB (ms)"], 2)) == (17.79, 12.06)
    assert sens[14]["busiest / mean 64 KB"] > 3 > sens[14]["busiest / mean 32 KB"]
    for n in (3, 14):   # extra accesses, independently: min(n, units touched) - 1 per request
        assert (sens[n]["extra 32 KB"], sens[n]["extra 64 KB"]) == (_extra_accesses(w, 128, n),
                                                                    _extra_accesses(w, 256, n))


def test_outputs_and_command(placement, tmp_path, capsys, monkeypatch) -> None:
    written = placement.write(tmp_path / "p")
    assert sorted(p.name for p in written) == ["placements.parquet", "queue_lengths.png", "sensitivity.parquet",
                                               "summary.md"]
    assert pq.read_table(tmp_path / "p/tables/placements.parquet").num_rows == 5
    assert (tmp_path / "p/queue_lengths.png").read_bytes()[:4] == b"\x89PNG"
    summary = (tmp_path / "p/summary.md").read_text()
    assert summary.splitlines()[2:4] == ["| claim | paper | ours | verdict | reason |", "|---|---|---|---|---|"]
    assert "| striping close to random |" in summary
    assert "| both far below the original | table 1: 42 % and 42 %; table 2: 5.7 % and 3.2 % | 53.7 % and 39.5 % " \
           "| does not hold | the trace has 2 disks" in summary
    assert "Claims holding here: 2 of 4." in summary
    assert "## Sensitivity: the same week over more disks" in summary
    # The command writes and prints what the experiment returns (the experiment itself: the fixture).
    monkeypatch.setattr(blockheat.libs.experiments, "run_experiment", lambda name, scale, seed: placement)
    assert main(["experiment", "placement", "--scale", "tiny", "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "placement (tiny):" in out
    assert "2 of 4 claims hold" in out
    assert (tmp_path / "cli/summary.md").read_text() == summary
    assert main(["experiment", "five-striping-x"]) == 2
    assert "unknown experiment 'five-striping-x'" in capsys.readouterr().err
    assert set(EXPERIMENTS) >= {"placement", "five-cooling"}

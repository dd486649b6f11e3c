"""Paper experiments at tiny scale (`blockheat experiment NAME --scale tiny`): each claim's verdict asserted,
key figures checked against independent computations, outputs written. No Spark."""
from __future__ import annotations

import itertools

import numpy as np
import pyarrow.parquet as pq
import pytest

from libs.cli import main
from libs.experiments import EXPERIMENTS, run_experiment
from libs.experiments import five as F
from libs.experiments.placement import load_hplajw


@pytest.fixture(scope="module")
def placement():
    return run_experiment("placement", scale="tiny")


@pytest.fixture(scope="module")
def cooling():
    return run_experiment("five-cooling", scale="tiny")


def test_placement_claims(placement) -> None:
    # hplajw on 2 disks: striping and random spread device 0's 95 % of the load, but with only two disks
    # striping stays above half the original queue time, and the 64 KB unit's fewer crossings win.
    assert {c.claim: c.holds for c in placement.claims} == {
        "striping close to random": True, "both far below the original": False,
        "larger units: fewer extra requests": True, "larger units: more imbalance": False}


def test_placement_figures(placement) -> None:
    rows = {r["placement"]: r for r in placement.tables["placements"].to_pylist()}
    assert list(rows) == ["original", "dynamic", "striped 32 KB", "striped 64 KB", "random"]
    assert {r["requests"] for r in rows.values()} == {44_519}
    # The only other whole-device placement swaps the two devices: the same queues, mirrored.
    assert rows["dynamic"]["mean_queue_ms"] == rows["original"]["mean_queue_ms"]
    # Extra accesses, independently: a request touching m stripe units on 2 disks costs min(2, m) accesses.
    w = load_hplajw()
    first = np.concatenate([[0], np.cumsum(w.device_sectors)[:-1]])[w.requests.device] + w.requests.lbn
    last = first + w.requests.sectors - 1
    for name, unit in (("striped 32 KB", 128), ("striped 64 KB", 256)):
        extra = int((np.minimum(2, last // unit - first // unit + 1) - 1).sum())
        assert rows[name]["extra_accesses"] == extra
        assert rows[name]["disk_accesses"] == 44_519 + extra
    assert rows["random"]["extra_accesses"] == rows["original"]["extra_accesses"] == 0
    q = {k: v["mean_queue_ms"] for k, v in rows.items()}
    assert q["random"] < q["striped 64 KB"] < q["striped 32 KB"] < q["original"]
    assert rows["original"]["queue_length"][1] < 1e-4 < rows["original"]["queue_length"][0]   # device 1 idles
    assert round(q["original"], 1) == 100.6


def test_five_cooling_claims(cooling) -> None:
    # Short runs (6,000 requests): cooling helps at 120/s, but near saturation step 5 vetoes the moves.
    assert {c.claim: c.holds for c in cooling.claims} == {
        "cooling: an order of magnitude lower near saturation": False, "cooling costs little at light load": True,
        "without cooling every method saturates by 130/s": True, "cooling relieves the hottest disk": True}
    rows = cooling.tables["responses"].to_pylist()
    by = {(r["method"], r["rate_per_s"], r["cooling"]): r for r in rows}
    for m in ("Gopt140", "Track"):
        assert by[(m, 20.0, False)]["mean_response_ms"] < by[(m, 120.0, False)]["mean_response_ms"]
        assert by[(m, 120.0, True)]["mean_response_ms"] < by[(m, 120.0, False)]["mean_response_ms"]
        assert by[(m, 160.0, False)]["saturated"]
        assert by[(m, 160.0, True)]["source_queue_vetoes"] > 0
        assert by[(m, 20.0, False)]["moves"] == 0 < by[(m, 20.0, True)]["moves"]
        assert by[(m, 20.0, True)]["migration_ios"] == 2 * by[(m, 20.0, True)]["moves"]


def test_striped_files_deal_units_round_robin() -> None:
    w = F.workload(1, 10, 1.0, "uniform")
    s = F.striped_files(w, F.UNITS["Track"])
    ext = s.extent_map.extents
    assert [e.disk for e in ext[:70]] == [i % 32 for i in range(70)]           # one cursor across files
    assert sum(e.sectors for e in ext) == w.logical_sectors
    # On each disk the units lie back to back, so a file's units i and i + 32 are contiguous there.
    for d in (0, 31):
        mine = [e for e in ext if e.disk == d]
        assert all(a.physical_start + a.sectors == b.physical_start for a, b in itertools.pairwise(mine))
    first_file = int(np.argmin(w.file_start))
    assert set(s.unit_file[: -(-int(w.file_sectors[first_file]) // 35)].tolist()) == {first_file}


def test_outputs_and_command(placement, tmp_path, capsys) -> None:
    written = placement.write(tmp_path / "p")
    assert sorted(p.name for p in written) == ["placements.parquet", "queue_lengths.png", "summary.md"]
    assert pq.read_table(tmp_path / "p/tables/placements.parquet").num_rows == 5
    assert (tmp_path / "p/queue_lengths.png").read_bytes()[:4] == b"\x89PNG"
    summary = (tmp_path / "p/summary.md").read_text()
    assert "| striping close to random |" in summary
    assert "Claims holding here: 2 of 4." in summary
    assert main(["experiment", "placement", "--scale", "tiny", "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "placement (tiny):" in out
    assert "2 of 4 claims hold" in out
    assert (tmp_path / "cli/summary.md").is_file()
    assert main(["experiment", "five-striping-x"]) == 2
    assert "unknown experiment 'five-striping-x'" in capsys.readouterr().err
    assert set(EXPERIMENTS) >= {"placement", "five-cooling"}

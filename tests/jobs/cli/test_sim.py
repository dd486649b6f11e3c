"""`blockheat sim validate` and `blockheat sim specs` (no Spark involved)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from blockheat.jobs.cli.main import EXIT_USAGE, main
from blockheat.sim import specs
from tests.sim import pins
from tests.sim.conftest import C2247A_TRACE, HPLAJW_TRACE


def test_validate_json_prints_one_object_and_draws_the_cdfs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "cdf.png"
    spec_file = Path(specs.__file__).parent / "hp_c2247a.toml"        # a spec file: the shipped one's
    assert main(["sim", "validate", "--spec", str(spec_file), "--trace", str(C2247A_TRACE), "--json",
                 "--plot", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"requests", "measured_mean_ms", "simulated_mean_ms", "demerit_ms", "disksim_demerit_ms",
                        "operations"}
    assert out["disksim_demerit_ms"] == pytest.approx(pins.C2247A["disksim_demerit_ms"], abs=0.02)
    assert out["requests"] == 9999
    assert [(r["op"], r["requests"]) for r in out["operations"]] == [("all", 9999), ("read", 5115), ("write", 4884)]
    assert out["operations"][2]["simulated_mean_ms"] == pytest.approx(
        pins.C2247A_BY_OP["write"]["simulated_mean_ms"], abs=0.02)
    assert out["measured_mean_ms"] == pytest.approx(15.2982)
    assert out["simulated_mean_ms"] == pytest.approx(pins.C2247A["simulated_mean_ms"], abs=0.02)
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_validate_table_for_an_srt_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "validate", "--trace", str(HPLAJW_TRACE), "--plot", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["device", "op", "requests", "measured_mean_ms", "simulated_mean_ms", "demerit_ms",
                                "disksim_demerit_ms"]
    assert [line.split()[:3] for line in lines[2:8]] == [
        ["0", "all", "42,252"], ["0", "read", "10,887"], ["0", "write", "31,365"],
        ["1", "all", "2,267"], ["1", "read", "2,153"], ["1", "write", "114"]]
    assert lines[8] == "(6 rows)"
    assert lines[2].split()[4] == "ms"                     # measured mean access time, with its unit


def test_validate_spec_file_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "validate", "--trace", str(C2247A_TRACE), "--plot", "none"]) == EXIT_USAGE
    assert "--spec is required" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    assert main(["sim", "validate", "--spec", str(bad), "--trace", str(C2247A_TRACE)]) == EXIT_USAGE
    assert "missing required key 'sector_size'" in capsys.readouterr().err


def test_specs_lists_the_shipped_disks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "specs", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["spec"] for r in rows][:2] == ["hp_c2247a", "hp_335h"]
    assert rows[0]["capacity_bytes"] == 2_054_864 * 512


def test_validate_draws_the_cdfs_under_the_warehouse_not_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(tmp_path / "wh"))
    assert main(["sim", "validate", "--spec", "hp_c2247a", "--trace", str(C2247A_TRACE)]) == 0
    plot = tmp_path / "wh" / "validation" / f"{C2247A_TRACE.name}.cdf.png"
    assert capsys.readouterr().out.splitlines()[-1] == f"CDFs: {plot}"
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert list(here.iterdir()) == []

"""Plan exports on the warehouse's file system (libs.plans.steps.write_plan / read_plan, `blockheat plan export`
and `plan check --file`): a local file as before, an object-store URI (tests/fake_store.py) the same bytes, and
the default location <warehouse>/plans/PLAN_ID.FORMAT under a URI warehouse."""
from __future__ import annotations

from pathlib import Path

import pytest

from blockheat.jobs.cli import plans as cli_plans
from blockheat.libs.plans.steps import build_plan, extent_migration_steps, read_plan, write_plan
from tests.fake_store import fake_s3
from tests.jobs.test_reorg_plan import NOW, SWAP, inputs, target


@pytest.fixture(scope="module")
def doc():
    return build_plan(inputs(), extent_migration_steps(target(8, 8), SWAP))


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_export_to_an_object_store_round_trips(doc, tmp_path, monkeypatch, fmt):
    store = fake_s3(monkeypatch, tmp_path / "s3")
    local = write_plan(doc, tmp_path / "local" / f"plan.{fmt}", fmt)          # the directory is created
    assert local == tmp_path / "local" / f"plan.{fmt}"
    remote = write_plan(doc, store.url(f"wh/plans/plan.{fmt}"), fmt)
    assert remote == f"s3a://bucket/wh/plans/plan.{fmt}"
    assert store.local(remote).read_bytes() == local.read_bytes()
    assert read_plan(remote) == read_plan(local) == doc


def test_export_location(tmp_path, monkeypatch):
    fake_s3(monkeypatch, tmp_path / "s3")
    where = cli_plans.export_location
    assert where("s3a://bucket/wh", "p1", "csv") == "s3a://bucket/wh/plans/p1.csv"
    assert where("s3a://bucket/wh", "p1", "csv", "s3://other/x/p.csv") == "s3://other/x/p.csv"
    assert where("s3a://bucket/wh", "p1", "json", "out/p.json") == Path("out/p.json")      # --out: local, as given
    assert where(tmp_path / "wh", "p1", "parquet") == tmp_path / "wh" / "plans" / "p1.parquet"


def test_cli_export_and_check_with_an_object_store_warehouse(doc, tmp_path, monkeypatch, capsys):
    """`blockheat plan export PLAN_ID` with BLOCKHEAT_WAREHOUSE a URI writes <warehouse>/plans/PLAN_ID.csv to the
    store; `plan check --file URI` reads it back (the stored plan and the tables' check are stand-ins here)."""
    import blockheat.libs.table_io.plans as job
    from blockheat.jobs.cli.main import main

    store = fake_s3(monkeypatch, tmp_path / "s3")
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", store.url("wh"))
    checked = []
    monkeypatch.setattr(job, "load", lambda warehouse, plan_id, spark=None: doc if plan_id == doc["plan_id"] else None)
    monkeypatch.setattr(job, "check", lambda warehouse, d, now, stored: checked.append((warehouse, d)) or [])
    assert main(["plan", "export", doc["plan_id"], "--format", "csv"]) == 0
    out = capsys.readouterr().out
    url = f"s3a://bucket/wh/plans/{doc['plan_id']}.csv"
    assert f"written to {url} (csv)" in out
    assert read_plan(url) == doc
    assert store.local(url).read_text().startswith("# blockheat-plan ")
    assert main(["plan", "check", "--file", url, "--now", NOW.isoformat()]) == 0
    assert checked == [(store.url("wh"), doc)]
    assert f"plan {doc['plan_id']}: ok" in capsys.readouterr().out

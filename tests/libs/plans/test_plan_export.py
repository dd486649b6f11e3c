"""Plan exports on the warehouse's file system (libs.plans.document.write_plan / read_plan, `blockheat plan export`
and `plan check --file`): a local file as before, an object-store URI (tests/fake_store.py) the same bytes, and
the default location <warehouse>/plans/PLAN_ID.FORMAT under a URI warehouse. Files are read strictly (a repeated
JSON key, a step row of another trace or plan refused) and checked as the whole document recomputed from the
stored rows (libs.table_io.plans.load / check), the first differing field named."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from blockheat.jobs.cli import plans as cli_plans
from blockheat.libs.plans.document import (
    PARQUET_KEY,
    build_plan,
    check_plan,
    document_from_rows,
    plan_ids,
    plan_rows,
    read_plan,
    write_plan,
)
from blockheat.libs.plans.steps import extent_migration_steps
from blockheat.libs.plans.types import PlanError
from blockheat.schemas import reorg_plan_steps
from tests.fake_store import fake_s3
from tests.jobs.test_reorg_plan import NOW, SWAP, inputs, target, with_field

VERSIONS = {"requests": 1, "policy_scores": 3, "sim_results": 3}       # the versions inputs() says the plan read
FORGED_UNTIL = '"valid_until":"2099-01-01T00:00:00Z",'


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
    stored = {doc["plan_id"]: doc}.__getitem__                 # a CSV export's header is the stored plan's
    assert read_plan(remote, stored=stored) == read_plan(local, stored=stored) == doc


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
    assert read_plan(url, stored={doc["plan_id"]: doc}.__getitem__) == doc
    assert store.local(url).read_text().startswith(",".join(reorg_plan_steps.COLUMNS) + "\n")    # a plain table
    assert main(["plan", "check", "--file", url, "--now", NOW.isoformat()]) == 0
    assert checked == [(store.url("wh"), doc)]
    assert f"plan {doc['plan_id']}: ok" in capsys.readouterr().out


def test_a_json_export_with_a_repeated_key_is_refused(doc, tmp_path):
    """A forged value first, the genuine one last: json.loads alone keeps the last, so the file read as the stored
    plan; read strictly, the repeated key is named, at the top and inside a step."""
    text = write_plan(doc, tmp_path / "plan.json", "json").read_text()
    top = tmp_path / "top.json"
    top.write_text(text.replace('{\n  "content_id"', '{\n  "valid_until": "2099-01-01T00:00:00Z",\n  "content_id"', 1))
    assert json.loads(top.read_text()) == doc                        # what a lenient reader sees
    with pytest.raises(PlanError, match=rf"^{top}: duplicate key 'valid_until' in a JSON object$"):
        read_plan(top)
    nested = tmp_path / "nested.json"
    nested.write_text(text.replace('"dest_offset_bytes": 2048,', '"dest_offset_bytes": 0,\n'
                                   '      "dest_offset_bytes": 2048,', 1))
    assert json.loads(nested.read_text()) == doc
    with pytest.raises(PlanError, match=rf"^{nested}: duplicate key 'dest_offset_bytes' in a JSON object$"):
        read_plan(nested)


def test_a_parquet_header_with_a_repeated_key_is_refused(doc, tmp_path):
    """The Parquet export's header metadata: a forged valid_until before the genuine one is refused, naming the
    file, the place and the key."""
    path = write_plan(doc, tmp_path / "plan.parquet", "parquet")
    table = pq.read_table(path)
    head = table.schema.metadata[PARQUET_KEY].decode()
    pq.write_table(table.replace_schema_metadata({PARQUET_KEY: head.replace("{", "{" + FORGED_UNTIL, 1).encode()}),
                   path)
    with pytest.raises(PlanError, match=rf"^{path}: blockheat.plan metadata: duplicate key 'valid_until' in a JSON "
                                        r"object$"):
        read_plan(path)


def test_a_csv_export_is_a_plain_steps_table_read_with_the_stored_plan(doc, tmp_path):
    """Line 1 names the columns and each row a step, its trace and its plan: the rest of the document is the
    stored plan's, so a CSV carries no header to forge; rows without a plan id, or read without the store, are
    refused."""
    path = write_plan(doc, tmp_path / "plan.csv", "csv")
    lines = path.read_text().split("\n")
    assert lines[0].split(",") == list(reorg_plan_steps.COLUMNS)
    assert len(lines) == 1 + len(doc["steps"]) + 1                # the columns, a row per step, the last newline
    asked = []
    assert read_plan(path, stored=lambda plan_id: asked.append(plan_id) or doc) == doc
    assert asked == [doc["plan_id"]]
    with pytest.raises(PlanError, match=rf"^{path}: a CSV export holds the steps only; read it with the stored plans$"):
        read_plan(path)
    empty = tmp_path / "empty.csv"
    empty.write_text(lines[0] + "\n")
    with pytest.raises(PlanError, match=rf"^{empty}: no step rows, so no plan id: check the plan by its id, or export "
                                        r"it as json$"):
        read_plan(empty, stored=lambda plan_id: doc)
    commented = tmp_path / "commented.csv"
    commented.write_text("# blockheat-plan {}\n" + path.read_text())
    with pytest.raises(PlanError, match=rf"^{commented}: line 1 must be the step columns "):
        read_plan(commented, stored=lambda plan_id: doc)


def test_a_csv_step_row_of_another_trace_is_refused(doc, tmp_path):
    path = write_plan(doc, tmp_path / "plan.csv", "csv")
    lines = path.read_text().split("\n")
    assert lines[2].startswith(f"t,{doc['plan_id']},1,")             # line 3: step 1
    lines[2] = "other" + lines[2][1:]
    path.write_text("\n".join(lines))
    with pytest.raises(PlanError, match=rf"^{path}: line 3: column trace_id is 'other', the plan's target\.trace_id "
                                        r"is 't'$"):
        read_plan(path, stored=lambda plan_id: doc)


def test_a_parquet_step_row_of_another_plan_is_refused(doc, tmp_path):
    path = write_plan(doc, tmp_path / "plan.parquet", "parquet")
    table = pq.read_table(path)
    ids = table.column("plan_id").to_pylist()
    ids[2] = "0" * 64
    i = table.schema.get_field_index("plan_id")
    changed = table.set_column(i, table.schema.field(i), pa.array(ids, pa.string()))
    pq.write_table(changed.replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(PlanError, match=rf"^{path}: row 2 \(from 0\): column plan_id is '0{{64}}', the plan's "
                                        rf"plan_id is '{doc['plan_id']}'$"):
        read_plan(path)
    extra = table.append_column("x", pa.array([1, 2, 3]))         # every column is a step column
    pq.write_table(extra.replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(PlanError, match=r"missing \[\], extra \['x'\]\)$"):
        read_plan(path)


def forged(doc, path, value):
    """The document with one field changed and its ids recomputed: its hash checks out."""
    out = with_field(doc, path, value)
    out["plan_id"], out["content_id"] = plan_ids(out)
    return out


@pytest.mark.parametrize("fmt", ["json", "parquet"])     # a CSV's header is the stored plan's (test below)
@pytest.mark.parametrize(("path", "value", "named"), [
    (("steps", 1, "dest_offset_bytes"), 6144, "steps[1].dest_offset_bytes"),
    (("valid_until",), "2099-01-01T00:00:00Z", "valid_until"),
])
def test_a_rehashed_file_is_compared_whole_with_the_stored_plan(doc, tmp_path, fmt, path, value, named):
    from blockheat.libs.table_io.plans import check

    file = write_plan(forged(doc, path, value), tmp_path / f"plan.{fmt}", fmt)
    back = read_plan(file)
    assert check_plan(back, now=NOW, versions=VERSIONS) == []         # the hash alone proves nothing
    assert check(tmp_path / "wh", back, NOW, stored=doc) == [
        f"not the stored plan: the document differs from plan {doc['plan_id']} in reorg_plans at {named} (edited "
        "after it was built)"]


def test_the_stored_document_is_recomputed_from_every_column_of_its_rows(doc):
    row, steps = plan_rows(doc)
    assert document_from_rows(row, list(reversed(steps))) == doc
    moved = [dict(s) for s in steps]
    moved[1]["dest_offset_bytes"] = 6144
    with pytest.raises(PlanError, match=rf"^reorg_plans row {doc['plan_id']}: plan_json differs from the "
                                        r"reorg_plan_steps rows at steps\[1\]\.dest_offset_bytes$"):
        document_from_rows(row, moved)
    other = [dict(s) for s in steps]
    other[0]["trace_id"] = "u"
    with pytest.raises(PlanError, match=rf"^reorg_plan_steps row step 0 of plan {doc['plan_id']}: column trace_id is "
                                        r"'u', the plan's target\.trace_id is 't'$"):
        document_from_rows(row, other)
    with pytest.raises(PlanError, match=rf"^reorg_plans row {doc['plan_id']}: column bytes_to_move is 1, its "
                                        r"plan_json gives 6144$"):
        document_from_rows({**row, "bytes_to_move": 1}, steps)
    with pytest.raises(PlanError, match=rf"^reorg_plans row {doc['plan_id']}: reorg_plan_steps holds 2 rows of the "
                                        r"plan, its plan_json 3 steps$"):
        document_from_rows(row, steps[:2])


def test_plan_check_file_against_the_stored_rows(spark, spark_cfg, doc, tmp_path, monkeypatch, capsys):
    """The plan stored (libs.table_io.plans.store) in a warehouse of its own: an untouched export in each format
    passes `plan check --file`; a file differing from the stored rows is refused with the first differing field, a
    rehashed one as a plan that is not stored, a forged key or step row before any comparison; `plan check` and
    `plan export` take a unique prefix of the id (an ambiguous one lists the ids). The input tables'
    versions are taken as the ones the plan read (their check is tested in tests/jobs/test_policy_scores.py)."""
    import blockheat.libs.table_io.plans as job
    from blockheat.jobs.cli.main import main

    cfg = dataclasses.replace(spark_cfg, warehouse=tmp_path / "wh")
    job.store(spark, cfg, doc)
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(cfg.warehouse))
    monkeypatch.setattr(job, "scoped_version", lambda warehouse, table, scope, since: since)
    assert job.load(cfg.warehouse, doc["plan_id"]) == doc
    now = ["--now", NOW.isoformat()]
    for fmt in ("json", "csv", "parquet"):
        path = write_plan(doc, tmp_path / f"plan.{fmt}", fmt)
        assert main(["plan", "check", "--file", str(path), *now]) == 0, fmt
        assert capsys.readouterr().out.startswith(f"plan {doc['plan_id']}: ok: hash verified, the stored plan"), fmt
    same_id = json.loads(json.dumps(doc))
    same_id["steps"][1]["dest_offset_bytes"] = 6144
    rehashed = forged(doc, ("steps", 1, "dest_offset_bytes"), 6144)
    for name, edited, why in [
            ("same-id", same_id, f"not the stored plan: the document differs from plan {doc['plan_id']} in "
                                 "reorg_plans at steps[1].dest_offset_bytes (edited after it was built)"),
            ("rehashed", rehashed, f"not a stored plan: no plan '{rehashed['plan_id']}' in reorg_plans")]:
        path = write_plan(edited, tmp_path / f"{name}.json", "json")
        assert main(["plan", "check", "--file", str(path), *now]) == 1, name
        assert capsys.readouterr().err.startswith(f"blockheat: error: plan {edited['plan_id']} refused: {why}"), name
    # CSV: the steps against the stored plan's; a plan id that is not stored has no header to read them with.
    path = write_plan(same_id, tmp_path / "same-id.csv", "csv")
    assert main(["plan", "check", "--file", str(path), *now]) == 1
    assert capsys.readouterr().err.startswith(f"blockheat: error: plan {doc['plan_id']} refused: not the stored "
                                              f"plan: the document differs from plan {doc['plan_id']} in reorg_plans "
                                              "at steps[1].dest_offset_bytes")
    path = write_plan(rehashed, tmp_path / "rehashed.csv", "csv")
    assert main(["plan", "check", "--file", str(path), *now]) == 1
    assert capsys.readouterr().err.startswith(f"blockheat: error: no plan '{rehashed['plan_id']}' in reorg_plans")
    prefix = doc["plan_id"][:8]                      # a unique prefix names the plan; 3 characters are too few
    assert main(["plan", "check", prefix, *now]) == 0
    assert capsys.readouterr().out.startswith(f"plan {doc['plan_id']}: ok: hash verified")
    assert main(["plan", "export", prefix, "--format", "json", "--out", str(tmp_path / "by-prefix.json")]) == 0
    assert capsys.readouterr().out.startswith(f"plan {doc['plan_id']} (")
    assert read_plan(tmp_path / "by-prefix.json") == doc
    assert main(["plan", "check", doc["plan_id"][:3], *now]) == 1
    assert capsys.readouterr().err.startswith(f"blockheat: error: no plan '{doc['plan_id'][:3]}' in reorg_plans")
    twin = doc["plan_id"][:6] + "0" * 58                # another stored id with the same first 6 characters
    monkeypatch.setattr(job, "stored_ids", lambda warehouse, spark=None: [doc["plan_id"], twin])
    assert main(["plan", "check", prefix[:6], *now]) == 2
    assert (f"blockheat: error: plan id prefix {prefix[:6]!r} is ambiguous: {min(twin, doc['plan_id'])}, "
            f"{max(twin, doc['plan_id'])}; give more of the id") in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(cfg.warehouse))
    monkeypatch.setattr(job, "scoped_version", lambda warehouse, table, scope, since: since)
    text = write_plan(doc, tmp_path / "repeated.json", "json").read_text()
    path = tmp_path / "repeated.json"
    path.write_text(text.replace('{\n  "content_id"', '{\n  "valid_until": "2099-01-01T00:00:00Z",\n  "content_id"', 1))
    assert main(["plan", "check", "--file", str(path), *now]) == 2
    assert f"{path}: duplicate key 'valid_until' in a JSON object" in capsys.readouterr().err

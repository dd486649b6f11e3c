"""Reorganization plans without Spark: each family's steps on hand-built layouts (worked out in the comments),
a safe order proved by replaying the steps on simulated disks, the plan id and its check, the JSON schema
(our validator and jsonschema agree), and the export formats' round trips."""
from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json

import jsonschema
import numpy as np
import pyarrow.parquet as pq
import pytest

from blockheat.libs.plans.cost import MoveBudget
from blockheat.libs.plans.document import (
    PARQUET_KEY,
    PlanInputs,
    build_plan,
    canonical_json,
    check_plan,
    plan_rows,
    read_plan,
    write_plan,
)
from blockheat.libs.plans.policies import FAMILIES, SweepOptions
from blockheat.libs.plans.steps import (
    alis_steps,
    cooling_steps,
    extent_migration_steps,
    restripe_steps,
    track_alignment_steps,
)
from blockheat.libs.plans.types import (
    Outcome,
    PlanError,
    PlanPart,
    PolicyError,
    SafetyLimits,
    Step,
    Target,
    Variant,
    WindowStats,
)
from blockheat.schemas import reorg_plan_steps
from blockheat.schemas.reorg_plan_json import PLAN_JSON_SCHEMA, PlanDocumentError, validate_plan_document
from blockheat.sim.array import Extent, ExtentMap
from blockheat.sim.specs import load

SPEC = load("hp_c2247a")            # 512-byte sectors
# The toy plans below move half of their 4 KiB volumes: budgets that let them through (the budgets' own tests are in
# tests/libs/plans/test_cost.py and below).
NO_BUDGET = MoveBudget(max_volume_share=1.0, max_idle_share=1.0, min_gain_per_gib=0.0)
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def target(*sizes: int, devices: tuple[str, ...] = ("a", "b")) -> Target:
    return Target("t", devices[:len(sizes)], sizes, SPEC, "hp_c2247a")


def summary(steps):
    return [(s.step_type, s.source_device, s.source_offset_bytes, s.dest_device, s.dest_offset_bytes, s.bytes,
             s.depends_on, s.extent) for s in steps]


def test_extent_swap_is_staged_in_free_space():
    # Extents of 4 sectors: a0 a1 on disk a, b0 b1 on disk b. Target: a1 and b0 change places, a cycle.
    # Every disk's used area ends at sector 8 (devices and targets), so staging goes to a@8 (equal room: lowest).
    layout = ExtentMap((Extent(0, 4, 0, 0), Extent(4, 4, 1, 0), Extent(8, 4, 0, 4), Extent(12, 4, 1, 4)))
    part = extent_migration_steps(target(8, 8), layout)
    assert summary(part.steps) == [
        ("stage", "a", 2048, "a", 4096, 2048, (), 1),               # a1 out of the way first
        ("migrate_extent", "b", 0, "a", 2048, 2048, (0,), 2),       # b0 into a1's old place
        ("migrate_extent", "a", 4096, "b", 0, 2048, (0, 1), 1),     # a1 from the staging place into b0's
    ]
    assert {s.group_id for s in part.steps} == {"group-0"}
    assert part.detail == {"extent_map": {"extents": 4, "extents_moved": 2, "extents_staged": 1}}


def test_extent_moves_wait_for_the_data_they_overwrite():
    # a0 -> b@0 (held by b0), b0 -> b@8 (free): b0 must go first although a0 comes first in extent order.
    layout = ExtentMap((Extent(0, 4, 1, 0), Extent(4, 4, 0, 4), Extent(8, 4, 1, 8), Extent(12, 4, 1, 4)))
    part = extent_migration_steps(target(8, 8), layout)
    assert summary(part.steps) == [("migrate_extent", "b", 0, "b", 4096, 2048, (), 2),
                                   ("migrate_extent", "a", 0, "b", 0, 2048, (0,), 0)]


def test_extent_migration_replayed_on_disks_ends_in_the_target_and_never_reads_lost_data():
    rng = np.random.default_rng(7)
    sizes = (48, 40, 32)
    tgt = Target("t", ("a", "b", "c"), sizes, SPEC, "hp_c2247a")
    extent = 4
    # The current layout: every extent in its device's own place; tokens = extent * 100 + sector.
    home = []
    for d, size in enumerate(sizes):
        home += [(d, start) for start in range(0, size, extent)]
    disks = {d: np.full(1024, -1, dtype=np.int64) for d in range(3)}       # staging lands past sector 48
    for i, (d, start) in enumerate(home):
        disks[d][start:start + extent] = i * 100 + np.arange(extent)
    # A random target: the same places shuffled (a permutation: cycles of moves), two extents to free space.
    chosen = [home[k] for k in rng.permutation(len(home))]
    chosen[0], chosen[1] = (0, 48), (1, 52)
    layout = ExtentMap(tuple(Extent(i * extent, extent, d, s) for i, (d, s) in enumerate(chosen)))
    steps = extent_migration_steps(tgt, layout).steps
    names = {"a": 0, "b": 1, "c": 2}
    held: dict[int, tuple[int, int]] = {i: place for i, place in enumerate(home)}   # where each extent's data is
    for k, s in enumerate(steps):
        assert all(dep < k for dep in s.depends_on)
        src, dst = names[s.source_device], names[s.dest_device]
        a, b, n = s.source_offset_bytes // 512, s.dest_offset_bytes // 512, s.bytes // 512
        data = disks[src][a:a + n].copy()
        assert data.tolist() == [s.extent * 100 + x for x in range(extent)], f"step {k} reads lost data"
        assert held[s.extent] == (src, a)
        disks[dst][b:b + n] = data
        held[s.extent] = (dst, b)
    for i, (d, start) in enumerate(chosen):
        assert disks[d][start:start + extent].tolist() == [i * 100 + x for x in range(extent)]
    assert sum(s.step_type == "stage" for s in steps) > 0       # the random target has cycles


def test_restripe_moves_units_to_their_stripe_place():
    # a (8 sectors) then b (4) striped in 2-sector units over 2 disks: unit k at logical 2k -> disk k % 2,
    # sector (k // 2) * 2. a's units 0..3 -> a@0 (stays), b@0, a@2, b@2; b's units 4, 5 -> a@4, b@4.
    part = restripe_steps(target(8, 4), unit_sectors=2, width=2)
    assert [(s.source_device, s.source_offset_bytes, s.dest_device, s.dest_offset_bytes, s.bytes, s.unit_bytes,
             s.width, s.depends_on) for s in part.steps] == [
        ("a", 2048, "a", 1024, 1024, 1024, 2, ()),        # unit 2
        ("a", 1024, "b", 0, 2048, 1024, 2, ()),           # units 1 and 3
        ("b", 0, "a", 2048, 1024, 1024, 2, ()),           # unit 4
        ("b", 1024, "b", 2048, 1024, 1024, 2, ()),        # unit 5
    ]
    assert part.detail["striping"] == [
        {"device": "a", "unit_bytes": 1024, "width": 2, "stripe_width": 2, "first_disk": 0, "logical_offset_bytes": 0,
         "bytes": 4096, "bytes_moved": 3072},
        {"device": "b", "unit_bytes": 1024, "width": 2, "stripe_width": 2, "first_disk": 0,
         "logical_offset_bytes": 4096, "bytes": 2048, "bytes_moved": 2048}]


def test_restripe_splits_a_unit_at_a_device_boundary():
    # a (3 sectors), b (3): unit 1 = a's sector 2 + b's sector 0 -> b-disk sectors 0 and 1; unit 2 = b's 1..2
    # -> a-disk sectors 2..3; unit 0 stays.
    part = restripe_steps(target(3, 3), unit_sectors=2, width=2)
    assert [(s.source_device, s.source_offset_bytes, s.dest_device, s.dest_offset_bytes, s.bytes)
            for s in part.steps] == [("a", 1024, "b", 0, 512), ("b", 512, "a", 1024, 1024), ("b", 0, "b", 512, 512)]
    with pytest.raises(PlanError, match=r"restripe needs unit_sectors > 0 and width, first_disk within 2 disks"):
        restripe_steps(target(3, 3), unit_sectors=2, width=3)


def move(t, unit, from_disk, from_start, to_disk, to_start, sectors=8):
    return {"time_us": t, "unit": unit, "from_disk": from_disk, "from_physical_start": from_start, "to_disk": to_disk,
            "to_physical_start": to_start, "sectors": sectors, "unit_heat": 5.0, "source_heat_before": 9.0,
            "source_heat_after": 4.0, "target_heat_before": 1.0, "target_heat_after": 6.0}


def test_cooling_moves_keep_execution_order_and_their_conflicts():
    first = move(10.0, 5, 0, 0, 1, 100)             # extent 5: a@0 -> b@100
    again = move(20.0, 5, 1, 100, 0, 50)            # extent 5 again: reads what the first move wrote
    into = move(20.0, 7, 0, 8, 0, 0, sectors=4)     # extent 7 into a@0, which the first move emptied
    part = cooling_steps(target(200, 200), [into, again, first])      # order given does not matter
    assert [(s.extent, s.time_us, s.source_device, s.source_offset_bytes, s.dest_device, s.dest_offset_bytes,
             s.bytes, s.depends_on, s.group_id) for s in part.steps] == [
        (5, 10.0, "a", 0, "b", 51200, 4096, (), "group-0"),
        (5, 20.0, "b", 51200, "a", 25600, 4096, (0,), "group-0"),     # same time: lower extent first
        (7, 20.0, "a", 4096, "a", 0, 2048, (0,), "group-0"),
    ]
    assert part.detail["cooling_moves"][0] == {"order": 0, "time_us": 10.0, "extent": 5, "from_device": "a",
                                               "to_device": "b", "bytes": 4096, "unit_heat": 5.0,
                                               "source_heat_before": 9.0, "source_heat_after": 4.0,
                                               "target_heat_before": 1.0, "target_heat_after": 6.0}


FIGURES = {"saturated": False, "p99_response_ms": 90.0, "mean_service_ms": 20.0, "mean_queue_ms": 5.0,
           "hottest_utilization": 0.5, "utilization_max_over_mean": 1.2, "migration_mb": 0.0, "remaps": 0}


def inputs(improvement: float = 0.25, **changes) -> PlanInputs:
    tgt = target(8, 8)
    variant = Variant("greedy:2KiB,heat=1", "greedy", {"extent_bytes": 2048, "heat_fraction": 1.0},
                      {"layout": {"kind": "extents", "extent_sectors": 4}})
    score = {**FIGURES, "mean_response_ms": 30.0 * (1 - improvement), "p95_response_ms": 60.0,
             "improvement_mean": improvement, "improvement_p95": 0.0}
    baseline = {**FIGURES, "mean_response_ms": 30.0, "p95_response_ms": 60.0, "utilization_max_over_mean": 2.0}
    sim = {"grid_id": "score.t.all", "scenario_id": variant.policy_id, "array_group": "all",
           "scenario_json": json.dumps({"scenario_id": variant.policy_id, **variant.scenario}),
           "disk_physical_ios": [30, 30], "disk_utilization": [0.25, 0.25]}
    base_sim = {**sim, "scenario_id": "as-traced", "disk_physical_ios": [60, 0], "disk_utilization": [0.5, 0.0]}
    fields = dict(target=tgt, variant=variant, description="greedy", window={"window_id": "all", "start_us": 0,
                  "end_us": 60_000_000, "requests": 60}, tables={"requests": 1, "policy_scores": 3, "sim_results": 3},
                  score=score, baseline=baseline, sim=sim, baseline_sim=base_sim,
                  validation={"available": True, "method": "m", "spec": SPEC.name, "demerit_ms": 0.5, "reason": None,
                              "per_device": [{"device": "a", "requests": 60, "measured_mean_ms": 15.0,
                                              "simulated_mean_ms": 15.2, "demerit_ms": 0.5}]},
                  created_at=NOW, budget=NO_BUDGET)
    return PlanInputs(**{**fields, **changes})


SWAP = ExtentMap((Extent(0, 4, 0, 0), Extent(4, 4, 1, 0), Extent(8, 4, 0, 4), Extent(12, 4, 1, 4)))


@pytest.fixture(scope="module")
def doc():
    return build_plan(inputs(), extent_migration_steps(target(8, 8), SWAP))


def test_a_plan_over_its_budget_is_not_worth_it_and_says_why():
    over = build_plan(inputs(budget=MoveBudget()), extent_migration_steps(target(8, 8), SWAP))
    assert (over["status"], over["steps"], over["summary"]["bytes_to_move"]) == ("not_worth_it", [], 0)
    # a1 and b0 change places (a1 staged in a's free space first): half of each volume moves.
    assert over["reason"] == ("greedy:2KiB,heat=1: not worth running: moves 50.0% of volume a, over the 10% budget; "
                              "moves 50.0% of volume b, over the 10% budget (for +25.0% mean response over window "
                              "all); no moves are proposed")
    cost = over["cost_benefit"]                       # the proposal's figures stay for review
    assert (cost["n_moves"], cost["bytes_to_move"], cost["idle"]) == (3, 6144, {"measured": False})
    assert cost["benefit"]["saved_response_s_per_window"] == pytest.approx(60 * 7.5 / 1000)
    validate_plan_document(over)


def test_plan_id_is_the_hash_of_the_canonical_document(doc):
    body = {k: v for k, v in doc.items() if k != "plan_id"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert doc["plan_id"] == hashlib.sha256(text.encode()).hexdigest()
    assert build_plan(inputs(), extent_migration_steps(target(8, 8), SWAP)) == doc        # stable across runs
    later = build_plan(inputs(created_at=NOW + dt.timedelta(days=1)), extent_migration_steps(target(8, 8), SWAP))
    assert (later["content_id"], later["plan_id"] != doc["plan_id"]) == (doc["content_id"], True)
    assert (doc["created_at"], doc["valid_until"], doc["status"], doc["reason"]) == \
           ("2026-01-02T03:04:05Z", "2026-01-03T03:04:05Z", "proposed", None)
    # a: the staging copy reads and writes it, b0 arrives, a1 leaves from the staging place; b: b0 out, a1 in.
    assert doc["summary"]["per_disk"] == [{"device": "a", "bytes_in": 4096, "bytes_out": 4096},
                                          {"device": "b", "bytes_in": 2048, "bytes_out": 2048}]
    assert (doc["summary"]["bytes_to_move"], doc["summary"]["heat_balance"]["before"]["per_disk"],
            doc["summary"]["heat_balance"]["before"]["max_over_mean"],
            doc["summary"]["heat_balance"]["after"]["max_over_mean"]) == (6144, [1.0, 0.0], 2.0, 1.0)


def with_field(doc, path, value):
    """A deep copy of the document with the field at `path` (keys and list indexes) set to `value`."""
    out = copy.deepcopy(doc)
    place = out
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return out


@pytest.mark.parametrize(("path", "value"), [
    (("steps", 1, "bytes"), 4096), (("valid_until",), "2027-01-01T00:00:00Z"), (("status",), "no_improvement"),
    (("evidence", "predicted", "mean_response_ms"), 1.0), (("inputs", "tables", "requests"), 2),
])
def test_any_edit_changes_the_hash_and_the_check_refuses_it(doc, path, value):
    edited = with_field(doc, path, value)
    problems = check_plan(edited, now=NOW, versions={"requests": 1, "policy_scores": 3, "sim_results": 3})
    assert problems[0].startswith("hash mismatch: the document hashes to ")
    assert problems[0].endswith(f"it claims {doc['plan_id']} (edited after it was built)")


def test_check_refuses_stale_and_oversized_plans(doc):
    current = {"requests": 1, "policy_scores": 3, "sim_results": 3}
    assert check_plan(doc, now=NOW, versions=current) == []
    # versions: the latest version changing the plan's rows, which may be older than the one it read.
    assert check_plan(doc, now=NOW, versions={**current, "requests": 0}) == []
    assert check_plan(doc, now=NOW + dt.timedelta(hours=25), versions={**current, "sim_results": 4}) == [
        "stale: valid until 2026-01-03T03:04:05Z, now 2026-01-03T04:04:05Z",
        "stale: input table sim_results changed since the plan read it (read version 3, changed in version 4)"]
    assert check_plan(doc, now=NOW, versions={"requests": 1, "policy_scores": 3}) == [
        "stale: input table sim_results changed since the plan read it (read version 3, now gone or recreated)"]
    # A plan over the byte limit is not worth running when built; a document claiming more bytes than its limit
    # (however it came to be) is refused by the check too.
    small = build_plan(inputs(limits=SafetyLimits(max_bytes=4096)), extent_migration_steps(target(8, 8), SWAP))
    assert (small["status"], small["steps"]) == ("not_worth_it", [])
    assert "moves 6,144 bytes, over the 4,096-byte safety limit" in small["reason"]
    edited = {**doc, "safety": {**doc["safety"], "max_bytes": 4096, "within_limits": False}}
    assert check_plan(edited, now=NOW, versions=current)[1:] == ["over limit: moves 6144 bytes, the limit is 4096"]


def test_a_plan_without_enough_improvement_explains_itself():
    plan = build_plan(inputs(improvement=0.004), extent_migration_steps(target(8, 8), SWAP))
    assert (plan["status"], plan["steps"], plan["summary"]["n_steps"], plan["summary"]["bytes_to_move"]) == \
           ("no_improvement", [], 0, 0)
    assert plan["reason"] == ("greedy:2KiB,heat=1: simulated mean response 29.88 ms against 30 ms as traced over "
                              "window all (+0.4%), below the minimum improvement of 1.0%; no moves are proposed")
    saturated = build_plan(inputs(score={**inputs().score, "saturated": True, "mean_response_ms": float("inf")}),
                           PlanPart([], {}))
    assert saturated["reason"] == ("greedy:2KiB,heat=1 saturates the array in the simulator over window all; "
                                   "no moves are proposed")
    assert saturated["evidence"]["predicted"]["mean_response_ms"] is None        # JSON has no infinity


def test_plan_document_matches_the_json_schema_by_both_validators(doc):
    jsonschema.Draft202012Validator.check_schema(PLAN_JSON_SCHEMA)
    jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA).validate(doc)
    validate_plan_document(doc)
    bad = copy.deepcopy(doc)
    bad["steps"][0]["bytes"] = -1
    bad["steps"][2]["step_type"] = "teleport"
    del bad["safety"]["max_bytes"]
    with pytest.raises(PlanDocumentError, match=r"^plan\.steps\[0\]\.bytes: -1 is less than the minimum 1; "
                                                r"plan\.steps\[2\]\.step_type: 'teleport' is not one of \["
                                                r"'migrate_extent', .*; plan\.safety: missing 'max_bytes'$"):
        validate_plan_document(bad)
    assert len(list(jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA).iter_errors(bad))) == 3


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_export_round_trips(doc, tmp_path, fmt):
    path = write_plan(doc, tmp_path / f"plan.{fmt}", fmt)
    back = read_plan(path, stored={doc["plan_id"]: doc}.__getitem__)        # a CSV's header: the stored plan's
    assert back == doc
    assert canonical_json(back) == canonical_json(doc)
    assert check_plan(back, now=NOW, versions={"requests": 1, "policy_scores": 3, "sim_results": 3}) == []
    jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA).validate(back)


def test_csv_export_is_the_steps_table_and_bad_files_are_named(doc, tmp_path):
    path = write_plan(doc, tmp_path / "plan.csv", "csv")
    lines = path.read_text().splitlines()
    assert lines[0].split(",") == list(reorg_plan_steps.COLUMNS)
    assert lines[1] == (f"t,{doc['plan_id']},0,stage,group-0,a,2048,a,4096,2048,,1,,,,"
                        "copied to free space first: its move is on a cycle")
    assert lines[3].startswith(f"t,{doc['plan_id']},2,migrate_extent,group-0,a,4096,b,0,2048,0;1,1,")
    broken = tmp_path / "broken.csv"
    broken.write_text("\n".join([lines[0], lines[1].replace(",2048,", ",lots,", 1)]) + "\n")
    with pytest.raises(PlanError, match=rf"{broken}: line 2: column source_offset_bytes: 'lots' is not a long"):
        read_plan(broken, stored=lambda plan_id: doc)
    with pytest.raises(PlanError, match=r"plan\.txt: unknown plan format 'txt'"):
        read_plan(tmp_path / "plan.txt")


def test_plan_rows_match_the_tables(doc):
    row, steps = plan_rows(doc)
    assert (row["plan_id"], row["n_steps"], row["bytes_to_move"], row["improvement_mean"],
            row["validation_demerit_ms"], json.loads(row["plan_json"])) == (doc["plan_id"], 3, 6144, 0.25, 0.5, doc)
    assert [tuple(s[c] for c in ("step", "step_type", "depends_on")) for s in steps] == \
           [(0, "stage", []), (1, "migrate_extent", [0]), (2, "migrate_extent", [0, 1])]
    assert set(steps[0]) == set(reorg_plan_steps.COLUMNS)


def test_step_rejects_unknown_types():
    with pytest.raises(PlanError, match=r"step type 'teleport': use one of \['migrate_extent', "):
        Step("teleport", "g", "a", 0, "b", 0, 512)


def test_cli_prints_the_plan_schema_and_names_bad_plan_words(capsys):
    from blockheat.jobs.cli.main import main

    assert main(["plan", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == PLAN_JSON_SCHEMA
    assert main(["plan", "export"]) == 2
    assert capsys.readouterr().err == "blockheat: error: plan export needs exactly one PLAN_ID, got []\n"
    assert main(["plan", "t", "extra"]) == 2
    assert capsys.readouterr().err == ("blockheat: error: plan t extra: expected TRACE_ID, check PLAN_ID, export "
                                       "PLAN_ID or schema\n")


def test_every_familys_detail_matches_the_schema():
    moves = [move(10.0, 5, 0, 0, 1, 100), move(20.0, 7, 0, 8, 0, 0, sectors=4)]
    validator = jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA)
    for part in (cooling_steps(target(200, 200), moves), restripe_steps(target(8, 4), unit_sectors=2, width=2)):
        plan = build_plan(inputs(target=target(200, 200)), part)
        validator.validate(plan)
        assert (plan["status"], plan["detail"], plan["summary"]["n_steps"]) == ("proposed", part.detail,
                                                                                len(part.steps))
    assert plan["detail"]["striping"][1]["bytes_moved"] == 2048


# --- ALIS and track alignment ------------------------------------------------------------------------------------


def alis_window_plan(directory):
    from blockheat.sim.alis.plan import WindowPlan, volumes_for

    volumes, dv, do = volumes_for([1000, 800], concatenated=False, ra_share=0.15, ra_offset=0.30)
    return WindowPlan(3, directory, volumes, ("a", "b"), ("a", "b"), dv, do, 512)


def test_alis_lookaside_directory_becomes_area_and_copy_steps():
    from blockheat.sim.redirect import REGION_HEAT, REGION_RUN, Directory

    # Volumes of 1000 and 800 sectors: areas of 150 and 120 sectors at 300 and 240 (15 % at 30 %).
    # Copies on a: run 4 = units 7 (area 0) and 9 (area 8), unit 7 again in the heat region (area 24); on b:
    # unit 2 (heat, area 0). Listed out of order: runs first, by run and area offset, then heat.
    d = Directory(volume=[0, 1, 0, 0], region=[REGION_HEAT, REGION_HEAT, REGION_RUN, REGION_RUN],
                  run_id=[-1, -1, 4, 4], unit_id=[7, 2, 9, 7], home_sector=[500, 700, 20, 500],
                  sectors=[8, 4, 16, 8], ra_sector=[24, 0, 8, 0])
    part = alis_steps(target(1000, 800), alis_window_plan(d), interval_s=900.0)
    assert [(s.step_type, s.group_id, s.source_device, s.source_offset_bytes, s.dest_offset_bytes, s.bytes,
             s.depends_on, s.extent) for s in part.steps] == [
        ("create_area", "a:area", "a", 300 * 512, 450 * 512, 700 * 512, (), None),   # a's home 300..1000 up 150
        ("copy_run", "a:run-4", "a", 500 * 512, 300 * 512, 4096, (0,), 7),
        ("copy_run", "a:run-4", "a", 20 * 512, 308 * 512, 8192, (0,), 9),
        ("copy_heat_unit", "a:heat", "a", 500 * 512, 324 * 512, 4096, (0,), 7),
        ("create_area", "b:area", "b", 240 * 512, 360 * 512, 560 * 512, (), None),
        ("copy_heat_unit", "b:heat", "b", 700 * 512, 240 * 512, 2048, (4,), 2),
    ]
    assert all(s.source_device == s.dest_device for s in part.steps)
    assert part.lookaside == [
        {"device": "a", "volume_bytes": 512_000, "ra_start_bytes": 153_600, "ra_bytes": 76_800,
         "ra_used_bytes": 16_384},
        {"device": "b", "volume_bytes": 409_600, "ra_start_bytes": 122_880, "ra_bytes": 61_440, "ra_used_bytes": 2048}]
    plan = build_plan(inputs(target=target(1000, 800)), part)
    jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA).validate(plan)
    # The exported lookaside directory is the planner's (Directory.to_arrow, in bytes), one entry per copy step.
    expected = sorted(alis_window_plan(d).to_arrow().to_pylist(), key=lambda r: (r["device"], r["region"] != "run",
                                                                                 r["ra_offset_bytes"]))
    assert [{k: v for k, v in e.items() if k != "step"} for e in plan["lookaside"]["entries"]] == expected
    assert [e["step"] for e in plan["lookaside"]["entries"]] == [1, 2, 3, 5]
    assert plan["summary"]["bytes_to_move"] == (700 + 560) * 512 + 4096 + 8192 + 4096 + 2048
    with pytest.raises(PlanError, match=r"ALIS plan volumes \['a', 'b'\] are not the target's devices \['x', 'y'\]"):
        alis_steps(target(1000, 800, devices=("x", "y")), alis_window_plan(d), interval_s=900.0)


def _repeating_reads():
    """Device a reads ten 8-sector units (sectors 100, 160, ..., 640) in order, then b one unit, every 1.1 s,
    twelve times (13.2 s): with 6 s intervals the window ends in interval 2, so the plan serves interval 3."""
    import pyarrow as pa

    rows, t = [], 0
    for _ in range(12):
        for i in range(10):
            rows.append(("a", t, 100 + 60 * i))
            t += 100_000
        rows.append(("b", t, 300))
        t += 100_000
    return pa.table({"device": [r[0] for r in rows], "seq": list(range(len(rows))), "ts_us": [r[1] for r in rows],
                     "op": ["R"] * len(rows), "offset_bytes": [r[2] * 512 for r in rows],
                     "size_bytes": [4096] * len(rows)})


@pytest.fixture(scope="module")
def alis_doc():
    tgt = target(1000, 800)
    variant = next(v for v in FAMILIES["alis"].variants(tgt, WindowStats(13.2, 132, 4096.0),
                                                        SweepOptions(alis_interval_s=6.0))
                   if v.policy_id == "alis:combined")
    part = FAMILIES["alis"].plan(Outcome(variant, tgt, requests=_repeating_reads()))
    return build_plan(inputs(target=tgt, variant=variant, description="alis"), part)


def test_an_alis_area_after_the_volume_moves_only_copies():
    # --alis-area-offsets 1: the same copies, no create_area step, and the variant says where its area is.
    tgt = target(1000, 800)
    variants = FAMILIES["alis"].variants(tgt, WindowStats(13.2, 132, 4096.0),
                                         SweepOptions(alis_interval_s=6.0, alis_ra_offsets=(0.3, 1.0)))
    assert [v.policy_id for v in variants] == ["alis:heat", "alis:run", "alis:combined", "alis:heat,area@1",
                                               "alis:run,area@1", "alis:combined,area@1"]
    variant = variants[-1]
    assert variant.scenario["policy"]["ra_offset"] == 1.0
    doc = build_plan(inputs(target=tgt, variant=variant, description="alis"),
                     FAMILIES["alis"].plan(Outcome(variant, tgt, requests=_repeating_reads())))
    # The same 19 copies as at 30 % (test below), the areas starting at sector 1000 of a and 800 of b.
    assert [s["step_type"] for s in doc["steps"]] == ["copy_run"] * 10 + ["copy_heat_unit"] * 9
    assert [s["dest_offset_bytes"] // 512 for s in doc["steps"][:10]] == [1000 + 8 * i for i in range(10)]
    assert doc["steps"][-1]["dest_offset_bytes"] // 512 == 800
    assert (doc["detail"]["alis"]["create_area_bytes"], doc["summary"]["bytes_to_move"]) == (0, 19 * 4096)
    with pytest.raises(PolicyError, match=r"ALIS area offsets must be in \[0, 1\], got \[1.5\]"):
        SweepOptions(alis_ra_offsets=(1.5,))


def test_alis_plan_on_a_small_window_round_trips(alis_doc, tmp_path):
    doc = alis_doc
    # Combined clustering: the ten units of a form run 0 (copied in run order), the hot units of a and b also go
    # to the heat region: a create_area per device first.
    kinds = [(s["step_type"], s["group_id"], s["depends_on"]) for s in doc["steps"]]
    assert kinds[0] == ("create_area", "a:area", [])
    assert kinds[1:11] == [("copy_run", "a:run-0", [0])] * 10
    assert [s["source_offset_bytes"] // 512 for s in doc["steps"][1:11]] == [100 + 60 * i for i in range(10)]
    assert [s["dest_offset_bytes"] // 512 for s in doc["steps"][1:11]] == [300 + 8 * i for i in range(10)]
    b_area = next(k for k, s in enumerate(doc["steps"]) if s["group_id"] == "b:area")
    assert doc["steps"][b_area + 1:] == [{**doc["steps"][b_area + 1], "step_type": "copy_heat_unit",
                                          "group_id": "b:heat", "source_offset_bytes": 300 * 512,
                                          "dest_offset_bytes": 240 * 512, "bytes": 4096, "depends_on": [b_area]}]
    assert doc["detail"]["alis"]["window"] == 3
    assert doc["detail"]["alis"]["run_copies"] == 10
    # Area 15 % of each volume at 30 %: a shifts its home data from sector 300 on (700 sectors), b from 240 (560).
    assert doc["detail"]["alis"]["create_area_bytes"] == (700 + 560) * 512
    copies = len(doc["steps"]) - 2                                 # 10 run copies, 9 heat copies
    assert (doc["detail"]["alis"]["run_copies"], doc["detail"]["alis"]["heat_copies"]) == (10, copies - 10) == (10, 9)
    assert doc["detail"]["alis"]["copy_bytes"] == copies * 4096
    assert doc["summary"]["bytes_to_move"] == (700 + 560) * 512 + copies * 4096
    assert len(doc["lookaside"]["entries"]) == len(doc["steps"]) - 2
    body = {k: v for k, v in doc.items() if k != "plan_id"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert doc["plan_id"] == hashlib.sha256(text.encode()).hexdigest()
    jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA).validate(doc)
    current = {"requests": 1, "policy_scores": 3, "sim_results": 3}
    for fmt in ("json", "csv", "parquet"):
        back = read_plan(write_plan(doc, tmp_path / f"plan.{fmt}", fmt), stored={doc["plan_id"]: doc}.__getitem__)
        assert back == doc
        assert check_plan(back, now=NOW, versions=current) == []
    header = pq.read_schema(tmp_path / "plan.parquet").metadata[PARQUET_KEY].decode()    # the copy rows: entries
    assert '"entries"' not in header
    assert '"areas"' in header
    edited = copy.deepcopy(doc)
    edited["lookaside"]["entries"][0]["ra_address_bytes"] += 512
    assert check_plan(edited, now=NOW, versions=current)[0].startswith("hash mismatch")


def test_track_alignment_plan_is_a_host_rule_per_device():
    # HP C2247A: zone 0 has 6925 tracks of 96 sectors (49,152 bytes); a device of 200 sectors spans 3 tracks.
    part = track_alignment_steps(target(200, 96 * 6925 + 10), tracks=2, merge_gap_ms=10.0)
    assert [(s.step_type, s.source_device, s.dest_device, s.bytes, s.unit_bytes, s.width) for s in part.steps] == [
        ("align_to_track", "a", "a", 102_400, 49_152, 2), ("align_to_track", "b", "b", (96 * 6925 + 10) * 512,
                                                            49_152, 2)]
    zones = part.detail["io_shaping"]["devices"]
    assert zones[0]["zones"] == [{"first_offset_bytes": 0, "track_bytes": 49_152, "tracks": 3}]
    assert [z["tracks"] for z in zones[1]["zones"]] == [6925, 1]
    assert zones[1]["zones"][1]["first_offset_bytes"] == 96 * 6925 * 512
    plan = build_plan(inputs(target=target(200, 96 * 6925 + 10)), part)
    jsonschema.Draft202012Validator(PLAN_JSON_SCHEMA).validate(plan)
    # No data moves: nothing to copy, no bytes in or out, and the safety limit cannot be crossed.
    assert (plan["status"], plan["summary"]["n_steps"], plan["summary"]["bytes_to_move"]) == ("proposed", 2, 0)
    assert {(d["bytes_in"], d["bytes_out"]) for d in plan["summary"]["per_disk"]} == {(0, 0)}
    assert plan["detail"]["io_shaping"]["rule"] == {"kind": "track-aligned", "tracks": 2, "merge_gap_ms": 10.0,
                                                    "spec": "HP C2247A"}

"""The Spark simulation stage (libs.simulation.stage) with the warehouse on an object store (tests/fake_store.py:
s3a://bucket/... on a local directory): the requests replayed from the table's files (URIs opened through
storage.filesystem in the tasks), the staged requests and the run's scratch on the store, the lanes' claims in a
local temporary directory of the driver's (a local master), the results committed to the store's tables."""
from __future__ import annotations

import dataclasses
import os
import shutil
from types import SimpleNamespace

import pytest

from blockheat.libs.io import storage, table_versions
from blockheat.libs.io import tables as T
from blockheat.libs.simulation.grid import parse_grid, plan_parts
from blockheat.libs.simulation.stage import _claims_dir, run, simulate_parts, stage_requests
from tests.builders import ingest
from tests.fake_store import fake_s3

TICKS_PER_S = 10_000_000
T0 = 128166372000000000
ANALYTIC = [(0, "Read", 0, 4096), (0, "Write", 4096, 4096), (1, "Write", 0, 8192), (2, "Read", 0, 4096)]
CONSTANT = {"spec": "hp_c2247a", "service": "constant", "constant_ms": 10}
TRACE = "sim-remote"


@pytest.fixture(scope="module")
def local_warehouse(spark, spark_cfg, tmp_path_factory):
    """The ANALYTIC trace (tests/jobs/test_simulate.py) ingested into a warehouse of its own."""
    root = tmp_path_factory.mktemp("sim-remote")
    path = root / "fix_0.csv"
    path.write_text("".join(f"{T0 + s * TICKS_PER_S},fix,0,{op},{off},{size},100\n" for s, op, off, size in ANALYTIC))
    cfg = dataclasses.replace(spark_cfg, warehouse=root / "wh")
    ingest(spark, cfg, "msr", TRACE, [path])
    return cfg


@pytest.fixture
def remote(local_warehouse, tmp_path, monkeypatch):
    """The local warehouse's traces and requests tables copied to the fake store; a config on its URI."""
    store = fake_s3(monkeypatch, tmp_path / "s3")
    monkeypatch.setattr(T, "registers_names", lambda spark: False)     # no Spark catalog entry on the fake store
    wh = store.url("wh")
    for name in ("traces", "requests"):
        shutil.copytree(local_warehouse.warehouse / name, store.local(storage.join(wh, name)))
    return store, dataclasses.replace(local_warehouse, warehouse=wh)


GRID = {"grid_id": "remote", "traces": [TRACE],
        "scenarios": [{"scenario_id": "one-disk", **CONSTANT, "disks": 1},
                      {"scenario_id": "striped", **CONSTANT, "disks": 2,
                       "layout": {"kind": "striped", "unit_sectors": 8}},
                      {"scenario_id": "detailed", "spec": "hp_c2247a", "interval_ms": 500, "seed": 7, "disks": 2}]}


def test_simulate_with_an_object_store_warehouse(spark, local_warehouse, remote):
    store, cfg = remote
    grid = parse_grid(GRID, source="test")
    summary = run(spark, cfg, grid)
    got = {r["scenario_id"]: r for r in summary.results}
    assert [(got[s]["requests"], got[s]["mean_response_ms"]) for s in ("one-disk", "striped")] == [(4, 12.5), (4, 10.0)]
    assert table_versions.table_version(cfg.warehouse, "sim_results") is not None
    stored = T.rows_from_log(cfg.warehouse, "sim_results", TRACE)
    assert sorted(r["scenario_id"] for r in stored) == ["detailed", "one-disk", "striped"]
    assert (store.local(cfg.warehouse) / "sim_results" / "_delta_log").is_dir()
    assert list(storage.files_under(storage.join(cfg.warehouse, "_scratch"))) == []        # scratch removed
    # the same results as on the local warehouse
    local = {r["scenario_id"]: r for r in run(spark, local_warehouse, grid).results}
    assert got == local


def test_staged_requests_and_claimed_parts_on_an_object_store(spark, local_warehouse, remote):
    """stage_requests writes to the store (tasks), its leftovers listed and deleted there; lanes taking parts
    from a claims queue in a local temporary directory read the staged objects through the store."""
    from blockheat.libs.io.tables import read_table

    store, cfg = remote
    grid = parse_grid(GRID, source="test")
    parts = plan_parts(grid, {TRACE: {"devices": ["fix_0"], "geometry": []}})
    requests = read_table(spark, local_warehouse.warehouse, "requests", TRACE)
    scratch = storage.join(cfg.warehouse, "_scratch", "stage-test")
    staged = stage_requests(requests, scratch)
    files = staged[(TRACE, "fix_0")]
    assert files
    assert all(f.startswith("s3a://bucket/wh/_scratch/stage-test/part-") for f in files)
    assert sorted(p.name for p in store.local(scratch).iterdir()) == sorted(storage.name(f) for f in files)
    with _claims_dir(spark, scratch) as claims:
        assert claims is not None
        assert storage.is_local(claims)
        queued = simulate_parts(spark, staged, parts, claims=claims, lane_min_requests=0)
        assert sorted(int(p) for p in os.listdir(claims)) == list(range(len(parts)))
    located = simulate_parts(spark, staged, parts)
    assert queued.drop_columns(["wall_s"]).equals(located.drop_columns(["wall_s"]))
    assert set(located.column("requests").to_pylist()) == {4}
    # spilled from the store's objects to the lanes' local disks, replayed 2 requests at a time
    spilled = simulate_parts(spark, staged, parts, stream_min_requests=0, spill_rows=2)
    means = [n for n in located.column_names if n.startswith("mean_response_ms")]
    assert spilled.drop_columns(["wall_s", *means]).equals(located.drop_columns(["wall_s", *means]))
    for name in means:
        assert spilled.column(name).to_pylist() == pytest.approx(located.column(name).to_pylist(), rel=1e-12)


def test_claims_need_a_shared_local_directory(tmp_path):
    master = "spark://host:7077"
    cluster = SimpleNamespace(sparkContext=SimpleNamespace(master=master),
                              conf=SimpleNamespace(get=lambda key, default=None: master if key == "spark.master"
                                                   else default))
    with _claims_dir(cluster, "s3a://bucket/wh/_scratch/x") as claims:
        assert claims is None                             # the lanes simulate their own lists
    with _claims_dir(cluster, tmp_path) as claims:        # a local warehouse's scratch (shared on a cluster)
        assert claims == str(tmp_path / "claims")

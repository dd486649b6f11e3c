"""The nightly DAG's glue without Airflow or a JVM: manifests and their errors, landing scans (duplicates by
content), the trace day of a run, the ledger's ingest and re-analysis decisions, every stage's arguments
(checked against the jobs' own parsers), and Delta versions and row counts read from a table's history; the ledger,
digests and tables on an object store (tests/fake_store.py)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake.transaction import AddAction

from blockheat.libs import nightly as N
from blockheat.libs.io import delta_log, storage
from tests.fake_store import fake_s3

FORMATS = ("hp-srt", "msr")
NOW = dt.datetime(2026, 1, 7, tzinfo=dt.UTC)


def _landing(tmp_path, manifest=None, files=None):
    folder = tmp_path / "landing" / "tr1"
    folder.mkdir(parents=True)
    (folder / N.MANIFEST).write_text(json.dumps(manifest or {"format": "msr", "start_date": "2026-01-05"}))
    for name, content in ({"a.csv": b"A"} if files is None else files).items():
        (folder / name).write_bytes(content)
    return folder


def _settings(tmp_path, **extra):
    raw = {"landing_dir": str(tmp_path / "landing"), "warehouse": str(tmp_path / "wh"), **extra}
    return N.NightlySettings.from_mapping(raw, python="/venv/bin/python")


@pytest.mark.parametrize(("content", "message"), [
    (None, "has no manifest.json"),
    ("{not json", r"manifest.json: not JSON"),
    ('["hp-srt"]', "expected a JSON object, got list"),
    ('{"format": "hp-srt", "start_date": "2026-01-05", "zone": "UTC"}', r"unknown keys \['zone'\]"),
    ('{"format": "srt", "start_date": "2026-01-05"}', r"format 'srt' is not one of \['hp-srt', 'msr'\]"),
    ('{"format": "hp-srt", "start_date": "05/01/2026"}', "start_date '05/01/2026' is not a date YYYY-MM-DD"),
    ('{"format": "hp-srt", "start_date": "2026-01-05", "days": 0}', "days must be a positive integer, got 0"),
])
def test_manifest_errors_name_the_file(tmp_path, content, message):
    folder = tmp_path / "tr1"
    folder.mkdir()
    if content is not None:
        (folder / N.MANIFEST).write_text(content)
    with pytest.raises(N.LandingError, match=message) as err:
        N.read_manifest(folder, FORMATS)
    assert str(folder) in str(err.value)


def test_manifest_folder_name_must_be_a_trace_id(tmp_path):
    folder = tmp_path / "bad id"
    folder.mkdir()
    (folder / N.MANIFEST).write_text('{"format": "msr", "start_date": "2026-01-05"}')
    with pytest.raises(N.LandingError, match="the folder name is the trace id; invalid trace id 'bad id'"):
        N.read_manifest(folder, FORMATS)


def test_landing_keeps_distinct_contents_in_name_order(tmp_path):
    folder = _landing(tmp_path, files={"day-1.csv": b"second", "day-0.csv": b"first", "copy-of-0.csv": b"first",
                                       ".day-2.csv": b"partial", "_tmp.csv": b"x"})
    (folder / "old").mkdir()
    landing = N.scan_landing(folder, N.read_manifest(folder, FORMATS))
    # name order: copy-of-0 < day-0 < day-1, so the copy is kept and day-0 is its duplicate
    assert [f.path for f in landing.files] == [str(folder / "copy-of-0.csv"), str(folder / "day-1.csv")]
    assert landing.duplicates == ((str(folder / "day-0.csv"), str(folder / "copy-of-0.csv")),)
    assert landing.fingerprint == {"format": "msr", "sha256": [hashlib.sha256(b"first").hexdigest(),
                                                               hashlib.sha256(b"second").hexdigest()]}
    assert [f.size_bytes for f in landing.files] == [5, 6]


@pytest.mark.parametrize(("interval_start", "days", "day", "takes_part"), [
    (dt.date(2026, 1, 4), 2, -1, False),     # before the start date
    (dt.date(2026, 1, 5), 2, 0, True),
    (dt.date(2026, 1, 6), 2, 1, True),
    (dt.date(2026, 1, 7), 2, 2, False),      # past the trace's days
    (dt.date(2027, 1, 5), None, 365, True),  # open-ended
])
def test_trace_day_of_a_run(interval_start, days, day, takes_part):
    manifest = N.Manifest("t", "msr", dt.date(2026, 1, 5), days)
    assert manifest.day(interval_start) == day
    assert manifest.takes_part(day) is takes_part


def test_plan_ingests_once_and_reanalyses_only_on_change(tmp_path):
    folder = _landing(tmp_path, files={"day-0.csv": b"A"})
    settings = _settings(tmp_path)
    first, = N.plan_run(settings, dt.date(2026, 1, 5), now=NOW, formats=FORMATS)
    assert (first.trace_id, first.day, first.ingest, first.analyse) == ("tr1", 0, True, True)

    N.record_ledger(settings.warehouse, "tr1", "ingested", {"fingerprint": first.fingerprint})
    again, = N.plan_run(settings, dt.date(2026, 1, 5), now=NOW, formats=FORMATS)  # a retry of the same day
    assert (again.ingest, again.analyse) == (False, True)
    N.record_ledger(settings.warehouse, "tr1", "analysed", first.analysed)

    (folder / "day-0-again.csv").write_bytes(b"A")                 # the same file lands a second time
    second, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert (second.day, second.ingest, second.analyse) == (1, False, False)
    assert second.duplicates == ((str(folder / "day-0.csv"), str(folder / "day-0-again.csv")),)

    (folder / "day-1.csv").write_bytes(b"B")                       # the next day's file
    third, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert (third.ingest, third.analyse) == (True, True)
    # Only the new file, appended: the ingested ones are the first landed (by content).
    assert third.appends
    assert third.args["ingest_trace"] == [["--append", "--allow-overlap", "--format", "msr", "--trace-id", "tr1",
                                           str(folder / "day-1.csv")]]

    other_ks = _settings(tmp_path, tracking_ks=[10])               # new stage arguments, same data
    N.record_ledger(settings.warehouse, "tr1", "ingested", {"fingerprint": third.fingerprint})
    N.record_ledger(settings.warehouse, "tr1", "analysed", third.analysed)
    fourth, = N.plan_run(other_ks, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert (fourth.ingest, fourth.analyse) == (False, True)

    (folder / "day-0-again.csv").write_bytes(b"A2")              # an ingested file changed: the whole trace again
    fifth, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert (fifth.ingest, fifth.appends) == (True, False)
    assert fifth.args["ingest_trace"] == [["--format", "msr", "--trace-id", "tr1", str(folder / "day-0-again.csv"),
                                           str(folder / "day-0.csv"), str(folder / "day-1.csv")]]


def test_plan_skips_traces_not_due_and_refuses_a_due_trace_without_files(tmp_path):
    _landing(tmp_path, manifest={"format": "msr", "start_date": "2026-01-05", "days": 1}, files={})
    settings = _settings(tmp_path)
    assert N.plan_run(settings, dt.date(2026, 1, 4), now=NOW, formats=FORMATS) == []
    assert N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS) == []
    with pytest.raises(N.LandingError, match=r"tr1: trace day 0 is due \(start_date 2026-01-05\) but no data file"):
        N.plan_run(settings, dt.date(2026, 1, 5), now=NOW, formats=FORMATS)
    with pytest.raises(N.LandingError, match=r"landing directory .*/nowhere does not exist"):
        N.plan_run(_settings(tmp_path, landing_dir=str(tmp_path / "nowhere")), dt.date(2026, 1, 5), now=NOW,
                   formats=FORMATS)


def test_a_landed_file_is_hashed_once_until_it_changes(tmp_path, monkeypatch):
    """plan_run records each file's SHA-256 under the warehouse and later runs reuse it while the file's size,
    times and inode are unchanged; a file rewritten in place (same size, modification time set back) is hashed
    again, as is every file when the record is damaged."""
    import os

    folder = _landing(tmp_path, files={"a.csv": b"AAAA", "b.csv": b"BBBB"})
    settings = _settings(tmp_path)
    hashed = []
    real = N._sha256
    monkeypatch.setattr(N, "_sha256", lambda path: hashed.append(path.name) or real(path))
    first, = N.plan_run(settings, dt.date(2026, 1, 5), now=NOW, formats=FORMATS)
    assert hashed == ["a.csv", "b.csv"]
    assert first.fingerprint["sha256"] == [hashlib.sha256(b"AAAA").hexdigest(), hashlib.sha256(b"BBBB").hexdigest()]
    again, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert hashed == ["a.csv", "b.csv"]                                  # nothing read
    assert again.fingerprint == first.fingerprint
    assert again.ingest                                                  # (nothing recorded an ingest yet)
    stat = (folder / "a.csv").stat()
    (folder / "a.csv").write_bytes(b"CCCC")
    os.utime(folder / "a.csv", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and modification time
    third, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert hashed == ["a.csv", "b.csv", "a.csv"]
    assert third.fingerprint["sha256"][0] == hashlib.sha256(b"CCCC").hexdigest()
    (tmp_path / "wh" / N.DIGESTS).write_text("{damaged")
    fourth, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    assert hashed == ["a.csv", "b.csv", "a.csv", "a.csv", "b.csv"]
    assert fourth.fingerprint == third.fingerprint
    assert json.loads((tmp_path / "wh" / N.DIGESTS).read_text())[str(folder / "b.csv")]["sha256"] == \
        hashlib.sha256(b"BBBB").hexdigest()


def test_stage_arguments_of_a_day(tmp_path):
    folder = _landing(tmp_path, files={"b.csv": b"B", "a.csv": b"A"})
    settings = _settings(tmp_path, tracking_ks=[5, 10], tracking_eval={"extents": 4, "end_s": 70.0},
                         scorecard_args=["--families", "striped"], plan_policies=["best", "greedy"])
    plan, = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)
    wh = tmp_path / "wh"
    assert plan.args == {
        "ingest_trace": [["--format", "msr", "--trace-id", "tr1", str(folder / "a.csv"), str(folder / "b.csv")]],
        "extent_heat": [["tr1"]],
        "heat_tracking": [["tr1", "--eval", "--ks", "5,10", "--eval-extents", "4", "--eval-end", "70.0"]],
        "trace_profile": [["tr1"]],
        "heat_report": [["tr1", "--out", str(wh / "reports" / "tr1")]],
        "aged_heat": [["tr1", "--interval-index", "1"]],
        "alis_graph": [["tr1", "--interval-index", "1", "--no-runs"]],
        "alis_layout": [["tr1"]],
        "policy_scores": [["--trace-id", "tr1", "--window", "86400:172800", "--families", "striped"]],
        "reorg_plan": [["--trace-id", "tr1", "--policy", p, "--window", "86400:172800", "--now",
                        "2026-01-07T00:00:00+00:00", N.PLAN_EXPORT_OPTION, str(wh / "exports" / "tr1")]
                       for p in ("best", "greedy")],
    }


def test_stage_kwargs_per_stage(tmp_path):
    _landing(tmp_path)
    settings = _settings(tmp_path, plan_policies=["best", "greedy"])
    plan, = N.plan_run(settings, dt.date(2026, 1, 5), now=NOW, formats=FORMATS)
    options = N.submit_options(settings, ["file:///j/delta.jar", "file:///j/storage.jar"])
    assert options == {"conf": {}, "jars": "file:///j/delta.jar,file:///j/storage.jar",
                       "env_vars": {"BLOCKHEAT_WAREHOUSE": str(tmp_path / "wh"), "PYSPARK_PYTHON": "/venv/bin/python",
                                    "PYSPARK_DRIVER_PYTHON": "/venv/bin/python"}}
    fresh = N.stage_kwargs([plan], options)
    assert {s: len(k) for s, k in fresh.items()} == {s: 2 if s == "reorg_plan" else 1 for s in N.STAGES}
    assert fresh["aged_heat"][0] == {"application_args": ["tr1", "--interval-index", "0"],
                                     "name": "blockheat-aged_heat-tr1", **options}
    unchanged = N.TracePlan(**{**plan.__dict__, "ingest": False, "analyse": False})
    assert {s for s, k in N.stage_kwargs([unchanged], options).items() if k} == set(N.INTERVAL_STAGES)
    without_cache = N.submit_options(settings, None)
    assert without_cache["packages"] == N.delta_package()
    assert N.delta_package().startswith("io.delta:delta-spark_4.2_2.13:")


@pytest.mark.parametrize(("raw", "message"), [
    ({"warehouse": "/wh"}, r"\['landing_dir'\] must be set"),
    ({"landing_dir": "land", "warehouse": "/wh"}, r"\['landing_dir'\] must be absolute paths"),
    ({"landing_dir": "/l", "warehouse": "/wh", "tracking_ks": [0]}, "tracking_ks must be a list of positive"),
    ({"landing_dir": "/l", "warehouse": "/wh", "tracking_eval": {"k": 1}}, "tracking_eval keys are"),
    ({"landing_dir": "/l", "warehouse": "/wh", "plan_policies": []}, "plan_policies is empty"),
    ({"landing_dir": "/l", "warehouse": "/wh", "landing": "/x"}, r"unknown keys \['landing'\]"),
])
def test_settings_errors_name_the_variable(raw, message):
    with pytest.raises(N.SettingsError, match=f"Airflow Variable blockheat_nightly: {message}"):
        N.NightlySettings.from_mapping(raw, python="python")


def test_ledger_round_trip_and_damage(tmp_path):
    assert N.read_ledger(tmp_path, "t") == {}
    N.record_ledger(tmp_path, "t", "ingested", {"fingerprint": {"sha256": ["x"]}})
    N.record_ledger(tmp_path, "t", "analysed", {"fingerprint": {"sha256": ["x"]}, "args": {}})
    assert N.read_ledger(tmp_path, "t") == {"trace_id": "t", "ingested": {"fingerprint": {"sha256": ["x"]}},
                                            "analysed": {"fingerprint": {"sha256": ["x"]}, "args": {}}}
    assert [p.name for p in (tmp_path / N.LEDGER_DIR).iterdir()] == ["t.json"]     # no temporary file left
    N.ledger_path(tmp_path, "t").write_text("{")
    with pytest.raises(N.LandingError, match=r"ledger .*t\.json is damaged"):
        N.read_ledger(tmp_path, "t")


def test_stage_arguments_parse_with_the_jobs_own_parsers(tmp_path, monkeypatch):
    """Each stage's arguments through its job's main(): the job's config as the DAG means it (no session)."""
    import importlib

    _landing(tmp_path)
    settings = _settings(tmp_path, tracking_ks=[5], tracking_eval={"extents": 4, "change_s": 60, "end_s": 70},
                         scorecard_args=["--families", "striped"])
    args = N.plan_run(settings, dt.date(2026, 1, 6), now=NOW, formats=FORMATS)[0].args
    calls = {}
    entry = {"heat_tracking": "run_eval"}
    for stage in N.STAGES:
        module = importlib.import_module(f"blockheat.jobs.{stage}")
        monkeypatch.setattr(module, "build_session", lambda cfg: "session")
        monkeypatch.setattr(module, entry.get(stage, "run"),
                            lambda *a, _s=stage, **kw: calls.setdefault(_s, (a, kw)) and {"plan_id": "p1"})
    exported = []
    monkeypatch.setattr(importlib.import_module("blockheat.jobs.reorg_plan"), "export",
                        lambda doc, fmt, out: exported.append((doc["plan_id"], fmt, out)))
    for stage in N.STAGES:
        assert importlib.import_module(f"blockheat.jobs.{stage}").main(args[stage][0]) == 0, stage
    job = {stage: a[-1] if a else None for stage, (a, _) in calls.items()}
    assert job["ingest_trace"].paths == (str(tmp_path / "landing" / "tr1" / "a.csv"),)
    assert (job["extent_heat"].trace_id, job["extent_heat"].window_us) == ("tr1", 3_600_000_000)
    assert (job["aged_heat"].interval_index, job["aged_heat"].interval_us) == (1, 86_400_000_000)
    assert (job["alis_graph"].interval_index, job["alis_graph"].interval_us, job["alis_graph"].runs) == \
        (1, 86_400_000_000, False)
    assert job["alis_layout"].trace_id == "tr1"
    assert (job["policy_scores"].window, job["policy_scores"].families) == ("86400:172800", ("striped",))
    assert (job["reorg_plan"].policy, job["reorg_plan"].window, job["reorg_plan"].now) == ("best", "86400:172800", NOW)
    assert exported == [("p1", "json", str(tmp_path / "wh" / "exports" / "tr1" / "p1.json"))]
    tracking = calls["heat_tracking"][1]
    assert (calls["heat_tracking"][0][2], tracking["ks"], tracking["spec"].extents, tracking["spec"].change_s,
            tracking["spec"].end_s) == ("tr1", (5,), 4, 60.0, 70.0)
    assert calls["trace_profile"][0][2] == "tr1"
    assert calls["heat_report"][1]["out_dir"] == str(tmp_path / "wh" / "reports" / "tr1")


def _replace_commit(root, rows):
    """A blockheat replace of trace t (as libs.io.delta_files commits one): a file of `rows` rows, its metrics in
    the commit's blockheat.metrics."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"v": pa.array(range(rows), pa.int64())}), sink)
    data = sink.getvalue().to_pybytes()
    storage.write_bytes(storage.join(root, "trace_id=t", "part-r.parquet"), data)
    add = AddAction("trace_id=t/part-r.parquet", len(data), {"trace_id": "t"}, 0, True,
                    json.dumps({"numRecords": rows}))
    metrics = json.dumps({"numFiles": 1, "numOutputRows": rows})
    return delta_log.commit(root, [add], [], app_id="test t",
                            info={delta_log.REPLACE_KEY: "trace_id = 't'", "blockheat.metrics": metrics})


@pytest.mark.parametrize("remote", [False, True], ids=["local", "object-store"])
def test_delta_versions_and_rows_from_the_history(tmp_path, monkeypatch, remote):
    """Commits through delta-rs's history (libs.io.delta_log): a blockheat replace's rows from its
    blockheat.metrics, a delta-rs write's from num_added_rows; the same for a warehouse on an object store."""
    from deltalake import write_deltalake

    wh = fake_s3(monkeypatch, tmp_path / "s3").url("wh") if remote else str(tmp_path / "wh")
    root = storage.join(storage.normalize(wh), "t")
    assert N.delta_commits(root, None) == []
    schema = pa.schema([("trace_id", pa.string()), ("v", pa.int64())])
    assert delta_log.create_table(root, schema, ["trace_id"], {})                             # version 0
    write_deltalake(storage.delta_uri(root), pa.table({"trace_id": ["u"] * 398, "v": range(398)}, schema=schema),
                    mode="append", storage_options=storage.delta_options(root))               # version 1
    assert _replace_commit(root, 653) == 2
    commits = N.delta_commits(root, None)
    assert [(c["version"], c["rows_written"]) for c in commits] == [(0, 0), (1, 398), (2, 653)]
    assert [c["operation"] for c in commits][1:] == ["WRITE", "WRITE"]
    assert N.delta_commits(root, 0) == commits[1:]
    assert N.delta_commits(root, 2) == []
    assert N.table_changes(wh, {"t": 1, "missing": None}) == {"t": {"version": 2, "commits": 1, "rows_written": 653}}
    assert N.table_versions(wh, ("t", "missing")) == {"t": 2, "missing": None}
    if remote:
        assert (tmp_path / "s3" / "bucket" / "wh" / "t" / "_delta_log").is_dir()           # written to the store


def test_rows_written_of_each_kind_of_commit():
    assert N._rows_written({"operation": "WRITE", "operationMetrics": {"numOutputRows": "653"}}) == 653   # Spark
    assert N._rows_written({"operationMetrics": {"num_added_rows": 398}}) == 398                           # delta-rs
    assert N._rows_written({"blockheat.metrics": '{"numOutputRows": 27}', "operationMetrics": {}}) == 27
    assert N._rows_written({"blockheat.metrics": "{damaged", "operationMetrics": {"num_added_rows": 5}}) == 5
    assert N._rows_written({"operation": "OPTIMIZE", "operationMetrics": {}}) == 0
    assert N._rows_written({"operation": "CREATE TABLE"}) == 0


def test_ledger_and_digests_on_an_object_store(tmp_path, monkeypatch):
    """A URI warehouse: the ledger and the digests are objects of the store (one PUT each, no temporary object);
    the reports and exports default under the warehouse's URI; the landing directory stays local."""
    store = fake_s3(monkeypatch, tmp_path / "s3")
    wh = store.url("wh")
    assert N.ledger_path(wh, "t") == "s3a://bucket/wh/_nightly/ledger/t.json"
    assert N.read_ledger(wh, "t") == {}
    N.record_ledger(wh, "t", "ingested", {"fingerprint": {"sha256": ["x"]}})
    N.record_ledger(wh, "t", "analysed", {"fingerprint": {"sha256": ["x"]}, "args": {}})
    assert N.read_ledger(wh, "t") == {"trace_id": "t", "ingested": {"fingerprint": {"sha256": ["x"]}},
                                      "analysed": {"fingerprint": {"sha256": ["x"]}, "args": {}}}
    assert [p.name for p in store.local(f"{wh}/_nightly/ledger").iterdir()] == ["t.json"]
    store.local(N.ledger_path(wh, "t")).write_text("{")
    with pytest.raises(N.LandingError, match=r"ledger s3a://bucket/wh/_nightly/ledger/t\.json is damaged"):
        N.read_ledger(wh, "t")

    folder = _landing(tmp_path, files={"a.csv": b"AAAA"})
    settings = N.NightlySettings.from_mapping({"landing_dir": str(tmp_path / "landing"), "warehouse": f"{wh}/"},
                                              python="/venv/bin/python")
    assert (settings.warehouse, settings.reports_dir, settings.exports_dir) == (
        "s3a://bucket/wh", "s3a://bucket/wh/reports", "s3a://bucket/wh/exports")
    plan, = N.plan_run(settings, dt.date(2026, 1, 5), now=NOW, formats=FORMATS)
    assert plan.args["heat_report"] == [["tr1", "--out", "s3a://bucket/wh/reports/tr1"]]
    assert plan.args["reorg_plan"][0][-2:] == [N.PLAN_EXPORT_OPTION, "s3a://bucket/wh/exports/tr1"]
    assert N.submit_options(settings, ["j.jar"])["env_vars"]["BLOCKHEAT_WAREHOUSE"] == "s3a://bucket/wh"
    digests = json.loads(store.local(f"{wh}/{N.DIGESTS.as_posix()}").read_text())
    assert digests[str(folder / "a.csv")]["sha256"] == hashlib.sha256(b"AAAA").hexdigest()
    assert N.read_digests(wh) == digests


@pytest.mark.parametrize(("raw", "message"), [
    ({"landing_dir": "s3a://b/landing", "warehouse": "/wh"}, "landing_dir must be a local directory"),
    ({"landing_dir": "/l", "warehouse": "gs://b/wh"}, "unsupported location scheme 'gs'"),
    ({"landing_dir": "/l", "warehouse": "s3a:///wh"}, "an S3 location needs a bucket"),
])
def test_settings_location_errors(raw, message):
    with pytest.raises(N.SettingsError, match=f"Airflow Variable blockheat_nightly: .*{message}"):
        N.NightlySettings.from_mapping(raw, python="python")

"""The HTML report: every figure has labelled axes with units; the page embeds figures and tables, the summary
states its inputs' numbers, the scorecard and the plan show what their tables hold; the report job runs end to end
on a small ingested trace, written to a local directory or an object store (tests/fake_store.py); the distributions
from the files equal Spark SQL's; `blockheat heat` prints its summary. tests/libs/test_report_browser.py opens the
bundled trace's report in Chromium."""
from __future__ import annotations

import base64
import re

import numpy as np
import pyarrow as pa
import pytest

from blockheat.jobs.cli.main import main as cli_main
from blockheat.jobs.heat_report import CDF_POINTS, report_dir, spark_cdfs
from blockheat.jobs.heat_report import run as run_report
from blockheat.libs import report
from blockheat.libs.table_io.report import ALL_OPS, METRICS, device_cells, percentiles, report_cdfs
from blockheat.libs.transforms.profile import round_significant_np
from blockheat.libs.transforms.tracking_eval import StepSpec
from tests.builders import ingest, write_msr
from tests.conftest import HPLAJW_TRACE_ID
from tests.fake_store import fake_s3

HOUR = 3_600_000_000


@pytest.fixture
def captured(monkeypatch):
    figs = []

    def keep(fig):
        figs.append(fig)
        return b"png"

    monkeypatch.setattr(report, "_png", keep)
    return figs


def _inputs(**changes):
    disk_rows = [{"layout": layout, "layout_params": params, "window_start_us": w, "window_us": wu, "disk": d,
                  "requests": 2, "heat": h, "max_over_mean": m}
                 for layout, params in (("as-traced", ""), ("striped", "unit_bytes=65536,width=2"),
                                        ("random", "disks=2,seed=0"))
                 for w, wu, d, h, m in ((0, 0, "a", 2.0, 4 / 3), (0, 0, "b", 1.0, 4 / 3), (0, HOUR, "a", 2.0, 4 / 3),
                                        (0, HOUR, "b", 1.0, 4 / 3), (HOUR, HOUR, "a", 0.5, 1.0),
                                        (HOUR, HOUR, "b", 0.5, 1.0))]
    inputs = report.ReportInputs(
        trace={"trace_id": "t", "format": "msr", "records_accepted": 3, "records_rejected": 0, "reads": 2,
               "writes": 1, "bytes_read": 8192, "bytes_written": 4096, "span_us": 2 * HOUR, "devices": ["a", "b"],
               "start_time_source": None, "start_time_utc": None, "source_files": [{"path": "/x/t_0.csv"}]},
        heat_map=pa.Table.from_pylist([{"device": "a", "time_bin_us": 0, "addr_bin_bytes": 0, "heat": 2.0},
                                       {"device": "a", "time_bin_us": HOUR, "addr_bin_bytes": 1 << 20, "heat": 0.5},
                                       {"device": "b", "time_bin_us": 0, "addr_bin_bytes": 0, "heat": 1.0}]),
        heat_map_bins=(HOUR, 1 << 20),
        disk_heat=disk_rows,
        rates=[{"device": "a", "window_start_us": 0, "requests": 2, "bytes_read": 8192, "bytes_written": 0},
               {"device": "b", "window_start_us": HOUR, "requests": 1, "bytes_read": 0, "bytes_written": 4096}],
        rate_window_us=HOUR,
        cdfs={"size_bytes": {("a", "R"): [(512.0, 0.0), (4096.0, 1.0)], ("b", "W"): [(4096.0, 0.0), (4096.0, 1.0)]},
              "interarrival_us": {("a", "*"): [(10.0, 0.0), (100.0, 1.0)]}, "response_us": {}},
        tracking=[{"k": 5, "checkpoints": 10, "mean_relative_error": 0.5, "median_relative_error": 0.4,
                   "requests_to_90pct": 5.2, "stale_s_aging": 5.1, "stale_s_no_aging": None}],
        claims=[("quick to follow a rise", True, "k=5: 5.2 requests")],
        profile=[{"scope": "trace", "device": "*", "metric": "requests", "value": 3.0},
                 {"scope": "device", "device": "a", "metric": "requests", "value": 2.0},
                 {"scope": "trace", "device": "*", "metric": "size_bytes_p50", "value": 4096.0},
                 {"scope": "trace", "device": "*", "metric": "idle_1s_total_s", "value": 5400.0},
                 {"scope": "trace", "device": "*", "metric": "skew_x_pct", "value": 80.0},
                 {"scope": "trace", "device": "*", "metric": "skew_y_pct", "value": 20.0},
                 {"scope": "trace", "device": "*", "metric": "new_metric_bytes", "value": 3 * 2.0**20}],
        hottest_extents=[{"device": "a", "extent_id": 1, "heat": 0.5, "requests": 2}])
    for key, value in changes.items():
        setattr(inputs, key, value)
    return inputs


def test_every_figure_axis_has_a_label_with_units(captured):
    report.render(_inputs())
    assert len(captured) == 5      # load, disk heat, heat map, size and interarrival (no response times here)
    for fig in captured:
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                assert "blocks / s" in ax.get_ylabel()
                continue
            if ax.get_ylabel():
                assert re.search(r"\((requests / s|blocks / s|MiB)|MB/s|cumulative share|hottest / mean",
                                 ax.get_ylabel()), ax.get_ylabel()
            if ax.get_xlabel():
                assert re.search(r"\((hours|KiB|ms)[);]", ax.get_xlabel()), ax.get_xlabel()
    heat_map_axes = captured[2].axes
    assert [t.get_text() for a in heat_map_axes[:2] for t in a.texts] == ["device a", "device b"]
    assert heat_map_axes[1].get_xlabel() == "time since trace start (hours; absolute start not recorded)"
    grids = [a.images[0].get_array().filled(np.nan) for a in heat_map_axes[:2]]      # rows: address bins
    np.testing.assert_array_equal(grids[0], [[2.0, np.nan], [np.nan, 0.5]])
    np.testing.assert_array_equal(grids[1], [[1.0, np.nan]])
    assert (heat_map_axes[0].images[0].norm.vmin, heat_map_axes[0].images[0].norm.vmax) == (0.5, 2.0)
    disk_titles = [t.get_text() for a in captured[1].axes for t in a.texts]
    assert disk_titles == ["as traced: each device its own disk", "striped: 64 KiB stripe unit over 2 disks",
                           "random: each request on a disk picked by a hash, 2 disks (seed 0)",
                           "imbalance: hottest / mean disk heat per window (1 = even)"]
    size_ticks = [t.get_text() for t in captured[3].axes[0].get_xticklabels()]
    assert size_ticks == ["0.5", "1", "2", "4"]   # 512 B to 4 KiB, in KiB


def test_page_embeds_figures_and_tables():
    page, figures = report.render(_inputs())
    images = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(images) == len(figures) == 5
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "Not in this trace's format: response time." in page
    assert "<b>holds</b>" in page
    assert "never (within the test)" in page
    assert "<th>device a</th>" in page
    assert "<script" not in page
    assert [m for m in re.findall(r"<section id='(\w+)'>", page)] == [
        "summary", "load", "disks", "distributions", "scores", "plan", "profile", "tracking"]
    # the profile grouped, with units and readable numbers; an unknown metric under Other, by its unit
    assert re.findall(r"<h3>([^<]+)</h3>", page) == ["Rates and volume", "Request sizes",
                                                      "Interarrival and idle periods", "Skew", "Other"]
    assert "<td class='t'>request size, median</td><td>4 KiB</td>" in page
    assert "<td class='t'>time in idle periods longer than 1s</td><td>1.5 h</td>" in page
    assert "<td>80/20</td>" in page
    assert "<td class='t'>new_metric_bytes</td><td>3 MiB</td>" in page
    assert "Not scored yet" in page
    assert "No plan yet" in page


def test_summary_states_the_numbers_of_the_inputs():
    items = {i.key: i for i in report.summary(_inputs())}
    assert items["requests"].value == 3
    assert items["read_share_requests"].value == 2 / 3
    assert items["iops_mean"].value == 3 / 7200
    assert items["iops_peak_window"].value == 2 / 3600             # window 0: device a's 2 requests
    assert items["mbps_peak_window"].value == 8192 / 3600 / 1e6
    assert items["imbalance"].value == 4 / 3
    assert items["imbalance"].text == "as traced: 1.33; striped: 1.33; random: 1.33 (1 = even)"
    assert items["hottest_disk"].text == "a: 2 blocks/s (66.7% of the heat); b: 1 blocks/s (33.3% of the heat)"
    assert items["best_policy"].value is None
    assert items["best_policy"].text == "not scored (blockheat score t)"               # the trace's own id
    # 12,288 bytes over 2 h: 1.71 B/s (it read "mean 1.71e-06" in MB/s); the busiest hour 8,192 bytes: 2.28 B/s
    assert items["mbps_mean"].text == "mean 2 B/s; busiest 1 h: 2 B/s"


SCORE = {"trace_id": "t", "window_id": "all", "family": "greedy", "params_json": "{}", "window_start_us": 0,
         "window_end_us": 2 * HOUR, "window_requests": 3, "array_group": "all", "n_disks": 2, "spec": "hp335h",
         "scheduler": "clook", "speedup": 1.0, "grid_id": "g", "scenario_id": "s", "saturated": False,
         "p99_response_ms": 9.0, "mean_service_ms": 1.0, "mean_queue_ms": 1.0, "hottest_utilization": 0.001,
         "utilization_max_over_mean": 1.1, "migration_mb": 0.0, "remaps": 0, "baseline_mean_response_ms": 10.0,
         "baseline_p95_response_ms": 20.0, "plannable": True, "note": None}
PLAN = {"trace_id": "t", "plan_id": "p" * 64, "content_id": "c" * 64, "schema_version": 1,
        "created_at": "2026-01-02T03:04:05Z", "valid_until": "2026-01-03T03:04:05Z", "window_id": "all",
        "policy_id": "greedy:1MiB", "family": "greedy", "status": "proposed", "reason": None, "n_steps": 3,
        "bytes_to_move": 3 << 20, "predicted_mean_response_ms": 6.0, "baseline_mean_response_ms": 10.0,
        "improvement_mean": 0.4, "validation_demerit_ms": None, "plan_json": "{}"}


def test_scorecard_and_plan_show_what_exists_and_any_new_column():
    scores = [SCORE | {"rank": 2, "policy_id": "as-traced", "mean_response_ms": 10.0, "p95_response_ms": 20.0,
                       "improvement_mean": 0.0, "improvement_p95": 0.0},
              SCORE | {"rank": 1, "policy_id": "greedy:1MiB", "mean_response_ms": 6.0, "p95_response_ms": 12.0,
                       "improvement_mean": 0.4, "improvement_p95": 0.4, "move_time_s": 12.5}]
    steps = [{"step_type": "migrate_extent", "source_device": "a", "dest_device": "b", "steps": 3, "extents": 3,
              "bytes": 3 << 20}]
    page, _ = report.render(_inputs(scores=scores, plan=PLAN | {"idle_share_used": 0.25}, plan_steps=steps))
    items = {i.key: i for i in report.summary(_inputs(scores=scores, plan=PLAN))}
    assert items["best_policy"].value == "greedy:1MiB"
    assert items["best_policy"].text == ("greedy:1MiB (window all): mean response 6 ms against 10 ms as traced, "
                                         "gain 40%; its latest plan (proposed): 3 steps moving 3 MiB, "
                                         "predicted gain 40%")
    other = {i.key: i for i in report.summary(_inputs(scores=scores, plan=PLAN | {
        "policy_id": "incremental:1MiB", "status": "proposed", "reason": "greedy:1MiB moves more than the limit"}))}
    assert other["best_policy"].text.endswith("; the latest plan is for incremental:1MiB (proposed: greedy:1MiB moves "
                                              "more than the limit)")
    scorecard = page[page.index("<section id='scores'>"):page.index("<section id='plan'>")]
    assert scorecard.index(">greedy:1MiB<") < scorecard.index(">as-traced<")     # by rank
    assert "<th>move_time_s</th>" in scorecard
    assert "<td>12.5 s</td>" in scorecard
    plan = page[page.index("<section id='plan'>"):page.index("<section id='profile'>")]
    assert "<td class='t'>bytes moved</td><td>3 MiB</td>" in plan
    assert "<td class='t'>idle_share_used</td><td>25%</td>" in plan          # a cost column the table gains later
    assert "validation demerit" not in plan                                   # NULL: not shown
    assert "<td class='t'>migrate_extent</td><td class='t'>a</td><td class='t'>b</td><td>3</td>" in plan


def test_day_marks_fall_on_the_sources_midnights():
    trace = {"span_us": 2 * 86_400_000_000, "start_time_utc": None,
             "start_time_source": "1992-05-30T00:03:06 local time of h (zone not recorded)"}
    marks = report.day_marks(trace)
    assert [(round(h, 6), d.strftime("%a %Y-%m-%d")) for h, d in marks] == [
        (round(-186 / 3600, 6), "Sat 1992-05-30"), (round(24 - 186 / 3600, 6), "Sun 1992-05-31"),
        (round(48 - 186 / 3600, 6), "Mon 1992-06-01")]
    assert report.trace_start(trace).clock == "local time of h (zone not recorded)"
    assert report.day_marks({"span_us": 1, "start_time_utc": None, "start_time_source": None}) == []


def _small_trace(path):
    return write_msr(path, [(0, 0, "R", 0, 4096), (2_000_000, 0, "W", 1 << 20, 8192), (3_700_000_000, 1, "R", 0, 512),
                            (3_800_000_000, 0, "R", 4096, 4096), (7_300_000_000, 1, "W", 1 << 21, 4096)])


def test_report_job_end_to_end(spark, spark_cfg, tmp_path):
    ingest(spark, spark_cfg, "msr", "report-t", [_small_trace(tmp_path / "r_0.csv")])
    path = run_report(spark, spark_cfg, "report-t", out_dir=str(tmp_path / "out"), eval_ks=(5,),
                      eval_spec=StepSpec(extents=4, change_s=60.0, end_s=70.0))
    page = path.read_text()
    assert path.name == "report.html"
    assert sorted(p.name for p in path.parent.glob("*.png")) == [
        "disk_heat.png", "extent_heat_map.png", "interarrival_cdf.png", "load_over_time.png", "response_cdf.png",
        "size_cdf.png"]
    assert "<h1>Trace report-t</h1>" in page
    assert "<td class='t'>requests</td><td>5</td><td>3</td><td>2</td>" in page  # trace, device h_0, device h_1


def test_report_files_to_an_object_store(tmp_path, monkeypatch, captured):
    """write_report: the page and the figures as objects under a URI (one PUT each), or files in a local directory
    (created); the report's default place is <warehouse>/reports/TRACE_ID on the warehouse's file system."""
    from blockheat.libs.io.session import SparkConfig

    store = fake_s3(monkeypatch, tmp_path / "s3")
    page, figures = report.render(_inputs())
    where = report.write_report(store.url("wh/reports/t") + "/", page, figures)
    assert where == "s3a://bucket/wh/reports/t/report.html"
    assert store.local(where).read_text() == page
    assert sorted(p.name for p in store.local(where).parent.iterdir()) == [
        "disk_heat.png", "extent_heat_map.png", "interarrival_cdf.png", "load_over_time.png", "report.html",
        "size_cdf.png"]
    assert store.local("s3a://bucket/wh/reports/t/size_cdf.png").read_bytes() == b"png"
    local = report.write_report(tmp_path / "out" / "t", page, figures)
    assert local == (tmp_path / "out" / "t" / "report.html").resolve()
    assert local.read_text() == page
    assert report_dir(SparkConfig(warehouse="s3a://bucket/wh"), "t") == "s3a://bucket/wh/reports/t"
    assert report_dir(SparkConfig(warehouse=tmp_path / "wh"), "t") == str(tmp_path / "wh" / "reports" / "t")
    assert report_dir(SparkConfig(warehouse=tmp_path / "wh"), "t", "s3://b/r") == "s3://b/r"


def test_cli_heat_prints_hottest_extents_and_balance(spark, spark_cfg, tmp_path, capsys):
    ingest(spark, spark_cfg, "msr", "heat-cli", [_small_trace(tmp_path / "h_0.csv")])
    capsys.readouterr()
    assert cli_main(["heat", "heat-cli", "--window", "3600"]) == 0
    out = capsys.readouterr().out
    # whole trace (span 7300 s): extent 0 of h_0 has 8 + 8 blocks -> 16 / 7300 blocks/s
    assert re.search(r"h_0\s+0\s+2\s+16\s+0\.002192\s", out), out
    assert re.search(r"as-traced\s+2\s+3\s", out), out
    assert "tables: extent_heat, disk_heat" in out


def test_percentiles_weigh_each_value_by_its_count():
    # Four values once each: p50 at position 1.5 lies halfway between 2 and 3. Values 10 (3 times) and 20 (once):
    # p50 at position 1.5 has 10 on both sides; p90 at 2.7 is 0.3 x 10 + 0.7 x 20.
    assert percentiles(np.array([4.0, 1.0, 3.0, 2.0]), np.array([1, 1, 1, 1]), [0, 0.5, 1]) == [1.0, 2.5, 4.0]
    assert percentiles(np.array([20.0, 10.0]), np.array([1, 3]), [0.5, 0.9, 1]) == [10.0, 0.3 * 10 + 0.7 * 20, 20.0]


def test_device_cells_are_the_distinct_rounded_values_and_counts_of_rows_in_any_order():
    # Rows out of time order (gaps in (ts_us, seq) order), fractional, null and negative response times, three ops.
    rng = np.random.default_rng(5)
    n = 5_000
    ts = np.sort(rng.integers(0, 10 ** 9, n))
    response = np.where(rng.random(n) < 0.2, np.nan, rng.exponential(3e4, n) - 5)
    op = rng.choice(["R", "W", "T"], n)
    order = rng.permutation(n)
    rows = pa.table({"ts_us": ts[order], "seq": np.arange(n)[order], "op": op[order],
                     "size_bytes": (rng.integers(1, 300, n) * 512)[order],
                     "response_us": pa.array(response[order], from_pandas=True)})
    got = device_cells(rows, before_ts=-7)

    def unique(v):
        return np.unique(v, return_counts=True)

    want = {"interarrival_us": {ALL_OPS: unique(round_significant_np(np.diff(ts, prepend=-7).astype(float)))},
            "size_bytes": {o: unique(rows.column("size_bytes").to_numpy()[op[order] == o].astype(float))
                           for o in "RTW"},
            "response_us": {o: unique(round_significant_np(r[~np.isnan(r)]))
                            for o in "RTW" for r in [response[order][op[order] == o]]}}
    assert {m: sorted(c) for m, c in got.items()} == {m: sorted(c) for m, c in want.items()}
    for m in want:
        for o, (v, c) in want[m].items():
            assert got[m][o][0].tolist() == v.tolist(), (m, o)
            assert got[m][o][1].tolist() == c.tolist(), (m, o)


def test_report_distributions_from_the_files_equal_spark_sql_on_hplajw(spark, spark_cfg, hplajw):
    # The real week: 44,519 requests on 2 disks; every point of every distribution to the last bit.
    direct = report_cdfs(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID, CDF_POINTS)
    assert direct == spark_cdfs(spark, spark_cfg, HPLAJW_TRACE_ID)
    per_op = [("0", "R"), ("0", "W"), ("1", "R"), ("1", "W")]
    assert {m: sorted(direct[m]) for m in METRICS} == {
        "size_bytes": per_op, "response_us": per_op, "interarrival_us": [("0", "*"), ("1", "*")]}
    assert {len(points) for m in METRICS for points in direct[m].values()} == {201}
    assert direct["size_bytes"][("0", "W")][100] == (8192.0, 0.5)


def test_report_distributions_from_the_files_equal_spark_sql_on_ties_and_many_devices(spark, spark_cfg, tmp_path):
    # 3,000 requests on 5 disks with many equal timestamps (zero gaps), sizes from 512 B to 1 MiB, in two files of
    # one trace; the same points as Spark SQL's, and the direct path reads each device's files.
    rng = np.random.default_rng(5)
    rows = [(int(rng.integers(0, 400)) * 1000, int(rng.integers(0, 5)), "R" if rng.random() < 0.6 else "W",
             int(rng.integers(0, 1 << 20)) * 512, int(rng.choice([512, 4096, 8192, 65536, 1 << 20])))
            for _ in range(3000)]
    paths = [write_msr(tmp_path / "ties_0.csv", rows[:1500]), write_msr(tmp_path / "ties_1.csv", rows[1500:])]
    ingest(spark, spark_cfg, "msr", "report-ties", paths)
    direct = report_cdfs(spark, spark_cfg.warehouse, "report-ties", CDF_POINTS)
    assert direct == spark_cdfs(spark, spark_cfg, "report-ties")
    assert len(direct["interarrival_us"]) == 5
    assert len(direct["size_bytes"]) == 10
    assert all(points[0] == (0.0, 0.0) for points in direct["interarrival_us"].values())
    assert min(points[0][0] for points in direct["response_us"].values()) == 10.0


def test_heat_map_from_the_files_equals_spark_sql_on_hplajw(spark, spark_cfg, hplajw):
    # The real week on 2 disks: 1 h windows (under 400: 1 h time bins) and 1 MiB extents (under 512 in use: 1 MiB
    # address bins); every bin's heat to the last bit, and coarser bins checked against a plain sum.
    from blockheat.jobs import extent_heat as heat_job
    from blockheat.jobs.heat_report import EXTENT_BYTES, MAX_BINS, WINDOW_US, spark_heat_map
    from blockheat.libs.io.tables import read_table
    from blockheat.libs.table_io.report import heat_map_files

    heat_job.run(spark, spark_cfg, heat_job.HeatConfig(HPLAJW_TRACE_ID, EXTENT_BYTES, WINDOW_US))
    direct, bins = heat_map_files(spark_cfg.warehouse, HPLAJW_TRACE_ID, window_us=WINDOW_US,
                                  extent_bytes=EXTENT_BYTES, max_bins=MAX_BINS)
    sql, sql_bins = spark_heat_map(spark, spark_cfg, HPLAJW_TRACE_ID)
    keys = [("device", "ascending"), ("time_bin_us", "ascending"), ("addr_bin_bytes", "ascending")]
    assert bins == sql_bins == (HOUR, 1 << 20)
    assert direct.equals(sql.sort_by(keys).cast(direct.schema))
    assert direct.num_rows == 4537
    rows = read_table(spark, spark_cfg.warehouse, "extent_heat", HPLAJW_TRACE_ID).where(
        f"extent_bytes = {EXTENT_BYTES} AND window_us = {WINDOW_US}").collect()
    coarse, (t_bin, a_bin) = heat_map_files(spark_cfg.warehouse, HPLAJW_TRACE_ID, window_us=WINDOW_US,
                                            extent_bytes=EXTENT_BYTES, max_bins=(5, 3))
    assert t_bin == WINDOW_US * -(-(max(r.window_start_us for r in rows) // WINDOW_US + 1) // 5)
    assert a_bin == EXTENT_BYTES * -(-(max(r.extent_id for r in rows) + 1) // 3)
    want: dict[tuple[str, int, int], int] = {}
    for r in rows:
        cell = (r.device, r.window_start_us // t_bin * t_bin, r.extent_id * EXTENT_BYTES // a_bin * a_bin)
        want[cell] = want.get(cell, 0) + r.blocks
    assert coarse.to_pylist() == [{"device": d, "time_bin_us": t, "addr_bin_bytes": a, "heat": b / (t_bin / 1e6)}
                                  for (d, t, a), b in sorted(want.items())]
    assert len(want) < 2 * 5 * 3 < direct.num_rows

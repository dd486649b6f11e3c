"""The HTML report: every figure has labelled axes with units; the page embeds figures and tables;
the report job runs end to end on a small ingested trace, written to a local directory or an object store
(tests/fake_store.py); `blockheat heat` prints its summary."""
from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from jobs.cli.main import main as cli_main
from jobs.heat_report import CDF_POINTS, report_dir, spark_cdfs
from jobs.heat_report import run as run_report
from libs import report
from libs.transforms.report_files import METRICS, percentiles, report_cdfs
from libs.transforms.tracking_eval import StepSpec
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


def _inputs():
    return report.ReportInputs(
        trace={"trace_id": "t", "format": "msr", "records_accepted": 3, "records_rejected": 0, "reads": 2,
               "writes": 1, "span_us": 2 * HOUR, "devices": ["a", "b"], "start_time_source": None},
        heat_map=[{"device": "a", "time_bin_us": 0, "addr_bin_bytes": 0, "heat": 2.0},
                  {"device": "a", "time_bin_us": HOUR, "addr_bin_bytes": 1 << 20, "heat": 0.5},
                  {"device": "b", "time_bin_us": 0, "addr_bin_bytes": 0, "heat": 1.0}],
        heat_map_bins=(HOUR, 1 << 20),
        disk_heat={"as-traced": [{"window_start_us": 0, "disk": "a", "heat": 2.0},
                                 {"window_start_us": 0, "disk": "b", "heat": 1.0}]},
        cdfs={"size_bytes": [(512.0, 0.0), (4096.0, 1.0)], "interarrival_us": [(10.0, 0.0), (100.0, 1.0)],
              "response_us": []},
        tracking=[{"k": 5, "checkpoints": 10, "mean_relative_error": 0.5, "median_relative_error": 0.4,
                   "requests_to_90pct": 5.2, "stale_s_aging": 5.1, "stale_s_no_aging": None}],
        claims=[("quick to follow a rise", True, "k=5: 5.2 requests")],
        profile=[{"scope": "trace", "device": "*", "metric": "requests", "value": 3.0},
                 {"scope": "device", "device": "a", "metric": "requests", "value": 2.0}])


def test_every_figure_axis_has_a_label_with_units(captured):
    report.render(_inputs())
    assert len(captured) == 3
    for fig in captured:
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                assert "blocks / s" in ax.get_ylabel()
                continue
            assert ax.get_ylabel(), fig
            if ax.get_xlabel():
                assert re.search(r"\((hours|bytes|us)\)", ax.get_xlabel()), ax.get_xlabel()
    heat_map_axes = captured[0].axes
    assert [a.get_title() for a in heat_map_axes[:2]] == ["device a", "device b"]
    assert heat_map_axes[1].get_xlabel() == "time since trace start (hours)"


def test_page_embeds_figures_and_tables():
    page, figures = report.render(_inputs())
    images = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(images) == len(figures) == 3
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "not in this trace&#x27;s format: response time (us)" in page
    assert "<td>quick to follow a rise" not in page  # claims are a list, not a table
    assert "<b>holds</b>" in page
    assert "<th>device a</th>" in page


def _small_trace(path):
    return write_msr(path, [(0, 0, "R", 0, 4096), (2_000_000, 0, "W", 1 << 20, 8192), (3_700_000_000, 1, "R", 0, 512),
                            (3_800_000_000, 0, "R", 4096, 4096), (7_300_000_000, 1, "W", 1 << 21, 4096)])


def test_report_job_end_to_end(spark, spark_cfg, tmp_path):
    ingest(spark, spark_cfg, "msr", "report-t", [_small_trace(tmp_path / "r_0.csv")])
    path = run_report(spark, spark_cfg, "report-t", out_dir=str(tmp_path / "out"), eval_ks=(5,),
                      eval_spec=StepSpec(extents=4, change_s=60.0, end_s=70.0))
    page = path.read_text()
    assert path.name == "report.html"
    assert sorted(p.name for p in path.parent.glob("*.png")) == ["cdfs.png", "disk_heat.png", "extent_heat_map.png"]
    assert "<h1>Trace report-t</h1>" in page
    assert "<td>requests</td><td>5</td><td>3</td><td>2</td>" in page  # trace, device h_0, device h_1


def test_report_files_to_an_object_store(tmp_path, monkeypatch, captured):
    """write_report: the page and the figures as objects under a URI (one PUT each), or files in a local directory
    (created); the report's default place is <warehouse>/reports/TRACE_ID on the warehouse's file system."""
    from libs.io.session import SparkConfig

    store = fake_s3(monkeypatch, tmp_path / "s3")
    page, figures = report.render(_inputs())
    where = report.write_report(store.url("wh/reports/t") + "/", page, figures)
    assert where == "s3a://bucket/wh/reports/t/report.html"
    assert store.local(where).read_text() == page
    assert sorted(p.name for p in store.local(where).parent.iterdir()) == [
        "cdfs.png", "disk_heat.png", "extent_heat_map.png", "report.html"]
    assert store.local("s3a://bucket/wh/reports/t/cdfs.png").read_bytes() == b"png"
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


def test_report_distributions_from_the_files_equal_spark_sql_on_hplajw(spark, spark_cfg, hplajw):
    # The real week: 44,519 requests on 2 disks; every point of all three distributions to the last bit.
    direct = report_cdfs(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID, CDF_POINTS)
    assert direct == spark_cdfs(spark, spark_cfg, HPLAJW_TRACE_ID)
    assert [len(direct[m]) for m in METRICS] == [201, 201, 201]
    assert direct["size_bytes"][100] == (8192.0, 0.5)


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
    assert direct["interarrival_us"][0] == (0.0, 0.0)
    assert direct["response_us"][0][0] == 10.0

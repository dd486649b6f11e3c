"""The bundled trace's report (hplajw, one week on 2 disks) opened in headless Chromium (tests/chromium.py): it loads
without console messages, every figure is drawn, the page is self-contained, and the summary's numbers equal the
tables' values; its days are the trace's real dates. One report render and one page load serve every test here."""
from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F

from blockheat.jobs.heat_report import run as run_report
from blockheat.jobs.heat_report import scores_and_plan
from blockheat.libs import report
from blockheat.libs.io.tables import read_table, trace_info
from blockheat.libs.report import best_score
from blockheat.libs.transforms.tracking_eval import StepSpec
from tests.chromium import Browser
from tests.conftest import HPLAJW_TRACE_ID

FIGURES = ["fig-load_over_time", "fig-disk_heat", "fig-extent_heat_map", "fig-response_cdf", "fig-size_cdf",
           "fig-interarrival_cdf"]

# In the page: per figure its image's state and the share of pixels that are not (near) white; the summary's
# machine-readable values; the section titles; every external reference (there should be none).
READ_PAGE = """(() => {
  const figures = [...document.querySelectorAll('figure')].map(f => {
    const img = f.querySelector('img');
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    let ink = 0;
    if (c.width && c.height) {
      const g = c.getContext('2d'); g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      for (let i = 0; i < d.length; i += 4) if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) ink++;
    }
    return {id: f.id, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
            ink: c.width ? ink / (c.width * c.height) : 0};
  });
  const summary = Object.fromEntries([...document.querySelectorAll('#summary [data-key]')]
    .map(e => [e.dataset.key, e.dataset.value]));
  const sections = [...document.querySelectorAll('section > h2')].map(h => h.textContent);
  const external = [...document.querySelectorAll('[src], link[href], script')]
    .map(e => e.getAttribute('src') || e.getAttribute('href') || 'script')
    .filter(s => !s.startsWith('data:'));
  return {figures, summary, sections, external};
})()"""


@pytest.fixture(scope="module")
def rendered(spark, spark_cfg, hplajw, tmp_path_factory):
    out = tmp_path_factory.mktemp("hplajw-report")
    return run_report(spark, spark_cfg, HPLAJW_TRACE_ID, out_dir=str(out), eval_ks=(5,),
                      eval_spec=StepSpec(extents=4, change_s=60.0, end_s=70.0))


@pytest.fixture(scope="module")
def opened(rendered):
    with Browser() as browser:
        return browser.open(rendered, READ_PAGE)


def test_report_opens_in_chromium_without_console_errors_and_draws_every_figure(rendered, opened):
    assert opened.messages == []
    assert [f["id"] for f in opened.value["figures"]] == FIGURES
    for fig in opened.value["figures"]:
        assert fig["complete"], fig
        assert fig["width"] >= 400, fig
        assert fig["height"] >= 250, fig
        assert fig["ink"] > 0.03, fig          # axes, lines and labels, not a blank image
    assert opened.value["external"] == []        # one self-contained file
    assert opened.value["sections"] == ["Summary", "Load over time", "Disk heat and balance",
                                        "Response times, sizes and interarrival times", "Policy scorecard",
                                        "Latest plan", "Profile (whole trace)", "Heat tracking accuracy"]
    assert rendered.stat().st_size < 2_000_000


def test_report_summary_equals_the_tables_on_hplajw(spark, spark_cfg, opened):
    shown = opened.value["summary"]
    trace = trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)
    requests = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID)
    assert int(shown["requests"]) == trace["records_accepted"] == requests.count() == 44_519
    assert int(shown["span_us"]) == trace["span_us"]
    assert float(shown["read_share_requests"]) == trace["reads"] / trace["records_accepted"]
    assert float(shown["iops_mean"]) == trace["records_accepted"] / (trace["span_us"] / 1e6)
    busiest_second = requests.groupBy(F.floor(F.col("ts_us") / 1_000_000)).count().agg(F.max("count")).first()[0]
    assert int(shown["iops_peak_second"]) == busiest_second
    windows = {(r.window_start_us, r.metric): r.value for r in read_table(
        spark, spark_cfg.warehouse, "trace_profile", HPLAJW_TRACE_ID)
        .where("scope = 'trace' AND window_us = 3600000000").collect()}
    starts = {w for w, _ in windows}
    assert float(shown["iops_peak_window"]) == max(windows[(w, "requests")] for w in starts) / 3600.0
    assert float(shown["mbps_peak_window"]) == max(
        windows[(w, "bytes_read")] + windows[(w, "bytes_written")] for w in starts) / 3600.0 / 1e6
    hottest = read_table(spark, spark_cfg.warehouse, "extent_heat", HPLAJW_TRACE_ID) \
        .where("extent_bytes = 1048576 AND window_us = 0").orderBy(F.desc("heat")).first()
    assert float(shown["hottest_extent_heat"]) == hottest.heat
    disks = read_table(spark, spark_cfg.warehouse, "disk_heat", HPLAJW_TRACE_ID) \
        .where("layout = 'as-traced' AND window_us = 0").orderBy(F.desc("heat")).collect()
    assert shown["hottest_disk"] == disks[0].disk == "0"
    assert float(shown["imbalance"]) == disks[0].max_over_mean
    # The scorecard the page shows (the latest plan's window, else "all"): scored or not, depending on which test
    # files ran before in this worker's warehouse; its best-ranked plannable policy, or nothing.
    scores, _, _ = scores_and_plan(spark, spark_cfg, HPLAJW_TRACE_ID)
    best = best_score(scores)
    assert shown["best_policy"] == (best["policy_id"] if best else "")
    assert best is None or (best["plannable"] and best["policy_id"] not in ("random", "as-traced"))


def test_report_days_are_the_traces_real_dates(spark, spark_cfg, rendered):
    trace = trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)
    # The source's header: the trace starts at 00:03:06 on 30 May 1992, local time of the traced host: a Saturday.
    assert trace["start_time_source"].startswith("1992-05-30T00:03:06 local time of hplajw.hpl.hp.com")
    assert datetime(1992, 5, 30).strftime("%A") == "Saturday"
    marks = report.day_marks(trace)
    assert [d.strftime("%a %d %b") for _, d in marks] == [
        "Sat 30 May", "Sun 31 May", "Mon 01 Jun", "Tue 02 Jun", "Wed 03 Jun", "Thu 04 Jun", "Fri 05 Jun"]
    assert [round(h, 4) for h, _ in marks] == [round(24 * i - 186 / 3600, 4) for i in range(7)]
    page = rendered.read_text()
    assert "from Sat 30 May 1992 00:03:06, local time of hplajw.hpl.hp.com (zone not recorded)" in page
    # the profile grouped: every metric of the real trace has a group and a unit
    assert [t[:300] for t in page.split("<h3>")[1:] if not t.startswith(tuple(g for g, _ in report.PROFILE_GROUPS))] \
        == []
    assert "<td class='t'>request size, median</td><td>8 KiB</td><td>8 KiB</td><td>4 KiB</td>" in page

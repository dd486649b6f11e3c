"""Scale benchmark: the nightly pipeline, ingest through the scorecard, on generated traces
of two sizes, and ingest + extent heat on a 2-worker standalone cluster against a 1-worker one.

    .venv/bin/python bench/scale.py --millions 10 100 --cluster-millions 10
    .venv/bin/python bench/scale.py --millions 100 --cluster-millions 0 --workdir W --stages alis_graph,alis_layout

Pipeline: the Spark stages of dags/nightly_trace_analysis.py for a newly landed trace, trace day 0, each as
its own process with the arguments libs.nightly.stage_args gives them (as the DAG's spark-submits do, JVM
start included), up to policy_scores (the scorecard); reorg_plan is left out. Master local[2]. The stages run
as the DAG runs them (dags/stage_order.py): as many at once as its max_active_tasks (one), each when its upstream
stages are done, the longest chains first; --slots N runs up to N at once. Per size: seconds per stage,
the stages summed and the run's time, and the peak resident memory (Python drivers, their JVMs, Python workers)
of the stages running at one time. Goals: the larger size within 30 minutes, and its cost at most 1.1x per 1x more
requests (11x for 10x).

Cluster: infra/spark/local-cluster.sh starts 2 workers (1 core each), ingest and extent heat run against it
(BLOCKHEAT_SPARK_MASTER), then the same on 1 worker; goal: 2 workers at least 1.8x faster. A worker's one core
only caps its task slots: its executor JVM and Python workers use every CPU of the machine. --pin-workers
confines each worker to a CPU of its own (taskset), the stand-in for separate 1-core machines that a 2-core
machine allows (the driver is not pinned). --cluster-only runs just this comparison; --cluster-rounds R runs it
R times, alternating which cluster goes first, and compares the summed times (one run per cluster is not enough: the
VM's speed drifts between runs minutes apart):

    .venv/bin/python bench/scale.py --cluster-only --cluster-millions 100 --pin-workers --cluster-rounds 3

--cluster-disks D gives the cluster trace D disks (default 4), e.g. --cluster-millions 300 --cluster-disks 12
(25 M a device, as 100 M on 4; extent heat reads a device of any size in parts, in the same memory).

Growing trace (--growth-nights N): one trace that lands one more day of --growth-millions requests each night
(4 disks), and per night what the DAG runs for it through the whole-trace stages, as libs.nightly plans them: the
new file appended, extent heat, tracking (with its evaluation), profile and report. Goal: night N at most 1.3x
night 2 (a night's cost follows its new data, not the trace's length):

    .venv/bin/python bench/scale.py --growth-nights 30 --growth-millions 2

One hot device (--one-device): each --millions size on one disk through every stage, against the same number of
requests on 4 disks per 10 M (--scale-disks's trace). Goals: the one-device run's peak memory at most 6 GiB and
its time at most 1.3x the spread trace's (a device of any size is read in parts: a task's memory follows the
part):

    .venv/bin/python bench/scale.py --one-device --millions 100 --cluster-millions 0

Generated trace: MSR CSV, N requests on 4 disks over exactly one day (sorted uniform arrival times, so both
sizes fill trace day 0), Zipf-like hot 1 MiB extents over 32 GiB per disk, 35% reads, 0.5-64 KiB; the
scorecard replays them on the IBM Ultrastar 73LZX spec (MSR traces record no disk geometry). At 100 M requests
4 disks take 1,157 a second, more than the modeled drives serve: every scorecard replay saturates and stops
early. --scale-disks gives each size 4 disks per 10 M requests instead (the 10 M trace's load on every disk).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # ahead of bench/ (the script's own folder), whose sim.py would shadow sim/

from memory import tree_rss_bytes  # noqa: E402  (bench/memory.py: the script's folder is on sys.path)

log = logging.getLogger("bench.scale")

FILETIME_T0 = 128_166_372_000_000_000        # 2007-02-22 00:00 UTC in FILETIME ticks (100 ns)
DAY_TICKS = 86_400 * 10_000_000
CHUNK = 1_000_000
PIPELINE_END = "policy_scores"               # the scorecard: last stage measured
CLUSTER_STAGES = ("ingest_trace", "extent_heat")
# MSR traces record no disk geometry: the scorecard replays them on this shipped spec (36.7 GB, room for the
# 32 GiB each generated disk addresses).
SCORECARD_SPEC = "ibm_ultrastar_73lzx"
CLUSTER_SCRIPT = REPO / "infra" / "spark" / "local-cluster.sh"


def disks_for(n: int, scale_disks: bool) -> int:
    """The generated trace's disks: 4, or with scale_disks 4 per 10 M requests (at least 4)."""
    return max(4, round(4 * n / 10_000_000)) if scale_disks else 4


def trace_chunks(n: int, seed: int = 8, disks: int = 4, day: int = 0) -> Iterator[pa.Table]:
    """n generated MSR requests over one day (trace day `day`) on `disks` disks, time-ordered, 1M rows at a time
    (MSR CSV columns)."""
    rng = np.random.default_rng(seed)
    chunks = max(1, -(-n // CHUNK))
    for c in range(chunks):
        k = min(CHUNK, n - c * CHUNK)
        lo, hi = (day * DAY_TICKS + c * DAY_TICKS // chunks, day * DAY_TICKS + (c + 1) * DAY_TICKS // chunks)
        hot = rng.zipf(1.3, k) % 32_768                      # extent popularity, 32 GiB per disk
        yield pa.table({
            "ts": FILETIME_T0 + np.sort(rng.integers(lo, hi, k)),
            "host": pa.array(["gen"] * k),
            "disk": rng.integers(0, disks, k),
            "type": np.where(rng.random(k) < 0.35, "Read", "Write"),
            "offset": hot * (1 << 20) + rng.integers(0, 2048, k) * 512,
            "size": rng.choice(np.array([512, 4096, 8192, 16384, 65536]), k),
            "rt": rng.integers(50, 20_000, k),
        })


def make_trace(path: Path, n: int, seed: int = 8, disks: int = 4, day: int = 0) -> None:
    """n MSR requests over one day (trace day `day`) on `disks` disks, time-ordered, written 1M rows at a time."""
    with path.open("wb") as out:
        for table in trace_chunks(n, seed, disks, day):
            pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False, quoting_style="none"))


def landing_for(root: Path, trace_id: str, n: int, disks: int = 4) -> Path:
    """A landing folder as the nightly DAG expects it: <root>/<trace_id>/ with manifest.json and the file (kept
    from an earlier run in the same work directory: the trace is the same for the same n)."""
    folder = root / trace_id
    if (folder / "manifest.json").is_file() and (folder / f"{trace_id}.csv").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "msr", "start_date": "2007-02-22"}))
    make_trace(folder / f"{trace_id}.csv", n, disks=disks)
    return folder


def stage_commands(landing: Path, warehouse: Path, stages: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(stage, argv) for trace day 0, from the DAG's own libs.nightly.stage_args."""
    from blockheat.libs.ingest.pipeline import FORMATS
    from blockheat.libs.nightly import NightlySettings, read_manifest, scan_landing, stage_args

    settings = NightlySettings.from_mapping({"landing_dir": str(landing.parent), "warehouse": str(warehouse),
                                             "scorecard_args": ["--spec", SCORECARD_SPEC]}, python=sys.executable)
    landed = scan_landing(landing, read_manifest(landing, FORMATS))
    args = stage_args(settings, landed, 0, now=dt.datetime(2007, 2, 23, tzinfo=dt.UTC))
    return [(stage, argv) for stage in stages for argv in args[stage]]


@dataclass
class StageRun:
    stage: str
    seconds: float
    peak_rss_bytes: int


class _StageProcess:
    """One stage's commands (its argvs, one after another) as `python -m blockheat.jobs.<stage>` processes, polled
    by the caller: the seconds from the first start to the last exit and the largest resident size of a process
    tree; fails loudly."""

    def __init__(self, stage: str, argvs: Sequence[Sequence[str]], env: dict[str, str], logfile: Path) -> None:
        self.stage, self.env, self.logfile = stage, env, logfile
        self.pending = [list(a) for a in argvs]
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = time.perf_counter()
        self.peak = 0
        self.result: StageRun | None = None
        self._next()

    def _next(self) -> None:
        argv = self.pending.pop(0)
        with self.logfile.open("a") as out:
            out.write(f"\n=== {self.stage} {' '.join(argv)}\n")
            out.flush()
            self.proc = subprocess.Popen([sys.executable, "-m", f"blockheat.jobs.{self.stage}", *argv], env=self.env,
                                         cwd=REPO, stdout=out, stderr=subprocess.STDOUT)

    def poll(self) -> int:
        """The process tree's resident bytes now (0 once done); sets `result` when the last command has exited."""
        assert self.proc is not None
        code = self.proc.poll()
        if code is None:
            rss = tree_rss_bytes(self.proc.pid)
            self.peak = max(self.peak, rss)
            return rss
        if code != 0:
            raise RuntimeError(f"stage {self.stage} failed (exit {code}); see {self.logfile}")
        if self.pending:
            self._next()
        elif self.result is None:
            self.result = StageRun(self.stage, time.perf_counter() - self.started, self.peak)
        return 0

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_stage(stage: str, argv: Sequence[str], env: dict[str, str], logfile: Path) -> StageRun:
    """`python -m blockheat.jobs.<stage> ARGV`, sampling the process tree's memory every 0.2 s; fails loudly."""
    runs, _, _ = run_stages([(stage, argv)], env, lambda _: logfile, 1)
    return runs[0]


def run_stages(commands: Sequence[tuple[str, Sequence[str]]], env: dict[str, str], logfile: Callable[[str], Path],
               slots: int) -> tuple[list[StageRun], float, int]:
    """The stages' commands as the nightly DAG runs them (dags/stage_order.py): at most `slots` stages at once, each
    when its upstream stages (among these) have finished, the most urgent first. Returns each stage's run (in the
    commands' order), the seconds from the first start to the last exit, and the largest resident size of the
    running stages' process trees together. logfile(stage): where a stage's output goes."""
    from blockheat.dags.stage_order import next_stages

    argvs: dict[str, list[Sequence[str]]] = {}
    for stage, argv in commands:
        argvs.setdefault(stage, []).append(argv)
    order = tuple(argvs)
    running: dict[str, _StageProcess] = {}
    done: dict[str, StageRun] = {}
    peak = 0
    started = time.perf_counter()
    try:
        while len(done) < len(order):
            for stage in next_stages(set(done), set(running) | set(done), order)[:max(0, slots - len(running))]:
                running[stage] = _StageProcess(stage, argvs[stage], env, logfile(stage))
            now = 0
            for stage, run in list(running.items()):
                now += run.poll()
                if run.result is not None:
                    done[stage] = run.result
                    del running[stage]
                    log.info("%s %.1f s, peak %.2f GiB", stage, run.result.seconds, run.result.peak_rss_bytes / 2**30)
            peak = max(peak, now)
            time.sleep(0.2)
    finally:
        for run in running.values():
            run.kill()
    return [done[s] for s in order], time.perf_counter() - started, peak


@dataclass
class PipelineRun:
    requests: int
    disks: int = 4
    stages: list[StageRun] = field(default_factory=list)
    wall_s: float = 0.0           # the first stage's start to the last one's exit
    together_bytes: int = 0       # the largest resident size of the stages running at one time
    slots: int = 1

    @property
    def seconds(self) -> float:
        """The run's time: its stages as scheduled (one at a time: their sum)."""
        return self.wall_s

    @property
    def stage_seconds(self) -> float:
        """The stages' times summed (what running them one at a time takes, without contention)."""
        return sum(s.seconds for s in self.stages)

    @property
    def peak_rss_bytes(self) -> int:
        return max([self.together_bytes, *(s.peak_rss_bytes for s in self.stages)])


def stage_env(warehouse: Path, master: str, spark_conf: Mapping[str, str]) -> dict[str, str]:
    """A stage process's environment; `spark_conf` reaches its driver as spark-submit --conf through
    PYSPARK_SUBMIT_ARGS. Not through a SPARK_CONF_DIR: a non-empty directory on the driver's class path keeps
    the JVM from mapping the environment's class archive (libs.io.jvm), 4-8 s more for every stage's start."""
    submit = " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in spark_conf.items())
    return {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "BLOCKHEAT_SPARK_MASTER": master,
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYSPARK_SUBMIT_ARGS": f"{submit} pyspark-shell"}


def pipeline(work: Path, n: int, spark_conf: Mapping[str, str], only: Sequence[str] | None = None,
             disks: int = 4, slots: int = 1) -> PipelineRun:
    """The pipeline's stages on an n-request trace, at most `slots` at once in the DAG's order (run_stages); only:
    just these stages, on the warehouse an earlier run in the same work directory kept (it is kept then, for the
    next call)."""
    from blockheat.libs.nightly import STAGES

    stages = [s for s in STAGES[: STAGES.index(PIPELINE_END) + 1] if only is None or s in only]
    trace_id = f"scale{n}" if disks == 4 else f"scale{n}x{disks}"
    landing = landing_for(work / "landing", trace_id, n, disks)
    warehouse = work / f"warehouse-{trace_id}"
    if only is None:
        shutil.rmtree(warehouse, ignore_errors=True)    # a --stages run's kept tables: the trace would not ingest
    env = stage_env(warehouse, "local[2]", spark_conf)
    log.info("%s requests on %d disks: %d stage(s), %d at a time", f"{n:,}", disks, len(stages), slots)
    runs, wall_s, together = run_stages(stage_commands(landing, warehouse, stages), env,
                                        lambda stage: work / f"{trace_id}.{stage}.log", slots)
    result = PipelineRun(n, disks, runs, wall_s, together, slots)
    if only is None:
        shutil.rmtree(warehouse, ignore_errors=True)
    return result


GROWTH_STAGES = ("ingest_trace", "extent_heat", "heat_tracking", "trace_profile", "heat_report")


def growth(work: Path, nights: int, per_night: int, spark_conf: Mapping[str, str], check: bool = True
           ) -> list[dict[str, float]]:
    """A growing trace: night d lands trace day d's file (per_night requests on 4 disks) and runs what the nightly
    DAG runs for it through the whole-trace stages (libs.nightly's plan: the new file appended, then extent heat,
    tracking, profile and report), each stage's process timed. Seconds per stage per night; with `check`, the
    tables after the last night are compared with the whole trace computed again (--full), and the last night
    gains "equal:TABLE" = 1.0 or 0.0."""
    from blockheat.libs.ingest.pipeline import FORMATS
    from blockheat.libs.nightly import NightlySettings, plan_trace, read_manifest, record_ledger, scan_landing

    folder = work / "landing-growth" / "grow"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "msr", "start_date": "2007-02-22"}))
    warehouse = work / "warehouse-growth"
    shutil.rmtree(warehouse, ignore_errors=True)
    settings = NightlySettings.from_mapping({"landing_dir": str(folder.parent), "warehouse": str(warehouse)},
                                            python=sys.executable)
    env = stage_env(warehouse, "local[2]", spark_conf)
    nights_run = []
    for day in range(nights):
        make_trace(folder / f"day-{day:03d}.csv", per_night, seed=100 + day, day=day)
        landed = scan_landing(folder, read_manifest(folder, FORMATS))
        plan = plan_trace(settings, landed, day, now=dt.datetime(2007, 2, 23, tzinfo=dt.UTC) + dt.timedelta(days=day))
        seconds: dict[str, float] = {}
        for stage in GROWTH_STAGES:
            for argv in plan.args[stage]:
                seconds[stage] = seconds.get(stage, 0.0) + run_stage(stage, argv, env, work / "growth.log").seconds
            if stage == "ingest_trace":
                record_ledger(warehouse, "grow", "ingested", {"fingerprint": plan.fingerprint})
        log.info("growth night %d (%s): %s", day + 1, "appended" if plan.appends else "ingested",
                 ", ".join(f"{s} {t:.1f} s" for s, t in seconds.items()))
        nights_run.append(seconds)
    if check:
        kept = {table: table_rows(warehouse, table, "grow") for table in GROWTH_TABLES}
        for stage in GROWTH_STAGES[1:]:                      # the whole trace again (--full), as one night
            for argv in plan.args[stage]:
                run_stage(stage, [*argv, "--full"], env, work / "growth.log")
        for table in GROWTH_TABLES:
            problem = rows_differ(kept[table], table_rows(warehouse, table, "grow"))
            log.info("growth: %s after night %d %s", table, nights, f"DIFFERS from a full recompute: {problem}"
                     if problem else f"equals a full recompute ({len(kept[table])} pieces)")
            nights_run[-1][f"equal:{table}"] = float(not problem)
    shutil.rmtree(warehouse, ignore_errors=True)
    return nights_run


GROWTH_TABLES = ("extent_heat", "disk_heat", "heat_tracking", "trace_profile")


def table_rows(warehouse: Path, table: str, trace_id: str) -> dict[tuple, pa.Table | str]:
    """One trace's rows of a table (read by delta-rs), in pieces by device (and k, for heat_tracking), each sorted
    by its integer and string columns: the piece itself for trace_profile (compared with a tolerance), else a
    SHA-256 of its columns (the other tables' values are integers and the same divisions: exact)."""
    import hashlib

    from deltalake import DeltaTable

    dataset = DeltaTable(str(warehouse / table)).to_pyarrow_dataset()
    keys = [c for c in ("device", "k") if c in dataset.schema.names]
    at = pc.field("trace_id") == trace_id
    pieces = dataset.to_table(columns=keys, filter=at).group_by(keys).aggregate([]).to_pylist()
    out = {}
    for piece in pieces:
        where = at
        for c in keys:
            where = where & (pc.field(c) == piece[c])
        rows = dataset.to_table(filter=where)
        rows = rows.select(sorted(rows.column_names))
        rows = rows.sort_by([(f.name, "ascending") for f in rows.schema if not pa.types.is_floating(f.type)])
        if table != "trace_profile":
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, rows.schema) as writer:
                writer.write_table(rows.combine_chunks())
            rows = hashlib.sha256(sink.getvalue()).hexdigest()
        out[tuple(piece[c] for c in keys)] = rows
    return out


def rows_differ(a: Mapping[tuple, pa.Table | str], b: Mapping[tuple, pa.Table | str]) -> str:
    """'' when the pieces hold equal rows (floats to 1e-12 relative: a sum of squares taken in another order), else
    the first difference."""
    if a.keys() != b.keys():
        return f"pieces {sorted(a)} against {sorted(b)}"
    for key, x in a.items():
        if isinstance(x, str):
            if x != b[key]:
                return f"{key}: the rows differ"
            continue
        y = b[key].select(x.column_names)
        if x.num_rows != y.num_rows:
            return f"{key}: {x.num_rows:,} rows against {y.num_rows:,}"
        for name in x.column_names:
            u, v = x[name].combine_chunks(), y[name].combine_chunks()
            if not u.is_null().equals(v.is_null()):
                return f"{key} {name}: nulls differ"
            if pa.types.is_floating(u.type):
                p, q = u.fill_null(0).to_numpy(), v.fill_null(0).to_numpy()
                if not np.allclose(p, q, rtol=1e-12, atol=0, equal_nan=True):
                    return f"{key} {name}: values differ"
            elif not u.equals(v):
                return f"{key} {name}: values differ"
    return ""


def write_growth_table(out: TextIO, nights: Sequence[Mapping[str, float]], per_night: int) -> None:
    out.write(f"\ngrowing trace, {per_night / 1e6:g}M requests a night, local[2], seconds per stage:\n\n")
    out.write("| night | " + " | ".join(GROWTH_STAGES) + " | total |\n|---|" + "---|" * (len(GROWTH_STAGES) + 1) + "\n")
    for i, night in enumerate(nights, start=1):
        out.write(f"| {i} | " + " | ".join(f"{night.get(s, 0.0):.1f}" for s in GROWTH_STAGES)
                  + f" | {sum(night.get(s, 0.0) for s in GROWTH_STAGES):.1f} |\n")
    equal = {k.removeprefix("equal:"): v for k, v in nights[-1].items() if k.startswith("equal:")} if nights else {}
    if equal:
        out.write("\nafter the last night, against the whole trace computed again: "
                  + ", ".join(f"{t} {'equal' if v else 'DIFFERENT'}" for t, v in equal.items()) + "\n")
    if len(nights) >= 2:
        last, second = (sum(n.get(s, 0.0) for s in GROWTH_STAGES) for n in (nights[-1], nights[1]))
        per_stage = ", ".join(f"{s} {nights[-1].get(s, 0.0) / max(nights[1].get(s, 0.0), 1e-9):.2f}x"
                              for s in GROWTH_STAGES)
        out.write(f"\nnight {len(nights)} / night 2: {last / second:.2f}x (goal <= 1.3x); {per_stage}\n")


def cluster_run(work: Path, landing: Path, workers: int, worker_memory: str, spark_conf: Mapping[str, str],
                pin: bool = False) -> float:
    """Seconds of ingest + extent heat of the landed trace on a fresh standalone cluster of `workers` 1-core
    workers (a warehouse of its own); pin: each worker and its executor on a CPU of its own."""
    state = work / f"cluster-{workers}"
    warehouse = work / f"warehouse-cluster-{workers}"
    start = subprocess.run([str(CLUSTER_SCRIPT), "start", "--workers", str(workers), "--cores", "1", "--memory",
                            worker_memory, "--port", "0", "--webui-port", "0", "--dir", str(state),
                            *(["--pin"] if pin else [])],
                           env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, check=False)
    try:
        if start.returncode != 0:
            raise RuntimeError(f"cluster start failed: {start.stderr[-2000:]}")
        env = stage_env(warehouse, start.stdout.strip(), spark_conf)
        runs = [run_stage(stage, argv, env, work / f"cluster-{workers}.log")
                for stage, argv in stage_commands(landing, warehouse, CLUSTER_STAGES)]
    finally:
        subprocess.run([str(CLUSTER_SCRIPT), "stop", "--dir", str(state)], check=False)
    shutil.rmtree(warehouse, ignore_errors=True)
    return sum(r.seconds for r in runs)


class _Load:
    """The machine's 1-minute load average, sampled through the run (timings mean little on a busy machine)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(5.0):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> _Load:
        self.samples.append(os.getloadavg()[0])
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def write_pipeline_table(out: TextIO, runs: Sequence[PipelineRun]) -> None:
    out.write(f"\nnightly pipeline (ingest .. {PIPELINE_END}), local[2], seconds per stage:\n\n")
    out.write("| stage | " + " | ".join(f"{r.requests / 1e6:g}M, {r.disks} disks" for r in runs) + " |\n|---|"
              + "---|" * len(runs) + "\n")
    for i, stage in enumerate(s.stage for s in runs[0].stages):
        out.write(f"| {stage} | " + " | ".join(f"{r.stages[i].seconds:.1f}" for r in runs) + " |\n")
    out.write("| stages summed | " + " | ".join(f"{r.stage_seconds:.1f}" for r in runs) + " |\n")
    out.write(f"| **total, {runs[0].slots} at a time** | " + " | ".join(f"**{r.seconds:.1f}**" for r in runs) + " |\n")
    out.write("| peak memory (GiB) | " + " | ".join(f"{r.peak_rss_bytes / 2**30:.2f}" for r in runs) + " |\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, nargs="+", default=[10.0, 100.0], metavar="M",
                        help="pipeline trace sizes in millions of requests: SMALL LARGE (default 10 100), or one size")
    parser.add_argument("--stages", help="only these stages (comma-separated), resuming on the warehouse an earlier "
                                         "--stages run kept in --workdir (kept again); one --millions size")
    parser.add_argument("--cluster-millions", type=float, default=10.0,
                        help="trace size of the 2- vs 1-worker comparison (0: skip it)")
    parser.add_argument("--cluster-disks", type=int, default=4,
                        help="disks of the cluster comparison's trace (default 4)")
    parser.add_argument("--worker-memory", default="4g", help="memory of each standalone worker (default 4g)")
    parser.add_argument("--executor-memory", default="3g", help="spark.executor.memory on the cluster")
    parser.add_argument("--workdir", type=Path, help="keep generated files and logs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--scale-disks", action="store_true",
                        help="4 disks per 10 M requests (the same load per disk at every size) instead of 4")
    parser.add_argument("--pin-workers", action="store_true",
                        help="cluster: each worker on a CPU of its own (local-cluster.sh --pin), as 1-core machines")
    parser.add_argument("--cluster-only", action="store_true", help="only the 2- vs 1-worker comparison")
    parser.add_argument("--slots", type=int, metavar="N",
                        help="pipeline stages at once (default: the DAG's max_active_tasks)")
    parser.add_argument("--one-device", action="store_true",
                        help="each size on one disk, against the same size on 4 disks per 10 M requests")
    parser.add_argument("--growth-nights", type=int, default=0, metavar="N",
                        help="a growing trace over N nights instead (one day of --growth-millions a night)")
    parser.add_argument("--growth-millions", type=float, default=2.0, metavar="M",
                        help="requests landed each night of --growth-nights, millions (default 2)")
    parser.add_argument("--cluster-rounds", type=int, default=1, metavar="R",
                        help="cluster: R rounds of both runs, in alternating order (this VM's speed drifts by "
                             "+-20%% over minutes); the ratio of the summed times and each round's are printed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    sizes = [round(m * 1e6) for m in args.millions]
    only = [s.strip() for s in args.stages.split(",")] if args.stages else None
    if len(sizes) > 2 or (only is not None and (len(sizes) != 1 or args.workdir is None)):
        parser.error("--millions takes SMALL LARGE or one size; --stages needs one size and --workdir")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="blockheat-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    spark_conf = {"spark.executor.memory": args.executor_memory, "spark.ui.showConsoleProgress": "false"}
    from blockheat.dags.stage_order import MAX_ACTIVE_TASKS

    slots = args.slots or MAX_ACTIVE_TASKS
    if args.growth_nights:
        with _Load() as load:
            nights = growth(work, args.growth_nights, round(args.growth_millions * 1e6), spark_conf)
        write_growth_table(sys.stdout, nights, round(args.growth_millions * 1e6))
        sys.stdout.write(f"load average (1 min) during the run: {min(load.samples):.1f}-{max(load.samples):.1f}\n")
        if args.json:
            args.json.write_text(json.dumps({"growth": nights, "load": load.samples}, indent=1))
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    with _Load() as load:
        if args.one_device:
            runs = [r for n in sizes for r in (pipeline(work, n, spark_conf, only, disks_for(n, True), slots),
                                               pipeline(work, n, spark_conf, only, 1, slots))]
        else:
            runs = [] if args.cluster_only else \
                [pipeline(work, n, spark_conf, only, disks_for(n, args.scale_disks), slots) for n in sizes]
        cluster: dict[int, float] = {}
        rounds: list[dict[int, float]] = []
        if args.cluster_millions > 0:
            n = round(args.cluster_millions * 1e6)
            trace_id = f"cluster{n}" if args.cluster_disks == 4 else f"cluster{n}d{args.cluster_disks}"
            landing = landing_for(work / "landing", trace_id, n, args.cluster_disks)
            for r in range(max(1, args.cluster_rounds)):
                order = (2, 1) if r % 2 == 0 else (1, 2)
                rounds.append({w: cluster_run(work, landing, w, args.worker_memory, spark_conf, args.pin_workers)
                               for w in order})
            cluster = {w: sum(r[w] for r in rounds) for w in (2, 1)}
    out = sys.stdout
    if runs:
        write_pipeline_table(out, runs)
    if args.one_device:
        for spread, one in zip(runs[::2], runs[1::2], strict=True):
            out.write(f"\n{one.requests / 1e6:g}M on one device: {one.seconds:.1f} s, "
                      f"{one.seconds / spread.seconds:.2f}x the {spread.disks}-disk trace's {spread.seconds:.1f} s "
                      f"(goal <= 1.3x); peak "
                      f"{one.peak_rss_bytes / 2**30:.2f} GiB (goal <= 6 GiB; spread "
                      f"{spread.peak_rss_bytes / 2**30:.2f} GiB)\n")
    elif len(runs) == 2:
        factor = runs[1].requests / runs[0].requests
        ratio = runs[1].seconds / runs[0].seconds
        out.write(f"\n{factor:g}x the requests cost {ratio:.2f}x the time (goal <= {1.1 * factor:g}x); "
                  f"{runs[1].requests / 1e6:g}M took {runs[1].seconds / 60:.1f} min (goal <= 30 min); "
                  f"memory {runs[1].peak_rss_bytes / runs[0].peak_rss_bytes:.2f}x\n")
    if cluster:
        each = "" if len(rounds) == 1 else " (rounds: " + ", ".join(
            f"{r[1]:.1f} / {r[2]:.1f} s {r[1] / r[2]:.2f}x" for r in rounds) + ")"
        out.write(f"ingest + extent heat of {args.cluster_millions:g}M ({args.cluster_disks} disks) on the "
                  f"standalone cluster"
                  f"{'' if len(rounds) == 1 else f', {len(rounds)} rounds summed'}: 1 worker {cluster[1]:.1f} s, "
                  f"2 workers {cluster[2]:.1f} s: {cluster[1] / cluster[2]:.2f}x (goal >= 1.8x){each}\n")
    out.write(f"load average (1 min) during the run: {min(load.samples):.1f}-{max(load.samples):.1f}\n")
    if args.json:
        args.json.write_text(json.dumps({
            "pipeline": [{"requests": r.requests, "disks": r.disks, "seconds": r.seconds, "slots": r.slots,
                          "stage_seconds": r.stage_seconds, "peak_rss_bytes": r.peak_rss_bytes,
                          "stages": [vars(s) for s in r.stages]} for r in runs],
            "cluster_seconds": cluster, "cluster_rounds": rounds if cluster else [], "load": load.samples}, indent=1))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""CLI latency: common `blockheat` commands timed from process start to exit, attached to a warm `blockheat serve`
and without one, against DuckDB answering the count query in a fresh process.

    .venv/bin/python bench/cli_latency.py [--runs 10] [--cold-runs 10] [--warm-up 20] [--workdir DIR]

Sets up a warehouse with the bundled HP trace (ingest, heat, scores of the traced and greedy layouts, a greedy
plan; kept in --workdir for the next run), starts `blockheat serve` on free loopback ports, runs each command
--runs times attached to it (after --warm-up queries, timed apart, that warm the fresh server), stops it, then
runs each --cold-runs times without a server (`sql` starts a JVM; `traces` and `plan check` read their tables
through delta-rs and need none). Prints the median, min and max of each, the goals (warm: sql count, traces and
plan check <= 0.5 s, the README query <= 3 s; cold traces <= 12 s) and each median over DuckDB's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from blockheat.libs.io.connect_server import free_port

REPO = Path(__file__).resolve().parents[1]
BLOCKHEAT = [sys.executable, "-m", "blockheat.jobs.cli.main"]
TRACE = REPO / "data/traces/hplajw/ajw.1week.srt"
NOW = "2026-01-02T03:04:05Z"
README_QUERY = ("SELECT device, count(*) AS n, avg(response_us) AS mean_rt_us "
                "FROM requests WHERE trace_id = 'hplajw' GROUP BY device")
DUCKDB = ("import duckdb, sys; print(duckdb.sql(\"SELECT count(*) FROM read_parquet('\" + sys.argv[1] + "
          "\"/**/*.parquet')\").fetchall()[0][0])")


def run(args: list[str], env: dict[str, str], check: bool = True) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    elapsed = time.perf_counter() - start
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed, done.stdout


def timed(label: str, args: list[str], env: dict[str, str], runs: int, expect: str) -> list[float]:
    times = []
    for _ in range(runs):
        elapsed, out = run(args, env)
        if expect not in out.replace(",", ""):
            raise SystemExit(f"{label}: {expect!r} not in the output:\n{out[-2000:]}")
        times.append(elapsed)
    return times


def setup(env: dict[str, str]) -> str:
    """Ingest, heat, scores and a greedy plan of the bundled trace (kept from an earlier run in --workdir); the
    plan id."""
    if (Path(env["BLOCKHEAT_WAREHOUSE"]) / "reorg_plans").is_dir():
        return plan_id(env)
    run([*BLOCKHEAT, "ingest", "--format", "hp-srt", "--trace-id", "hplajw", str(TRACE)], env)
    run([*BLOCKHEAT, "heat", "hplajw"], env)
    run([*BLOCKHEAT, "score", "hplajw", "--window", "0:86400", "--families", "as-traced,greedy"], env)
    run([*BLOCKHEAT, "plan", "hplajw", "--policy", "greedy", "--window", "0:86400", "--now", NOW], env)
    return plan_id(env)


def plan_id(env: dict[str, str]) -> str:
    _, out = run([*BLOCKHEAT, "sql", "--json", "SELECT plan_id FROM reorg_plans WHERE trace_id = 'hplajw'"], env)
    return out.split('"plan_id": "', 1)[1].split('"', 1)[0]


def start_server(env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*BLOCKHEAT, "serve", "--port", str(free_port()), "--connect-port", str(free_port()),
                             "--refresh", "2"], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=log.open("w"), text=True, start_new_session=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("serving"):
        proc.kill()
        raise SystemExit(f"blockheat serve did not start:\n{log.read_text()[-3000:]}")
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="runs of each command attached to the server")
    parser.add_argument("--cold-runs", type=int, default=10, help="runs of each command without a server")
    parser.add_argument("--warm-up", type=int, default=20, help="queries that warm the fresh server, timed apart")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="blockheat-cli-"))
    warehouse = work / "warehouse"
    env = {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "PYSPARK_PYTHON": sys.executable,
           "BLOCKHEAT_SPARK_MASTER": "local[2]", "BLOCKHEAT_SPARK_REMOTE": "local"}
    t = time.perf_counter()
    plan_id = setup(env)
    print(f"set up {warehouse} (hplajw ingested, heat, plan {plan_id}) in {time.perf_counter() - t:.0f} s",
          flush=True)

    results: dict[str, list[float]] = {}
    duck = [sys.executable, "-c", DUCKDB, str(warehouse / "requests")]
    results["duckdb count (fresh process)"] = timed("duckdb", duck, env, args.runs, "44519")
    attached = {k: v for k, v in env.items() if k != "BLOCKHEAT_SPARK_REMOTE"}
    server = start_server(attached, work / "serve.log")
    try:
        # A fresh server's first queries load and compile its classes (the first takes seconds, the next ones fall
        # from about 0.4 s to 0.1 s of server time over some 30): "warm" is a server that has answered --warm-up
        # queries, timed apart.
        count = [*BLOCKHEAT, "sql", "SELECT count(*) FROM requests"]
        first = [run(count, attached)[0] for _ in range(max(1, args.warm_up))]
        print(f"the server's first query {first[0]:.2f} s; the last of {len(first)} {first[-1]:.2f} s", flush=True)
        warm = {
            "sql count(*) (warm)": ([*BLOCKHEAT, "sql", "SELECT count(*) FROM requests"], "44519"),
            "traces (warm)": ([*BLOCKHEAT, "traces"], "hplajw"),
            "README query (warm)": ([*BLOCKHEAT, "sql", README_QUERY], "mean_rt_us"),
            "plan check (warm)": ([*BLOCKHEAT, "plan", "check", plan_id, "--now", NOW], plan_id),
        }
        for label, (command, expect) in warm.items():
            results[label] = timed(label, command, attached, args.runs, expect)
    finally:
        server.terminate()
        server.wait(timeout=120)
    for label, (command, expect) in warm.items():
        if label != "README query (warm)":
            cold = label.replace("(warm)", "(cold)")
            results[cold] = timed(cold, command, env, args.cold_runs, expect)

    goals = {"sql count(*) (warm)": 0.5, "traces (warm)": 0.5, "README query (warm)": 3.0,
             "plan check (warm)": 0.5, "traces (cold)": 12.0}
    reference = statistics.median(results["duckdb count (fresh process)"])
    print(f"\n{'command':32} {'median':>8} {'min':>7} {'max':>7}  {'goal':>6}  vs DuckDB")
    for label, times in results.items():
        median = statistics.median(times)
        goal = f"{goals[label]:g} s" if label in goals else ""
        mark = "" if label not in goals else ("  ok" if median <= goals[label] else "  MISSED")
        print(f"{label:32} {median:7.2f}s {min(times):6.2f}s {max(times):6.2f}s  {goal:>6}  "
              f"{median / reference:6.1f}x{mark}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

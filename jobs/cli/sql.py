"""`blockheat serve-sql | sql-shell`: every table by name from any JDBC/ODBC client (the Spark Thrift server)
and from Spark's own SQL shell, on the persistent catalog (libs.io.catalog)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs.cli.common import UsageError, checked

SHELL_APP = "blockheat-sql-shell"


def add_commands(sub: Any) -> None:
    srv = sub.add_parser(
        "serve-sql", help="Spark Thrift server (JDBC/ODBC) over every table, on 127.0.0.1",
        description="Serves every table by name to JDBC/ODBC clients until Ctrl-C (or SIGTERM), e.g. "
                    "beeline -u jdbc:hive2://127.0.0.1:10000. Uses the metastore under the warehouse, so views "
                    "created through it persist; tables that jobs create meanwhile appear within --refresh "
                    "seconds.")
    srv.add_argument("--port", type=int, default=10000, help="TCP port on 127.0.0.1 (default 10000)")
    srv.add_argument("--refresh", type=float, default=10.0, metavar="S",
                     help="seconds between checks for new tables (default 10)")
    srv.set_defaults(func=cmd_serve_sql)

    shell = sub.add_parser(
        "sql-shell", help="Spark's spark-sql shell over every table",
        description="Starts spark-sql with the session settings of blockheat, the Delta jars and every table "
                    "registered by name; interactive unless -e or -f is given. Anything after -- goes to "
                    "spark-sql as is.")
    what = shell.add_mutually_exclusive_group()
    what.add_argument("-e", dest="execute", metavar="SQL", help="run these statements and exit")
    what.add_argument("-f", dest="file", metavar="FILE", help="run the statements of FILE and exit")
    shell.add_argument("spark_sql_args", nargs=argparse.REMAINDER, metavar="-- ARGS",
                       help="further spark-sql arguments, after --")
    shell.set_defaults(func=cmd_sql_shell)


def cmd_serve_sql(args: argparse.Namespace) -> int:
    # lazy: the job (pyspark) loads only when `serve-sql` runs
    from jobs.sql_server import ServeConfig, serve
    from libs.io.session import SparkConfig

    job = checked(ServeConfig, args.port, args.refresh)
    cfg = SparkConfig.from_env("serve-sql", short_driver=False)

    def ready(url: str) -> None:
        sys.stdout.write(f"serving Spark SQL on {url} (warehouse {cfg.warehouse}); Ctrl-C stops it\n")
        sys.stdout.flush()

    serve(cfg, job, ready)
    return 0


def spark_sql_command(cfg: Any, jars: Sequence[str], init_file: Path | None, args: Sequence[str]) -> list[str]:
    """The spark-sql command line for `cfg` (a SparkConfig): its master, every session setting, the Delta jars
    (also on the driver's class path, see libs.io.catalog.driver_class_path) and the init file."""
    # lazy: pyspark loads only when `sql-shell` runs
    import pyspark

    from libs.io.catalog import driver_class_path
    from libs.io.session import DELTA_CONF, session_conf

    conf = {**session_conf(cfg), **DELTA_CONF, "spark.jars": ",".join(jars),
            "spark.driver.extraClassPath": driver_class_path(jars)}
    cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-sql"), "--name", cfg.app_name]
    if cfg.master:                                        # "": spark-sql's own default
        cmd += ["--master", cfg.master]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    if init_file is not None:
        cmd += ["-i", str(init_file)]
    return cmd + list(args)


def cmd_sql_shell(args: argparse.Namespace) -> int:
    # lazy: pyspark loads only when `sql-shell` runs
    from libs.io.catalog import init_sql, metastore_in_use, metastore_path
    from libs.io.session import SparkConfig, delta_jars

    rest = list(args.spark_sql_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    elif rest:
        raise UsageError(f"unexpected {rest[0]!r}: spark-sql arguments go after --")
    if args.execute is not None:
        rest = ["-e", args.execute, *rest]
    elif args.file is not None:
        if not Path(args.file).is_file():
            raise UsageError(f"-f {args.file}: no such file")
        rest = ["-f", args.file, *rest]
    cfg = replace(SparkConfig.from_env(SHELL_APP, short_driver=False), catalog="hive")
    cfg.warehouse.mkdir(parents=True, exist_ok=True)
    if metastore_in_use(cfg.warehouse):
        sys.stderr.write(f"blockheat: metastore {metastore_path(cfg.warehouse)} is in use by another process "
                         "(blockheat serve-sql?): tables are registered for this shell only\n")
        cfg = replace(cfg, catalog="in-memory")
    env = dict(os.environ)
    if cfg.driver_host != "auto":                         # as build_session binds the driver
        env["SPARK_LOCAL_IP"] = cfg.driver_host
    with tempfile.TemporaryDirectory(prefix="blockheat-sql-shell-") as tmp:
        init = init_sql(cfg.warehouse)
        init_file = Path(tmp) / "init.sql" if init else None
        if init_file is not None:
            init_file.write_text(init)
        return subprocess.run(spark_sql_command(cfg, delta_jars(), init_file, rest), env=env,
                              check=False).returncode

"""`blockheat serve-sql | serve | sql-shell | beeline`: every table by name from any JDBC/ODBC client (the Spark Thrift
server), from Spark's own SQL shell, and from beeline (Hive's JDBC shell, shipped with pyspark), on the
persistent catalog (libs.io.catalog). The servers ask for a password (JDBC) or a token (Spark Connect) and serve
read-only unless --allow-writes (libs.io.sql_access)."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from blockheat.jobs.cli import console
from blockheat.jobs.cli.common import UsageError, add_command, checked, spark_config

SHELL_APP = "blockheat-sql-shell"
ALLOW_WRITES_HELP = ("let JDBC clients change tables (INSERT, DELETE, UPDATE, MERGE, DDL): every holder of the "
                     "password then acts as this server's user; default: read-only")


def add_commands(sub: Any) -> None:
    srv = add_command(
        sub, "serve-sql", "Spark Thrift server (JDBC/ODBC) over every table, on 127.0.0.1",
        "blockheat serve-sql --port 10000",
        description="Serves every table by name to JDBC/ODBC clients until Ctrl-C (or SIGTERM), e.g. "
                    "blockheat beeline. Clients log in with any user name and the password in "
                    "<warehouse>/_serve/sql-password (made on the first start, readable by its owner only), and "
                    "only read unless --allow-writes. Uses the metastore under the warehouse, so views created "
                    "through it persist; tables that jobs create meanwhile appear within --refresh seconds.")
    srv.add_argument("--port", type=int, default=10000, help="TCP port on 127.0.0.1 (default 10000)")
    srv.add_argument("--refresh", type=float, default=10.0, metavar="S",
                     help="seconds between checks for new tables (default 10)")
    srv.add_argument("--allow-writes", action="store_true", help=ALLOW_WRITES_HELP)
    srv.set_defaults(func=cmd_serve_sql)

    warm = add_command(
        sub, "serve", "one warm Spark application every command attaches to (Spark Connect + JDBC), on 127.0.0.1",
        ["blockheat serve &", "blockheat traces        # answered by the server, no JVM of its own"],
        description="Runs one long-lived Spark application holding the catalog, with a Spark Connect endpoint "
                    "and the JDBC/ODBC endpoint of serve-sql, until Ctrl-C (or SIGTERM). While it runs, every "
                    "blockheat command with the same BLOCKHEAT_WAREHOUSE attaches to it (it publishes its "
                    "endpoints in <warehouse>/_serve/endpoint.json, its Spark Connect token in "
                    "<warehouse>/_serve/connect-token, readable by its owner only) instead of starting a JVM of its "
                    "own; BLOCKHEAT_SPARK_REMOTE=local makes a command start its own. JDBC clients log in with the "
                    "password of serve-sql and only read unless --allow-writes; attached jobs write their tables, "
                    "`blockheat sql` only with its own --allow-writes.")
    warm.add_argument("--port", type=int, default=10000, help="JDBC/ODBC (Thrift) port on 127.0.0.1")
    warm.add_argument("--connect-port", type=int, default=15002,
                      help="Spark Connect port on 127.0.0.1 (15002 is Spark Connect's own; 0: a free one)")
    warm.add_argument("--refresh", type=float, default=10.0, metavar="S",
                      help="seconds between checks for new tables")
    warm.add_argument("--allow-writes", action="store_true", help=ALLOW_WRITES_HELP)
    warm.set_defaults(func=cmd_serve)

    shell = add_command(
        sub, "sql-shell", "Spark's spark-sql shell over every table", 'blockheat sql-shell -e "SHOW TABLES"',
        description="Starts spark-sql with the session settings of blockheat, the Delta jars and every table "
                    "registered by name; interactive unless -e or -f is given. Anything after -- goes to "
                    "spark-sql as is.")
    what = shell.add_mutually_exclusive_group()
    what.add_argument("-e", dest="execute", metavar="SQL", help="run these statements and exit")
    what.add_argument("-f", dest="file", metavar="FILE", help="run the statements of FILE and exit")
    shell.add_argument("spark_sql_args", nargs=argparse.REMAINDER, metavar="-- ARGS",
                       help="further spark-sql arguments, after --")
    shell.set_defaults(func=cmd_sql_shell)

    bee = add_command(
        sub, "beeline", "beeline, the JDBC shell, connected to blockheat serve-sql",
        ['blockheat beeline -e "SELECT count(*) FROM requests"', "blockheat beeline --port 10001"],
        description="Runs the beeline shipped with pyspark (no SPARK_HOME or PATH set up needed), connected to "
                    "jdbc:hive2://127.0.0.1:PORT, the address of blockheat serve-sql, as this user with the "
                    "password file of the warehouse's server (-w <warehouse>/_serve/sql-password; none when -n, -p "
                    "or -w is given). Anything after -- goes to beeline as is (e.g. -- --outputformat=csv2).")
    bee.add_argument("--port", type=int, default=10000, help="the port of blockheat serve-sql")
    bee.add_argument("-e", dest="execute", metavar="SQL", help="run these statements and exit")
    bee.add_argument("beeline_args", nargs=argparse.REMAINDER, metavar="-- ARGS",
                     help="further beeline arguments, after --")
    bee.set_defaults(func=cmd_beeline)


def cmd_serve_sql(args: argparse.Namespace) -> int:
    # lazy: the job (pyspark) loads only when `serve-sql` runs
    from blockheat.jobs.sql_server import ServeConfig, serve

    job = checked(ServeConfig, args.port, args.refresh, allow_writes=args.allow_writes)
    cfg = spark_config(args, "serve-sql", catalog="none", short_driver=False, attach=False)

    def ready(url: str) -> None:
        say_writes(job.allow_writes)
        sys.stdout.write(f"serving Spark SQL on {url} (warehouse {cfg.warehouse}; password in "
                         f"{password_file(cfg.warehouse)}); Ctrl-C stops it\n")
        sys.stdout.flush()

    serve(cfg, job, ready)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    # lazy: the job (pyspark) loads only when `serve` runs
    from blockheat.jobs.sql_server import ServeConfig, serve

    job = checked(ServeConfig, args.port, args.refresh, connect_port=args.connect_port, publish=True,
                  allow_writes=args.allow_writes)
    cfg = spark_config(args, "serve", catalog="none", short_driver=False, attach=False)

    def ready(url: str) -> None:
        say_writes(job.allow_writes)
        sys.stdout.write(f"serving the warehouse {cfg.warehouse}: commands attach to it; JDBC on {url} (password in "
                         f"{password_file(cfg.warehouse)}); Ctrl-C stops it\n")
        sys.stdout.flush()

    serve(cfg, job, ready)
    return 0


def say_writes(allowed: bool) -> None:
    """The line a server prints before it serves when its clients may write."""
    if allowed:
        sys.stdout.write("writes allowed (--allow-writes): JDBC clients may change and drop tables\n")


def password_file(warehouse: Any) -> Path:
    """The JDBC password file of `warehouse`'s servers (libs.io.sql_access)."""
    from blockheat.libs.io import sql_access  # lazy: the storage layer loads pyarrow

    return sql_access.serve_dir(warehouse) / sql_access.PASSWORD_FILE


def spark_sql_command(cfg: Any, jars: Sequence[str], init_file: Path | None, args: Sequence[str]) -> list[str]:
    """The spark-sql command line for `cfg` (a SparkConfig): its master, every session setting, the Delta jars
    (also on the driver's class path, see libs.io.catalog.driver_class_path) and the init file."""
    # lazy: pyspark loads only when `sql-shell` runs
    import pyspark

    from blockheat.libs.io.catalog import driver_class_path
    from blockheat.libs.io.session import DELTA_CONF, session_conf

    conf = {**session_conf(cfg), **DELTA_CONF, "spark.jars": ",".join(jars),
            "spark.driver.extraClassPath": driver_class_path(jars, cfg.metastore)}
    cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-sql"), "--name", cfg.app_name]
    if cfg.master:                                        # "": spark-sql's own default
        cmd += ["--master", cfg.master]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    if init_file is not None:
        cmd += ["-i", str(init_file)]
    return cmd + list(args)


def _after_dashes(rest: Sequence[str], tool: str) -> list[str]:
    if list(rest[:1]) == ["--"]:
        return list(rest[1:])
    if rest:
        raise UsageError(f"unexpected {rest[0]!r}: {tool} arguments go after --")
    return []


def cmd_sql_shell(args: argparse.Namespace) -> int:
    # lazy: pyspark loads only when `sql-shell` runs
    from blockheat.libs.io.catalog import init_sql, metastore_in_use, metastore_path
    from blockheat.libs.io.session import delta_jars

    rest = _after_dashes(args.spark_sql_args, "spark-sql")
    if args.execute is not None:
        rest = ["-e", args.execute, *rest]
    elif args.file is not None:
        if not Path(args.file).is_file():
            raise UsageError(f"-f {args.file}: no such file")
        rest = ["-f", args.file, *rest]
    cfg = spark_config(args, SHELL_APP, catalog="hive", short_driver=False)
    cfg.warehouse.mkdir(parents=True, exist_ok=True)
    if cfg.metastore is None and metastore_in_use(cfg.warehouse):     # Derby, held by another process
        console.write_stderr(f"blockheat: metastore {metastore_path(cfg.warehouse)} is in use by another process "
                             "(blockheat serve-sql?): tables are registered for this shell only\n")
        cfg = replace(cfg, catalog="in-memory")
    env = dict(os.environ)
    if cfg.driver_host != "auto":                         # as build_session binds the driver
        env["SPARK_LOCAL_IP"] = cfg.driver_host
    if cfg.metastore is not None:                         # the shared metastore's password (libs.io.catalog)
        env.update(cfg.metastore.environment())
    with console.quiet_stderr(filtered=not args.debug):            # the jar resolution of a first start
        jars = delta_jars()
    with tempfile.TemporaryDirectory(prefix="blockheat-sql-shell-") as tmp:
        init = init_sql(cfg.warehouse)
        init_file = Path(tmp) / "init.sql" if init else None
        if init_file is not None:
            init_file.write_text(init)
        return console.run_child(spark_sql_command(cfg, jars, init_file, rest), env, quiet=not args.debug)


def beeline_command(port: int, args: Sequence[str], password: Path | None = None) -> list[str]:
    """The command line of pyspark's beeline connected to jdbc:hive2://127.0.0.1:PORT (unless `args` give -u), as
    this user with the `password` file (unless `args` give a user or password): beeline reads the file itself, so
    the password is never on a command line, which every user can list."""
    import getpass

    import pyspark  # lazy: pyspark's location only, for `beeline`

    from blockheat.jobs.sql_server import HOST

    cmd = [str(Path(pyspark.__file__).parent / "bin" / "beeline")]
    if "-u" not in args:
        cmd += ["-u", f"jdbc:hive2://{HOST}:{port}"]
    if password is not None and not {"-n", "-p", "-w", "--password-file"} & set(args):
        cmd += ["-n", getpass.getuser(), "-w", str(password)]
    return cmd + list(args)


def beeline_env() -> dict[str, str]:
    """The environment beeline needs: SPARK_HOME at pyspark's install directory (its scripts otherwise look for
    pyspark with the python3 on PATH, which is not this environment's) and this Python for its helpers."""
    import pyspark  # lazy: pyspark's location only, for `beeline`

    env = dict(os.environ)
    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def cmd_beeline(args: argparse.Namespace) -> int:
    rest = _after_dashes(args.beeline_args, "beeline")
    if args.execute is not None:        # beeline waits for more of a statement that does not end with ";"
        # and ignores the options that follow -e: they go first
        rest = [*rest, "-e", args.execute if args.execute.rstrip().endswith(";") else f"{args.execute};"]
    from blockheat.libs.io import sql_access, storage  # lazy: the storage layer loads pyarrow

    password = password_file(storage.warehouse_from_env())
    if password.is_file():
        sql_access.read_secret(password)             # refused when others may read it
    return console.run_child(beeline_command(args.port, rest, password if password.is_file() else None),
                             beeline_env(), quiet=not args.debug)

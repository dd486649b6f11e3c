"""`blockheat vacuum`: delete the files of replaced table versions older than a retention (Delta's VACUUM) and the
files killed writes left, in every blockheat table of the warehouse (libs.io.vacuum). No Spark: delta-rs."""
from __future__ import annotations

import argparse
from typing import Any

from blockheat.jobs.cli.common import UsageError, add_command, add_output_options, output

COLUMNS = ["table", "replaced_files", "replaced_bytes", "orphan_files", "orphan_bytes"]


def add_commands(sub: Any) -> None:
    vac = add_command(
        sub, "vacuum", "delete old versions' files and killed writes' left-overs from every table",
        "blockheat vacuum --retain-hours 336",
        description="Delta's VACUUM of every blockheat table (through delta-rs): deletes the files of replaced "
                    "versions (a re-ingest's old rows, a re-run's old results) removed more than --retain-hours "
                    "ago. Versions older than the retention can no longer be read (time travel: VERSION AS OF "
                    "fails for them). Also deletes, after a day (libs.io.vacuum.LONGEST_WRITE), Parquet files no "
                    "committed version references and ingests' folders under <warehouse>/_staging: what a killed "
                    "write leaves. Prints what it deleted per table.")
    vac.defer(_vacuum_arguments).set_defaults(func=cmd_vacuum)


def _vacuum_arguments(parser: argparse.ArgumentParser) -> None:
    from blockheat.libs.io.vacuum import (  # lazy: delta-rs loads only for `vacuum`
        DEFAULT_RETAIN_HOURS,
        MIN_RETAIN_HOURS,
    )

    parser.add_argument("--retain-hours", type=float, default=DEFAULT_RETAIN_HOURS, metavar="H",
                        help="keep the files of versions replaced less than H hours ago (Delta's own: 7 days)")
    parser.add_argument("--allow-short-retention", action="store_true",
                        help=f"accept a retention below {MIN_RETAIN_HOURS} h, the longest a job may read the "
                             "version it started on (a job still reading an older version then loses its files)")
    add_output_options(parser)


def cmd_vacuum(args: argparse.Namespace) -> int:
    from blockheat.libs.io import storage, vacuum  # lazy: delta-rs and pyarrow load only when `vacuum` runs

    try:
        vacuum.check_retention(args.retain_hours, allow_short=args.allow_short_retention)
    except vacuum.RetentionError as exc:
        raise UsageError(f"{exc} with --allow-short-retention") from exc
    warehouse = storage.warehouse_from_env()
    swept = {r.where: r for r in vacuum.sweep_warehouse(warehouse)}
    vacuumed = {r.where: r for r in vacuum.vacuum_warehouse(warehouse, args.retain_hours,
                                                            allow_short=args.allow_short_retention)}
    rows = []
    for name in [vacuum.STAGING_DIR, *sorted(vacuumed)]:
        replaced, orphans = vacuumed.get(name), swept.get(name)
        rows.append({"table": name,
                     "replaced_files": replaced.files if replaced else 0,
                     "replaced_bytes": replaced.bytes if replaced else 0,
                     "orphan_files": orphans.files if orphans else 0,
                     "orphan_bytes": orphans.bytes if orphans else 0})
    files = sum(r["replaced_files"] + r["orphan_files"] for r in rows)
    size = sum(r["replaced_bytes"] + r["orphan_bytes"] for r in rows)
    out = output(args)
    out.note(f"vacuumed {len(vacuumed)} table(s) of {warehouse}, retention {args.retain_hours:g} h: deleted "
             f"{files:,} file(s), {size:,} bytes; versions replaced before then can no longer be read\n")
    out.rows(rows, COLUMNS, name="vacuumed")
    return out.render()

"""The trace profile's state between runs, so that a run after an append reads only the new requests.

A profile run covers the requests before S, the trace's last ts_us + 1. What a later run, whose requests all come
from S on, needs of it (libs.transforms.profile: kept_partials, merge_and_keep's cells, the extent counts of the open
groups, the FINAL rows of the groups no later request changes), and each device's blocks' last access (the
block pass's table, one file per device and bucket, written by the tasks), are kept per trace, window and extent
size under <warehouse>/_state/trace_profile/<trace_id>/<window_us>-<extent_bytes>/, with the requests version
and the trace's files they were made from. state.json names the run folder holding them; a run writes its own
folder, replaces the document (one PUT or rename), then deletes the folder the old document named.

The stored state is not used (the whole trace is profiled, and the state written again) when there is none, when
the trace was ingested again (its files are no longer a prefix of the stored ones), when a device it knew has
gone, or when requests changed before S (an overlapping append) or the stored version is no longer in the log.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blockheat.libs.io import storage
from blockheat.libs.io.tables import Location
from blockheat.libs.io.task_parquet import Opener
from blockheat.libs.table_io.changes import changes_since, read_state_doc, replace_state_doc
from blockheat.libs.transforms import profile as P

log = logging.getLogger(__name__)

BLOCKS = pa.schema([("block", pa.int64()), ("last", pa.int64())])
PARTS = {"small": P.PARTIAL, "hist": P.PARTIAL, "extents": P.EXTENTS, "closed": P.FINAL}


@dataclass(frozen=True)
class Kept:
    """A stored state: the requests before `stop`, whose ordered tasks' parts went up to `part`."""

    stop: int
    part: int
    small: pa.Table      # kept_partials
    hist: pa.Table       # merge_and_keep's open groups
    extents: pa.Table    # EXTENTS rows of the open groups
    closed: pa.Table     # FINAL rows of the closed groups
    blocks: dict[str, list[str]]   # device -> its block files (BLOCKS rows)

    @classmethod
    def empty(cls) -> Kept:
        return cls(0, -1, P.PARTIAL.empty_table(), P.PARTIAL.empty_table(), P.EXTENTS.empty_table(),
                   P.FINAL.empty_table(), {})


@dataclass(frozen=True)
class ProfileState:
    """Where one trace's profile state for one (window, extent size) lives."""

    warehouse: Location
    trace_id: str
    window_us: int
    extent_bytes: int

    @property
    def folder(self) -> str:
        return storage.join(storage.normalize(self.warehouse), "_state", "trace_profile", self.trace_id,
                            f"{self.window_us}-{self.extent_bytes}")

    def new_run(self) -> str:
        """A new run folder for this run's files."""
        return storage.join(self.folder, uuid.uuid4().hex)

    def load(self, sha256: list[str], devices: set[str]) -> Kept | None:
        """The stored state if a run may resume from it (see the module docstring), else None."""
        doc = read_state_doc(storage.join(self.folder, "state.json"))
        if doc is None:
            return None
        if set(doc["devices"]) - devices:
            return None
        changed = changes_since(self.warehouse, self.trace_id, sha256, doc["sha256"], int(doc["version"]))
        if changed is False or (isinstance(changed, tuple) and changed[0] < int(doc["stop"])):
            log.info("profile %s: requests changed before the stored state's end: profiled whole", self.trace_id)
            return None
        run = storage.join(self.folder, doc["run"])
        try:
            parts = {name: storage.read_parquet(storage.join(run, f"{name}.parquet")).cast(schema)
                     for name, schema in PARTS.items()}
        except (OSError, ValueError) as e:
            log.warning("profile %s: stored state unreadable (%s): profiled whole", self.trace_id, e)
            return None
        blocks = {device: [storage.join(self.folder, name) for name in names]
                  for device, names in doc["blocks"].items()}
        return Kept(int(doc["stop"]), int(doc["part"]), blocks=blocks, **parts)

    def save(self, run: str, kept: Kept, *, version: int, sha256: list[str], devices: list[str]) -> None:
        """Writes the state's tables into `run`, then the document naming it; deletes the previous run folder."""
        for name in PARTS:
            storage.write_parquet(storage.join(run, f"{name}.parquet"), getattr(kept, name))
        base = storage.normalize(self.folder).rstrip("/") + "/"
        blocks = {d: [storage.normalize(p).removeprefix(base) for p in paths] for d, paths in kept.blocks.items()}
        doc: dict[str, Any] = {"version": version, "sha256": sha256, "stop": kept.stop, "part": kept.part,
                               "devices": devices, "run": storage.name(run), "blocks": blocks}
        previous = replace_state_doc(storage.join(self.folder, "state.json"), doc)
        old = previous.get("run")
        if not old or old == doc["run"]:
            return
        referenced = {name for names in blocks.values() for name in names}
        if not any(name.startswith(f"{old}/") for name in referenced):   # nothing of it carried over
            storage.delete_tree(storage.join(self.folder, old))
            return
        for name in PARTS:
            storage.delete(storage.join(self.folder, old, f"{name}.parquet"))
        for name in {n for names in (previous.get("blocks") or {}).values() for n in names} - referenced:
            storage.delete(storage.join(self.folder, name))

    def forget(self) -> None:
        """Drops the state: the next run profiles the whole trace."""
        if storage.exists(self.folder):
            storage.delete_tree(self.folder)


def block_file(run: str, device: str, bucket: int, buckets: int) -> str:
    """Where a block task writes its blocks' last access."""
    return storage.join(run, "blocks", f"{quote(device, safe='')}-{bucket}-of-{buckets}.parquet")


def seen_blocks(paths: list[str], *, bucket: int, buckets: int, region_blocks: int,
                opener: Opener = storage.filesystem) -> tuple[np.ndarray, np.ndarray]:
    """The blocks (and their last access) of the stored files of a device in the regions r with
    r % buckets == bucket (a region: region_blocks blocks)."""
    blocks, last = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for path in paths:
        fs, local = opener(path)
        table = pq.read_table(local, filesystem=fs, schema=BLOCKS)
        b, t = table.column("block").to_numpy(), table.column("last").to_numpy()
        if buckets > 1:
            keep = (b // region_blocks) % buckets == bucket
            b, t = b[keep], t[keep]
        blocks.append(b)
        last.append(t)
    return np.concatenate(blocks), np.concatenate(last)

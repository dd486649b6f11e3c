"""Resident memory of a process tree (driver, JVM, Python workers), read from Linux /proc, and a sampler
of its peak; shared by the bench scripts."""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection


def _pss(pid: int) -> int:
    """Proportional set size of a process (bytes): its resident pages, each shared page divided among its sharers
    (Spark's Python workers are forked from one daemon and share its imports)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(root: int, skip: Collection[int] = ()) -> tuple[list[tuple[int, str]], dict[int, int]]:
    """(pid, kind) of `root` and its descendants (without the subtrees of `skip`), kind "driver" (root itself),
    "jvm" (java processes), "workers" (other processes under a JVM: Spark's Python workers) or "other"; and every
    process's resident bytes (one walk of /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    comm: dict[int, str] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                name, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
            fields = rest.split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue                                  # gone meanwhile
        pid = int(entry)
        children.setdefault(ppid, []).append(pid)
        rss[pid], comm[pid] = pages * page, name
    members: list[tuple[int, str]] = []
    todo = [(root, False)]
    while todo:
        pid, under_jvm = todo.pop()
        if pid in skip:
            continue
        java = comm.get(pid) == "java"
        members.append((pid, "driver" if pid == root else "jvm" if java else "workers" if under_jvm else "other"))
        todo += [(c, under_jvm or java) for c in children.get(pid, [])]
    return members, rss


def _by_kind(members: list[tuple[int, str]], size: Callable[[int], int]) -> dict[str, int]:
    out = {"driver": 0, "jvm": 0, "workers": 0, "other": 0}
    for pid, kind in members:
        out[kind] += size(pid)
    return out


def tree_rss(root: int, skip: Collection[int] = (), *, pss: bool = False) -> dict[str, int]:
    """Resident bytes of `root` and its descendants (without the subtrees of `skip`) by kind of process (_tree's).
    pss: proportional set sizes instead (pages shared between processes counted once in all)."""
    members, rss = _tree(root, skip)
    return _by_kind(members, _pss if pss else rss.__getitem__)


def tree_rss_bytes(root: int, skip: Collection[int] = ()) -> int:
    """Resident bytes of `root` and all its descendants (without the subtrees of `skip`)."""
    return sum(tree_rss(root, skip).values())


class PeakMemory:
    """Context manager sampling this process tree's resident memory (without the subtrees of `skip`) every
    `every_s`; `.peak` in bytes (the sum of the processes' resident sizes), `.peak_parts` that sample by kind of
    process (tree_rss), `.peak_pss` the peak of the proportional set sizes' sum (shared pages counted once; read
    every `pss_every` samples: the kernel walks a process's page tables for it)."""

    def __init__(self, every_s: float = 0.05, skip: Collection[int] = (), pss_every: int = 5) -> None:
        self.peak = 0
        self.peak_pss = 0
        self.peak_parts: dict[str, int] = {}
        self.every_s = every_s
        self.skip = skip
        self.pss_every = pss_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sample = 0
        while not self._stop.is_set():
            members, rss = _tree(os.getpid(), self.skip)
            parts = _by_kind(members, rss.__getitem__)
            if sum(parts.values()) > self.peak:
                self.peak, self.peak_parts = sum(parts.values()), parts
            if sample % self.pss_every == 0:
                self.peak_pss = max(self.peak_pss, sum(_pss(pid) for pid, _ in members))
            sample += 1
            time.sleep(self.every_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def parts_text(parts: dict[str, int]) -> str:
    """'driver 0.21, jvm 1.02, workers 0.80 GiB' (kinds with any memory)."""
    return ", ".join(f"{k} {v / 2**30:.2f}" for k, v in parts.items() if v) + " GiB"

"""Run one `blockheat` command and stop it at a point of the ingest's multi-table commit (libs.io.journal):
`python -m tests.libs.ingest.crash_at POINT ACTION -- COMMAND...`.

POINT: `entry` (the files written, before the journal entry: nothing decided), `step-N` (the entry written, before
the commit of step N, 0-based), `done` (every step committed, before the entry is dropped). ACTION: `kill` sends
SIGKILL to the process group (this Python process and the Spark JVM it started: run it in a session of its own),
`fill:DIR` fills the file system of DIR (a file DIR/filler) and goes on, so what follows fails for lack of space,
`stop` sends SIGSTOP to this process only (the test sends SIGCONT). With BLOCKHEAT_TEST_GATE set, the process
waits (up to 120 s) before writing its journal entry for that file to exist, so a test can let another command
start before this one decides.
"""
from __future__ import annotations

import errno
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

FILLER = "filler"


def fill(folder: Path) -> None:
    """Write zeros into folder/filler until the file system has no space left."""
    with open(folder / FILLER, "wb", buffering=0) as out:
        for chunk in (1 << 20, 4096, 1):
            block = bytes(chunk)
            try:
                while True:
                    out.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise


def _before(owner: Any, name: str, act: Callable[[], None], when: Callable[..., bool] = lambda *a, **k: True) -> None:
    real = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            act()
        return real(*args, **kwargs)

    setattr(owner, name, wrapped)


def main(argv: Sequence[str]) -> int:
    point, action, separator, *command = argv
    assert separator == "--", argv
    from blockheat.libs.io import delta_log, journal

    def act() -> None:
        if action == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        if action == "kill":
            os.killpg(os.getpgid(0), signal.SIGKILL)
        fill(Path(action.removeprefix("fill:")))

    if point == "entry":
        _before(journal, "_write_entry", act)
    elif point == "done":
        _before(journal, "_done", act)
    elif point.startswith("step-"):
        wanted, seen = int(point.removeprefix("step-")), [0]

        def is_wanted_step(*_: Any, also: Sequence[str] = (), **__: Any) -> bool:
            if not any(a.startswith(journal.TXN_PREFIX) for a in also):
                return False
            seen[0] += 1
            return seen[0] - 1 == wanted

        _before(delta_log, "commit", act, is_wanted_step)
    elif point != "none":
        raise SystemExit(f"unknown point {point!r}")
    gate = os.environ.get("BLOCKHEAT_TEST_GATE")
    if gate:
        def wait() -> None:
            deadline = time.monotonic() + 120
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.05)

        _before(journal, "_write_entry", wait)       # wrapped last: runs before an `entry` action
    from blockheat.jobs.cli.main import main as blockheat

    return blockheat(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

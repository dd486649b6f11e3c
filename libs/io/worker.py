"""The Python side of every Spark task blockheat runs (mapInArrow and applyInArrow functions): `python_task(fn)`.

PySpark's daemon reuses a Python worker for task after task and runs a full cyclic garbage collection after each
(pyspark/daemon.py: `gc.collect()`). A worker holds the modules it imported (pyarrow, numpy, numba and its compiled
kernels, pyspark, blockheat): some 150,000-250,000 objects, whose full collection took 0.06-0.15 s a task, as long
as a small task's work (in `blockheat heat` of 20 M requests on 8 devices, a tenth of the workers' time). A wrapped
function first moves every object alive in its worker into the collector's permanent generation (`gc.freeze()`,
a constant-time list splice), so the collection after the task visits only what the task itself made. Objects are
still freed by their reference counts as before; only a reference cycle through an object alive at a task's start
is kept for the worker's life (none of the package's task functions makes one).

A task may also leave its freed memory to the worker's next task of the same Spark stage (release_after_stage):
the wrapper hands it back before a task of any other stage starts.

    frame.mapInArrow(python_task(fn), ddl)
"""
from __future__ import annotations

import functools
import gc
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_kept: tuple[int, Callable[[], None]] | None = None      # (stage, how to hand back what a task of it kept)


def _stage() -> int | None:
    from pyspark import TaskContext  # lazy: the wrapper itself runs without PySpark's worker state

    context = TaskContext.get()
    return None if context is None else context.stageId()


def release_after_stage(release: Callable[[], None]) -> None:
    """Task side: `release` (handing back the memory a task freed) runs before this worker's next task of another
    Spark stage, so the next task of the same stage reuses those pages instead of faulting fresh ones in; at once
    outside a Spark task."""
    global _kept
    stage = _stage()
    if stage is None:
        release()
        return
    _kept = (stage, release)


def _settle() -> None:
    """Runs the kept release when this task belongs to another stage than the one that kept the memory."""
    global _kept
    if _kept is not None and _kept[0] != _stage():
        release, _kept = _kept[1], None
        release()


def python_task(fn: F) -> F:
    """fn as a task function (mapInArrow's, applyInArrow's: called once per task or group) that first hands back
    memory kept by a task of another stage (release_after_stage) and freezes the objects alive in its worker out of
    the collector's scans (see the module docstring). The wrapper takes fn's
    positional arguments by name (PySpark counts them to pass a group's key) and carries fn's signature and type
    hints (__wrapped__)."""
    arity = len(inspect.getfullargspec(fn).args)
    if arity == 1:
        def task(a: Any) -> Any:
            _settle()
            gc.freeze()
            return fn(a)
    elif arity == 2:
        def task(a: Any, b: Any) -> Any:  # type: ignore[misc]
            _settle()
            gc.freeze()
            return fn(a, b)
    elif arity == 3:
        def task(a: Any, b: Any, c: Any) -> Any:  # type: ignore[misc]
            _settle()
            gc.freeze()
            return fn(a, b, c)
    else:
        raise TypeError(f"a task function takes 1 to 3 positional arguments, {fn.__qualname__} takes {arity}")
    return functools.wraps(fn)(task)  # type: ignore[return-value]

"""The Python side of every Spark task blockheat runs (mapInArrow and applyInArrow functions): `python_task(fn)`.

PySpark's daemon reuses a Python worker for task after task and runs a full cyclic garbage collection after each
(pyspark/daemon.py: `gc.collect()`). A worker holds the modules it imported (pyarrow, numpy, numba and its compiled
kernels, pyspark, blockheat): some 150,000-250,000 objects, whose full collection took 0.06-0.15 s a task, as long
as a small task's work (in `blockheat heat` of 20 M requests on 8 devices, a tenth of the workers' time). A wrapped
function first moves every object alive in its worker into the collector's permanent generation (`gc.freeze()`,
a constant-time list splice), so the collection after the task visits only what the task itself made. Objects are
still freed by their reference counts as before; only a reference cycle through an object alive at a task's start
is kept for the worker's life (none of the package's task functions makes one).

    frame.mapInArrow(python_task(fn), ddl)
"""
from __future__ import annotations

import functools
import gc
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def python_task(fn: F) -> F:
    """fn as a task function (mapInArrow's, applyInArrow's: called once per task or group) that first freezes the
    objects alive in its worker out of the collector's scans (see the module docstring). The wrapper takes fn's
    positional arguments by name (PySpark counts them to pass a group's key) and carries fn's signature and type
    hints (__wrapped__)."""
    arity = len(inspect.getfullargspec(fn).args)
    if arity == 1:
        def task(a: Any) -> Any:
            gc.freeze()
            return fn(a)
    elif arity == 2:
        def task(a: Any, b: Any) -> Any:  # type: ignore[misc]
            gc.freeze()
            return fn(a, b)
    elif arity == 3:
        def task(a: Any, b: Any, c: Any) -> Any:  # type: ignore[misc]
            gc.freeze()
            return fn(a, b, c)
    else:
        raise TypeError(f"a task function takes 1 to 3 positional arguments, {fn.__qualname__} takes {arity}")
    return functools.wraps(fn)(task)  # type: ignore[return-value]

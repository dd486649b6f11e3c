"""Software prefetch for compiled loops (numba): ask the processor to bring an array element's cache line in
ahead of its use, so the misses of independent lookups overlap instead of stalling one by one. A hint only: no
effect on any result."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _prefetch_intrinsic(write: int):  # type: ignore[no-untyped-def]
    def prefetch(typingctx, array, index):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        sig = types.void(array, index)

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            ptr = cgutils.get_item_pointer(context, builder, signature.args[0],
                                           context.make_array(signature.args[0])(context, builder, args[0]),
                                           [args[1]], wraparound=False)
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module,
                                                ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32]),
                                                "llvm.prefetch.p0")
            builder.call(fn, [builder.bitcast(ptr, cgutils.voidptr_t), i32(write), i32(3), i32(1)])   # all levels
            return context.get_dummy_value()

        return sig, codegen

    return intrinsic(prefetch)


#: prefetch_write(array, i): array[i]'s line (a 1-D array), to be written soon.
prefetch_write = _prefetch_intrinsic(1)
#: prefetch_read(array, i): array[i]'s line (a 1-D array), to be read soon.
prefetch_read = _prefetch_intrinsic(0)

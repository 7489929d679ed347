"""Decoding the next tensors on a second core while this one multiplies.

A quantized model spends most of a short prompt's forward decoding blocks (SmolLM2-135M Q4_1
at 32 tokens: ~0.15 s of decoding against ~0.1 s of products), all of it on one core, while
BLAS spreads the products over every core. Then the forward runs better as a pipeline: one
thread decodes the tensors in the order the blocks read them while the main thread multiplies
with BLAS kept off that thread's core (on two cores: one BLAS thread; two beside a decoding
thread oversubscribe the cores and gain nothing, and OpenBLAS's idle threads spin for a while
after each product, taking the core the decoding thread needs; measured).

The choice is a fixed rule, not a measurement, so that the same trace gives the same values
every time (OpenBLAS on one thread and on two sums in different orders: the last bits of the
values differ between the two modes): pipeline on two or more cores when the prompt is short
(:data:`MAX_TOKENS`; longer prompts are product-bound) and most of a block's weights need real
decoding (block formats, float16; float32 and bfloat16 are read at memory speed). On this
2-core VM the pipeline is 20-30% faster for Q4_1 at 32 tokens and about even at 64-100 tokens;
on more cores BLAS keeps every core but one (not measured here).

Memory: at most :data:`AHEAD_BYTES` of decoded float32 waits ahead of the tensor in use, and
tensors larger than one matrix chunk are never read ahead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nneditor.model.tensor import TensorRef

#: decoded float32 bytes that may wait ahead of the computation, counting reads under way
#: (SmolLM2's whole block is 14 MB; matrices larger than one 64 MB chunk are never read ahead)
AHEAD_BYTES = 64 << 20
#: the longest prompt pipelined
MAX_TOKENS = 64


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def suits(tokens: int, matrices: Iterable[TensorRef], cores: int | None = None) -> bool:
    """Whether a forward of ``tokens`` tokens runs pipelined, given one block's matrices."""
    if (usable_cores() if cores is None else cores) < 2 or tokens > MAX_TOKENS:
        return False
    costly = cheap = 0
    for ref in matrices:
        if _plain(ref):
            cheap += ref.size
        else:
            costly += ref.size
    return costly > cheap


def _plain(ref: TensorRef) -> bool:
    """Stored as float32 or bfloat16 elements (read at memory speed)."""
    width = {"float32": 4, "bfloat16": 2}.get(ref.dtype)
    return width is not None and ref.nbytes == width * ref.size


class _BlasLimit:
    """BLAS held to every core but the decoding thread's, for as long as any read-ahead is
    open (counted, so two forwards in one process restore it only when both are done)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._limits: Any = None

    def enter(self) -> None:
        with self._lock:
            if self._users == 0:
                from threadpoolctl import threadpool_limits

                self._limits = threadpool_limits(max(1, usable_cores() - 1), "blas")
            self._users += 1

    def exit(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limits is not None:
                self._limits.restore_original_limits()
                self._limits = None


_BLAS = _BlasLimit()


class ReadAhead:
    """One thread that reads tensors ahead of their use, with BLAS held off its core while it
    runs (restored by :meth:`close`)."""

    def __init__(self) -> None:
        _BLAS.enter()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="decoder-read-ahead")
        self._pending: dict[str, tuple[Future[Any], int]] = {}
        self._retiring: list[tuple[Future[Any], int]] = []  # dropped while being read

    @property
    def waiting_bytes(self) -> int:
        self._retiring = [(f, size) for f, size in self._retiring if not f.done()]
        pending = sum(size for _, size in self._pending.values())
        return pending + sum(size for _, size in self._retiring)

    def submit(self, key: str, size: int, read: Callable[[str], Any]) -> bool:
        """Read ``key`` ahead unless it is queued already or would pass the byte bound."""
        if key in self._pending or self.waiting_bytes + size > AHEAD_BYTES:
            return False
        self._pending[key] = (self._pool.submit(read, key), size)
        return True

    def take(self, key: str) -> Future[Any] | None:
        """The read of ``key``, if it was read ahead."""
        entry = self._pending.pop(key, None)
        return entry[0] if entry is not None else None

    def drop(self, prefix: str) -> None:
        """Forget what was read ahead under ``prefix`` and never used (a block done); a read
        under way counts against the bound until it ends."""
        for key in [k for k in self._pending if k.startswith(prefix)]:
            future, size = self._pending.pop(key)
            if not future.cancel():
                self._retiring.append((future, size))

    def close(self) -> None:
        self._pending.clear()
        self._retiring.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
        _BLAS.exit()

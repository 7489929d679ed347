"""glibc's malloc set up for the NumPy decoder's allocation pattern.

A forward allocates and frees megabyte-sized float32 arrays all the time (each decoded
matrix, its products and temporaries). glibc's defaults serve arrays above a threshold that
adapts to the sizes freed so far with fresh ``mmap`` memory, and give the top of the heap back
to the system whenever a few megabytes there are free; either way the next array of the same
size page-faults its memory in again (~10,000 faults of a SmolLM2-135M forward). Serving
arrays up to 32 MiB from the heap and keeping up to 64 MiB of freed heap for reuse made that
forward 9-14% faster (paired runs). Peak RSS: SmolLM2's trace 87 MiB (95 before); a 560 MB
F16 model with 16 MB matrices 229 MB (182 before: heap arrays of that size fragment it), still
within one block + a vocabulary chunk + activations of the worker's baseline.

glibc has no way back to its adaptive defaults, so the setting lasts for the process: the
trace worker, whose life is one trace, or a script calling the decoder itself. Elsewhere
(macOS, Windows, other C libraries) nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import sys

#: mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: arrays up to this size come from the heap (glibc's largest allowed threshold on 64-bit)
MMAP_THRESHOLD = 32 << 20
#: freed heap kept for reuse before any is given back to the system (256 MiB measured the same)
TRIM_THRESHOLD = 64 << 20


@functools.cache
def reuse_freed_arrays() -> bool:
    """Set glibc's malloc to reuse freed arrays (once per process); whether it took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )

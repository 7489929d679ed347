"""A bounded, thread-safe LRU cache of decoded arrays, limited by bytes, not entries."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np


class ByteLRU:
    def __init__(self, budget_bytes: int = 256 * 1024 * 1024) -> None:
        self.budget = budget_bytes
        self.used = 0
        self._items: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], np.ndarray]) -> np.ndarray:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        value = make()
        value.setflags(write=False)
        if value.nbytes <= self.budget // 4:  # never let one array evict everything
            with self._lock:
                if key not in self._items:
                    self._items[key] = value
                    self.used += value.nbytes
                    while self.used > self.budget and self._items:
                        _, old = self._items.popitem(last=False)
                        self.used -= old.nbytes
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.used = 0


#: Process-wide cache for decoded chunks (quantized blocks, typed protobuf fields).
DECODED = ByteLRU()

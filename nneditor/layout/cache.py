"""A small bounded cache of level layouts keyed by (level key, content hash).

Invariants:
- The content hash covers node ids, sizes and order, edges and order, and the layout options,
  so any change that could change the layout changes the key; it depends only on the type
  name and ``repr`` of ids (stable across processes for str/int/tuple ids), never on
  ``hash()``. Ids must therefore have a faithful ``repr`` (no ``<object at 0x...>``).
- At most ``max_entries`` layouts are kept; the least recently used is evicted first.
- Thread-safe; a layout is computed outside the lock (two threads may compute the same
  level once each; the first stored result wins and both get an equal layout).
- Cached :class:`Layout` objects are shared: callers must treat them as read-only.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

from nneditor.layout.layered import Layout, LayoutNode, layered_layout


def content_key(
    nodes: Sequence[LayoutNode], edges: Sequence[tuple[Hashable, Hashable]], **options: object
) -> str:
    """A hex digest of everything :func:`layered_layout` reads."""
    h = hashlib.blake2b(digest_size=20)
    for node in nodes:
        h.update(
            f"n{type(node.id).__name__}:{node.id!r}\x1f{node.width!r}\x1f{node.height!r}\x1e".encode()
        )
    for src, dst in edges:
        h.update(f"e{type(src).__name__}:{src!r}\x1f{type(dst).__name__}:{dst!r}\x1e".encode())
    for name in sorted(options):
        h.update(f"o{name}={options[name]!r}\x1e".encode())
    return h.hexdigest()


class LayoutCache:
    """LRU of :class:`Layout` keyed by ``(level_key, content_key(...))``."""

    def __init__(self, max_entries: int = 32) -> None:
        if max_entries < 1:
            raise ValueError(f"LayoutCache needs room for at least one layout, not {max_entries}.")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple[Hashable, str], Layout] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def layout(
        self,
        level_key: Hashable,
        nodes: Sequence[LayoutNode],
        edges: Sequence[tuple[Hashable, Hashable]],
        *,
        direction: str = "TB",
        node_gap: float = 24,
        rank_gap: float = 56,
    ) -> Layout:
        """Return the cached layout of this level's content, computing it on a miss."""
        options = {"direction": direction, "node_gap": node_gap, "rank_gap": rank_gap}
        key = (level_key, content_key(nodes, edges, **options))
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return hit
            self.misses += 1
        result = layered_layout(
            nodes, edges, direction=direction, node_gap=node_gap, rank_gap=rank_gap
        )
        with self._lock:
            stored = self._items.setdefault(key, result)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return stored

    def invalidate(self, level_key: Hashable | None = None) -> None:
        """Drop every layout of ``level_key`` (all layouts when it is None)."""
        with self._lock:
            if level_key is None:
                self._items.clear()
                return
            for key in [k for k in self._items if k[0] == level_key]:
                del self._items[key]

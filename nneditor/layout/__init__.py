"""Deterministic layered layout of one hierarchy level, and a cache of computed layouts."""

from __future__ import annotations

from nneditor.layout.cache import LayoutCache, content_key
from nneditor.layout.layered import EdgeRoute, Layout, LayoutNode, layered_layout

__all__ = ["EdgeRoute", "Layout", "LayoutCache", "LayoutNode", "content_key", "layered_layout"]

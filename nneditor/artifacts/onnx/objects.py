"""ONNX flavours of the core graph objects, with lazily decoded parts.

A transformer export has tens of thousands of nodes; turning every NodeProto and every
value_info entry into Python objects at open costs more than the whole index.
:class:`OnnxGraph` builds its ``nodes`` and ``value_info`` on first access, and
:class:`OnnxNode` decodes its attributes on first access. Both behave exactly like
:class:`Node`/:class:`Graph` to callers (plain lists, tuples, dicts, assignable attributes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.platform.gc_pause import collector_paused

_BUILD_LOCK = threading.RLock()


def as_text(value: str | bytes) -> str:
    """upb returns bytes for proto2 strings holding invalid UTF-8; make them text."""
    if isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", "replace")


def _names(values: Any) -> tuple[str, ...]:
    out = tuple(values)
    for item in out:
        if item.__class__ is not str:
            return tuple(as_text(v) for v in out)
    return out


class OnnxNode(Node):
    """A node whose attributes are decoded from its NodeProto on first access.

    ``_proto`` is the parsed NodeProto, or its position among its graph's parsed NodeProtos
    (nodes built by the compiled reader, ``_cwire.nodes``), or None for nodes indexed from the
    wire, which use the base class's ``attr_source``. ``_decode`` turns the proto's attributes
    into a dict and holds the graph's parsed NodeProtos (``protos``).
    """

    __slots__ = ("_proto", "_decode")
    _proto: Any
    _decode: Any

    def _message(self) -> Any:
        """The parsed NodeProto (None for a wire-indexed node)."""
        proto = self._proto
        if proto.__class__ is int:
            return self._decode.protos[proto]
        return proto

    @property
    def metadata(self) -> dict[str, str]:
        """The NodeProto's ``metadata_props`` (read on each access; rarely asked for)."""
        proto = self._message()
        if proto is None:
            return super().metadata
        props = proto.metadata_props
        return {as_text(p.key): as_text(p.value) for p in props} if props else {}

    @property
    def attributes(self) -> dict[str, Any]:
        """Attribute name -> decoded value (decoded on first access)."""
        if self._attrs is None:
            if self._attr_source is not None:
                self._attrs = self._attr_source()
                self._attr_source = None
            elif self._proto is not None and self._decode is not None:
                self._attrs = self._decode(self)
            else:
                self._attrs = {}
        return self._attrs


_new_node = object.__new__


def proto_node(index: int, proto: Any, decode: Any) -> OnnxNode:
    """A node backed by a parsed NodeProto (the fast path used for almost every node)."""
    node: OnnxNode = _new_node(OnnxNode)
    node.index = index
    name = proto.name
    node.name = name if name.__class__ is str else as_text(name)
    op = proto.op_type
    node.op_type = op if op.__class__ is str else as_text(op)
    domain = proto.domain
    node.domain = domain if domain.__class__ is str else as_text(domain)
    node.inputs = _names(proto.input)
    node.outputs = _names(proto.output)
    node.subgraphs = {}
    node.info = None
    node._attrs = None
    node._attr_source = None
    node._proto = proto
    node._decode = decode
    return node


def wire_node(
    index: int,
    name: str,
    op_type: str,
    domain: str,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    attr_source: Callable[[], dict[str, Any]],
) -> OnnxNode:
    """A node indexed from the wire (big nodes, nodes holding subgraphs or Constant tensors)."""
    node = OnnxNode(index, name, op_type, domain, inputs, outputs, attr_source=attr_source)
    node._proto = None
    node._decode = None
    return node


class OnnxGraph(Graph):
    """A graph whose ``nodes`` and ``value_info`` are built on first access.

    The reader parses and validates every NodeProto at open (in one protobuf call) but turns
    them into :class:`OnnxNode` objects only when ``nodes`` is first read, so that opening a
    50k-node model for its tensors does not pay for 50k Python objects.
    """

    def _lazy(self, key: str) -> Any:
        state = self.__dict__
        value = state.get(key)
        if value is None:
            with _BUILD_LOCK:
                value = state.get(key)
                if value is None:
                    source = state.get(f"{key}_source")
                    with collector_paused():
                        value = source() if source is not None else ([] if key == "_nodes" else {})
                    state[key] = value
                    state.pop(f"{key}_source", None)
        return value

    def _get_nodes(self) -> list[Node]:
        return self._lazy("_nodes")  # type: ignore[no-any-return]

    def _set_nodes(self, value: list[Node]) -> None:
        self.__dict__["_nodes"] = value
        self.__dict__.pop("_nodes_source", None)

    def _get_value_info(self) -> dict[str, ValueInfo]:
        return self._lazy("_value_info")  # type: ignore[no-any-return]

    def _set_value_info(self, value: dict[str, ValueInfo]) -> None:
        self.__dict__["_value_info"] = value
        self.__dict__.pop("_value_info_source", None)

    nodes = property(_get_nodes, _set_nodes)  # type: ignore[assignment]
    value_info = property(_get_value_info, _set_value_info)  # type: ignore[assignment]

    def set_sources(
        self,
        nodes: Callable[[], list[Node]],
        value_info: Callable[[], dict[str, ValueInfo]],
    ) -> None:
        """Build ``nodes`` with ``nodes()`` and ``value_info`` with ``value_info()`` when read."""
        state = self.__dict__
        state["_nodes"] = None
        state["_nodes_source"] = nodes
        state["_value_info"] = None
        state["_value_info_source"] = value_info

    @property
    def nodes_built(self) -> bool:
        """Whether ``nodes`` has been materialised (for tests and diagnostics)."""
        return self.__dict__.get("_nodes") is not None

"""The format-neutral document: metadata, tensor catalog, graph, capabilities."""

from nneditor.model.capabilities import Capabilities, Capability
from nneditor.model.document import Document, LazyList
from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef

__all__ = [
    "Capabilities",
    "Capability",
    "Document",
    "Graph",
    "LazyList",
    "Node",
    "TensorCatalog",
    "TensorRef",
    "ValueInfo",
]

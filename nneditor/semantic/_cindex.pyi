from collections.abc import Sequence

from nneditor.model.graph import Node

def adjacency(nodes: Sequence[Node]) -> tuple[dict[str, int], dict[str, list[int]]]: ...

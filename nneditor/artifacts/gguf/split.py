"""Split GGUF models: one model stored as ``NAME-00001-of-00003.gguf``, ``...-00002-...``.

llama.cpp's converter (``--split-max-size``/``--split-max-tensors``) and its ``gguf-split``
tool write a large model as several files. The first holds every metadata key; each file
carries ``split.no`` (0-based), ``split.count`` and, in the first, ``split.tensors.count``,
and holds some of the tensors. llama.cpp finds the other files by that naming pattern; so do
we, from whichever shard the user opened, and the document lists every shard's tensors.

Invariants:
- A shard that is missing, or whose own ``split.no``/``split.count`` disagree with its name,
  is left out with a note naming it and the count of tensors that are therefore not listed;
  nothing is guessed. A tensor name stored in two shards is an error.
- Metadata shown is the first shard's (the others repeat only the ``split.*`` keys); when the
  first shard is the missing one, the opened shard's own keys are shown, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nneditor.artifacts.gguf.index import GGUFIndex

#: llama.cpp's shard names: PREFIX-%05d-of-%05d.gguf (``llama_split_path``)
_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d+)-of-(?P<count>\d+)\.gguf$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """Where the shards of a split model should be, in order (index 0 = the first shard)."""

    count: int
    opened: int  # 0-based number of the shard the user opened
    paths: list[Path]


def split_count(index: GGUFIndex) -> tuple[int, int] | None:
    """(split.no, split.count) when the file declares itself one shard of several."""
    count = index.metadata.get("split.count")
    if not isinstance(count, int) or count < 2:
        return None
    no = index.metadata.get("split.no", 0)
    return (no if isinstance(no, int) else 0), count


def plan(path: Path, no: int, count: int) -> SplitPlan | str:
    """The shards' paths from the opened file's name, or why they cannot be found."""
    m = _NAME.match(path.name)
    if m is None or int(m["count"]) != count or int(m["no"]) != no + 1:
        return (
            f"this file is shard {no + 1} of {count} of a split model, but its name does not "
            f"follow llama.cpp's PREFIX-{no + 1:05d}-of-{count:05d}.gguf pattern, so the "
            "other shards cannot be found; only this shard's tensors are listed (rename the "
            "files as llama.cpp wrote them to open the whole model)"
        )
    width = len(m["no"])
    suffix = path.name[len(m["prefix"]) + len(m["no"]) + len(m["count"]) + 5 :]
    names = [f"{m['prefix']}-{i:0{width}d}-of-{m['count']}{suffix}" for i in range(1, count + 1)]
    return SplitPlan(count, no, [path.with_name(n) for n in names])

"""PyTorch artifacts, all read without running PyTorch or anything a file names: checkpoints
saved by torch.save (zip and legacy, :mod:`.checkpoint`), TorchScript archives
(:mod:`.torchscript`) and torch.export programs (:mod:`.pt2`, graph in :mod:`.pt2_graph`).
Pickles run on the restricted interpreter (:mod:`.restricted_pickle`); storages become tensor
references in :mod:`.tensors`.

Three formats, so three entry points: ``open_checkpoint``, ``open_torchscript``, ``open_pt2``.
"""

from nneditor.artifacts.pytorch.checkpoint import open_document as open_checkpoint
from nneditor.artifacts.pytorch.pt2 import open_document as open_pt2
from nneditor.artifacts.pytorch.torchscript import open_document as open_torchscript

__all__ = ["open_checkpoint", "open_pt2", "open_torchscript"]

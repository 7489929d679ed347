"""The decoder's refusal: raised, with a sentence, for every checkpoint it would not compute
exactly (its own module so that config.py and rope_scaling.py share it without a cycle)."""

from __future__ import annotations

from nneditor.errors import NNEditorError


class DecoderUnsupported(NNEditorError):
    """The checkpoint is not one the NumPy decoder runs; the message says what and why."""

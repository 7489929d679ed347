"""How the inspector writes metadata and attribute values (Qt-free helpers)."""

from __future__ import annotations

import numpy as np

from nneditor.ui.panels.inspector_html import float_text


def test_float32_values_show_their_shortest_float32_form() -> None:
    stored = float(np.float32(1e-5))  # what a GGUF float32 key or an ONNX float attribute holds
    assert stored != 1e-5 and float_text(stored) == "1e-05"
    assert float(np.float32(float_text(stored))) == stored  # same bits back
    assert float_text(float(np.float32(0.1))) == "0.1"
    assert float_text(0.1) == "0.1"  # a float64 value that float32 cannot hold: unchanged
    assert float_text(1 / 3) == str(1 / 3)
    assert float_text(1e300) == "1e+300" and float_text(float("nan")) == "nan"


def test_long_names_keep_their_distinguishing_tail() -> None:
    from nneditor.ui.panels.inspector_html import _short

    names = [f"__torch__.torch.nn.modules.activation.Act{i}" for i in range(20)]
    text = _short(names)
    assert all(f"Act{i}”" in text for i in range(16)) and "… (20 items)]" in text
    assert "characters" not in text  # items inside a list are only shortened
    one = _short("a" * 50 + "TAIL", limit=30)
    assert one.startswith("“aaaaaaaaaa…") and one.endswith("TAIL” (54 characters)")


def test_a_gguf_array_read_on_demand_shows_its_first_items_and_length() -> None:
    """GGUF vocabularies are lazy arrays: the inspector lists their first items and count,
    never the Python object's repr."""
    from nneditor.model.document import LazyList
    from nneditor.ui.panels.inspector_html import _attr_text

    tokens = [f"tok{i}" for i in range(40)]
    long = LazyList(len(tokens), tokens.__getitem__, "string")
    text = _attr_text(long)
    assert text.startswith("<code>[tok0, tok1,") and text.endswith("… (40 items)]</code>")
    short = LazyList(3, [7, 8, 9].__getitem__, "uint32")
    assert _attr_text(short) == "<code>[7, 8, 9]</code>"
    assert "object at" not in text + _attr_text(short)

"""Module paths from node names: the per-name rule and its cached form over a whole graph."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nneditor.semantic.scopes import scope_of, scopes_of


def test_scope_of_reads_the_exporters_paths() -> None:
    assert scope_of("/model/layers.3/self_attn/q_proj/MatMul") == (
        "model",
        "layers.3",
        "self_attn",
        "q_proj",
    )
    assert scope_of("model_1/conv1d/Conv1D;model_1/conv1d/BiasAdd") == ("model_1", "conv1d")
    assert scope_of("Conv_17") == ()
    assert scope_of("a/b/") == ("a",)  # an empty last component is dropped before the op's


def test_the_cached_form_keeps_names_whose_scope_the_prefix_alone_does_not_fix() -> None:
    names = ["a/b/x", "a/b/", "a/b/;c", "a/b/c;d/e", "a/b/y"]
    assert scopes_of(names) == [("a", "b"), ("a",), ("a",), ("a", "b"), ("a", "b")]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="ab/;.0", max_size=12), max_size=40))
def test_scopes_of_equals_scope_of_for_every_name(names: list[str]) -> None:
    assert scopes_of(names) == [scope_of(n) for n in names]

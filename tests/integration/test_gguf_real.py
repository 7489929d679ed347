"""The real SmolLM2-135M-Instruct Q4_1 GGUF against gguf-py's GGUFReader and dequantize."""

from __future__ import annotations

import hashlib
import os
import time

import gguf
import numpy as np
import pytest
from gguf import quants

import nneditor
from nneditor.artifacts.gguf.arrays import NumericArray, StringArray

pytestmark = pytest.mark.realdata
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def model(realdata):
    path = realdata(NAME)
    return path, gguf.GGUFReader(path)


def test_metadata_equals_reader(model) -> None:
    path, reader = model
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns)
    start = time.perf_counter()
    doc = nneditor.open(path)
    assert time.perf_counter() - start < 2.0
    md = doc.metadata
    assert doc.format == "gguf" and doc.format_version == "3"
    assert md["general.architecture"] == "llama" and md["llama.block_count"] == 30
    tokens = md["tokenizer.ggml.tokens"]
    assert isinstance(tokens, StringArray) and len(tokens) == 49152
    assert isinstance(md["tokenizer.ggml.token_type"], NumericArray)
    assert "im_start" in md["tokenizer.chat_template"]
    assert set(md) == set(reader.fields)
    for name, field in reader.fields.items():
        value = md[name]
        if isinstance(value, (StringArray, NumericArray)):
            value = value.tolist()
        assert value == field.contents(), name
    doc.close()
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns) == before


def test_tensor_catalog_equals_reader(model) -> None:
    path, reader = model
    with nneditor.open(path) as doc:
        assert list(doc.tensors) == [t.name for t in reader.tensors]
        assert len(doc.tensors) == 272
        for t in reader.tensors:
            ref = doc.tensors[t.name]
            assert ref.shape == tuple(reversed(t.shape.tolist())), t.name
            assert ref.encoding == t.tensor_type.name, t.name
            assert ref.nbytes == t.n_bytes and ref.offset == t.data_offset, t.name
        assert {r.encoding for r in doc.tensors.values()} == {"Q4_1", "Q8_0", "F32"}


def test_block_and_embedding_values(model) -> None:
    path, reader = model
    sample = [
        t for t in reader.tensors if t.name.startswith("blk.7.") or t.name == "token_embd.weight"
    ]
    assert len(sample) == 10
    with nneditor.open(path) as doc:
        for t in sample:
            want = quants.dequantize(np.array(t.data), t.tensor_type)
            want = want.reshape(tuple(reversed(t.shape.tolist())))
            ref = doc.tensors[t.name]
            np.testing.assert_array_equal(ref.read(), want, t.name)
            if want.ndim == 2:
                np.testing.assert_array_equal(ref.read("100:103, 64:200"), want[100:103, 64:200])
        emb = doc.tensors["token_embd.weight"]
        want = quants.dequantize(
            np.array(reader.get_tensor(0).data), reader.get_tensor(0).tensor_type
        )
        np.testing.assert_array_equal(emb.read("49151"), want.reshape(emb.shape)[49151])


@pytest.mark.realdata
def test_a_bert_gguf_is_drawn_as_the_post_norm_encoder_it_is(zoo_artifact) -> None:  # noqa: ANN001
    """llama.cpp's conversion of the real MiniLM: segment embeddings and the embedding norm,
    a LayerNorm after each residual add, no invented head, and every tensor placed."""
    path = zoo_artifact("minilm.gguf")
    reader = gguf.GGUFReader(str(path))
    names = {t.name for t in reader.tensors}
    layers = int(reader.fields["bert.block_count"].contents())
    with nneditor.open(path) as doc:
        g = doc.graph
        assert g is not None and not doc.notes
        assert set(g.initializers) == names  # nothing left out of the drawing
        reads = {w for n in g.nodes for w in n.inputs}
        assert names <= reads
        assert [o.name for o in g.outputs] == [f"blk.{layers - 1}.output"]
        assert "LMHead" not in {n.op_type for n in g.nodes}
        for i in range(layers):
            ops = [n.op_type for n in g.nodes if n.name.startswith(f"/blk.{i}/")]
            assert ops == ["Attention", "Add", "LayerNorm", "FeedForward", "Add", "LayerNorm"]
        first = [n.op_type for n in g.nodes[:6]]
        assert first == ["Embedding", "Embedding", "Add", "Embedding", "Add", "LayerNorm"]


@pytest.mark.realdata
def test_the_bert_gguf_tokenizes_as_the_snapshot_tokenizer_json(zoo_artifact) -> None:  # noqa: ANN001
    """The WordPiece vocabulary llama.cpp embedded gives the ids the model's own tokenizer.json
    gives (tokenizers, [CLS] ... [SEP]) for text both normalise alike (no accents)."""
    from tokenizers import Tokenizer

    from nneditor.tokenize import load_tokenizer

    hf = Tokenizer.from_file(str(zoo_artifact("minilm") / "tokenizer.json"))
    hf.no_padding()
    ours = load_tokenizer(zoo_artifact("minilm.gguf"))
    for text in (
        "The capital of France is Paris.",
        "Hello, world! It's 3.14 $dollars$ (really) #tag",
        "unbelievably antidisestablishmentarianism; 東京 is big",
        "MiXeD CaSe and\ttabs\nnewlines",
    ):
        assert ours.encode(text) == hf.encode(text).ids, text

"""Hugging Face snapshot folders: config, tokenizer summary, sharded weights, refusals."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from nneditor.artifacts.huggingface import snapshot as hf_snapshot
from nneditor.artifacts.registry import open_document
from nneditor.errors import ArtifactError
from nneditor.io.identity import fast_identity
from nneditor.io.source import MemorySource
from nneditor.model.capabilities import build, no, yes
from nneditor.model.document import Document
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.loaders import ArrayLoader

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 12,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "float32",
    "rope_scaling": None,
}


def tokenizer_json() -> dict:
    """A byte-level BPE tokenizer.json in the layout the tokenizers library writes."""
    vocab = {tok: i for i, tok in enumerate(["a", "b", "ab", "Ġ", "Ġa", '"q"', "\\", "é"])}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": 8, "content": "<s>", "special": True},
            {"id": 9, "content": "</s>", "special": True},
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel"},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "vocab": vocab,
            "merges": [["a", "b"], ["Ġ", "a"]],
        },
    }


def make_snapshot(folder: Path) -> dict[str, np.ndarray]:
    """config + generation config + tokenizer files + two safetensors shards with an index."""
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 8, "eos_token_id": 9})
    )
    (folder / "tokenizer.json").write_text(
        json.dumps(tokenizer_json(), indent=2, ensure_ascii=False)
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": "{{ x }}"})
    )
    (folder / "README.md").write_text("not a member")
    rng = np.random.default_rng(5)
    shards = [
        {"model.embed_tokens.weight": rng.standard_normal((12, 8)).astype("<f4")},
        {
            "model.norm.weight": np.ones(8, dtype="<f4"),
            "lm_head.weight": rng.standard_normal((12, 8)).astype("<f2"),
        },
    ]
    weight_map = {}
    for i, tensors in enumerate(shards, 1):
        name = f"model-0000{i}-of-00002.safetensors"
        save_file(tensors, folder / name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, name))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return {k: v for shard in shards for k, v in shard.items()}


MEMBERS = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
]


def test_generated_snapshot(tmp_path, unchanged):
    folder = tmp_path / "snap"
    make_snapshot(folder)
    checks = [unchanged(folder / name) for name in MEMBERS]
    with open_document(folder) as doc:
        assert doc.format == "huggingface"
        md = doc.metadata
        assert md["config"] == json.loads((folder / "config.json").read_text())
        assert md["architecture"] == "LlamaForCausalLM"
        assert md["architectures"] == ["LlamaForCausalLM"]
        assert md["model_type"] == "llama"
        assert (md["hidden_size"], md["num_hidden_layers"], md["num_key_value_heads"]) == (8, 2, 1)
        assert md["generation_config"] == {"bos_token_id": 8, "eos_token_id": 9}
        reference = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        tok = md["tokenizer"]
        assert tok["files"] == ["tokenizer.json", "tokenizer_config.json"]
        assert tok["model_type"] == reference["model"]["type"]
        assert tok["vocab_size"] == len(reference["model"]["vocab"])
        assert tok["added_tokens"] == len(reference["added_tokens"])
        assert tok["pre_tokenizer"] == "ByteLevel"
        assert tok["tokenizer_class"] == "PreTrainedTokenizerFast" and tok["has_chat_template"]
        assert md["weights"]["layout"] == "safetensors-sharded"

        shards = sorted(folder.glob("*.safetensors"))
        expected = {k: (p.name, v) for p in shards for k, v in load_file(p).items()}
        assert set(doc.tensors) == set(expected)
        for name, (shard, want) in expected.items():
            assert doc.tensors[name].location == shard
            np.testing.assert_array_equal(doc.tensors[name].read(), want)

        assert doc.size_bytes == sum((folder / n).stat().st_size for n in MEMBERS)
        assert doc.identity.size == doc.size_bytes
        assert doc.graph is None and "no graph" in doc.graph_unavailable_reason
        assert not doc.capabilities["view_graph"].available
        assert doc.capabilities["read_tensors"].available
        assert any("total_size 0 bytes" in n for n in doc.notes)
    for check in checks:
        check()


def test_single_model_safetensors_and_identity_changes(tmp_path):
    folder = tmp_path / "single"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"_class_name": "UNet2DModel", "sample_size": 8})
    )
    save_file({"w": np.arange(6, dtype="<f4").reshape(2, 3)}, folder / "model.safetensors")
    (folder / "pytorch_model.bin").write_bytes(b"ignored")
    with open_document(folder) as doc:
        assert doc.metadata["architecture"] == "UNet2DModel"
        assert doc.metadata["weights"] == {"layout": "safetensors", "files": ["model.safetensors"]}
        np.testing.assert_array_equal(doc.tensors["w"].read("1"), [3, 4, 5])
        assert doc.notes == ["PyTorch .bin weights are also present; the safetensors are shown"]
        first = doc.identity
    (folder / "config.json").write_text(json.dumps({"_class_name": "UNet2DModel", "x": 1}))
    with open_document(folder) as doc:
        assert doc.identity != first


def test_folder_that_is_not_a_snapshot(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(ArtifactError) as exc:
        hf_snapshot.open_document(folder)
    assert (
        "this folder is not a Hugging Face snapshot: it has neither config.json nor model weights"
        in str(exc.value)
    )
    assert "open the folder that holds config.json" in str(exc.value)
    with pytest.raises(ArtifactError, match="is not a folder; a Hugging Face snapshot is a folder"):
        hf_snapshot.open_document(folder / "cat.jpg")


def test_config_only_folder_opens_without_tensors(tmp_path):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    with open_document(folder) as doc:
        assert len(doc.tensors) == 0
        assert doc.metadata["tokenizer"] == {"files": ["vocab.txt"]}
        assert (
            doc.capabilities["read_tensors"].reason == "no weight files were found in this folder"
        )
        assert "no weight files were found in this folder" in doc.notes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"model_type": ', "config.json is not valid JSON (Expecting value)"),
        ("[1]", "config.json holds a JSON list, not an object"),
    ],
)
def test_bad_config_is_refused(tmp_path, text, expected):
    folder = tmp_path / "bad"
    make_snapshot(folder)
    (folder / "config.json").write_text(text)
    with pytest.raises(ArtifactError) as exc:
        open_document(folder)
    assert expected in str(exc.value) and str(exc.value).startswith("HUGGINGFACE ")


def test_oversized_config_is_not_read(tmp_path, monkeypatch):
    folder = tmp_path / "big"
    make_snapshot(folder)
    monkeypatch.setattr(hf_snapshot, "MAX_JSON_BYTES", 16)
    with pytest.raises(
        ArtifactError, match="config.json is 2[0-9]{2} bytes, more than the 16-byte limit"
    ):
        hf_snapshot.open_document(folder)


def test_broken_side_files_become_notes(tmp_path):
    folder = tmp_path / "side"
    make_snapshot(folder)
    (folder / "generation_config.json").write_text("{")
    text = (folder / "tokenizer.json").read_text(encoding="utf-8")
    (folder / "tokenizer.json").write_text(text[: text.index('"model"') + 30], encoding="utf-8")
    with open_document(folder) as doc:
        assert any(n.startswith("generation_config.json was not read: ") for n in doc.notes)
        assert "tokenizer.json: the file ends inside a JSON value; it is truncated" in doc.notes
        assert doc.metadata["tokenizer"]["model_type"] == "BPE"
        assert "vocab_size" not in doc.metadata["tokenizer"]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"model": {"type": "Unigram", "vocab": [["a", -1.0], ["b", -2.5], ["c", 0]]}},
            ("Unigram", 3),
        ),
        ({"model": {"type": "WordLevel", "vocab": {}}}, ("WordLevel", 0)),
        ({"model": {"vocab": {"x": 0}, "type": "WordPiece"}}, ("WordPiece", 1)),
        ({"model": {"type": "X", "vocab": [5]}}, ("X", 1)),
        ({"model": {"type": "X", "vocab": {'{["': 1, "}],": 2}}}, ("X", 2)),
    ],
)
def test_tokenizer_scan_matches_json(doc, expected):
    found = hf_snapshot.scan_tokenizer_json(json.dumps(doc).encode())
    assert (found["model_type"], found["vocab_size"]) == expected
    assert expected[1] == len(doc["model"]["vocab"])


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"model": {"vocab": ]}', "unbalanced ] at byte 20"),
        (b"[" * 1000, "nesting is too deep; the scan stopped"),
        (b'{"model": {"type": "BPE"', "the file ends inside a JSON value; it is truncated"),
    ],
)
def test_tokenizer_scan_survives_malformed_input(raw, problem):
    assert hf_snapshot.scan_tokenizer_json(raw)["problem"] == problem


# --------------------------------------------------------------------------- .bin shards


def _bin_snapshot(folder: Path) -> None:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    weight_map = {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00001-of-00002.bin"}
    weight_map["c"] = "pytorch_model-00002-of-00002.bin"
    for shard in set(weight_map.values()):
        (folder / shard).write_bytes(b"\x80\x02}q\x00.")  # stand-in; the reader is faked below
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))


def test_bin_shards_without_the_torch_reader_are_noted(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_snapshot, "TORCH_READER", "nneditor.artifacts._no_such_reader")
    folder = tmp_path / "bin"
    _bin_snapshot(folder)
    with open_document(folder) as doc:
        assert len(doc.tensors) == 0
        assert doc.metadata["weights"]["layout"] == "pytorch-sharded"
        assert doc.notes == [
            "pytorch_model-00001-of-00002.bin: its 2 tensors are not listed: the PyTorch "
            "checkpoint reader (nneditor.artifacts._no_such_reader) is not available in this build",
            "pytorch_model-00002-of-00002.bin: its 1 tensors are not listed: the PyTorch "
            "checkpoint reader (nneditor.artifacts._no_such_reader) is not available in this build",
        ]
        assert doc.size_bytes == sum(p.stat().st_size for p in folder.iterdir())


def _fake_reader(contents: dict[str, dict[str, np.ndarray]]) -> types.ModuleType:
    """A stand-in torch_pickle module honouring the reader protocol (open_document)."""

    def open_document(path: Path) -> Document:
        arrays = contents[path.name]
        refs = [
            TensorRef(k, "float32", v.shape, v.nbytes, "raw", ArrayLoader(v))
            for k, v in arrays.items()
        ]
        src = MemorySource(b"")
        return Document(
            "pytorch",
            "",
            path,
            0,
            fast_identity(src),
            {},
            TensorCatalog(refs),
            None,
            "",
            build(inspect=yes(), view_graph=no("x")),
            sources=[src],
            notes=["pickle note"],
        )

    module = types.ModuleType("fake_torch_pickle")
    module.open_document = open_document  # type: ignore[attr-defined]
    return module


def test_bin_shards_go_through_the_torch_reader(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    _bin_snapshot(folder)
    values: dict[str, dict[str, np.ndarray]] = {
        "pytorch_model-00001-of-00002.bin": {"a": np.ones((2, 2), "f4"), "b": np.zeros(3, "f4")},
        "pytorch_model-00002-of-00002.bin": {"c": np.arange(4, dtype="f4")},
    }
    monkeypatch.setitem(sys.modules, hf_snapshot.TORCH_READER, _fake_reader(values))
    with open_document(folder) as doc:
        assert list(doc.tensors) == ["a", "b", "c"]
        assert doc.tensors["c"].location == "pytorch_model-00002-of-00002.bin"
        np.testing.assert_array_equal(doc.tensors["c"].read(), np.arange(4))
        assert "pytorch_model-00001-of-00002.bin: pickle note" in doc.notes
        assert len(doc.sources) == 2
    del values["pytorch_model-00002-of-00002.bin"]["c"]
    with pytest.raises(
        ArtifactError, match="places tensor 'c' in shard 'pytorch_model-00002-of-00002.bin'"
    ):
        open_document(folder)


def test_bin_index_shard_outside_the_folder_is_refused(tmp_path):
    folder = tmp_path / "esc"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "pytorch_model.bin.index.json").write_text(
        json.dumps({"weight_map": {"a": "../x.bin"}})
    )
    with pytest.raises(ArtifactError) as exc:
        open_document(folder)
    assert "HUGGINGFACE" in str(exc.value)
    assert "the index names shard '../x.bin', which lies outside the index's folder" in str(
        exc.value
    )


def test_real_torch_bin_when_the_reader_exists(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip(hf_snapshot.TORCH_READER)
    folder = tmp_path / "pt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(3)}
    torch.save(state, folder / "pytorch_model.bin")
    reference = torch.load(folder / "pytorch_model.bin", weights_only=True)
    with open_document(folder) as doc:
        assert set(doc.tensors) == set(reference)
        for name, want in reference.items():
            np.testing.assert_array_equal(doc.tensors[name].read(), want.numpy())

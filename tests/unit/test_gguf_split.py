"""Split GGUF models (``NAME-00001-of-00003.gguf``, ...), written by gguf-py's own writer
(``GGUFWriter(split_max_tensors=...)``, what llama.cpp's converter uses): any shard opens the
whole model; a missing, renamed or foreign shard is named in a note, never guessed."""

from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest

import nneditor
from nneditor.decoder import DecoderUnsupported, decoder_config
from nneditor.errors import ArtifactError

RNG = np.random.default_rng(7)
TENSORS = {f"t{i}": RNG.standard_normal((3, 4 + i)).astype(np.float32) for i in range(5)}


def write_split(folder: Path, stem: str = "m", per_shard: int = 2) -> list[Path]:
    w = gguf.GGUFWriter(str(folder / f"{stem}.gguf"), "llama", split_max_tensors=per_shard)
    w.add_string("general.name", "split test")
    for name, array in TENSORS.items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(folder.glob(f"{stem}-*-of-*.gguf"))


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    paths = write_split(tmp_path)
    assert [p.name for p in paths] == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    return paths


@pytest.mark.parametrize("opened", [0, 1, 2])
def test_any_shard_opens_every_tensor_with_the_first_shards_metadata(shards, opened) -> None:  # noqa: ANN001
    reader = gguf.GGUFReader(shards[0])  # the reference: gguf-py reads each shard alone
    with nneditor.open(shards[opened]) as doc:
        assert list(doc.tensors.keys()) == list(TENSORS)
        for name, want in TENSORS.items():
            np.testing.assert_array_equal(doc.tensors[name].read(), want)
        assert doc.metadata["general.name"] == "split test"
        assert doc.metadata["split.count"] == 3
        assert str(reader.fields["general.name"].contents()) == "split test"
        assert [s["file"] for s in doc.tree["split"]] == [p.name for p in shards]
        assert [s["tensors"] for s in doc.tree["split"]] == [2, 2, 1]
        assert doc.size_bytes == sum(p.stat().st_size for p in shards)
        assert not doc.notes
        # tensors stored in another file than the one opened say where they are
        assert {doc.tensors[n].location for n in TENSORS} == {
            *(p.name for i, p in enumerate(shards) if i != opened),
            None,
        }


def test_identity_covers_every_shard(shards) -> None:  # noqa: ANN001
    with nneditor.open(shards[0]) as doc:
        before = doc.identity
    data = bytearray(shards[2].read_bytes())
    data[-1] ^= 0xFF  # a changed value in the last shard
    shards[2].write_bytes(bytes(data))
    with nneditor.open(shards[0]) as doc:
        assert doc.identity.fingerprint != before.fingerprint
        assert doc.identity.size == before.size


def test_a_missing_shard_is_named_and_its_tensors_counted(shards) -> None:  # noqa: ANN001
    shards[1].unlink()
    with nneditor.open(shards[0]) as doc:
        assert list(doc.tensors.keys()) == ["t0", "t1", "t4"]
        (note,) = doc.notes
        assert "shard 2 (m-00002-of-00003.gguf) is missing" in note
        assert "2 of the model's 5 tensors are not listed" in note
        assert [s["shard"] for s in doc.tree["split"]] == [1, 3]


def test_without_the_first_shard_its_own_metadata_is_shown_and_said(shards) -> None:  # noqa: ANN001
    shards[0].unlink()
    with nneditor.open(shards[2]) as doc:
        assert list(doc.tensors.keys()) == ["t2", "t3", "t4"]
        assert "general.name" not in doc.metadata
        assert any("shard 1 (m-00001-of-00003.gguf) is missing" in n for n in doc.notes)
        assert any(
            "the first shard, which holds the model's metadata, is missing" in n for n in doc.notes
        )


def test_a_renamed_shard_cannot_find_its_siblings_and_says_so(shards, tmp_path) -> None:  # noqa: ANN001
    renamed = tmp_path / "model.gguf"
    shutil.copy(shards[0], renamed)
    with nneditor.open(renamed) as doc:
        assert list(doc.tensors.keys()) == ["t0", "t1"]
        (note,) = doc.notes
        assert "shard 1 of 3" in note and "PREFIX-00001-of-00003.gguf" in note


def test_a_foreign_file_under_a_shard_name_is_left_out(shards, tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "other").mkdir()
    other = write_split(tmp_path / "other", per_shard=3)
    shutil.copy(other[0], shards[1])  # shard 1 of 2 of another model, under shard 2's name
    with nneditor.open(shards[0]) as doc:
        assert list(doc.tensors.keys()) == ["t0", "t1", "t4"]
        (note,) = doc.notes
        assert "m-00002-of-00003.gguf is left out: by its own metadata it is shard 1 of 2" in note


def test_a_tensor_in_two_shards_is_an_error(tmp_path) -> None:  # noqa: ANN001
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = write_split(a, per_shard=2)
    write_split(b, per_shard=2)
    shutil.copy(b / "m-00001-of-00003.gguf", a / "m-00002-of-00003.gguf")
    # the copied first shard declares itself shard 1: left out, not merged
    with nneditor.open(first[0]) as doc:
        assert "left out" in doc.notes[0]
    # a shard 2 holding t0 again: patch the name t2 -> t0 in a real shard 2
    data = (b / "m-00002-of-00003.gguf").read_bytes().replace(b"t2", b"t0", 1)
    (a / "m-00002-of-00003.gguf").write_bytes(data)
    with pytest.raises(ArtifactError, match="'t0' is stored in two shards"):
        nneditor.open(first[0])


def test_a_trace_of_an_incomplete_split_model_is_refused_with_a_sentence(shards) -> None:  # noqa: ANN001
    shards[1].unlink()
    with nneditor.open(shards[0]) as doc, pytest.raises(DecoderUnsupported) as err:
        decoder_config(doc)
    assert "split into 3 files and only shard(s) 1, 3 could be opened" in str(err.value)


def test_the_inspector_lists_the_shards(shards) -> None:  # noqa: ANN001
    from nneditor.ui.model_index import ModelIndex
    from nneditor.ui.panels.inspector_html import document_html

    with nneditor.open(shards[1]) as doc:
        html = document_html(ModelIndex(doc, None))
    assert "3 shards: m-00001-of-00003.gguf (2 tensors), m-00002-of-00003.gguf (2 tensors)" in html


def test_a_folder_of_model_files_names_what_to_open(shards, tmp_path) -> None:  # noqa: ANN001
    """A download folder (a split GGUF set, an ONNX file in a subfolder) is not one model: the
    error names the files to open, a split set once, by its first shard."""
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(b"\x08\x07")
    with pytest.raises(ArtifactError) as err:
        nneditor.open(tmp_path)
    assert err.value.hint == (
        "open one of the model files it holds: m-00001-of-00003.gguf, onnx/model.onnx"
    )


def test_a_snapshot_without_weights_points_at_its_onnx_files(tmp_path) -> None:  # noqa: ANN001
    """An ONNX Runtime / transformers.js export: config.json beside onnx/model.onnx only."""
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model_quantized.onnx").write_bytes(b"\x08\x07")
    with nneditor.open(tmp_path) as doc:
        assert len(doc.tensors) == 0 and doc.graph is None
        want = (
            "this folder holds no weights (safetensors or pytorch_model.bin); open one of the "
            "model files it holds: onnx/model_quantized.onnx"
        )
        assert doc.graph_unavailable_reason == want and doc.notes == [want]

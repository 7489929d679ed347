"""Embedding models as sentence-transformers runs them: the modules.json beside an encoder
snapshot (all-MiniLM-L6-v2, all-mpnet-base-v2) pools the last hidden state and normalises it.
The trace's sentence embedding equals torch's mean pooling and F.normalize of transformers'
last hidden state; a module that is not computed is said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.semantic.sentence_pooling import read_pooling

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

TEXT = "the model reads every layer and writes its weights"


def _traced(snap: Path) -> tuple[dict[str, np.ndarray], set[str], tuple[str, ...], list[int]]:
    ids = tf.AutoTokenizer.from_pretrained(str(snap))(TEXT)["input_ids"]
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        run_forward(doc, cfg, np.array([ids]), values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    return values, drawn, cfg.notes, ids


def _hidden(snap: Path, ids: list[int]) -> torch.Tensor:
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).last_hidden_state


@pytest.mark.realdata
def test_all_minilm_sentence_embedding(realdata) -> None:  # noqa: ANN001
    """The real all-MiniLM-L6-v2: mean pooling, then Normalize."""
    snap = realdata("minilm")
    values, drawn, notes, ids = _traced(snap)
    want = torch.nn.functional.normalize(_hidden(snap, ids).mean(1), p=2, dim=1).numpy()
    got = values["sentence_embedding"]
    assert got.shape == (1, 1, 384) and np.abs(got[0] - want).max() < 1e-6
    assert np.isclose(np.linalg.norm(got), 1.0)
    assert {"sentence_pooled", "sentence_embedding"} <= drawn
    assert any("mean pooling, then unit length" in n for n in notes)


@pytest.mark.realdata
def test_mpnet_mean_pooling_and_other_modes(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """all-mpnet-base-v2's layout (mean, no Normalize module here); the same snapshot with
    CLS pooling reads the first token, and a Dense module after the pooling is said."""
    snap = zoo_artifact("encoder-mpnet")
    values, _, _, ids = _traced(snap)
    hidden = _hidden(snap, ids)
    assert np.abs(values["sentence_pooled"][0] - hidden.mean(1).numpy()).max() < 1e-6
    assert "sentence_embedding" not in values  # (no Normalize module)
    other = tmp_path / "cls"
    shutil.copytree(snap, other)
    pooling = json.loads((other / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (other / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    modules = json.loads((other / "modules.json").read_text())
    modules.append(
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    )
    (other / "modules.json").write_text(json.dumps(modules))
    values, _, notes, _ = _traced(other)
    assert np.abs(values["sentence_pooled"][0] - hidden[:, 0].numpy()).max() < 1e-6
    assert any("(Dense) are not computed" in n for n in notes)


def test_pooling_without_modules_json_or_with_several_modes(tmp_path) -> None:  # noqa: ANN001
    assert read_pooling(tmp_path) is None
    (tmp_path / "modules.json").write_text(
        json.dumps([{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
    )
    (tmp_path / "1_Pooling").mkdir()
    both = {"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(both))
    assert read_pooling(tmp_path) is None  # (concatenated modes: not claimed)

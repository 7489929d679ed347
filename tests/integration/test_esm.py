"""ESM-2 protein language models (tools/zoo_mlm.py's encoder-esm2, as facebook/esm2_t6_8M):
the residue tokenizer's ids against transformers' EsmTokenizer, every layer and the masked-LM
logits against EsmForMaskedLM (masked residues included: token dropout), and fill-mask through
the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from headline import assert_top_equals
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

SEQUENCES = [
    "MKTAYIAKQRQISFVKSHFSRQ",
    "MKT AYI AKQ",
    "MKTAY<mask>AKQ<mask>L",
    "ACDEFGHIKLMNPQRSTVWY",
]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.realdata
def test_residue_ids_equal_esm_tokenizer(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("encoder-esm2")
    theirs = tf.EsmTokenizer.from_pretrained(str(snap))
    ours = load_tokenizer(Path(snap))
    assert "EsmTokenizer" in ours.fidelity and ours.mask_id == theirs.mask_token_id
    for text in SEQUENCES:
        assert ours.encode(text, special=True) == theirs(text)["input_ids"], text


@pytest.mark.realdata
def test_esm2_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("encoder-esm2")
    ids = tf.EsmTokenizer.from_pretrained(str(snap))(SEQUENCES[2])["input_ids"]
    model = tf.EsmForMaskedLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, np.array([ids]), values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        notes = list(doc.notes)
        # without token dropout (two of the prompt's residues masked) or the rotation, the
        # values are other numbers
        plain = run_forward(
            doc, dataclasses.replace(cfg, mask_dropout=-1), np.array([ids]), lambda n, v: None
        )
        still = run_forward(
            doc, dataclasses.replace(cfg, rope="none"), np.array([ids]), lambda n, v: None
        )
    for i in range(cfg.n_layers - 1):  # (the last hidden state is the final norm's, below)
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(values["enc_output"], out.hidden_states[-1].numpy()) < 1e-5
    want = out.logits.numpy()
    assert _rel(logits, want) < 1e-5
    assert _rel(plain, want) > 1e-3 and _rel(still, want) > 1e-3
    assert set(values) <= drawn and "inp_dropout_scaled" in values
    assert any("contact-prediction head" in n for n in notes)


@pytest.mark.realdata
def test_fill_mask_on_a_protein_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    snap = zoo_artifact("encoder-esm2")
    text = "MKTAYIAK<mask>RQISFV"
    ids_file, trace = tmp_path / "ids.npz", tmp_path / "trace"
    r = nneditor_cli("tokenize", str(snap), "--text", text, "--special", "--out", str(ids_file))
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    ids = tf.EsmTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert got["position"] == ids.index(32)  # read at the mask, unasked
    model = tf.EsmForMaskedLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        row = model(torch.tensor([ids])).logits[0, got["position"]]
    assert_top_equals(got, row)

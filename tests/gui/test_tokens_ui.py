"""Text tokens in the window: the Text tokens box of "Generate test input" writes the model's
own token ids, a trace runs on them, and the Tokens tab of a captured value decodes the ids and
reads the next-token predictions (checked against ONNX Runtime and torch)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from nneditor.tokenize.token_inputs import read_note  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"
WORDS = ["<unk>", "<|endoftext|>"] + [f"w{i}" for i in range(2, 100)]
PROMPT = "w5 w17 w3 w99 w42 w42 w8 w61"


def _gpt2_with_tokenizer(zoo_artifact, folder: Path) -> Path:  # noqa: ANN001
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    model = folder / "gpt2.onnx"
    shutil.copy(zoo_artifact("gpt2.onnx"), model)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.save(str(folder / "tokenizer.json"))
    return model


def _box(window):  # noqa: ANN001, ANN202
    window.trace.show_view("Trace")
    return window.trace.inputs


@pytest.mark.realdata
def test_prompt_to_predictions_in_the_window(
    qtbot, open_model, window, zoo_artifact, tmp_path
) -> None:  # noqa: ANN001, E501
    import onnxruntime as ort
    import torch

    model = _gpt2_with_tokenizer(zoo_artifact, tmp_path)
    open_model(model)
    inputs = _box(window)
    assert inputs.text_box.isVisibleTo(window) and "'input_ids'" in inputs.text_box.title()
    inputs.prompt.setCurrentText(PROMPT)
    inputs.folder.setText(str(tmp_path / "set"))
    assert inputs.generate_text_tokens(), inputs.status.text()
    ids = [5, 17, 3, 99, 42, 42, 8, 61]
    assert "8 tokens (tokenizer.json;" in inputs.text_status.text()
    arrays = window.trace.panel.arrays
    assert arrays["input_ids"].tolist() == [ids] and arrays["attention_mask"].tolist() == [[1] * 8]
    note = read_note(tmp_path / "set" / "input_ids.npz")
    assert note and note["text"] == PROMPT and "tokenizers library" in note["fidelity"]

    panel = window.trace.panel
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=90000)
    assert runs, panel.outcome.text()

    overlay = window.trace.open_overlay("454")  # the lm_head output: [1, vocab]
    assert overlay is not None and overlay.tokens_tab is not None
    overlay.show_tab("Tokens")
    tab = overlay.tokens_tab
    assert "100 tokens from tokenizer.json" in tab.source.text()
    assert tab.position.isVisibleTo(tab) and not tab.keep_special.isVisibleTo(tab)
    tab.top.setValue(4)
    result = tab.inspect_predictions()
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feed = {k: np.asarray(v) for k, v in arrays.items()}
    logits = sess.run(None, feed)[0][0].astype(np.float64)
    top = torch.topk(torch.softmax(torch.from_numpy(logits), -1), 4)
    assert result is not None and [t["id"] for t in result["top"]] == top.indices.tolist()
    assert np.allclose([t["prob"] for t in result["top"]], top.values.numpy(), atol=1e-6)
    best = WORDS[top.indices.tolist()[0]]
    assert f"Greedy candidate at position 0: '{best}'" in tab.summary.text()
    assert tab.table.rowCount() == 4 and tab.table.item(0, 4).text() == repr(best)
    overlay.resize(900, 600)
    overlay.grab().save(str(tmp_path / "tokens_tab.png"))

    ids_overlay = window.trace.open_overlay("input_ids")
    assert ids_overlay is not None and ids_overlay.tokens_tab is not None
    decoded = ids_overlay.tokens_tab.decode_tokens()
    assert decoded is not None and decoded["text"] == PROMPT
    assert ids_overlay.tokens_tab.text.toPlainText() == PROMPT
    assert not ids_overlay.tokens_tab.position.isVisibleTo(ids_overlay.tokens_tab)
    ids_overlay.show_tab("Tokens")
    ids_overlay.resize(900, 400)
    ids_overlay.grab().save(str(tmp_path / "ids_tab.png"))
    assert window.trace.open_overlay("/transformer/Constant_13_output_0").tokens_tab is None


@pytest.mark.realdata
def test_a_length_the_model_refuses_assigns_nothing(
    qtbot, open_model, window, zoo_artifact, tmp_path
) -> None:  # noqa: ANN001, E501
    open_model(_gpt2_with_tokenizer(zoo_artifact, tmp_path))
    inputs = _box(window)
    inputs.prompt.setCurrentText("w5 w6")
    inputs.length.setText("12")
    inputs.folder.setText(str(tmp_path / "set"))
    assert not inputs.generate_text_tokens()
    assert "axis 1 is 12, not 8" in inputs.status.text()
    assert window.trace.panel.arrays is None or "input_ids" not in window.trace.panel.arrays
    inputs.length.setText("8")  # no padding or end-of-sequence token known: 0
    assert inputs.generate_text_tokens(), inputs.status.text()
    assert window.trace.panel.arrays["input_ids"].tolist() == [[5, 6, 0, 0, 0, 0, 0, 0]]
    assert "the last 6 are padding (id 0)" in inputs.text_status.text()
    config = {"eos_token": "<|endoftext|>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert inputs.generate_text_tokens(), inputs.status.text()  # now the end-of-sequence id
    assert window.trace.panel.arrays["input_ids"].tolist() == [[5, 6, 1, 1, 1, 1, 1, 1]]


def test_smoke_test_codebooks_are_labelled(qtbot, open_model, window, tmp_path) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    inputs = _box(window)
    assert inputs.text_box.isVisibleTo(window)
    inputs.tokenizer_choice.setCurrentIndex(inputs.tokenizer_choice.findData("bytes"))
    inputs.prompt.setCurrentText("hey")
    inputs.folder.setText(str(tmp_path / "set"))
    assert inputs.generate_text_tokens(), inputs.status.text()
    assert "not the model's tokenizer" in inputs.text_status.text()
    ids = window.trace.panel.arrays["input_ids"]
    rows = inputs.token_input().vocab_size
    assert ids.tolist() == [[b % rows for b in b"hey"]]
    note = json.loads(json.dumps(read_note(tmp_path / "set" / "input_ids.npz")))
    assert note["codebook"] == "codebook:bytes"


@pytest.mark.realdata
def test_gguf_prompts_use_the_embedded_vocabulary(qtbot, open_model, window, realdata) -> None:  # noqa: ANN001
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    refs = json.loads((ROOT / "tests" / "data" / "llama_cpp_token_refs.json").read_text("utf-8"))
    open_model(realdata(name))
    inputs = _box(window)
    assert inputs.text_box.isVisibleTo(window)
    text = refs["texts"][3]
    inputs.prompt.setCurrentText(text)
    ids, tok = inputs._token_ids()
    assert ids == refs["vocabs"][name]["plain"][3] and tok.name == "gguf:smollm"


@pytest.mark.parametrize("name", ["hashed-words", "bytes"])
def test_smoke_test_ids_decode_only_through_their_codebook(
    qtbot, open_model, window, tmp_path, name: str
) -> None:  # noqa: ANN001
    """A trace records the note of the codebook that made its token ids; decoding them says
    so, uses that codebook (never the model's vocabulary), and for hashed words says the text
    cannot come back (showing the prompt recorded with the run)."""
    from nneditor.cli import main as cli_main
    from nneditor.tokenize.codebooks import codebook
    from nneditor.tokenize.token_inputs import write_token_npz

    example = ROOT / "examples" / "tiny_transformer.onnx"
    book = codebook(name, 96)
    prompt = "hi there friend"
    ids = book.encode(prompt)
    npz = write_token_npz(tmp_path / "ids.npz", "input_ids", ids, book, prompt)
    out = tmp_path / "run"
    args = ["trace", str(example), "--inputs", str(npz), "--out", str(out), "--yes"]
    assert cli_main(args) == 0
    open_model(example)
    window.trace.open_trace_folder(out)
    overlay = window.trace.open_overlay("input_ids")
    assert overlay is not None and overlay.tokens_tab is not None
    tab = overlay.tokens_tab
    decoded = tab.decode_tokens()
    summary = tab.summary.text()
    assert f"made by the {name} smoke-test codebook" in summary
    if name == "hashed-words":
        assert decoded is None and "cannot be recovered" in summary and prompt in summary
        assert tab.text.toPlainText() == " ".join(map(str, ids))
    else:
        assert decoded is not None and tab.text.toPlainText() == book.decode(ids)
    overlay.close()


def test_window_traces_record_the_codebook_of_their_token_ids(
    qtbot, open_model, window, tmp_path
) -> None:  # noqa: ANN001
    """Text tokens made with a smoke-test codebook in the window: the trace's manifest keeps
    the note (through Generate & assign and through the picked .npz), and decoding the
    captured ids says the hashed words cannot be recovered."""
    open_model(EXAMPLE)
    inputs = _box(window)
    inputs.tokenizer_choice.setCurrentIndex(inputs.tokenizer_choice.findData("hashed-words"))
    inputs.prompt.setCurrentText("hello small world")
    inputs.folder.setText(str(tmp_path / "set"))
    assert inputs.generate_text_tokens(), inputs.status.text()  # assigns the written .npz
    panel = window.trace.panel
    assert panel.input_notes["input_ids"]["codebook"] == "codebook:hashed-words"
    inputs.set_source("input_ids", "text")
    assert inputs.generate_and_assign(), inputs.status.text()  # the whole set, text source
    assert panel.input_notes["input_ids"]["text"] == "hello small world"
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=90000)
    assert runs, panel.outcome.text()
    note = runs[0].run["input_notes"]["input_ids"]
    assert note["codebook"] == "codebook:hashed-words" and note["text"] == "hello small world"
    overlay = window.trace.open_overlay("input_ids")
    assert overlay is not None and overlay.tokens_tab is not None
    assert overlay.tokens_tab.decode_tokens() is None
    summary = overlay.tokens_tab.summary.text()
    assert "cannot be recovered" in summary and "hello small world" in summary
    overlay.close()


def _traced(snap: Path, folder: Path, *tokenize: str) -> Path:
    """``nneditor tokenize SNAP *tokenize --out``, then ``nneditor trace`` of the ids: the
    trace folder."""
    import subprocess
    import sys

    ids_file, trace = folder / "ids.npz", folder / "trace"
    for args in (
        ("tokenize", snap, *tokenize, "--out", ids_file),
        ("trace", snap, "--inputs", ids_file, "--out", trace, "--yes"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "nneditor", *map(str, args)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    return trace


@pytest.mark.realdata
def test_a_masked_lm_trace_reads_its_mask(qtbot, zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """The Tokens tab of a masked-language model's logits starts at the prompt's [MASK] and
    lists transformers' top tokens there."""

    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from nneditor.ui.trace.overlay import TensorOverlay
    from nneditor.ui.trace.store import load_run

    snap = zoo_artifact("encoder-bert-mlm")
    text = "Paris is the [MASK] of France."
    trace = _traced(snap, tmp_path, "--text", text, "--special")
    overlay = TensorOverlay(load_run(trace), "result_output")
    qtbot.addWidget(overlay)
    tab = overlay.tokens_tab
    assert tab is not None and tab.position.value() == 4  # [CLS] paris is the [MASK]
    assert "Position 4 holds the prompt's first mask token [MASK]" in tab.source.text()
    tab.top.setValue(3)
    tab.inspect_predictions()
    got = [int(tab.table.item(r, 1).text()) for r in range(tab.table.rowCount())]
    model = tf.AutoModelForMaskedLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, 4]
    assert got == torch.topk(logits, 3).indices.tolist()


@pytest.mark.realdata
def test_a_classifier_trace_reads_its_labels(qtbot, zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """The Tokens tab of a sentiment classifier's logits names its labels (config.json's
    id2label) with transformers' probabilities, instead of vocabulary tokens."""

    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from nneditor.ui.trace.overlay import TensorOverlay
    from nneditor.ui.trace.store import load_run

    snap = zoo_artifact("encoder-distilbert-sentiment")
    text = "the model reads every layer"
    trace = _traced(snap, tmp_path, "--text", text)
    overlay = TensorOverlay(load_run(trace), "result_output")
    qtbot.addWidget(overlay)
    tab = overlay.tokens_tab
    assert tab is not None and "2 labels from config.json (id2label): NEGATIVE, POSITIVE" in (
        tab.source.text()
    )
    assert tab.action.text() == "Inspect class predictions"
    tab.inspect_predictions()
    rows = [(tab.table.item(r, 4).text(), float(tab.table.item(r, 2).text())) for r in range(2)]
    model = tf.AutoModelForSequenceClassification.from_pretrained(str(snap)).eval()
    ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([ids])).logits[0].double(), -1)
    want = sorted(
        ((model.config.id2label[i], float(p)) for i, p in enumerate(probs)), key=lambda t: -t[1]
    )
    assert [r[0] for r in rows] == [repr(w[0]) for w in want]
    assert np.allclose([r[1] for r in rows], [w[1] for w in want], atol=1e-5)
    assert tab.summary.text().startswith("Most likely label at position 0:")


@pytest.mark.realdata
def test_a_question_answering_trace_finds_its_answers(qtbot, zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """The Tokens tab of an extractive QA head's logits lists answer spans of the context, the
    same as `nneditor predict` (which tests/integration/test_classifiers.py checks against
    transformers)."""
    import json
    import subprocess
    import sys

    from nneditor.ui.trace.overlay import TensorOverlay
    from nneditor.ui.trace.store import load_run

    snap = zoo_artifact("encoder-distilbert-squad")
    question, context = "what does the model read", "the model reads every layer of tensors"
    trace = _traced(snap, tmp_path, "--text", question, "--pair", context)
    overlay = TensorOverlay(load_run(trace), "result_output")
    qtbot.addWidget(overlay)
    tab = overlay.tokens_tab
    assert tab is not None and tab.action.text() == "Find answer spans"
    tab.top.setValue(3)
    shown = tab.inspect_predictions()
    cli = subprocess.run(
        [sys.executable, "-m", "nneditor", "predict", str(trace), "--top", "3", "--json"],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert shown is not None and shown["top"] == json.loads(cli.stdout)["top"]
    assert tab.table.item(0, 1).text() == f"{shown['top'][0]['start']}-{shown['top'][0]['end']}"
    assert tab.summary.text().startswith("Best answer:")

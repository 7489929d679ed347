"""Generate test input: every detected model input with its preset, a source per input, the
image options, the output folder, "Generate & assign all detected inputs" and a .npy/.npz
tensor picker.

Invariants:
- Presets come from :func:`nneditor.inputs.detect_inputs`; symbolic or unknown extents are
  set to 1 and the assumption is shown under the table.
- Nothing is assigned until a complete set was built, written and validated
  (:func:`nneditor.inputs.write_input_set`) or a picked file matched the inputs
  (:func:`nneditor.inputs.assign_file`); errors appear as the engine's sentence
  (for a mismatch: expected vs given) and leave the previous assignment in place.
- ``assigned`` carries the complete, validated set (name -> array) and a one-line description.
- A GGUF file or Hugging Face snapshot starts its token input on the Text tokens source, so
  "Generate & assign all" gives the prompt's ids rather than random ones.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.errors import NNEditorError
from nneditor.inputs import (
    InputPlan,
    assign_file,
    build_inputs,
    check_set,
    detect_inputs,
    write_input_set,
)
from nneditor.inputs.audio import Processing, audio_for_input, model_processing
from nneditor.inputs.csv_source import csv_for_input
from nneditor.inputs.generate import PATTERNS, SERIES, mask, pattern, time_series
from nneditor.inputs.image import NORMALIZATIONS, Sizing, StatedScaling, image_for_input
from nneditor.inputs.spec import InputSpec
from nneditor.platform.dirs import data_dir
from nneditor.tokenize.token_inputs import notes_by_input

#: source key -> (label, needs a file); "series:KIND" and "pattern:KIND" name a generator kind
SOURCES: dict[str, tuple[str, bool]] = {
    "auto": ("Automatic from input", False),
    "image": ("Image file…", True),
    "audio": ("Audio file (WAV)…", True),
    "mask": ("Mask (all valid)", False),
    "csv": ("CSV file…", True),
    **{f"series:{k}": (f"Time series: {k}", False) for k in SERIES},
    **{f"pattern:{k}": (f"Pattern: {k}", False) for k in PATTERNS},
    "tensor": ("Tensor file (.npy/.npz)…", True),
    "text": ("Text tokens (below)", False),
}
#: the sources a string input takes (its automatic words, or text saved in a tensor file)
TEXT_SOURCES = ("auto", "tensor")
#: the keys of earlier versions, still accepted by set_source and source_array
SOURCE_ALIASES = {"series": "series:sine", "pattern": "pattern:ramp"}
#: the image normalisation entry of a processor's own scaling (inputs/image.StatedScaling)
PROCESSOR_SCALING = "processor"
#: image layout choices: key -> label ("" lets image_for_input infer it from the shape)
IMAGE_LAYOUTS = {"": "from the input's shape", "NCHW": "NCHW", "NHWC": "NHWC"}
#: what write_input_set writes (the panel has no format choice: it always writes all of it)
WRITTEN = "inputs.npz (arrays by name) plus one .npy per input and plan.json"
#: tokenizer choices of the Text tokens box: key -> label
TOKENIZERS = {
    "embedded": "The model's own vocabulary",
    "file": "tokenizer.json or vocab.json + merges.txt…",
    "bytes": "Bytes (smoke test, not the model's tokenizer)",
    "codepoints": "Code points (smoke test, not the model's tokenizer)",
    "hashed-words": "Hashed words (smoke test, not the model's tokenizer)",
}
TOKENIZER_FILTER = "Tokenizer files (*tokenizer.json vocab.json merges.txt);;JSON (*.json)"


def source_array(
    spec: InputSpec,
    kind: str,
    path: str | None,
    plan: InputPlan,
    normalization: str | StatedScaling = "imagenet",
    layout: str | None = None,
    sizing: Sizing | None = None,
    processing: Processing | None = None,
) -> np.ndarray:
    """Values for ``spec`` from one non-automatic source (validated by the caller);
    ``normalization``, ``layout`` and ``sizing`` apply to an image source, ``processing``
    (the model's sampling rate and normalisation) to an audio one."""
    shape = spec.shape
    if shape is None:
        raise NNEditorError(f"input {spec.name!r} has no known shape; it needs a tensor file")
    kind = SOURCE_ALIASES.get(kind, kind)
    family, _, variant = kind.partition(":")
    if kind == "mask":
        return mask(shape, spec.numpy_dtype)
    if family == "series":
        return time_series(variant, shape, spec.numpy_dtype)
    if family == "pattern":
        return pattern(variant, shape, spec.numpy_dtype)
    if kind not in SOURCES:
        raise NNEditorError(f"unknown input source {kind!r}")
    if not path:
        raise NNEditorError(f"choose a file for input {spec.name!r} ({SOURCES[kind][0]})")
    if kind == "image":
        return image_for_input(spec, path, normalization, layout, sizing)
    if kind == "audio":
        return audio_for_input(spec, path, processing)
    if kind == "csv":
        return csv_for_input(spec, path)
    if kind == "tensor":
        return assign_file(plan, path, spec.name)[spec.name]
    raise NNEditorError(f"unknown input source {kind!r}")


def _takes_images(spec: InputSpec) -> bool:
    """An input an image file could fill: float or uint8, 3 or 4 axes, 1 or 3 channels."""
    dims = spec.declared_shape or ()
    kind_ok = (spec.dtype or "").startswith(("float", "bfloat", "uint8"))
    return kind_ok and len(dims) in (3, 4) and any(d in (1, 3) for d in dims if isinstance(d, int))


class InputsPanel(QWidget):
    assigned = Signal(object, str)  # dict[str, np.ndarray], description

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc: Any = None
        self.plan: InputPlan | None = None
        self.sizing: Sizing | None = None  # the model's image processor's resize and crop
        self.scaling: StatedScaling | None = None  # its own pixel scaling (EfficientNet's)
        self.processing: Processing | None = None  # its feature extractor's rate and norm
        self.sources: dict[str, tuple[str, str | None]] = {}
        self.arrays: dict[str, np.ndarray] | None = None
        self.token_notes: dict[str, dict[str, Any]] = {}  # see _assign
        self.written: Path | None = None
        title = QLabel("Generate test input", self)
        title.setObjectName("DocTitle")
        intro = QLabel(
            "Every detected model input with its preset. Automatic from input generates "
            "deterministic values from the preset; choose another source to provide them.",
            self,
        )
        intro.setWordWrap(True)
        intro.setObjectName("Muted")
        self.table = QTableWidget(0, 4, self)
        self.table.setHorizontalHeaderLabels(["Input", "Declared", "Preset", "Source"])
        self.table.verticalHeader().hide()
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hdr.setStretchLastSection(True)
        self.assumptions = QLabel("", self)
        self.assumptions.setWordWrap(True)
        self.assumptions.setObjectName("Muted")
        self.folder = QLineEdit(self)
        self.folder.setPlaceholderText("default: a new folder in the per-user data dir")
        self.folder.setToolTip(f"The set is written here as {WRITTEN}")
        browse = QToolButton(self)
        browse.setText("Folder…")
        browse.clicked.connect(self._choose_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(QLabel("Output folder", self))
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(browse)
        # write_input_set writes every form at once, so the row says so instead of offering
        # a format choice that would change nothing
        written = QLabel(f"Written as {WRITTEN}.", self)
        written.setObjectName("Muted")
        written.setWordWrap(True)
        self.generate_button = QPushButton("Generate && assign all detected inputs", self)
        self.generate_button.setDefault(True)
        self.generate_button.clicked.connect(self.generate_and_assign)
        self.pick_button = QPushButton("Pick tensor file…", self)
        self.pick_button.setToolTip(
            "Assign an existing .npy (one input) or .npz (arrays matched to inputs by name)"
        )
        self.pick_button.clicked.connect(self._pick)
        buttons = QHBoxLayout()
        buttons.addWidget(self.generate_button)
        buttons.addWidget(self.pick_button)
        buttons.addStretch(1)
        self.status = QLabel("No inputs assigned yet.", self)
        self.status.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 12, 12, 12)
        lay.addWidget(title)
        lay.addWidget(intro)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.assumptions)
        lay.addLayout(self._image_options())
        lay.addWidget(self._text_box())
        lay.addLayout(folder_row)
        lay.addWidget(written)
        lay.addLayout(buttons)
        lay.addWidget(self.status)

    def _image_options(self) -> QFormLayout:
        """Layout and normalisation of every input whose source is an image file (as the
        CLI's --layout and --normalize)."""
        self.image_layout = QComboBox(self)
        for key, label in IMAGE_LAYOUTS.items():
            self.image_layout.addItem(label, key)
        self.image_layout.setToolTip(
            "Axis order of image inputs; from the input's shape: the axis holding 1 or 3 "
            "channels decides"
        )
        self.image_norm = QComboBox(self)
        for key in sorted(NORMALIZATIONS):
            mean, std = NORMALIZATIONS[key]
            self.image_norm.addItem(key, key)
            self.image_norm.setItemData(
                self.image_norm.count() - 1,
                f"(pixel / 255 - mean {list(mean)}) / std {list(std)}",
                Qt.ItemDataRole.ToolTipRole,
            )
        self.image_norm.setCurrentIndex(self.image_norm.findData("imagenet"))
        self.image_norm.setToolTip("How pixel values of image inputs are scaled")
        # one row each: side by side they would widen the narrow Trace column
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        form.addRow("Image layout", self.image_layout)
        form.addRow("Image normalisation", self.image_norm)
        self.image_form = form
        return form

    def _show_image_options(self) -> None:
        """The image rows only for a model with an input an image file could fill."""
        plan = self.plan
        show = plan is not None and any(_takes_images(spec) for spec in plan.inputs)
        for row in range(self.image_form.rowCount()):
            self.image_form.setRowVisible(row, show)

    def _text_box(self) -> QGroupBox:
        from nneditor.tokenize.prompts import SAMPLE_PROMPTS

        box = QGroupBox("Text tokens", self)
        self.text_box = box
        self.prompt = QComboBox(box)
        self.prompt.setEditable(True)
        self.prompt.addItems(list(SAMPLE_PROMPTS))
        self.prompt.setToolTip("Type any text or choose a sample prompt")
        self.tokenizer_choice = QComboBox(box)
        for key, label in TOKENIZERS.items():
            self.tokenizer_choice.addItem(label, key)
        # long sample prompts and tokenizer labels would otherwise set the whole panel's
        # minimum width, wider than the Trace column (the popup still shows them in full)
        for combo in (self.prompt, self.tokenizer_choice):
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(16)
        self.tokenizer_file = ""
        self.padding = (0, 0)  # (count, id) the chosen sequence length added
        self.tokenizer_choice.activated.connect(self._on_tokenizer)
        self.length = QLineEdit(box)
        self.length.setPlaceholderText("blank: the prompt's natural length")
        self.length.setToolTip(
            "A length cuts the tokens or fills them up with the vocabulary's padding token "
            "(its end-of-sequence token when it has none)"
        )
        self.pair = QLineEdit(box)
        self.pair.setPlaceholderText("optional: the passage, hypothesis or context")
        self.pair.setToolTip(
            "A second text, framed with the prompt as the tokenizer frames text pairs "
            "([CLS] prompt [SEP] second text [SEP]): what a cross-encoder, an NLI model or an "
            "extractive QA model reads; its tokens are segment 1 where the model takes segments"
        )
        self.segment_types: list[int] | None = None  # the pair's segments, last generated
        self.token_dtype = QComboBox(box)
        self.token_dtype.addItems(["int64", "int32"])
        self.special = QCheckBox("Special-token text becomes special tokens", box)
        self.text_button = QPushButton("Generate, save && assign", box)
        self.text_button.clicked.connect(self.generate_text_tokens)
        self.text_status = QLabel("", box)
        self.text_status.setWordWrap(True)
        self.text_status.setObjectName("Muted")
        form = QFormLayout(box)
        # a field too wide for the Trace column goes below its label instead of out of view
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("Prompt", self.prompt)
        form.addRow("Second text", self.pair)
        form.addRow("Tokenizer", self.tokenizer_choice)
        form.addRow("Sequence length", self.length)
        form.addRow("Token dtype", self.token_dtype)
        form.addRow("", self.special)
        form.addRow("", self.text_button)
        form.addRow("", self.text_status)
        self.text_form = form
        form.setRowVisible(self.pair, False)
        box.hide()
        return box

    def _on_tokenizer(self) -> None:
        if self.tokenizer_choice.currentData() == "file":
            path, _ = QFileDialog.getOpenFileName(self, "Tokenizer file", "", TOKENIZER_FILTER)
            if path:
                self.tokenizer_file = path
            else:
                self.tokenizer_choice.setCurrentIndex(0)

    def token_input(self) -> InputSpec | None:
        """The input that takes token ids (the text box writes it)."""
        if self.plan is None:
            return None
        return next((s for s in self.plan.inputs if s.role == "tokens"), None)

    def _token_ids(self) -> tuple[list[int], Any]:
        from nneditor.tokenize import load_tokenizer

        key = str(self.tokenizer_choice.currentData())
        self.padding = (0, 0)
        if key == "file" and not self.tokenizer_file:
            raise NNEditorError("choose a tokenizer file first (tokenizer.json or vocab.json)")
        spec = self.token_input()
        tok = load_tokenizer(
            self.doc.path,
            self.tokenizer_file if key == "file" else "embedded",
            codebook_name=key if key not in ("embedded", "file") else None,
            vocab_size=spec.vocab_size if spec is not None else None,
        )
        pair = self.pair.text().strip() if self.text_form.isRowVisible(self.pair) else ""
        self.segment_types = None
        types: list[int] | None = None
        if pair:
            ids, types = tok.encode_pair(
                self.prompt.currentText(), pair, special=self.special.isChecked()
            )
        else:
            ids = tok.encode(self.prompt.currentText(), special=self.special.isChecked())
        text = self.length.text().strip()
        if text:
            if not text.isdigit() or int(text) < 1:
                raise NNEditorError(f"sequence length must be a positive number, got {text!r}")
            n = int(text)
            self.padding = (max(0, n - len(ids)), tok.filler)
            ids = ids[:n] + [tok.filler] * self.padding[0]
            if types is not None:  # padding is segment 0, as transformers pads token types
                types = types[:n] + [0] * self.padding[0]
        self.segment_types = types
        if not ids:
            raise NNEditorError("the prompt gives no tokens; type some text")
        return ids, tok

    def generate_text_tokens(self) -> bool:
        """Tokenize the prompt, write it as the .npz named for the token input, assign it."""
        spec = self.token_input()
        if spec is None or self.doc is None:
            return False
        from nneditor.tokenize.token_inputs import write_token_npz

        try:
            ids, tok = self._token_ids()
            out = Path(self.folder.text().strip() or self.default_folder())
            out.mkdir(parents=True, exist_ok=True)
            segments = self._segments()
            path = write_token_npz(
                out / f"{spec.name}.npz",
                spec.name,
                ids,
                tok,
                self.prompt.currentText(),
                self.token_dtype.currentText(),
                self.special.isChecked(),
                (segments, self.segment_types or [], self.pair.text().strip())
                if segments and self.segment_types
                else None,
            )
        except (NNEditorError, OSError) as exc:
            self.text_status.setText(str(exc))
            self._fail(str(exc))
            return False
        pad, filler = self.padding
        self.text_status.setText(
            f"{len(ids)} tokens ({tok.name}; {tok.fidelity}): {' '.join(map(str, ids[:32]))}"
            + (" …" if len(ids) > 32 else "")
            + (f"; the last {pad} are padding (id {filler})" if pad else "")
            + self._pair_text()
        )
        if not self.assign_path(path):
            return False
        self.set_source(spec.name, "text", str(path))
        return True

    # ------------------------------------------------------------------ model

    def set_document(self, doc: Any) -> None:
        self.doc, self.plan, self.arrays, self.written = doc, None, None, None
        self.sizing = None
        self.processing = None
        self.text_form.setRowVisible(self.pair, False)
        self.sources = {}
        self.table.setRowCount(0)
        self.assumptions.setText("")
        self._show_image_options()
        if doc is None or doc.graph is None:
            self.status.setText("Open a model with a graph to prepare its inputs.")
            return
        try:
            self.plan = detect_inputs(doc)
        except NNEditorError as exc:
            self.status.setText(str(exc))
            return
        self._fill()
        self._show_pair()
        self._show_image_options()
        from nneditor.inputs.image import model_normalization, model_sizing, stated_scaling

        stated: str | None = model_normalization(doc.path)  # (preprocessor_config.json's)
        self.sizing = model_sizing(doc.path)
        self.processing = model_processing(doc.path)
        self.scaling = stated_scaling(doc.path)  # EfficientNet's processor: its own steps
        at = self.image_norm.findData(PROCESSOR_SCALING)
        if at >= 0:
            self.image_norm.removeItem(at)
        if self.scaling is not None:
            self.image_norm.addItem("the model's processor", PROCESSOR_SCALING)
            self.image_norm.setItemData(
                self.image_norm.count() - 1,
                "as its image processor scales pixels (preprocessor_config.json)",
                Qt.ItemDataRole.ToolTipRole,
            )
            stated = PROCESSOR_SCALING
        self.image_norm.setCurrentIndex(self.image_norm.findData(stated or "imagenet"))
        self.image_norm.setToolTip(
            "How pixel values of image inputs are scaled"
            + (" (the model's preprocessor_config.json states this one)" if stated else "")
        )
        spec = self.token_input()
        self.text_box.setVisible(spec is not None)
        if spec is not None:
            self.token_dtype.setCurrentText(spec.dtype if spec.dtype == "int32" else "int64")
            self.text_box.setTitle(f"Text tokens for input {spec.name!r}")
            # a language-model checkpoint brings its own tokenizer: its prompt ids are the
            # meaningful input, random ids are not (an ONNX model may have none: Automatic)
            if getattr(doc, "format", None) in ("gguf", "huggingface"):
                self.set_source(spec.name, "text")
        self.status.setText("No inputs assigned yet; a trace uses automatic inputs until then.")

    def _fill(self) -> None:
        assert self.plan is not None
        self.table.setRowCount(len(self.plan.inputs))
        for row, spec in enumerate(self.plan.inputs):
            preset = ("—" if spec.shape is None else f"{spec.dtype} {list(spec.shape)}") + (
                f"  ({spec.role})" if spec.role != "generic" else ""
            )
            for col, text in enumerate((spec.name, spec.declared_text(), preset)):
                it = QTableWidgetItem(text)
                it.setToolTip(spec.problem or "\n".join(spec.assumptions) or text)
                self.table.setItem(row, col, it)
            combo = QComboBox(self.table)
            for key, (label, _f) in SOURCES.items():
                if spec.dtype != "string" or key in TEXT_SOURCES:
                    combo.addItem(label, key)
            combo.activated.connect(lambda _k, name=spec.name, c=combo: self._on_source(name, c))
            self.table.setCellWidget(row, 3, combo)
            self.sources[spec.name] = ("auto", None)
        notes = [*self.plan.assumptions, *self.plan.problems]
        self.assumptions.setText("\n".join(f"• {n}" for n in notes))

    def _on_source(self, name: str, combo: QComboBox) -> None:
        kind = str(combo.currentData())
        path: str | None = None
        if SOURCES[kind][1]:
            flt = {
                "image": "Images (*.png *.jpg *.jpeg *.bmp)",
                "audio": "WAV audio (*.wav)",
                "csv": "CSV (*.csv *.txt)",
                "tensor": "NumPy (*.npy *.npz)",
            }[kind]
            path, _ = QFileDialog.getOpenFileName(self, f"Values for {name}", "", flt)
            if not path:
                combo.setCurrentIndex(0)
                kind = "auto"
        self.set_source(name, kind, path)

    def set_source(self, name: str, kind: str, path: str | None = None) -> None:
        """Choose the source of one input (``kind`` is a key of :data:`SOURCES` or of
        :data:`SOURCE_ALIASES`)."""
        kind = SOURCE_ALIASES.get(kind, kind)
        if kind not in SOURCES:
            raise NNEditorError(f"unknown input source {kind!r}")
        self.sources[name] = (kind, path)
        row = self.plan.names().index(name) if self.plan else -1
        combo = self.table.cellWidget(row, 3) if row >= 0 else None
        if isinstance(combo, QComboBox):
            combo.setCurrentIndex(combo.findData(kind))
            combo.setToolTip(path or SOURCES[kind][0])

    # ------------------------------------------------------------------ actions

    def default_folder(self) -> Path:
        stem = Path(self.doc.path).stem if self.doc is not None else "model"
        return data_dir() / "inputs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{stem}"

    def generate_and_assign(self) -> bool:
        """Build every input from its source, write and validate the set, assign it."""
        if self.plan is None:
            return False
        norm: str | StatedScaling = str(self.image_norm.currentData())
        if norm == PROCESSOR_SCALING and self.scaling is not None:
            norm = self.scaling
        layout = str(self.image_layout.currentData()) or None
        notes: dict[str, dict[str, Any]] = {}
        try:
            provided = {}
            types: list[int] | None = None
            for name, (kind, path) in self.sources.items():
                if kind == "text":
                    ids, tok = self._token_ids()
                    types = self.segment_types
                    provided[name] = np.asarray([ids], self.plan[name].numpy_dtype)
                    notes[name] = self._token_note(name, tok)
                elif kind != "auto":
                    provided[name] = source_array(
                        self.plan[name],
                        kind,
                        path,
                        self.plan,
                        norm,
                        layout,
                        self.sizing,
                        self.processing,
                    )
            segments = self._segments()
            if types is not None and segments is not None:  # the pair typed now, not a file's
                provided[segments] = np.asarray([types], self.plan[segments].numpy_dtype)
            arrays = build_inputs(self.plan, provided)
            out = Path(self.folder.text().strip() or self.default_folder())
            srcs = {n: self.sources.get(n, ("auto", None))[0] for n in arrays}
            sources = {n: ("automatic" if k == "auto" else k) for n, k in srcs.items()}
            write_input_set(self.plan, out, arrays, sources)
        except (NNEditorError, OSError) as exc:
            self._fail(str(exc))
            return False
        self.written = out
        files = "inputs.npz, one .npy per input and plan.json"
        self._assign(arrays, f"generated set in {out}: {files} (validated)", notes)
        return True

    def _token_note(self, name: str, tok: Any) -> dict[str, Any]:
        """What a trace records about the ids of input ``name`` (see token_inputs.py)."""
        note = {
            **tok.describe(),
            "input": name,
            "text": self.prompt.currentText(),
            "special": self.special.isChecked(),
        }
        if self.segment_types is not None:
            note["pair"] = self.pair.text().strip()
        return note

    def _pair_text(self) -> str:
        """What the status says of a text pair: where its segments went."""
        types = self.segment_types
        if types is None:
            return ""
        seg = self._segments()
        where = f"to {seg!r}" if seg else "not given: this model takes none, the ids hold the pair"
        return f"; a pair: {types.count(0)} tokens in segment 0, {types.count(1)} in 1 ({where})"

    def _segments(self) -> str | None:
        """The input that takes a text pair's segments (None when the model has none)."""
        if self.plan is None:
            return None
        return next((s.name for s in self.plan.inputs if s.role == "segments"), None)

    def _show_pair(self) -> None:
        """The second-text row, for models that read text pairs: those with a segment input,
        and classifiers (cross-encoders, NLI and extractive QA models) without one."""
        from nneditor.tokenize.predictions import class_labels

        pairs = self._segments() is not None
        if not pairs and self.doc is not None and self.doc.path is not None:
            pairs = class_labels(Path(self.doc.path)) is not None
        self.text_form.setRowVisible(self.pair, pairs)

    def _pick(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Assign tensors", "", "NumPy (*.npy *.npz)")
        if path:
            self.assign_path(path)

    def assign_path(self, path: str | Path) -> bool:
        """Assign a picked .npy/.npz; missing inputs are generated automatically."""
        if self.plan is None:
            return False
        try:
            picked = assign_file(self.plan, path)
            arrays = build_inputs(self.plan, picked)
            check_set(self.plan, arrays)
        except (NNEditorError, OSError) as exc:
            self._fail(str(exc))
            return False
        for name in picked:
            self.set_source(name, "tensor", str(path))
        rest = [n for n in arrays if n not in picked]
        extra = f"; automatic values for {', '.join(rest)}" if rest else ""
        self._assign(arrays, f"{', '.join(picked)} from {path}{extra}", notes_by_input(path))
        return True

    def keep(
        self,
        arrays: dict[str, np.ndarray] | None,
        sources: dict[str, tuple[str, str | None]],
        notes: dict[str, dict[str, Any]],
    ) -> bool:
        """Assign a set made for another revision of the model when this plan accepts it
        unchanged (an edit that kept the inputs); False, and nothing assigned, otherwise."""
        if arrays is None or self.plan is None:
            return False
        try:
            check_set(self.plan, arrays)
        except NNEditorError:
            return False
        for name, (kind, path) in sources.items():
            if name in self.plan.names():
                self.set_source(name, kind, path)
        self._assign(dict(arrays), "the set assigned before the edit (still valid)", notes)
        return True

    def _assign(
        self,
        arrays: dict[str, np.ndarray],
        text: str,
        notes: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.arrays = arrays
        #: tokenizer notes of token inputs, recorded with the trace (read by the feature)
        self.token_notes = dict(notes or {})
        lines = [f"{n}: {a.dtype} {list(a.shape)}" for n, a in arrays.items()]
        self.status.setStyleSheet("")
        self.status.setText(f"Assigned to the next trace: {text}\n" + "\n".join(lines))
        self.assigned.emit(arrays, text)

    def _fail(self, text: str) -> None:
        self.status.setStyleSheet("color: #b91c1c;")
        self.status.setText(text)

    def _choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder for the input set")
        if path:
            self.folder.setText(path)

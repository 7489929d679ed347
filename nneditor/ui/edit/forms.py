"""One form per edit operation; each turns its fields into the core's change dicts.

Invariants:
- ``changes()`` returns the change list for the current fields or raises :class:`FormError`
  with a sentence saying which field is missing; it never validates the graph (the core's
  ``prepare`` does that in the preview job).
- ``edited`` fires on every field change (the panel then disables Commit until the next
  preview of exactly these parameters).
- ``prefill(subject)`` fills only the fields naming what is edited (node, value, tensor);
  parameters the user typed stay.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper
from PySide6.QtCore import QObject, QStringListModel, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QCompleter,
    QFormLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from nneditor.editing.revisions import Change
from nneditor.ui.edit.context import EditContext, Subject, standard_op_names

_A = onnx.AttributeProto


class FormError(Exception):
    """The form is incomplete; the message says what to fill in."""


def completion_models(ctx: EditContext | None, parent: QObject) -> dict[str, QStringListModel]:
    """One model per kind of name ("nodes", "values", "tensors"), shared by every form."""
    if ctx is None:
        return {}
    return {
        "nodes": QStringListModel(ctx.node_names, parent),
        "values": QStringListModel(ctx.value_names, parent),
        "tensors": QStringListModel(ctx.tensor_names, parent),
    }


def _completer(
    parent: QWidget, names: list[str] | tuple[str, ...] | QStringListModel
) -> QCompleter:
    model = names if isinstance(names, QStringListModel) else QStringListModel(list(names), parent)
    c = QCompleter(model, parent)
    c.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    c.setFilterMode(Qt.MatchFlag.MatchContains)
    c.setMaxVisibleItems(12)
    return c


def hint_label(parent: QWidget) -> QLabel:
    label = QLabel("", parent)
    label.setObjectName("Muted")
    label.setWordWrap(True)
    return label


class OpForm(QWidget):
    edited = Signal()
    title = ""
    help = ""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx: EditContext | None = None
        self.models: dict[str, QStringListModel] = {}
        self.form = QFormLayout(self)
        self.form.setContentsMargins(0, 0, 0, 0)
        self.form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)

    def line(self, label: str, placeholder: str = "") -> QLineEdit:
        edit = QLineEdit(self)
        edit.setPlaceholderText(placeholder)
        edit.textChanged.connect(self._changed)
        self.form.addRow(label, edit)
        return edit

    def combo(self, label: str, editable: bool = False) -> QComboBox:
        box = QComboBox(self)
        box.setEditable(editable)
        box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        box.setMinimumContentsLength(8)
        box.currentTextChanged.connect(self._changed)
        self.form.addRow(label, box)
        return box

    def _changed(self, *_: Any) -> None:
        self.refresh()
        self.edited.emit()

    def set_context(
        self, ctx: EditContext | None, models: dict[str, QStringListModel] | None = None
    ) -> None:
        self.ctx = ctx
        self.models = models or {}
        self.install_completers()
        self.refresh()

    def install_completers(self) -> None:
        """Attach completers built from ``self.ctx`` (override)."""

    def refresh(self) -> None:
        """Update dependent widgets (attribute lists, hints) after a field changed (override)."""

    def refill(self, box: QComboBox, items: list[str]) -> None:
        """Replace a combo's items, keeping the chosen text where it is still offered (no
        change signals on the way)."""
        keep = box.currentText()
        box.blockSignals(True)
        box.clear()
        box.addItems(items)
        i = box.findText(keep)
        box.setCurrentIndex(i if i >= 0 else 0)
        box.blockSignals(False)

    #: The Subject attribute (node, value or tensor) a selection prefills into the line edit
    #: of the same name.
    subject_field = ""

    def prefill(self, subject: Subject) -> None:
        text = getattr(subject, self.subject_field, "") if self.subject_field else ""
        if text:
            getattr(self, self.subject_field).setText(text)

    def changes(self) -> list[Change]:
        raise NotImplementedError

    # helpers
    def need(self, edit: QLineEdit, what: str) -> str:
        text = edit.text().strip()
        if not text:
            raise FormError(what)
        return text

    def completer(self, kind: str, *edits: QLineEdit) -> None:
        model = self.models.get(kind)
        for e in edits:
            old = e.completer()
            e.setCompleter(_completer(self, model) if model is not None else None)  # type: ignore[arg-type]
            if old is not None:
                old.deleteLater()


class RenameForm(OpForm):
    title = "Rename node"
    subject_field = "node"
    help = "Gives an operator a new, unique name. Values and wiring are unchanged."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.node = self.line("Node", "select a node or type its name")
        self.new = self.line("New name")

    def install_completers(self) -> None:
        self.completer("nodes", self.node)

    def changes(self) -> list[Change]:
        node = self.need(self.node, "Choose the node to rename (select it or type its name).")
        new = self.need(self.new, "Type the node's new name.")
        return [{"op": "rename_node", "node": node, "new": new}]


def attr_type_text(code: int) -> str:
    name = _A.AttributeType.Name(code).lower()
    examples = {
        "int": "an integer, e.g. 1",
        "float": "a number, e.g. 0.1",
        "string": "text",
        "ints": "integers, e.g. 1, 2, 3",
        "floats": "numbers, e.g. 0.5, 1.0",
        "strings": "texts, e.g. a, b",
    }
    return f"{name}: {examples[name]}" if name in examples else f"{name} (not editable here)"


class SetAttributeForm(OpForm):
    title = "Set attribute"
    subject_field = "node"
    help = "Sets a scalar or list attribute the operator's ONNX schema declares."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.node = self.line("Node", "select a node or type its name")
        self.attr = self.combo("Attribute")
        self.value = self.line("Value")
        self.info = hint_label(self)
        self.form.addRow(self.info)
        self._attr_for = ""

    def install_completers(self) -> None:
        self.completer("nodes", self.node)

    def refresh(self) -> None:
        node = self.ctx.node(self.node.text()) if self.ctx else None
        key = f"{node.op_type}:{node.domain}" if node is not None else ""
        sch = self.ctx.schema(node.op_type, node.domain) if self.ctx and node else None
        if key != self._attr_for:
            self._attr_for = key
            self.refill(self.attr, sorted(sch.attributes) if sch is not None else [])
        self.info.setText(self._describe(node, sch))

    def _describe(self, node: Any, sch: Any) -> str:
        if node is None:
            return "Choose a node to list the attributes its operator accepts."
        if sch is None:
            return (
                f"{node.op_type} has no ONNX schema at this opset; its attributes cannot be edited."
            )
        if not sch.attributes:
            return f"{node.op_type} has no attributes."
        a = sch.attributes.get(self.attr.currentText())
        if a is None:
            return ""
        parts = [f"Expects {attr_type_text(a.type.value)}."]
        self.value.setPlaceholderText(attr_type_text(a.type.value))
        attrs = node.attributes
        if a.name in attrs:
            parts.append(f"Now: {attrs[a.name]!r}.")
        elif a.default_value is not None and a.default_value.type:
            default = helper.get_attribute_value(a.default_value)
            if isinstance(default, bytes):
                default = default.decode("utf-8", "replace")
            parts.append(f"Unset (default {default!r}).")
        else:
            parts.append("Required." if a.required else "Unset.")
        return " ".join(parts)

    def changes(self) -> list[Change]:
        node = self.need(self.node, "Choose the node whose attribute to set.")
        attr = self.attr.currentText().strip()
        if not attr:
            raise FormError("Choose an attribute (the node's operator lists them).")
        value = self.need(self.value, f"Type a value for {attr}.")
        return [{"op": "set_attr", "node": node, "attr": attr, "value": value}]


class ReplaceOpForm(OpForm):
    title = "Replace operator"
    subject_field = "node"
    help = (
        "Changes a node's operator type; inputs and outputs stay. Attributes the new "
        "operator does not accept are dropped (the preview lists them)."
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.node = self.line("Node", "select a node or type its name")
        self.op = self.line("New operator", "e.g. LeakyRelu")
        self.op.setCompleter(_completer(self, standard_op_names()))
        self.info = hint_label(self)
        self.form.addRow(self.info)

    def install_completers(self) -> None:
        self.completer("nodes", self.node)

    def refresh(self) -> None:
        node = self.ctx.node(self.node.text()) if self.ctx else None
        self.info.setText(
            f"Now {node.op_type} with {len([x for x in node.inputs if x])} inputs and "
            f"{len(node.outputs)} outputs."
            if node is not None
            else ""
        )

    def changes(self) -> list[Change]:
        node = self.need(self.node, "Choose the node whose operator to replace.")
        op = self.need(self.op, "Type the new operator type (e.g. LeakyRelu).")
        return [{"op": "replace_op", "node": node, "op_type": op}]


class InsertUnaryForm(OpForm):
    title = "Insert unary operator"
    subject_field = "value"
    help = "Inserts an operator on a value; every consumer of the value then reads its output."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value = self.line("On value", "select a value or node")
        self.op = self.combo("Operator", editable=True)

    def install_completers(self) -> None:
        self.completer("values", self.value)
        self.refill(self.op, list(self.ctx.unary_ops) if self.ctx else [])

    def changes(self) -> list[Change]:
        value = self.need(self.value, "Choose the value to insert the operator on.")
        op = self.op.currentText().strip()
        if not op:
            raise FormError("Choose the operator to insert.")
        return [{"op": "insert_unary", "value": value, "op_type": op}]


class RemoveUnaryForm(OpForm):
    title = "Remove unary node"
    subject_field = "node"
    help = "Removes a single-input, single-output operator; its consumers read its input."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.node = self.line("Node", "select a node or type its name")

    def install_completers(self) -> None:
        self.completer("nodes", self.node)

    def changes(self) -> list[Change]:
        node = self.need(self.node, "Choose the node to remove.")
        return [{"op": "remove_unary", "node": node}]


class ReconnectForm(OpForm):
    title = "Reconnect input"
    subject_field = "node"
    help = "Makes one input of a node read another value (computed earlier in the graph)."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.node = self.line("Node", "select a node or type its name")
        self.index = self.combo("Input")
        self.value = self.line("New value", "a graph input, initializer or node output")
        self._inputs_for = ""

    def install_completers(self) -> None:
        self.completer("nodes", self.node)
        self.completer("values", self.value)

    def refresh(self) -> None:
        node = self.ctx.node(self.node.text()) if self.ctx else None
        key = f"{node.name}:{node.inputs}" if node is not None else ""
        if key == self._inputs_for:
            return
        self._inputs_for = key
        keep = self.index.currentIndex()
        self.index.blockSignals(True)
        self.index.clear()
        if node is not None:
            for i, name in enumerate(node.inputs):
                self.index.addItem(f"{i} · {name or '(omitted)'}", i)
        self.index.setCurrentIndex(keep if 0 <= keep < self.index.count() else 0)
        self.index.blockSignals(False)

    def changes(self) -> list[Change]:
        node = self.need(self.node, "Choose the node to reconnect.")
        if self.index.currentIndex() < 0:
            raise FormError(f"{node!r} is not a node of the graph, or it has no inputs.")
        value = self.need(self.value, "Type the value the input should read.")
        return [
            {
                "op": "reconnect",
                "node": node,
                "index": int(self.index.currentData()),
                "value": value,
            }
        ]


class PatchTensorForm(OpForm):
    title = "Replace tensor bytes"
    subject_field = "tensor"
    help = "Overwrites a same-length byte range of an initializer (raw little-endian storage)."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tensor = self.line("Tensor", "an initializer name")
        self.offset = self.line("Byte offset", "0")
        self.hex = self.line("Bytes (hex)", "e.g. 0000803f")
        self.info = hint_label(self)
        self.form.addRow(self.info)

    def install_completers(self) -> None:
        self.completer("tensors", self.tensor)

    def refresh(self) -> None:
        ref = self.ctx.index.doc.tensors.get(self.tensor.text().strip()) if self.ctx else None
        if ref is None:
            self.info.setText("")
            return
        self.info.setText(
            f"{ref.dtype} {list(ref.shape)} · {ref.nbytes:,} bytes stored as {ref.encoding}."
        )

    def changes(self) -> list[Change]:
        tensor = self.need(self.tensor, "Choose the initializer to patch.")
        text = self.offset.text().strip() or "0"
        try:
            offset = int(text, 0)
        except ValueError:
            raise FormError(f"The byte offset must be an integer, not {text!r}.") from None
        data = self.need(self.hex, "Type the replacement bytes in hexadecimal.")
        return [{"op": "patch_tensor", "tensor": tensor, "offset": offset, "hex": data}]


FORMS: tuple[type[OpForm], ...] = (
    RenameForm,
    SetAttributeForm,
    ReplaceOpForm,
    InsertUnaryForm,
    RemoveUnaryForm,
    ReconnectForm,
    PatchTensorForm,
)

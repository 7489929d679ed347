"""TorchScript (.jit / torch.jit.save) and torch.export (.pt2) readers.

Fixtures are written by torch.jit.script/trace + save and torch.export.save; expected values
come from torch (the module's own state_dict, ``torch.jit.load``, ``torch.export.load``).
"""

from __future__ import annotations

import io
import json
import operator
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import Tensor  # noqa: E402
from torch.nn import Module  # noqa: E402

from nneditor.artifacts import registry  # noqa: E402
from nneditor.artifacts.pytorch import pt2, torchscript  # noqa: E402
from nneditor.errors import ArtifactError  # noqa: E402


class Block(Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3)
        self.bn = torch.nn.BatchNorm2d(3)
        self.fc = torch.nn.Linear(3, 2)
        self.register_buffer("scale", torch.arange(4.0))

    def forward(self, x: Tensor) -> Tensor:
        y = self.bn(self.conv(x)).mean((2, 3))
        return self.fc(y) * self.scale[:2].sum()  # type: ignore[index]


class WithConstant(Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.offset = torch.tensor([0.25, -4.0])  # plain attribute: a traced constant

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x) + self.offset


class Exported(Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm1d(4)
        self.register_buffer("table", torch.arange(12.0).reshape(3, 4).t())  # non-contiguous
        self.lifted = torch.tensor([1.0, 2.0, 3.0, 4.0])  # becomes a tensor constant

    def forward(self, x: Tensor) -> Tensor:
        def yes(v: Tensor) -> Tensor:
            return v.sin()

        def no(v: Tensor) -> Tensor:
            return v.cos()

        y = torch.relu(self.bn(self.fc(x)))
        y = torch.cond(y.sum() > 0, yes, no, (y,))
        return y + self.lifted + self.table.sum()  # type: ignore[operator]


def _values(t: Any) -> np.ndarray:
    return t.detach().numpy()


# -- TorchScript -------------------------------------------------------------------------------


def test_scripted_module(tmp_path: Path, unchanged: Any) -> None:
    torch.manual_seed(0)
    module = Block().eval()
    path = tmp_path / "block.pt"
    torch.jit.script(module).save(str(path))
    check = unchanged(path)
    expected = torch.jit.load(str(path)).state_dict()
    with registry.open_document(path) as doc:
        assert doc.format == "torchscript"
        assert list(doc.tensors) == list(expected)
        for name, t in expected.items():
            np.testing.assert_array_equal(doc.tensors[name].read(), _values(t))
            np.testing.assert_array_equal(
                doc.tensors[name].read(), _values(module.state_dict()[name])
            )
        meta = doc.metadata
        assert meta["untrusted_globals"] == []
        assert "__torch__.torch.nn.modules.conv.Conv2d" in meta["torchscript_classes"]
        with zipfile.ZipFile(path) as zf:
            sizes = {
                i.filename.split("/code/", 1)[1]: i.file_size
                for i in zf.infolist()
                if "/code/" in i.filename
            }
        assert {f["name"]: f["size"] for f in meta["code_files"]} == {
            k: v for k, v in sizes.items() if k.endswith(".py")
        }
        cls = doc.tree["module"]["__class__"]
        assert cls.startswith("__torch__.") and cls.endswith(".Block")
        top = cls.rsplit(".", 1)[0].replace(".", "/") + ".py"  # the file defining the class
        assert "class Block(Module):" in doc.tree["code"][top]
        assert "def forward" in doc.tree["code"][top]
        assert torchscript.read_code(path, top) == doc.tree["code"][top]
        assert doc.tree["module"]["conv"]["weight"] == "<tensor float32 [3, 2, 3, 3]>"
        assert doc.graph is None and "never compiles or runs" in doc.graph_unavailable_reason
    check()


def test_traced_module_constants(tmp_path: Path) -> None:
    module = WithConstant()
    path = tmp_path / "traced.jit"
    torch.jit.trace(module, torch.randn(1, 3)).save(str(path))
    loaded = torch.jit.load(str(path))
    with torchscript.open_document(path) as doc:
        for name, t in loaded.state_dict().items():
            np.testing.assert_array_equal(doc.tensors[name].read(), _values(t))
        np.testing.assert_array_equal(doc.tensors["CONSTANTS.c0"].read(), _values(module.offset))
        assert "CONSTANTS.c0" in loaded.code


def test_torchscript_with_foreign_global(tmp_path: Path) -> None:
    path = tmp_path / "evil.jit"
    torch.jit.script(Block()).save(str(path))
    evil = b"\x80\x02cos\nsystem\nX\x05\x00\x00\x00touch\x85R."
    out = tmp_path / "evil2.jit"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            zout.writestr(info.filename, evil if info.filename.endswith("constants.pkl") else data)
    with torchscript.open_document(out) as doc:
        assert doc.metadata["untrusted_globals"] == ["os.system"]
        assert doc.tree["constants"] == "<os.system('touch')>"
        assert "conv.weight" in doc.tensors


def test_torchscript_missing_data_pkl(tmp_path: Path) -> None:
    path = tmp_path / "empty.jit"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("m/code/__torch__.py", "def forward(self): pass\n")
    with pytest.raises(ArtifactError, match=r"TORCHSCRIPT .*no data.pkl member"):
        torchscript.open_document(path)


# -- torch.export .pt2 -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    torch.manual_seed(0)
    module = Exported().eval()
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(module, (torch.randn(3, 4),), dynamic_shapes={"x": {0: batch}})
    path = tmp_path_factory.mktemp("pt2") / "model.pt2"
    torch.export.save(ep, str(path))
    return path, ep


def test_pt2_weights_match_export_load(exported: tuple[Path, Any], unchanged: Any) -> None:
    path, _ = exported
    check = unchanged(path)
    loaded = torch.export.load(str(path))
    expected = {**loaded.state_dict, **loaded.constants}
    with registry.open_document(path) as doc:
        assert doc.format == "pt2"
        assert sorted(doc.tensors) == sorted(expected)
        for name, t in expected.items():
            ref = doc.tensors[name]
            assert ref.shape == tuple(t.shape)
            np.testing.assert_array_equal(ref.read(), _values(t))
        assert doc.tensors["table"].encoding == "strided"
        np.testing.assert_array_equal(
            doc.tensors["table"].read("1:3, 2"), _values(expected["table"][1:3, 2])
        )
        assert doc.metadata["archive_format"] == "pt2"
        assert doc.metadata["torch_version"] == torch.__version__
    check()


def test_pt2_graph_matches_exported_program(exported: tuple[Path, Any]) -> None:
    path, ep = exported
    sig = ep.graph_signature
    # the serializer folds getitem nodes into the outputs of the node they unpack
    fx_calls = [
        n for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
    ]
    fqn = {
        **sig.inputs_to_parameters,
        **sig.inputs_to_buffers,
        **sig.inputs_to_lifted_tensor_constants,
    }
    with pt2.open_document(path) as doc:
        graph = doc.graph
        assert graph is not None and doc.capabilities["view_graph"].available
        assert [(n.info or {})["target"] for n in graph.nodes] == [
            _target(n.target) for n in fx_calls
        ]
        assert [n.name for n in graph.nodes] == [n.name for n in fx_calls]
        for node, fx in zip(graph.nodes, fx_calls, strict=True):
            fx_inputs = [fqn.get(a.name, a.name) for a in _tensor_args(fx.args)]
            assert list(node.inputs) == fx_inputs, node.name
        assert [v.name for v in graph.inputs] == list(sig.user_inputs)
        assert graph.inputs[0].shape is not None and isinstance(graph.inputs[0].shape[0], str)
        assert graph.inputs[0].shape[1] == 4
        assert sorted(graph.initializers) == sorted(fqn.values())
        assert [v.name for v in graph.outputs] == list(sig.user_outputs)
        linear = next(n for n in graph.nodes if n.op_type == "linear")
        info = linear.info or {}
        assert linear.domain == "aten" and info["overload"] == "default"
        assert info["arguments"][1] == ("weight", "fc.weight")
        bn = next(
            n
            for n in graph.nodes
            if n.op_type.startswith("batch_norm") or "batch_norm" in n.op_type
        )
        assert bn.attributes["eps"] == pytest.approx(1e-5)
        cond = next(n for n in graph.nodes if n.op_type == "cond")
        ops = {name: [m.op_type for m in g.nodes] for name, g in cond.subgraphs.items()}
        assert ops == {"true_graph_0": ["sin"], "false_graph_0": ["cos"]}
        assert cond.subgraphs["true_graph_0"].owner is cond


def _target(target: Any) -> str:
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"torch.ops.{target.namespace}.{target.name()}"
    return f"torch.ops.{target}"  # OpOverload: "aten.linear.default"


def _tensor_args(args: Any) -> list[Any]:
    out = []
    for a in args:
        if isinstance(a, torch.fx.Node) and a.op != "get_attr":
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _tensor_args(a)
    return out


def _rewrite(src: Path, dst: Path, edit: Any) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def test_pt2_old_layout(exported: tuple[Path, Any], tmp_path: Path) -> None:
    """torch 2.1-2.5 wrote serialized_exported_program.json + serialized_state_dict.pt.
    (Synthesized here from a current archive: torch 2.13 no longer writes it.)"""
    path, ep = exported
    blob = io.BytesIO()
    torch.save(dict(ep.state_dict), blob)
    old = tmp_path / "old.pt2"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(old, "w") as zout:
        program = next(n for n in zin.namelist() if n.endswith("models/model.json"))
        zout.writestr("old/serialized_exported_program.json", zin.read(program))
        zout.writestr("old/serialized_state_dict.pt", blob.getvalue())
        zout.writestr("old/version", "1")
    with registry.open_document(old) as doc:
        assert doc.format == "pt2"
        for name, t in ep.state_dict.items():
            np.testing.assert_array_equal(doc.tensors[name].read(), _values(t))
        assert doc.graph is not None and len(doc.graph.nodes) > 3


def test_pt2_missing_weight_member(exported: tuple[Path, Any], tmp_path: Path) -> None:
    path, _ = exported
    bad = tmp_path / "bad.pt2"
    _rewrite(path, bad, lambda n, d: None if n.endswith("data/weights/weight_0") else d)
    with pytest.raises(
        ArtifactError,
        match=r"PT2 .*points to '.*data/weights/weight_0', which is not in the archive",
    ):
        pt2.open_document(bad)


def test_pt2_weight_member_too_small(exported: tuple[Path, Any], tmp_path: Path) -> None:
    path, _ = exported
    bad = tmp_path / "short.pt2"
    _rewrite(path, bad, lambda n, d: d[:4] if n.endswith("data/weights/weight_0") else d)
    with pytest.raises(
        ArtifactError, match=r"tensor 'fc.weight' \(float32 \[4, 4\].*reaches byte 64 of storage"
    ):
        pt2.open_document(bad)


def test_pt2_bad_json_and_unexpected_schema(exported: tuple[Path, Any], tmp_path: Path) -> None:
    path, _ = exported
    broken = tmp_path / "broken.pt2"
    _rewrite(path, broken, lambda n, d: b"{not json" if n.endswith("models/model.json") else d)
    with pytest.raises(ArtifactError, match=r"models/model.json' is not valid JSON"):
        pt2.open_document(broken)
    odd = tmp_path / "odd.pt2"
    _rewrite(
        path,
        odd,
        lambda n, d: json.dumps({"graph_module": {}}).encode() if n.endswith("model.json") else d,
    )
    with pt2.open_document(odd) as doc:  # weights still listed, graph refused with a reason
        assert doc.graph is None
        assert "unexpected layout (KeyError: 'graph')" in doc.graph_unavailable_reason
        assert "fc.weight" in doc.tensors


def test_pt2_without_program(tmp_path: Path) -> None:
    path = tmp_path / "aoti.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("package/archive_format", "pt2")
        zf.writestr("package/data/aotinductor/model/model.so", b"\x7fELF")
    with pt2.open_document(path) as doc:
        assert doc.graph is None
        assert "holds no exported program" in doc.graph_unavailable_reason

"""The graph of a serialized ``torch.export`` program (the JSON in a .pt2 archive).

Schema (torch/_export/serde/schema.py): ``graph_module.graph`` has ``inputs``/``outputs``
(Arguments), ``nodes`` (``target`` like "torch.ops.aten.linear.default", ``inputs`` as
``[{name, arg, kind}]``, ``outputs`` as Arguments, ``metadata``) and ``tensor_values``
(name -> dtype code, sizes, strides). ``graph_module.signature`` binds placeholders to
parameters, buffers, constants and user inputs. An Argument is a one-key union
(``as_tensor``, ``as_tensors``, ``as_int``, ``as_sym_int``, ``as_graph``, ...).

Invariants: pure data transformation of already-parsed JSON, no recursion deeper than the
program's own nesting of subgraphs (bounded by ``MAX_SUBGRAPH_DEPTH``); anything that does
not fit the schema raises :class:`GraphSchemaError` so the reader can still list weights.
"""

from __future__ import annotations

import re
from typing import Any

from nneditor.artifacts.pytorch.restricted_pickle import short
from nneditor.model.graph import Graph, Node, ValueInfo

MAX_SUBGRAPH_DEPTH = 32
_TENSOR_LIST_KINDS = ("as_tensors", "as_optional_tensors", "as_sym_ints", "as_sym_floats")
_SYM_KINDS = ("as_sym_int", "as_sym_float", "as_sym_bool")
_NODE_META = ("nn_module_stack", "source_fn_stack", "torch_fn")


#: torch.export ScalarType codes -> NNEditor dtype names.
SCALAR_TYPES = {
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "complex32",
    10: "complex64",
    11: "complex128",
    12: "bool",
    13: "bfloat16",
    28: "uint16",
    29: "float8_e4m3fn",
    30: "float8_e5m2",
    31: "float8_e4m3fnuz",
    32: "float8_e5m2fnuz",
    33: "float8_e8m0fnu",
    34: "uint32",
    35: "uint64",
}


def scalar_type(code: Any) -> str | None:
    """NNEditor dtype name of a ScalarType code, None when unknown."""
    return SCALAR_TYPES.get(code) if type(code) is int else None


class GraphSchemaError(ValueError):
    """The program JSON does not have the shape this module understands."""


def _one(arg: Any) -> tuple[str, Any]:
    if not isinstance(arg, dict) or len(arg) != 1:
        raise GraphSchemaError(f"an argument is not a one-key object: {short(arg, 80)}")
    ((kind, value),) = arg.items()
    return kind, value


def _value_names(kind: str, value: Any) -> list[str] | None:
    """Names of graph values an argument refers to, or None when it is a constant."""
    if kind == "as_tensor":
        return [value["name"]]
    if kind in ("as_optional_tensor",):
        k, v = _one(value)
        return [v["name"]] if k == "as_tensor" else [""]
    if kind in _SYM_KINDS:
        k, v = _one(value)
        return [v] if k == "as_name" else None
    if kind in _TENSOR_LIST_KINDS:
        names: list[str] = []
        for item in value:
            if kind == "as_tensors":
                names.append(item["name"])
                continue
            k, v = _one(item)
            names.append(v["name"] if k == "as_tensor" else v if k == "as_name" else "")
        return names
    return None


def _constant(kind: str, value: Any) -> Any:
    if kind == "as_none":
        return None
    if kind == "as_scalar_type":
        return scalar_type(value) or value
    if kind in _SYM_KINDS:
        return _one(value)[1]
    return value


_SYMBOL = re.compile(r"Symbol\('([^']+)'[^)]*\)")
_INTEGER = re.compile(r"Integer\((-?\d+)\)")


def _expr(value: Any) -> str:
    """A symbolic size as text: "s77" rather than sympy's "Symbol('s77', positive=True)"."""
    if isinstance(value, dict):
        value = value.get("expr_str", value)
    text = value if isinstance(value, str) else short(value)  # bounded for any JSON value
    return _INTEGER.sub(r"\1", _SYMBOL.sub(r"\1", text))


def _dims(sizes: Any) -> tuple[int | str, ...]:
    out: list[int | str] = []
    for item in sizes:
        kind, value = _one(item)
        out.append(value if kind == "as_int" and type(value) is int else _expr(value))
    return tuple(out)


def _value_info(name: str, meta: Any) -> ValueInfo:
    if not isinstance(meta, dict):
        return ValueInfo(name)
    return ValueInfo(name, scalar_type(meta.get("dtype")), _dims(meta.get("sizes", [])))


def _split_target(target: str) -> tuple[str, str, str]:
    """("aten", "linear", "default") from "torch.ops.aten.linear.default"."""
    text = target.removeprefix("torch.ops.")
    parts = text.split(".")
    if len(parts) >= 3:
        return parts[0], parts[1], ".".join(parts[2:])
    if len(parts) == 2:
        return parts[0], parts[1], ""
    return "", text, ""


class _Builder:
    def __init__(self, tensor_values: dict[str, Any], rename: dict[str, str]) -> None:
        self.tensor_values = tensor_values
        self.rename = rename
        self.original = {fqn: placeholder for placeholder, fqn in rename.items()}

    def name(self, value: str) -> str:
        return self.rename.get(value, value)

    def graph(self, data: dict[str, Any], name: str, kind: str, depth: int) -> Graph:
        if depth > MAX_SUBGRAPH_DEPTH:
            raise GraphSchemaError(f"subgraphs nest more than {MAX_SUBGRAPH_DEPTH} levels deep")
        values = {**self.tensor_values, **data.get("tensor_values", {})}
        saved, self.tensor_values = self.tensor_values, values
        graph = Graph(name=name, kind=kind)
        graph.nodes = [self.node(i, n, depth) for i, n in enumerate(data["nodes"])]
        graph.inputs = [self.value(n) for arg in data["inputs"] for n in self.arg_names(arg)]
        graph.outputs = [self.value(n) for arg in data["outputs"] for n in self.arg_names(arg)]
        for node in graph.nodes:
            for out in node.outputs:
                if out and out in values:
                    graph.value_info[out] = self.value(out)
        self.tensor_values = saved
        return graph

    def arg_names(self, arg: Any) -> list[str]:
        kind, value = _one(arg)
        return [self.name(n) for n in _value_names(kind, value) or [] if n]

    def value(self, name: str) -> ValueInfo:
        return _value_info(name, self.tensor_values.get(self.original.get(name, name)))

    def node(self, index: int, data: dict[str, Any], depth: int) -> Node:
        target = data["target"] if isinstance(data["target"], str) else short(data["target"])
        domain, op, overload = _split_target(target)
        inputs: list[str] = []
        attrs: dict[str, Any] = {}
        arguments: list[tuple[str, Any]] = []
        subgraphs: dict[str, Graph] = {}
        for position, item in enumerate(data.get("inputs", [])):
            kind, value = _one(item["arg"])
            fallback = value.get("name") if kind == "as_graph" else None
            arg_name = item.get("name") or fallback or f"arg{position}"
            if kind == "as_graph":
                sub = self.graph(value["graph"], value.get("name", arg_name), "subgraph", depth + 1)
                subgraphs[arg_name] = sub
                arguments.append((arg_name, f"<graph {sub.name}>"))
                continue
            names = _value_names(kind, value)
            if names is None:
                attrs[arg_name] = _constant(kind, value)
                continue
            renamed = [self.name(n) if n else "" for n in names]
            inputs.extend(renamed)
            arguments.append((arg_name, renamed[0] if kind == "as_tensor" else renamed))
        outputs = [n for arg in data.get("outputs", []) for n in self._out_names(arg)]
        meta = data.get("metadata") or {}
        info: dict[str, Any] = {"target": target, "overload": overload, "arguments": arguments}
        info.update({k: meta[k] for k in _NODE_META if k in meta})
        if isinstance(meta.get("nn_module_stack"), str):  # Node.metadata: the module path
            info["metadata"] = {"nn_module_stack": meta["nn_module_stack"]}
        name = data.get("name") or (outputs[0] if outputs and outputs[0] else f"{op}_{index}")
        node = Node(
            index, name, op, domain, tuple(inputs), tuple(outputs), attrs, None, subgraphs, info
        )
        for sub in subgraphs.values():
            sub.owner = node
        return node

    def _out_names(self, arg: Any) -> list[str]:
        kind, value = _one(arg)
        names = _value_names(kind, value)
        return [self.name(n) if n else "" for n in names] if names is not None else [""]


def build_graph(program: Any, model: str, tensor_names: set[str]) -> Graph:
    """The main graph of one exported program; placeholders bound to stored tensors are
    renamed to their FQNs (the catalog's names) and listed as initializers."""
    try:
        module = program["graph_module"]
        data = module["graph"]
        rename, user_inputs = _bindings(module.get("signature", {}), data, tensor_names)
        builder = _Builder(data.get("tensor_values", {}), rename)
        graph = builder.graph(data, model, "main", 0)
    except GraphSchemaError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise GraphSchemaError(f"{type(exc).__name__}: {exc}") from None
    bound = set(rename.values())
    graph.initializers = [vi.name for vi in graph.inputs if vi.name in bound]
    graph.inputs = [vi for vi in graph.inputs if vi.name not in bound or vi.name in user_inputs]
    return graph


def _bindings(
    signature: dict[str, Any], data: dict[str, Any], tensor_names: set[str]
) -> tuple[dict[str, str], set[str]]:
    """Placeholder -> FQN for stored tensors, and the names of user inputs."""
    taken = {n.get("name") for n in data.get("nodes", [])} | set(data.get("tensor_values", {}))
    rename: dict[str, str] = {}
    users: set[str] = set()
    for spec in signature.get("input_specs", []):
        kind, value = _one(spec)
        arg = value.get("arg", {})
        if kind == "user_input":
            users.update(n for n in _value_names(*_one(arg)) or [] if n)
            continue
        fqn = value.get(f"{kind}_name") if kind != "parameter" else value.get("parameter_name")
        placeholder = arg.get("name")
        if not (isinstance(fqn, str) and isinstance(placeholder, str)):
            continue
        if fqn in tensor_names and (fqn == placeholder or fqn not in taken):
            rename[placeholder] = fqn
    return rename, users

"""Pattern detectors. Each detection keeps its evidence (node indices and the rule) and a
one-sentence explanation for the inspector.

Detectors walk bounded neighbourhoods from anchor ops (Softmax, Sqrt, Conv, weight MatMuls), so
the whole pass is linear in the number of nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nneditor.semantic.graph_index import GraphIndex


@dataclass(eq=False)
class Pattern:
    kind: str  # attention | ffn | norm | conv | embedding | recurrent | control_flow | residual
    nodes: tuple[int, ...]
    rule: str
    explanation: str
    anchor: int
    name_only: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rule": self.rule,
            "explanation": self.explanation,
            "nodes": list(self.nodes),
            "name_only": self.name_only,
        }


LINEAR = {"MatMul", "Gemm", "MatMulInteger", "MatMulNBits", "FusedMatMul", "QLinearMatMul"}
FUSED_ATTENTION = {
    "Attention",
    "MultiHeadAttention",
    "GroupQueryAttention",
    "PackedAttention",
    "PackedMultiHeadAttention",
    "DecoderMaskedMultiHeadAttention",
    "SparseAttention",
}
NORM_OPS = {
    "LayerNormalization": "LayerNorm",
    "SimplifiedLayerNormalization": "RMSNorm",
    "RMSNormalization": "RMSNorm",
    "SkipLayerNormalization": "LayerNorm (fused with residual add)",
    "SkipSimplifiedLayerNormalization": "RMSNorm (fused with residual add)",
    "GroupNormalization": "GroupNorm",
    "InstanceNormalization": "InstanceNorm",
    "LpNormalization": "Lp normalization",
}
ACTIVATIONS = {
    "Relu",
    "Gelu",
    "FastGelu",
    "BiasGelu",
    "QuickGelu",
    "Sigmoid",
    "Tanh",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Elu",
    "Selu",
    "LeakyRelu",
    "PRelu",
    "Mish",
    "Erf",
    "Clip",
    "Swish",
}
ELEMENTWISE = ACTIVATIONS | {
    "Add",
    "Mul",
    "Div",
    "Sub",
    "Pow",
    "Cast",
    "Sqrt",
    "Identity",
    "Dropout",
}
#: reshaping between a projection and its activation (Gemm on 2-D, then back to 3-D), and the
#: activation (re)quantization quantizers insert there (ONNX Runtime's dynamic int8 and QDQ)
_SHAPE_ONLY = {
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
}
SCORE_PATH = {"Div", "Mul", "Add", "Where", "Cast", "Sub", "Identity", "Slice", "Softcap"}
PROJ_PATH = {
    "Transpose",
    "Reshape",
    "Add",
    "Split",
    "Slice",
    "Mul",
    "Concat",
    "Squeeze",
    "Unsqueeze",
    "Cast",
    "Identity",
    "RotaryEmbedding",
    "Neg",
    "Sub",
    "Gather",
    "Expand",
    "Tile",
    "SimplifiedLayerNormalization",
    "RMSNormalization",
    "LayerNormalization",
    "Div",
    "Sqrt",
    "Pow",
    "ReduceMean",
    "Sin",
    "Cos",
}
RECURRENT = {"LSTM": "LSTM", "GRU": "GRU", "RNN": "RNN", "Scan": "Scan loop", "Loop": "Loop"}


def detect_all(ix: GraphIndex) -> list[Pattern]:
    """Run every detector; results are ordered by anchor node index."""
    found: list[Pattern] = []
    for detector in (
        detect_attention,
        detect_ffn,
        detect_norms,
        detect_convs,
        detect_embeddings,
        detect_recurrent,
        detect_residuals,
        detect_declared,
    ):
        found.extend(detector(ix))
    found.sort(key=lambda p: (p.anchor, p.kind))
    return found


# ---------------------------------------------------------------------------------- attention


def detect_declared(ix: GraphIndex) -> list[Pattern]:
    """Synthesized checkpoint graphs declare each node's role (from metadata and tensor names)."""
    out = []
    for i, node in enumerate(ix.nodes):
        info = node.info
        if node.domain == "nneditor" and info and info.get("pattern"):
            out.append(
                Pattern(
                    info["pattern"],
                    (i,),
                    "declared by the checkpoint's metadata and tensor names",
                    info.get("explanation", ""),
                    i,
                    info={"declared": True},
                )
            )
    return out


def detect_attention(ix: GraphIndex) -> list[Pattern]:
    out: list[Pattern] = []
    for i in ix.indexes_of([*FUSED_ATTENTION, "Softmax"]):
        node = ix.nodes[i]
        if node.domain == "nneditor":
            continue
        if node.op_type in FUSED_ATTENTION:
            heads = node.attributes.get("num_heads")
            kv = node.attributes.get("kv_num_heads")
            extra = f"; {heads} heads" if heads else ""
            if kv and heads and kv != heads:
                extra += f", {kv} key/value heads (grouped-query)"
            out.append(
                Pattern(
                    "attention",
                    (i,),
                    f"fused operator {node.op_type}",
                    f"Attention: fused {node.op_type} operator{extra}.",
                    i,
                    info={"heads": heads, "kv_heads": kv, "fused": True},
                )
            )
        elif node.op_type == "Softmax":
            p = _unfused_attention(ix, i)
            if p is not None:
                out.append(p)
    return out


def _walk_back(
    ix: GraphIndex, start: int, allowed: set[str], stop: set[str], limit: int
) -> tuple[int | None, list[int]]:
    """Follow non-weight inputs backward through ``allowed`` ops until an op in ``stop``."""
    path: list[int] = []
    cur = start
    for _ in range(limit):
        preds = [
            p
            for name in ix.nodes[cur].inputs
            if name and not ix.is_weight(name)
            if (p := ix.producer.get(name)) is not None
        ]
        if not preds:
            return None, path
        cur = preds[0]
        if ix.op(cur) in stop:
            return cur, path
        if ix.op(cur) not in allowed:
            return None, path
        path.append(cur)
    return None, path


#: activation-by-activation products around an attention Softmax (ONNX Runtime's optimizer
#: folds the transpose and the scale into com.microsoft FusedMatMul)
_PRODUCTS = {"MatMul", "Einsum", "FusedMatMul"}


def _unfused_attention(ix: GraphIndex, s: int) -> Pattern | None:
    scores, score_path = _walk_back(ix, s, SCORE_PATH, _PRODUCTS, 6)
    if scores is None or any(ix.is_weight(n) for n in ix.nodes[scores].inputs if n):
        return None
    # forward to probs @ V
    cur, fwd = s, []
    ctx = None
    for _ in range(4):
        kids = ix.children(cur)
        ctx = next((k for k in kids if ix.op(k) in _PRODUCTS), None)
        if ctx is not None:
            break
        # PyTorch's SDPA guards fully masked rows: Where(IsNaN(p), 0, p)
        guards = [k for k in kids if ix.op(k) == "IsNaN"]
        passing = [k for k in kids if ix.op(k) in {"Cast", "Dropout", "Identity", "Where"}]
        if not passing:
            for g in guards:
                passing.extend(k for k in ix.children(g) if ix.op(k) == "Where")
        if not passing:
            break
        fwd.extend(guards)
        fwd.append(passing[0])
        cur = passing[0]
    if ctx is None:
        return None
    members = {s, scores, ctx, *score_path, *fwd}
    reshapes: list[int] = []
    projections: list[int] = []
    q_in, k_in = ix.nodes[scores].inputs[:2]
    v_in = next((n for n in ix.nodes[ctx].inputs if ix.producer.get(n) not in members), "")
    q_chain: list[int] = []
    for value in (q_in, k_in, v_in):
        proj, chain = _projection(ix, value)
        if value == q_in:
            q_chain = chain
        members.update(chain)
        reshapes.extend(c for c in chain if ix.op(c) == "Reshape")
        if proj is not None:
            members.add(proj)
            projections.append(proj)
    out_proj, out_chain = _forward_projection(ix, ctx)
    members.update(out_chain)
    if out_proj is not None:
        members.add(out_proj)
    scale = _scale_text(ix, score_path) or _scale_text(ix, q_chain, pre_scaled=True)
    heads, head_dim, shape_text = _heads(ix, reshapes)
    kv_heads = _kv_heads(ix, reshapes, heads)
    text = f"Attention: Softmax over MatMul(Q, Kᵀ){scale} followed by MatMul with V"
    if heads:
        text += f"; {heads} heads inferred from Reshape {shape_text}"
    if kv_heads and heads and kv_heads < heads:
        text += f"; {kv_heads} key/value heads (grouped-query attention)"
    if len(projections) == 3:
        text += "; Q, K and V come from weight projections"
    return Pattern(
        "attention",
        tuple(sorted(members)),
        "Softmax between MatMul(Q,K) and MatMul(P,V)",
        text + ".",
        s,
        info={"heads": heads, "head_dim": head_dim, "kv_heads": kv_heads, "fused": False},
    )


def _projection(ix: GraphIndex, value: str) -> tuple[int | None, list[int]]:
    chain: list[int] = []
    p = ix.producer.get(value)
    for _ in range(10):
        if p is None:
            return None, chain
        op = ix.op(p)
        if op in LINEAR and ix.weight_inputs(p):
            return p, chain
        if op not in PROJ_PATH:
            return None, chain
        chain.append(p)
        nxt = [
            q
            for n in ix.nodes[p].inputs
            if n and not ix.is_weight(n)
            if (q := ix.producer.get(n)) is not None
        ]
        p = nxt[0] if nxt else None
    return None, chain


def _forward_projection(ix: GraphIndex, ctx: int) -> tuple[int | None, list[int]]:
    chain: list[int] = []
    cur = ctx
    for _ in range(4):
        kids = ix.children(cur)
        if len(kids) != 1:
            return None, chain
        k = kids[0]
        if ix.op(k) in LINEAR and ix.weight_inputs(k):
            return k, chain
        if ix.op(k) not in {"Transpose", "Reshape", "Cast", "Identity"}:
            return None, chain
        chain.append(k)
        cur = k
    return None, chain


def _scale_text(ix: GraphIndex, path: list[int], pre_scaled: bool = False) -> str:
    """ "/√d" text for a scalar Div/Mul on the score path (or on Q before the MatMul)."""
    for n in path:
        op = ix.op(n)
        if op not in ("Div", "Mul"):
            continue
        for name in ix.nodes[n].inputs[1:]:
            c = ix.constant(name, 1)
            if c is None or len(c) != 1:
                continue
            v = float(c[0])
            if op == "Mul" and v != 0:
                v = 1.0 / v
            sq = v * v
            text = f"/√{round(sq)}" if abs(sq - round(sq)) < 1e-3 and round(sq) > 1 else f"/{v:g}"
            return f" (Q pre-scaled {text})" if pre_scaled else text
    return ""


def _shape_values(ix: GraphIndex, value: str, depth: int = 0) -> list[int | None] | None:
    """Statically known entries of a shape tensor: constants, Concat/Cast/Unsqueeze of
    constants; unknown entries (computed at run time) are None."""
    c = ix.constant(value, 8)
    if c is not None:
        return [int(v) for v in c]
    p = ix.producer.get(value)
    if p is None or depth > 4:
        return None
    node = ix.nodes[p]
    if node.op_type in ("Cast", "Unsqueeze", "Identity") and node.inputs:
        return _shape_values(ix, node.inputs[0], depth + 1)
    if node.op_type == "Concat":
        out: list[int | None] = []
        for name in node.inputs:
            part = _shape_values(ix, name, depth + 1)
            out.extend(part if part is not None else [None])
        return out
    return None


def _reshape_targets(ix: GraphIndex, reshapes: list[int]) -> list[list[int | None]]:
    out = []
    for r in reshapes:
        if len(ix.nodes[r].inputs) >= 2:
            vals = _shape_values(ix, ix.nodes[r].inputs[1])
            if vals is not None:
                out.append(vals)
    return out


def _split_heads(vals: list[int | None]) -> tuple[int, int] | None:
    """(heads, head_dim) from a head-splitting reshape target: [b, s, H, D] or [b, s, 3, H, D]."""
    if len(vals) == 4 and vals[2] and vals[3] and vals[2] > 0 and vals[3] > 0:
        return vals[2], vals[3]
    if len(vals) == 5 and vals[2] in (2, 3) and vals[3] and vals[4] and vals[3] > 0 and vals[4] > 0:
        return vals[3], vals[4]
    return None


def _fmt_shape(vals: list[int | None]) -> str:
    return "[" + ", ".join("?" if v is None else str(v) for v in vals) + "]"


def _heads(ix: GraphIndex, reshapes: list[int]) -> tuple[int | None, int | None, str]:
    for vals in _reshape_targets(ix, reshapes):
        hd = _split_heads(vals)
        if hd:
            return hd[0], hd[1], _fmt_shape(vals)
    return None, None, ""


def _kv_heads(ix: GraphIndex, reshapes: list[int], heads: int | None) -> int | None:
    found = {hd[0] for vals in _reshape_targets(ix, reshapes) if (hd := _split_heads(vals))}
    smaller = [h for h in found if heads and h < heads]
    return min(smaller) if smaller else heads


# ---------------------------------------------------------------------------------- FFN


def detect_ffn(ix: GraphIndex) -> list[Pattern]:
    out: list[Pattern] = []
    used: set[int] = set()
    for i in ix.indexes_of(LINEAR):
        if i in used or not ix.weight_inputs(i):
            continue
        found = _ffn_from(ix, i)
        if found is None:
            continue
        members, down, acts, gate = found
        if down in used:
            continue
        used.update(members)
        act_names = sorted({ix.op(a) for a in acts})
        act = _activation_name(act_names)
        mixed = any(ix.op(m) == "Conv" for m in members)
        if mixed:  # SegFormer's Mix-FFN, PVT v2: a grouped convolution between projections
            kind = "convolutional"
            text = f"Feed-forward: projection, depthwise convolution, {act}, projection"
        elif gate is not None:
            kind = (
                "SwiGLU" if act in ("SiLU", "Sigmoid") else ("GeGLU" if act == "GELU" else "gated")
            )
            text = (
                f"Feed-forward ({kind}): two parallel projections of the same input, one through "
                f"{act}, multiplied, then a down projection"
            )
        else:
            kind = "plain"
            text = f"Feed-forward: projection, {act}, projection"
        out.append(
            Pattern(
                "ffn",
                tuple(sorted(members)),
                "weight MatMul → activation → weight MatMul",
                text + ".",
                i,
                info={"gated": gate is not None, "variant": kind, "activation": act},
            )
        )
    return out


def _activation_name(ops: list[str]) -> str:
    s = set(ops)
    if s & {"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "Erf"}:
        return "GELU"
    if "Sigmoid" in s or "Swish" in s:
        return "SiLU"
    if "Relu" in s:
        return "ReLU"
    if "Tanh" in s:
        return "tanh"
    return ops[0] if ops else "activation"


def _ffn_from(ix: GraphIndex, up: int):
    members = {up}
    acts: list[int] = []
    frontier = [up]
    gate = None
    down = None  # reached before the activation (GELU's 0.5·x branch is shorter than tanh's)
    for _ in range(10):
        nxt = []
        for n in frontier:
            for k in ix.children(n):
                if k in members:
                    continue
                op = ix.op(k)
                if op in LINEAR and ix.weight_inputs(k):
                    if acts or gate is not None:
                        return members | {k}, k, acts, gate
                    down = k
                    continue
                grouped = op == "Conv" and int(ix.nodes[k].attributes.get("group", 1)) > 1
                moved = op == "Transpose"  # to and from the convolution's channels-first layout
                if op not in ELEMENTWISE and op not in _SHAPE_ONLY and not (grouped or moved):
                    continue
                if op == "Mul":
                    other = _other_linear_sibling(ix, k, up, members)
                    if other is not None:
                        gate = other
                        members.add(other)
                if op in ACTIVATIONS:
                    acts.append(k)
                members.add(k)
                nxt.append(k)
        if down is not None and acts and not nxt:
            return members | {down}, down, acts, gate
        if not nxt or len(members) > 24:
            return None
        frontier = nxt
    return None


def _other_linear_sibling(ix: GraphIndex, mul: int, up: int, members: set[int]) -> int | None:
    """For gated FFNs: the other input of ``mul`` comes from a weight MatMul of the same input."""
    up_inputs = {n for n in ix.nodes[up].inputs if not ix.is_weight(n)}
    for name in ix.nodes[mul].inputs:
        p = ix.producer.get(name)
        if p is None or p in members:
            continue
        # allow one activation between the sibling projection and the Mul
        for cand in (p, *ix.parents(p)):
            if not (ix.op(cand) in LINEAR and ix.weight_inputs(cand)):
                continue
            if {n for n in ix.nodes[cand].inputs if not ix.is_weight(n)} & up_inputs:
                if cand != p:
                    members.add(p)
                return cand
    return None


# ---------------------------------------------------------------------------------- norms


def detect_norms(ix: GraphIndex) -> list[Pattern]:
    out: list[Pattern] = []
    for i in ix.indexes_of([*NORM_OPS, "BatchNormalization", "Sqrt"]):
        node = ix.nodes[i]
        label = NORM_OPS.get(node.op_type)
        if label:
            out.append(
                Pattern(
                    "norm",
                    (i,),
                    f"operator {node.op_type}",
                    f"Normalization: {label}.",
                    i,
                    info={"variant": label},
                )
            )
        elif node.op_type == "BatchNormalization" and not _after_conv(ix, i):
            out.append(
                Pattern(
                    "norm",
                    (i,),
                    "operator BatchNormalization",
                    "Normalization: BatchNorm.",
                    i,
                    info={"variant": "BatchNorm"},
                )
            )
        elif node.op_type == "Sqrt":
            p = _written_norm(ix, i)
            if p is not None:
                out.append(p)
    return out


def _after_conv(ix: GraphIndex, i: int) -> bool:
    return any(ix.op(p) == "Conv" for p in ix.parents(i))


def _written_norm(ix: GraphIndex, sqrt: int) -> Pattern | None:
    # Sqrt <- Add(eps) <- ReduceMean <- (Pow(.,2) | Mul(x,x)) <- (Sub(x, ReduceMean(x)) | x)
    add = next((p for p in ix.parents(sqrt) if ix.op(p) == "Add"), None)
    if add is None:
        return None
    rm = next((p for p in ix.parents(add) if ix.op(p) == "ReduceMean"), None)
    if rm is None:
        return None
    sq = next((p for p in ix.parents(rm) if ix.op(p) in ("Pow", "Mul")), None)
    if sq is None:
        return None
    members = {sqrt, add, rm, sq}
    centred = next((p for p in ix.parents(sq) if ix.op(p) == "Sub"), None)
    variant = "RMSNorm"
    if centred is not None:
        members.add(centred)
        mean = next((p for p in ix.parents(centred) if ix.op(p) == "ReduceMean"), None)
        if mean is not None:
            members.add(mean)
            variant = "LayerNorm"
    # forward: Div / Reciprocal+Mul, then weight Mul and bias Add
    cur = sqrt
    for _ in range(4):
        kids = [k for k in ix.children(cur) if ix.op(k) in ("Div", "Reciprocal", "Mul", "Add")]
        if not kids:
            break
        cur = kids[0]
        members.add(cur)
    eps = ""
    for name in ix.nodes[add].inputs:
        c = ix.constant(name, 1)
        if c is not None and len(c) == 1:
            eps = f" (epsilon {float(c[0]):g})"
    return Pattern(
        "norm",
        tuple(sorted(members)),
        "ReduceMean → Pow → ReduceMean → Add → Sqrt written out",
        f"Normalization: {variant} written out as elementary ops{eps}.",
        sqrt,
        info={"variant": variant, "written_out": True},
    )


# ---------------------------------------------------------------------------------- conv


def detect_convs(ix: GraphIndex) -> list[Pattern]:
    out: list[Pattern] = []
    for i in ix.indexes_of(("Conv", "ConvTranspose", "QLinearConv", "ConvInteger")):
        node = ix.nodes[i]
        members = [i]
        parts = [node.op_type]
        cur = i
        for _ in range(3):
            kids = ix.children(cur)
            if len(kids) != 1:
                break
            k = kids[0]
            op = ix.op(k)
            if (
                op in ("BatchNormalization", "InstanceNormalization")
                or op in ACTIVATIONS
                or (op == "Mul" and ix.op(cur) in ("Sigmoid", "HardSigmoid"))
            ):
                members.append(k)
                parts.append(op)
                cur = k
            else:
                break
        group = int(node.attributes.get("group", 1) or 1)
        w = ix.tensor_shape(node.inputs[1]) if len(node.inputs) > 1 else None
        depthwise = group > 1 and w is not None and len(w) >= 2 and w[1] == 1
        kernel = "x".join(str(d) for d in w[2:]) if w and len(w) > 2 else ""
        desc = ("depthwise " if depthwise else "") + "convolution"
        if kernel:
            desc += f" {kernel}"
        if w:
            desc += f", {w[0]} output channels"
        text = f"Convolution block: {' → '.join(parts)} ({desc})."
        out.append(
            Pattern(
                "conv",
                tuple(members),
                "Conv followed by norm/activation",
                text,
                i,
                info={"depthwise": depthwise, "group": group},
            )
        )
    return out


# ---------------------------------------------------------------------------------- misc


def detect_embeddings(ix: GraphIndex) -> list[Pattern]:
    out = []
    for i in ix.indexes_of(("Gather",)):
        node = ix.nodes[i]
        if not node.inputs or node.inputs[0] not in ix.initializers:
            continue
        shape = ix.tensor_shape(node.inputs[0])
        if shape is None or len(shape) != 2 or shape[0] < 16:
            continue
        out.append(
            Pattern(
                "embedding",
                (i,),
                "Gather rows of a 2-D weight table",
                f"Embedding: looks up rows of a {shape[0]} × {shape[1]} table "
                f"('{node.inputs[0]}').",
                i,
                info={"vocab": shape[0], "dim": shape[1]},
            )
        )
    return out


def detect_recurrent(ix: GraphIndex) -> list[Pattern]:
    out = []
    for i in ix.indexes_of([*RECURRENT, "If"]):
        node = ix.nodes[i]
        label = RECURRENT.get(node.op_type)
        if label:
            hidden = (
                node.attributes.get("hidden_size")
                if node.op_type in ("LSTM", "GRU", "RNN")
                else None
            )
            extra = f" with hidden size {hidden}" if hidden else ""
            body = " (body is a nested graph)" if node.subgraphs else ""
            out.append(
                Pattern(
                    "recurrent",
                    (i,),
                    f"operator {node.op_type}",
                    f"Recurrent: {label}{extra}{body}.",
                    i,
                    info={"hidden": hidden},
                )
            )
        elif node.op_type == "If":
            n = sum(sub.node_count for sub in node.subgraphs.values())
            out.append(
                Pattern(
                    "control_flow",
                    (i,),
                    "operator If",
                    f"Control flow: If with {len(node.subgraphs)} branches ({n} nodes).",
                    i,
                )
            )
    return out


def detect_residuals(ix: GraphIndex) -> list[Pattern]:
    """Add(x, f(x)): one operand is an ancestor of the other within a bounded distance."""
    out = []
    for i in ix.indexes_of(("Add", "Sum")):
        node = ix.nodes[i]
        if len(node.inputs) != 2 or node.domain == "nneditor":
            continue
        a, b = (ix.producer.get(n) for n in node.inputs)
        if a is None or b is None or a == b:
            continue
        skip, branch = (a, b) if a < b else (b, a)
        if _reaches(ix, branch, skip, limit=64):
            out.append(
                Pattern(
                    "residual",
                    (i,),
                    "Add(x, f(x))",
                    "Residual connection: adds a block's input back to its output.",
                    i,
                )
            )
    return out


def _reaches(ix: GraphIndex, start: int, target: int, limit: int) -> bool:
    seen = {start}
    stack = [start]
    while stack and len(seen) < limit:
        n = stack.pop()
        for p in ix.parents(n):
            if p == target:
                return True
            if p not in seen and p > target:
                seen.add(p)
                stack.append(p)
    return False

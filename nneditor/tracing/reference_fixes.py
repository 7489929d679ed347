"""Corrections to ``onnx.reference`` operators, passed to the evaluator as ``new_ops``.

Invariants:

- Each class here implements the ONNX specification where the installed ``onnx.reference``
  deviates from it; each deviation is named in the class docstring and covered by a test that
  compares against ONNX Runtime.
- Overrides apply to the main graph and to every subgraph (onnx forwards ``new_ops``).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_batch_normalization import (
    BatchNormalization_6,
    BatchNormalization_9,
    BatchNormalization_14,
)


def _inference(
    x: np.ndarray, scale: Any, bias: Any, mean: Any, var: Any, epsilon: float
) -> np.ndarray:
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    return (y + bias.reshape(shape)).astype(x.dtype)


class BatchNormalization(OpRun):
    """BatchNormalization whose mode follows the specification.

    onnx.reference's version 9 implementation switches to batch statistics (training) whenever
    the ``momentum`` attribute is present, which converters such as paddle2onnx always write.
    From opset 9 to 13 the specification (and ONNX Runtime) select training by the extra
    outputs instead: a node with only ``Y`` is inference with the stored mean and variance.
    Other versions delegate to onnx's own classes.
    """

    op_domain = ""

    def _opset(self) -> int:
        opsets = self.run_params.get("opsets") or {}
        return int(opsets.get("", opsets.get("ai.onnx", 0)) or 0)

    def _run(self, x: Any, scale: Any, bias: Any, mean: Any, var: Any, **attrs: Any) -> Any:
        opset = self._opset()
        outputs = [o for o in self.onnx_node.output if o]
        epsilon = attrs.get("epsilon")
        epsilon = 1e-5 if epsilon is None else float(epsilon)
        if 9 <= opset < 14 and len(outputs) == 1:
            return (_inference(x, scale, bias, mean, var, epsilon),)
        if opset >= 14:
            impl: type[OpRun] = BatchNormalization_14
        elif opset >= 9:
            impl = BatchNormalization_9
        else:
            impl = BatchNormalization_6
        accepted = inspect.signature(impl._run).parameters
        kwargs = {k: v for k, v in attrs.items() if k in accepted}
        return impl._run(self, x, scale, bias, mean, var, **kwargs)  # type: ignore[arg-type]


NEW_OPS: list[type[OpRun]] = [BatchNormalization]

"""ONNX models as the converters and optimizers in the wild rewrite them: ONNX Runtime's
quantizers (QDQ and QOperator static, dynamic int8, 4-bit MatMulNBits), its float16 converter, a session's saved optimized graph, and scikit-learn
models converted by skl2onnx (tree ensembles and pipelines in the ``ai.onnx.ml`` domain, with
a ZipMap output that is a sequence of maps, not a tensor).

The sources are zoo artifacts themselves (the PaddleOCR direction classifier, the generated
BERT) or fitted on scikit-learn's bundled iris data, so nothing is downloaded. Calibration and
training data are seeded.

Registered into zoo_generated's table by :func:`register`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

_CLS = "ppocr-mobile-v2-cls.onnx"


#: zoo_generated.generate, handed over by register (no import back into the zoo's table)
_GENERATE: list[Callable[[str, Path], Path]] = []


def _source(name: str) -> str:
    """A source artifact: a wheel's file (testdata) or another generated one."""
    import testdata

    if name in testdata.ITEMS:
        return str(testdata.ensure(name))
    return str(_GENERATE[0](name, testdata.cache_dir()))


def _calibration() -> Any:
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader

    class Images(CalibrationDataReader):  # the classifier's own input size, seeded values
        def __init__(self) -> None:
            self.rng = np.random.default_rng(0)
            self.left = 3

        def get_next(self) -> dict[str, Any] | None:
            self.left -= 1
            if self.left < 0:
                return None
            return {"x": self.rng.random((1, 3, 48, 192), dtype=np.float32)}

    return Images()


def _static(fmt: str, path: Path) -> None:
    from onnxruntime.quantization import QuantFormat, quantize_static

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_static(_source(_CLS), str(path), _calibration(), quant_format=QuantFormat[fmt])


def _dynamic(path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(_source("bert.onnx"), str(path), weight_type=QuantType.QInt8)


def _int4(path: Path) -> None:
    """ONNX Runtime's weight-only 4-bit quantizer (MatMulNBits, as onnxruntime-genai's models
    carry); it also re-sorts the graph topologically, moving the rotary embedding's operators
    in among the first block's."""
    import logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(onnx.load(_source("llama.onnx")), block_size=32)
    quantizer.process()
    quantizer.model.save_model_to_file(str(path), False)


def _ort_optimized(source: str, path: Path) -> None:
    """The model as an ONNX Runtime session saves it after its extended graph optimizations
    (com.microsoft FusedMatMul, SkipLayerNormalization, FastGelu; portable across CPUs, unlike
    the NCHWc layouts of the highest level)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(path)
    ort.InferenceSession(_source(source), options, providers=["CPUExecutionProvider"])


def _float16(path: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(onnx.load(_source(_CLS)), keep_io_types=True)
    onnx.save(model, str(path))


def _sklearn(kind: str, path: Path) -> None:
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    if kind == "forest":
        model: Any = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0)
    else:
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
    model.fit(x, y)
    onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    path.write_bytes(onx.SerializeToString())


def _categories(path: Path) -> None:
    import numpy as np
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    x = np.array([["red"], ["green"], ["blue"], ["red"], ["blue"], ["green"]])
    model = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression())
    model.fit(x, np.array([1, 0, 1, 1, 1, 0]))
    onx = to_onnx(
        model,
        initial_types=[("color", StringTensorType([None, 1]))],
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    path.write_bytes(onx.SerializeToString())


def register(generator: Callable[..., Any], generate: Callable[[str, Path], Path]) -> None:
    _GENERATE[:] = [generate]
    ort = "onnxruntime.quantization"
    generator("cls-qdq.onnx", f"{ort} quantize_static (QDQ)", "PaddleOCR classifier, QDQ int8")(
        lambda path: _static("QDQ", path)
    )
    generator(
        "cls-qoperator.onnx",
        f"{ort} quantize_static (QOperator)",
        "PaddleOCR classifier with QLinearConv and com.microsoft quantized operators",
    )(lambda path: _static("QOperator", path))
    generator("bert-int8-dynamic.onnx", f"{ort} quantize_dynamic", "BERT, dynamic int8 MatMul")(
        _dynamic
    )
    generator(
        "llama-int4.onnx",
        f"{ort} MatMulNBitsQuantizer",
        "Llama with 4-bit MatMulNBits weights (com.microsoft), topologically re-sorted",
    )(_int4)
    generator(
        "gpt2-ort-optimized.onnx",
        "onnxruntime SessionOptions.optimized_model_filepath (extended)",
        "GPT-2 with ONNX Runtime's fused operators (FusedMatMul attention scores, FastGelu)",
    )(lambda path: _ort_optimized("gpt2.onnx", path))
    generator(
        "cls-fp16.onnx",
        "onnxruntime.transformers.float16",
        "PaddleOCR classifier with float16 weights and float32 inputs/outputs",
    )(_float16)
    generator(
        "sklearn-forest.onnx",
        "skl2onnx",
        "random forest (TreeEnsembleClassifier, ZipMap: a sequence of maps output)",
    )(lambda path: _sklearn("forest", path))
    generator("sklearn-pipeline.onnx", "skl2onnx", "StandardScaler + LogisticRegression")(
        lambda path: _sklearn("pipeline", path)
    )
    generator(
        "sklearn-categories.onnx",
        "skl2onnx",
        "OneHotEncoder + LogisticRegression on a string column (a text input)",
    )(_categories)

"""The lean ggml block decoders give gguf-py's values bit for bit, for every type they cover,
and the loader uses them (including for multi-chunk tensors decoded on several threads)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from nneditor.tensors import ggml
from nneditor.tensors.ggml_fast import FAST_DECODERS

TYPES = sorted(FAST_DECODERS)


def _blocks(type_id: int, rows: int = 64, cols: int = 1024) -> np.ndarray:
    """Quantized rows: from gguf-py's quantizer where it has one, else random bytes whose
    float16 scale fields are finite (any bit pattern is a valid block otherwise)."""
    qt = gguf.GGMLQuantizationType(type_id)
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rng = np.random.default_rng(type_id)
    x = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 4, (rows, 1))).astype(np.float32)
    try:
        return gguf.quants.quantize(x, qt)
    except NotImplementedError:
        raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
        scales = rng.uniform(-2, 2, (raw.shape[0], 2)).astype(np.float16).view(np.uint8)
        where = {12: [0, 2], 14: [208]}.get(type_id, [0])
        for off in where:
            raw[:, off : off + 2] = scales[:, :2]
        return raw.reshape(rows, -1)


@pytest.mark.parametrize("type_id", TYPES)
def test_bit_identical_to_gguf_py(type_id: int) -> None:
    qt = gguf.GGMLQuantizationType(type_id)
    q = _blocks(type_id)
    want = gguf.quants.dequantize(q, qt)
    block, size = gguf.GGML_QUANT_SIZES[qt]
    got = FAST_DECODERS[type_id](q.reshape(-1, size)).reshape(want.shape)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), np.asarray(want, np.float32).view(np.uint32))


def test_the_loader_uses_them_across_threads(tmp_path) -> None:  # noqa: ANN001
    import nneditor

    qt = gguf.GGMLQuantizationType.Q4_K
    q = _blocks(int(qt), rows=2048, cols=2048)  # 2.3 MB: more than one decode chunk
    assert q.nbytes > ggml.CHUNK_BYTES
    w = gguf.GGUFWriter(str(tmp_path / "q.gguf"), "llama")
    w.add_tensor("w", q, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert ggml._block_decoder(ggml.ggml_type(int(qt))) is FAST_DECODERS[int(qt)]
    with nneditor.open(tmp_path / "q.gguf") as doc:
        got = doc.tensors["w"].read()
        rows = doc.tensors["w"].read("100:1900, 7:2000:3")
    want = gguf.quants.dequantize(q, qt)
    assert np.array_equal(got, want)
    assert np.array_equal(rows, want[100:1900, 7:2000:3])

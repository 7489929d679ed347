"""Real Core ML packages against coremltools' own weight-blob reader (libmilstoragepython):
every blob tensor NNEditor lists holds the values coremltools reads at the same offset, with
the declared shape (coremltools 7 wrote garbage into the blob record's padding field, which
made every tensor of basic-pitch's package read as an empty [0] array)."""

from __future__ import annotations

import numpy as np
import pytest

import nneditor

storage = pytest.importorskip("coremltools.libmilstoragepython")

_READ = {"float32": "read_float_data", "float16": "read_fp16_data", "int8": "read_int8_data",
         "uint8": "read_uint8_data", "int16": "read_int16_data", "uint16": "read_uint16_data",
         "int32": "read_int32_data", "uint32": "read_uint32_data"}  # fmt: skip


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["bp-nmp.mlpackage", "cnn.mlpackage"])
def test_blob_tensors_equal_coremltools(zoo_artifact, name: str) -> None:  # noqa: ANN001
    path = zoo_artifact(name)
    weights = path / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    reader = storage._BlobStorageReader(str(weights))
    compared = 0
    with nneditor.open(path) as doc:
        for ref in doc.tensors.values():
            if ref.encoding != "mil_blob":
                continue
            got = ref.read()
            want = np.asarray(getattr(reader, _READ[ref.dtype])(ref.info["metadata_offset"]))
            if want.dtype == np.uint16 and ref.dtype == "float16":
                want = want.view(np.float16)
            assert got.size == want.size > 0, ref.name
            np.testing.assert_array_equal(got.reshape(-1), want.reshape(-1).astype(got.dtype))
            compared += 1
    assert compared >= 2

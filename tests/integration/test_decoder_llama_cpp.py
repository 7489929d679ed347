"""The NumPy decoder's logits on llama.cpp conversions equal llama.cpp's own, where
llama-cpp-python is installed (it is not a test dependency: a source build takes minutes;
``pip install llama-cpp-python==0.3.36``). The other decoder tests compare with transformers;
this one says that a GGUF runs as llama.cpp runs it, also where llama.cpp's conversion
differs from transformers (Bamba's half-rotated heads)."""

from __future__ import annotations

import numpy as np
import pytest

import nneditor
from nneditor.decoder import decoder_config, run_forward

llama_cpp = pytest.importorskip("llama_cpp")

IDS = [1, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 77]
#: conversions whose llama.cpp code paths the transformers comparisons do not reach alone:
#: Llama 4's loader defaults, the Gemma 3 and Mistral 3 releases, Bamba. (llama-cpp-python
#: 0.3.36's llama.cpp refuses the zoo's Qwen3.5 files: their value heads outnumber their key
#: heads, which its loader does not expect)
GGUFS = [
    "decoder-llama4.gguf",
    "decoder-llama4-mm.gguf",
    "decoder-gemma3-mm.gguf",
    "decoder-mistral3-mm.gguf",
    "decoder-bamba.gguf",
    "decoder-qwen3-vl-moe.gguf",  # qwen3vlmoe: its text path with DeepStack left at zero
    "decoder-glm4v-mm.gguf",  # glm4 with M-RoPE sections: llama.cpp's rope_multi
    "decoder-glm4v_moe-mm.gguf",  # glm4moe with them
    "decoder-minicpm.gguf",  # its scales (transformers has no MiniCPM class)
    "decoder-minicpm4.gguf",  # and LongRoPE without a stated original context
    "decoder-olmo3-yarn.gguf",  # YaRN on the full-attention layers only
    "decoder-internlm2.gguf",  # (transformers has no InternLM2 class)
    "decoder-afmoe.gguf",  # its loader's fixed layer pattern and unconditional muP scale
]


def _theirs(path: str, ids: list[int]) -> np.ndarray:
    llm = llama_cpp.Llama(
        model_path=path,
        n_ctx=64,
        n_batch=64,
        logits_all=True,
        verbose=False,
        n_threads=2,
        type_k=0,  # GGML_TYPE_F32: no half-precision cache between the two
        type_v=0,
        flash_attn=False,
    )
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


@pytest.mark.realdata
@pytest.mark.parametrize("name", GGUFS)
def test_logits_equal_llama_cpp(name: str, zoo_artifact) -> None:  # noqa: ANN001
    path = zoo_artifact(name)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        ids = [i % cfg.vocab for i in IDS]  # (InternLM2's tiny vocabulary)
        run_forward(doc, cfg, np.array([ids]), values.__setitem__)
    ours = values["result_output"][0]
    theirs = _theirs(str(path), ids)
    rel = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    print(f"{name}: {rel:.2e}")
    assert rel < 1e-3, rel
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()

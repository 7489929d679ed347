"""The decoder's read-ahead pipeline (decoder/prefetch.py) and its split products of
block-quantized matrices (AffineMatrix): the values equal transformers' fp32 forward of the
same dequantized weights whichever way the forward runs, the same trace gives the same values
twice, and a pipelined forward that ends (done, cancelled or failed) leaves no thread behind
and BLAS as it found it."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from gguf_reference import llama_model  # tools/: gguf-py + transformers, not NNEditor

import nneditor
from nneditor.decoder import DecoderUnsupported, decoder_config, prefetch, run_forward
from nneditor.decoder.weights import Weights

torch = pytest.importorskip("torch")
threadpoolctl = pytest.importorskip("threadpoolctl")

SMOLLM = "SmolLM2-135M-Instruct.Q4_1.gguf"  # 30 blocks of Q4_1, a Q8_0 head
IDS = np.array([[(i * 7919) % 49152 for i in range(1, 25)]], np.int64)


def _forward(path: Path, mode: str, **patches: object) -> dict[str, np.ndarray]:
    """Every captured value of a forward run ``mode`` ("pipelined" or "plain")."""
    captures: dict[str, np.ndarray] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(prefetch, "suits", lambda *a, **k: mode == "pipelined")
        for name, value in patches.items():
            mp.setattr(prefetch, name, value)
        with nneditor.open(path) as doc:
            run_forward(
                doc, decoder_config(doc), IDS, lambda n, a: captures.__setitem__(n, a.copy())
            )
    return captures


def _blas_threads() -> list[int]:
    info = threadpoolctl.threadpool_info()
    return [int(i["num_threads"]) for i in info if i["user_api"] == "blas"]


def _read_ahead_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("decoder-read-ahead")]


@pytest.fixture(scope="module")
def reference(realdata) -> tuple[Path, np.ndarray]:  # noqa: ANN001
    """SmolLM2 Q4_1 and transformers' fp32 logits of its gguf-py-dequantized weights."""
    path = realdata(SMOLLM)
    model = llama_model(path)
    with torch.no_grad():
        logits = model(torch.tensor(IDS)).logits.float().numpy()
    return path, logits


@pytest.mark.realdata
@pytest.mark.parametrize("mode", ["pipelined", "plain"])
def test_both_ways_equal_transformers(reference, mode: str) -> None:  # noqa: ANN001
    path, want = reference
    before = _blas_threads()
    got = _forward(path, mode)["result_output"]
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel < 1e-5, rel
    assert (got.argmax(-1) == want.argmax(-1)).all()
    assert _blas_threads() == before and not _read_ahead_threads()


@pytest.mark.realdata
def test_a_trace_gives_the_same_values_twice(reference) -> None:  # noqa: ANN001
    path, _ = reference
    first, second = _forward(path, "pipelined"), _forward(path, "pipelined")
    assert list(first) == list(second)
    for name, value in first.items():
        assert np.array_equal(value, second[name]), name


@pytest.mark.realdata
@pytest.mark.parametrize("bound", [1, 600_000])  # nothing fits; the small tensors only
def test_a_small_read_ahead_bound_changes_nothing(reference, bound: int) -> None:  # noqa: ANN001
    path, _ = reference
    full = _forward(path, "pipelined")
    bounded = _forward(path, "pipelined", AHEAD_BYTES=bound)
    for name, value in full.items():
        assert np.array_equal(value, bounded[name]), name


@pytest.mark.realdata
def test_a_cancelled_or_failed_pipeline_leaves_nothing_running(reference) -> None:  # noqa: ANN001
    path, _ = reference
    before = _blas_threads()
    with pytest.MonkeyPatch.context() as mp, nneditor.open(path) as doc:
        mp.setattr(prefetch, "suits", lambda *a, **k: True)
        cfg = decoder_config(doc)
        steps = iter(range(100))
        with pytest.raises(InterruptedError):  # after block 2, with block 3 read ahead
            run_forward(doc, cfg, IDS, lambda n, a: None, cancelled=lambda: next(steps) == 3)
        assert _blas_threads() == before and not _read_ahead_threads()

        broken = doc.tensors["blk.3.ffn_up.weight"]

        def fail(*args: object) -> None:
            raise ValueError("bad block")

        mp.setattr(broken.loader, "read_affine", fail)
        with pytest.raises(DecoderUnsupported, match=r"blk\.3\.ffn_up\.weight.*bad block"):
            run_forward(doc, cfg, IDS, lambda n, a: None)
    assert _blas_threads() == before and not _read_ahead_threads()


@pytest.mark.realdata
def test_the_rule_pipelines_short_prompts_of_block_quantized_weights(
    realdata,  # noqa: ANN001
    zoo_artifact,  # noqa: ANN001
) -> None:
    with nneditor.open(realdata(SMOLLM)) as doc:
        blocks = Weights(doc, decoder_config(doc)).matrices(0)
        assert len(blocks) == 7 and {r.encoding for r in blocks} == {"Q4_1"}
        assert prefetch.suits(32, blocks, cores=2)
        assert not prefetch.suits(prefetch.MAX_TOKENS + 1, blocks, cores=2)  # product-bound
        assert not prefetch.suits(32, blocks, cores=1)
    with nneditor.open(zoo_artifact("decoder-llama.gguf")) as doc:  # F32: memory speed
        assert not prefetch.suits(8, Weights(doc, decoder_config(doc)).matrices(0), cores=2)


@pytest.mark.realdata
@pytest.mark.parametrize("bound", [1, 4_000_000, 64 << 20])
def test_every_tensor_is_read_once(reference, bound: int) -> None:  # noqa: ANN001
    """Read ahead or read on the spot, never both (a tensor read on the spot leaves the
    read-ahead queue)."""
    path, _ = reference
    reads: list[str] = []
    original = Weights._read

    def counted(self: Weights, key: str) -> object:
        reads.append(key)
        return original(self, key)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Weights, "_read", counted)
        _forward(path, "pipelined", AHEAD_BYTES=bound)
    blocks = [k for k in reads if k.startswith("blk.")]
    assert len(blocks) == len(set(blocks)) == 30 * 9  # 7 matrices and 2 norms a block


def test_blas_is_restored_when_the_last_of_two_read_aheads_closes() -> None:
    before = _blas_threads()
    first, second = prefetch.ReadAhead(), prefetch.ReadAhead()
    assert max(_blas_threads()) == max(1, prefetch.usable_cores() - 1)
    first.close()
    assert max(_blas_threads()) == max(1, prefetch.usable_cores() - 1)  # second still open
    second.close()
    assert _blas_threads() == before

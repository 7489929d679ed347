"""Hugging Face snapshot folders: config.json, tokenizer summary and the weights of every
shard (safetensors or PyTorch .bin) as one Document (:mod:`.snapshot`)."""

from nneditor.artifacts.huggingface.snapshot import FORMAT, open_document

__all__ = ["FORMAT", "open_document"]

"""Tensor decoding: dtypes, packed and block encodings, bounded caches, slicing."""

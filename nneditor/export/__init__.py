"""Staged, validated, atomic export of revisions (ONNX) and weights-only artifacts."""

"""Streaming statistics, histograms and hex paging over tensors and files (Qt-free)."""

"""Readers, one per format, behind one protocol (see registry)."""

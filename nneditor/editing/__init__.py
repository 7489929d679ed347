"""Reversible editing: transactions, the revision chain, journal-based crash recovery."""

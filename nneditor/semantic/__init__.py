"""Semantic structure over graphs: hierarchy levels, pattern detection with evidence."""

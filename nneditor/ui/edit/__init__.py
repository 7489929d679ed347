"""Editing in the desktop window: the Edit tab, its forms, history and the save flow."""

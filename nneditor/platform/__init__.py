"""Per-user folders and platform integration."""

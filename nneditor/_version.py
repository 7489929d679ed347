"""The release version, in a module of its own so the packages below the public API can name
it without importing the package face (whose ``open`` is the API)."""

__version__ = "0.1.0"

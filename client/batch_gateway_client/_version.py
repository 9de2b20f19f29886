"""The client's version: always the gateway's (the repository's pyproject.toml); a test checks it."""

__version__ = "0.1.0"

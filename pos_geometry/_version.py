"""The package version, kept in one place (read by ``pyproject.toml`` too)."""

__version__ = "0.1.0"

"""The version, where every layer can read it without importing the package facade (`ppdsl/__init__.py`)."""

__version__ = "0.1.0"

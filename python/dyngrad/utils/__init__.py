"""dyngrad.utils: data loading (dyngrad.utils.data)."""
from . import data

__all__ = ["data"]

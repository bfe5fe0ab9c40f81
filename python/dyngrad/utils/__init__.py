"""dyngrad.utils: data loading (dyngrad.utils.data), checkpointing (dyngrad.utils.checkpoint); dyngrad.utils.tensorboard
is imported on demand (it needs tensorboardX)."""
from . import data, checkpoint  # noqa: F401

__all__ = ["data", "checkpoint"]

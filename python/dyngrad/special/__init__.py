"""dyngrad.special (torch.special): the special functions of the shared API table (python/dyngrad/_api/table.py,
kind special), written in python/dyngrad/_api/ops/pointwise.py and special.py for both engines."""
from .. import _api

globals().update(_api.SPECIAL)
__all__ = sorted(_api.SPECIAL)

"""dyngrad.masked (torch.masked): reductions and normalisations with `mask=`, the rows of kind `masked` of the shared
API table (python/dyngrad/_api/table.py), written in python/dyngrad/_api/ops/masked.py for both engines."""
from .. import _api

globals().update(_api.MASKED)
__all__ = sorted(_api.MASKED)

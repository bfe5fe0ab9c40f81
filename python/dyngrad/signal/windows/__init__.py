"""dyngrad.signal.windows (torch.signal.windows): the rows of kind `windows` of the shared API table
(python/dyngrad/_api/table.py), written in python/dyngrad/_api/ops/windows.py for both engines."""
from ... import _api

globals().update(_api.WINDOWS)
__all__ = sorted(_api.WINDOWS)

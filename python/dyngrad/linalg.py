"""dyngrad.linalg (torch.linalg): the rows of kind `linalg` of the shared API table (python/dyngrad/_api/table.py),
written in python/dyngrad/_api/ops/linalg.py for both engines; LinAlgError is the error of singular and
non-positive-definite inputs."""
from . import _api

globals().update(_api.LINALG)
__all__ = sorted(_api.LINALG)

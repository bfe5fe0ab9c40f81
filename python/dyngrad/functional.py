"""dyngrad.functional: torch.functional's names that dyngrad has (split, and einsum, norm, meshgrid, ... as the
API table gains them); they are the same objects as dyngrad.NAME."""
import importlib

from ._api import table

# torch.functional.__all__ (PyTorch 2.13)
TORCH_NAMES = ("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "cartesian_prod",
               "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm", "meshgrid", "pca_lowrank",
               "split", "stft", "svd_lowrank", "tensordot", "unique", "unique_consecutive", "unravel_index")

_root = importlib.import_module(__package__)
__all__ = [n for n in TORCH_NAMES if n in {row.name for row in table.rows() if "fn" in row.kinds}]
globals().update({n: getattr(_root, n) for n in __all__})

"""torch.nn.modules.linear_cross_entropy: the options of F.linear_cross_entropy (defined beside the function, in
_api/ops/loss.py, which checks its argument against this class)."""
from ..._api.ops.loss import LinearCrossEntropyOptions

__all__ = ["LinearCrossEntropyOptions"]

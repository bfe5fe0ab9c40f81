"""torch.nn.modules.linear_cross_entropy_options: the options of F.linear_cross_entropy. The class is defined next
to the loss (_api/ops/loss.py, below nn, so that the loss can check its argument with isinstance) and lives here
by its __module__, as in torch."""
from ..._api.ops.loss import LinearCrossEntropyOptions

__all__ = ["LinearCrossEntropyOptions"]

"""The nn layers, one file per family as torch.nn.modules lays them out (module.Module, container.Sequential,
linear.Linear, rnn.LSTM, sparse.Embedding, activation.MultiheadAttention, ...), so that
`dyngrad.nn.modules.<file>.<Class>` is where torch has `torch.nn.modules.<file>.<Class>`. Each file names what it
exports in its __all__, once; this package and dyngrad.nn re-export those names."""
from .module import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .channelshuffle import *  # noqa: F401,F403
from .activation import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .linear_cross_entropy_options import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .adaptive import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from . import lazy  # noqa: F401  (LazyModuleMixin is reached as nn.modules.lazy.LazyModuleMixin, as in torch)

__all__ = sorted(name for name, obj in globals().items() if isinstance(obj, type))

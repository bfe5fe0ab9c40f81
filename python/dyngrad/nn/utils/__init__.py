"""nn.utils: gradient clipping, parameters as one vector, weight and spectral normalisation, parametrizations and
the packed-sequence helpers of nn.utils.rnn, with torch's names and semantics."""
from . import parametrizations, parametrize, rnn  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401

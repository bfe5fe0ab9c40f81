"""nn.functional: the neural-net ops of the shared API table (python/dyngrad/_api/table.py, kind F), written in
python/dyngrad/_api/ops/ (linear, embedding, conv, pooling, activation, dropout, loss, normalization, distance, attention, ...) for both engines."""
from .. import _api

globals().update(_api.FUNCTIONAL)
__all__ = sorted(_api.FUNCTIONAL)

"""dyngrad.fft (torch.fft): the rows of kind `fft` of the shared API table (python/dyngrad/_api/table.py), written
in python/dyngrad/_api/ops/fft.py for both engines over the kernels' real layout (Note [FFT over the real layout])."""
from .. import _api

globals().update(_api.FFT)
__all__ = sorted(_api.FFT)

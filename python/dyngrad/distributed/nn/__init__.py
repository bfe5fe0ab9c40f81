"""dyngrad.distributed.nn: collectives that autograd can differentiate through (torch.distributed.nn)."""
from . import functional  # noqa: F401

"""dyngrad.nn.parallel: DistributedDataParallel (over dyngrad.distributed, i.e. MPI)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]

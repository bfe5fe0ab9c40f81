"""dyngrad.nn.parallel: DistributedDataParallel (over dyngrad.distributed, i.e. MPI) and DataParallel (the one CPU
device)."""
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]

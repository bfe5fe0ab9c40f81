"""dyngrad.distributed: torch.distributed's names over MPI, for data-parallel training across processes and machines.

    # mpiexec -n 2 python train.py
    import dyngrad as torch
    import dyngrad.distributed as dist
    dist.init_process_group(backend="mpi")          # rank and world size come from mpiexec / srun
    t = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)         # in place, on every rank: tensor([1.])
    model = torch.nn.parallel.DistributedDataParallel(net)

Written once for both engines (shared code: `dyngrad.reference.distributed` is this package over the reference
engine). mpi4py is imported by init_process_group only, so `import dyngrad` never needs it; install it with
`pip install 'dyngrad[distributed]'`.
"""
from .collectives import (  # noqa: F401
    ReduceOp, ProcessGroup, Work, group, GroupMember,
    is_available, is_mpi_available, is_initialized, init_process_group, destroy_process_group,
    get_rank, get_world_size, get_backend,
    barrier, broadcast, all_reduce, all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor,
)

__all__ = [
    "ReduceOp", "ProcessGroup", "Work", "group", "GroupMember",
    "is_available", "is_mpi_available", "is_initialized", "init_process_group", "destroy_process_group",
    "get_rank", "get_world_size", "get_backend",
    "barrier", "broadcast", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor",
]

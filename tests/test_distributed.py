"""dyngrad.distributed, DistributedDataParallel and DistributedSampler.

The multi-process tests run tests/mpi_driver.py under `mpiexec -n 2` (the mpiexec of this interpreter's
environment, from the mpich wheel) in a subprocess with a timeout, and are skipped when mpi4py or mpiexec is
missing (`pip install '.[test]'` brings both). The rest runs in this process and never initialises MPI.
"""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import subprocess_env

HERE = os.path.dirname(os.path.abspath(__file__))
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def mpirun(scenario, engine, ranks=2, timeout=120, **env):
    pytest.importorskip("mpi4py")
    if not os.path.exists(MPIEXEC):
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    start = time.monotonic()
    result = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, os.path.join(HERE, "mpi_driver.py"),
                             scenario, engine], capture_output=True, text=True, timeout=timeout,
                            env=subprocess_env(**env), cwd=HERE)
    return result, time.monotonic() - start


@pytest.mark.parametrize("engine", ["cpp", "reference"])
def test_collectives_every_dtype(engine):
    result, _ = mpirun("collectives", engine)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" ok") == 2


@pytest.mark.parametrize("engine", ["cpp", "reference"])
def test_ddp_equals_one_process_on_the_whole_batch(engine):
    """Static and dynamic (rank-dependent branches and loops) models, one bucket and several, with and without
    find_unused_parameters, and no_sync accumulation: parameters equal to one process's after 4 steps."""
    result, _ = mpirun("ddp", engine)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" ok") == 2


def test_rank_that_never_joins_becomes_a_timeout_error():
    result, seconds = mpirun("timeout", "cpp", timeout=60)
    assert result.returncode != 0
    assert "all_reduce: timed out after 2 s on rank 0 of 2" in result.stderr, result.stderr
    assert seconds < 30                            # rank 1 sleeps 60 s: the abort ended it


def test_rank_that_raises_aborts_the_job():
    result, seconds = mpirun("rank_raises", "reference", timeout=60)
    assert result.returncode != 0
    assert "ValueError: rank 1 failed on purpose" in result.stderr, result.stderr
    assert "timed out" not in result.stderr         # ended by the abort, not by rank 0's timeout
    assert seconds < 30


def test_rank_that_raises_without_abort_times_out_cleanly():
    result, seconds = mpirun("rank_raises", "cpp", timeout=60, DYNGRAD_MPI_ABORT_ON_ERROR="0")
    assert result.returncode != 0
    assert "ValueError: rank 1 failed on purpose" in result.stderr, result.stderr
    assert "DistributedDataParallel (gradient all-reduce at the end of backward): timed out after 3 s" in \
        result.stderr, result.stderr
    assert seconds < 30


def test_import_needs_no_mpi4py():
    code = ("import sys, dyngrad, dyngrad.reference as ref\n"
            "dyngrad.distributed.ReduceOp.SUM; ref.distributed.ReduceOp.AVG\n"
            "dyngrad.nn.parallel.DistributedDataParallel; ref.nn.parallel.DistributedDataParallel\n"
            "assert 'mpi4py' not in sys.modules, 'mpi4py was imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env=subprocess_env())
    assert result.returncode == 0, result.stderr


# ---- in this process: no MPI ----

def test_errors_before_init(dg):
    dist = dg.distributed
    assert not dist.is_initialized() and dist.is_available()
    with pytest.raises(ValueError, match="all_reduce: the default process group has not been initialized"):
        dist.all_reduce(dg.zeros(1))
    with pytest.raises(ValueError, match="get_rank: the default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="init_process_group: backend must be 'mpi'"):
        dist.init_process_group(backend="nccl")
    with pytest.raises(TypeError, match="init_process_group: timeout must be a datetime.timedelta"):
        dist.init_process_group(timeout=5)
    with pytest.raises(ValueError, match="DistributedDataParallel: the default process group"):
        dg.nn.parallel.DistributedDataParallel(dg.nn.Linear(2, 2))
    assert repr(dist.ReduceOp.SUM) == "<ReduceOp.SUM: 0>" and dist.group.WORLD is None


def test_distributed_sampler_partitions(dg):
    data = dg.utils.data
    ds = data.TensorDataset(dg.arange(10))
    shares = [list(data.DistributedSampler(ds, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]       # padded from the start to 12
    shares = [list(data.DistributedSampler(ds, num_replicas=3, rank=r, shuffle=False, drop_last=True))
              for r in range(3)]
    assert shares == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    shuffled = [data.DistributedSampler(ds, num_replicas=2, rank=r, seed=7) for r in range(2)]
    first = [list(s) for s in shuffled]
    assert sorted(first[0] + first[1]) == list(range(10)) and len(shuffled[0]) == 5
    assert [list(s) for s in shuffled] == first                        # same epoch: same order
    for s in shuffled:
        s.set_epoch(1)
    second = [list(s) for s in shuffled]
    assert second != first and sorted(second[0] + second[1]) == list(range(10))
    tiny = [list(data.DistributedSampler(data.TensorDataset(dg.arange(2)), num_replicas=5, rank=r,
                                         shuffle=False)) for r in range(5)]
    assert tiny == [[0], [1], [0], [1], [0]]


def test_dataloader_with_distributed_sampler(dg):
    data = dg.utils.data
    ds = data.TensorDataset(dg.tensor(np.arange(10.0)))
    sampler = data.DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    loader = data.DataLoader(ds, batch_size=2, sampler=sampler)
    assert len(loader) == 3
    assert [b[0].tolist() for b in loader] == [[1.0, 3.0], [5.0, 7.0], [9.0]]
    with pytest.raises(ValueError, match="DataLoader: sampler option is mutually exclusive with shuffle"):
        data.DataLoader(ds, sampler=sampler, shuffle=True)


def test_distributed_sampler_errors(dg):
    data = dg.utils.data
    ds = data.TensorDataset(dg.arange(4))
    with pytest.raises(ValueError, match=r"DistributedSampler: invalid rank 2, rank should be in the interval"):
        data.DistributedSampler(ds, num_replicas=2, rank=2)
    with pytest.raises(TypeError, match="DistributedSampler: num_replicas must be an int"):
        data.DistributedSampler(ds, num_replicas=2.0, rank=0)
    with pytest.raises(RuntimeError, match="DistributedSampler: .*init_process_group"):
        data.DistributedSampler(ds)
    with pytest.raises(TypeError, match="set_epoch: epoch must be an int"):
        data.DistributedSampler(ds, num_replicas=1, rank=0).set_epoch("1")


@pytest.mark.parametrize("engine", ["cpp", "reference"])
def test_distributed_example_smoke(engine, tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("mpi4py")
    if not os.path.exists(MPIEXEC):
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    script = os.path.join(os.path.dirname(HERE), "examples", "distributed_digits.py")
    result = subprocess.run([MPIEXEC, "-n", "2", sys.executable, script, "--smoke", "--engine", engine],
                            capture_output=True, text=True, timeout=120, env=subprocess_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on 2 rank(s)" in result.stdout and "largest parameter difference between ranks 0" in result.stdout


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (2, 5, False), (8, 4, False)])
def test_distributed_sampler_matches_torch_unshuffled(dg, n, replicas, drop_last):
    torch_data = pytest.importorskip("torch.utils.data")
    ours = dg.utils.data.DistributedSampler(dg.utils.data.TensorDataset(dg.arange(n)), num_replicas=replicas,
                                            rank=0, shuffle=False, drop_last=drop_last)
    for rank in range(replicas):
        ours.rank = rank
        theirs = torch_data.DistributedSampler(list(range(n)), num_replicas=replicas, rank=rank, shuffle=False,
                                               drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize("engine", ["cpp", "reference"])
def test_sync_batch_norm_uses_the_whole_batch(engine):
    """SyncBatchNorm on uneven shards equals one BatchNorm on the whole batch (outputs, gradients, running
    statistics), and DDP over convert_sync_batchnorm trains like one process (tests/mpi_driver.py: syncbn)."""
    result, _ = mpirun("syncbn", engine)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" ok") == 2

"""Run under mpiexec by tests/test_distributed.py: `mpiexec -n 2 python mpi_driver.py SCENARIO ENGINE`.

Each scenario checks its results on every rank and exits non-zero (printing why) on a mismatch; a rank that
finishes prints "rank R ok".
"""
import datetime
import os
import importlib
import sys
import time

import numpy as np

SCENARIO, ENGINE = sys.argv[1], sys.argv[2]
dg = importlib.import_module("dyngrad" if ENGINE == "cpp" else "dyngrad.reference")
dist = dg.distributed
nn = dg.nn


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {dist.get_rank()}: {what}")


def close(a, b, what, rtol=1e-5, atol=1e-6):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol):
        raise AssertionError(f"rank {dist.get_rank()}: {what}: got {a!r}, expected {b!r}")


def expect_error(kind, text, fn):
    try:
        fn()
    except kind as e:
        check(text in str(e), f"error message {str(e)!r} should contain {text!r}")
        return
    raise AssertionError(f"expected {kind.__name__} containing {text!r}")


# ---- collectives, every dtype ----

def collectives():
    expect_error(ValueError, "has not been initialized", lambda: dist.all_reduce(dg.zeros(1)))
    check(not dist.is_initialized(), "not initialized yet")
    dist.init_process_group(backend="mpi")
    expect_error(ValueError, "twice", lambda: dist.init_process_group("mpi"))
    r, n = dist.get_rank(), dist.get_world_size()
    check(dist.is_initialized() and dist.get_backend() == "mpi" and n >= 2, "init")
    base = np.array([[1, -2, 3], [4, 5, -6]])
    values = [base * (k + 1) + k for k in range(n)]        # what each rank holds
    for dtype in (dg.float32, dg.float64, dg.int64):
        mine = dg.tensor(values[r], dtype=dtype)
        np_dtype = mine.numpy().dtype
        stack = np.stack([v.astype(np_dtype) for v in values])
        for op, want in ((dist.ReduceOp.SUM, stack.sum(0)), (dist.ReduceOp.MAX, stack.max(0)),
                         (dist.ReduceOp.MIN, stack.min(0)), (dist.ReduceOp.PRODUCT, stack.prod(0))):
            t = dg.tensor(values[r], dtype=dtype)
            dist.all_reduce(t, op=op)
            close(t.numpy(), want, f"all_reduce {op} {dtype}")
            check(t.dtype == dtype, "dtype kept")
        t = dg.tensor(values[r], dtype=dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        total = stack.sum(0)
        want = total / n if np_dtype.kind == "f" else np.sign(total) * (np.abs(total) // n)
        close(t.numpy(), want, f"all_reduce AVG {dtype}")
        # in place on the tensor's memory: a view of it sees the result
        t = dg.tensor(values[r], dtype=dtype)
        before = t.detach().numpy()
        dist.all_reduce(t)
        close(before, stack.sum(0), "all_reduce writes into the tensor's own memory")
        # non-contiguous (a transpose) and a strided slice
        t = dg.tensor(values[r].T.copy(), dtype=dtype).T
        dist.all_reduce(t)
        close(t.numpy(), stack.sum(0), f"all_reduce non-contiguous {dtype}")
        # broadcast from the last rank
        t = dg.tensor(values[r], dtype=dtype)
        dist.broadcast(t, src=n - 1)
        close(t.numpy(), stack[n - 1], f"broadcast {dtype}")
        # all_gather and all_gather_into_tensor
        outs = [dg.zeros(2, 3, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, dg.tensor(values[r], dtype=dtype))
        for k in range(n):
            close(outs[k].numpy(), stack[k], f"all_gather {dtype}")
        out = dg.zeros(2 * n, 3, dtype=dtype)
        dist.all_gather_into_tensor(out, dg.tensor(values[r], dtype=dtype))
        close(out.numpy(), stack.reshape(2 * n, 3), f"all_gather_into_tensor {dtype}")
        # reduce_scatter: rank k receives the sum of everyone's block k
        blocks = [dg.tensor(values[r] * (k + 1), dtype=dtype) for k in range(n)]
        out = dg.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter(out, blocks)
        close(out.numpy(), stack.sum(0) * (r + 1), f"reduce_scatter {dtype}")
        out = dg.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter_tensor(out, dg.cat(blocks), op=dist.ReduceOp.MAX)
        close(out.numpy(), (stack * (r + 1)).max(0), f"reduce_scatter_tensor MAX {dtype}")
        # 0-d tensors, and async_op
        t = dg.tensor(float(r + 1), dtype=dtype)
        work = dist.all_reduce(t, async_op=True)
        check(work.wait() and work.is_completed(), "Work.wait")
        close(t.numpy(), sum(range(1, n + 1)), f"0-d async all_reduce {dtype}")
    # bool: sum/max are logical or, min/product logical and
    flags = [np.array([k == 0, True, False]) for k in range(n)]
    for op, want in ((dist.ReduceOp.SUM, np.any(flags, 0)), (dist.ReduceOp.MAX, np.any(flags, 0)),
                     (dist.ReduceOp.MIN, np.all(flags, 0)), (dist.ReduceOp.PRODUCT, np.all(flags, 0))):
        t = dg.tensor(flags[r].tolist())
        dist.all_reduce(t, op=op)
        check(t.dtype == dg.bool and (t.numpy() == want).all(), f"bool all_reduce {op}")
    t = dg.tensor(flags[r].tolist())
    dist.broadcast(t, src=0)
    check((t.numpy() == flags[0]).all(), "bool broadcast")
    outs = [dg.zeros(3, dtype=dg.bool) for _ in range(n)]
    dist.all_gather(outs, dg.tensor(flags[r].tolist()))
    check(all((outs[k].numpy() == flags[k]).all() for k in range(n)), "bool all_gather")
    # other dtypes travel staged (Note [Collectives of other dtypes]): half types as float32, narrow ints as int64
    for dtype in (dg.bfloat16, dg.float16, dg.int32, dg.int8, dg.uint8):
        t = dg.tensor([1.5 * (r + 1), 2.0] if dtype.is_floating_point else [r + 1, 2], dtype=dtype)
        dist.all_reduce(t)
        want = [1.5 * n * (n + 1) / 2, 2.0 * n] if dtype.is_floating_point else [n * (n + 1) // 2, 2 * n]
        check(t.dtype == dtype, f"all_reduce keeps {dtype}")
        close(t.float().numpy(), want, f"all_reduce {dtype}")
        t = dg.tensor([r + 0.5, -1.0], dtype=dtype) if dtype.is_floating_point else dg.tensor([r, 3], dtype=dtype)
        dist.broadcast(t, src=n - 1)
        close(t.float().numpy(), [n - 0.5, -1.0] if dtype.is_floating_point else [n - 1, 3], f"broadcast {dtype}")
    t = dg.tensor([100, 100], dtype=dg.int8)
    dist.all_reduce(t)                          # wraps in int8, as torch's sum in the dtype
    check(t.tolist() == [((100 * n + 128) % 256) - 128] * 2, f"int8 all_reduce wraps: {t.tolist()}")
    # mismatched tensors between ranks raise on every rank, naming each rank's shape and dtype (issue 23)
    expect_error(RuntimeError, "all_reduce: the tensors differ between ranks",
                 lambda: dist.all_reduce(dg.zeros(4 + 2 * r)))
    expect_error(RuntimeError, "rank 1 has shape (6,) float32", lambda: dist.all_reduce(dg.zeros(4 + 2 * r)))
    expect_error(RuntimeError, "all_reduce: the tensors differ between ranks",
                 lambda: dist.all_reduce(dg.zeros(4, dtype=dg.float64 if r else dg.float32)))
    expect_error(RuntimeError, "broadcast: the tensors differ between ranks",
                 lambda: dist.broadcast(dg.zeros(3 + r), src=0))
    t = dg.ones(3)
    dist.all_reduce(t)                          # the group still works after the refusals
    close(t.numpy(), [n] * 3, "all_reduce after a refused mismatch")
    # a tensor that requires grad: communicated without autograd
    w = dg.ones(3, requires_grad=True)
    dist.all_reduce(w)
    close(w.detach().numpy(), [n] * 3, "requires_grad tensor")
    # bad inputs name the function and the argument
    expect_error(TypeError, "all_reduce: expected a dyngrad Tensor for argument 'tensor'",
                 lambda: dist.all_reduce([1.0]))
    expect_error(TypeError, "all_reduce: op must be", lambda: dist.all_reduce(dg.zeros(1), op="sum"))
    expect_error(ValueError, "all_reduce: ReduceOp.AVG is not defined for bool",
                 lambda: dist.all_reduce(dg.zeros(1, dtype=dg.bool), op=dist.ReduceOp.AVG))
    expect_error(ValueError, "broadcast: src=5 is not a rank", lambda: dist.broadcast(dg.zeros(1), src=5))
    expect_error(ValueError, "all_gather: tensor_list must be a list of world_size",
                 lambda: dist.all_gather([dg.zeros(1)], dg.zeros(1)))
    expect_error(RuntimeError, "elements sharing memory", lambda: dist.all_reduce(dg.zeros(1).expand(3)))
    # the differentiable all_reduce under forward-mode AD: the tangent is all-reduced as the value (SUM, AVG)
    fa, total = dg.autograd.forward_ad, n * (n + 1) / 2
    functional = importlib.import_module(f"{dg.__name__}.distributed.nn.functional")
    for op, scale in ((dist.ReduceOp.SUM, 1.0), (dist.ReduceOp.AVG, 1.0 / n)):
        with fa.dual_level():
            x = fa.make_dual(dg.tensor([1.0, 2.0]) * (r + 1), dg.tensor([0.5, -1.0]) * (r + 1))
            value, tangent = fa.unpack_dual(functional.all_reduce(x, op=op))
        close(value.numpy(), [total * scale, 2 * total * scale], f"differentiable all_reduce {op}")
        close(tangent.numpy(), [0.5 * total * scale, -total * scale], f"differentiable all_reduce's tangent {op}")
    dist.barrier()
    dist.destroy_process_group()
    check(not dist.is_initialized(), "destroyed")
    dist.init_process_group()                 # again after destroy
    dist.barrier()


# ---- DDP == one process on the whole batch ----

def make_data(seed, n, features=6, classes=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, features)).astype(np.float32), rng.integers(0, classes, n)


class Dynamic(nn.Module):
    """Which branch runs depends on the data: rank 0's shard takes `pos`, rank 1's `neg`; `never` is never used."""

    def __init__(self):
        super().__init__()
        self.inp, self.pos, self.neg, self.never = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        h = self.inp(x).relu()
        if float(x[:, 0].mean().item()) > 0:
            for _ in range(2):                  # and a loop: the graphs differ in shape too
                h = self.pos(h).tanh()
        else:
            h = self.neg(h).relu()
        return self.out(h)


class Gate(nn.Module):
    """On a shard whose first feature is negative no parameter is used at all: the output comes from the input."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 3)

    def forward(self, x):
        if float(x[:, 0].mean().item()) > 0:
            return self.lin(x)
        return x[:, :3] * 2


def static_model():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))


def train_pair(build, find_unused, bucket_cap_mb, steps=4, accumulate=1, dynamic=False, bucket_view=False):
    """Trains a DDP model on this rank's shard and, in the same process, a plain copy on every shard (the loss
    averaged over shards, i.e. the mean loss of the whole batch); returns both parameter lists."""
    r, n = dist.get_rank(), dist.get_world_size()
    dg.manual_seed(100 + r)                          # different initial values per rank: DDP broadcasts rank 0's
    model = build()
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=find_unused, bucket_cap_mb=bucket_cap_mb,
                                              gradient_as_bucket_view=bucket_view)
    single = build()
    single.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
    opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_single = dg.optim.SGD(single.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps):
        opt.zero_grad()
        opt_single.zero_grad()
        for micro in range(accumulate):
            x, y = make_data(1000 * step + micro, 4 * n)
            if dynamic:                            # shard k's first feature has the sign of (-1)**k
                for k in range(n):
                    x[4 * k:4 * k + 4, 0] = np.abs(x[4 * k:4 * k + 4, 0]) * (1 if k % 2 == 0 else -1)
            shards = [(dg.tensor(x[4 * k:4 * k + 4], requires_grad=dynamic), dg.tensor(y[4 * k:4 * k + 4]))
                      for k in range(n)]
            xs, ys = shards[r]
            if micro < accumulate - 1:
                with ddp.no_sync():
                    loss_fn(ddp(xs), ys).backward()
            else:
                loss_fn(ddp(xs), ys).backward()
            if dynamic:
                loss = sum(loss_fn(single(a), b) for a, b in shards) / n
            else:
                loss = loss_fn(single(dg.tensor(x)), dg.tensor(y))
            loss.backward()
        for (name, p), q in zip(model.named_parameters(), single.parameters()):
            check((p.grad is None) == (q.grad is None), f"{name}: .grad None on one side only")
            if p.grad is not None:
                close(p.grad.numpy(), q.grad.numpy(), f"step {step} grad of {name}")
        opt.step()
        opt_single.step()
    return model, single


def ddp_equivalence():
    dist.init_process_group(backend="mpi")
    n = dist.get_world_size()
    for find_unused in (False, True):
        for cap in (25, 0.0005):                 # one bucket; several (overlapping backward)
            model, single = train_pair(static_model, find_unused, cap)
            for (name, p), q in zip(model.named_parameters(), single.parameters()):
                close(p.detach().numpy(), q.detach().numpy(), f"static find_unused={find_unused} cap={cap}: {name}")
        model, single = train_pair(Dynamic, True, cap, dynamic=True)
        for (name, p), q in zip(model.named_parameters(), single.parameters()):
            close(p.detach().numpy(), q.detach().numpy(), f"dynamic cap={cap}: {name}")
        check(model.never.weight.grad is None, "a parameter unused on every rank keeps grad None")
    # find_unused_parameters=False: the step after one where a parameter got no gradient raises, as torch's
    # (`never` is unused on every rank, so every rank raises)
    expect_error(RuntimeError, "'never.weight'", lambda: train_pair(Dynamic, False, 25, dynamic=True))
    model, single = train_pair(Gate, True, 25, dynamic=True)      # rank 1: no parameter in the graph at all
    close(model.lin.weight.detach().numpy(), single.lin.weight.detach().numpy(), "Gate")
    model, single = train_pair(static_model, False, 0.0005, accumulate=3, bucket_view=True)  # no_sync, views
    for (name, p), q in zip(model.named_parameters(), single.parameters()):
        close(p.detach().numpy(), q.detach().numpy(), f"no_sync accumulation: {name}")
    # replicas stay identical: every rank ends with rank 0's parameters
    flat = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    everyone = [dg.zeros(flat.size) for _ in range(n)]
    dist.all_gather(everyone, dg.tensor(flat))
    for k in range(n):
        close(everyone[k].numpy(), flat, f"rank {k}'s parameters equal", rtol=0, atol=0)
    # a model that differs between ranks is refused on every rank
    expect_error(RuntimeError, "hold different models",
                 lambda: nn.parallel.DistributedDataParallel(nn.Linear(3, 2 + dist.get_rank())))
    expect_error(TypeError, "DistributedDataParallel: module must be",
                 lambda: nn.parallel.DistributedDataParallel(3))
    dist.destroy_process_group()


# ---- SyncBatchNorm: the statistics of the whole batch across ranks ----

def syncbn():
    """Uneven shards (5 and 3 rows on 2 ranks): outputs, input gradients, running statistics and (summed over
    ranks) parameter gradients equal those of one BatchNorm on the whole batch; then a DDP model converted with
    convert_sync_batchnorm trains like one process on the whole batch."""
    dist.init_process_group(backend="mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(7)
    sizes = [5 if k == 0 else 3 for k in range(n)]
    starts = np.cumsum([0] + sizes)
    x_all = (rng.standard_normal((starts[-1], 3, 4)) * 3 + 1).astype(np.float64)
    w_all = rng.standard_normal(x_all.shape)
    for momentum in (0.1, None):
        full = nn.BatchNorm1d(3, momentum=momentum).double()
        sync = nn.SyncBatchNorm(3, momentum=momentum).double()
        for m in (full, sync):
            with dg.no_grad():
                m.weight.copy_(dg.tensor([0.5, 1.5, -2.0], dtype=dg.float64))
                m.bias.copy_(dg.tensor([0.1, 0.2, 0.3], dtype=dg.float64))
        xf = dg.tensor(x_all, requires_grad=True)
        out_full = full(xf)
        (out_full * dg.tensor(w_all)).sum().backward()
        mine = slice(starts[r], starts[r + 1])
        xs = dg.tensor(x_all[mine], requires_grad=True)
        out = sync(xs)
        (out * dg.tensor(w_all[mine])).sum().backward()
        what = f"momentum={momentum}"
        close(out.detach().numpy(), out_full.detach().numpy()[mine], f"{what}: output", rtol=1e-12)
        close(xs.grad.numpy(), xf.grad.numpy()[mine], f"{what}: input gradient", rtol=1e-9, atol=1e-12)
        for name in ("weight", "bias"):
            g = getattr(sync, name).grad.clone()
            dist.all_reduce(g)
            close(g.numpy(), getattr(full, name).grad.numpy(), f"{what}: {name} gradient summed over ranks",
                  rtol=1e-9, atol=1e-12)
        close(sync.running_mean.numpy(), full.running_mean.numpy(), f"{what}: running_mean", rtol=1e-12)
        close(sync.running_var.numpy(), full.running_var.numpy(), f"{what}: running_var", rtol=1e-12)
        check(int(sync.num_batches_tracked) == 1, "num_batches_tracked")
        full.eval()
        sync.eval()
        close(sync(xs).detach().numpy(), full(xf).detach().numpy()[mine], f"{what}: eval output", rtol=1e-12)
    # DDP + convert_sync_batchnorm: one SGD step equals one process on the whole batch (equal shards, mean loss)
    dg.manual_seed(5)
    plain = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 3))
    single = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 3))
    single.load_state_dict(plain.state_dict())
    ddp = nn.parallel.DistributedDataParallel(nn.SyncBatchNorm.convert_sync_batchnorm(plain))
    opt, opt_single = dg.optim.SGD(ddp.parameters(), lr=0.5), dg.optim.SGD(single.parameters(), lr=0.5)
    for step in range(3):
        x, y = make_data(50 + step, 4 * n)
        opt.zero_grad()
        opt_single.zero_grad()
        nn.CrossEntropyLoss()(ddp(dg.tensor(x[4 * r:4 * r + 4])), dg.tensor(y[4 * r:4 * r + 4])).backward()
        nn.CrossEntropyLoss()(single(dg.tensor(x)), dg.tensor(y)).backward()
        opt.step()
        opt_single.step()
    for (name, p), q in zip(ddp.module.state_dict().items(), single.state_dict().values()):
        close(p.numpy(), q.numpy(), f"DDP + SyncBatchNorm after 3 steps: {name}", rtol=1e-4, atol=1e-5)
    dist.destroy_process_group()


# ---- failures end the job instead of hanging it ----

def timeout():
    """Rank 1 never joins the all_reduce: rank 0's wait turns into a RuntimeError after 2 s."""
    dist.init_process_group(backend="mpi", timeout=datetime.timedelta(seconds=2))
    if dist.get_rank() == 1:
        time.sleep(60)
    dist.all_reduce(dg.ones(4))


def rank_raises():
    """Rank 1 raises in the middle of DDP training; rank 0 is waiting in the gradient all-reduce. The uncaught
    exception aborts the job at once; with DYNGRAD_MPI_ABORT_ON_ERROR=0 rank 0's 3 s timeout ends it instead (the
    abort test gives rank 0 a long timeout, so that a slow abort on a loaded machine cannot look like a timeout)."""
    seconds = 3 if os.environ.get("DYNGRAD_MPI_ABORT_ON_ERROR") == "0" else 60
    dist.init_process_group(backend="mpi", timeout=datetime.timedelta(seconds=seconds))
    model = nn.parallel.DistributedDataParallel(static_model())
    for step in range(3):
        if step == 1 and dist.get_rank() == 1:
            raise ValueError("rank 1 failed on purpose")
        x, y = make_data(step, 4)
        nn.CrossEntropyLoss()(model(dg.tensor(x)), dg.tensor(y)).backward()


SCENARIOS = {"collectives": collectives, "ddp": ddp_equivalence, "syncbn": syncbn, "timeout": timeout, "rank_raises": rank_raises}

if __name__ == "__main__":
    SCENARIOS[SCENARIO]()
    print(f"rank {dist.get_rank() if dist.is_initialized() else '?'} ok", flush=True)

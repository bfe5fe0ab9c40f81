"""DistributedDataParallel: one model replica per MPI rank; gradients averaged across ranks during backward.

Note [Gradient buckets]: the parameters that require grad are grouped, in reverse registration order (roughly the
order backward produces their gradients), into buckets of at most bucket_cap_mb (the first one 1 MB, so that
communication starts early), one dtype per bucket. Each bucket owns one flat numpy buffer. A parameter's
post-accumulate-grad hook copies its .grad into its slot; when a bucket's last slot is filled the bucket's
all-reduce starts as a non-blocking MPI request, so it runs while backward computes the rest. Buckets start
strictly in index order on every rank (a bucket that fills early waits for the ones before it), because MPI matches
collectives by the order they are started in.

Note [Final reduction]: the first hook of a backward (a parameter's, or a tensor hook on the forward's outputs,
so that a rank where no parameter gets a gradient still joins) queues a callback (autograd._queue_callback) that
runs when backward has run every node, before backward() returns. It fills the slots of parameters that got no
gradient in this backward with their current .grad (or zeros), starts the remaining buckets, waits for every request
(up to the group's timeout: a rank that never arrives becomes a RuntimeError), divides by the world size and writes
the averages into .grad.

Note [Unused parameters]: in a dynamic graph a branch not taken leaves some parameters without a gradient on some
ranks. Their buckets would never fill, and the ranks whose buckets did fill would wait forever in MPI. Here every
rank always reduces every bucket: whatever did not arrive by the end of backward is taken as the parameter's
current .grad or zeros (the final reduction above), so no rank can hang whatever its graph was. A "used on this
rank" flag per parameter, summed with the last bucket (the flags ride at its end), tells which parameters got a
gradient on some rank; the .grad of a parameter used on no rank is left untouched (None stays None, as on one
process).
With find_unused_parameters=False (the default) that is an error, as torch's: the next forward raises, naming the
parameters that got no gradient on this rank. find_unused_parameters=True additionally walks the autograd graph from the outputs after forward, as torch does,
and marks the parameters it does not reach as ready at once, so that their buckets start during backward instead of
after it; it costs one graph walk per step, worth it only when some parameters really go unused.
"""
import time
import weakref
import zlib
from contextlib import contextmanager

import numpy as np

from ..modules.module import Module
from ... import Tensor, from_numpy, is_grad_enabled, no_grad
from ... import autograd
from ... import distributed as dist
from ...distributed import collectives as _c

_FIRST_BUCKET_BYTES = 1024 * 1024   # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    def __init__(self, dtype):
        self.dtype = dtype
        self.indices, self.offsets, self.numels = [], [], []   # per slot: parameter index, offset, size
        self.nbytes = 0
        self.flat = None
        self.pending = 0           # slots not filled in this backward
        self.request = None

    def add(self, index, numel):
        self.offsets.append(self.offsets[-1] + self.numels[-1] if self.indices else 0)
        self.indices.append(index)
        self.numels.append(numel)
        self.nbytes += numel * self.dtype.itemsize

    def slot(self, k):
        return self.flat[self.offsets[k]:self.offsets[k] + self.numels[k]]


class _Reducer:
    """The per-step state of Note [Gradient buckets] / [Final reduction] / [Unused parameters]."""

    def __init__(self, params, names, group, bucket_cap_bytes, gradient_as_bucket_view):
        self.params, self.names, self.group = params, names, group
        self.world = group.size()
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.buckets, self.where = self._assign_buckets(bucket_cap_bytes)
        self.ready = [False] * len(params)
        self.used = np.zeros(len(params), dtype=np.bool_)   # got a gradient on this rank since the last reduction
        self.expect_hooks = False      # a forward with gradient sync prepared this backward
        self.sync = False
        self.callback_queued = False
        self.next_bucket = 0
        self.in_flight = False         # some bucket was started and not yet finished
        self.overlap = True            # False starts every bucket at the end of backward (a baseline for benchmarks)
        # statistics of the last step, for bench/distributed_scaling.py: seconds spent waiting for the all-reduces
        # after backward (communication not hidden behind it), in the whole final reduction, and in the hooks
        self.last_wait_seconds = self.last_finalize_seconds = self.last_hook_seconds = 0.0
        self.unused_last_step = []     # names of the parameters that got no gradient on this rank (torch's check)

    def _assign_buckets(self, cap):
        buckets, open_by_dtype, where = [], {}, [None] * len(self.params)
        for index in reversed(range(len(self.params))):
            p = self.params[index]
            dtype = p.detach().numpy().dtype
            bucket = open_by_dtype.get(dtype)
            if bucket is None:
                bucket = open_by_dtype[dtype] = _Bucket(dtype)
                buckets.append(bucket)
            where[index] = (bucket, len(bucket.indices))
            bucket.add(index, p.numel())
            if bucket.nbytes >= (min(_FIRST_BUCKET_BYTES, cap) if bucket is buckets[0] else cap):
                del open_by_dtype[dtype]
        for b in buckets:
            b.flat = np.zeros(sum(b.numels), dtype=b.dtype)
        # Note [Unused parameters]: the "used on this rank" flags ride at the end of the last bucket (as 0/1 in its
        # float dtype: sums of them are exact), which starts only once every parameter is ready
        last = buckets[-1]
        last.flat = np.zeros(last.flat.size + len(self.params), dtype=last.dtype)
        return buckets, where

    # ---- one step ----
    def prepare(self, sync):
        """Called by forward: the next backward reduces gradients (sync) or only accumulates them (no_sync)."""
        if self.in_flight:
            raise RuntimeError(
                "DistributedDataParallel: the previous backward started its gradient all-reduce but did not finish "
                "it (did it raise?). The ranks are out of step; the MPI job cannot continue.")
        self.expect_hooks, self.sync, self.callback_queued, self.next_bucket = True, sync, False, 0
        self.ready = [False] * len(self.params)
        for b in self.buckets:
            b.pending, b.request = len(b.indices), None

    def queue_finalize(self):
        if self.expect_hooks and self.sync and not self.callback_queued:
            self.callback_queued = True
            autograd._queue_callback(self.finalize)

    def on_grad_ready(self, index):
        """The post-accumulate-grad hook of parameter `index`."""
        if not self.expect_hooks:
            return
        self.used[index] = True
        if not self.sync:
            return
        start = time.perf_counter()
        self.queue_finalize()
        self.mark_ready(index, early=False)
        self.last_hook_seconds += time.perf_counter() - start

    def mark_ready(self, index, early):
        bucket, k = self.where[index]
        if self.ready[index]:
            if bucket.request is not None:
                raise RuntimeError(
                    f"DistributedDataParallel: parameter '{self.names[index]}' received a gradient after its bucket "
                    "was already reduced in this step (was it used by two forward calls before one backward, or "
                    "not reached by the graph walk of find_unused_parameters=True?). Call backward once per "
                    "forward.")
            self._copy_into_slot(index, bucket, k)
            return
        self.ready[index] = True
        self._copy_into_slot(index, bucket, k)
        bucket.pending -= 1
        if bucket.pending == 0 and self.overlap:
            self._start_ready_buckets()
        elif self.in_flight and not early:
            _c._mpi().Request.Testall([b.request for b in self.buckets[:self.next_bucket]])  # drives MPI progress

    def _copy_into_slot(self, index, bucket, k):
        grad = self.params[index].grad
        slot = bucket.slot(k)
        if grad is None:
            slot.fill(0)
        else:
            src = grad.detach().numpy().reshape(-1)
            if not np.shares_memory(src, slot):
                np.copyto(slot, src)

    def _start_ready_buckets(self):
        MPI = _c._mpi()
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            b = self.buckets[self.next_bucket]
            if self.next_bucket == len(self.buckets) - 1:
                b.flat[-len(self.params):] = self.used
            b.request = self.group.comm.Iallreduce(MPI.IN_PLACE, _c._message(b.flat), op=MPI.SUM)
            self.next_bucket += 1
            self.in_flight = True

    def mark_unreached(self, outputs):
        """find_unused_parameters=True: parameters the graph of `outputs` does not reach are ready now."""
        reached = _reached_leaves(outputs)
        for index, p in enumerate(self.params):
            if id(p) not in reached and not self.ready[index]:
                self.mark_ready(index, early=True)

    def finalize(self):
        """Note [Final reduction]: runs as a final callback of backward."""
        if not self.expect_hooks:
            return
        start = time.perf_counter()
        for bucket in self.buckets:
            for k, index in enumerate(bucket.indices):
                if not self.ready[index]:
                    self.ready[index] = True
                    self._copy_into_slot(index, bucket, k)
                    bucket.pending -= 1
        self._start_ready_buckets()
        waited = time.perf_counter()
        _c._wait([b.request for b in self.buckets], "DistributedDataParallel (gradient all-reduce at the end of "
                 "backward)", self.group)
        self.last_wait_seconds = time.perf_counter() - waited
        used_anywhere = self.buckets[-1].flat[-len(self.params):] > 0
        self.unused_last_step = [self.names[i] for i in range(len(self.params)) if not self.used[i]]
        self.in_flight = False
        self.expect_hooks = False
        self.used[:] = False
        with no_grad():
            for bucket in self.buckets:
                bucket.flat /= self.world
                for k, index in enumerate(bucket.indices):
                    if used_anywhere[index]:
                        self._write_grad(self.params[index], bucket.slot(k))
        self.last_finalize_seconds = time.perf_counter() - start

    def _write_grad(self, p, averaged):
        shape = tuple(p.shape)
        if self.gradient_as_bucket_view:
            grad = p.grad
            if grad is not None and np.shares_memory(grad.detach().numpy(), averaged):
                return
            p.grad = from_numpy(averaged.reshape(shape))
            return
        grad = p.grad
        if grad is None:
            p.grad = from_numpy(averaged.reshape(shape).copy())
            return
        target = grad.detach().numpy()
        if target.flags.writeable:
            np.copyto(target, averaged.reshape(shape))
        else:
            p.grad = from_numpy(averaged.reshape(shape).copy())


def _queue_finalize(reducer_ref):
    reducer = reducer_ref()
    if reducer is not None:
        reducer.queue_finalize()


def _flatten_tensors(obj, out):
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _flatten_tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _flatten_tensors(x, out)
    return out


def _reached_leaves(outputs):
    """ids of the leaves whose AccumulateGrad the graphs of `outputs` reach (an iterative walk)."""
    # seen holds the node objects, not just their ids: a C++ node's Python wrapper may be freed after use and its
    # id reused by another node's wrapper
    reached, seen, stack = set(), {}, []
    for t in _flatten_tensors(outputs, []):
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad:
            reached.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if node.name() == "AccumulateGrad":
            reached.add(id(node.variable))
            continue
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return reached


class DistributedDataParallel(Module):
    """Data parallelism over MPI ranks, as torch.nn.parallel.DistributedDataParallel: wrap the model, give each
    rank its share of every batch (utils.data.DistributedSampler), and train as usual. After each backward, every
    rank's .grad holds the gradient averaged over ranks, so identical optimizer steps keep the replicas identical.

    At construction the parameters and buffers are broadcast from rank 0 (and the ranks check that their models
    have the same parameter shapes). See Notes [Gradient buckets], [Final reduction] and [Unused parameters] at the
    top of this file for how the averaging overlaps backward and why a graph that differs between ranks cannot hang.
    broadcast_buffers=True also broadcasts the buffers (e.g. BatchNorm statistics) from rank 0 before every forward.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, init_sync=True):
        super().__init__()
        fn = "DistributedDataParallel"
        if not isinstance(module, Module):
            raise TypeError(f"{fn}: module must be a dyngrad.nn.Module, got {type(module).__name__}.")
        if device_ids is not None or output_device is not None:
            raise ValueError(f"{fn}: device_ids and output_device must be None: dyngrad runs on the CPU.")
        if dim != 0:
            raise ValueError(f"{fn}: dim must be 0 (each rank gets its own inputs; nothing is scattered), got {dim}.")
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or bucket_cap_mb <= 0:
            raise ValueError(f"{fn}: bucket_cap_mb must be a positive number of megabytes, got {bucket_cap_mb!r}.")
        group = _c._group(fn, process_group)
        params, names = [], []
        for name, p in module.named_parameters():
            if p.requires_grad:
                params.append(p)
                names.append(name)
        if not params:
            raise RuntimeError(f"{fn} is not needed when a module doesn't have any parameter that requires a "
                               "gradient.")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.process_group = group
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._check_same_model(group, module)
        if init_sync:
            self._broadcast_states([t for _, t in module.named_parameters()] +
                                   [t for _, t in module.named_buffers()])
        self.reducer = _Reducer(params, names, group, bucket_cap_mb * 1024 * 1024, gradient_as_bucket_view)
        ref = weakref.ref(self.reducer)   # the hooks must not keep the reducer (and with it the model) alive

        def make_hook(index):
            def hook(p):
                reducer = ref()
                if reducer is not None:
                    reducer.on_grad_ready(index)
            return hook
        self._hook_handles = [p.register_post_accumulate_grad_hook(make_hook(i)) for i, p in enumerate(params)]
        weakref.finalize(self, _remove_all, self._hook_handles)

    @staticmethod
    def _check_same_model(group, module):
        # a checksum of the parameters' names, shapes and dtypes, gathered with the group's timeout
        mine = [(name, tuple(p.shape), str(p.dtype)) for name, p in module.named_parameters()]
        signature = np.array([len(mine), zlib.crc32(repr(mine).encode())], dtype=np.int64)
        everyone = np.zeros((group.size(), 2), dtype=np.int64)
        dist.all_gather_into_tensor(from_numpy(everyone), from_numpy(signature))
        for rank, theirs in enumerate(everyone):
            if (theirs != signature).any():
                raise RuntimeError(
                    f"DistributedDataParallel: rank {group.rank()} and rank {rank} hold different models ("
                    f"{signature[0]} vs {theirs[0]} parameters, or other names, shapes or dtypes; this rank's are "
                    f"{mine}); every rank must build the same model.")

    def _broadcast_states(self, tensors):
        with no_grad():
            for t in tensors:
                dist.broadcast(t, src=0)

    def forward(self, *inputs, **kwargs):
        if not self.find_unused_parameters and self.reducer.unused_last_step:
            # as torch's reducer: with find_unused_parameters=False every parameter must get a gradient in every
            # step; the last step's reduction still completed (Note [Unused parameters]), the next one refuses
            names, self.reducer.unused_last_step = self.reducer.unused_last_step, []
            raise RuntimeError(
                "DistributedDataParallel: expected to have finished reduction in the prior iteration before starting "
                "a new one: on this rank the parameters " + ", ".join(f"'{n}'" for n in names) + " received no "
                "gradient in the last backward (not used in producing the loss). Pass find_unused_parameters=True "
                "to DistributedDataParallel, or make sure every forward output takes part in the loss.")
        if self.require_forward_param_sync and self.broadcast_buffers:
            buffers = [b for _, b in self.module.named_buffers()]
            if buffers and self.process_group.size() > 1:
                self._broadcast_states(buffers)
        prepare = is_grad_enabled()
        if prepare:
            self.reducer.prepare(sync=self.require_backward_grad_sync)
        out = self.module(*inputs, **kwargs)
        if prepare and self.require_backward_grad_sync:
            if self.find_unused_parameters:
                self.reducer.mark_unreached(out)
            # Note [Final reduction]: also queued from the outputs, for a rank where no parameter gets a gradient
            ref = weakref.ref(self.reducer)
            for t in _flatten_tensors(out, []):
                if t.grad_fn is not None:
                    t.register_hook(lambda grad: _queue_finalize(ref))
        return out

    @contextmanager
    def no_sync(self):
        """Inside, forward/backward only accumulate gradients locally; the first forward/backward after it averages
        the accumulated gradients (torch's gradient accumulation recipe)."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def extra_repr(self):
        return ""


def _remove_all(handles):
    for h in handles:
        h.remove()

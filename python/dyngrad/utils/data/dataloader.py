"""DataLoader (torch.utils.data.DataLoader): batches from a dataset, in the main process or in worker processes.

Note [DataLoader workers]: with num_workers > 0 the main process keeps the sampler and hands out batches of
indices, round robin, to worker processes (multiprocessing, the platform's default start method unless
multiprocessing_context says otherwise), each holding a copy of the dataset. A worker fetches and collates its
batch, pickles it (tensors pickle on both engines) and sends it back on one shared result queue. At most
prefetch_factor * num_workers batches are in flight; results that arrive early are kept until their turn, so the
batches come out in the sampler's order, exactly those of num_workers=0. Worker w is seeded with base_seed + w
(Python's random, numpy's global generator, the engine's generator), base_seed being drawn afresh every epoch.
An IterableDataset is iterated by every worker on its own copy (shard it with get_worker_info()); a worker whose
stream ends is not asked again. persistent_workers keeps the workers (and their dataset copies) between epochs;
otherwise they are started on iter() and stopped when the epoch ends or the iterator is dropped.
"""
import atexit
import itertools
import multiprocessing
import numbers
import os
import pickle
import queue
import time

import numpy as np

from ... import empty, int64

from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import SequentialSampler, RandomSampler, BatchSampler, _generator_arg, _global_seed
from .worker import (ExceptionWrapper, _IterableDatasetStopIteration, _ResumeIteration, make_fetcher,
                     worker_loop)

_JOIN_SECONDS = 5.0
_python_exiting = False


def _set_python_exiting():
    """At interpreter exit multiprocessing terminates the (daemonic) workers itself; iterators collected after
    this must not talk to them (a queue's feeder thread cannot start during shutdown)."""
    global _python_exiting
    _python_exiting = True


atexit.register(_set_python_exiting)


class _InfiniteConstantSampler:
    """The 'sampler' of an IterableDataset: None forever (the dataset decides the samples)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterate over a dataset in batches (torch's arguments; see Note [DataLoader workers] for num_workers > 0).

    generator: a dyngrad Generator (as torch's) or a numpy Generator, for shuffling and the workers' base seed;
    `seed=` is a dyngrad shorthand for generator=np.random.default_rng(seed). Without either, both draw from the
    engine's global generator (dyngrad.manual_seed). pin_memory and pin_memory_device are accepted and do nothing
    (CPU only).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True, seed=None):
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing. Let "
                             "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("DataLoader: prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if generator is not None and seed is not None:
            raise ValueError("DataLoader: give generator or seed, not both")
        if seed is not None:
            generator = np.random.default_rng(seed)
        generator = _generator_arg(generator, "DataLoader")

        self.dataset = dataset
        self.num_workers, self.prefetch_factor = int(num_workers), prefetch_factor
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.timeout, self.worker_init_fn = timeout, worker_init_fn
        if isinstance(multiprocessing_context, str):
            methods = multiprocessing.get_all_start_methods()
            if multiprocessing_context not in methods:
                raise ValueError(f"DataLoader: multiprocessing_context option should specify a valid start method in "
                                 f"{methods!r}, but got multiprocessing_context={multiprocessing_context!r}")
            multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
        elif multiprocessing_context is not None and not hasattr(multiprocessing_context, "Process"):
            raise TypeError(f"DataLoader: multiprocessing_context option should be a valid context object or a "
                            f"string specifying the start method, but got {multiprocessing_context!r}")
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers, self.in_order = persistent_workers, in_order
        self._iterable = isinstance(dataset, IterableDataset)

        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size!r}")

        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))

        self.batch_size, self.drop_last = batch_size, bool(drop_last)
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self, first_iter=False)
            return self._iterator
        return _MultiProcessIter(self)

    def _worker_base_seed(self):
        """The seed of this epoch's workers: from the loader's generator when it has one (a dyngrad Generator: one
        draw from it, as torch; a numpy one: a child seed of its seed sequence, which leaves its stream alone), else
        from the engine's generator."""
        if self.generator is not None and not isinstance(self.generator, np.random.Generator):
            return int(empty((), dtype=int64).random_(0, 2 ** 62, generator=self.generator).item())
        if self.generator is not None:
            child = self.generator.bit_generator.seed_seq.spawn(1)[0]
            return int(child.generate_state(1, np.uint64)[0] >> np.uint64(2))
        return _global_seed()


class _BaseIter:
    def __init__(self, loader):
        self._dataset, self._iterable = loader.dataset, loader._iterable
        self._auto_collation, self._collate_fn = loader._auto_collation, loader.collate_fn
        self._drop_last, self._index_sampler = loader.drop_last, loader._index_sampler
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _next_index(self):
        return next(self._sampler_iter)

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = make_fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                     self._drop_last)

    def __next__(self):
        index = self._next_index()
        data = self._fetcher.fetch(index)
        self._num_yielded += 1
        return data


class _MultiProcessIter(_BaseIter):
    """See Note [DataLoader workers]."""

    def __init__(self, loader):
        super().__init__(loader)
        self._num_workers, self._prefetch_factor = loader.num_workers, loader.prefetch_factor
        self._timeout, self._persistent = loader.timeout, loader.persistent_workers
        context = loader.multiprocessing_context or multiprocessing.get_context()
        base_seed = loader._worker_base_seed()
        self._data_queue = context.Queue()
        self._index_queues, self._workers = [], []
        self._shutdown = self._stuck = False
        for worker_id in range(self._num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            worker = context.Process(
                target=worker_loop,
                args=(self._iterable, self._dataset, index_queue, self._data_queue, self._auto_collation,
                      self._collate_fn, self._drop_last, base_seed + worker_id, loader.worker_init_fn, worker_id,
                      self._num_workers, os.getpid()),
                daemon=True)
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._send_idx = 0                 # next task number to hand out
        self._rcvd_idx = 0                 # next task number to yield
        self._task_info = {}               # task number -> (worker id,) while pending, (worker id, data) if early
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:                 # persistent workers: restart their streams, drop last epoch's leftovers
            for q in self._index_queues:
                q.put(_ResumeIteration())
            remaining = self._num_workers
            while remaining > 0:
                idx, _ = self._get_data()
                if isinstance(idx, _ResumeIteration):
                    remaining -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._workers_status[worker_id]:
                break
        else:                              # every worker's stream has ended
            return
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_data(self):
        """The next (task number, data) from any worker; raises if a worker died or the timeout passed."""
        if self._timeout > 0:
            try:
                idx, payload = self._data_queue.get(timeout=self._timeout)
            except queue.Empty:
                self._stuck = True     # the workers are busy in the dataset: stop them at once, do not wait
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
        else:
            while True:
                try:
                    idx, payload = self._data_queue.get(timeout=_JOIN_SECONDS)
                    break
                except queue.Empty:
                    dead = [w.pid for w, alive in zip(self._workers, self._workers_status)
                            if alive and not w.is_alive()]
                    if dead:
                        self._shutdown_workers()
                        raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                                           "unexpectedly") from None
        return idx, (pickle.loads(payload) if isinstance(payload, bytes) else payload)

    def __next__(self):
        try:
            return self._next_data()
        except BaseException:
            if not self._persistent:
                self._shutdown_workers()
            raise

    def _next_data(self):
        while True:
            # skip tasks given to workers whose stream has since ended (their answer is a stop marker, dropped)
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._workers_status[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:        # it arrived earlier
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process(data)
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
            else:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process(data)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        self._num_yielded += 1
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        # one deadline for all the workers (a join of 5 s each made timeout=2 raise after 7 s with one worker,
        # 12 s with two); none after a timeout, whose workers are stuck in the dataset
        deadline = time.monotonic() + (0.0 if self._stuck else _JOIN_SECONDS)
        for w in self._workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
            if w.is_alive():
                w.terminate()
                w.join()
        for q in self._index_queues + [self._data_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        if _python_exiting or _python_exiting is None:
            return
        try:
            self._shutdown_workers()
        except Exception:
            pass

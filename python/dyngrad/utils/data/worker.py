"""DataLoader worker processes: the loop each worker runs, get_worker_info(), and errors carried back to the main
process. See Note [DataLoader workers] in dataloader.py."""
import io
import os
import pickle
import queue
import random
import sys
import traceback

import numpy as np

from ... import Tensor, manual_seed
from .collate import default_collate

_worker_info = None
_POLL_SECONDS = 1.0          # how often a waiting worker checks that its parent is still alive


class WorkerInfo:
    """What a worker knows about itself (get_worker_info()): id, num_workers, seed, dataset (its own copy)."""

    _frozen = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self._keys = tuple(kwargs)
        self._frozen = True

    def __setattr__(self, key, value):
        if self._frozen:
            raise RuntimeError(f"WorkerInfo: cannot assign attribute {key!r}; WorkerInfo is read-only")
        super().__setattr__(key, value)

    def __repr__(self):
        return f"WorkerInfo({', '.join(f'{k}={getattr(self, k)!r}' for k in self._keys)})"


def get_worker_info():
    """In a DataLoader worker process: its WorkerInfo (id, num_workers, seed, dataset). In the main process: None.
    An IterableDataset uses it in __iter__ to give each worker its own share of the stream."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process (a traceback cannot be pickled, its text can)."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:         # KeyError repr()s its message; keep the text readable
            msg = KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:                     # an exception type whose constructor takes other arguments
            raise RuntimeError(msg) from None
        raise exception


class KeyErrorMessage(str):
    def __repr__(self):
        return self


class _IterableDatasetStopIteration:
    """A worker's stream ended (IterableDataset): the main process stops asking it."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _ResumeIteration:
    """A new epoch for persistent workers: restart the dataset's iterator; the worker echoes it back."""


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.fast = auto_collation and collate_fn is default_collate and callable(getattr(dataset, "get_batch", None))

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self.fast:                         # TensorDataset: one index op per tensor, same result as collating
            return self.dataset.get_batch(index)
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:                       # index is a list of batch_size placeholders
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    return (_IterableFetcher if iterable else _MapFetcher)(dataset, auto_collation, collate_fn, drop_last)


def seed_worker(seed):
    """Seed every generator a dataset may use: Python's random, numpy's global one and the engine's."""
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    manual_seed(seed)


class _BatchPickler(pickle.Pickler):
    """Refuses a tensor with autograd history: the history cannot cross into the main process, where the tensor
    would arrive as a leaf and its gradient stop silently (torch refuses too; a leaf that requires grad crosses,
    as in torch). A batch collated from such leaves is stacked, so it has history and is refused, as torch's."""

    def reducer_override(self, obj):
        if isinstance(obj, Tensor) and obj.requires_grad and obj.grad_fn is not None:
            raise RuntimeError(f"DataLoader: a worker returned a tensor of shape {tuple(obj.shape)} that requires "
                               f"grad and has a grad_fn ({obj.grad_fn.name()}): autograd history cannot cross from a "
                               "worker process to the main one. Return tensors that do not require grad (detach() "
                               "them, or build them under no_grad()) and set requires_grad in the main process.")
        return NotImplemented


def _dumps(data, worker_id):
    """Pickle a batch here, in the worker, so that a batch that cannot be pickled becomes an error the main process
    raises (pickling in the queue's feeder thread would drop it silently and leave the main process waiting)."""
    try:
        buffer = io.BytesIO()
        _BatchPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(data)
        return buffer.getvalue()
    except Exception:
        wrapped = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id} (sending a batch "
                                   "to the main process)")
        return pickle.dumps(wrapped, protocol=pickle.HIGHEST_PROTOCOL)


def worker_loop(iterable, dataset, index_queue, data_queue, auto_collation, collate_fn, drop_last, seed,
                init_fn, worker_id, num_workers, parent_pid):
    """A worker process: fetch the batches whose indices arrive on index_queue and put (task index, batch) on
    data_queue, until None arrives (or the parent process is gone)."""
    global _worker_info
    try:
        seed_worker(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
        stream_ended = False
        while True:
            try:
                task = index_queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if os.getppid() != parent_pid:    # the main process died: do not linger
                    break
                continue
            if task is None:
                break
            if isinstance(task, _ResumeIteration):
                data_queue.put((task, None))
                stream_ended = False
                if init_error is None:
                    try:
                        fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                    except Exception:
                        init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
                continue
            idx, index = task
            if init_error is not None:
                data, init_error = init_error, None
            elif stream_ended:
                data = _IterableDatasetStopIteration(worker_id)
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        raise
                    data = _IterableDatasetStopIteration(worker_id)
                    stream_ended = True
                except Exception:
                    data = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
            data_queue.put((idx, _dumps(data, worker_id)))
            del data
    except KeyboardInterrupt:
        pass
    # do not wait at exit for the main process to read what is still buffered (it may have stopped reading)
    data_queue.cancel_join_thread()
    data_queue.close()

"""Datasets (torch.utils.data.dataset): map-style Dataset, IterableDataset, TensorDataset, StackDataset,
ConcatDataset, ChainDataset, Subset, and random_split."""
import bisect
import math
import numbers

import numpy as np

from ... import default_generator, int64, tensor
from ..._user_frame import warn
from .sampler import _generator_arg, _randperm


class Dataset:
    """A map-style dataset: __getitem__(i) for i in range(len(dataset)); subclass it for your data. Optionally
    __getitems__(indices) returns a list of samples at once (the DataLoader then calls it once per batch)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __class_getitem__(cls, item):       # Dataset[int] in annotations and base classes, as torch's Generic
        return cls

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: __iter__ yields samples. With num_workers > 0 every worker iterates its own copy,
    so shard the stream in __iter__ with get_worker_info() (id, num_workers) or each sample comes once per worker."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); all tensors share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        n = tensors[0].shape[0]
        for t in tensors:
            if t.shape[0] != n:
                raise ValueError(f"TensorDataset: size mismatch between tensors: first dims "
                                 f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def get_batch(self, indices):
        """A whole batch with one index op per tensor: what default_collate would make of the samples (a list of
        stacked tensors), without building the samples (the DataLoader's fast path)."""
        index = tensor(np.asarray(indices, dtype=np.int64), dtype=int64)
        return [t.index_select(0, index) for t in self.tensors]


class StackDataset(Dataset):
    """Sample i gathers sample i of each dataset: a tuple (positional datasets) or a dict (keyword datasets)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: supported either tuple-like (positional) or dict-like (keyword) input, "
                             "but both were given")
        datasets = list(args) or list(kwargs.values())
        if not datasets:
            raise ValueError("StackDataset: at least one dataset should be passed")
        self._length = len(datasets[0])
        if any(len(d) != self._length for d in datasets):
            raise ValueError("StackDataset: size mismatch between datasets")
        self.datasets = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after another: index i falls in the first dataset whose cumulative size exceeds it."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("ConcatDataset: absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (a ConcatDataset of streams)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=default_generator, *, seed=None):
    """Split into non-overlapping Subsets of the given lengths, or of fractions summing to 1 (floor(n * f) each,
    the remainder handed out one by one from the first). The permutation is randperm's with `generator` (a dyngrad
    Generator; by default the engine's global one, so manual_seed() fixes it), or numpy's with a numpy Generator or
    with `seed=` (a dyngrad shorthand for numpy.random.default_rng(seed))."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warn(f"random_split: length of split at index {i} is 0. This might result in an empty "
                     "dataset.", UserWarning)
        lengths = counts
    for length in lengths:
        if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints or fractions summing to 1, got "
                             f"{lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length of the "
                         f"input dataset ({n})")
    generator = _generator_arg(generator, "random_split")
    if seed is not None:
        if generator is not None and generator is not default_generator:
            raise ValueError("random_split: give generator or seed, not both")
        generator = np.random.default_rng(seed)
    perm = _randperm(n, generator)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out

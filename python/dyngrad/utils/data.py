"""Datasets and the DataLoader: batches of tensors from indexable data, optionally shuffled with a seed."""
import numbers

import numpy as np

from .. import Tensor, tensor, stack, from_numpy, int64


class Dataset:
    """Anything with __getitem__(i) and __len__(); subclass it for your data."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")


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
        """A whole batch with one index op per tensor (DataLoader uses this instead of collating samples)."""
        index = tensor(np.asarray(indices, dtype=np.int64), dtype=int64)
        return tuple(t.index_select(0, index) for t in self.tensors)


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, seed=0):
    """Split into non-overlapping Subsets of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        counts = [int(np.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length of the "
                         f"dataset ({n})")
    perm = np.random.default_rng(seed).permutation(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out


def default_collate(samples):
    """Stack a list of samples into a batch: tensors are stacked, numpy arrays and numbers become tensors, and
    tuples / lists / dicts are collated field by field."""
    first = samples[0]
    if isinstance(first, Tensor):
        return stack(list(samples))
    if isinstance(first, np.ndarray):
        return from_numpy(np.ascontiguousarray(np.stack(samples)))
    if isinstance(first, np.generic):
        return tensor(np.array(samples))
    if isinstance(first, (bool, numbers.Number)):
        return tensor(list(samples))
    if isinstance(first, str):
        return list(samples)
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(s) != len(first) for s in samples):
            raise RuntimeError("default_collate: each element in the batch should be of equal size")
        fields = [default_collate(list(f)) for f in zip(*samples)]
        return tuple(fields) if isinstance(first, tuple) else fields
    raise TypeError(f"default_collate: batches must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(first).__name__}")


class DataLoader:
    """Iterate over a dataset in batches.

    shuffle=True draws a new permutation every epoch from a numpy generator seeded with `seed` (or pass
    `generator=np.random.default_rng(...)`), so runs are reproducible. A TensorDataset is batched with one
    index_select per tensor; other datasets are indexed sample by sample and merged by collate_fn.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None, seed=None,
                 generator=None):
        if batch_size is None or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size should be a positive integer, got {batch_size}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.collate_fn = collate_fn
        self.generator = generator if generator is not None else np.random.default_rng(seed)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = self.generator.permutation(n) if self.shuffle else np.arange(n)
        fast = self.collate_fn is None and hasattr(self.dataset, "get_batch")
        collate = self.collate_fn or default_collate
        for start in range(0, n, self.batch_size):
            indices = order[start:start + self.batch_size]
            if len(indices) < self.batch_size and self.drop_last:
                return
            if fast:
                yield self.dataset.get_batch(indices)
            else:
                yield collate([self.dataset[int(i)] for i in indices])

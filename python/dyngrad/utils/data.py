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


class Sampler:
    """Iterates over dataset indices; DataLoader(sampler=...) batches them in that order."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class DistributedSampler(Sampler):
    """Each rank's share of a dataset, as torch.utils.data.DistributedSampler: with `num_replicas` ranks, rank r
    takes every num_replicas-th index of one (shuffled) order, starting at r, so the ranks' shares are disjoint and
    of equal length. The order is a permutation drawn from `seed + epoch` (call set_epoch(epoch) before each epoch:
    without it every epoch has the same order). drop_last=False pads with indices from the start so the length
    divides evenly; drop_last=True drops the tail instead. num_replicas and rank default to the default process
    group's world size and rank (dyngrad.distributed). The permutation is numpy's, so it differs from torch's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from ..distributed import get_rank, get_world_size, is_initialized
            if not is_initialized():
                raise RuntimeError("DistributedSampler: num_replicas and rank default to the process group's, but "
                                   "dyngrad.distributed.init_process_group() was not called; call it or pass both.")
            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        for name, value in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"DistributedSampler: {name} must be an int, got {type(value).__name__}.")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}.")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last, self.epoch = bool(shuffle), int(seed), bool(drop_last), 0
        n = len(dataset)
        if self.drop_last and n % self.num_replicas:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        order = np.random.default_rng(self.seed + self.epoch).permutation(n) if self.shuffle else np.arange(n)
        if self.total_size > n:       # pad, repeating the order as often as needed (tiny datasets)
            order = np.concatenate([order] * (-(-self.total_size // max(n, 1))))[:self.total_size]
        else:
            order = order[:self.total_size]
        return iter(order[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch decides the shuffle: call it with the epoch number before iterating each epoch."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise TypeError(f"DistributedSampler.set_epoch: epoch must be an int, got {type(epoch).__name__}.")
        self.epoch = int(epoch)


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
    `generator=np.random.default_rng(...)`), so runs are reproducible. sampler=... (e.g. a DistributedSampler)
    gives the order of indices instead. A TensorDataset is batched with one index_select per tensor; other datasets
    are indexed sample by sample and merged by collate_fn.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, drop_last=False, collate_fn=None,
                 seed=None, generator=None):
        if batch_size is None or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size should be a positive integer, got {batch_size}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.sampler = sampler
        self.collate_fn = collate_fn
        self.generator = generator if generator is not None else np.random.default_rng(seed)

    def __len__(self):
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        if self.sampler is not None:
            order = np.fromiter(iter(self.sampler), dtype=np.int64)
        else:
            n = len(self.dataset)
            order = self.generator.permutation(n) if self.shuffle else np.arange(n)
        n = len(order)
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

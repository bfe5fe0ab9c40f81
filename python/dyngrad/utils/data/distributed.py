"""DistributedSampler: each rank's share of a dataset (torch.utils.data.distributed)."""
import numbers

import numpy as np

from ...distributed import get_rank, get_world_size, is_initialized

from .sampler import Sampler


class DistributedSampler(Sampler):
    """Each rank's share of a dataset, as torch.utils.data.DistributedSampler: with `num_replicas` ranks, rank r
    takes every num_replicas-th index of one (shuffled) order, starting at r, so the ranks' shares are disjoint and
    of equal length. The order is a permutation drawn from `seed + epoch` (call set_epoch(epoch) before each epoch:
    without it every epoch has the same order). drop_last=False pads with indices from the start so the length
    divides evenly; drop_last=True drops the tail instead. num_replicas and rank default to the default process
    group's world size and rank (dyngrad.distributed). The permutation is numpy's, so it differs from torch's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
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

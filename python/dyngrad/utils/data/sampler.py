"""Samplers (torch.utils.data.sampler): the order in which a DataLoader reads a map-style dataset.

Randomness: `generator` is a dyngrad Generator, as in torch (dyngrad.Generator().manual_seed(s): the orders come
from randperm/randint/multinomial with generator=, so the same seed gives the same order on the same engine), or
a numpy Generator (dyngrad's older form, still accepted: the orders are numpy's). Without one, RandomSampler seeds a
fresh Generator from the engine's global generator at each iteration, as torch does, and the other samplers draw
from the global generator, so dyngrad.manual_seed(s) makes shuffling reproducible. The numbers are the engine's,
not torch's.
"""
import itertools
import numbers

import numpy as np

from ... import Generator, float64, multinomial, randint, randperm, tensor

# how many indices RandomSampler(replacement=True) draws at a time (torch's 32: the same stream under a Generator)
_DRAW_CHUNK = 32


def _global_seed():
    """A seed drawn from the engine's global generator (the one manual_seed() sets)."""
    return int(randint(0, 2 ** 62, (1,)).item())


def _generator_arg(generator, owner):
    """None, a dyngrad Generator of this engine or a numpy Generator; anything else is a TypeError."""
    if generator is None or isinstance(generator, (Generator, np.random.Generator)):
        return generator
    raise TypeError(f"{owner}: generator must be a dyngrad.Generator (or a numpy.random.Generator), got "
                    f"{type(generator).__name__}")


def _randperm(n, generator):
    """0..n-1 in a random order, as a list: from a numpy Generator, a dyngrad Generator, or the global one (None)."""
    if isinstance(generator, np.random.Generator):
        return generator.permutation(n).tolist()
    return randperm(n, generator=generator).tolist()


def _randint(n, size, generator):
    """`size` indices drawn uniformly from 0..n-1, as a list: from a numpy Generator, a dyngrad Generator or the
    global one (None)."""
    if isinstance(generator, np.random.Generator):
        return generator.integers(0, n, size=size).tolist()
    return randint(0, n, (size,), generator=generator).tolist()


def _check_bool(owner, name, value, error=TypeError):
    if not isinstance(value, bool):
        raise error(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")


def _check_positive_int(owner, name, value, error=ValueError):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise error(f"{owner}: {name} should be a positive integer value, but got {name}={value!r}")


class Sampler:
    """Iterates over dataset indices (or over lists of indices, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __class_getitem__(cls, item):       # Sampler[int] in annotations and base classes, as torch's Generic
        return cls

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order: a permutation (repeated, each time a new one, when num_samples > len(data_source)), or
    num_samples indices drawn uniformly with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        _check_bool("RandomSampler", "replacement", replacement)
        self.data_source, self.replacement, self._num_samples, self.generator = (
            data_source, replacement, num_samples, _generator_arg(generator, "RandomSampler"))
        _check_positive_int("RandomSampler", "num_samples", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator
        if generator is None:           # torch: a fresh generator seeded from the global one, every iteration
            generator = Generator().manual_seed(_global_seed())
        if self.replacement:
            # Lazily, _DRAW_CHUNK at a time, as torch: RandomSampler(ds, replacement=True, num_samples=10**10) is
            # the idiom of an endless DataLoader, whose indices would not fit in memory all at once.
            full, rest = divmod(self.num_samples, _DRAW_CHUNK)
            for size in itertools.chain(itertools.repeat(_DRAW_CHUNK, full), (rest,)):
                yield from _randint(n, size, generator)
            return
        for _ in range(self.num_samples // n):
            yield from _randperm(n, generator)
        yield from _randperm(n, generator)[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, _generator_arg(generator, "SubsetRandomSampler")

    def __iter__(self):
        for i in _randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices in [0, len(weights)) drawn with probability proportional to weights (with or without
    replacement)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int("WeightedRandomSampler", "num_samples", num_samples)
        _check_bool("WeightedRandomSampler", "replacement", replacement, ValueError)   # torch's type
        w = np.asarray(weights.tolist() if hasattr(weights, "tolist") else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise RuntimeError("WeightedRandomSampler: weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > len(w):
            raise RuntimeError(f"WeightedRandomSampler: cannot draw {num_samples} samples without replacement from "
                               f"{len(w)} indices")
        self.weights = tensor(w, dtype=float64)
        self._w = w
        self.num_samples, self.replacement = num_samples, replacement
        self.generator = _generator_arg(generator, "WeightedRandomSampler")

    def __iter__(self):
        rng = self.generator
        if not isinstance(rng, np.random.Generator):        # a dyngrad Generator or the global one, as torch
            yield from multinomial(self.weights, self.num_samples, self.replacement, generator=rng).tolist()
            return
        if self.replacement:
            yield from rng.choice(len(self._w), size=self.num_samples, p=self._w / self._w.sum()).tolist()
            return
        # without replacement: the num_samples smallest of E_i / w_i (E_i ~ Exp(1)) are a weighted draw without
        # replacement; zero weights give inf and come last, as torch.multinomial uses them only when it must
        with np.errstate(divide="ignore"):
            keys = rng.exponential(size=len(self._w)) / self._w
        yield from np.argsort(keys, kind="stable")[:self.num_samples].tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from `sampler` (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

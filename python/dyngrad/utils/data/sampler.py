"""Samplers (torch.utils.data.sampler): the order in which a DataLoader reads a map-style dataset.

Randomness: `generator` is a numpy Generator (dyngrad has no torch.Generator); without one, each iteration seeds a
fresh numpy generator from the engine's global generator, so dyngrad.manual_seed(s) makes shuffling reproducible,
as torch.manual_seed does for torch. The orders themselves are numpy's, not torch's.
"""
import numbers

import numpy as np


def _global_seed():
    """A seed drawn from the engine's global generator (the one manual_seed() sets)."""
    from ... import randint
    return int(randint(0, 2 ** 62, (1,)).item())


def _numpy_generator(generator, seed=None):
    if generator is not None:
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"generator must be a numpy.random.Generator (np.random.default_rng(seed)), got "
                            f"{type(generator).__name__}")
        return generator
    return np.random.default_rng(_global_seed() if seed is None else seed)


def _check_bool(owner, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")


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
        self.data_source, self.replacement, self._num_samples, self.generator = (data_source, replacement,
                                                                                 num_samples, generator)
        _check_positive_int("RandomSampler", "num_samples", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = _numpy_generator(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, size=self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[:self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in _numpy_generator(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices in [0, len(weights)) drawn with probability proportional to weights (with or without
    replacement)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int("WeightedRandomSampler", "num_samples", num_samples)
        _check_bool("WeightedRandomSampler", "replacement", replacement)
        w = np.asarray(weights.tolist() if hasattr(weights, "tolist") else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise RuntimeError("WeightedRandomSampler: weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > len(w):
            raise RuntimeError(f"WeightedRandomSampler: cannot draw {num_samples} samples without replacement from "
                               f"{len(w)} indices")
        from ... import tensor, float64
        self.weights = tensor(w, dtype=float64)
        self._w = w
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self):
        rng = _numpy_generator(self.generator)
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

"""Reference engine: the random number generator and the random tensors. Mirrors csrc/dyngrad/random.cpp (named rng.py
so that dyngrad.reference.random is the shared torch.random module, python/dyngrad/random.py).

Each engine has its own generator: runs are reproducible within one engine (same seed, same numbers), not equal
between engines (docs/design.md).
"""
import numpy as np

from .tensor import check_allocation, make_tensor

DEFAULT_SEED = 67280421310721        # each process starts from the same seed, as torch does
_state = {"seed": DEFAULT_SEED, "generator": np.random.Generator(np.random.PCG64(DEFAULT_SEED))}


def manual_seed(seed):
    """Reseed this engine's generator."""
    _state["seed"] = int(seed)
    _state["generator"] = np.random.Generator(np.random.PCG64(int(seed)))


def initial_seed():
    return _state["seed"]


def get_rng_state():
    """The generator's whole state (a copy), for utils.checkpoint's preserve_rng_state."""
    import copy
    return (_state["seed"], copy.deepcopy(_state["generator"].bit_generator.state))


def set_rng_state(state):
    seed, bits = state
    _state["seed"] = seed
    generator = np.random.Generator(np.random.PCG64())
    generator.bit_generator.state = bits
    _state["generator"] = generator


def generator():
    return _state["generator"]


def rand(shape, dtype):                 # U[0, 1)
    check_allocation(tuple(shape), dtype.np)
    if dtype.is_floating_point and dtype.itemsize == 2:     # on the dtype's grid k / 2**digits, as random.cpp
        scale = np.float32(2048.0 if dtype.name == "float16" else 256.0)
        return make_tensor(dtype.cast(np.floor(generator().random(tuple(shape), dtype=np.float32) * scale) / scale))
    return make_tensor(generator().random(tuple(shape), dtype=dtype.np))


def randn(shape, dtype):                # N(0, 1)
    check_allocation(tuple(shape), dtype.np)
    if dtype.is_floating_point and dtype.itemsize == 2:     # drawn in float32, rounded (as random.cpp)
        return make_tensor(dtype.cast(generator().standard_normal(tuple(shape), dtype=np.float32)))
    return make_tensor(generator().standard_normal(tuple(shape), dtype=dtype.np))


def randint(low, high, shape, dtype):   # [low, high)
    if not high > low:
        raise RuntimeError(f"randint: expected low < high, got low={low} and high={high}.")
    check_allocation(tuple(shape), dtype.np)
    return make_tensor(generator().integers(low, high, tuple(shape), dtype=np.int64).astype(dtype.np))


def bernoulli_mask(shape, p, dtype):    # 1 with probability p, else 0
    check_allocation(tuple(shape), dtype.np)
    return make_tensor(dtype.cast(generator().random(tuple(shape)) < p))


def randperm(n):
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}.")
    check_allocation((n,), np.int64)
    return make_tensor(generator().permutation(n).astype(np.int64))

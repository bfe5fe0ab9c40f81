"""torch.Generator over each engine's one core generator: Generator, default_generator, get_rng_state and
set_rng_state, and the `generator=` argument of every random op (`drawing(generator, op)`).

Note [Generators as swapped core states]
Each engine's core has ONE generator (xoshiro256**: csrc/dyngrad/random.cpp, and the same algorithm in
reference/rng.py, Note [One random stream for both engines]) whose whole state is readable and settable: `_C._get_rng_state()` / `_C._set_rng_state()`.
A Generator keeps its own copy of such a state. A draw with generator=g installs g's state in the core, draws
from the core as usual, copies the advanced state back into g and reinstalls the global state it found. So:
  - g's numbers are exactly those the core gives from g's state: Generator().manual_seed(s) draws what
    manual_seed(s) followed by the same global draws would (as torch's CPU generators do);
  - drawing with g leaves the global stream where it was, and the global draws leave g where it was;
  - every random op needs no generator parameter in the core: the shared layer wraps its core calls.
Not thread-safe: between the swap-in and the swap-out another Python thread drawing from the global generator
(or with another Generator) would draw from g's state and leave its own in the core. Share a Generator, or draw
globally, from one thread at a time (torch's generators take a lock; ours are as safe as the engine's global one).
`default_generator` is the core's generator itself: its methods read and write the core's state directly, so
default_generator.manual_seed(s) is manual_seed(s).

State format (get_state(): a uint8 tensor, the same on both engines): 40 bytes, five little-endian uint64, the
four words of xoshiro256** and then the seed. A state taken on one engine continues the same stream on the other.
set_state() refuses (RuntimeError) a state of another size, or four zero words (a generator stuck at zero).
"""
import operator
import os

import numpy as np

from .. import _C
from . import bridge
from .args import Tensor, type_name
from .device import check_device, device

DEFAULT_SEED = 67280421310721       # a new torch.Generator's initial_seed()
_MASK64 = 2 ** 64 - 1
STATE_BYTES = 40


def _pack(state):
    """The core's state as bytes (the format of the module docstring)."""
    return np.array([int(w) for w in state], dtype="<u8").tobytes()


def _unpack(data):
    return tuple(int(w) for w in np.frombuffer(data, dtype="<u8"))


def _seed_of(state):
    return int(state[4])


def _seed_arg(seed):
    """torch's rule: an int (anything with __index__ but a bool) in [-2**63, 2**64); negatives wrap to uint64."""
    if isinstance(seed, (bool, float)) or isinstance(seed, Tensor) and seed.dtype.is_floating_point:
        raise RuntimeError(f"manual_seed: expected an int as seed, got {type_name(seed)}.")
    try:
        value = operator.index(seed)
    except TypeError:
        raise RuntimeError(f"manual_seed: expected an int as seed, got {type_name(seed)}.") from None
    if not -2 ** 63 <= value <= _MASK64:
        raise ValueError(f"manual_seed: seed {value} is out of range: expected an int in [-2**63, 2**64 - 1].")
    return value & _MASK64


def _seeded_state(seed):
    """The core state manual_seed(seed) makes, without touching the global generator."""
    saved = _C._get_rng_state()
    try:
        _C.manual_seed(seed)
        return _C._get_rng_state()
    finally:
        _C._set_rng_state(saved)


def _entropy_seed():
    return int.from_bytes(os.urandom(8), "little") % 2 ** 63


class Generator:
    """A random number generator of its own: Generator(device='cpu'), then manual_seed(seed) (returns self),
    seed(), initial_seed(), get_state() / set_state(state) (a uint8 tensor), clone_state(). Pass it as
    `generator=` to a random op (Note [Generators as swapped core states])."""

    def __init__(self, device="cpu"):
        check_device(device, "Generator")
        self._state = _seeded_state(DEFAULT_SEED)     # None: the engine's global generator (default_generator)

    @property
    def device(self):
        return device("cpu")

    def _current(self):
        return _C._get_rng_state() if self._state is None else self._state

    def manual_seed(self, seed):
        """Seeds this generator (an int in [-2**63, 2**64); a negative one wraps to uint64); returns it."""
        value = _seed_arg(seed)
        if self._state is None:
            _C.manual_seed(value)
        else:
            self._state = _seeded_state(value)
        return self

    def seed(self):
        """Seeds this generator from the operating system's entropy; returns the seed."""
        s = _entropy_seed()
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return _seed_of(self._current())

    def get_state(self):
        """The whole state as a uint8 tensor (the same format on both engines: see the module docstring)."""
        return bridge.share(np.frombuffer(_pack(self._current()), dtype=np.uint8).copy())

    def set_state(self, new_state):
        """Restores a state get_state() returned (on either engine); returns this generator."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"set_state: expected a uint8 tensor (a ByteTensor), but got {type_name(new_state)}")
        if new_state.dtype is not _C.uint8:
            raise TypeError(f"set_state: the RNG state must be a uint8 tensor (a ByteTensor), got "
                            f"{new_state.dtype.name}")
        if new_state.numel() != STATE_BYTES:
            raise RuntimeError(f"set_state: expected a state of {STATE_BYTES} bytes (xoshiro256**'s words and seed), but "
                               f"got {new_state.numel()} bytes")
        data = np.asarray(bridge.view(new_state.detach()), order="C").reshape(-1).tobytes()
        if not any(data[:32]):       # xoshiro256** from all-zero words draws only zeros
            raise RuntimeError("set_state: invalid generator state: the four xoshiro256** words are all zero")
        state = _unpack(data)
        if self._state is None:
            _C._set_rng_state(state)
        else:
            self._state = state
        return self

    def clone_state(self):
        """A new Generator with a copy of this one's state."""
        g = Generator()
        g._state = _unpack(_pack(self._current()))
        return g

    def __reduce__(self):      # pickle / deepcopy: a Generator with the same state (torch pickles its generators)
        return (_rebuild, (type(self), _pack(self._current())))


def _rebuild(cls, data):
    g = cls.__new__(cls)
    g._state = _unpack(data)
    return g


default_generator = Generator.__new__(Generator)
default_generator._state = None


def generator_arg(generator, op):
    """None or this engine's Generator, else a TypeError naming the op."""
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{op}: generator must be a Generator of this engine, got {type_name(generator)}")
    return generator


class _Swap:
    """Installs a Generator's state in the core for the block, then takes the advanced state back and reinstalls
    the global one (Note [Generators as swapped core states])."""
    __slots__ = ("generator", "saved")

    def __init__(self, generator):
        self.generator = generator

    def __enter__(self):
        self.saved = _C._get_rng_state()
        _C._set_rng_state(self.generator._state)
        return self

    def __exit__(self, *exc):
        self.generator._state = _C._get_rng_state()
        _C._set_rng_state(self.saved)
        return False


class _Global:
    """The global generator: nothing to swap."""
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_GLOBAL = _Global()


def drawing(generator, op):
    """`with drawing(generator, op):` the core draws from `generator` inside the block (None or default_generator:
    the global generator, at no cost); anything but a Generator of this engine is a TypeError naming the op."""
    if generator is None:
        return _GLOBAL
    g = generator_arg(generator, op)
    return _GLOBAL if g._state is None else _Swap(g)


# ----- torch.manual_seed and friends: the global generator ---------------------------------------------------

def manual_seed(seed):
    """Seeds this engine's global generator and returns it (default_generator); reproducible run to run within an
    engine, not the same numbers as the other engine or torch."""
    return default_generator.manual_seed(int(seed))       # torch's int(seed): 2.7, "3" and True are accepted


def initial_seed():
    """The seed the global generator was last seeded with."""
    return default_generator.initial_seed()


def seed():
    """Seeds the global generator from the operating system's entropy and returns the seed (torch.seed)."""
    return default_generator.seed()


def get_rng_state():
    """The global generator's state as a uint8 tensor (default_generator.get_state())."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restores the global generator's state from a get_rng_state() tensor."""
    default_generator.set_state(new_state)

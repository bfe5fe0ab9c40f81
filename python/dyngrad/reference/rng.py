"""Reference engine: the random number generator and the random tensors. Mirrors csrc/dyngrad/random.cpp (named rng.py
so that dyngrad.reference.random is the shared torch.random module, python/dyngrad/random.py).

Note [One random stream for both engines]
Both engines run the same generator, xoshiro256** seeded by splitmix64 (torch's default seed until manual_seed),
and turn its 64-bit words into numbers the same way, element by element in the same order: doubles from the top
53 bits, float32 by rounding them, integers by rejection, Bernoulli masks by comparing, normals by Box-Muller. So
a script that seeds (dyngrad.manual_seed) and makes the same calls draws the same random numbers on either engine:
uniforms, integers, masks and permutations bit for bit, normals to the last bit of log/cos (numpy's against the C
library's), and "same script, same answers" holds with random numbers too, to the engines' usual float
tolerance (tests/test_random_stream.py). The cost is here: short runs of words come from a Python loop (~2 us a
word), long ones in lanes (Note [Xoshiro in lanes]); measured on the 2-core Xeon at load 10.7: 10**6 uniforms
0.38 s (numpy's own generator: ~0.01 s, the C++ engine ~0.002 s), nn.Linear(784, 1024)'s initialisation 0.47 s.
"""
import math

import numpy as np

from . import dtypes as _dt
from .tensor import cannot_allocate, check_allocation, make_tensor

_MASK = (1 << 64) - 1
DEFAULT_SEED = 67280421310721        # each process starts from the same seed, as torch does (and random.cpp)


def _splitmix64_words(seed):
    words, z = [], seed & _MASK
    for _ in range(4):
        z = (z + 0x9E3779B97F4A7C15) & _MASK
        x = z
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
        words.append(x ^ (x >> 31))
    return words


_state = {"words": _splitmix64_words(DEFAULT_SEED), "seed": DEFAULT_SEED}


def _step(words):
    """One xoshiro256** state transition (random.cpp's Xoshiro::next without its output)."""
    s0, s1, s2, s3 = words
    t = (s1 << 17) & _MASK
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    return [s0, s1, s2, ((s3 << 45) | (s3 >> 19)) & _MASK]


def _next_words(n):
    """The next n outputs of xoshiro256** (random.cpp's Xoshiro::next), as a uint64 array; long runs go through
    _lanes (Note [Xoshiro in lanes])."""
    if n >= _LANES_FROM:
        return _lanes(n)
    s0, s1, s2, s3 = _state["words"]
    out = [0] * n
    mask = _MASK
    for i in range(n):
        x = (s1 * 5) & mask
        out[i] = ((((x << 7) | (x >> 57)) & mask) * 9) & mask
        t = (s1 << 17) & mask
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & mask
    _state["words"] = [s0, s1, s2, s3]
    return np.array(out, dtype=np.uint64)


# Note [Xoshiro in lanes]
# A Python loop makes a word in ~2 us. xoshiro256**'s transition is linear over GF(2): the state after k steps is
# T^k times the state, T a 256 x 256 bit matrix. So n words are drawn as `lanes` runs of m = ceil(n / lanes)
# consecutive words: lane j starts at the state T^(j*m) s (one bit-matrix product per lane from the last), and all
# lanes then step together as numpy uint64 arrays, m steps of a dozen vectorised operations. Read lane-major, the
# words are exactly the sequential stream (tests/test_random_stream.py compares with the C++ engine). Lanes are
# 2**k words long (about sqrt(n)), so the jumps T^(2**k) are squarings, computed once and cached.
_LANES_FROM = 4096
_BITS = None            # T, as a float32 0/1 matrix (products are exact: sums of at most 256 ones)


def _as_bits(words):
    return np.unpackbits(np.array(words, dtype="<u8").view(np.uint8), bitorder="little").astype(np.float32)


def _as_words(bits):
    return [int(w) for w in np.packbits(bits.astype(np.uint8), bitorder="little").view("<u8")]


def _transition():
    global _BITS
    if _BITS is None:
        columns = []
        for b in range(256):
            unit = [0, 0, 0, 0]
            unit[b // 64] = 1 << (b % 64)
            columns.append(_as_bits(_step(unit)))
        _BITS = np.stack(columns, axis=1).astype(np.float32)
    return _BITS


def _jump(k):
    """T^(2^k), cached: T squared k times (float32 holds the 0/1 sums of at most 256 terms exactly)."""
    if not _JUMPS:
        _JUMPS.append(_transition())
    while len(_JUMPS) <= k:
        _JUMPS.append((_JUMPS[-1] @ _JUMPS[-1]) % 2)
    return _JUMPS[k]


_JUMPS = []


def _lanes(n):
    k = max(6, (math.isqrt(n) - 1).bit_length())           # lanes of m = 2**k words, about sqrt(n) of them
    m = 1 << k
    lanes = -(-n // m)
    out = np.empty((m, lanes), dtype=np.uint64)             # first: a request too big fails here, not after the jumps
    jump = _jump(k)
    starts, bits = [], _as_bits(_state["words"])
    for _ in range(lanes):
        starts.append(_as_words(bits))
        bits = (jump @ bits) % 2
    s = np.array(starts, dtype=np.uint64).T.copy()          # 4 x lanes
    s0, s1, s2, s3 = s
    five, nine = np.uint64(5), np.uint64(9)
    u7, u57, u17, u45, u19 = (np.uint64(k) for k in (7, 57, 17, 45, 19))
    q, r = divmod(n, m)
    final = None
    for i in range(m):
        if i == r and q < lanes:
            final = [int(s0[q]), int(s1[q]), int(s2[q]), int(s3[q])]
        x = s1 * five
        out[i] = ((x << u7) | (x >> u57)) * nine
        t = s1 << u17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = (s3 << u45) | (s3 >> u19)
    if final is None:                                       # n = lanes * m: the last lane's state after m steps
        final = [int(s0[-1]), int(s1[-1]), int(s2[-1]), int(s3[-1])]
    _state["words"] = final
    return out.T.reshape(-1)[:n]


def _uniforms(n):
    """n doubles in [0, 1): the top 53 bits of each word, as Xoshiro::uniform."""
    return (_next_words(n) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def manual_seed(seed):
    """Reseed this engine's generator."""
    _state["words"] = _splitmix64_words(int(seed))
    _state["seed"] = int(seed) & _MASK


def initial_seed():
    return _state["seed"]


def get_rng_state():
    """The generator's whole state, the four xoshiro256** words then the seed (the C++ engine's _get_rng_state)."""
    return tuple(_state["words"]) + (_state["seed"],)


def set_rng_state(state):
    *words, seed = (int(w) for w in state)
    _state["words"], _state["seed"] = words, seed


def _is_half(dtype):
    return dtype.is_floating_point and dtype.itemsize == 2


def _count(shape):
    return int(np.prod(tuple(shape), dtype=np.int64))


def rand(shape, dtype):                 # U[0, 1)
    shape = tuple(shape)
    check_allocation(shape, dtype.np)
    if _is_half(dtype):
        # Note [Half types] of random.cpp: drawn in float32 and cut down to the dtype's grid k / 2**digits
        scale = np.float32(2048.0 if dtype.name == "float16" else 256.0)
        drawn = _rand_float32(shape)
        return make_tensor(dtype.cast(np.floor(drawn * scale) / scale))
    if dtype is _dt.float32:
        return make_tensor(_rand_float32(shape))
    return make_tensor(dtype.cast(_uniforms(_count(shape)).reshape(shape)))


def _rand_float32(shape):
    values = _uniforms(_count(shape)).astype(np.float32).reshape(shape)
    values[values >= np.float32(1.0)] = np.float32(0.99999994)      # rounding up to 1.0f: U[0, 1) (random.cpp)
    return values


def _normals(n):
    """n draws of N(0, 1), as random.cpp's normal_: Box-Muller on pairs of uniforms, r cos(th) then r sin(th) of
    each pair (a last odd draw's sine is dropped). numpy's log/sqrt/cos/sin may differ from the C library's
    random.cpp calls in the last bit, so normals agree between the engines to rounding (uniforms and integers
    exactly)."""
    u = _uniforms(2 * ((n + 1) // 2)).reshape(-1, 2)
    u1 = np.maximum(u[:, 0], 1e-300)
    r, th = np.sqrt(-2.0 * np.log(u1)), 6.283185307179586 * u[:, 1]
    return np.stack([r * np.cos(th), r * np.sin(th)], axis=1).reshape(-1)[:n]


def randn(shape, dtype):                # N(0, 1)
    shape = tuple(shape)
    check_allocation(shape, dtype.np)
    values = _normals(_count(shape)).reshape(shape)
    if _is_half(dtype):                 # drawn in float32, rounded (as random.cpp)
        return make_tensor(dtype.cast(values.astype(np.float32)))
    return make_tensor(dtype.cast(values))


def _offsets(spans):
    """For each span (a count of values, in order), an offset in [0, span) drawn by rejection as random.cpp's
    randint: words at or above the span's limit are skipped, so there is no modulo bias. Words are drawn in
    batches of what is still needed, so the stream ends exactly after the words used."""
    out, words, k = [], [], 0
    for span in spans:
        limit = _MASK - _MASK % span
        while True:
            if k == len(words):
                words, k = _next_words(len(spans) - len(out)).tolist(), 0
            w = words[k]
            k += 1
            if w < limit:
                out.append(w % span)
                break
    return out


def _integers(low, high, n):
    """n integers in [low, high) (random.cpp's randint): exact in int64, a span up to 2**64 - 1."""
    span = (high - low) & _MASK
    out = []
    for offset in _offsets([span] * n):
        value = (low + offset) & _MASK
        out.append(value - (1 << 64) if value >> 63 else value)
    return out


def randint(low, high, shape, dtype):   # [low, high)
    if not high > low:
        raise RuntimeError(f"randint: expected low < high, got low={low} and high={high}.")
    shape = tuple(shape)
    check_allocation(shape, dtype.np)
    return make_tensor(dtype.cast(np.array(_integers(low, high, _count(shape)), dtype=np.int64).reshape(shape)))


def bernoulli_mask(shape, p, dtype):    # 1 with probability p, else 0
    shape = tuple(shape)
    check_allocation(shape, dtype.np)
    return make_tensor(dtype.cast(_uniforms(_count(shape)).reshape(shape) < p))


def randperm(n):
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}.")
    check_allocation((n,), np.int64)
    try:
        perm = list(range(n))           # Python ints: far more than the tensor's 8 bytes each
    except MemoryError:
        raise cannot_allocate((n,), np.int64) from None
    steps = range(n - 1, 0, -1)         # Fisher-Yates, one randint(0, i + 1) a step (random.cpp's randperm)
    for i, j in zip(steps, _offsets([i + 1 for i in steps])):
        perm[i], perm[j] = perm[j], perm[i]
    return make_tensor(np.array(perm, dtype=np.int64))

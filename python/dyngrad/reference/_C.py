"""Reference engine: its narrow surface, the twin of the C++ extension module dyngrad._C (csrc/bindings/*.cpp).

Both engines expose exactly these names with the same parameter names (tests/test_parity.py checks it): the
tensor core, the ops of ops.def and their composites with one fixed signature each, and the autograd machinery.
Everything a PyTorch user calls (keywords, defaults, numbers as operands, methods, operators, repr) is written
once above this surface, in python/dyngrad/_api/, and serves both engines; see "Shared code" in docs/design.md.
"""
from .dtypes import DType as dtype, float32, float64, int64, bool_ as bool  # noqa: F401
from .dtypes import uint8, int8, int16, int32, float16, bfloat16, complex64, complex128  # noqa: F401
from .dtypes import get_default_dtype as _get_default_dtype, set_default_dtype as _set_default_dtype  # noqa: F401
from .tensor import Tensor, empty, full, from_numpy, copy_from_numpy  # noqa: F401
from .node import Node, _set_saved_tensors_hooks  # noqa: F401
from .grad_mode import is_grad_enabled, _set_enabled as _set_grad_enabled  # noqa: F401
from .primitives import *  # noqa: F401,F403  every primitive of ops.def (generated: scripts/gen_ops.py)
from .primitives import OP_NAMES as _OP_NAMES, SAVED_FIELDS as _SAVED_FIELDS
from .ops_math import (  # noqa: F401
    scalar_like, scalar_operand, result_type, compare, logical_and, logical_or, logical_xor, logical_not, isnan,
    isfinite, var, std, argmax, argmin,
)
from .ops_shape import (  # noqa: F401
    contiguous, view, transpose, mT, squeeze, unsqueeze, flatten, select, stack, split, split_size, chunk,
)
from .ops_index import masked_fill  # noqa: F401
from .ops_sort import sort, argsort, topk, cummax, cummin  # noqa: F401
from .fft_kernels import _fft_c2c, _fft_r2c, _fft_c2r  # noqa: F401
from .inplace import inplace_input, assign_inplace, copy_, fill_, zero_  # noqa: F401
from .ops_nn import conv2d, max_pool2d, avg_pool2d  # noqa: F401
from .rng import rand, randn, randint, bernoulli_mask, randperm, manual_seed, initial_seed  # noqa: F401
from .rng import get_rng_state as _get_rng_state, set_rng_state as _set_rng_state  # noqa: F401
from .engine import run_backward as _run_backward, queue_callback as _queue_callback  # noqa: F401
from .function_node import record_function as _record_function  # noqa: F401
from .debug import (  # noqa: F401
    set_record_call_sites as _set_record_call_sites, is_recording_call_sites as _is_recording_call_sites,
    set_anomaly_mode as _set_anomaly_enabled, is_anomaly_enabled as _is_anomaly_enabled,
    set_call_site_skip_dir as _set_call_site_skip_dir, set_track_nodes as _set_track_nodes,
    tracked_node_count as _tracked_node_count, bridging_nodes as _bridging_nodes,
    set_backward_observer as _set_backward_observer,
)
from . import tensor as _tensor
from . import forward_ad as _forward_ad
from . import forward_derivatives as _forward_derivatives  # noqa: F401  (fills forward_ad's table)
from .forward_ad import (  # noqa: F401
    enter_level as _enter_dual_level, exit_level as _exit_dual_level, current_level as _current_dual_level,
    open_levels as _open_dual_levels,
)


def _get_tangent(t, level):
    """t's tangent at `level` (None unless the level is open): csrc/bindings/autograd_bind.cpp."""
    return _forward_ad.tangent_of(t, level)


def _set_tangent(t, level, tangent):
    _forward_ad.set_tangent(t, level, tangent)


def op_names():
    """The primitive ops of primitives.py (csrc/dyngrad/ops.def), in order."""
    return list(_OP_NAMES)


def op_saved_fields():
    """{op: names of the fields its node saves} (primitives.py; csrc/dyngrad/saved.h in C++)."""
    return {name: tuple(fields) for name, fields in _SAVED_FIELDS.items()}


_threads = [1]


def get_num_threads():
    """Threads used by large kernels (numpy decides here; the number is kept for parity with the C++ engine)."""
    return _threads[0]


def set_num_threads(n):
    _threads[0] = int(n)


def _register_helpers(helpers):
    """Python helpers of the shared layer that the core returns (Size for shapes), as in the C++ engine."""
    _tensor.HELPERS.update(helpers)


def _fast_path_names():
    """The reference engine speeds nothing up: every entry runs its Python definition (Note [Fast paths])."""
    return []


def _install_fast_paths(fallbacks, docs):
    return {}


def _set_autocast_active(active):
    """Nothing to switch: every call already runs its Python definition (Note [Fast paths under autocast])."""


def _set_meta_class(cls):
    """Nothing to register: the reference engine has no fast paths to keep meta tensors out of."""


def _set_capturing(active):
    """Nothing to switch: every call already reaches a _C function (Note [Fast paths while capturing])."""


class _ReplayProgram:
    """The twin of csrc/bindings/capture_bind.cpp's loop (Note [Replaying steps in C++]): the steps of a recorded
    variant run from `start`, tensor results stored in their slots; returns None when all ran, else (index, result)
    of the first step whose result Python must look at, or (index,) for a step Python runs itself (out == -2).
    Its slots are the Python list itself (Note [Slots in C++] keeps C++ values only in the extension)."""

    def __init__(self, tensor_type):
        self.tensor_type = tensor_type
        self.steps = []

    def add(self, fn, slots, consts, out, name, expected=None):
        if len(slots) != len(consts) or (len(slots) > 16 and out != -2):
            raise ValueError(f"_ReplayProgram.add: expected as many slots as constants, at most 16, got {len(slots)} "
                             f"and {len(consts)}.")
        if out < -4:
            raise ValueError(f"_ReplayProgram.add: out is a slot, -1, -2, -3 (None) or -4 (a value), got {out}.")
        self.steps.append((fn, tuple(slots), tuple(consts), out, expected))

    def set_exported(self, exported):
        pass

    def materialize(self, slots):
        pass

    def __len__(self):
        return len(self.steps)

    def run(self, slots, start):
        n_slots = len(slots)
        for i in range(start, len(self.steps)):
            fn, where, consts, out, expected = self.steps[i]
            for slot in where:
                if slot >= n_slots:
                    raise IndexError(f"_ReplayProgram.run: slot {slot} of step {i} is beyond the {n_slots} slots.")
            if out == -2:
                return (i,)
            result = fn(*[slots[s] if s >= 0 else c for s, c in zip(where, consts)])
            if 0 <= out < n_slots and isinstance(result, self.tensor_type):
                slots[out] = result
                continue
            if out == -3 and result is None:          # Note [Results compared in the loop]
                continue
            if out == -4 and type(result) is type(expected) and result == expected:
                continue
            return i, result
        return None

"""The hook by which vmap sees every public call made while it runs (Note [Batching at the public API]).

install() passes each public function, nn.functional function, method and operator through the one wrapper of
dispatch.py (Note [One dispatch wrapper]), which costs one test of a module flag while no vmap is running; inside
vmap it hands the call to the dispatcher that _api/ops/vmap.py registers (its batching rules, randomness checks and the loop fallback).

Note [Batching at the public API]: torch batches at the level of its dispatcher, below every composite. dyngrad's
C++ composites (ops_*.cpp) call the C++ primitives directly, where Python cannot reach, and a BatchedTensor cannot
be passed into the C++ core at all. So the batching rules sit one layer up, at the public names of _api/table.py:
a primitive's rule is the rule of its public function (sin, matmul, sum, reshape, ...), and the composites that
matter get a rule of their own (linear, conv2d, cross_entropy, layer_norm, pooling, dropout, ...), written over the
engine's own ops on the physical (batched) tensors. The same Python rules serve both engines, because both are
installed from this package. Autograd and forward AD need no rules: the rules run ordinary ops on the physical
tensors, so the graph and the tangents are those of the batched computation (Note [Transforms inside vmap] in
_api/ops/vmap.py).
"""
import threading



class _State(threading.local):
    """Per thread (a vmap in one thread does not see another thread's calls): active, a vmap is running and its
    dispatcher wants the calls (False while a rule itself runs, so the ops a rule calls on physical tensors go
    straight to their functions); levels, the open vmap levels (_api/ops/vmap.py). dispatch(name, fn, args,
    kwargs) is the class's, shared by every thread."""
    dispatch = None

    def __init__(self):
        self.active = False
        self.levels = []


STATE = _State()


def register(dispatch):
    """Sets the dispatcher (for every thread)."""
    _State.dispatch = staticmethod(dispatch)
METHODS = {}              # Tensor method name -> its Python definition (behind a C++ fast path, if it has one)

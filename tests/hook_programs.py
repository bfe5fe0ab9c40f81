"""Random hook programs (issue 11): hooks that register, remove and retain while backward runs.

A program is data, so that hypothesis can shrink it (tests/test_properties.py) and the hostile driver can number
it (tests/hostile_driver.py):

    Program(chain=("mul2", "addx"), hooks=(Hook("tensor", 2, (("add", 1),), 1.0),
                                           Hook("tensor", 0, (("remove", 1),), 3.0)), initial=(0,), passes=2)

The graph is a chain from one float64 leaf: t0 = x, t_i = op_i(t_{i-1}) (an op may use x again), loss = t_n.sum().
A chain fixes the order in which backward reaches the hooks in every engine (t_n's node first, x's AccumulateGrad
last), so what a hook added or removed during backward must do is decided by torch's rules alone (Note [Hooks
that change hooks] in csrc/dyngrad/engine.h), and torch can be the oracle.

Hook k is attached to ("tensor", i): t_i.register_hook(...), or ("node", i): t_i.grad_fn.register_prehook(...)
(for i = 0, x's AccumulateGrad). When called it logs (pass, k), performs its actions in order, and returns its
gradient(s) times `scale` (None when scale is 1):
    ("add", j)     register hook j (another handle if it is registered already)
    ("remove", j)  remove every handle of hook j (j == k: the one-shot-hook pattern)
    ("retain", i)  t_i.retain_grad()
Hostile actions (only with hostile=True: crash hunting in the driver, never compared with torch):
    ("gc",)        gc.collect() (the cycle collector drops hooks of garbage)
    ("bad", kind)  return a gradient of the wrong dtype or shape, a non-tensor, or a tuple of the wrong length
    ("backward",)  call backward() on the graph being backpropagated (refused), or on a fresh one
    ("grad", i)    assign or clear t_i.grad
    ("detach", i)  t_i.detach_() while its node runs
    ("drop", i)    forget the program's reference to t_i
The program runs `passes` backward passes (retain_graph=True but the last), so hooks added during one pass
run in the next. With pack="ops" the chain is built inside saved_tensors_hooks whose pack hook itself runs ops
that save (issue 23: they fired the pack hook again, RecursionError; torch runs pack hooks with grad mode off).
"""
import contextlib
import gc
import importlib
import random
from collections import namedtuple

Hook = namedtuple("Hook", "kind target actions scale")
Program = namedtuple("Program", "chain hooks initial passes pack", defaults=(None,))
PACK_KINDS = (None, "ops")

CHAIN_OPS = ("mul2", "mul3", "neg", "addx", "square", "sin")
BAD_KINDS = ("double", "long", "bool", "shape", "int", "tuple_len", "not_tuple")
HOSTILE_ACTIONS = ("gc", "bad", "backward", "grad", "detach", "drop")


def apply_op(op, t, x):
    if op == "mul2":
        return t * 2
    if op == "mul3":
        return t * 3
    if op == "neg":
        return -t
    if op == "addx":
        return t + x
    if op == "square":
        return t * t
    return t.sin()


def random_program(rng, hostile=False, max_chain=4, max_hooks=6):
    """A random Program from a random.Random (the driver's generator; test_properties uses hypothesis)."""
    n = rng.randint(1, max_chain)
    chain = tuple(rng.choice(CHAIN_OPS) for _ in range(n))
    nhooks = rng.randint(1, max_hooks)
    hooks = []
    for _ in range(nhooks):
        kind = rng.choice(("tensor", "tensor", "node"))
        target = rng.randint(0, n)
        actions = []
        for _ in range(rng.randint(0, 3)):
            roll = rng.random()
            if hostile and roll < 0.25:
                what = rng.choice(HOSTILE_ACTIONS)
                if what == "bad":
                    actions.append(("bad", rng.choice(BAD_KINDS)))
                elif what in ("grad", "detach", "drop"):
                    actions.append((what, rng.randint(0, n)))
                else:
                    actions.append((what,))
            elif roll < 0.55:
                actions.append(("add", rng.randrange(nhooks)))
            elif roll < 0.85:
                actions.append(("remove", rng.randrange(nhooks)))
            else:
                actions.append(("retain", rng.randint(0, n)))
        hooks.append(Hook(kind, target, tuple(actions), rng.choice((1.0, 1.0, 2.0, -1.0))))
    initial = tuple(sorted(rng.sample(range(nhooks), rng.randint(1, nhooks))))
    return Program(chain, tuple(hooks), initial, rng.randint(1, 3), rng.choice(PACK_KINDS))


def pack_running_ops(t):
    """A pack hook that runs ops that save (each would record a node and pack again if grad mode were on)."""
    (t * t).sin().sum() + t.exp().mean()
    return t


def run_program(m, prog, hostile=False, reraise=False):
    """Runs `prog` on engine module m (dyngrad, dyngrad.reference or torch). Returns (log, grads, error): the
    (pass, hook) calls in order, the .grad of every t_i after the last pass (None where there is none), and the
    type name of the exception that stopped the program (None if it ran to the end; with reraise=True it
    propagates instead, for the hostile driver to classify)."""
    log, handles = [], {k: [] for k in range(len(prog.hooks))}
    x = m.tensor([0.5, -1.25, 2.0], dtype=m.float64, requires_grad=True)
    ts = [x]
    if prog.pack == "ops":
        hooks = importlib.import_module(m.__name__ + ".autograd.graph").saved_tensors_hooks(pack_running_ops,
                                                                                              lambda t: t)
    with hooks if prog.pack == "ops" else contextlib.nullcontext():
        for op in prog.chain:
            ts.append(apply_op(op, ts[-1], x))
    loss = ts[-1].sum()
    current = [0]

    def node_of(i):
        t = ts[i]
        if t is None:
            return None
        if i == 0:
            return ts[1].grad_fn.next_functions[0][0] if ts[1] is not None and ts[1].grad_fn is not None else None
        return t.grad_fn

    def register(j):
        spec = prog.hooks[j]
        fn = make_hook(j, spec)
        if spec.kind == "tensor":
            t = ts[spec.target]
            if t is not None and t.requires_grad:
                handles[j].append(t.register_hook(fn))
        else:
            node = node_of(spec.target)
            if node is not None:
                handles[j].append(node.register_prehook(fn))

    def act(action, g):
        what = action[0]
        if what == "add":
            register(action[1])
        elif what == "remove":
            for h in handles[action[1]]:
                h.remove()
            handles[action[1]] = []
        elif what == "retain":
            t = ts[action[1]]
            if t is not None and t.requires_grad:
                t.retain_grad()
        elif not hostile:
            raise ValueError(f"hostile action {action} in a compared program")
        elif what == "gc":
            gc.collect()
        elif what == "backward":
            loss.backward(retain_graph=True) if current[0] % 2 else (x * 2).sum().backward()
        elif what == "grad":
            t = ts[action[1]]
            if t is not None:
                t.grad = None if current[0] % 2 else m.zeros(3, dtype=m.float64).expand(3)
        elif what == "detach":
            t = ts[action[1]]
            if t is not None and t.grad_fn is not None:
                t.detach_()
        elif what == "drop":
            ts[action[1]] = None
        return None

    def bad(kind, g, as_tuple):
        if kind == "double":
            r = g.float() if g.dtype == m.float64 else g.double()
        elif kind == "long":
            r = g.long()
        elif kind == "bool":
            r = g.bool()
        elif kind == "shape":
            r = g[:1]
        elif kind == "int":
            r = 3
        elif kind == "tuple_len":
            return (g, g)
        else:
            return g if as_tuple else (g,)
        return (r,) if as_tuple else r

    def make_hook(k, spec):
        def tensor_hook(g):
            log.append((current[0], k))
            for action in spec.actions:
                if action[0] == "bad":
                    return bad(action[1], g, False)
                act(action, g)
            return None if spec.scale == 1.0 else g * spec.scale

        def node_hook(grads):
            log.append((current[0], k))
            for action in spec.actions:
                if action[0] == "bad":
                    return bad(action[1], grads[0], True)
                act(action, grads)
            if spec.scale == 1.0:
                return None
            return tuple(None if g is None else g * spec.scale for g in grads)

        return tensor_hook if spec.kind == "tensor" else node_hook

    error = None
    try:
        for j in prog.initial:
            register(j)
        for p in range(prog.passes):
            current[0] = p
            loss.backward(retain_graph=p < prog.passes - 1)
    except Exception as exc:  # noqa: BLE001  the outcome compared between engines
        if reraise:
            raise
        error = type(exc).__name__
    grads = [None if t is None or (t.grad_fn is not None and not t.retains_grad) or t.grad is None
             else t.grad.detach().numpy().tolist() for t in ts]
    return log, grads, error

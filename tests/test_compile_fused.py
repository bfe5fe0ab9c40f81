"""Fused groups of steps in static replay (Note [Fused steps] in csrc/bindings/replay_fuse.cpp), on both engines:
an in-place update recorded as its general path (mul, add, assign_inplace) runs as one pass into the tensor, as
eager mode's fast path does. Every result is compared with eager mode's, bitwise; the reference engine has no fused
groups (its replay runs every step) and gives the same results. Groups whose intermediate the program keeps or reads
twice are not made; a value guard that misses after a group ran gets the skipped results made for its catch-up."""
import numpy as np
import pytest

from helpers import assert_bitwise_equal as assert_same


def natives(compiled):
    return [v.native() for group in compiled._program.groups.values() for v in group if v.native() is not None]


def fused(compiled):
    """(groups, runs) over the compiled function's programs; (0, 0) on the reference engine."""
    ns = [n for n in natives(compiled) if hasattr(n, "fused_groups")]
    return sum(n.fused_groups for n in ns), sum(n.fused_runs for n in ns)


def has_fusion(dg):
    return hasattr(dg._C, "_set_replay_fusion")


def tensors(dg, rng, shapes, dtype=np.float32, requires_grad=False):
    return [dg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=requires_grad) for s in shapes]


def twins(dg, seed, shapes, dtype=np.float32, requires_grad=False):
    """Two identical sets of tensors: one for the compiled program, one for eager mode."""
    return (tensors(dg, np.random.default_rng(seed), shapes, dtype, requires_grad),
            tensors(dg, np.random.default_rng(seed), shapes, dtype, requires_grad))


def sgd_program(dg, params, lr):
    F = dg.nn.functional

    def step(x, y):
        w1, b1, w2, b2 = params
        loss = F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), y)
        loss.backward()
        with dg.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-lr)   # scaled: mul, add, assign_inplace
                p.mul_(0.999)               # binary: mul, assign_inplace
                p.grad = None
        return loss.detach()
    return step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_step_with_fused_updates_matches_eager(dg, dtype):
    shapes = [(32, 16), (32,), (5, 32), (5,)]
    pc, pe = twins(dg, 1, shapes, dtype, requires_grad=True)
    compiled = dg.compile(sgd_program(dg, pc, 0.05), mode="reduce-overhead")
    eager = sgd_program(dg, pe, 0.05)
    rng = np.random.default_rng(2)
    for _ in range(6):
        x = rng.standard_normal((64, 16)).astype(dtype)
        y = rng.integers(0, 5, 64)
        assert_same(compiled(dg.tensor(x), dg.tensor(y)), eager(dg.tensor(x), dg.tensor(y)))
        for p, q in zip(pc, pe):
            assert_same(p, q)
            assert p._version == q._version
    if has_fusion(dg):
        groups, runs = fused(compiled)
        # two per parameter after the backward, and each linear's bias add into its product before it (Note
        # [Results into a dead operand]); the second's result (64 x 5) is below the size that computes in place
        assert groups == 2 * len(shapes) + 2
        assert runs == (groups - 1) * 5    # every replay (the first call records)


def test_fusion_switch(dg):
    if not has_fusion(dg):
        pytest.skip("the reference engine has no fused groups")
    shapes = [(16, 8), (16,), (3, 16), (3,)]
    pc, pe = twins(dg, 3, shapes, requires_grad=True)
    was = dg._C._set_replay_fusion(False)
    try:
        compiled = dg.compile(sgd_program(dg, pc, 0.1), mode="reduce-overhead")
        eager = sgd_program(dg, pe, 0.1)
        rng = np.random.default_rng(4)
        for _ in range(4):
            x, y = rng.standard_normal((4, 8)).astype(np.float32), rng.integers(0, 3, 4)
            assert_same(compiled(dg.tensor(x), dg.tensor(y)), eager(dg.tensor(x), dg.tensor(y)))
        assert fused(compiled) == (0, 0)
    finally:
        dg._C._set_replay_fusion(was)
    for p, q in zip(pc, pe):
        assert_same(p, q)


def test_kept_intermediate_is_not_fused(dg):
    """`u = g * -lr` returned to the caller: the mul stays a step of its own (its result is an output); only the
    in-place add into w (add, assign_inplace) is a group. A result of the core's add that the program keeps and
    returns is never skipped either."""
    (wc, gc), (we, ge) = twins(dg, 5, [(64,), (64,)])

    def program(w, g):
        def step(lr):
            with dg.no_grad():
                u = g * (-lr)
                w.add_(u)
                a = dg._C.add(w, g)                 # the core's add, written back and returned
                dg._C.assign_inplace(w, a, "add_")
            return u, a
        return step
    compiled = dg.compile(program(wc, gc), mode="reduce-overhead")
    eager = program(we, ge)
    for lr in (0.5, 0.5, 0.5, 0.5):
        for x, y in zip(compiled(lr), eager(lr)):
            assert_same(x, y)
        assert_same(wc, we)
    if has_fusion(dg):
        assert fused(compiled) == (1, 3)   # only w.add_(u); the kept u and the returned a are no group's


def test_intermediate_used_twice_is_not_fused(dg):
    """The product added into two tensors (read twice) is made once and kept; each add into a tensor is a group.
    The core's add whose result is also multiplied afterwards is no group."""
    (wc, vc, gc), (we, ve, ge) = twins(dg, 6, [(32,), (32,), (32,)])

    def program(w, v, g):
        def step():
            with dg.no_grad():
                u = g * -0.25
                w.add_(u)
                v.add_(u)
                a = dg._C.add(w, v)
                dg._C.assign_inplace(w, a, "add_")
                b = a * 2.0
            return b
        return step
    compiled = dg.compile(program(wc, vc, gc), mode="reduce-overhead")
    eager = program(we, ve, ge)
    for _ in range(4):
        assert_same(compiled(), eager())
        assert_same(wc, we)
        assert_same(vc, ve)
    if has_fusion(dg):
        assert fused(compiled) == (2, 6)


def test_graph_recording_updates_are_not_fused(dg):
    """Under grad mode, an in-place update of a tensor with history records its graph: the group declines at each
    replay and the steps run as recorded (same grad_fn, same gradients)."""
    (xc, bc), (xe, be) = twins(dg, 7, [(16,), (16,)], requires_grad=True)

    def program(x, b):
        def step(s):
            y = x * s
            y.add_(b, alpha=2.0)
            y.mul_(0.5)
            return y
        return step
    compiled = dg.compile(program(xc, bc), mode="reduce-overhead")
    eager = program(xe, be)
    for s in (1.5, 1.5, 1.5, 1.5):
        yc, ye = compiled(s), eager(s)
        assert_same(yc, ye)
        assert yc.grad_fn.name() == ye.grad_fn.name()
        yc.sum().backward()
        ye.sum().backward()
        assert_same(xc.grad, xe.grad)
        assert_same(bc.grad, be.grad)
    if has_fusion(dg):
        groups, runs = fused(compiled)
        assert runs == 0


def test_value_guard_miss_after_fused_groups(dg):
    """A branch on the updated tensor that flips: the replay misses after its fused groups ran, and the catch-up
    (then the sibling variant) is served the skipped results, made again. Two updates of one tensor: the second
    group makes the first one's results before it writes."""
    (wc, xs_c), (we, xs_e) = twins(dg, 8, [(48,), (48,)])

    def program(w):
        def step(x):
            with dg.no_grad():
                w.add_(x, alpha=-0.5)
                w.mul_(1.5)
                w.sub_(x)
            if bool(w.sum() > 0):
                return w * 2.0
            return w - 1.0
        return step
    compiled = dg.compile(program(wc), mode="reduce-overhead")
    eager = program(we)
    rng = np.random.default_rng(9)
    signs = []
    for k in range(14):
        x = (rng.standard_normal(48) + (3.0 if k % 3 else -3.0)).astype(np.float32)
        out_c, out_e = compiled(dg.tensor(x)), eager(dg.tensor(x))
        assert_same(out_c, out_e)
        assert_same(wc, we)
        signs.append(bool(we.sum() > 0))
    assert len(set(signs)) == 2          # the branch flipped
    if has_fusion(dg):
        groups, runs = fused(compiled)
        assert groups >= 3 and runs > 0


def into_groups(compiled):
    """How many groups the programs have: here (no update after the backward) those that compute into a dead
    operand (Note [Results into a dead operand])."""
    return sum(n.fused_groups for n in natives(compiled) if hasattr(n, "fused_groups"))


def block_program(dg, params, keep=None, read_twice=False, value_after=False):
    """A small MLP block with bias adds after products (h = x @ w1 + b1: h's product is dead after the add), a
    residual, and a squared error; its backward is planned. keep: also return the first product; read_twice: the
    first product is added twice; value_after: a Python value read after the backward (a guard)."""
    w1, b1, w2, b2 = params

    def step(x, target):
        m = x @ w1
        h = m + b1
        if read_twice:
            h = h + (m + b1)
        y = (h.relu() @ w2 + b2) + x
        loss = ((y - target) ** 2).mean()
        loss.backward()
        out = (loss.detach(),)
        if keep:
            out = out + (m,)
        if value_after:
            out = out + (bool(loss.detach() > 1e9),)
        return out
    return step


@pytest.mark.parametrize("variant", ["plain", "keep", "read_twice", "value_after"])
def test_forward_results_into_dead_operands_match_eager(dg, variant):
    shapes = [(16, 32), (32,), (32, 16), (16,)]
    pc, pe = twins(dg, 11, shapes, requires_grad=True)
    kw = {"keep": variant == "keep", "read_twice": variant == "read_twice", "value_after": variant == "value_after"}
    compiled = dg.compile(block_program(dg, pc, **kw), mode="reduce-overhead")
    eager = block_program(dg, pe, **kw)
    rng = np.random.default_rng(12)
    for _ in range(5):
        x, t = rng.standard_normal((64, 16)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
        oc, oe = compiled(dg.tensor(x), dg.tensor(t)), eager(dg.tensor(x), dg.tensor(t))
        for a, b in zip(oc, oe):
            if isinstance(a, bool):
                assert a == b
            else:
                assert_same(a, b)
        for p, q in zip(pc, pe):
            assert_same(p.grad, q.grad)
            p.grad = q.grad = None
    if has_fusion(dg):
        assert all(v.plan_reason is None for g in compiled._program.groups.values() for v in g)
        groups = into_groups(compiled)
        assert fused(compiled)[1] == groups * 4   # every replay computed each into its operand
        # plain: the two bias adds into their products, the residual add into the second and the sub into the
        # residual sum (the squared error's input is saved: not into it); keep: the first product is returned, so
        # its bias add is not into it; read_twice: the product is read twice (not into it; the second add is into
        # the first sum instead); value_after: a guard after the backward, so the catch-up could read them all
        assert groups == {"plain": 4, "keep": 3, "read_twice": 4, "value_after": 0}[variant]


def heads_program(dg, w, extra):
    """Attention heads cut from one product (chunk, reshape, transpose): the planned backward writes each head's
    gradient straight into its window of the product's gradient (Note [A reshape's gradient written into its
    slice's window]). extra: the product also gets a gradient of its own, so the window is added into a sum."""
    b, s, h, dh = 4, 16, 2, 8

    def step(x):
        qkv = x @ w
        q, k, v = qkv.chunk(3, dim=-1)

        def heads(t):
            return t.reshape(b, s, h, dh).transpose(1, 2)
        att = (heads(q) @ heads(k).transpose(-2, -1) * 0.25).softmax(-1) @ heads(v)
        loss = (att * att).sum()
        if extra:
            loss = loss + (qkv * qkv).sum() * 0.5
        loss.backward()
        return loss.detach()
    return step


@pytest.mark.parametrize("extra", [False, True])
def test_head_gradients_written_into_their_windows_match_eager(dg, extra):
    (wc,), (we,) = twins(dg, 13, [(16, 3 * 16)], requires_grad=True)
    compiled = dg.compile(heads_program(dg, wc, extra), mode="reduce-overhead")
    eager = heads_program(dg, we, extra)
    rng = np.random.default_rng(14)
    for _ in range(5):
        x = rng.standard_normal((4, 16, 16)).astype(np.float32)
        x[0, 0, :4] = -0.0    # signed zeros through the products into the windows
        assert_same(compiled(dg.tensor(x)), eager(dg.tensor(x)))
        assert_same(wc.grad, we.grad)
        wc.grad = we.grad = None
    if has_fusion(dg):
        plans = [s.plan for g in compiled._program.groups.values() for v in g for s in v.steps
                 if s.name == "_run_backward"]
        assert plans and all(hasattr(p, "reshapes_into_slices") for p in plans)
        assert max(p.reshapes_into_slices for p in plans) >= 1


def test_encoder_layer_head_gradients_match_eager(dg):
    """nn.TransformerEncoderLayer's heads (split, reshape to (seq, batch * heads, head dim), transpose): each head's
    gradient is written into its window through the finest shape both layouts are views in."""
    def build():
        dg.manual_seed(0)
        layer = dg.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        return layer, dg.optim.SGD(layer.parameters(), lr=0.01)

    def program(layer, opt):
        def step(x):
            opt.zero_grad()
            out = layer(x)
            (out * out).sum().backward()
            opt.step()
            return out.detach()
        return step
    (lc, oc), (le, oe) = build(), build()
    compiled = dg.compile(program(lc, oc), mode="reduce-overhead")
    eager = program(le, oe)
    rng = np.random.default_rng(15)
    for _ in range(5):
        x = rng.standard_normal((4, 16, 32)).astype(np.float32)
        assert_same(compiled(dg.tensor(x)), eager(dg.tensor(x)))
        for p, q in zip(lc.parameters(), le.parameters()):
            assert_same(p, q)
    if has_fusion(dg):
        plans = [s.plan for g in compiled._program.groups.values() for v in g for s in v.steps
                 if s.name == "_run_backward" and s.plan is not None and not isinstance(s.plan, str)]
        assert plans and max(p.reshapes_into_slices for p in plans) == 3

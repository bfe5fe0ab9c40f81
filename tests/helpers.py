"""check_op and friends: the one place where tests decide what "close enough" means.

    check_op(dg, [(3, 4), (4,)], lambda m, a, b: a * b, np.multiply)

runs `fn(dg, *tensors)` on seeded inputs built with numpy and checks, for float64 and float32:
  - the forward values, shape and dtype against `np_fn` (evaluated in float64 on the same input values);
  - the gradients of `(fn(...) * w).sum()` (w: a fixed random cotangent, so that ops whose plain .sum() has a
    constant gradient, such as softmax, are still tested) against float64 central differences of the engine's own
    forward; float32 gradients against the float64 ones;
  - the same forward and gradients when every float input is a non-contiguous view (a transposed copy, and a
    stride-2 slice of a buffer whose gaps hold NaN, so a kernel that ignores strides reads NaN);
  - optionally the forward and gradients of the same `fn` run on torch (`fn(torch, ...)`).
`fn` takes the module first, so one lambda serves dyngrad, dyngrad.reference and torch; `F(m)` gives the module
holding the nn functions (nn.functional, on torch and on both engines).

Inputs are given per argument: a shape tuple (standard normal floats), `Float(shape, low, high)` (uniform, for
domains such as log's), `Ints(shape, low, high)` (int64, never differentiated), `Mask(shape)` (bool) or a numpy
array (used as is; differentiated if it is floating point).
"""
import math
import os
import warnings
import zlib

import numpy as np

import dyngrad

# The folder that holds the dyngrad this test run imported: site-packages after `pip install .`, python/ after a dev
# build. Subprocesses get it on PYTHONPATH so they test the same build (a clean clone's python/ has no _C).
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(dyngrad.__file__)))


def subprocess_env(**extra):
    """os.environ for a child Python that must import the same dyngrad as this test run."""
    return dict(os.environ, PYTHONPATH=PACKAGE_PARENT, **extra)

# (rtol, atol) per dtype; atol is scaled by the largest magnitude of the expected values (at least 1).
FORWARD_TOL = {"float64": (1e-9, 1e-11), "float32": (1e-4, 1e-5)}
FD_TOL = (1e-5, 1e-6)            # float64 analytic gradients vs float64 central differences
FLOAT32_GRAD_TOL = (1e-3, 1e-4)  # float32 gradients vs float64 gradients at the same input values
VIEW_TOL = {"float64": (1e-12, 1e-13), "float32": (1e-5, 1e-6)}  # non-contiguous vs contiguous inputs
TORCH_TOL = (1e-9, 1e-11)        # float64, against torch


class Float:
    """A float input drawn uniformly from [low, high) (default: standard normal); `step` rounds values to
    multiples of step (to create ties on purpose); `away_from` resamples values within `margin` of kinks."""

    def __init__(self, shape, low=None, high=None, step=None, away_from=(), margin=0.05):
        self.shape, self.low, self.high, self.step = tuple(shape), low, high, step
        self.away_from, self.margin = tuple(away_from), margin

    def draw(self, rng):
        def sample(n):
            if self.low is not None:
                return rng.uniform(self.low, self.high, size=n)
            return rng.standard_normal(n)
        n = math.prod(self.shape)
        x = sample(n)
        for _ in range(100):
            bad = np.zeros(n, dtype=bool)
            for k in self.away_from:
                bad |= np.abs(x - k) < self.margin
            if not bad.any():
                break
            x[bad] = sample(int(bad.sum()))
        if self.step:
            x = np.round(x / self.step) * self.step
        # float64 and float32 runs see the very same values: round through float32 once
        return x.astype(np.float32).astype(np.float64).reshape(self.shape)

    def __repr__(self):
        return f"Float{self.shape}"


class Ints:
    """An int64 input (indices, class targets): uniform in [low, high)."""

    def __init__(self, shape, low=0, high=None):
        self.shape, self.low, self.high = tuple(shape), low, high

    def draw(self, rng):
        return rng.integers(self.low, self.high, size=self.shape, dtype=np.int64)

    def __repr__(self):
        return f"Ints{self.shape}"


class Mask:
    """A bool input, True with probability p."""

    def __init__(self, shape, p=0.5):
        self.shape, self.p = tuple(shape), p

    def draw(self, rng):
        return rng.random(self.shape) < self.p

    def __repr__(self):
        return f"Mask{self.shape}"


class Const:
    """An input drawn like `spec` but treated as a constant: never given requires_grad (e.g. torch's
    non-differentiable `weight` of binary_cross_entropy_with_logits)."""

    def __init__(self, spec):
        self.spec = spec if not isinstance(spec, tuple) else Float(spec)

    def draw(self, rng):
        return self.spec.draw(rng)

    def __repr__(self):
        return f"Const({self.spec!r})"


_BRIDGE_REPORT = {}


def bridge_report(engine="dyngrad"):
    """tests/bridge_driver.py's report (which table rows crossed the numpy bridge, through which of its functions),
    run once per test session in a child process: {row index: entry}, row indices those of table.rows()."""
    if engine not in _BRIDGE_REPORT:
        import json
        import subprocess
        import sys
        import tempfile
        driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bridge_driver.py")
        with tempfile.TemporaryDirectory() as folder:
            report = os.path.join(folder, "bridge.json")
            subprocess.run([sys.executable, driver, "--engine", engine, "--report", report], env=subprocess_env(),
                           check=True, timeout=900, capture_output=True)
            with open(report, encoding="utf-8") as f:
                _BRIDGE_REPORT[engine] = {int(k): v for k, v in json.load(f).items()}
    return _BRIDGE_REPORT[engine]


def quiet(fn):
    """fn with torch's (and dyngrad's matching) UserWarnings silenced: the deprecation notices of old spellings
    (qr, cholesky, chain_matmul, cross, lu, triangular_solve), which the tests call on purpose."""
    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args)
    return call


def builtin_base(exc_type):
    """The first built-in class of an exception type (torch's _LinAlgError -> RuntimeError): what dyngrad's error
    must be an instance of."""
    return next(t for t in exc_type.__mro__ if t.__module__ == "builtins")


def as_spec(spec, low=None, high=None, away_from=()):
    """A shape tuple becomes a Float (with the op's default domain); specs and arrays pass through."""
    if isinstance(spec, tuple):
        return Float(spec, low, high, away_from=away_from)
    return spec


def seed_of(*parts):
    """A stable seed from a description (hash() of a str changes between runs)."""
    return zlib.crc32(repr(parts).encode())


def draw_inputs(specs, seed):
    rng = np.random.default_rng(seed)
    return [np.array(s) if isinstance(s, np.ndarray) else np.asarray(s.draw(rng)) for s in specs]


def differentiable(specs, arrays):
    """Positions of the inputs that get requires_grad: float arrays that are not Const."""
    return [k for k, (s, a) in enumerate(zip(specs, arrays)) if is_float_array(a) and not isinstance(s, Const)]


def F(m):
    """The module holding the nn functions: nn.functional, on torch and on both engines (where torch.NAME exists
    too its signature may differ, e.g. an int reduction, so tests of nn functions go through nn.functional)."""
    return m.nn.functional


def is_float_array(a):
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def dtype_name(t):
    return str(t.dtype).split(".")[-1]


def to_numpy(t):
    """A float64/int64/bool numpy copy of an engine (or torch) tensor."""
    if hasattr(t, "detach"):
        t = t.detach()
    a = np.array(t.numpy() if hasattr(t, "numpy") else t)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def describe(name, arrays, dtype, variant=""):
    shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
    return f"{name}[{shapes}] {dtype}{(' ' + variant) if variant else ''}"


def assert_close(got, expected, rtol, atol, what):
    """allclose with a message naming the worst element; atol is scaled by the expected magnitude."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    if expected.dtype.kind not in "fc":
        mismatch = got != expected
        assert not mismatch.any(), (f"{what}: {int(mismatch.sum())} of {got.size} elements differ; first at "
                                    f"{np.argwhere(mismatch)[0].tolist()}: got {got[mismatch][0]}, "
                                    f"expected {expected[mismatch][0]}")
        return
    finite = expected[np.isfinite(expected)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    ok = np.isclose(got, expected, rtol=rtol, atol=atol * scale, equal_nan=True)
    if not ok.all():
        err = np.where(ok, 0.0, np.abs(np.nan_to_num(got - expected, nan=np.inf)))
        worst = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
        raise AssertionError(f"{what}: {int((~ok).sum())} of {got.size} elements off; worst at "
                             f"{tuple(int(i) for i in worst)}: got {got[worst]!r}, expected {expected[worst]!r} "
                             f"(rtol {rtol}, atol {atol * scale:.3g})")


# ---- running fn on an engine ----

def make_tensor(m, a, dtype, requires_grad):
    """An engine tensor holding array `a`; float arrays are cast to `dtype` (a name)."""
    if is_float_array(a):
        a = a.astype(dtype)
    t = m.from_numpy(a.copy()) if m.__name__ == "torch" else m.tensor(a)
    if requires_grad:
        t.requires_grad_(True)
    return t


def make_view(m, a, dtype, variant):
    """(leaf, view): `view` has a's values but non-contiguous strides; gradients land on `leaf`."""
    if variant == "transposed":
        leaf = make_tensor(m, np.ascontiguousarray(np.swapaxes(a, -1, -2)), dtype, True)
        return leaf, leaf.transpose(-1, -2)
    base = np.full(a.shape[:-1] + (2 * a.shape[-1],), np.nan)
    base[..., ::2] = a
    leaf = make_tensor(m, base, dtype, True)
    return leaf, leaf[..., ::2]


def view_grad(leaf_grad, a, variant):
    """The gradient with respect to the view, read off the leaf's gradient."""
    g = to_numpy(leaf_grad)
    if variant == "transposed":
        return np.swapaxes(g, -1, -2)
    gaps = g[..., 1::2]
    assert not gaps.any(), f"gradient leaked into elements outside the strided view: {gaps}"
    return g[..., ::2]


def run(m, fn, arrays, dtype, diff, cotangents=None, variant=None, backward=True):
    """Runs fn on tensors made from `arrays`; returns (outputs as numpy, gradients of the inputs in `diff`).

    The loss backpropagated is sum_i (out_i * cotangent_i).sum() over the float outputs."""
    leaves, args = {}, []
    for k, a in enumerate(arrays):
        if k in diff and variant is not None and a.ndim >= (2 if variant == "transposed" else 1):
            leaves[k], view = make_view(m, a, dtype, variant)
            args.append(view)
        else:
            t = make_tensor(m, a, dtype, k in diff)
            leaves[k] = t
            args.append(t)
    outs = as_list(fn(m, *args))
    grads = None
    if backward and diff:
        floats = [o for o in outs if o.is_floating_point()]
        assert floats, "the op has no floating-point output to differentiate"
        loss = None
        for o, w in zip(floats, cotangents):
            term = (o * make_tensor(m, w, dtype, False)).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        grads = {}
        for k in diff:
            g = leaves[k].grad
            if g is None:
                grads[k] = np.zeros(arrays[k].shape)
            elif leaves[k] is args[k]:
                grads[k] = to_numpy(g)
            else:
                grads[k] = view_grad(g, arrays[k], variant)
    return outs, grads


def loss_value(m, fn, arrays, dtype, cotangents):
    """sum_i (out_i * w_i).sum() in float64, for finite differences (no graph is recorded)."""
    with m.no_grad():
        outs = as_list(fn(m, *[make_tensor(m, a, dtype, False) for a in arrays]))
    floats = [to_numpy(o) for o in outs if o.is_floating_point()]
    return float(sum((o * w).sum() for o, w in zip(floats, cotangents)))


def central_differences(m, fn, arrays, diff, cotangents, eps):
    grads = {}
    for k in diff:
        g = np.zeros(arrays[k].shape)
        for j in np.ndindex(*arrays[k].shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[k][j] += eps
            minus[k][j] -= eps
            g[j] = (loss_value(m, fn, plus, "float64", cotangents) -
                    loss_value(m, fn, minus, "float64", cotangents)) / (2 * eps)
        grads[k] = g
    return grads


# ---- the checks ----

def check_op(dg, inputs, fn, np_fn=None, *, name="op", dtypes=("float64", "float32"), grad=True, out_dtype=None,
             low=None, high=None, away_from=(), fwd_tol=None, grad_tol=None, eps=1e-6, noncontig=True, seed=None,
             torch=False, torch_tol=TORCH_TOL):
    """Checks fn(dg, *inputs) against numpy, finite differences, non-contiguous inputs and (optionally) torch.

    `out_dtype` is the expected dtype name of every float output (default: the run's float dtype; outputs that are
    int64/bool in np_fn's result must be int64/bool). `low`/`high`/`away_from` set the domain of plain shape
    inputs."""
    specs = [as_spec(s, low, high, away_from) for s in inputs]
    arrays = draw_inputs(specs, seed if seed is not None else seed_of(name, inputs))
    diff = differentiable(specs, arrays) if grad else []
    expected = None
    if np_fn is not None:
        expected = [np.asarray(e) for e in as_list(np_fn(*arrays))]
    rng = np.random.default_rng(seed_of("cotangent", name, inputs))
    cotangents, grads64 = None, None
    for dtype in dtypes:
        what = describe(name, arrays, dtype)
        outs, grads = run(dg, fn, arrays, dtype, diff, backward=False)
        if expected is not None:
            assert len(outs) == len(expected), f"{what}: {len(outs)} outputs, expected {len(expected)}"
            for i, (o, e) in enumerate(zip(outs, expected)):
                _check_output(o, e, dtype, out_dtype, fwd_tol, f"{what} output {i}")
        if not diff:
            continue
        if cotangents is None:
            cotangents = [rng.standard_normal(tuple(o.shape)) for o in outs if o.is_floating_point()]
        outs, grads = run(dg, fn, arrays, dtype, diff, cotangents)
        if dtype == "float64":
            numeric = central_differences(dg, fn, arrays, diff, cotangents, eps)
            rtol, atol = grad_tol or FD_TOL
            for k in diff:
                assert_close(grads[k], numeric[k], rtol, atol, f"{what}: gradient of input {k} vs finite differences")
            grads64 = grads
        elif grads64 is not None:
            rtol, atol = FLOAT32_GRAD_TOL
            for k in diff:
                assert_close(grads[k], grads64[k], rtol, atol, f"{what}: float32 gradient of input {k} vs float64")
        _check_grad_dtypes(dg, fn, arrays, dtype, diff, cotangents, what)
        if noncontig:
            for variant in ("transposed", "strided"):
                if not any(arrays[k].ndim >= (2 if variant == "transposed" else 1) for k in diff):
                    continue
                vouts, vgrads = run(dg, fn, arrays, dtype, diff, cotangents, variant=variant)
                rtol, atol = VIEW_TOL[dtype]
                for i, (o, c) in enumerate(zip(vouts, outs)):
                    assert_close(to_numpy(o), to_numpy(c), rtol, atol, f"{what} {variant} inputs: output {i}")
                for k in diff:
                    assert_close(vgrads[k], grads[k], rtol, atol, f"{what} {variant} inputs: gradient of input {k}")
    if torch:
        check_torch(dg, fn, arrays, diff, name=name, tol=torch_tol)


def _check_output(o, e, dtype, out_dtype, fwd_tol, what):
    got = to_numpy(o)
    assert tuple(o.shape) == e.shape, f"{what}: shape {tuple(o.shape)}, expected {e.shape}"
    if e.dtype.kind == "f":
        want = out_dtype or dtype
        assert dtype_name(o) == want, f"{what}: dtype {dtype_name(o)}, expected {want}"
        rtol, atol = fwd_tol or FORWARD_TOL[want]
        assert_close(got, e, rtol, atol, what)
    else:
        want = "bool" if e.dtype.kind == "b" else "int64"
        assert dtype_name(o) == want, f"{what}: dtype {dtype_name(o)}, expected {want}"
        assert_close(got, e, 0, 0, what)


def _check_grad_dtypes(dg, fn, arrays, dtype, diff, cotangents, what):
    """Gradients have the dtype and shape of their input."""
    leaves = [make_tensor(dg, a, dtype, k in diff) for k, a in enumerate(arrays)]
    outs = [o for o in as_list(fn(dg, *leaves)) if o.is_floating_point()]
    loss = sum((o * make_tensor(dg, w, dtype, False)).sum() for o, w in zip(outs, cotangents))
    loss.backward()
    for k in diff:
        g = leaves[k].grad
        if g is None:  # an input the output does not depend on (torch gives None too); values checked elsewhere
            continue
        assert dtype_name(g) == dtype and tuple(g.shape) == arrays[k].shape, (
            f"{what}: gradient of input {k} is {dtype_name(g)} {tuple(g.shape)}, expected {dtype} {arrays[k].shape}")


def check_torch(dg, fn, arrays, diff, *, name="op", tol=TORCH_TOL):
    """fn on dg and on torch, float64, same inputs: forward values and gradients must agree (within `tol`)."""
    import torch
    rng = np.random.default_rng(seed_of("torch", name))
    outs, _ = run(dg, fn, arrays, "float64", [], backward=False)
    touts, _ = run(torch, fn, arrays, "float64", [], backward=False)
    what = describe(name, arrays, "float64", "vs torch")
    assert len(outs) == len(touts), f"{what}: {len(outs)} outputs, torch has {len(touts)}"
    for i, (o, t) in enumerate(zip(outs, touts)):
        assert tuple(o.shape) == tuple(t.shape), f"{what} output {i}: shape {tuple(o.shape)}, torch {tuple(t.shape)}"
        assert dtype_name(o) == dtype_name(t), f"{what} output {i}: dtype {dtype_name(o)}, torch {dtype_name(t)}"
        assert_close(to_numpy(o), to_numpy(t), *tol, f"{what} output {i}")
    if not diff:
        return
    cotangents = [rng.standard_normal(tuple(o.shape)) for o in outs if o.is_floating_point()]
    _, grads = run(dg, fn, arrays, "float64", diff, cotangents)
    _, tgrads = run(torch, fn, arrays, "float64", diff, cotangents)
    for k in diff:
        assert_close(grads[k], tgrads[k], *tol, f"{what}: gradient of input {k}")


def check_exact(dg, fn, vals, expect, expect_grad=None, dtype="float64", name="op"):
    """Exact inputs at a kink or tie: forward equals `expect`, and the gradients of fn(...).sum() equal
    `expect_grad` (one list per input) exactly."""
    arrays = [np.asarray(v, dtype=np.float64) for v in vals]
    leaves = [make_tensor(dg, a, dtype, True) for a in arrays]
    out = fn(dg, *leaves)
    what = describe(name, arrays, dtype, "exact")
    assert_close(to_numpy(out), np.asarray(expect, dtype=np.float64), 0, 0, what)
    if expect_grad is not None:
        out.sum().backward()
        for k, (leaf, eg) in enumerate(zip(leaves, expect_grad)):
            got = np.zeros(arrays[k].shape) if leaf.grad is None else to_numpy(leaf.grad)
            assert_close(got, np.asarray(eg, dtype=np.float64), 0, 0, f"{what}: gradient of input {k}")


def check_gradgrad(dg, inputs, fn, *, name="op", low=None, high=None, away_from=(), seed=None):
    """Second derivatives: dg.autograd.gradgradcheck (float64 central differences of the first derivatives)."""
    specs = [as_spec(s, low, high, away_from) for s in inputs]
    arrays = draw_inputs(specs, seed if seed is not None else seed_of(name, inputs))
    diff = differentiable(specs, arrays)
    tensors = [make_tensor(dg, a, "float64", k in diff) for k, a in enumerate(arrays)]
    assert dg.autograd.gradgradcheck(lambda *ts: fn(dg, *ts), tuple(tensors), eps=1e-6, atol=1e-5, rtol=1e-4), name


def square_function(m):
    """The tests' stock custom Function of engine m (Function is each engine's own): Square.apply(x) is x * x, saving
    x; backward gives 2 * x * grad. Its nodes are named SquareBackward."""
    class Square(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad
    return Square


def array_tensor(m, values, requires_grad=False, dtype=np.float32):
    """m.tensor of `values` as a numpy array of `dtype` (the compile tests' inputs)."""
    return m.tensor(np.asarray(values, dtype=dtype), requires_grad=requires_grad)


def assert_bitwise_equal(a, b):
    """The same shape, dtype and bits: a replayed or verified call runs the same kernels in the same order as the
    eager one."""
    a, b = np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy())
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)

"""Corner cases an outside tester found to differ from torch (issue 23), each with the value torch gives, written
out so that the tests run without torch (test_torch_agrees re-derives every row on torch when it is installed).

A row is (name, fn(m) -> a tensor/number/tuple, expected): expected is a value (compared with a tolerance), or an
exception type that both must raise.
"""
import io
import math

import numpy as np
import pytest


def _save_load(m, t):
    buffer = io.BytesIO()
    m.save({"w": t}, buffer)
    buffer.seek(0)
    return m.load(buffer)["w"]


def _empty_cat_grad(m):
    x = m.zeros(0, 3, requires_grad=True)
    m.cat([x, x]).sum().backward()
    return x.grad


def _kl(m, p, q):
    return m.distributions.kl_divergence(p(m), q(m))


def _half_norm_grad(m, dtype):
    x = m.tensor([300.0, 400.0]).to(getattr(m, dtype)).requires_grad_()
    x.norm().backward()
    return x.grad


def _cosine_grad(m, values, dtype):
    x = m.tensor([values]).to(getattr(m, dtype)).requires_grad_()
    m.nn.functional.cosine_similarity(x, m.tensor([values[::-1]]).to(x.dtype)).sum().backward()
    return x.grad


NaN = math.nan
CASES = [
    # statistics and reductions
    ("cov of one variable (1, N) is 0-d", lambda m: m.cov(m.tensor([[1.0, 2.0, 4.0]])), 7 / 3),
    ("corrcoef of one variable (1, N) is 0-d", lambda m: m.corrcoef(m.tensor([[1.0, 2.0, 4.0]])), 1.0),
    ("int8 sum in int8 wraps", lambda m: m.tensor([100, 100], dtype=m.int8).sum(dtype=m.int8), ("int8", -56)),
    ("uint8 sum over a dim in uint8", lambda m: m.tensor([[200, 100]], dtype=m.uint8).sum(1, dtype=m.uint8),
     ("uint8", [44])),
    ("int8 sum in int16", lambda m: m.tensor([[100, 100]], dtype=m.int8).sum(1, dtype=m.int16), ("int16", [200])),
    ("nansum in int8", lambda m: m.nansum(m.tensor([100, 100], dtype=m.int8), dtype=m.int8), ("int8", -56)),
    # integer powers and promotion
    ("int32 ** 2**33 is refused", lambda m: m.tensor([2], dtype=m.int32) ** 2 ** 33, RuntimeError),
    ("uint8.pow(256) is refused", lambda m: m.pow(m.tensor([1], dtype=m.uint8), 256), RuntimeError),
    ("int64 ** 40 computes", lambda m: m.tensor([2]) ** 40, ("int64", [2 ** 40])),
    ("uint8 / 256 divides by 256", lambda m: m.tensor([7, 200], dtype=m.uint8) / 256, [7 / 256, 200 / 256]),
    ("int8 / 1000", lambda m: m.tensor([7, 100], dtype=m.int8) / 1000, [0.007, 0.1]),
    ("uint8 / -2", lambda m: m.tensor([7, 100], dtype=m.uint8) / -2, [-3.5, -50.0]),
    ("1000 / uint8", lambda m: 1000 / m.tensor([8, 100], dtype=m.uint8), [125.0, 10.0]),
    ("copysign(uint8, -2)", lambda m: m.copysign(m.tensor([7], dtype=m.uint8), -2), [-7.0]),
    ("xlogy(int8, 1000)", lambda m: m.xlogy(m.tensor([2], dtype=m.int8), 1000), [2 * math.log(1000)]),
    ("uint8 + 256 wraps", lambda m: m.tensor([7], dtype=m.uint8) + 256, ("uint8", [7])),
    ("uint8 == 256 compares wrapped", lambda m: m.tensor([0, 1], dtype=m.uint8) == 256, ("bool", [True, False])),
    # a Python int ranks below 0-d tensors too (torch's wrapped number)
    ("0-d uint8 / 256", lambda m: m.tensor(7, dtype=m.uint8) / 256, 7 / 256),
    ("0-d int8 / 1000", lambda m: m.tensor(7, dtype=m.int8) / 1000, 0.007),
    ("0-d int32 / 2**40", lambda m: m.tensor(7, dtype=m.int32) / 2 ** 40, 7 / 2 ** 40),
    ("256 / 0-d uint8", lambda m: 256 / m.tensor(44, dtype=m.uint8), 256 / 44),
    ("0-d uint8 / -1", lambda m: m.tensor(7, dtype=m.uint8) / -1, -7.0),
    ("true_divide(0-d int16, 40000)", lambda m: m.true_divide(m.tensor(7, dtype=m.int16), 40000), 7 / 40000),
    ("copysign(0-d uint8, -1)", lambda m: m.copysign(m.tensor(44, dtype=m.uint8), -1), -44.0),
    ("xlogy(0-d uint8, 256)", lambda m: m.xlogy(m.tensor(2, dtype=m.uint8), 256), 2 * math.log(256)),
    ("0-d uint8 + 300 wraps", lambda m: m.tensor(7, dtype=m.uint8) + 300, ("uint8", 51)),
    ("0-d uint8 * -1 wraps", lambda m: m.tensor(7, dtype=m.uint8) * -1, ("uint8", 249)),
    ("0-d uint8 add_(300)", lambda m: m.tensor(7, dtype=m.uint8).add_(300), ("uint8", 51)),
    ("0-d uint8 + 300 * alpha 2", lambda m: m.add(m.tensor(44, dtype=m.uint8), 300, alpha=2), ("uint8", 132)),
    ("0-d uint8 - 1 * alpha -2", lambda m: m.sub(m.tensor(7, dtype=m.uint8), 1, alpha=-2), ("uint8", 9)),
    ("0-d uint8 div_(256) is refused", lambda m: m.tensor(7, dtype=m.uint8).div_(256), RuntimeError),
    ("addcmul value 300 does not fit uint8", lambda m: m.addcmul(*[m.tensor([4], dtype=m.uint8)] * 3, value=300),
     RuntimeError),
    ("addcmul value 2.5 becomes 2 for uint8", lambda m: m.addcmul(*[m.tensor([4], dtype=m.uint8)] * 3, value=2.5),
     ("uint8", [36])),
    ("addcmul of bool is not implemented", lambda m: m.addcmul(*[m.tensor([True])] * 3), NotImplementedError),
    # a numpy scalar on the left defers to the tensor (torch's __array_priority__), never computing in numpy
    ("np.int64(300) / 0-d uint8", lambda m: np.int64(300) / m.tensor(7, dtype=m.uint8), ("float32", 300 / 7)),
    ("np.float64(2.5) * float32", lambda m: np.float64(2.5) * m.tensor([1.0, 2.0]), ("float32", [2.5, 5.0])),
    ("np.int64(3) * int64", lambda m: np.int64(3) * m.tensor([1, 2]), ("int64", [3, 6])),
    ("int32 x float16 0-d", lambda m: m.tensor([3, 100001], dtype=m.int32) * m.tensor(1.0, dtype=m.float16),
     ("float16", [3.0, math.inf])),    # (100001 becomes float16 first: inf, as torch)
    # linear algebra
    ("cholesky of a NaN matrix is refused", lambda m: m.linalg.cholesky(m.tensor([[4.0, NaN], [NaN, 3.0]])),
     RuntimeError),
    ("cholesky with a NaN pivot is refused", lambda m: m.linalg.cholesky(m.tensor([[4.0, 1.0], [1.0, NaN]])),
     RuntimeError),
    ("cholesky_ex reports a NaN pivot", lambda m: m.linalg.cholesky_ex(m.tensor([[4.0, 1.0], [1.0, NaN]]))[1],
     ("int32", 2)),
    ("cholesky_ex of a NaN matrix: potrf's partial factor",
     lambda m: m.linalg.cholesky_ex(m.tensor([[4.0, NaN], [NaN, 3.0]]))[0], [[2.0, 0.0], [NaN, NaN]]),
    ("cholesky_ex of a NaN matrix: info", lambda m: m.linalg.cholesky_ex(m.tensor([[4.0, NaN], [NaN, 3.0]]))[1],
     ("int32", 2)),
    ("cholesky_ex(upper) of a NaN pivot", lambda m: m.linalg.cholesky_ex(
        m.tensor([[4.0, 1.0, 0.0], [1.0, NaN, 1.0], [0.0, 1.0, 5.0]], dtype=m.float64), upper=True)[0],
     [[2.0, 0.5, 0.0], [0.0, NaN, 1.0], [0.0, 0.0, 5.0]]),
    ("cholesky_ex of an indefinite matrix keeps the failing pivot", lambda m: m.linalg.cholesky_ex(
        m.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 7.0]]))[0], [[1.0, 0, 0], [2.0, -3.0, 0], [0, 0, 7.0]]),
    ("cholesky_ex reads only the lower triangle's NaN", lambda m: m.linalg.cholesky_ex(
        m.tensor([[4.0, NaN], [1.0, 3.0]]))[1], ("int32", 0)),
    ("inv_ex of a NaN pivot is all NaN", lambda m: m.linalg.inv_ex(m.tensor([[NaN, 1.0], [1.0, 3.0]]))[0],
     [[NaN] * 2] * 2),
    ("inv of a block-diagonal NaN matrix is all NaN", lambda m: m.linalg.inv(
        m.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, NaN]], dtype=m.float64)), [[NaN] * 3] * 3),
    ("inv of a NaN matrix is all NaN", lambda m: m.linalg.inv(m.tensor([[1.0, NaN], [0.5, 2.0]])), [[NaN] * 2] * 2),
    # norms whose squares overflow: torch's cosine_similarity divides by an inf norm (0), never inf - inf
    ("bfloat16 cosine_similarity of 1e20s", lambda m: m.nn.functional.cosine_similarity(
        m.tensor([[1e20, 2e20]]).bfloat16(), m.tensor([[2e20, 1e20]]).bfloat16()), ("bfloat16", [0.0])),
    ("float32 cosine_similarity of 3e38s", lambda m: m.nn.functional.cosine_similarity(
        m.tensor([[3e38, 1e38]]), m.tensor([[1e38, 3e38]])), [0.0]),
    ("cosine_similarity gradient of 1e20s", lambda m: _cosine_grad(m, [1e20, 2e20], "bfloat16"), [[0.0, 0.0]]),
    # random
    ("randint past uint8's range is refused", lambda m: m.randint(0, 300, (3,), dtype=m.uint8), RuntimeError),
    ("randint below int8's range is refused", lambda m: m.randint(-200, 3, (3,), dtype=m.int8), RuntimeError),
    ("randint past bool's range is refused", lambda m: m.randint(0, 3, (3,), dtype=m.bool), RuntimeError),
    ("randint up to uint8's end", lambda m: m.randint(0, 256, (3,), dtype=m.uint8).shape, (3,)),
    # distributions
    ("Beta mode, both concentrations below 1", lambda m: m.distributions.Beta(
        m.tensor([0.1, 2.0, 0.5, 0.3, 2.0]), m.tensor([0.2, 3.0, 2.0, 2.0, 0.5])).mode, [1.0, 1 / 3, 0.0, 0.0, 1.0]),
    ("KL(Pareto || Pareto)", lambda m: _kl(m, lambda m: m.distributions.Pareto(m.tensor([1.0, 2.0]), m.tensor([2.0, 3.0])),
                                           lambda m: m.distributions.Pareto(m.tensor([0.5, 3.0]), m.tensor([1.5, 1.0]))),
     [1.5 * math.log(2.0) - math.log(0.75) + 0.75 - 1, math.inf]),
    ("KL(ContinuousBernoulli || ContinuousBernoulli)", lambda m: _kl(
        m, lambda m: m.distributions.ContinuousBernoulli(m.tensor([0.3, 0.5, 0.9])),
        lambda m: m.distributions.ContinuousBernoulli(m.tensor([0.6, 0.2, 0.5]))),
     [0.0645193, 0.0788308, 0.1796312]),
    # autograd
    ("cat of an empty leaf: zero gradient", _empty_cat_grad, np.zeros((0, 3))),
    # half types
    ("float16 norm squares in float32", lambda m: m.tensor([300.0, 400.0]).half().norm(), ("float16", 500.0)),
    ("float16 vector_norm", lambda m: m.linalg.vector_norm(m.tensor([300.0, 400.0]).half()), ("float16", 500.0)),
    ("float16 3-norm", lambda m: m.linalg.vector_norm(m.tensor([300.0, 400.0]).half(), 3), ("float16", 449.8)),
    ("float16 dist", lambda m: m.dist(m.tensor([300.0, 400.0]).half(), m.zeros(2).half()), ("float16", 500.0)),
    ("float16 normalize", lambda m: m.nn.functional.normalize(m.tensor([[300.0, 400.0]]).half()),
     ("float16", [[0.6, 0.8]])),
    ("float16 rms_norm", lambda m: m.nn.functional.rms_norm(m.tensor([[300.0, 400.0]]).half(), (2,)),
     ("float16", [[300 / math.sqrt(125000), 400 / math.sqrt(125000)]])),
    ("bfloat16 rms_norm", lambda m: m.nn.functional.rms_norm(m.tensor([[3e18, 4e18]]).to(m.bfloat16), (2,)),
     ("bfloat16", [[0.8485, 1.1314]])),
    ("float16 pairwise_distance", lambda m: m.nn.functional.pairwise_distance(
        m.tensor([[300.0, 400.0]]).half(), m.zeros(1, 2).half()), ("float16", [500.0])),
    ("float16 norm gradient", lambda m: _half_norm_grad(m, "float16"), ("float16", [0.6, 0.8])),
    ("bfloat16 norm", lambda m: m.tensor([3e18, 4e18]).to(m.bfloat16).norm(), ("bfloat16", 5e18)),
    ("bfloat16 save and load", lambda m: _save_load(m, m.tensor([1.5, -2.25]).to(m.bfloat16)),
     ("bfloat16", [1.5, -2.25])),
]


def _values(t):
    if isinstance(t, (tuple, list)) and not hasattr(t, "dtype"):
        return np.asarray(t, dtype=np.float64)
    if hasattr(t, "detach"):
        if "bfloat16" in str(t.dtype):
            t = t.float()
        return np.asarray(t.detach().numpy(), dtype=np.float64)
    return np.asarray(t, dtype=np.float64)


def check(m, fn, expected, name):
    if isinstance(expected, type) and issubclass(expected, Exception):
        with pytest.raises(expected):
            fn(m)
        return
    got = fn(m)
    if isinstance(expected, tuple) and len(expected) == 2 and isinstance(expected[0], str):
        dtype, expected = expected
        assert str(got.dtype).split(".")[-1] == dtype, f"{name}: dtype {got.dtype}, expected {dtype}"
    if hasattr(got, "shape") and not isinstance(expected, tuple):
        assert tuple(got.shape) == np.shape(expected), f"{name}: shape {tuple(got.shape)}, expected {np.shape(expected)}"
    dtype_name = str(getattr(got, "dtype", ""))
    rtol = 8e-3 if "bfloat16" in dtype_name else 2e-3 if "float16" in dtype_name else 1e-5   # half: ~1 ulp
    np.testing.assert_allclose(_values(got), np.asarray(expected, dtype=np.float64), rtol=rtol, atol=1e-7,
                               equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name, fn, expected", CASES, ids=[c[0] for c in CASES])
def test_corner_case(dg, name, fn, expected):
    check(dg, fn, expected, name)


@pytest.mark.parametrize("name, fn, expected", CASES, ids=[c[0] for c in CASES])
def test_torch_agrees(name, fn, expected):
    """The expectations above are torch's (checked whenever torch is installed)."""
    torch = pytest.importorskip("torch")
    check(torch, fn, expected, name)


# float16 gradients through a norm of [300, 400] (500: its square overflows float16): d/dx sum(x / ||x||) goes through
# div's derivative in its divisor, whose b * b overflowed and dropped that path ([0.002, 0.002]). The mathematical
# values, within a few float16 ulps of the terms summed (~2e-3, ulp 2e-6); torch agrees.
HALF_GRADIENTS = [
    ("x / x.norm()", lambda m, x: (x / m.linalg.vector_norm(x, 2, (1,), True)).sum(), [[0.00032, -0.00024]]),
    ("cosine_similarity", lambda m, x: m.nn.functional.cosine_similarity(x, m.tensor([[400.0, 300.0]]).to(x.dtype)),
     [[0.000448, -0.000336]]),
]


@pytest.mark.parametrize("name, fn, expected", HALF_GRADIENTS, ids=[c[0] for c in HALF_GRADIENTS])
def test_float16_gradient_through_a_norm(dg, name, fn, expected):
    x = dg.tensor([[300.0, 400.0]]).half().requires_grad_()
    fn(dg, x).sum().backward()
    np.testing.assert_allclose(x.grad.float().numpy(), expected, rtol=0, atol=8e-6, err_msg=name)


@pytest.mark.parametrize("name, fn, expected", HALF_GRADIENTS, ids=[c[0] for c in HALF_GRADIENTS])
def test_float16_gradient_through_a_norm_torch(name, fn, expected):
    torch = pytest.importorskip("torch")
    test_float16_gradient_through_a_norm(torch, name, fn, expected)

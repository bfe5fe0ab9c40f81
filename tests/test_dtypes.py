"""dtypes beyond float32/float64/int64/bool: int32, int16, int8, uint8 end to end, float16 and bfloat16 storage and
float32-computed arithmetic, promotion (result_type, promote_types, can_cast), finfo/iinfo, the default dtype,
legacy constructors and conversion methods; on both engines, against torch."""
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
HALVES = ["float16", "bfloat16"]


def values(name):
    """Small test values for a dtype: extremes of the integers (for wraparound), fractions for floats."""
    if name == "bool":
        return [True, False, True]
    if name in INTS:
        info = np.iinfo(name)
        return [int(info.max), int(info.min), 3]
    return [1.5, -2.25, 3.0]


def dgt(dg, vals, name):
    return dg.tensor(vals, dtype=getattr(dg, name))


def tt(vals, name):
    return torch.tensor(vals, dtype=getattr(torch, name))


def check(out, expected):
    """out (a dyngrad tensor) has expected's (a torch tensor's) dtype and values."""
    assert out.dtype.name == str(expected.dtype).split(".")[1], (out.dtype, expected.dtype)
    assert tuple(out.shape) == tuple(expected.shape)
    got = np.asarray(out.float().tolist() if out.dtype.name == "bfloat16" else out.tolist())
    want = np.asarray(expected.float().tolist() if expected.dtype == torch.bfloat16 else expected.tolist())
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def test_dtype_objects(dg):
    for name in NAMES:
        d = getattr(dg, name)
        td = getattr(torch, name)
        assert d.name == name and repr(d) == f"dyngrad.{name}"
        assert d.is_floating_point == td.is_floating_point
        assert d.itemsize == td.itemsize
        assert d.is_signed == td.is_signed
        assert pickle.loads(pickle.dumps(d)) is d
    assert dg.int is dg.int32 and dg.short is dg.int16 and dg.half is dg.float16


# ----- promotion --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "lt", "eq"])
def test_binary_result_dtype_every_pair(dg, op):
    """Every dtype pair: the result dtype and values of + - * / < == as torch's, or an error where torch has one."""
    for a in NAMES:
        for b in NAMES:
            x, y = dgt(dg, [1, 0, 1], a), dgt(dg, [1, 1, 0], b)
            tx, ty = tt([1, 0, 1], a), tt([1, 1, 0], b)
            try:
                expected = getattr(torch, op)(tx, ty)
            except RuntimeError:                  # torch refuses bool - anything; dyngrad only bool - bool
                if a == b:
                    with pytest.raises((RuntimeError, TypeError)):
                        getattr(dg, op)(x, y)
                continue
            check(getattr(dg, op)(x, y), expected)


def test_promote_types_result_type_can_cast(dg):
    for a in NAMES:
        for b in NAMES:
            da, db, ta, tb = getattr(dg, a), getattr(dg, b), getattr(torch, a), getattr(torch, b)
            assert dg.promote_types(da, db).name == str(torch.promote_types(ta, tb)).split(".")[1]
            assert dg.can_cast(da, db) == torch.can_cast(ta, tb), (a, b)
            for x, y in [([1], [1]), (1, [1]), ([1], 1)]:   # 0-d vs 1-d: a 0-d tensor only wins across categories
                got = dg.result_type(dg.tensor(x, dtype=da), dg.tensor(y, dtype=db))
                assert got.name == str(torch.result_type(torch.tensor(x, dtype=ta), torch.tensor(y, dtype=tb)))[6:]
        for scalar in (True, 2, 2.5):
            got = dg.result_type(dg.tensor([1], dtype=getattr(dg, a)), scalar)
            assert got.name == str(torch.result_type(torch.tensor([1], dtype=getattr(torch, a)), scalar))[6:]
    assert dg.result_type(2, 2.5) is dg.float32 and dg.result_type(True, 2) is dg.int64


# ----- integers ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", INTS)
def test_integer_arithmetic_wraps(dg, name):
    vals = values(name)
    x, t = dgt(dg, vals, name), tt(vals, name)
    check(x + 1, t + 1)
    check(x - 1, t - 1)
    check(x * 3, t * 3)
    check(x * x, t * t)
    check(x + x, t + t)
    check(x + 1000, t + 1000)       # a Python int is converted (wrapped) to the tensor's dtype, as torch
    check(x / 2, t / 2)
    check(x * 0.5, t * 0.5)
    check(x ** 2, t ** 2)
    check(-x if name != "uint8" else x, -t if name != "uint8" else t)
    check(x.abs() if name != "uint8" else x, t.abs() if name != "uint8" else t)
    check(dg.maximum(x, dg.tensor(0, dtype=x.dtype)), torch.maximum(t, torch.tensor(0, dtype=t.dtype)))
    for op in ("lt", "le", "gt", "ge", "eq", "ne"):
        check(getattr(x, op)(3), getattr(t, op)(3))
    check(dg.where(x > 3, x, dg.tensor(7, dtype=x.dtype)), torch.where(t > 3, t, torch.tensor(7, dtype=t.dtype)))
    check(x.clamp(0, 5), t.clamp(0, 5))


def test_int8_wraparound_exact(dg):
    x = dg.tensor([127, -128], dtype=dg.int8)
    assert (x + 1).tolist() == [-128, -127]
    assert (x - 1).tolist() == [126, 127]
    assert (dg.tensor([255], dtype=dg.uint8) + 1).tolist() == [0]
    assert (dg.tensor([0], dtype=dg.uint8) - 1).tolist() == [255]


@pytest.mark.parametrize("name", INTS)
def test_integer_reductions(dg, name):
    vals = [[1, 2, 100], [3, 100, 7]]
    x, t = dgt(dg, vals, name), tt(vals, name)
    check(x.sum(), t.sum())                 # int64, as torch: no overflow in small dtypes
    check(x.sum(0), t.sum(0))
    check(x.amax(1), t.amax(1))
    check(x.amin(), t.amin())
    check(x.max(), t.max())
    check(x.argmax(), t.argmax())
    check(x.argmin(1), t.argmin(1))


@pytest.mark.parametrize("name", INTS + ["bool"])
def test_integer_shape_ops_and_indexing(dg, name):
    vals = [[1, 0, 1], [0, 1, 1]] if name == "bool" else [[1, 2, 3], [4, 5, 6]]
    x, t = dgt(dg, vals, name), tt(vals, name)
    check(x.T.contiguous(), t.T.contiguous())
    check(x.reshape(3, 2), t.reshape(3, 2))
    check(dg.cat([x, x], 1), torch.cat([t, t], 1))
    check(x[1], t[1])
    check(x[:, 1:], t[:, 1:])
    for idx_dtype in ("int64", "int32"):
        i_dg, i_t = dgt(dg, [1, 0, 1], idx_dtype), tt([1, 0, 1], idx_dtype)
        check(x[i_dg], t[i_t])
        check(x.index_select(1, i_dg), t.index_select(1, i_t))
    check(x[x > 0] if name != "bool" else x[x], t[t > 0] if name != "bool" else t[t])


def test_integer_setitem_and_inplace(dg):
    x = dg.tensor([1, 2, 3], dtype=dg.int16)
    x[0] = 400
    t = torch.tensor([1, 2, 3], dtype=torch.int16)
    t[0] = 400
    check(x, t)
    x += 1
    t += 1
    check(x, t)
    with pytest.raises(RuntimeError):
        x += 0.5                                  # a float result is not written into an int tensor


@pytest.mark.parametrize("src", NAMES)
def test_conversions_every_pair(dg, src):
    vals = values(src) if src != "bool" else [True, False, True]
    x, t = dgt(dg, vals, src), tt(vals, src)
    for dst in NAMES:
        check(x.to(getattr(dg, dst)), t.to(getattr(torch, dst)))


def test_float_to_int_out_of_range(dg):
    vals = [300.0, -1.5, 2.7, -129.0]
    for name in INTS:
        check(dg.tensor(vals).to(getattr(dg, name)), torch.tensor(vals).to(getattr(torch, name)))


def test_legacy_methods_and_constructors(dg):
    x = dg.tensor([1.7, -2.2])
    t = torch.tensor([1.7, -2.2])
    for m in ("int", "short", "char", "byte", "half", "bfloat16", "long", "float", "double", "bool"):
        check(getattr(x, m)(), getattr(t, m)())
    for cls in ("IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "HalfTensor", "BFloat16Tensor"):
        check(getattr(dg, cls)([1, 2]), getattr(torch, cls)([1, 2]))
        assert isinstance(getattr(dg, cls)([1, 2]), getattr(dg, cls))
        assert getattr(dg, cls)([1]).type() == "dyngrad." + cls
    assert x.type(dg.IntTensor).dtype is dg.int32
    assert x.type("torch.ByteTensor").dtype is dg.uint8


@pytest.mark.parametrize("name", INTS + ["bool", "float16"])
def test_numpy_round_trip(dg, name):
    arr = np.array([1, 0, 3], dtype=name)
    x = dg.from_numpy(arr)
    assert x.dtype is getattr(dg, name)
    assert x.numpy().dtype == arr.dtype
    np.testing.assert_array_equal(x.numpy(), arr)
    y = dg.tensor(arr)                 # a copy keeps the dtype too
    assert y.dtype is getattr(dg, name)
    assert dg.tensor(arr[0]).dtype is getattr(dg, name)
    np.testing.assert_array_equal(np.asarray(y), arr)
    z = pickle.loads(pickle.dumps(y))
    assert z.dtype is y.dtype and z.tolist() == y.tolist()


def test_creation_with_dtypes(dg):
    for name in NAMES:
        d, td = getattr(dg, name), getattr(torch, name)
        check(dg.zeros(2, dtype=d), torch.zeros(2, dtype=td))
        check(dg.ones(2, dtype=d), torch.ones(2, dtype=td))
        check(dg.full((2,), 3, dtype=d), torch.full((2,), 3, dtype=td))
        if name != "bool":
            check(dg.arange(4, dtype=d), torch.arange(4, dtype=td))
            check(dg.eye(2, dtype=d), torch.eye(2, dtype=td))
    check(dg.tensor([1, 2], dtype=dg.uint8), torch.tensor([1, 2], dtype=torch.uint8))
    check(dg.linspace(0, 1, 5, dtype=dg.bfloat16), torch.linspace(0, 1, 5, dtype=torch.bfloat16))


# ----- float16 / bfloat16 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HALVES)
def test_half_arithmetic_in_float32(dg, name):
    vals = [1.0, 2.5, -3.3, 1000.7, 1e-3]
    other = [0.1, 3.0, 7.7, -0.9, 1e-4]
    x, t = dgt(dg, vals, name), tt(vals, name)
    y, u = dgt(dg, other, name), tt(other, name)
    check(x, t)                                   # storage rounds to nearest even, as torch
    for fn in (lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
               lambda a, b: a * 1.1, lambda a, b: a + 3, lambda a, b: -a, lambda a, b: a.abs(),
               lambda a, b: a.exp(), lambda a, b: a.tanh(), lambda a, b: a.sqrt(), lambda a, b: a.sigmoid(),
               lambda a, b: a.relu(), lambda a, b: a < b, lambda a, b: a == a, lambda a, b: a.sum(),
               lambda a, b: a.amax(), lambda a, b: a.argmax(), lambda a, b: a.clamp(-1, 2),
               lambda a, b: dg.where(a > 0, a, b) if isinstance(a, type(x)) else torch.where(a > 0, a, b)):
        check(fn(x, y), fn(t, u))
    check(x + dg.tensor([1], dtype=dg.int32), t + torch.tensor([1], dtype=torch.int32))
    check(x + dg.tensor([1.0]), t + torch.tensor([1.0]))


@pytest.mark.parametrize("name", ["int8", "uint8", "int32", "float16", "bfloat16"])
def test_matmul_softmax_computed_wide(dg, name):
    """matmul (int8 wraps, halves accumulate in float32) and softmax of the half types, as torch."""
    vals = [[100, 3], [7, -2]] if name != "uint8" else [[100, 3], [7, 200]]
    if name in HALVES:
        vals = [[1.5, -0.3], [2.7, 0.01]]
    x, t = dgt(dg, vals, name), tt(vals, name)
    check(x @ x, t @ t)
    check(dg.matmul(x[0], x), torch.matmul(t[0], t))
    if name in HALVES:
        check(dg.softmax(x, 1), torch.softmax(t, 1))
        check(dg.log_softmax(x, 0), torch.log_softmax(t, 0))
        check(dg.stack([x, x]), torch.stack([t, t]))
        i, ti = dg.tensor([0, 0, 2]), torch.tensor([0, 0, 2])
        src, tsrc = dgt(dg, [1.0, 2.0, 3.5], name), tt([1.0, 2.0, 3.5], name)
        check(dg.zeros(3, dtype=x.dtype).index_add(0, i, src), torch.zeros(3, dtype=t.dtype).index_add(0, ti, tsrc))
        check(dg.zeros(3, dtype=x.dtype).scatter_add(0, i, src), torch.zeros(3, dtype=t.dtype).scatter_add(0, ti, tsrc))
        y = dgt(dg, vals, name).requires_grad_()
        (y.softmax(1) * dgt(dg, [[1.0, 2.0], [3.0, 4.0]], name)).sum().backward()
        u = tt(vals, name).requires_grad_()
        (u.softmax(1) * tt([[1.0, 2.0], [3.0, 4.0]], name)).sum().backward()
        assert y.grad.dtype is y.dtype
        np.testing.assert_allclose(y.grad.float().tolist(), u.grad.float().tolist(), atol=2e-2)


@pytest.mark.parametrize("name", HALVES)
def test_half_random(dg, name):
    """rand of a half type stays in [0, 1) on the dtype's grid; randn and dropout give the dtype."""
    dg.manual_seed(0)
    d = getattr(dg, name)
    u = dg.rand(4000, dtype=d)
    assert u.dtype is d
    vals = np.asarray(u.float().tolist())
    assert vals.min() >= 0 and vals.max() < 1 and 0.45 < vals.mean() < 0.55
    grid = 2048 if name == "float16" else 256
    np.testing.assert_array_equal(vals * grid, np.floor(vals * grid))
    n = dg.randn(4000, dtype=d)
    assert n.dtype is d and abs(float(n.float().mean())) < 0.1 and 0.9 < float(n.float().std()) < 1.1
    x = dg.ones(1000, dtype=d)
    y = dg.nn.functional.dropout(x, 0.5, training=True)
    assert y.dtype is d and set(np.unique(y.float().tolist())) <= {0.0, 2.0}


def test_half_specials(dg):
    vals = [65504.0, 65520.0, 1e-8, 6e-8, float("inf"), float("nan"), -0.0, 3.4e38]
    for name in HALVES:
        check(dgt(dg, vals, name), tt(vals, name))
        check(dgt(dg, vals, name).to(dg.float64), tt(vals, name).to(torch.float64))
    b = dg.tensor([1.0, 2.0], dtype=dg.bfloat16)
    with pytest.raises(TypeError):
        b.numpy()                                 # numpy has no bfloat16 (torch: TypeError too)
    assert b.tolist() == [1.0, 2.0]
    assert b[0].item() == 1.0
    assert "dtype=dyngrad.bfloat16" in repr(b)
    z = pickle.loads(pickle.dumps(b))
    assert z.dtype is dg.bfloat16 and z.tolist() == [1.0, 2.0]
    h = dg.tensor([1.0, 2.0], dtype=dg.float16, requires_grad=True)
    assert h.numpy(force=True).dtype == np.float16


# ----- finfo / iinfo / default dtype ------------------------------------------------------------------------------

def test_finfo_iinfo(dg):
    for name in ("float16", "bfloat16", "float32", "float64"):
        f, tf = dg.finfo(getattr(dg, name)), torch.finfo(getattr(torch, name))
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
            assert getattr(f, field) == getattr(tf, field), (name, field)
        assert repr(f) == repr(tf)
    assert dg.finfo().dtype == "float32"
    for name in INTS:
        i, ti = dg.iinfo(getattr(dg, name)), torch.iinfo(getattr(torch, name))
        assert (i.bits, i.min, i.max, i.dtype) == (ti.bits, ti.min, ti.max, ti.dtype)
        assert repr(i) == repr(ti)
    with pytest.raises(TypeError):
        dg.finfo(dg.int32)
    with pytest.raises(TypeError):
        dg.iinfo(dg.float32)


def test_default_dtype(dg):
    assert dg.get_default_dtype() is dg.float32
    with pytest.raises(TypeError):
        dg.set_default_dtype(dg.int32)
    try:
        dg.set_default_dtype(dg.float64)
        assert dg.get_default_dtype() is dg.float64
        assert dg.tensor([1.5]).dtype is dg.float64
        assert (dg.tensor([1]) + 0.5).dtype is dg.float64
        assert dg.tensor([1]).exp().dtype is dg.float64
        assert dg.zeros(2).dtype is dg.float64
        assert dg.tensor([1.5], dtype=dg.float32).dtype is dg.float32
    finally:
        dg.set_default_dtype(dg.float32)
    assert dg.tensor([1.5]).dtype is dg.float32
    assert dg.is_floating_point(dg.tensor([1.0], dtype=dg.float16))
    assert not dg.is_floating_point(dg.tensor([1], dtype=dg.int8))


def test_integer_division_by_zero(dg):
    for name in INTS:
        x = dgt(dg, [1, 2], name)
        zero = dgt(dg, [0, 1], name)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            x // zero
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            x % zero
        check(x / zero, tt([1, 2], name) / tt([0, 1], name))   # true division: inf, no error

"""PyTorch as a third oracle: the op table's forward values and gradients (float64, same inputs), the exact
values at kinks, and the exception types of test_errors, compared with torch 2.13. Skipped when torch is absent.
"""
import pytest

torch = pytest.importorskip("torch")

from helpers import as_spec, check_exact, check_torch, differentiable, draw_inputs, seed_of  # noqa: E402
from test_errors import ERRORS  # noqa: E402
from test_ops import EXACT, OPS  # noqa: E402

# Rows whose dyngrad behaviour deliberately differs from torch's, with the reason (the test documents it).
NOT_LIKE_TORCH = {}

TORCH_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases))
               if op.torch and op.name not in NOT_LIKE_TORCH]


@pytest.mark.parametrize("op,case", TORCH_CASES)
def test_op_matches_torch(dg, op, case):
    specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
             for s in op.cases[case]]
    arrays = draw_inputs(specs, seed_of(op.name, op.cases[case]))
    diff = differentiable(specs, arrays) if op.grad else []
    check_torch(dg, op.fn, arrays, diff, name=op.name)


@pytest.mark.parametrize("case", EXACT, ids=[c[0] for c in EXACT])
def test_exact_expectations_are_torchs(case):
    """The expected values at kinks in test_ops.EXACT are torch's conventions (checked on torch itself)."""
    name, fn, vals, expect, expect_grad = case
    check_exact(torch, fn, vals, expect, expect_grad, name=name)


TORCH_ERRORS = {
    # rows of test_errors.ERRORS that also make sense on torch (same code, torch module)
    "backward_twice", "saved_modified", "nonscalar_backward", "no_grad_fn", "leaf_inplace_add_", "leaf_inplace_mul_",
    "int_requires_grad", "broadcast_add", "broadcast_mul", "matmul_inner", "matmul_vec", "matmul_batched",
    "reshape_size", "view_strides", "dim_sum", "dim_mean", "dim_softmax", "dim_transpose", "dim_negative",
    "dim_unsqueeze", "dim_0d", "index_int", "index_int_dim1", "index_list", "index_too_many", "index_select_range",
    "embedding_range", "nontensor_exp", "nontensor_add_str", "cat_shapes", "stack_shapes", "expand_bad",
    "conv2d_channels", "custom_wrong_arity", "bool_ambiguous", "requires_grad_nonleaf", "dropout_p", "max_empty",
    "item_many", "cross_entropy_shapes", "index_float", "masked_fill_int_mask",
}


class TorchAsDg:
    """torch with the few spellings test_errors uses on dg (nn functions at the top level)."""

    def __getattr__(self, name):
        if hasattr(torch.nn.functional, name):
            return getattr(torch.nn.functional, name)
        return getattr(torch, name)


@pytest.mark.parametrize("case", [e for e in ERRORS if e[0] in TORCH_ERRORS], ids=lambda e: e[0])
def test_error_types_are_torchs(case):
    name, fn, exc, _ = case
    try:
        fn(TorchAsDg())
    except Exception as err:  # noqa: BLE001
        assert isinstance(err, exc), f"{name}: torch raises {type(err).__name__}, the shared test expects {exc}"
    else:
        pytest.fail(f"{name}: torch does not raise")


# ---- integer tensors next to Python numbers that do not fit their dtype (issue 23) ----
# torch keeps such a number an int64 "wrapped number": a float result (div, copysign, xlogy, atan2...) uses its true
# value, an integer one (add, mul...) wraps it into the tensor's dtype. It ranks below 0-d tensors too: a 0-d uint8
# tensor / 256 divides by 256. Every integer dtype x tensor with dims or 0-d x out-of-range (and in-range) number x
# op, both sides, in place and through alpha/value, against torch; an error must be torch's too.

import numpy as np  # noqa: E402

INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool"]
SCALARS = [256, 1000, -2, -129, 40000, 2 ** 31, 2 ** 40, 3, 2.5, -1e10]
SCALAR_OPS = {
    "div": lambda m, t, s: t / s, "rdiv": lambda m, t, s: s / t, "true_divide": lambda m, t, s: m.true_divide(t, s),
    "copysign": lambda m, t, s: m.copysign(t, s), "xlogy": lambda m, t, s: m.xlogy(t, s),
    "atan2": lambda m, t, s: m.atan2(t, s), "add": lambda m, t, s: t + s, "sub": lambda m, t, s: t - s,
    "mul": lambda m, t, s: t * s, "radd": lambda m, t, s: s + t, "eq": lambda m, t, s: t == s,
    "lt": lambda m, t, s: t < s, "maximum": lambda m, t, s: m.clamp(t, min=s), "pow": lambda m, t, s: t ** s,
    "floor_divide": lambda m, t, s: t // s, "remainder": lambda m, t, s: t % s, "where": lambda m, t, s:
    m.where(t > 1, t, s), "hypot": lambda m, t, s: m.hypot(t.float(), m.tensor(float(s))),
    "add_alpha": lambda m, t, s: m.add(t, s, alpha=2), "sub_alpha": lambda m, t, s: m.sub(t, 1, alpha=s),
    "addcmul": lambda m, t, s: m.addcmul(t, t, t, value=s), "add_": lambda m, t, s: t.add_(s),
    "mul_": lambda m, t, s: t.mul_(s), "div_": lambda m, t, s: t.div_(s), "ge": lambda m, t, s: m.ge(t, s),
    "rsub": lambda m, t, s: s - t, "fmod": lambda m, t, s: m.fmod(t, s), "div_floor": lambda m, t, s:
    m.div(t, s, rounding_mode="floor"), "bitwise_and": lambda m, t, s: t & s,
}
VALUES = [7, 100, 0, 1]


def _outcome(m, op, dtype, scalar, zero_d):
    values = VALUES if dtype != "bool" else [True, False, True, True]
    tensors = [m.tensor(v, dtype=getattr(m, dtype)) for v in values] if zero_d else \
        [m.tensor(values, dtype=getattr(m, dtype))]
    results = []
    try:
        for t in tensors:
            results.append(SCALAR_OPS[op](m, t, scalar))
    except (RuntimeError, TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        return "error", type(exc).__name__
    return str(results[0].dtype).split(".")[-1], np.asarray([r.numpy() for r in results], dtype=np.float64)


@pytest.mark.parametrize("zero_d", [False, True], ids=["dims", "0-d"])
@pytest.mark.parametrize("op", sorted(SCALAR_OPS))
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_tensor_and_unfitting_number_as_torch(dg, dtype, op, zero_d):
    for scalar in SCALARS:
        got, want = _outcome(dg, op, dtype, scalar, zero_d), _outcome(torch, op, dtype, scalar, zero_d)
        where = f"{dtype} {'0-d ' if zero_d else ''}tensor {op} {scalar!r}"
        if want[0] == "error":
            assert got[0] == "error", f"{where}: torch raises {want[1]}, dyngrad gives {got}"
            continue
        assert got[0] == want[0], f"{where}: dtype {got[0]} (torch {want[0]}), {got[1]}"
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=0, equal_nan=True, err_msg=where)

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

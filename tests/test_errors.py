"""Every error of docs/design.md ("Error messages") and the bad inputs of issue 2: the Python exception type torch
raises, and a message matched by ONE regex against both engines (the shared text is the oracle).

Each row: (id, fn(dg), exception type, regex). test_torch_oracle.py runs the rows marked with `torch_too` on torch
to confirm the exception type is torch's.
"""
import re

import numpy as np
import pytest

from helpers import square_function


def leaf(dg, values, dtype="float64"):
    return dg.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def m34(dg):
    return dg.tensor(np.arange(12.0).reshape(3, 4))


def backward_twice(dg):
    y = leaf(dg, [1.0, 2.0]).exp().sum()
    y.backward()
    y.backward()


def saved_modified(dg):
    a = leaf(dg, [1.0, 2.0]).exp()        # ExpBackward saves its output, a
    loss = a.sum()
    a.add_(1)
    (loss + a.sum()).backward()


def custom_wrong_arity(dg):
    class WrongArity(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad

    WrongArity.apply(leaf(dg, [1.0]), leaf(dg, [2.0])).sum().backward()


def custom_backward_twice(dg):
    y = square_function(dg).apply(leaf(dg, [3.0])).sum()
    y.backward()
    y.backward()


DIM_OPS = [
    ("sum", lambda dg, t: t.sum(5)),
    ("mean", lambda dg, t: t.mean(dim=5)),
    ("var", lambda dg, t: t.var(5)),
    ("amax", lambda dg, t: t.amax(5)),
    ("max", lambda dg, t: t.max(5)),
    ("argmax", lambda dg, t: t.argmax(5)),
    ("logsumexp", lambda dg, t: t.logsumexp(5)),
    ("softmax", lambda dg, t: t.softmax(5)),
    ("log_softmax", lambda dg, t: t.log_softmax(5)),
    ("transpose", lambda dg, t: t.transpose(0, 5)),
    ("squeeze", lambda dg, t: t.squeeze(5)),
    ("flatten", lambda dg, t: t.flatten(5)),
    ("cat", lambda dg, t: dg.cat([t, t], 5)),
    ("gather", lambda dg, t: t.gather(5, t.long())),
    ("index_select", lambda dg, t: t.index_select(5, t.long()[0])),
]

ERRORS = [
    # ---- the shared messages of docs/design.md ----
    ("backward_twice", backward_twice, RuntimeError,
     r"^backward\(\) reached ExpBackward, whose saved tensors were already freed by an earlier backward\(\)\. "
     r"Pass retain_graph=True to the first backward\(\) if you need to backpropagate through this graph twice\."
     r" \(ExpBackward was created at .*test_errors\.py:\d+\)$"),   # the call site (issue 5)
    ("custom_backward_twice", custom_backward_twice, RuntimeError,
     r"^backward\(\) reached SquareBackward, whose saved tensors were already freed .*retain_graph=True"),
    ("saved_modified", saved_modified, RuntimeError,
     r"^a tensor of shape \(2,\) saved by ExpBackward for the backward pass was modified in place: it is at "
     r"version 1, but version 0 was saved\. Use an out-of-place op \(x = x \+ 1\) instead of an in-place one "
     r"\(x \+= 1\), or clone\(\) before modifying\. \(ExpBackward was created at .*test_errors\.py:\d+\)$"),
    ("nonscalar_backward", lambda dg: (leaf(dg, [1.0, 2.0, 3.0]) * 2).backward(), RuntimeError,
     r"^backward\(\) without a gradient argument needs a scalar output, but this output has shape \(3,\)\. "
     r"Call \.sum\(\) first or pass gradient=\.\.\.$"),
    ("nonscalar_grad", lambda dg: dg.autograd.grad(leaf(dg, [[1.0, 2.0]]) * 2, []), RuntimeError,
     r"scalar output, but this output has shape \(1, 2\)"),
    ("no_grad_fn", lambda dg: dg.tensor([1.0]).sum().backward(), RuntimeError,
     r"^backward\(\): this tensor does not require grad and has no grad_fn\. Set requires_grad=True on the leaves "
     r"you want gradients for\.$"),
    ("no_grad_fn_under_no_grad", lambda dg: _under_no_grad(dg, lambda: (leaf(dg, [1.0]) * 2).sum()).backward(),
     RuntimeError, r"^backward\(\): this tensor does not require grad"),
    ("leaf_inplace_add_", lambda dg: leaf(dg, [1.0]).add_(1), RuntimeError,
     r"^add_: a leaf tensor that requires grad is being used in an in-place operation\. Wrap it in `with "
     r"no_grad\(\):` or operate on a clone\.$"),
    ("leaf_inplace_iadd", lambda dg: _iadd(leaf(dg, [1.0]), 1.0), RuntimeError,
     r"^add_: a leaf tensor that requires grad is being used in an in-place operation"),
    ("leaf_inplace_mul_", lambda dg: leaf(dg, [1.0]).mul_(2), RuntimeError, r"^mul_: a leaf tensor that requires grad"),
    ("leaf_inplace_zero_", lambda dg: leaf(dg, [1.0]).zero_(), RuntimeError, r"^\w*(zero_|fill_)\w*: a leaf tensor"),
    ("leaf_inplace_setitem", lambda dg: leaf(dg, [1.0, 2.0]).__setitem__(0, 5.0), RuntimeError,
     r"^__setitem__: a leaf tensor that requires grad"),
    ("leaf_inplace_view", lambda dg: leaf(dg, [[1.0, 2.0]])[0].mul_(2), RuntimeError,
     r"^mul_: a leaf tensor that requires grad"),
    ("int_requires_grad", lambda dg: dg.tensor([1, 2], requires_grad=True), RuntimeError,
     r"^only floating-point tensors can require gradients; this tensor is int64\.$"),
    ("int_requires_grad_setter", lambda dg: setattr(dg.tensor([True]), "requires_grad", True), RuntimeError,
     r"^only floating-point tensors can require gradients; this tensor is bool\.$"),
    ("int_requires_grad_zeros", lambda dg: dg.zeros(2, dtype=dg.int64, requires_grad=True), RuntimeError,
     r"^only floating-point tensors can require gradients; this tensor is int64\.$"),
    ("broadcast_add", lambda dg: m34(dg) + dg.zeros(5), RuntimeError,
     r"^add: shapes \(3, 4\) and \(5,\) cannot be broadcast: dimension -1 is 4 in the first and 5 in the "
     r"second\.$"),
    ("broadcast_mul", lambda dg: dg.zeros(2, 3, 4) * dg.zeros(5, 4), RuntimeError,
     r"^mul: shapes \(2, 3, 4\) and \(5, 4\) cannot be broadcast: dimension -2 is 3 in the first and 5 in the "
     r"second\.$"),
    ("broadcast_sub_fn", lambda dg: dg.sub(dg.zeros(2), dg.zeros(3)), RuntimeError,
     r"^sub: shapes \(2,\) and \(3,\) cannot be broadcast"),
    ("broadcast_where", lambda dg: dg.where(dg.zeros(3, dtype=dg.bool), dg.zeros(3), dg.zeros(2)), RuntimeError,
     r"^where: shapes .* cannot be broadcast"),
    ("broadcast_maximum", lambda dg: dg.maximum(dg.zeros(3, 1), dg.zeros(2, 4)), RuntimeError,
     r"^maximum: shapes \(3, 1\) and \(2, 4\) cannot be broadcast: dimension -2 is 3 in the first and 2"),
    ("matmul_inner", lambda dg: m34(dg) @ dg.zeros(5, 6), RuntimeError,
     r"^matmul: inner dimensions do not match: \(3, 4\) @ \(5, 6\) \(4 != 5\)\.$"),
    ("matmul_vec", lambda dg: dg.matmul(dg.zeros(3), dg.zeros(4)), RuntimeError,
     r"^matmul: inner dimensions do not match: \(3,\) @ \(4,\) \(3 != 4\)\.$"),
    ("matmul_batched", lambda dg: dg.zeros(2, 3, 4) @ dg.zeros(2, 3, 4), RuntimeError,
     r"^matmul: inner dimensions do not match: \(2, 3, 4\) @ \(2, 3, 4\) \(4 != 3\)\.$"),
    ("reshape_size", lambda dg: m34(dg).reshape(5), RuntimeError,
     r"^reshape: shape \(5,\) is invalid for a tensor of 12 elements \(shape \(3, 4\)\)\.$"),
    ("reshape_infer", lambda dg: m34(dg).reshape(-1, 5), RuntimeError,
     r"^reshape: shape \(-1, 5\) is invalid for a tensor of 12 elements \(shape \(3, 4\)\)\.$"),
    ("view_size", lambda dg: m34(dg).view(7), RuntimeError, r"^view: shape \(7,\) is invalid for a tensor of 12"),
    ("view_strides", lambda dg: m34(dg).T.view(12), RuntimeError,
     r"^view: cannot view a tensor of shape \(4, 3\) and strides \(1, 4\) as \(12,\); use reshape\(\) instead\.$"),
    *[(f"dim_{op}", (lambda f: lambda dg: f(dg, m34(dg)))(f), IndexError,
       rf"^{op}: dim 5 is out of range for a tensor of 2 dimensions \(expected -2\.\.1\)\.$") for op, f in DIM_OPS],
    ("dim_negative", lambda dg: m34(dg).sum(-3), IndexError,
     r"^sum: dim -3 is out of range for a tensor of 2 dimensions \(expected -2\.\.1\)\.$"),
    ("dim_unsqueeze", lambda dg: m34(dg).unsqueeze(3), IndexError,
     r"^unsqueeze: dim 3 is out of range for a tensor of 3 dimensions \(expected -3\.\.2\)\.$"),
    ("dim_0d", lambda dg: dg.tensor(1.0).sum(1), IndexError,
     r"^sum: dim 1 is out of range for a tensor of 0 dimensions \(expected -1\.\.0\)\.$"),
    ("index_int", lambda dg: m34(dg)[3], IndexError, r"^index 3 is out of range for dimension 0 of size 3\.$"),
    ("index_int_dim1", lambda dg: m34(dg)[:, -5], IndexError,
     r"^index -5 is out of range for dimension 1 of size 4\.$"),
    ("index_list", lambda dg: m34(dg)[[0, 5]], IndexError, r"index 5 is out of range for dimension 0 of size 3\."),
    ("index_tensor", lambda dg: m34(dg)[:, dg.tensor([1, 4])], IndexError,
     r"index 4 is out of range for dimension 1 of size 4\."),
    ("index_too_many", lambda dg: m34(dg)[0, 0, 0], IndexError, r"too many indices .*\(3, 4\)"),
    ("index_setitem", lambda dg: m34(dg).__setitem__(3, 1.0), IndexError,
     r"^index 3 is out of range for dimension 0 of size 3\.$"),
    ("index_select_range", lambda dg: m34(dg).index_select(0, dg.tensor([0, 3])), IndexError,
     r"^index_select: index 3 is out of range for dimension 0 of size 3\.$"),
    ("gather_range", lambda dg: m34(dg).gather(1, dg.tensor([[4]])), RuntimeError,       # torch's type
     r"^gather: index 4 is out of range for dimension 1 of size 4\.$"),
    ("gather_negative", lambda dg: m34(dg).gather(1, dg.tensor([[-1]])), RuntimeError,
     r"^gather: index -1 is out of range for dimension 1 of size 4\.$"),
    ("scatter_add_range", lambda dg: dg.zeros(3).scatter_add(0, dg.tensor([5]), dg.ones(1)), RuntimeError,
     r"^scatter_add: index 5 is out of bounds for dimension 0 with size 3\.$"),
    ("data_int_on_requires_grad", lambda dg: setattr(leaf(dg, [1.0, 2.0]), "data", dg.tensor([1, 2])),
     RuntimeError, r"^data: .*requires grad.*floating.*int64"),
    ("int_to_negative_power", lambda dg: dg.tensor([2]) ** -1, RuntimeError, r"integers to negative integer powers"),
    ("uint64_too_large", lambda dg: dg.tensor(np.array([2 ** 63 + 5], dtype=np.uint64)), OverflowError,
     r"^tensor: .*uint64.*int64"),
    ("embedding_range", lambda dg: dg.embedding(dg.tensor([0, 6]), dg.zeros(6, 2)), IndexError,
     r"^embedding: index 6 is out of range for dimension 0 of size 6\.$"),
    ("index_float_tensor", lambda dg: m34(dg)[dg.tensor([0.0, 1.0])], IndexError,
     r"tensors used as indices must be int64 or bool.*float32"),
    ("index_float", lambda dg: m34(dg)[1.5], (IndexError, TypeError), r"float"),
    ("index_select_float", lambda dg: m34(dg).index_select(0, dg.tensor([0.0])), IndexError,
     r"^index_select: .*int64.*float32"),
    ("gather_float", lambda dg: m34(dg).gather(0, dg.tensor([[0.0]])), (IndexError, TypeError),
     r"^gather: .*int64.*float32"),
    ("embedding_float", lambda dg: dg.embedding(dg.tensor([0.0]), dg.zeros(6, 2)), (IndexError, RuntimeError),
     r"^embedding: .*int64.*float32"),
    # a non-bool mask: RuntimeError, as torch
    ("masked_fill_int_mask", lambda dg: m34(dg).masked_fill(dg.zeros(3, 4, dtype=dg.int64), 0.0), RuntimeError,
     r"^masked_fill: .*bool.*int64"),
    ("nontensor_exp", lambda dg: dg.exp([1.0, 2.0]), TypeError, r"exp"),
    ("nontensor_add_str", lambda dg: m34(dg) + "a", TypeError, r""),
    ("nontensor_add_fn", lambda dg: dg.add("a", m34(dg)), TypeError, r"^add: .*str"),
    ("nontensor_matmul", lambda dg: dg.matmul(m34(dg), [1.0]), TypeError, r"matmul"),
    ("nontensor_cat", lambda dg: dg.cat([m34(dg), 3]), TypeError, r"cat"),
    ("nontensor_softmax", lambda dg: dg.softmax(None, 0), TypeError, r"softmax"),
    ("cat_shapes", lambda dg: dg.cat([dg.zeros(2, 3), dg.zeros(2, 4)]), RuntimeError,
     r"^cat: (?=.*\(2, 3\))(?=.*\(2, 4\))"),
    ("stack_shapes", lambda dg: dg.stack([dg.zeros(2), dg.zeros(3)]), RuntimeError, r"^stack: .*\(2,\).*\(3,\)"),
    ("expand_bad", lambda dg: dg.zeros(3, 2).expand(3, 4), RuntimeError, r"^expand: .*"),
    ("permute_bad", lambda dg: dg.zeros(3, 2).permute(0, 0), RuntimeError, r"^permute: .*"),
    ("max_empty", lambda dg: dg.zeros(0).max(), RuntimeError,
     r"^(max|amax): .*empty|^(max|amax): .*\(0,\)"),
    ("cross_entropy_target", lambda dg: dg.cross_entropy(dg.zeros(2, 3), dg.tensor([0, 3])), IndexError,
     r"^cross_entropy: .*3.*out of range|^cross_entropy: .*target 3"),
    ("cross_entropy_shapes", lambda dg: dg.cross_entropy(dg.zeros(2, 3), dg.tensor([0, 1, 2])),
     ValueError, r"^cross_entropy: (?=.*\(2, 3\))(?=.*\(3,\))"),
    ("conv2d_channels", lambda dg: dg.conv2d(dg.zeros(1, 3, 5, 5), dg.zeros(2, 4, 3, 3)), RuntimeError,
     r"^conv2d: (?=.*\(1, 3, 5, 5\))(?=.*\(2, 4, 3, 3\))"),
    ("linear_shapes", lambda dg: dg.linear(dg.zeros(2, 3), dg.zeros(4, 5)), RuntimeError, r"matmul|linear"),
    ("mse_loss_shapes", lambda dg: dg.mse_loss(dg.zeros(2, 3), dg.zeros(4)), RuntimeError, r"\(2, 3\).*\(4,\)"),
    ("layer_norm_shape", lambda dg: dg.layer_norm(dg.zeros(2, 3), (4,)), RuntimeError,
     r"^layer_norm: (?=.*\(4,\))(?=.*\(2, 3\))"),
    ("one_hot_range", lambda dg: dg.one_hot(dg.tensor([0, 5]), 3), RuntimeError, r"^one_hot: .*5.*3"),
    ("dropout_p", lambda dg: dg.dropout(dg.zeros(3), 1.5), ValueError, r"^dropout: .*1\.5"),
    ("backward_gradient_shape", lambda dg: (leaf(dg, [1.0, 2.0]) * 2).backward(dg.zeros(3)), RuntimeError,
     r"\(3,\).*\(2,\)"),
    ("item_many", lambda dg: dg.zeros(3).item(), RuntimeError, r"\b3\b"),
    ("bool_ambiguous", lambda dg: bool(dg.zeros(3)), RuntimeError, r"ambiguous"),
    ("custom_wrong_arity", custom_wrong_arity, RuntimeError,
     r"^WrongArity\.backward returned 1 gradient, but forward had 2 inputs\.$"),
    ("requires_grad_nonleaf", lambda dg: setattr(leaf(dg, [1.0]) * 2, "requires_grad", False), RuntimeError,
     r"leaf"),
    # a Tensor.__new__ whose __init__ never ran: the same TypeError on both engines (issue 11)
    ("uninitialised_tensor", lambda dg: dg.Tensor.__new__(dg.Tensor).shape, TypeError, r"never initialised"),
    ("uninitialised_operand", lambda dg: dg.ones(2) + dg.Tensor.__new__(dg.Tensor), TypeError,
     r"never initialised"),
]


def test_reading_grad_of_a_non_leaf_warns_as_torch(dg):
    """torch warns (UserWarning) when .grad of a non-leaf that does not retain its grad is read (issue 11)."""
    import warnings
    y = leaf(dg, [1.0, 2.0]) * 2
    with pytest.warns(UserWarning, match=r"non-leaf tensor .*retain_grad\(\)"):
        assert y.grad is None
    y.retain_grad()
    x = leaf(dg, [1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad is None and x.grad is None          # retained non-leaf, and a leaf: no warning


def _under_no_grad(dg, f):
    with dg.no_grad():
        return f()


def _iadd(t, v):
    t += v
    return t


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
def test_error(dg, case):
    name, fn, exc, pattern = case
    with pytest.raises(exc) as info:
        fn(dg)
    message = str(info.value)
    assert re.search(pattern, message), f"{name}: message {message!r} does not match {pattern!r}"


def test_gradcheck_reports_wrong_gradients(dg):
    class BadSquare(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x                         # should be 2 * x

    x = leaf(dg, [0.5, -1.0])
    assert dg.autograd.gradcheck(lambda t: t * t, (x,))
    assert dg.autograd.gradcheck(BadSquare.apply, (x,), raise_exception=False) is False
    with pytest.raises(dg.autograd.GradcheckError, match="Jacobian mismatch"):     # torch's name, a RuntimeError
        dg.autograd.gradcheck(BadSquare.apply, (x,))
    assert issubclass(dg.autograd.GradcheckError, RuntimeError)
    assert dg.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,))


def test_no_crash_on_hostile_inputs(dg):
    """Inputs that must raise (any Python exception), never crash the process."""
    t = m34(dg)
    hostile = [
        lambda: t.reshape(-1, -1), lambda: t.view(-2, 6), lambda: dg.zeros(-1), lambda: t[::-1],
        lambda: t.expand(-2, 4), lambda: t.split(0), lambda: t.chunk(0), lambda: dg.arange(0, 10, 0),
        lambda: t.permute(0), lambda: t.gather(1, dg.tensor([[1, 2, 3, 4, 5]])), lambda: dg.stack([]),
        lambda: dg.cat([]), lambda: t[dg.tensor([True, False])], lambda: dg.conv2d(dg.zeros(1, 1, 2, 2),
                                                                                   dg.zeros(1, 1, 3, 3)),
        lambda: dg.max_pool2d(dg.zeros(1, 1, 2, 2), 3), lambda: dg.embedding(dg.tensor([-1]), dg.zeros(3, 2)),
        lambda: t.index_select(0, dg.tensor([[0]])), lambda: dg.randint(5, 2, (3,)),
        lambda: dg.one_hot(dg.tensor([-1])), lambda: dg.tensor([[1, 2], [3]]),
    ]
    for i, f in enumerate(hostile):
        with pytest.raises(Exception):
            f()


# A layer that refuses its input says which layer (its repr) before the op's own message: in a model, "matmul: inner
# dimensions do not match" named none of its Linear layers.
LAYER_ERRORS = [
    ("Linear", lambda nn, m: nn.Linear(3, 4)(m.zeros(2, 5)), RuntimeError,
     r"^Linear\(in_features=3, out_features=4, bias=True\): linear: the input \(2, 5\) has 5 features in its last "
     r"dim, but the weight \(4, 3\) expects 3\.$"),
    ("Linear, 1-D input", lambda nn, m: nn.Linear(3, 4, bias=False)(m.zeros(5)), RuntimeError,
     r"^Linear\(in_features=3, out_features=4, bias=False\): linear: the input \(5,\)"),
    ("Bilinear", lambda nn, m: nn.Bilinear(3, 4, 5)(m.zeros(2, 3), m.zeros(2, 5)), RuntimeError,
     r"^Bilinear\(in1_features=3, in2_features=4, out_features=5, bias=True\): bilinear: "),
    ("Conv1d", lambda nn, m: nn.Conv1d(3, 4, 2)(m.zeros(1, 5, 7)), RuntimeError,
     r"^Conv1d\(3, 4, kernel_size=\(2,\), stride=\(1,\)\): conv1d: .*5 channels"),
    ("Conv2d", lambda nn, m: nn.Conv2d(3, 4, 2)(m.zeros(1, 5, 7, 7)), RuntimeError,
     r"^Conv2d\(3, 4, kernel_size=\(2, 2\), stride=\(1, 1\)\): conv2d: .*5 channels"),
    ("Conv3d", lambda nn, m: nn.Conv3d(3, 4, 2)(m.zeros(1, 5, 4, 4, 4)), RuntimeError, r"^Conv3d\(3, 4, .*\): conv3d"),
    ("ConvTranspose2d", lambda nn, m: nn.ConvTranspose2d(3, 4, 2)(m.zeros(1, 5, 4, 4)), RuntimeError,
     r"^ConvTranspose2d\(3, 4, .*\): conv_transpose2d"),
    ("Embedding", lambda nn, m: nn.Embedding(3, 4)(m.tensor([5])), IndexError,
     r"^Embedding\(3, 4\): embedding: index 5 is out of range"),
    ("EmbeddingBag", lambda nn, m: nn.EmbeddingBag(3, 4)(m.tensor([[5]])), RuntimeError,
     r"^EmbeddingBag\(3, 4, mode='mean'\): embedding_bag: index 5"),
    ("LSTM", lambda nn, m: nn.LSTM(3, 4)(m.zeros(2, 1, 5)), RuntimeError,
     r"^LSTM\(3, 4\): input\.size\(-1\) must be equal to input_size\. Expected 3, got 5$"),
    ("GRU named once", lambda nn, m: nn.GRU(3, 4)(m.zeros(2, 1, 5, 1)), ValueError,
     r"^GRU\(3, 4\): Expected input to be 2D or 3D, got 4D instead$"),
    ("LSTMCell", lambda nn, m: nn.LSTMCell(3, 4)(m.zeros(2, 5)), RuntimeError,
     r"^LSTMCell\(3, 4\): input has inconsistent input_size: got 5 expected 3$"),
    ("the failing layer of a Sequential", lambda nn, m: nn.Sequential(nn.Linear(5, 3), nn.Linear(4, 2))(m.zeros(1, 5)),
     RuntimeError, r"^Linear\(in_features=4, out_features=2, bias=True\): linear: the input \(1, 3\)"),
]


@pytest.mark.parametrize("name, call, exc, pattern", LAYER_ERRORS, ids=[c[0] for c in LAYER_ERRORS])
def test_layer_errors_name_the_layer(dg, name, call, exc, pattern):
    with pytest.raises(exc) as info:
        call(dg.nn, dg)
    assert type(info.value) is exc
    assert re.search(pattern, str(info.value)), f"{name}: message {str(info.value)!r} does not match {pattern!r}"

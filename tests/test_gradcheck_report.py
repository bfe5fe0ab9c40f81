"""What gradcheck prints when it fails: the Jacobians oriented as torch.autograd.gradcheck prints them (a row per
input element, a column per output element), and the inputs themselves, never a generator object (issue 25)."""
import re

import numpy as np
import pytest


def _wrong_backward(dg):
    """f(x) = 2 * [x0, x1, 0] (2 inputs -> 3 outputs) whose backward says 3 instead of 2."""
    class Wrong(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return dg.cat([x, x[:1] * 0]) * 2

        @staticmethod
        def backward(ctx, grad):
            return grad[:2] * 3
    return Wrong.apply


def _printed_matrix(message, label):
    """The rows of the matrix printed after `label:` (numpy's or torch's print), as float lists."""
    block = message.split(label + ":", 1)[1]
    block = re.split(r"\n[a-z(]", block, maxsplit=1)[0]         # up to the next label or note
    rows = re.findall(r"\[([^\[\]]+)\]", block)
    return [[float(v) for v in re.split(r"[,\s]+", row.strip()) if v] for row in rows]


def test_jacobians_are_printed_rows_per_input(dg):
    x = dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0") as info:
        dg.autograd.gradcheck(_wrong_backward(dg), (x,))
    message = str(info.value)
    numerical, analytical = _printed_matrix(message, "numerical"), _printed_matrix(message, "analytical")
    np.testing.assert_allclose(numerical, [[2, 0, 0], [0, 2, 0]], atol=1e-6)
    np.testing.assert_allclose(analytical, [[3, 0, 0], [0, 3, 0]])


def test_orientation_matches_torch(dg):
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.gradcheck(_wrong_backward(torch), (x,), fast_mode=False)
    with pytest.raises(RuntimeError) as ours:
        dg.autograd.gradcheck(_wrong_backward(dg), (dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True),))
    for label in ("numerical", "analytical"):
        np.testing.assert_allclose(_printed_matrix(str(ours.value), label),
                                   _printed_matrix(str(theirs.value), label), atol=1e-6)


def test_inputs_given_as_a_generator_are_its_items(dg):
    xs = [dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True)]
    assert dg.autograd.gradcheck(lambda a: a * a, (x for x in xs))


def test_no_differentiable_input_prints_the_inputs(dg):
    with pytest.raises(ValueError) as info:
        dg.autograd.gradcheck(lambda a, b: a * b, (dg.ones(2, dtype=dg.float64), 3.0))
    message = str(info.value)
    assert "requires_grad=True" in message
    assert "shape (2,)" in message and "3.0" in message
    assert "generator object" not in message

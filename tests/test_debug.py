"""Issue 5, "Where an error comes from" and "Memory held by graphs", on both engines: call sites recorded on nodes
and named by the engine's errors, anomaly mode, node introspection, graph_stats, the graph-growth warning.

Lines are found through `# <site:NAME>` markers, so the tests do not depend on line numbers.
"""
import os
import re
import warnings

import numpy as np
import pytest

from helpers import square_function

HERE = os.path.abspath(__file__)


def line_of(marker):
    with open(HERE) as f:
        for number, text in enumerate(f, 1):
            if f"# <site:{marker}>" in text:
                return number
    raise AssertionError(f"no marker {marker}")


def created_at(node, marker):
    return re.escape(f" ({node} was created at {HERE}:{line_of(marker)})")


@pytest.fixture(autouse=True)
def default_switches(dg):
    """Every test starts and ends with the defaults: call sites on, anomaly mode and growth warning off."""
    dg.autograd.set_record_call_sites(True)
    dg.autograd.set_detect_anomaly(False)
    dg.autograd.set_graph_growth_warning(False)
    yield
    dg.autograd.set_record_call_sites(True)
    dg.autograd.set_detect_anomaly(False)
    dg.autograd.set_graph_growth_warning(False)


def leaf(dg, values):
    return dg.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


# ----- call sites -----------------------------------------------------------------------------------------------
def test_nodes_record_their_call_site(dg):
    x = leaf(dg, [1.0, 2.0])
    y = x * 2  # <site:mul>
    z = y.exp().sum()  # <site:exp_sum>
    assert y.grad_fn.call_site == (HERE, line_of("mul"), "test_nodes_record_their_call_site")
    assert z.grad_fn.call_site[:2] == (HERE, line_of("exp_sum"))
    assert z.grad_fn.next_functions[0][0].call_site[:2] == (HERE, line_of("exp_sum"))
    acc = y.grad_fn.next_functions[0][0]
    assert acc.name() == "AccumulateGrad" and acc.call_site is None


def test_call_site_skips_dyngrad_frames(dg):
    """A layer's nodes point at the user's line that called the layer, not at nn/modules/linear.py."""
    lin = dg.nn.Linear(3, 2)
    out = lin(dg.randn(4, 3))  # <site:linear>
    for node in (out.grad_fn, out.grad_fn.next_functions[0][0]):
        assert node.call_site[:2] == (HERE, line_of("linear")), node.name()
    loss = dg.nn.functional.mse_loss(out, dg.zeros(4, 2))  # <site:mse>
    assert loss.grad_fn.call_site[:2] == (HERE, line_of("mse"))


def test_call_site_of_custom_function(dg):
    Square = square_function(dg)
    y = Square.apply(leaf(dg, [3.0]))  # <site:custom>
    assert y.grad_fn.name() == "SquareBackward"
    assert y.grad_fn.call_site[:2] == (HERE, line_of("custom"))
    assert y.grad_fn.saved_tensors_info() == [((1,), dg.float64, 8)]

    loss = y.sum()
    loss.backward()
    assert y.grad_fn.saved_tensors_info() == [] and y.grad_fn.released
    with pytest.raises(RuntimeError, match=r"^backward\(\) reached SquareBackward, whose saved tensors .*twice\."
                       + created_at("SquareBackward", "custom") + "$"):
        loss.backward()

    h = leaf(dg, [1.0, 2.0]) * 1
    y2 = Square.apply(h).sum()  # <site:custom2>
    h.add_(1)
    with pytest.raises(RuntimeError, match=r"^a tensor of shape \(2,\) saved by SquareBackward .*version 1, but "
                       r"version 0 was saved\..*modifying\." + created_at("SquareBackward", "custom2") + "$"):
        y2.backward()


def test_backward_twice_names_node_and_line(dg):
    x = leaf(dg, [1.0, 2.0])
    y = x.exp()  # <site:exp>
    loss = y.sum()
    loss.backward()
    with pytest.raises(RuntimeError) as info:
        loss.backward()
    assert re.fullmatch(r"backward\(\) reached ExpBackward, whose saved tensors were already freed by an earlier "
                        r"backward\(\)\. Pass retain_graph=True to the first backward\(\) if you need to "
                        r"backpropagate through this graph twice\." + created_at("ExpBackward", "exp"),
                        str(info.value))


def test_saved_modified_names_node_line_and_versions(dg):
    x = leaf(dg, [1.0, 2.0, 3.0])
    h = x * 1
    y = h * x  # <site:mul_saves_h>
    h.mul_(2)
    h.add_(1)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    assert re.fullmatch(r"a tensor of shape \(3,\) saved by MulBackward for the backward pass was modified in "
                        r"place: it is at version 2, but version 0 was saved\. Use an out-of-place op "
                        r"\(x = x \+ 1\) instead of an in-place one \(x \+= 1\), or clone\(\) before modifying\."
                        + created_at("MulBackward", "mul_saves_h"), str(info.value))


def test_call_sites_can_be_switched_off(dg):
    assert dg.autograd.is_recording_call_sites()
    dg.autograd.set_record_call_sites(False)
    assert not dg.autograd.is_recording_call_sites()
    x = leaf(dg, [1.0])
    loss = x.exp().sum()
    assert loss.grad_fn.call_site is None
    loss.backward()
    with pytest.raises(RuntimeError) as info:
        loss.backward()
    assert str(info.value).endswith("through this graph twice.")          # the shared message, nothing added
    dg.autograd.set_record_call_sites(True)
    assert (x * 2).grad_fn.call_site is not None


# ----- anomaly mode ---------------------------------------------------------------------------------------------
def nan_injector(dg):
    class InjectNaN(dg.autograd.Function):
        """Identity forward; backward puts a NaN into the first gradient element."""

        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            g = grad.numpy().copy()
            g.flat[0] = np.nan
            return dg.tensor(g)
    return InjectNaN


def test_anomaly_mode_catches_injected_nan(dg):
    inject = nan_injector(dg)
    x = leaf(dg, [1.0, 2.0, 3.0])
    with dg.autograd.detect_anomaly():
        assert dg.autograd.is_anomaly_enabled()
        y = inject.apply(x * 2)  # <site:inject>
        loss = (y * y).sum()
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    assert not dg.autograd.is_anomaly_enabled()
    message = str(info.value)
    first, _, stack = message.partition("\n")
    assert first == (f"anomaly detection: InjectNaNBackward returned a gradient containing NaN for its input 0 "
                     f"(shape (3,): 1 NaN, 0 Inf of 3 values). InjectNaNBackward was created at "
                     f"{HERE}:{line_of('inject')}.")
    assert stack.startswith("Traceback of the forward call that created InjectNaNBackward (recorded by anomaly "
                            "mode):\n")
    assert f'File "{HERE}", line {line_of("inject")}, in test_anomaly_mode_catches_injected_nan' in stack
    assert "y = inject.apply(x * 2)" in stack
    assert x.grad is None                                     # stopped before reaching the leaf


def test_without_anomaly_mode_the_nan_flows_through(dg):
    inject = nan_injector(dg)
    x = leaf(dg, [1.0, 2.0, 3.0])
    (inject.apply(x * 2) ** 2).sum().backward()
    assert np.isnan(x.grad.numpy()[0]) and np.isfinite(x.grad.numpy()[1:]).all()


def test_anomaly_mode_catches_inf_from_a_primitive(dg):
    x = leaf(dg, [0.0, 4.0])
    with dg.autograd.detect_anomaly():
        loss = x.sqrt().sum()  # <site:sqrt>
        with pytest.raises(RuntimeError, match=r"^anomaly detection: SqrtBackward returned a gradient containing "
                           r"Inf for its input 0 \(shape \(2,\): 0 NaN, 1 Inf of 2 values\)\. SqrtBackward was "
                           r"created at " + re.escape(f"{HERE}:{line_of('sqrt')}") + r"\.\n"):
            loss.backward()


# ops whose gradient for an input that needs none is not finite here, while the one that flows is (issue 23):
# anomaly mode checks only gradients that flow on, as torch (binary_cross_entropy's target at p = 0 or 1)
UNNEEDED_NONFINITE = {
    "binary_cross_entropy": (lambda m, p, y: m.nn.functional.binary_cross_entropy(p, y), [0.0, 0.5, 1.0],
                             [0.0, 1.0, 1.0], [0.0, -2 / 3, 0.0]),
    "xlogy": (lambda m, x, y: m.xlogy(x, y).sum(), [0.0, 2.0], [0.0, 3.0], [0.0, np.log(3.0)]),  # y's: 0 / 0
}


@pytest.mark.parametrize("name", sorted(UNNEEDED_NONFINITE))
def test_anomaly_mode_ignores_gradients_nobody_needs(dg, name):
    f, a, b, want = UNNEEDED_NONFINITE[name]
    x, y = dg.tensor(a, dtype=dg.float64, requires_grad=True), dg.tensor(b, dtype=dg.float64)
    with dg.autograd.detect_anomaly():
        f(dg, x, y).backward()
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
    y.requires_grad_()                      # now that gradient flows: anomaly mode stops the backward
    with dg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="anomaly detection: .* returned a gradient containing"):
            f(dg, x, y).backward()


def test_anomaly_switches(dg):
    set_mode = dg.autograd.set_detect_anomaly(True)              # takes effect at once, as torch's
    assert dg.autograd.is_anomaly_enabled()
    with set_mode:
        pass
    assert not dg.autograd.is_anomaly_enabled()                  # restored to the previous mode on exit
    with dg.autograd.set_detect_anomaly(True):
        assert dg.autograd.is_anomaly_enabled()
    assert not dg.autograd.is_anomaly_enabled()

    @dg.autograd.detect_anomaly()
    def inside():
        return dg.autograd.is_anomaly_enabled()
    assert inside() and not dg.autograd.is_anomaly_enabled()

    with pytest.raises(ZeroDivisionError), dg.autograd.detect_anomaly():
        1 / 0
    assert not dg.autograd.is_anomaly_enabled()                  # restored after an exception too


def test_forward_traceback_only_in_anomaly_mode(dg):
    x = leaf(dg, [1.0])
    assert (x * 2).grad_fn.forward_traceback is None
    with dg.autograd.detect_anomaly():
        y = x * 3  # <site:traced>
    stack = y.grad_fn.forward_traceback
    assert f'line {line_of("traced")}, in test_forward_traceback_only_in_anomaly_mode' in stack
    assert stack.rstrip().endswith("y = x * 3  # <site:traced>")  # the stack ends at the user's line


def test_anomaly_mode_adds_forward_stack_to_engine_errors(dg):
    x = leaf(dg, [1.0])
    with dg.autograd.detect_anomaly():
        loss = x.exp().sum()  # <site:exp_anomaly>
        loss.backward()
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    message = str(info.value)
    assert created_at("ExpBackward", "exp_anomaly").replace("\\", "") in message.replace("\\", "")
    assert "Traceback of the forward call that created ExpBackward" in message
    assert "loss = x.exp().sum()  # <site:exp_anomaly>" in message


# ----- introspection and graph_stats ----------------------------------------------------------------------------
def test_node_introspection(dg):
    a = leaf(dg, [1.0, 2.0, 3.0])
    b = leaf(dg, [[1.0], [2.0]])
    y = a * b                                  # (2, 3): saves a and b
    z = y.exp()                                # saves its output
    node = z.grad_fn
    assert node.name() == "ExpBackward"
    assert node.input_shapes == [(2, 3)] and node.input_metadata == [((2, 3), dg.float64)]
    assert node.saved_tensors_info() == [((2, 3), dg.float64, 48)]
    mul = node.next_functions[0][0]
    assert sorted(mul.saved_tensors_info()) == sorted([((3,), dg.float64, 24), ((2, 1), dg.float64, 16)])
    assert mul.input_shapes == [(3,), (2, 1)]
    assert mul.sequence_nr < node.sequence_nr
    assert not node.released
    z.sum().backward()
    assert node.released and node.saved_tensors_info() == []
    acc = mul.next_functions[0][0]
    assert acc.name() == "AccumulateGrad" and acc.variable is a
    assert acc.input_shapes == [(3,)] and acc.saved_tensors_info() == []


def test_saved_fields_by_name(dg):
    """Node._saved_fields(): what the node saved for backward, by the names its op declares (Note [Named saved
    state]), tensors unpacked; None for a tensor the forward did not need; {} for nodes that are not ops."""
    a = leaf(dg, [1.0, 2.0, 3.0])
    c = dg.tensor([4.0, 5.0, 6.0], dtype=dg.float64)      # needs no grad: mul does not save a for it
    y = a * c
    fields = y.grad_fn._saved_fields()
    assert list(fields) == ["a", "b"] and fields["a"] is None and fields["b"].tolist() == [4.0, 5.0, 6.0]
    s = dg.ones(2, 3, 4, dtype=dg.float64, requires_grad=True).sum(dim=(2, -3), keepdim=True)
    assert s.grad_fn._saved_fields() == {"dims": (0, 2), "keepdim": True}
    assert a.clamp(min=0.5).grad_fn._saved_fields()["hi"] is None
    assert a.pow(3).grad_fn._saved_fields()["exponent"] == 3
    z = a.tanh()
    out = z.grad_fn._saved_fields()["out"]             # an output comes back attached to its node
    assert out.tolist() == z.tolist() and out.grad_fn is z.grad_fn
    assert y.grad_fn.next_functions[0][0]._saved_fields() == {}  # AccumulateGrad
    z.sum().backward()
    with pytest.raises(RuntimeError, match="saved tensors were already freed"):
        z.grad_fn._saved_fields()
    s.sum().backward()
    assert s.grad_fn._saved_fields()["dims"] == (0, 2)  # no tensors: values stay readable, as torch's _saved_dim
    w = a * 1.0
    v = w.sin()
    with dg.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified in place"):
        v.grad_fn._saved_fields()


def test_graph_stats(dg):
    a = leaf(dg, [1.0, 2.0, 3.0])
    b = leaf(dg, [4.0, 5.0, 6.0])
    loss = (a * b).exp().sum()                 # Sum -> Exp -> Mul -> {a, b}
    assert dg.autograd.graph_stats(loss) == {"nodes": 5, "saved_bytes": 24 + 24 + 24, "depth": 4, "leaves": 2}
    c = (a * 2).sum()                          # a second root sharing leaf a: one graph of both
    stats = dg.autograd.graph_stats(loss, c)
    assert stats["nodes"] == 5 + 2 and stats["leaves"] == 2
    assert dg.autograd.graph_stats(dg.tensor([1.0])) == {"nodes": 0, "saved_bytes": 0, "depth": 0, "leaves": 0}


def test_graph_stats_deep_chain_is_iterative(dg):
    x = leaf(dg, [1.0])
    y = x
    for _ in range(20000):
        y = y + 1.0
    stats = dg.autograd.graph_stats(y)
    assert stats["nodes"] == 20001 and stats["depth"] == 20001 and stats["leaves"] == 1


# ----- graphs that pile up across iterations --------------------------------------------------------------------
def train_steps(dg, steps, accumulate):
    w = leaf(dg, [0.5, -0.3])
    total_loss = 0.0
    for _ in range(steps):
        x = dg.tensor(np.ones((4, 2)))
        loss = ((x * w).sum(1) ** 2).mean()
        loss.backward()
        total_loss = accumulate(total_loss, loss)
    return total_loss


def test_growth_warning_points_at_the_accumulating_line(dg):
    dg.autograd.set_graph_growth_warning(True, steps=3)
    with pytest.warns(dg.autograd.GraphGrowthWarning) as record:
        train_steps(dg, 8, lambda total, loss: total + loss)  # <site:accumulate>
    assert len(record) == 1                                    # once per line
    warning = record[0]
    assert (warning.filename, warning.lineno) == (HERE, line_of("accumulate"))
    assert re.match(r"the graph nodes kept alive grew at each of the last 3 backward\(\) calls \(\d+ -> \d+\): "
                    r"graphs of earlier iterations are not being freed\. Likely line: "
                    + re.escape(f"{HERE}:{line_of('accumulate')}") + r", which created \d+ live AddBackward nodes",
                    str(warning.message))


def test_no_growth_warning_for_a_correct_loop(dg):
    dg.autograd.set_graph_growth_warning(True, steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dg.autograd.GraphGrowthWarning)
        train_steps(dg, 10, lambda total, loss: total + loss.item())
        train_steps(dg, 10, lambda total, loss: total + loss.detach())


def test_no_growth_warning_when_inputs_just_get_longer(dg):
    """Live nodes grow with the input length each step, but no old graph is kept: not the mistake."""
    dg.autograd.set_graph_growth_warning(True, steps=3)
    w = leaf(dg, [0.5])
    kept = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", dg.autograd.GraphGrowthWarning)
        for length in range(1, 10):
            h = w
            for _ in range(length):
                h = (h * w).tanh()
            h.sum().backward(retain_graph=True)
            kept.append(h)                     # graphs held on purpose: separate graphs, none links to another


def test_growth_warning_for_state_carried_without_detach(dg):
    dg.autograd.set_graph_growth_warning(True, steps=4)
    w = leaf(dg, [0.9])
    h = dg.tensor([0.0])
    with pytest.warns(dg.autograd.GraphGrowthWarning) as record:
        for step in range(10):
            h = (h * w + 1.0).tanh()  # <site:carry>
            h.sum().backward(retain_graph=True)
    assert (record[0].filename, record[0].lineno) == (HERE, line_of("carry"))
    assert "h = h.detach()" in str(record[0].message)


def test_growth_warning_switch(dg):
    with pytest.raises(ValueError, match="steps must be at least 1"):
        dg.autograd.set_graph_growth_warning(True, steps=0)

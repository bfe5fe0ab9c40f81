"""Training steps whose nodes save a tensor no step returns take the planned backward of static replay (Note [Saved
state no step returns] in csrc/bindings/replay_backward.cpp): scaled_dot_product_attention's logsumexp (a transformer
block), rnn_layer's workspace (LSTM, GRU), max-pooling's positions and BatchNorm's statistics (a CNN). Each step is
run eagerly and compiled, several times, with an optimiser, dropout drawing fresh numbers and a train/eval switch;
the losses, parameters, gradients and buffers must be equal bitwise. The reference engine has no plan: the same
programs give eager mode's results there."""
import numpy as np
import pytest

from helpers import assert_bitwise_equal as assert_same


def has_plan(dg):
    return hasattr(dg._C, "_plan_backward")


def reasons(compiled):
    return [v.plan_reason for group in compiled._program.groups.values() for v in group]


def train_both(dg, make_model, make_opt, batches, loss_fn, steps=6, modes=None, seed_each=True):
    """The same model (same seed), trained eagerly and under static replay; everything compared after each step."""
    dg.manual_seed(0)
    eager_model = make_model()
    dg.manual_seed(0)
    model = make_model()

    def stepper(m, opt):
        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        return step

    eager = stepper(eager_model, make_opt(eager_model))
    compiled = dg.compile(stepper(model, make_opt(model)), mode="reduce-overhead")
    losses = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        if modes is not None:
            eager_model.train(modes[i])
            model.train(modes[i])
        if seed_each:
            dg.manual_seed(100 + i)
        expected = eager(x, y)
        if seed_each:
            dg.manual_seed(100 + i)
        got = compiled(x, y)
        assert_same(got, expected)
        losses.append(float(got.item()))
        for (name, p), (_, q) in zip(sorted(eager_model.named_parameters()), sorted(model.named_parameters())):
            assert_same(q, p)
            assert (q.grad is None) == (p.grad is None), name
            if p.grad is not None:
                assert_same(q.grad, p.grad)
        for (_, b), (_, c) in zip(sorted(eager_model.named_buffers()), sorted(model.named_buffers())):
            assert_same(c, b)
    return compiled, losses


def assert_planned(dg, compiled):
    stats = compiled.compile_stats
    assert stats.replays >= 3
    if has_plan(dg):
        assert None in reasons(compiled), reasons(compiled)
        assert stats.planned_backwards >= 3
    else:
        assert stats.planned_backwards == 0


def batches_of(dg, seed, shape, classes=None, n=2, target_shape=None):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = dg.tensor(rng.standard_normal(shape).astype(np.float32))
        if classes is not None:
            y = dg.tensor(rng.integers(0, classes, shape[0]))
        else:
            y = dg.tensor(rng.standard_normal(target_shape or shape).astype(np.float32))
        out.append((x, y))
    return out


def mse(dg):
    return lambda out, y: ((out - y) ** 2).mean()


def test_transformer_block_takes_the_plan(dg):
    """nn.TransformerEncoderLayer: fused attention saves each row's logsumexp; Adam's state in tensors."""
    compiled, _ = train_both(
        dg, lambda: dg.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
        lambda m: dg.optim.Adam(m.parameters(), lr=1e-3), batches_of(dg, 1, (3, 8, 32)), mse(dg), steps=6)
    assert_planned(dg, compiled)
    if has_plan(dg):
        assert reasons(compiled)[-1] is None


def test_transformer_block_with_dropout_draws_fresh_masks(dg):
    """Dropout inside fused attention draws its seed in the op (Note [Dropout inside attention]): no value flows into
    Python, so every call replays (one variant after the first call's), takes the plan and draws a fresh mask."""
    batch = batches_of(dg, 9, (2, 6, 16), n=1)
    modes = [True] * 5 + [False, False, True]
    compiled, losses = train_both(
        dg, lambda: dg.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True),
        lambda m: dg.optim.SGD(m.parameters(), lr=0.01), batch, mse(dg), steps=len(modes), modes=modes)
    assert len(set(losses[:5])) == 5
    assert compiled.compile_stats.misses <= 3     # the first call, the second (SGD's .grad), eval mode
    assert_planned(dg, compiled)


def test_transformer_block_gelu_norm_first(dg):
    compiled, _ = train_both(
        dg, lambda: dg.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True,
                                                  norm_first=True),
        lambda m: dg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), batches_of(dg, 2, (2, 5, 16)), mse(dg))
    assert_planned(dg, compiled)


def test_attention_with_a_causal_mask_takes_the_plan(dg):
    F = dg.nn.functional

    class Attn(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = dg.nn.Linear(16, 48)

        def forward(self, x):
            q, k, v = (t.reshape(2, 6, 2, 8).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 6, 16)

    compiled, _ = train_both(dg, Attn, lambda m: dg.optim.SGD(m.parameters(), lr=0.1),
                             batches_of(dg, 3, (2, 6, 16)), mse(dg))
    assert_planned(dg, compiled)


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_recurrent_layer_takes_the_plan(dg, cell):
    """rnn_layer saves its gates' workspace; the input projection's matmul is made inside the step."""

    class Net(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(dg.nn, cell)(8, 12, batch_first=True)
            self.head = dg.nn.Linear(12, 5)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    compiled, _ = train_both(dg, Net, lambda m: dg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                             batches_of(dg, 4, (3, 7, 8), classes=5), dg.nn.functional.cross_entropy)
    assert_planned(dg, compiled)


def test_two_layer_bidirectional_lstm(dg):
    class Net(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = dg.nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0].sum(-1)

    compiled, _ = train_both(dg, Net, lambda m: dg.optim.Adam(m.parameters(), lr=1e-2),
                             batches_of(dg, 5, (2, 4, 6), target_shape=(2, 4)), mse(dg))
    assert_planned(dg, compiled)


def cnn(dg, dropout=0.0):
    nn = dg.nn
    return nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Dropout(dropout), nn.Linear(36, 5))


def test_cnn_with_batch_norm_and_max_pool_takes_the_plan(dg):
    compiled, _ = train_both(dg, lambda: cnn(dg), lambda m: dg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                             batches_of(dg, 6, (4, 2, 8, 8), classes=5), dg.nn.functional.cross_entropy, steps=6)
    assert_planned(dg, compiled)


def test_cnn_dropout_draws_fresh_numbers_and_switches_train_eval(dg):
    """Dropout's mask is drawn at every replay (the same batch gives other losses), and eval mode is a variant of
    its own; both take the plan."""
    batch = batches_of(dg, 7, (4, 2, 8, 8), classes=5, n=1)
    modes = [True, True, True, False, False, True, True, False, False, True]
    compiled, losses = train_both(dg, lambda: cnn(dg, dropout=0.5), lambda m: dg.optim.SGD(m.parameters(), lr=0.05),
                                  batch, dg.nn.functional.cross_entropy, steps=len(modes), modes=modes)
    assert len(set(losses[:3])) == 3
    assert_planned(dg, compiled)
    if has_plan(dg):
        assert set(reasons(compiled)) == {None}


def test_dropout_without_reseeding_follows_the_generator(dg):
    """No manual_seed between the calls: the compiled and the eager model each draw from the generator in turn."""
    nn = dg.nn
    dg.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.3), nn.GELU(), nn.LayerNorm(8))
    dg.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.3), nn.GELU(), nn.LayerNorm(8))

    def stepper(m):
        def step(x):
            m.zero_grad()
            out = m(x)
            out.pow(2).mean().backward()
            return out.detach()
        return step

    eager, compiled = stepper(eager_model), dg.compile(stepper(model), mode="reduce-overhead")
    x = dg.tensor(np.random.default_rng(8).standard_normal((5, 8)).astype(np.float32))
    state = dg.get_rng_state()
    expected = [eager(x) for _ in range(5)]
    dg.set_rng_state(state)
    got = [compiled(x) for _ in range(5)]
    for a, b in zip(got, expected):
        assert_same(a, b)
    assert not np.array_equal(got[1].numpy(), got[2].numpy())
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert_same(q.grad, p.grad)
    assert_planned(dg, compiled)


def test_bench_kernel_workloads_take_the_plan(dg):
    """The four kernel-bound training steps of python -m dyngrad.bench (CNN, LSTM, transformer, wide MLP), at their
    check sizes, each as one compiled step: planned, and equal to the eager steps bitwise."""
    from dyngrad.bench import workloads as W

    sizes = {"cnn-train": {"batch": 2, "steps": 4, "lr": 0.05},
             "lstm-train": {"batch": 2, "seq": 4, "hidden": 16, "steps": 4, "lr": 0.05},
             "transformer-train": {"batch": 1, "seq": 8, "steps": 4, "lr": 0.05},
             "wide-mlp-train": {"batch": 4, "width": 64, "steps": 4, "lr": 0.05}}
    for group, size in sizes.items():
        results = {}
        for mode in ("eager", "static"):
            case = W.compiled_kernel_case(group)(dg, size, mode)
            case.run()
            results[mode] = case.result()
        for a, b in zip(results["static"], results["eager"]):
            np.testing.assert_array_equal(a, b)
        program = dg.compiler.programs()[-1]
        assert program.replays >= 3, group
        if has_plan(dg):
            assert program.backward_plans[-1] is None, (group, program.backward_plans)


def test_verified_replay_of_attention_dropout_hits(dg):
    """Under verified replay too, attention's dropout seed is no value handed to Python: calls follow the recording
    (hits) instead of leaving it at every call, and each call draws a fresh mask as eager mode does."""
    dg.manual_seed(0)
    eager_layer = dg.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.3, batch_first=True)
    dg.manual_seed(0)
    layer = dg.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.3, batch_first=True)
    verified = dg.compile(layer, mode="verified")
    x = dg.tensor(np.random.default_rng(10).standard_normal((2, 5, 16)).astype(np.float32))
    outs = []
    for i in range(5):
        dg.manual_seed(20 + i)
        expected = eager_layer(x)
        dg.manual_seed(20 + i)
        got = verified(x)
        assert_same(got, expected)
        outs.append(got.detach().numpy().copy())
    assert not np.array_equal(outs[0], outs[1])
    stats = verified.compile_stats
    assert stats.hits >= 4 and stats.misses <= 1, stats.report()

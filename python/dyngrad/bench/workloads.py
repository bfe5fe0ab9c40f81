"""The benchmark workloads: each is a function of the engine module `dg`, so one piece of code runs unchanged on
`dyngrad`, `dyngrad.reference` and `torch`.

A workload's `build(dg, size)` makes its seeded data with numpy (identical for every engine), copies it into `dg`
tensors and returns a `Case`: `run()` does one timed call, `units` says how much work one call is (ops, steps,
sequences, flops, bytes...), and `result()` returns the numbers that must agree between engines after a call.
Only names that torch also has are used (`tensor`, `tanh`, `no_grad`, `add_(..., alpha=)`, `@`, slicing), and the
models are raw tensors with a hand-written SGD step, so nothing here depends on dyngrad.optim; the kernel-bound
training steps (section 9) use `nn.functional` and `nn.LSTM`, as their users would.
"""
from collections import namedtuple
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Optional

import os

import numpy as np

Case = namedtuple("Case", "run units result")


@dataclass
class Workload:
    name: str
    group: str                  # `--only GROUP` selects every workload of the group (mlp-train -> both batch sizes)
    unit: str                   # how the table shows one unit: "us/op", "ms/step", "GFLOPS", ...
    about: str
    build: Callable             # build(dg, size) -> Case
    sizes: dict                 # "quick" / "default" / "full" / "check" -> size dict
    numpy: Optional[Callable] = None  # numpy_build(size) -> Case: numpy doing the same work by hand
    rtol: float = 1e-4
    atol: float = 1e-5
    notes: list = field(default_factory=list)
    threads: Optional[int] = None  # every engine runs the workload at this many threads (None: as the process is)


SEED = 0


def _rng(*salt):
    return np.random.default_rng([SEED, *salt])


def _param(dg, array):
    return dg.tensor(np.asarray(array, dtype=np.float32, order="C"), requires_grad=True)


def _const(dg, array, dtype=np.float32):
    return dg.tensor(np.asarray(array, dtype=dtype, order="C"))


def _uniform_init(rng, fan_in, shape):
    """torch's default Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def _values(*tensors):
    """Flattens tensors (or None) into one float64 numpy array for comparing engines."""
    parts = []
    for t in tensors:
        if t is None:
            parts.append(np.array([np.nan]))
        elif isinstance(t, (float, int)):
            parts.append(np.array([float(t)]))
        elif isinstance(t, np.ndarray):
            parts.append(t.astype(np.float64).ravel())
        else:
            parts.append(np.asarray(t.detach().tolist(), dtype=np.float64).ravel())
    return np.concatenate(parts)


def _cross_entropy(dg):
    """The fused cross entropy: top level in both dyngrad engines, torch.nn.functional in torch."""
    fn = getattr(dg, "cross_entropy", None)
    return fn if fn is not None else dg.nn.functional.cross_entropy


def _sgd_step(dg, params, lr):
    with dg.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-lr)
            p.grad = None


# --- 1. op-overhead: y = tanh(y * a + b) on a 1-element tensor ------------------------------------------------------

def _scalar_chain_inputs():
    rng = _rng(1)
    x, a, b = (rng.uniform(0.2, 0.8, size=1).astype(np.float32) for _ in range(3))
    return x, a, b


def _build_scalar_chain(dg, steps, backward):
    x0, a0, b0 = _scalar_chain_inputs()
    x, a, b = _param(dg, x0), _param(dg, a0), _param(dg, b0)
    seed_grad = _const(dg, np.ones(1))
    out = {}

    def run():
        x.grad = a.grad = b.grad = None
        out.pop("y", None)  # free the previous graph before timing a new one
        y = x
        for _ in range(steps):
            y = dg.tanh(y * a + b)
        if backward:
            y.backward(seed_grad)
        out["y"] = y

    def result():
        return _values(out["y"], x.grad, a.grad, b.grad) if backward else _values(out["y"])

    return Case(run, 3 * steps, result)


def _numpy_scalar_chain(steps, backward):
    x, a, b = _scalar_chain_inputs()
    out = {}

    def run():
        ys = [x]
        y = x
        for _ in range(steps):
            y = np.tanh(y * a + b)
            ys.append(y)
        out["y"] = y
        if not backward:
            return
        gy, ga, gb = np.ones(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
        for i in range(steps, 0, -1):
            gu = gy * (1 - ys[i] * ys[i])   # through tanh
            gb += gu
            ga += gu * ys[i - 1]
            gy = gu * a
        out["grads"] = (gy, ga, gb)

    def result():
        return _values(out["y"], *out["grads"]) if backward else _values(out["y"])

    return Case(run, 3 * steps, result)


def op_overhead_fwd(dg, size):
    return _build_scalar_chain(dg, size["steps"], backward=False)


def op_overhead(dg, size):
    return _build_scalar_chain(dg, size["steps"], backward=True)


# --- 2. the three dynamic-graph cases: basic, data-dependent branch, input-dependent loop ---------------------------

def _graph_data(size):
    rng = _rng(2)
    d = size["dim"]
    return {
        "W": _uniform_init(rng, d, (d, d)), "U": _uniform_init(rng, d, (d, d)),
        "b": _uniform_init(rng, d, (d,)), "v": _uniform_init(rng, d, (d,)),
        # the first feature of each input is in [0, 1): the loop case reads its length from it
        "X": np.concatenate([rng.uniform(0, 1, (size["graphs"], 1)),
                             rng.normal(0, 1, (size["graphs"], d - 1))], axis=1).astype(np.float32),
    }


def _build_graph_case(dg, size, forward):
    data = _graph_data(size)
    W, U, b, v = (_param(dg, data[k]) for k in "WUbv")
    xs = [_const(dg, row[None, :]) for row in data["X"]]
    losses = []

    def run():
        for p in (W, U, b, v):
            p.grad = None
        losses.clear()
        for x in xs:
            loss = forward(x, W, U, b, v)
            loss.backward()
            losses.append(loss)

    def result():
        return _values(*losses, W.grad, U.grad, b.grad, v.grad)

    return Case(run, len(xs), result)


def graph_basic(dg, size):
    def forward(x, W, U, b, v):
        h = dg.tanh(x @ W + b)
        return (h * v).sum() + (h * h).mean()
    return _build_graph_case(dg, size, forward)


def graph_branch(dg, size):
    def forward(x, W, U, b, v):
        h = x @ W + b
        if h.sum().item() > 0:             # the branch is chosen by the data
            h = (h @ U).relu() * v
        else:
            h = dg.tanh(h) * h
        return h.sum()
    return _build_graph_case(dg, size, forward)


def graph_loop(dg, size):
    def forward(x, W, U, b, v):
        steps = 1 + int(x[0, 0].item() * 16)   # 1..16 iterations, read from the input
        h = x
        for _ in range(steps):
            h = dg.tanh(h @ W + b)
        return (h * v).sum()
    return _build_graph_case(dg, size, forward)


# --- 3. mlp-train: 64-128-128-10, ReLU, cross entropy, SGD, on scikit-learn's digits ------------------------------

@lru_cache(maxsize=1)
def _digits():
    """scikit-learn's bundled 8x8 digits (1797 images), or seeded synthetic data of the same shape without it."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return _synthetic_digits()
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64), "sklearn digits"


def _synthetic_digits():
    rng = _rng(3)
    prototypes = rng.uniform(0, 1, (10, 64))
    y = rng.integers(0, 10, 1797)
    x = np.clip(prototypes[y] + rng.normal(0, 0.3, (1797, 64)), 0, 1)
    return x.astype(np.float32), y.astype(np.int64), "synthetic (scikit-learn is not installed)"


def _build_mlp(dg, size):
    x_all, y_all, _ = _digits()
    rng = _rng(4)
    widths = (64, 128, 128, 10)
    params = []
    for fan_in, fan_out in zip(widths, widths[1:]):
        params += [_param(dg, _uniform_init(rng, fan_in, (fan_in, fan_out))),
                   _param(dg, _uniform_init(rng, fan_in, (fan_out,)))]
    batch = size["batch"]
    order = rng.permutation(len(x_all))
    batches = [(_const(dg, x_all[order[i:i + batch]]), _const(dg, y_all[order[i:i + batch]], np.int64))
               for i in range(0, len(order) - batch + 1, batch)]
    cross_entropy = _cross_entropy(dg)
    state = {"next": 0, "losses": []}

    def train_step(x, y):
        W1, b1, W2, b2, W3, b3 = params
        h = (x @ W1 + b1).relu()
        h = (h @ W2 + b2).relu()
        loss = cross_entropy(h @ W3 + b3, y)
        loss.backward()
        _sgd_step(dg, params, size["lr"])
        return loss

    def run():
        state["losses"] = []
        for _ in range(size["steps"]):
            x, y = batches[state["next"] % len(batches)]
            state["next"] += 1
            state["losses"].append(train_step(x, y))

    def result():
        return _values(*state["losses"], *params)

    return Case(run, size["steps"], result)


# --- 4. dynamic-rnn: an Elman cell over sequences of random length, one update per sequence -----------------------

def _build_rnn(dg, size):
    rng = _rng(5)
    n_in, hidden, classes = 16, size["hidden"], 10
    Wx = _param(dg, _uniform_init(rng, hidden, (n_in, hidden)))
    Wh = _param(dg, _uniform_init(rng, hidden, (hidden, hidden)))
    bh = _param(dg, _uniform_init(rng, hidden, (hidden,)))
    Wo = _param(dg, _uniform_init(rng, hidden, (hidden, classes)))
    bo = _param(dg, _uniform_init(rng, hidden, (classes,)))
    params = [Wx, Wh, bh, Wo, bo]
    lengths = rng.integers(size["min_len"], size["max_len"] + 1, size["sequences"])
    seqs = [_const(dg, rng.normal(0, 1, (n, n_in))) for n in lengths]
    labels = [_const(dg, [label], np.int64) for label in rng.integers(0, classes, size["sequences"])]
    h0 = _const(dg, np.zeros((1, hidden)))
    cross_entropy = _cross_entropy(dg)
    losses = []

    def run():
        losses.clear()
        for seq, label in zip(seqs, labels):
            h = h0
            for t in range(seq.shape[0]):            # the graph's length is the sequence's length
                h = dg.tanh(seq[t:t + 1] @ Wx + h @ Wh + bh)
            loss = cross_entropy(h @ Wo + bo, label)
            loss.backward()
            _sgd_step(dg, params, 0.01)
            losses.append(loss)

    def result():
        return _values(*losses, *params)

    return Case(run, len(seqs), result)


# --- 5. tree-net: a recursive net over random binary trees, the graph built by Python recursion -------------------

def _random_tree(rng, leaves, vocab):
    """("leaf", word) or ("node", left, right), split at a random point."""
    if leaves == 1:
        return ("leaf", int(rng.integers(vocab)))
    left = int(rng.integers(1, leaves))
    return ("node", _random_tree(rng, left, vocab), _random_tree(rng, leaves - left, vocab))


def _build_tree_net(dg, size):
    rng = _rng(6)
    vocab, dim, classes = 50, size["dim"], 10
    E = _param(dg, rng.normal(0, 0.5, (vocab, dim)))
    Wl = _param(dg, _uniform_init(rng, 2 * dim, (dim, dim)))
    Wr = _param(dg, _uniform_init(rng, 2 * dim, (dim, dim)))
    b = _param(dg, _uniform_init(rng, 2 * dim, (dim,)))
    Wo = _param(dg, _uniform_init(rng, dim, (dim, classes)))
    bo = _param(dg, _uniform_init(rng, dim, (classes,)))
    params = [E, Wl, Wr, b, Wo, bo]
    trees = [_random_tree(rng, int(rng.integers(size["min_leaves"], size["max_leaves"] + 1)), vocab)
             for _ in range(size["trees"])]
    labels = [_const(dg, [label], np.int64) for label in rng.integers(0, classes, size["trees"])]
    cross_entropy = _cross_entropy(dg)
    losses = []

    def encode(node):
        if node[0] == "leaf":
            word = node[1]
            return E[word:word + 1]
        return dg.tanh(encode(node[1]) @ Wl + encode(node[2]) @ Wr + b)

    def run():
        losses.clear()
        for tree, label in zip(trees, labels):
            loss = cross_entropy(encode(tree) @ Wo + bo, label)
            loss.backward()
            _sgd_step(dg, params, 0.01)
            losses.append(loss)

    def result():
        return _values(*losses, *params)

    return Case(run, len(trees), result)


# --- 6. gemm: float32 n x n matmul, forward + backward -------------------------------------------------------------

def _gemm_inputs(n):
    rng = _rng(7)
    return [rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(3)]


def _build_gemm(dg, size):
    a0, b0, g0 = _gemm_inputs(size["n"])
    a, b, g = _param(dg, a0), _param(dg, b0), _const(dg, g0)
    out = {}

    def run():
        a.grad = b.grad = None
        out.pop("c", None)
        c = a @ b
        c.backward(g)
        out["c"] = c

    def result():
        return _values(out["c"], a.grad, b.grad)

    return Case(run, 3 * 2 * size["n"] ** 3, result)   # three products of 2n^3 flops: c, dA = g b^T, dB = a^T g


def _numpy_gemm(size):
    a, b, g = _gemm_inputs(size["n"])
    out = {}

    def run():
        out["c"] = a @ b
        out["da"] = g @ b.T
        out["db"] = a.T @ g

    def result():
        return _values(out["c"], out["da"], out["db"])

    return Case(run, 3 * 2 * size["n"] ** 3, result)


# --- 7. elementwise-large: tanh(a * b + c) over many float32 elements, forward + backward ---------------------------

ELEMENTWISE_ARRAYS = 11   # forward reads a, b, c, writes y; backward reads g, y, a, b, writes da, db, dc


def _elementwise_inputs(n):
    rng = _rng(8)
    return [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(4)]


def _build_elementwise(dg, size):
    a0, b0, c0, g0 = _elementwise_inputs(size["n"])
    a, b, c, g = _param(dg, a0), _param(dg, b0), _param(dg, c0), _const(dg, g0)
    out = {}

    def run():
        a.grad = b.grad = c.grad = None
        out.pop("y", None)
        y = dg.tanh(a * b + c)
        y.backward(g)
        out["y"] = y

    def result():
        return _values(out["y"], a.grad, b.grad, c.grad)

    return Case(run, ELEMENTWISE_ARRAYS * 4 * size["n"], result)   # units: bytes of the minimal memory traffic


def _numpy_elementwise(size):
    a, b, c, g = _elementwise_inputs(size["n"])
    out = {}

    def run():
        out.clear()
        y = a * b
        y += c
        np.tanh(y, out=y)
        gu = y * y                 # dy/du = 1 - tanh(u)^2
        np.subtract(1, gu, out=gu)
        gu *= g
        out["y"], out["da"], out["db"], out["dc"] = y, gu * b, gu * a, gu

    def result():
        return _values(out["y"], out["da"], out["db"], out["dc"])

    return Case(run, ELEMENTWISE_ARRAYS * 4 * size["n"], result)


# --- 8. deep-chain: a long sequential graph, then backward, then freeing it ----------------------------------------

def _build_deep_chain(dg, size):
    x0, a0, b0 = _scalar_chain_inputs()
    x, a, b = _param(dg, x0), _param(dg, a0), _param(dg, b0)
    seed_grad = _const(dg, np.ones(1))
    steps = size["ops"] // 3
    grads = {}

    def run():
        x.grad = a.grad = b.grad = None
        y = x
        for _ in range(steps):
            y = dg.tanh(y * a + b)
        y.backward(seed_grad)
        grads["y"] = y.detach()
        del y                       # freeing 100,000 nodes is part of the work (and must not recurse)

    def result():
        return _values(grads["y"], x.grad, a.grad, b.grad)

    return Case(run, 1, result)


# --- 9. kernel-bound training steps (issue 12): CNN, LSTM, transformer block, wide MLP; at 1 and 2 threads ---------
# Forward + backward + SGD step in float32; `units` = steps. The models are what users write with nn.functional
# (weights as (out, in) for F.linear, so x @ w.T runs as in nn.Linear) and nn.LSTM.

def _linear_params(dg, rng, fan_in, fan_out):
    return [_param(dg, _uniform_init(rng, fan_in, (fan_out, fan_in))), _param(dg, _uniform_init(rng, fan_in, (fan_out,)))]


def _train_case(dg, params, batches, loss_fn, size):
    """run() = size["steps"] SGD steps over `batches` (cycled); result() = the losses and the final parameters."""
    state = {"next": 0, "losses": []}

    def run():
        state["losses"] = []
        for _ in range(size["steps"]):
            batch = batches[state["next"] % len(batches)]
            state["next"] += 1
            loss = loss_fn(*batch)
            loss.backward()
            _sgd_step(dg, params, size["lr"])
            state["losses"].append(loss.detach())

    def result():
        return _values(*state["losses"], *params)

    return Case(run, size["steps"], result)


def _class_batches(dg, rng, shape, batches=2, classes=10):
    return [(_const(dg, rng.normal(0, 1, shape)), _const(dg, rng.integers(0, classes, shape[0]), np.int64))
            for _ in range(batches)]


def cnn_train(dg, size):
    """LeNet-5: conv 1->6 5x5 pad 2, relu, maxpool 2, conv 6->16 5x5, relu, maxpool 2, 400-120-84-10."""
    return _train_case(dg, *_cnn(dg, size), size)


def _cnn(dg, size):
    """cnn_train's (params, batches, loss_fn)."""
    F = dg.nn.functional
    rng = _rng(9)
    c1 = [_param(dg, _uniform_init(rng, 25, (6, 1, 5, 5))), _param(dg, _uniform_init(rng, 25, (6,)))]
    c2 = [_param(dg, _uniform_init(rng, 150, (16, 6, 5, 5))), _param(dg, _uniform_init(rng, 150, (16,)))]
    fc = _linear_params(dg, rng, 400, 120) + _linear_params(dg, rng, 120, 84) + _linear_params(dg, rng, 84, 10)
    params = c1 + c2 + fc
    batches = _class_batches(dg, rng, (size["batch"], 1, 28, 28))
    cross_entropy = _cross_entropy(dg)

    def loss_fn(x, y):
        h = F.max_pool2d(F.relu(F.conv2d(x, *c1, padding=2)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, *c2)), 2)
        h = h.reshape(h.shape[0], 400)
        h = F.relu(F.linear(h, *fc[0:2]))
        h = F.relu(F.linear(h, *fc[2:4]))
        return cross_entropy(F.linear(h, *fc[4:6]), y)

    return params, batches, loss_fn


def lstm_train(dg, size):
    """nn.LSTM(64, hidden, batch_first=True) over `seq` steps, a linear head on the last output, cross entropy."""
    return _train_case(dg, *_lstm(dg, size), size)


def _lstm(dg, size):
    """lstm_train's (params, batches, loss_fn)."""
    rng = _rng(10)
    hidden = size["hidden"]
    lstm = dg.nn.LSTM(64, hidden, batch_first=True)
    with dg.no_grad():
        for _, p in sorted(lstm.named_parameters()):   # seeded, identical weights in every engine
            p.copy_(_const(dg, _uniform_init(rng, hidden, tuple(p.shape))))
    head = _linear_params(dg, rng, hidden, 10)
    params = [p for _, p in sorted(lstm.named_parameters())] + head
    batches = _class_batches(dg, rng, (size["batch"], size["seq"], 64))
    cross_entropy = _cross_entropy(dg)

    def loss_fn(x, y):
        out, _ = lstm(x)
        return cross_entropy(dg.nn.functional.linear(out[:, -1], *head), y)

    return params, batches, loss_fn


def transformer_train(dg, size):
    """One pre-norm transformer block (d 128, 4 heads, MLP 512, GELU) from matmul/softmax/layer_norm/gelu; loss =
    mean squared distance of the block's output to a fixed target."""
    return _train_case(dg, *_transformer_block(dg, size), size)


def _transformer_block(dg, size):
    """transformer_train's (params, batches, loss_fn)."""
    F = dg.nn.functional
    rng = _rng(11)
    d, heads, seq, batch = 128, 4, size["seq"], size["batch"]
    ln1 = [_param(dg, 1 + 0.1 * rng.normal(size=d)), _param(dg, 0.1 * rng.normal(size=d))]
    ln2 = [_param(dg, 1 + 0.1 * rng.normal(size=d)), _param(dg, 0.1 * rng.normal(size=d))]
    w_qkv, b_qkv = _param(dg, _uniform_init(rng, d, (d, 3 * d))), _param(dg, _uniform_init(rng, d, (3 * d,)))
    w_o, b_o = _param(dg, _uniform_init(rng, d, (d, d))), _param(dg, _uniform_init(rng, d, (d,)))
    w_1, b_1 = _param(dg, _uniform_init(rng, d, (d, 4 * d))), _param(dg, _uniform_init(rng, d, (4 * d,)))
    w_2, b_2 = _param(dg, _uniform_init(rng, 4 * d, (4 * d, d))), _param(dg, _uniform_init(rng, 4 * d, (d,)))
    params = ln1 + ln2 + [w_qkv, b_qkv, w_o, b_o, w_1, b_1, w_2, b_2]
    batches = [(_const(dg, rng.normal(0, 1, (batch, seq, d))), _const(dg, rng.normal(0, 1, (batch, seq, d))))
               for _ in range(2)]

    def split_heads(t):
        return t.reshape(batch, seq, heads, d // heads).transpose(1, 2)

    def loss_fn(x, target):
        q, k, v = (split_heads(t) for t in (F.layer_norm(x, (d,), *ln1) @ w_qkv + b_qkv).chunk(3, dim=-1))
        att = F.softmax(q @ k.transpose(-2, -1) * (1.0 / np.sqrt(d // heads)), dim=-1)
        x = x + (att @ v).transpose(1, 2).reshape(batch, seq, d) @ w_o + b_o
        x = x + F.gelu(F.layer_norm(x, (d,), *ln2) @ w_1 + b_1) @ w_2 + b_2
        return ((x - target) ** 2).mean()

    return params, batches, loss_fn


def wide_mlp_train(dg, size):
    """MLP 784-1024-1024-10, ReLU, cross entropy."""
    return _train_case(dg, *_wide_mlp(dg, size), size)


def _wide_mlp(dg, size):
    """wide_mlp_train's (params, batches, loss_fn)."""
    F = dg.nn.functional
    rng = _rng(12)
    widths = (784, size["width"], size["width"], 10)
    params = [p for fan_in, fan_out in zip(widths, widths[1:]) for p in _linear_params(dg, rng, fan_in, fan_out)]
    batches = _class_batches(dg, rng, (size["batch"], 784))
    cross_entropy = _cross_entropy(dg)

    def loss_fn(x, y):
        h = F.relu(F.linear(x, *params[0:2]))
        h = F.relu(F.linear(h, *params[2:4]))
        return cross_entropy(F.linear(h, *params[4:6]), y)

    return params, batches, loss_fn


def _kernel_workloads():
    """Each of the four at 1 and at 2 threads (every engine, torch included, set to that many)."""
    return [Workload(f"{name}-{t}t", name, "ms/step", f"{about}, {t} thread{'s' if t > 1 else ''}", build, sizes,
                     rtol=1e-3, atol=1e-4, threads=t)
            for name, about, build, sizes in _kernel_specs() for t in (1, 2)]


def _kernel_specs():
    specs = [
        ("cnn-train", "LeNet-5-style CNN, batch 64 of 1x28x28, fwd + bwd + SGD", cnn_train,
         _sizes({"batch": 8, "steps": 1, "lr": 0.05}, {"batch": 64, "steps": 5, "lr": 0.05},
                {"batch": 64, "steps": 20, "lr": 0.05}, check={"batch": 2, "steps": 2, "lr": 0.05})),
        ("lstm-train", "nn.LSTM(64, 128, batch_first=True), batch 32, 50 steps, linear head, fwd + bwd + SGD",
         lstm_train, _sizes({"batch": 4, "seq": 5, "hidden": 128, "steps": 1, "lr": 0.05},
                            {"batch": 32, "seq": 50, "hidden": 128, "steps": 2, "lr": 0.05},
                            {"batch": 32, "seq": 50, "hidden": 128, "steps": 10, "lr": 0.05},
                            check={"batch": 2, "seq": 4, "hidden": 16, "steps": 2, "lr": 0.05})),
        ("transformer-train", "pre-norm transformer block, d 128, 4 heads, seq 64, batch 16, fwd + bwd + SGD",
         transformer_train, _sizes({"batch": 2, "seq": 16, "steps": 1, "lr": 0.05},
                                   {"batch": 16, "seq": 64, "steps": 2, "lr": 0.05},
                                   {"batch": 16, "seq": 64, "steps": 10, "lr": 0.05},
                                   check={"batch": 1, "seq": 8, "steps": 2, "lr": 0.05})),
        ("wide-mlp-train", "MLP 784-1024-1024-10, batch 512, ReLU, cross entropy, fwd + bwd + SGD", wide_mlp_train,
         _sizes({"batch": 16, "width": 1024, "steps": 1, "lr": 0.05}, {"batch": 512, "width": 1024, "steps": 1,
                                                                      "lr": 0.05},
                {"batch": 512, "width": 1024, "steps": 5, "lr": 0.05},
                check={"batch": 4, "width": 64, "steps": 2, "lr": 0.05})),
    ]
    return specs


# --- 9b. programs (issue 26): the training steps of well-known CPU programs, as their authors wrote them ---------
# A character-level GPT (nanoGPT's model at a CPU size), the word-level LSTM language model of PyTorch's examples and
# its float64 LSTMCell + LBFGS time-series example. Built from nn modules and torch.optim, seeded weights copied in
# (sorted by name) so that every engine starts from the same numbers.

def _seed_module(dg, module, rng, std=None):
    """Every parameter of `module` (sorted by name) from the rng: N(0, std) for matrices and 0 for vectors when `std`
    is given (nanoGPT's init; its LayerNorms, named ln_*, keep their ones and zeros), else U(+-1/sqrt(last dim))."""
    with dg.no_grad():
        for name, p in sorted(module.named_parameters()):
            shape, dtype = tuple(p.shape), np.float64 if p.dtype == dg.float64 else np.float32
            if std is None:
                value = _uniform_init(rng, shape[-1], shape)
            elif any(part.startswith("ln_") for part in name.split(".")):
                continue
            else:
                value = rng.normal(0, std, shape) if len(shape) > 1 else np.zeros(shape)
            p.copy_(_const(dg, value, dtype))


def _gpt_model(dg, vocab, width, heads, layers, context):
    """nanoGPT's GPT (pre-norm blocks, causal scaled_dot_product_attention, GELU MLP, untied head) from dg.nn."""
    nn, F = dg.nn, dg.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.c_fc, self.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(width, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx, targets):
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe(dg.arange(t))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def _token_batches(dg, rng, vocab, batch, length, batches=2):
    """(input, next-token target) pairs of seeded token ids: `length + 1` tokens per row, shifted by one."""
    out = []
    for _ in range(batches):
        tokens = rng.integers(0, vocab, (batch, length + 1))
        out.append((_const(dg, tokens[:, :-1], np.int64), _const(dg, tokens[:, 1:], np.int64)))
    return out


def gpt_train(dg, size):
    """A character-level GPT step: forward, backward, AdamW (nanoGPT's shakespeare_char recipe at a CPU size)."""
    rng = _rng(14)
    vocab, context = 65, size["context"]
    model = _gpt_model(dg, vocab, size["width"], size["heads"], size["layers"], context)
    _seed_module(dg, model, rng, std=0.02)
    params = [p for _, p in sorted(model.named_parameters())]
    optimizer = dg.optim.AdamW(params, lr=size["lr"], betas=(0.9, 0.99), weight_decay=0.1)
    batches = _token_batches(dg, rng, vocab, size["batch"], context)
    state = {"next": 0, "losses": []}

    def run():
        state["losses"] = []
        for _ in range(size["steps"]):
            x, y = batches[state["next"] % len(batches)]
            state["next"] += 1
            loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state["losses"].append(loss.detach())

    return Case(run, size["steps"], lambda: _values(*state["losses"], *params))


def word_lstm_train(dg, size):
    """PyTorch's word_language_model (LSTM): embedding, 2-layer nn.LSTM, linear decoder over the vocabulary; bptt
    steps of a (seq, batch) stream, hidden state carried (detached) between steps, clip_grad_norm_ 0.25, SGD by
    hand at lr 20 as the example does."""
    nn = dg.nn
    rng = _rng(15)
    vocab, width, bptt, batch = size["vocab"], size["width"], size["bptt"], size["batch"]
    encoder, rnn, decoder = nn.Embedding(vocab, width), nn.LSTM(width, width, 2), nn.Linear(width, vocab)
    for module in (encoder, rnn, decoder):
        _seed_module(dg, module, rng)
    params = ([p for _, p in sorted(encoder.named_parameters())] + [p for _, p in sorted(rnn.named_parameters())] +
              [p for _, p in sorted(decoder.named_parameters())])
    stream = rng.integers(0, vocab, (bptt * 2 + 1, batch))
    batches = [(_const(dg, stream[i:i + bptt], np.int64), _const(dg, stream[i + 1:i + 1 + bptt], np.int64))
               for i in (0, bptt)]
    zeros = _const(dg, np.zeros((2, batch, width)))
    state = {"next": 0, "losses": [], "hidden": (zeros, zeros)}

    def run():
        state["losses"] = []
        for _ in range(size["steps"]):
            x, y = batches[state["next"] % len(batches)]
            state["next"] += 1
            hidden = tuple(h.detach() for h in state["hidden"])
            for p in params:
                p.grad = None
            out, hidden = rnn(encoder(x), hidden)
            loss = dg.nn.functional.cross_entropy(decoder(out).view(-1, vocab), y.view(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(params, 0.25)
            with dg.no_grad():
                for p in params:
                    p.add_(p.grad, alpha=-size["lr"])
            state["hidden"] = hidden
            state["losses"].append(loss.detach())

    return Case(run, size["steps"], lambda: _values(*state["losses"], *params))


def lstmcell_lbfgs(dg, size):
    """PyTorch's time_sequence_prediction: two nn.LSTMCell (1 -> 51 -> 51) and a linear output over sine waves in
    float64, trained by LBFGS (lr 0.8) whose closure runs the whole sequence forward and backward; one unit is one
    LBFGS step of `max_iter` closure calls."""
    nn = dg.nn
    rng = _rng(16)
    batch, length, hidden = size["batch"], size["length"], 51
    shift = rng.integers(-80, 80, (batch, 1))
    waves = np.sin((np.arange(length + 1)[None, :] + shift) / 20.0)
    inputs, target = _const(dg, waves[:, :-1], np.float64), _const(dg, waves[:, 1:], np.float64)
    cell1, cell2, head = nn.LSTMCell(1, hidden), nn.LSTMCell(hidden, hidden), nn.Linear(hidden, 1)
    for module in (cell1, cell2, head):
        module.double()
        _seed_module(dg, module, rng)
    params = [p for m in (cell1, cell2, head) for _, p in sorted(m.named_parameters())]
    optimizer = dg.optim.LBFGS(params, lr=0.8, max_iter=size["max_iter"])
    state = {"losses": []}

    def sequence():
        h1 = c1 = h2 = c2 = dg.zeros(batch, hidden, dtype=dg.float64)
        outputs = []
        for x in inputs.split(1, dim=1):
            h1, c1 = cell1(x, (h1, c1))
            h2, c2 = cell2(h1, (h2, c2))
            outputs.append(head(h2))
        return dg.cat(outputs, dim=1)

    def closure():
        optimizer.zero_grad()
        loss = dg.nn.functional.mse_loss(sequence(), target)
        loss.backward()
        return loss

    def run():
        state["losses"] = []
        for _ in range(size["steps"]):
            state["losses"].append(optimizer.step(closure).detach())

    return Case(run, size["steps"], lambda: _values(*state["losses"], *params))


PROGRAMS = "programs"   # `--only programs`: the three programs at both thread counts


def _program_workloads():
    specs = [
        ("gpt-train", "char-level GPT, 4 layers, 4 heads, width 128, context 64, batch 12, AdamW, fwd + bwd + step",
         gpt_train,
         _sizes({"layers": 1, "heads": 2, "width": 32, "context": 16, "batch": 2, "steps": 1, "lr": 1e-3},
                {"layers": 4, "heads": 4, "width": 128, "context": 64, "batch": 12, "steps": 2, "lr": 1e-3},
                {"layers": 4, "heads": 4, "width": 128, "context": 64, "batch": 12, "steps": 10, "lr": 1e-3},
                check={"layers": 2, "heads": 2, "width": 16, "context": 8, "batch": 2, "steps": 2, "lr": 1e-4})),
        ("word-lstm-train", "word LSTM LM: vocab 10000, 2x LSTM 200, bptt 35, batch 20, clip 0.25, SGD",
         word_lstm_train,
         _sizes({"vocab": 500, "width": 32, "bptt": 5, "batch": 4, "steps": 1, "lr": 20.0},
                {"vocab": 10000, "width": 200, "bptt": 35, "batch": 20, "steps": 2, "lr": 20.0},
                {"vocab": 10000, "width": 200, "bptt": 35, "batch": 20, "steps": 10, "lr": 20.0},
                check={"vocab": 50, "width": 8, "bptt": 4, "batch": 3, "steps": 2, "lr": 1.0})),
        ("lstmcell-lbfgs", "float64 LSTMCell 1-51-51 + LBFGS(lr 0.8) over 97 sine waves of 100 steps, "
                           "4 closures per step",
         lstmcell_lbfgs,
         _sizes({"batch": 8, "length": 10, "max_iter": 2, "steps": 1},
                {"batch": 97, "length": 100, "max_iter": 4, "steps": 1},
                {"batch": 97, "length": 999, "max_iter": 20, "steps": 1},
                check={"batch": 3, "length": 6, "max_iter": 3, "steps": 2})),
    ]
    return [Workload(f"{name}-{t}t", name, "ms/step", f"{about}, {t} thread{'s' if t > 1 else ''}", build, sizes,
                     rtol=1e-3, atol=1e-4, threads=t)
            for name, about, build, sizes in specs for t in (1, 2)]


# --- the list ------------------------------------------------------------------------------------------------------

# --- 10. dynamic vs static graphs (issue 20): each workload eagerly and under dyngrad.compile's replays ------------
# The step (forward, backward, SGD) is one function; its `-static` row calls dyngrad.compile(step,
# mode="reduce-overhead") of it, recorded at the first (warm-up) call and replayed after, its `-verified` row
# dyngrad.compile(step, mode="verified") (Python runs, each op checked against the recording); the table's three rows
# of a workload are the comparison (docs/compile.md). PyTorch's column of a compiled row is torch eager unless
# DYNGRAD_BENCH_TORCH_COMPILE=1 (torch.compile needs a C compiler and seconds per graph).
_COMPILE_MODES = {"static": "reduce-overhead", "verified": "verified"}


def _compiled(dg, step, static):
    """static: "eager" (False), "static" (True) or "verified"."""
    if static is False or static == "eager":
        return step
    if dg.__name__ == "torch":   # torch.compile beside static replay only; the verified row's torch is eager
        compiled = static in (True, "static") and os.environ.get("DYNGRAD_BENCH_TORCH_COMPILE") == "1"
        return dg.compile(step) if compiled else step
    return dg.compile(step, mode=_COMPILE_MODES["static" if static is True else static])


def _chain_step_case(dg, size, static):
    """size["ops"] one-element ops (tanh(y * a + b), 3 per round) forward + backward in one step."""
    x0, a0, b0 = _scalar_chain_inputs()
    x, a, b = _param(dg, x0), _param(dg, a0), _param(dg, b0)
    rounds = size["ops"] // 3
    out = {}

    def step(x):
        x.grad = a.grad = b.grad = None
        y = x
        for _ in range(rounds):
            y = (y * a + b).tanh()
        y.sum().backward()
        return y

    step = _compiled(dg, step, static)

    def run():
        out.pop("y", None)
        out["y"] = step(x)

    return Case(run, 3 * rounds, lambda: _values(out["y"], x.grad, a.grad, b.grad))


def _step_case(dg, params, batches, loss_fn, size, static):
    """_train_case with the step as one function, compiled for a -static row."""
    state = {"next": 0, "losses": []}

    def train_step(*batch):
        loss = loss_fn(*batch)
        loss.backward()
        _sgd_step(dg, params, size["lr"])
        return loss.detach()

    train_step = _compiled(dg, train_step, static)

    def run():
        state["losses"] = []
        for _ in range(size["steps"]):
            batch = batches[state["next"] % len(batches)]
            state["next"] += 1
            state["losses"].append(train_step(*batch))

    return Case(run, size["steps"], lambda: _values(*state["losses"], *params))


def _small_mlp_case(dg, size, static):
    """MLP 64-128-10 (ReLU, cross entropy, SGD), batch 32: the issue's MLP step."""
    F = dg.nn.functional
    rng = _rng(13)
    params = _linear_params(dg, rng, 64, 128) + _linear_params(dg, rng, 128, 10)
    batches = _class_batches(dg, rng, (size["batch"], 64))
    cross_entropy = _cross_entropy(dg)

    def loss_fn(x, y):
        return cross_entropy(F.linear(F.relu(F.linear(x, *params[0:2])), *params[2:4]), y)

    return _step_case(dg, params, batches, loss_fn, size, static)


def _transformer_step_case(dg, size, static):
    return _step_case(dg, *_transformer_block(dg, size), size, static)


_KERNEL_PARTS = {"cnn-train": "_cnn", "lstm-train": "_lstm", "transformer-train": "_transformer_block",
                 "wide-mlp-train": "_wide_mlp"}


def compiled_kernel_case(group):
    """build(dg, size, mode) of a kernel-bound training step (section 9) as one function, eager ("eager"), or under
    dyngrad.compile ("verified", "static"): the same params, batches and loss as the group's eager row."""
    parts = globals()[_KERNEL_PARTS[group]]
    return lambda dg, size, mode: _step_case(dg, *parts(dg, size), size, mode)


def _compiled_kernel_workloads():
    """The four kernel-bound training steps under verified and static replay, at 1 and 2 threads: with the eager
    rows of section 9 (cnn-train-1t, ...), the dynamic-vs-static comparison of issue 20 ("-verified", "-static")."""
    titles = {"verified": "verified replay", "static": "static replay"}
    return [Workload(f"{name}-{t}t-{mode}", "compile", "ms/step",
                     f"{about}, {t} thread{'s' if t > 1 else ''}, {titles[mode]}",
                     lambda dg, size, name=name, mode=mode: compiled_kernel_case(name)(dg, size, mode), sizes,
                     rtol=1e-3, atol=1e-4, threads=t)
            for name, about, _, sizes in _kernel_specs() for t in (1, 2) for mode in ("verified", "static")]


def _static_workloads():
    specs = [
        ("op-200", "us/op", "200 one-element ops forward + backward in one step", _chain_step_case,
         _sizes({"ops": 201}, {"ops": 201}, {"ops": 201})),
        ("mlp-step-32", "ms/step", "MLP 64-128-10, batch 32, fwd + bwd + SGD", _small_mlp_case,
         _sizes({"batch": 32, "steps": 2, "lr": 0.05}, {"batch": 32, "steps": 20, "lr": 0.05},
                {"batch": 32, "steps": 100, "lr": 0.05})),
        ("transformer-step", "ms/step", "pre-norm transformer block, d 128, seq 64, batch 16, fwd + bwd + SGD",
         _transformer_step_case,
         _sizes({"batch": 2, "seq": 16, "steps": 2, "lr": 0.05}, {"batch": 16, "seq": 64, "steps": 3, "lr": 0.05},
                {"batch": 16, "seq": 64, "steps": 10, "lr": 0.05}, check={"batch": 1, "seq": 8, "steps": 2,
                                                                          "lr": 0.05})),
    ]
    out = []
    titles = {"eager": "eager", "verified": "verified replay (dyngrad.compile, mode='verified')",
              "static": "static replay (dyngrad.compile, mode='reduce-overhead')"}
    for name, unit, about, build, sizes in specs:
        for mode in ("eager", "verified", "static"):
            out.append(Workload(f"{name}-{mode}", "compile", unit, f"{about}, {titles[mode]}",
                                lambda dg, size, build=build, mode=mode: build(dg, size, mode), sizes,
                                rtol=1e-3, atol=1e-4))
    return out


def _sizes(quick, default, full, check=None):
    return {"quick": quick, "default": default, "full": full, "check": check or quick}


WORKLOADS = [
    Workload("op-overhead-fwd", "op-overhead", "us/op",
             "y = tanh(y * a + b) on a 1-element tensor, forward only (graph recorded)",
             op_overhead_fwd, _sizes({"steps": 100}, {"steps": 1000}, {"steps": 10000}),
             numpy=lambda size: _numpy_scalar_chain(size["steps"], backward=False)),
    Workload("op-overhead", "op-overhead", "us/op",
             "y = tanh(y * a + b) on a 1-element tensor, forward + backward",
             op_overhead, _sizes({"steps": 100}, {"steps": 1000}, {"steps": 10000}),
             numpy=lambda size: _numpy_scalar_chain(size["steps"], backward=True)),
    Workload("graph-basic", "dynamic-graphs", "us/graph",
             "a basic graph (tanh(x W + b), two reductions) and its gradients, 8-wide",
             graph_basic, _sizes({"graphs": 20, "dim": 8}, {"graphs": 200, "dim": 8}, {"graphs": 2000, "dim": 8})),
    Workload("graph-branch", "dynamic-graphs", "us/graph",
             "a branch chosen by the data (if h.sum() > 0), a new graph per input",
             graph_branch, _sizes({"graphs": 20, "dim": 8}, {"graphs": 200, "dim": 8}, {"graphs": 2000, "dim": 8})),
    Workload("graph-loop", "dynamic-graphs", "us/graph",
             "a loop whose length (1..16) is read from the input",
             graph_loop, _sizes({"graphs": 20, "dim": 8}, {"graphs": 200, "dim": 8}, {"graphs": 2000, "dim": 8})),
    Workload("mlp-train-32", "mlp-train", "ms/step",
             "MLP 64-128-128-10 (ReLU, cross entropy, SGD) on digits, batch 32",
             _build_mlp, _sizes({"batch": 32, "steps": 3, "lr": 0.1}, {"batch": 32, "steps": 50, "lr": 0.1},
                                {"batch": 32, "steps": 200, "lr": 0.1}), rtol=1e-3, atol=1e-4),
    Workload("mlp-train-256", "mlp-train", "ms/step",
             "MLP 64-128-128-10 (ReLU, cross entropy, SGD) on digits, batch 256",
             _build_mlp, _sizes({"batch": 256, "steps": 2, "lr": 0.1}, {"batch": 256, "steps": 14, "lr": 0.1},
                                {"batch": 256, "steps": 70, "lr": 0.1}), rtol=1e-3, atol=1e-4),
    Workload("dynamic-rnn", "dynamic-rnn", "ms/seq",
             "Elman RNN cell, hidden 64, one update per sequence of random length 5..50",
             _build_rnn, _sizes({"sequences": 5, "hidden": 64, "min_len": 5, "max_len": 50},
                                {"sequences": 200, "hidden": 64, "min_len": 5, "max_len": 50},
                                {"sequences": 1000, "hidden": 64, "min_len": 5, "max_len": 50}),
             rtol=1e-3, atol=1e-4),
    Workload("tree-net", "tree-net", "ms/tree",
             "recursive net over random binary trees of 10..40 leaves, one update per tree",
             _build_tree_net, _sizes({"trees": 5, "dim": 32, "min_leaves": 10, "max_leaves": 40},
                                     {"trees": 100, "dim": 32, "min_leaves": 10, "max_leaves": 40},
                                     {"trees": 500, "dim": 32, "min_leaves": 10, "max_leaves": 40}),
             rtol=1e-3, atol=1e-4),
    Workload("gemm", "gemm", "GFLOPS",
             "float32 n x n matmul forward + backward (three products); numpy does the same three by hand",
             _build_gemm, _sizes({"n": 128}, {"n": 1024}, {"n": 2048}, check={"n": 64}),
             numpy=_numpy_gemm, rtol=1e-4, atol=1e-4),
    Workload("elementwise-large", "elementwise-large", "GB/s",
             "tanh(a * b + c) forward + backward; GB/s counts the 11 arrays of float32 the work must touch",
             _build_elementwise, _sizes({"n": 100_000}, {"n": 10_000_000}, {"n": 30_000_000}, check={"n": 1000}),
             numpy=_numpy_elementwise),
    Workload("deep-chain", "deep-chain", "s",
             "a chain of sequential ops on a 1-element tensor, backward, and freeing the graph",
             _build_deep_chain, _sizes({"ops": 3000}, {"ops": 100_000}, {"ops": 1_000_000})),
    *_kernel_workloads(),
    *_program_workloads(),
    *_static_workloads(),
    *_compiled_kernel_workloads(),
]
KERNELS = "kernels"   # `--only kernels`: the four kernel-bound training steps at both thread counts
KERNEL_GROUPS = ("cnn-train", "lstm-train", "transformer-train", "wide-mlp-train")
COMPILE = "compile"   # `--only compile`: every dynamic-vs-static row, with the kernel-bound steps' eager rows
PROGRAM_GROUPS = ("gpt-train", "word-lstm-train", "lstmcell-lbfgs")


def select(only=None):
    """The workloads named (or whose group is named) in `only`, in the list's order; all when `only` is empty."""
    if not only:
        return list(WORKLOADS)
    known = {w.name for w in WORKLOADS} | {w.group for w in WORKLOADS} | {KERNELS, PROGRAMS}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ValueError(f"unknown workload {', '.join(unknown)}; choose from: {', '.join(sorted(known))}")
    return [w for w in WORKLOADS
            if w.name in only or w.group in only or (KERNELS in only and w.group in KERNEL_GROUPS)
            or (COMPILE in only and w.group in KERNEL_GROUPS)   # the eager rows of the compiled kernel rows
            or (PROGRAMS in only and w.group in PROGRAM_GROUPS)]


def digits_source():
    return _digits()[2]

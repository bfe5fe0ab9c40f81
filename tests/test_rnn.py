"""RNN, LSTM, GRU and their cells, and nn.utils.rnn, against torch 2.13 on the same weights: outputs, final
states and gradients (parameters, inputs, initial states), over num_layers, bidirectional, batch_first, bias,
proj_size, nonlinearity, dropout in eval mode, unbatched input and PackedSequence; torch's errors."""
import itertools
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def np_of(t):
    return np.array(t.detach().numpy())


def pair(dg, kind, *args, **kwargs):
    """The same layer in dyngrad (float64) and torch, torch's weights copied from ours."""
    ours = getattr(dg.nn, kind)(*args, **kwargs).double()
    theirs = getattr(torch.nn, kind)(*args, **kwargs).double()
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    theirs.load_state_dict({k: torch.tensor(np_of(v)) for k, v in ours.state_dict().items()})
    return ours, theirs


def states(s):
    return s if isinstance(s, tuple) else (s,)


def close(a, b, what):
    np.testing.assert_allclose(np_of(a), b.detach().numpy(), rtol=1e-9, atol=1e-11, err_msg=what)


CONFIGS = [dict(), dict(num_layers=2), dict(bidirectional=True), dict(batch_first=True, bias=False),
           dict(num_layers=2, bidirectional=True, batch_first=True), dict(num_layers=3, dropout=0.5)]
KINDS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("LSTM", {"proj_size": 2}), ("GRU", {})]


@pytest.mark.parametrize("config", range(len(CONFIGS)))
@pytest.mark.parametrize("kind,extra", KINDS, ids=[k + "".join(f"-{v}" for v in e.values()) for k, e in KINDS])
def test_sequence_layers_match_torch(dg, kind, extra, config):
    kw = dict(CONFIGS[config], **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # torch's LSTM-with-projection notice
        ours, theirs = pair(dg, kind, 3, 4, **kw)
        ours.eval(), theirs.eval()          # dropout between layers is random: compare in eval mode
        rng = np.random.default_rng(config)
        shape = (2, 5, 3) if kw.get("batch_first") else (5, 2, 3)
        xv = rng.standard_normal(shape)
        d = 2 if kw.get("bidirectional") else 1
        h_out = kw.get("proj_size") or 4
        hv = [rng.standard_normal((d * kw.get("num_layers", 1), 2, h_out))]
        if kind == "LSTM":
            hv.append(rng.standard_normal((d * kw.get("num_layers", 1), 2, 4)))
        for with_state in (False, True):
            x, tx = dg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
            h = [dg.tensor(v, requires_grad=True) for v in hv]
            th = [torch.tensor(v, requires_grad=True) for v in hv]
            hx = (tuple(h) if kind == "LSTM" else h[0]) if with_state else None
            thx = (tuple(th) if kind == "LSTM" else th[0]) if with_state else None
            out, s = ours(x, hx)
            tout, ts = theirs(tx, thx)
            close(out, tout, "output")
            for a, b in zip(states(s), states(ts)):
                close(a, b, "final state")
            weights = np.random.default_rng(9).standard_normal(tuple(out.shape))
            loss = (out * dg.tensor(weights)).sum() + sum(t.sum() for t in states(s))
            tloss = (tout * torch.tensor(weights)).sum() + sum(t.sum() for t in states(ts))
            ours.zero_grad(), theirs.zero_grad()
            loss.backward(), tloss.backward()
            close(x.grad, tx.grad, "input grad")
            for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
                close(p.grad, tp.grad, name)
            if with_state:
                for a, b in zip(h, th):
                    close(a.grad, b.grad, "state grad")


@pytest.mark.parametrize("kind,extra", KINDS, ids=[k + "".join(f"-{v}" for v in e.values()) for k, e in KINDS])
def test_unbatched_input(dg, kind, extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = pair(dg, kind, 3, 4, num_layers=2, bidirectional=True, **extra)
        xv = np.random.default_rng(1).standard_normal((5, 3))
        out, s = ours(dg.tensor(xv))
        tout, ts = theirs(torch.tensor(xv))
        close(out, tout, "output")
        for a, b in zip(states(s), states(ts)):
            close(a, b, "state")
        out2, _ = ours(dg.tensor(xv), s)
        tout2, _ = theirs(torch.tensor(xv), ts)
        close(out2, tout2, "output with state")


@pytest.mark.parametrize("enforce_sorted", [False, True])
@pytest.mark.parametrize("kind,extra", KINDS, ids=[k + "".join(f"-{v}" for v in e.values()) for k, e in KINDS])
def test_packed_sequences_match_torch(dg, kind, extra, enforce_sorted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = pair(dg, kind, 3, 4, num_layers=2, bidirectional=True, **extra)
        lengths = [5, 3, 3, 1] if enforce_sorted else [2, 5, 1, 3]
        seqs = [np.random.default_rng(i).standard_normal((n, 3)) for i, n in enumerate(lengths)]
        xs = [dg.tensor(s, requires_grad=True) for s in seqs]
        txs = [torch.tensor(s, requires_grad=True) for s in seqs]
        packed = dg.nn.utils.rnn.pack_sequence(xs, enforce_sorted=enforce_sorted)
        tpacked = torch.nn.utils.rnn.pack_sequence(txs, enforce_sorted=enforce_sorted)
        d, h_out = 2, extra.get("proj_size") or 4
        hv = [np.random.default_rng(7).standard_normal((2 * d, 4, h_out))]
        if kind == "LSTM":
            hv.append(np.random.default_rng(8).standard_normal((2 * d, 4, 4)))
        h = [dg.tensor(v, requires_grad=True) for v in hv]
        th = [torch.tensor(v, requires_grad=True) for v in hv]
        out, s = ours(packed, tuple(h) if kind == "LSTM" else h[0])
        tout, ts = theirs(tpacked, tuple(th) if kind == "LSTM" else th[0])
        assert isinstance(out, dg.nn.utils.rnn.PackedSequence)
        close(out.data, tout.data, "packed output")
        assert out.batch_sizes.tolist() == tout.batch_sizes.tolist()
        for a, b in zip(states(s), states(ts)):
            close(a, b, "final state")
        padded, lens = dg.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
        tpadded, tlens = torch.nn.utils.rnn.pad_packed_sequence(tout, batch_first=True, padding_value=-1.0)
        close(padded, tpadded, "padded output")
        assert lens.tolist() == tlens.tolist() and lens.dtype is dg.int64
        weights = np.random.default_rng(3).standard_normal(tuple(padded.shape))
        ((padded * dg.tensor(weights)).sum() + sum(t.sum() for t in states(s))).backward()
        ((tpadded * torch.tensor(weights)).sum() + sum(t.sum() for t in states(ts))).backward()
        for a, b in zip(xs + h, txs + th):
            close(a.grad, b.grad, "input grad")
        for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            close(p.grad, tp.grad, name)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_torch(dg, kind, bias):
    ours, theirs = pair(dg, kind, 3, 4, bias=bias)
    rng = np.random.default_rng(0)
    for batched in (True, False):
        xv = rng.standard_normal((2, 3) if batched else (3,))
        hshape = (2, 4) if batched else (4,)
        hv = [rng.standard_normal(hshape) for _ in range(2 if kind == "LSTMCell" else 1)]
        for with_state in (False, True):
            x, tx = dg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
            h = [dg.tensor(v, requires_grad=True) for v in hv]
            th = [torch.tensor(v, requires_grad=True) for v in hv]
            hx = (tuple(h) if kind == "LSTMCell" else h[0]) if with_state else None
            thx = (tuple(th) if kind == "LSTMCell" else th[0]) if with_state else None
            out, tout = ours(x, hx), theirs(tx, thx)
            for a, b in zip(states(out), states(tout)):
                close(a, b, "output")
            sum(t.sum() * (i + 2) for i, t in enumerate(states(out))).backward()
            sum(t.sum() * (i + 2) for i, t in enumerate(states(tout))).backward()
            close(x.grad, tx.grad, "input grad")
            if with_state:
                for a, b in zip(h, th):
                    close(a.grad, b.grad, "state grad")
    assert repr(ours) == repr(theirs)


def test_rnn_relu_cell(dg):
    ours, theirs = pair(dg, "RNNCell", 3, 4, nonlinearity="relu")
    xv = np.random.default_rng(0).standard_normal((5, 3))
    close(ours(dg.tensor(xv)), theirs(torch.tensor(xv)), "relu cell")


def test_parameters_and_properties(dg):
    for kind, kw in [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)), ("GRU", dict(bias=False)),
                     ("RNN", dict(nonlinearity="relu", num_layers=2))]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours, theirs = getattr(dg.nn, kind)(3, 4, **kw), getattr(torch.nn, kind)(3, 4, **kw)
        assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
        assert [[tuple(w.shape) for w in ws] for ws in ours.all_weights] == \
               [[tuple(w.shape) for w in ws] for ws in theirs.all_weights]
        assert repr(ours) == repr(theirs)
        for attr in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional",
                     "proj_size", "mode"):
            if hasattr(theirs, attr) and attr != "mode":
                assert getattr(ours, attr) == getattr(theirs, attr), attr
        ours.flatten_parameters()
        bound = 1 / np.sqrt(4)
        assert all(float(p.abs().max()) <= bound for p in ours.parameters())


ERRORS = [
    ("input size", lambda nn, m: nn.LSTM(2, 3)(m.randn(4, 5, 3))),
    ("input dims", lambda nn, m: nn.LSTM(2, 3)(m.randn(4, 5, 2, 1))),
    ("unbatched hx", lambda nn, m: nn.LSTM(2, 3)(m.randn(4, 2), (m.zeros(1, 1, 3), m.zeros(1, 1, 3)))),
    ("batched hx dims", lambda nn, m: nn.GRU(2, 3)(m.randn(4, 5, 2), m.zeros(5, 3))),
    ("h size", lambda nn, m: nn.LSTM(2, 3)(m.randn(4, 5, 2), (m.zeros(1, 4, 3), m.zeros(1, 5, 3)))),
    ("c size", lambda nn, m: nn.LSTM(2, 3)(m.randn(4, 5, 2), (m.zeros(1, 5, 3), m.zeros(2, 5, 3)))),
    ("gru hidden", lambda nn, m: nn.GRU(2, 3)(m.randn(4, 5, 2), m.zeros(2, 5, 3))),
    ("rnn unbatched hx", lambda nn, m: nn.RNN(2, 3)(m.randn(4, 2), m.zeros(1, 1, 3))),
    ("proj on GRU", lambda nn, m: nn.GRU(2, 3, proj_size=2)),
    ("proj too big", lambda nn, m: nn.LSTM(2, 3, proj_size=3)),
    ("nonlinearity", lambda nn, m: nn.RNN(2, 3, nonlinearity="sigmoid")),
    ("dropout range", lambda nn, m: nn.LSTM(2, 3, num_layers=2, dropout=1.5)),
    ("hidden zero", lambda nn, m: nn.GRU(2, 0)),
    ("cell dims", lambda nn, m: nn.RNNCell(2, 3)(m.randn(4, 5, 2))),
    ("cell input size", lambda nn, m: nn.RNNCell(2, 3)(m.randn(4, 3))),
    ("cell batch", lambda nn, m: nn.RNNCell(2, 3)(m.randn(4, 2), m.zeros(5, 3))),
]


def test_bad_nonlinearity_fails_at_construction(dg):
    """torch accepts RNNCell(nonlinearity='gelu') and fails at the first call; dyngrad fails at once."""
    with pytest.raises(ValueError, match="Unknown nonlinearity: gelu"):
        dg.nn.RNNCell(2, 3, nonlinearity="gelu")


@pytest.mark.parametrize("name,call", ERRORS, ids=[n for n, _ in ERRORS])
def test_errors_as_torch(dg, name, call):
    def outcome(m):
        try:
            call(m.nn, m)
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__, str(exc)
        return "ok", ""
    ours, theirs = outcome(dg), outcome(torch)
    assert ours[0] == theirs[0], (ours, theirs)
    message = ours[1]
    if name not in CONSTRUCTION_ERRORS:
        # a call's error names the layer first, as repr shows it (nn/modules/module.py layer_error), then torch's text
        layer = re.match(r"^(RNN|LSTM|GRU|RNNCell|LSTMCell|GRUCell)\([^()]*\): ", message)
        assert layer, f"{name}: the message does not name the layer: {message!r}"
        message = message[layer.end():]
    if name not in ("input dims", "cell dims", "nonlinearity"):
        assert message == theirs[1]


CONSTRUCTION_ERRORS = {"proj on GRU", "proj too big", "nonlinearity", "dropout range", "hidden zero"}


def test_dropout_warning_as_torch(dg):
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1, but got "
                                         "dropout=0.5 and num_layers=1"):
        dg.nn.LSTM(2, 3, dropout=0.5)


def test_dropout_between_layers_in_training(dg):
    dg.manual_seed(0)
    m = dg.nn.GRU(3, 4, num_layers=2, dropout=0.5).double()
    x = dg.tensor(np.random.default_rng(0).standard_normal((5, 2, 3)))
    a, b = m(x)[0], m(x)[0]
    assert not np.allclose(np_of(a), np_of(b))
    m.eval()
    np.testing.assert_array_equal(np_of(m(x)[0]), np_of(m(x)[0]))


# ----- nn.utils.rnn ----------------------------------------------------------------------------------------------

def rnn_utils(m):
    return m.nn.utils.rnn


def seq_values(lengths, feature=(2,)):
    return [np.random.default_rng(i).standard_normal((n,) + feature) for i, n in enumerate(lengths)]


@pytest.mark.parametrize("batch_first,side", list(itertools.product([False, True], ["right", "left"])))
def test_pad_sequence_as_torch(dg, batch_first, side):
    vals = seq_values([3, 5, 1], feature=(2, 2))
    outs = []
    for m in (dg, torch):
        xs = [m.tensor(v, requires_grad=True) for v in vals]
        p = rnn_utils(m).pad_sequence(xs, batch_first=batch_first, padding_value=-2.0, padding_side=side)
        (p * m.tensor(np.arange(p.numel(), dtype=np.float64).reshape(tuple(p.shape)))).sum().backward()
        outs.append((np_of(p), [np_of(x.grad) for x in xs]))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    for a, b in zip(outs[0][1], outs[1][1]):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="padding_side"):
        rnn_utils(dg).pad_sequence([dg.ones(2)], padding_side="middle")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_pack_and_pad_as_torch(dg, batch_first, enforce_sorted):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    padded = np.random.default_rng(0).standard_normal((4, 5, 2) if batch_first else (5, 4, 2))
    results = []
    for m in (dg, torch):
        x = m.tensor(padded, requires_grad=True)
        packed = rnn_utils(m).pack_padded_sequence(x, m.tensor(lengths), batch_first=batch_first,
                                                   enforce_sorted=enforce_sorted)
        back, lens = rnn_utils(m).pad_packed_sequence(packed, batch_first=batch_first, total_length=6)
        (back * m.tensor(np.arange(back.numel(), dtype=np.float64).reshape(tuple(back.shape)))).sum().backward()
        back_values = np_of(back)
        unpacked = rnn_utils(m).unpack_sequence(packed)
        # (torch's unpad_sequence transposes its argument in place when batch_first=False; ours leaves it alone)
        unpadded = rnn_utils(m).unpad_sequence(back, lens, batch_first=batch_first)
        results.append((np_of(packed.data), packed.batch_sizes.tolist(),
                        None if packed.sorted_indices is None else packed.sorted_indices.tolist(),
                        None if packed.unsorted_indices is None else packed.unsorted_indices.tolist(),
                        back_values, lens.tolist(), np_of(x.grad), [np_of(u) for u in unpacked],
                        [np_of(u) for u in unpadded]))
    for a, b in zip(*results):
        if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b


def test_pack_sequence_and_packed_sequence_methods(dg):
    vals = seq_values([2, 4, 1])
    ours = rnn_utils(dg).pack_sequence([dg.tensor(v) for v in vals], enforce_sorted=False)
    theirs = torch.nn.utils.rnn.pack_sequence([torch.tensor(v) for v in vals], enforce_sorted=False)
    np.testing.assert_array_equal(np_of(ours.data), theirs.data.numpy())
    assert ours.sorted_indices.tolist() == theirs.sorted_indices.tolist()
    assert ours.float().data.dtype is dg.float32 and ours.to(dg.float32).data.dtype is dg.float32
    assert ours.to("cpu") is ours and ours.is_cuda is False and not ours.is_pinned()
    assert isinstance(ours, tuple) and len(ours) == 4 and ours._fields == theirs._fields
    rebuilt = rnn_utils(dg).PackedSequence(ours.data, ours.batch_sizes, ours.sorted_indices)
    assert rebuilt.unsorted_indices.tolist() == theirs.unsorted_indices.tolist()
    with pytest.raises(RuntimeError, match="CUDA"):
        ours.cuda()


PACK_ERRORS = [
    ("unsorted", lambda u, m: u.pack_padded_sequence(m.zeros(3, 2, 1), [2, 3])),
    ("zero length", lambda u, m: u.pack_padded_sequence(m.zeros(3, 2, 1), [0, 3], enforce_sorted=False)),
    ("unsorted list", lambda u, m: u.pack_sequence([m.ones(1), m.ones(2)])),
    ("total_length", lambda u, m: u.pad_packed_sequence(u.pack_sequence([m.ones(3, 1)]), total_length=2)),
]


@pytest.mark.parametrize("name,call", PACK_ERRORS, ids=[n for n, _ in PACK_ERRORS])
def test_pack_errors_as_torch(dg, name, call):
    outs = []
    for m in (dg, torch):
        try:
            call(rnn_utils(m), m)
            outs.append(("ok", ""))
        except Exception as exc:  # noqa: BLE001
            outs.append((type(exc).__name__, str(exc)))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("kind,hidden", [("LSTM", 128), ("GRU", 128), ("RNN", 176)])
def test_batch_rows_in_blocks_match_torch_at_any_thread_count(dg, kind, hidden):
    # Note [RNN rows in parallel]: a batch of 40 is run as 3 blocks of rows (one per thread); outputs, final states
    # and every gradient match torch, and the bits are the same on 1 and 2 threads
    ours, theirs = pair(dg, kind, 5, hidden)
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((3, 40, 5))
    hv = [rng.standard_normal((1, 40, hidden)) for _ in range(2 if kind == "LSTM" else 1)]
    th = [torch.tensor(v, requires_grad=True) for v in hv]
    tx = torch.tensor(xv, requires_grad=True)
    tout, ts = theirs(tx, tuple(th) if kind == "LSTM" else th[0])
    weights = rng.standard_normal(tuple(tout.shape))
    ((tout * torch.tensor(weights)).sum() + sum(t.sum() for t in states(ts))).backward()
    runs = []
    before = dg.get_num_threads()
    try:
        for threads in (1, 2):
            dg.set_num_threads(threads)
            x = dg.tensor(xv, requires_grad=True)
            h = [dg.tensor(v, requires_grad=True) for v in hv]
            ours.zero_grad()
            out, s = ours(x, tuple(h) if kind == "LSTM" else h[0])
            ((out * dg.tensor(weights)).sum() + sum(t.sum() for t in states(s))).backward()
            got = [out, *states(s), x.grad, *(t.grad for t in h), *(p.grad for p in ours.parameters())]
            want = [tout, *states(ts), tx.grad, *(t.grad for t in th), *(p.grad for p in theirs.parameters())]
            for i, (a, b) in enumerate(zip(got, want)):
                close(a, b, f"value {i}")
            runs.append([np_of(a) for a in got])
    finally:
        dg.set_num_threads(before)
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def _has_avx512():
    from dyngrad import _C
    before = _C._gemm_kernel()
    try:
        _C._set_gemm_kernel("avx512")
        return True
    except RuntimeError:  # the CPU has no AVX-512F: only the tile loop runs (and is what such CPUs use)
        return False
    finally:
        _C._set_gemm_kernel(before)


@pytest.fixture(params=["blas", "avx512"])
def gemm_kernel(request):
    """The float32 product kernel (Note [Recurrent products on the own kernel] in kernels/rnn.cpp): "blas" takes
    rnn.cpp's tile loop for the step products (the path of CPUs without AVX-512F), "avx512" the own kernel."""
    from dyngrad import _C
    if request.param == "avx512" and not _has_avx512():
        pytest.skip("the CPU has no AVX-512F")
    before = _C._set_gemm_kernel(request.param)
    assert _C._gemm_kernel() == request.param
    yield request.param
    _C._set_gemm_kernel(before)


@pytest.mark.parametrize("kind,hidden,batch", [("LSTM", 72, 9), ("GRU", 72, 9), ("RNN", 80, 6), ("LSTM", 16, 64),
                                               ("GRU", 8, 13), ("RNN", 200, 3)])
def test_recurrent_products_in_float32_tiles_match_torch(dg, gemm_kernel, kind, hidden, batch):
    # Note [Recurrent products without repacking]: float32 steps of up to 64 rows multiply in 4-row x 64-column
    # register tiles; 9 rows and 72 hidden units (forward 288 = 4 x 64 + 32 columns, backward 72 = 64 + 8) take
    # the full tiles and every kind of remainder; backward, K = 288 runs in blocks of 128 + 128 + 32 rows of the
    # packed weight. On the own kernel (Note [Recurrent products on the own kernel]): 8-row blocks and 48-column
    # strips, forward 288 = 6 x 48, backward 72 = 48 + 24 (masked), 8 (one masked vector), 200 = 4 x 48 + 8, and
    # K = 288 or 600 in blocks of 192. Against torch in float64: float32's rounding only.
    ours, theirs = pair(dg, kind, 7, hidden, 2)
    ours = ours.float()
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((4, batch, 7))
    tx = torch.tensor(xv, requires_grad=True)
    tout, _ = theirs(tx)
    weights = rng.standard_normal(tuple(tout.shape))
    (tout * torch.tensor(weights)).sum().backward()
    x = dg.tensor(xv.astype(np.float32), requires_grad=True)
    out, _ = ours(x)
    (out * dg.tensor(weights.astype(np.float32))).sum().backward()
    got = [out, x.grad, *(p.grad for p in ours.parameters())]
    want = [tout, tx.grad, *(p.grad for p in theirs.parameters())]
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np_of(a), b.detach().numpy(), rtol=2e-4, atol=2e-5, err_msg=f"value {i}")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_float32_row_blocks_same_bits_at_any_thread_count(dg, gemm_kernel, kind):
    # Note [RNN rows in parallel] on either step kernel, in float32: a batch of 40 runs as 3 blocks of rows
    # (work 40 x 128 x 4H >= 2^20); outputs and gradients are close to torch's float64 and the same bits on 1 and
    # 2 threads
    ours, theirs = pair(dg, kind, 6, 128)
    ours = ours.float()
    rng = np.random.default_rng(11)
    xv = rng.standard_normal((5, 40, 6))
    tx = torch.tensor(xv, requires_grad=True)
    tout, _ = theirs(tx)
    weights = rng.standard_normal(tuple(tout.shape))
    (tout * torch.tensor(weights)).sum().backward()
    want = [tout, tx.grad, *(p.grad for p in theirs.parameters())]
    runs = []
    before = dg.get_num_threads()
    try:
        for threads in (1, 2):
            dg.set_num_threads(threads)
            x = dg.tensor(xv.astype(np.float32), requires_grad=True)
            ours.zero_grad()
            out, _ = ours(x)
            (out * dg.tensor(weights.astype(np.float32))).sum().backward()
            got = [np_of(a) for a in [out, x.grad, *(p.grad for p in ours.parameters())]]
            for i, (a, b) in enumerate(zip(got, want)):
                np.testing.assert_allclose(a, b.detach().numpy(), rtol=2e-4, atol=5e-5, err_msg=f"value {i}")
            runs.append(got)
    finally:
        dg.set_num_threads(before)
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_second_order_and_tangents_as_step_functions(dg, kind):
    """The cells run as one-step rnn_layer nodes (Note [Cells as one-step layers] in nn/modules/rnn.py): their double
    backward (gradgradcheck), forward-mode tangents (func.jvp) and vmap agree with the step functions' ops."""
    import importlib
    rnn_module = importlib.import_module(type(dg.nn.LSTMCell(1, 1)).__module__)
    cell = getattr(dg.nn, kind)(3, 4).double()
    rng = np.random.default_rng(1)
    x = dg.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    h = [dg.tensor(rng.standard_normal((2, 4)), requires_grad=True) for _ in range(2 if kind == "LSTMCell" else 1)]

    def fused(x, *h):
        return states(cell(x, tuple(h) if kind == "LSTMCell" else h[0]))

    def steps(x, *h):
        gi = dg.nn.functional.linear(x, cell.weight_ih, cell.bias_ih)
        return states(rnn_module._STEPS[cell.mode](gi, tuple(h) if kind == "LSTMCell" else h[0], cell.weight_hh,
                                                   cell.bias_hh))

    assert dg.autograd.gradgradcheck(lambda x, *h: sum(t.sin().sum() for t in fused(x, *h)), (x, *h))
    out, grads = fused(x, *h), steps(x, *h)
    for a, b in zip(out, grads):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-13)
    tangents = tuple(dg.tensor(rng.standard_normal(tuple(t.shape))) for t in (x, *h))
    primals = tuple(t.detach() for t in (x, *h))
    _, t_fused = dg.func.jvp(fused, primals, tangents)
    _, t_steps = dg.func.jvp(steps, primals, tangents)
    for a, b in zip(t_fused, t_steps):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    xs = dg.tensor(rng.standard_normal((3, 2, 3)))
    hs = [dg.tensor(rng.standard_normal((3, 2, 4))) for _ in h]
    with dg.no_grad():
        v_fused, v_steps = dg.func.vmap(fused)(xs, *hs), dg.func.vmap(steps)(xs, *hs)
    for a, b in zip(v_fused, v_steps):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_zero_initial_state_inf_and_nan_as_torch(dg, kind, dtype):
    # Note [Zero initial state] in kernels/rnn.cpp: with h0 zero, step 0's h0 W^T and its dW share are skipped only
    # where that is exact: an inf in W_hh still makes step 0's gates NaN (0 * inf), and a NaN in step 0's output
    # gradient still reaches dW_hh (through dgh_0^T h0), as in torch; finite inputs match torch, with and without
    # an explicit zero hx
    ours, theirs = pair(dg, kind, 3, 5, 2)
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((4, 3, 3))
    tdt = getattr(torch, dtype)
    ours = ours.to(getattr(dg, dtype))
    theirs = theirs.to(tdt)
    zeros = np.zeros((2, 3, 5))
    for case in ("finite", "inf weight", "nan grad"):
        with torch.no_grad():
            theirs.weight_hh_l1.copy_(torch.tensor(np_of(ours.weight_hh_l1)))
            if case == "inf weight":
                theirs.weight_hh_l1[1, 2] = float("inf")
        with dg.no_grad():
            ours.weight_hh_l1.copy_(dg.tensor(theirs.weight_hh_l1.detach().numpy()))
        g = rng.standard_normal((4, 3, 5))
        if case == "nan grad":
            g[0, 1, 3] = np.nan
        for hx in (None, zeros):
            theirs.zero_grad()
            ours.zero_grad()
            t_h = None if hx is None else tuple(torch.tensor(hx, dtype=tdt) for _ in range(2 if kind == "LSTM" else 1))
            o_h = None if hx is None else tuple(dg.tensor(hx.astype(dtype)) for _ in range(2 if kind == "LSTM" else 1))
            if t_h is not None and kind != "LSTM":
                t_h, o_h = t_h[0], o_h[0]
            tout, _ = theirs(torch.tensor(xv, dtype=tdt), t_h)
            (tout * torch.tensor(g, dtype=tdt)).sum().backward()
            out, _ = ours(dg.tensor(xv.astype(dtype)), o_h)
            (out * dg.tensor(g.astype(dtype))).sum().backward()
            tol = dict(rtol=1e-9, atol=1e-11) if dtype == "float64" else dict(rtol=2e-4, atol=2e-5)
            for a, b, what in [(out, tout, "output")] + [(p.grad, q.grad, n) for (n, p), q in
                                                        zip(ours.named_parameters(), theirs.parameters())]:
                b = b.detach().numpy()
                assert b.dtype == np.dtype(dtype)
                np.testing.assert_array_equal(np.isnan(np_of(a)), np.isnan(b), err_msg=f"{case}, {what}")
                np.testing.assert_allclose(np_of(a), b, **tol, err_msg=f"{case}, {what}")


@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("GRU", {}), ("RNN", {})])
@pytest.mark.parametrize("with_state", [False, True])
def test_layers_gradcheck_float64(dg, kind, extra, with_state):
    # float64 finite differences through the whole-sequence layers (two layers, bidirectional, batch_first) w.r.t.
    # the input, every weight and the initial states: without hx the layers start from zeros (Note [Zero initial
    # state] in kernels/rnn.cpp skips step 0's products), with hx from the given states
    layer = getattr(dg.nn, kind)(2, 3, num_layers=2, bidirectional=True, batch_first=True, **extra).double()
    names = [n for n, _ in layer.named_parameters()]
    rng = np.random.default_rng(2)
    x = dg.tensor(rng.standard_normal((2, 3, 2)), requires_grad=True)
    h_size = extra.get("proj_size", 3)
    hv = [dg.tensor(rng.standard_normal((4, 2, s)), requires_grad=True)
          for s in ((h_size, 3) if kind == "LSTM" else (3,))]
    params = [p.detach().clone().requires_grad_() for p in layer.parameters()]

    def fn(x, *args):
        states, weights = args[:len(hv)], args[len(hv):]
        from dyngrad.func import functional_call
        hx = (tuple(states) if kind == "LSTM" else states[0]) if with_state else None
        out, s = functional_call(layer, dict(zip(names, weights)), (x, hx))
        return (out * out).sum() + sum(t.sum() for t in (s if isinstance(s, tuple) else (s,)))

    assert dg.autograd.gradcheck(fn, (x, *hv, *params))

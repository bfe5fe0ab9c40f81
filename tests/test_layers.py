"""The nn layers over nn.functional's activations, losses, norms, dropouts, distances and attention (issue 14),
against torch 2.13 on both engines.

One row per module: the same constructor call builds it in torch and in dyngrad (float64); torch's state_dict is
copied into ours; the state_dict keys, the repr, the outputs, the input gradients, the parameter gradients and the
buffers after the call (running statistics) must all match torch's."""
import math
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-7, 1e-9


def _f(*shape, low=-2.0, high=2.0):
    return lambda r: r.uniform(low, high, size=shape)


def _i(high, *shape):
    return lambda r: r.integers(0, high, size=shape).astype(np.int64)


def _sign(*shape):
    return lambda r: np.where(r.random(shape) < 0.5, -1.0, 1.0)


def _prob(*shape):
    return lambda r: r.uniform(0.05, 0.95, size=shape)


def _const(a):
    return lambda r: np.array(a)


def _mask(*shape, p=0.3):
    """A bool mask with no row entirely True (a fully masked attention row is nan in torch's math)."""
    def make(r):
        m = r.random(shape) < p
        m[..., 0] = False
        return m
    return make


def _causal(n):
    return lambda r: np.triu(np.full((n, n), -np.inf), 1)


def _simplex(*shape):
    def make(r):
        e = np.exp(r.normal(size=shape))
        return e / e.sum(-1, keepdims=True)
    return make


def _log_simplex(*shape):
    return lambda r: np.log(_simplex(*shape)(r))


class Row:
    """make(nn) builds the module; inputs are makers of numpy arrays; float inputs get gradients unless listed in
    nograd; call(m, xs) runs it (default m(*xs)); train=True runs it `steps` times in training mode (eval
    otherwise)."""

    def __init__(self, name, make, inputs, nograd=(), call=None, train=False, steps=1, tol=None):
        self.name, self.make, self.inputs, self.nograd = name, make, inputs, set(nograd)
        self.call, self.train, self.steps, self.tol = call, train, steps, tol

    def __repr__(self):
        return self.name


def kw(**kwargs):
    """call(m, xs) passing xs[0..] positionally and kwargs whose values name input positions ('#3') or are
    plain values."""
    def call(m, xs):
        n = min([int(v[1:]) for v in kwargs.values() if isinstance(v, str) and v.startswith("#")] + [len(xs)])
        extra = {k: (xs[int(v[1:])] if isinstance(v, str) and v.startswith("#") else v) for k, v in kwargs.items()}
        return m(*xs[:n], **extra)
    return call


def self_attention(**kwargs):
    def call(m, xs):
        extra = {k: (xs[int(v[1:])] if isinstance(v, str) and v.startswith("#") else v) for k, v in kwargs.items()}
        return m(xs[0], xs[0], xs[0], **extra)
    return call


ACTIVATIONS = [
    Row("ELU", lambda nn: nn.ELU(0.7), [_f(3, 4)]),
    Row("SELU", lambda nn: nn.SELU(), [_f(3, 4)]),
    Row("CELU", lambda nn: nn.CELU(1.5), [_f(3, 4)]),
    Row("GLU", lambda nn: nn.GLU(1), [_f(3, 4, 2)]),
    Row("Hardtanh", lambda nn: nn.Hardtanh(-0.5, 1.5), [_f(3, 4)]),
    Row("ReLU6", lambda nn: nn.ReLU6(), [_f(3, 4, high=8.0)]),
    Row("Hardsigmoid", lambda nn: nn.Hardsigmoid(), [_f(3, 4, low=-4.0, high=4.0)]),
    Row("Hardswish", lambda nn: nn.Hardswish(), [_f(3, 4, low=-4.0, high=4.0)]),
    Row("Hardshrink", lambda nn: nn.Hardshrink(0.3), [_f(3, 4)]),
    Row("Softshrink", lambda nn: nn.Softshrink(0.3), [_f(3, 4)]),
    Row("Tanhshrink", lambda nn: nn.Tanhshrink(), [_f(3, 4)]),
    Row("LogSigmoid", lambda nn: nn.LogSigmoid(), [_f(3, 4)]),
    Row("Mish", lambda nn: nn.Mish(), [_f(3, 4)]),
    Row("Softsign", lambda nn: nn.Softsign(), [_f(3, 4)]),
    Row("Softmin", lambda nn: nn.Softmin(dim=1), [_f(3, 4)]),
    Row("Softmax2d", lambda nn: nn.Softmax2d(), [_f(2, 3, 2, 2)]),
    Row("Softmax2d-3d", lambda nn: nn.Softmax2d(), [_f(3, 2, 2)]),
    Row("Threshold", lambda nn: nn.Threshold(0.1, 20.0), [_f(3, 4)]),
    Row("PReLU", lambda nn: nn.PReLU(), [_f(2, 3, 4)]),
    Row("PReLU-channels", lambda nn: nn.PReLU(3, init=0.1), [_f(2, 3, 4)]),
    Row("RReLU-eval", lambda nn: nn.RReLU(0.1, 0.3), [_f(3, 4)]),
    Row("Hardtanh-inplace", lambda nn: nn.Sequential(nn.Identity(), nn.Hardtanh(inplace=True)), [_f(3, 4)],
        call=lambda m, xs: m(xs[0] * 1.0)),
]

DROPOUTS = [  # identity in eval mode (their training behaviour: test_dropouts_in_training)
    Row("Dropout1d", lambda nn: nn.Dropout1d(0.3), [_f(2, 3, 4)]),
    Row("Dropout2d", lambda nn: nn.Dropout2d(0.3), [_f(2, 3, 2, 2)]),
    Row("Dropout3d", lambda nn: nn.Dropout3d(0.3), [_f(2, 3, 2, 2, 2)]),
    Row("AlphaDropout", lambda nn: nn.AlphaDropout(0.2), [_f(3, 4)]),
    Row("FeatureAlphaDropout", lambda nn: nn.FeatureAlphaDropout(0.2), [_f(2, 3, 4)]),
]

LOSSES = [
    Row("BCELoss", lambda nn: nn.BCELoss(), [_prob(3, 4), _prob(3, 4)], nograd=[1]),
    Row("BCELoss-weight", lambda nn: nn.BCELoss(weight=_weight(nn, 4), reduction="sum"), [_prob(3, 4), _prob(3, 4)],
        nograd=[1]),
    Row("SmoothL1Loss", lambda nn: nn.SmoothL1Loss(beta=0.5), [_f(3, 4), _f(3, 4)]),
    Row("HuberLoss", lambda nn: nn.HuberLoss(reduction="none", delta=0.7), [_f(3, 4), _f(3, 4)]),
    Row("KLDivLoss", lambda nn: nn.KLDivLoss(reduction="batchmean"), [_log_simplex(3, 4), _simplex(3, 4)]),
    Row("KLDivLoss-log", lambda nn: nn.KLDivLoss(reduction="sum", log_target=True),
        [_log_simplex(3, 4), _log_simplex(3, 4)]),
    Row("SoftMarginLoss", lambda nn: nn.SoftMarginLoss(), [_f(3, 4), _sign(3, 4)], nograd=[1]),
    Row("MarginRankingLoss", lambda nn: nn.MarginRankingLoss(0.2), [_f(5), _f(5), _sign(5)], nograd=[2]),
    Row("HingeEmbeddingLoss", lambda nn: nn.HingeEmbeddingLoss(0.8), [_f(3, 4), _sign(3, 4)], nograd=[1]),
    Row("CosineEmbeddingLoss", lambda nn: nn.CosineEmbeddingLoss(0.1), [_f(4, 3), _f(4, 3), _sign(4)], nograd=[2]),
    Row("TripletMarginLoss", lambda nn: nn.TripletMarginLoss(margin=1.5, p=1.0, swap=True),
        [_f(4, 3), _f(4, 3), _f(4, 3)]),
    Row("TripletMarginWithDistanceLoss", lambda nn: nn.TripletMarginWithDistanceLoss(margin=1.5),
        [_f(4, 3), _f(4, 3), _f(4, 3)]),
    Row("TripletMarginWithDistanceLoss-cos",
        lambda nn: nn.TripletMarginWithDistanceLoss(distance_function=nn.CosineSimilarity(), swap=True,
                                                    reduction="none"),
        [_f(4, 3), _f(4, 3), _f(4, 3)]),
    Row("PoissonNLLLoss", lambda nn: nn.PoissonNLLLoss(), [_f(3, 4), _i(5, 3, 4)]),
    Row("PoissonNLLLoss-full", lambda nn: nn.PoissonNLLLoss(log_input=False, full=True),
        [_prob(3, 4), lambda r: r.integers(0, 5, (3, 4)).astype(np.float64)], nograd=[1]),
    Row("GaussianNLLLoss", lambda nn: nn.GaussianNLLLoss(full=True), [_f(3, 4), _f(3, 4), _prob(3, 4)]),
    Row("MultiLabelSoftMarginLoss", lambda nn: nn.MultiLabelSoftMarginLoss(weight=_weight(nn, 4)),
        [_f(3, 4), lambda r: (r.random((3, 4)) < 0.5).astype(np.float64)], nograd=[1]),
    Row("MultiMarginLoss", lambda nn: nn.MultiMarginLoss(), [_f(3, 4), _i(4, 3)]),
    Row("MultiMarginLoss-p2", lambda nn: nn.MultiMarginLoss(p=2, margin=0.5, weight=_weight(nn, 4)),
        [_f(3, 4), _i(4, 3)]),
    Row("MultiLabelMarginLoss", lambda nn: nn.MultiLabelMarginLoss(),
        [_f(2, 4), _const([[3, 0, -1, 1], [1, 2, 3, -1]])]),
    Row("CTCLoss", lambda nn: nn.CTCLoss(),
        [_log_simplex(6, 2, 4), _const([[1, 2, 2], [3, 1, 0]]), _const([6, 5]), _const([3, 2])]),
    Row("CTCLoss-sum", lambda nn: nn.CTCLoss(blank=3, reduction="sum", zero_infinity=True),
        [_log_simplex(5, 2, 4), _const([0, 1, 1, 2, 0]), _const([5, 4]), _const([2, 3])]),
    Row("CrossEntropyLoss", lambda nn: nn.CrossEntropyLoss(weight=_weight(nn, 4), ignore_index=1,
                                                           label_smoothing=0.1), [_f(5, 4), _i(4, 5)]),
    Row("CrossEntropyLoss-probs", lambda nn: nn.CrossEntropyLoss(label_smoothing=0.2, reduction="sum"),
        [_f(5, 4), _simplex(5, 4)], nograd=[1]),
    Row("NLLLoss2d", lambda nn: nn.NLLLoss2d(),
        [lambda r: np.ascontiguousarray(np.log(_simplex(2, 3, 2, 4)(r)).transpose(0, 3, 1, 2)), _i(4, 2, 3, 2)]),
    Row("NLLLoss", lambda nn: nn.NLLLoss(weight=_weight(nn, 4), ignore_index=2), [_log_simplex(5, 4), _i(4, 5)]),
    Row("BCEWithLogitsLoss", lambda nn: nn.BCEWithLogitsLoss(pos_weight=_weight(nn, 4)), [_f(3, 4), _prob(3, 4)],
        nograd=[1]),
    Row("AdaptiveLogSoftmaxWithLoss", lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0),
        [_f(6, 8), _const([0, 4, 9, 2, 7, 5])]),
    Row("AdaptiveLogSoftmaxWithLoss-unbatched", lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2], head_bias=True),
        [_f(8), _const(7)]),
    Row("AdaptiveLogSoftmaxWithLoss-shortlist-only", lambda nn: nn.AdaptiveLogSoftmaxWithLoss(4, 6, [3, 5]),
        [_f(3, 4), _const([0, 2, 1])]),
    Row("AdaptiveLogSoftmaxWithLoss-log-prob-predict", lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6]),
        [_f(5, 8, low=-6.0, high=6.0)], call=lambda m, xs: (m.log_prob(xs[0]), m.predict(xs[0]))),
    Row("MSELoss-none", lambda nn: nn.MSELoss(reduction="none"), [_f(3, 4), _f(3, 4)]),
    Row("L1Loss-sum", lambda nn: nn.L1Loss(reduction="sum"), [_f(3, 4), _f(3, 4)]),
]

NORMS = [
    Row("BatchNorm1d", lambda nn: nn.BatchNorm1d(3), [_f(4, 3)], train=True, steps=2),
    Row("BatchNorm1d-3d-momentum-None", lambda nn: nn.BatchNorm1d(3, momentum=None), [_f(4, 3, 5)], train=True,
        steps=3),
    Row("BatchNorm1d-eval", lambda nn: nn.BatchNorm1d(3), [_f(4, 3, 2)]),
    Row("BatchNorm1d-no-stats", lambda nn: nn.BatchNorm1d(3, affine=False, track_running_stats=False),
        [_f(4, 3)]),
    Row("BatchNorm1d-no-bias", lambda nn: nn.BatchNorm1d(3, bias=False, eps=1e-3, momentum=0.3), [_f(4, 3)],
        train=True, steps=2),
    Row("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), [_f(2, 3, 2, 3)], train=True, steps=2),
    Row("BatchNorm2d-eval", lambda nn: nn.BatchNorm2d(3, momentum=None), [_f(2, 3, 2, 2)]),
    Row("BatchNorm3d", lambda nn: nn.BatchNorm3d(2, momentum=None), [_f(2, 2, 2, 2, 2)], train=True, steps=2),
    Row("SyncBatchNorm", lambda nn: nn.SyncBatchNorm(3, momentum=None), [_f(2, 3, 2, 1, 2)], train=True, steps=2),
    Row("SyncBatchNorm-converted", lambda nn: nn.SyncBatchNorm.convert_sync_batchnorm(
        nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3, affine=False), nn.Sequential(nn.BatchNorm1d(3)))),
        [_f(4, 2)], train=True),
    Row("InstanceNorm1d", lambda nn: nn.InstanceNorm1d(3), [_f(2, 3, 5)]),
    Row("InstanceNorm1d-unbatched", lambda nn: nn.InstanceNorm1d(3, affine=True), [_f(3, 5)]),
    Row("InstanceNorm2d-stats", lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        [_f(2, 3, 2, 3)], train=True, steps=2),
    Row("InstanceNorm2d-stats-eval", lambda nn: nn.InstanceNorm2d(3, track_running_stats=True), [_f(2, 3, 2, 3)]),
    Row("InstanceNorm3d", lambda nn: nn.InstanceNorm3d(2, affine=True, momentum=None, track_running_stats=True),
        [_f(2, 2, 2, 2, 2)], train=True, steps=2),
    Row("GroupNorm", lambda nn: nn.GroupNorm(2, 4), [_f(2, 4, 3)]),
    Row("GroupNorm-no-affine", lambda nn: nn.GroupNorm(4, 4, eps=1e-3, affine=False), [_f(2, 4, 2, 2)]),
    Row("LayerNorm", lambda nn: nn.LayerNorm([3, 4]), [_f(2, 3, 4)]),
    Row("LayerNorm-no-bias", lambda nn: nn.LayerNorm(4, bias=False), [_f(2, 3, 4)]),
    Row("LayerNorm-no-affine", lambda nn: nn.LayerNorm(4, elementwise_affine=False), [_f(2, 3, 4)]),
    Row("RMSNorm", lambda nn: nn.RMSNorm(4), [_f(2, 3, 4)]),
    Row("RMSNorm-eps", lambda nn: nn.RMSNorm([3, 4], eps=1e-3, elementwise_affine=False), [_f(2, 3, 4)]),
    Row("LocalResponseNorm", lambda nn: nn.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0), [_f(2, 5, 3)]),
]

OTHERS = [
    Row("Bilinear", lambda nn: nn.Bilinear(3, 2, 4), [_f(5, 3), _f(5, 2)]),
    Row("Bilinear-no-bias", lambda nn: nn.Bilinear(3, 2, 4, bias=False), [_f(2, 5, 3), _f(2, 5, 2)]),
    Row("CosineSimilarity", lambda nn: nn.CosineSimilarity(dim=0, eps=1e-6), [_f(4, 3), _f(4, 3)]),
    Row("PairwiseDistance", lambda nn: nn.PairwiseDistance(p=1.0, keepdim=True), [_f(4, 3), _f(4, 3)]),
    Row("Identity-args", lambda nn: nn.Identity(3, unused="x"), [_f(2, 3)]),
]

E, H, L, S, N = 8, 2, 3, 4, 2
ATTENTION = [
    Row("MHA", lambda nn: nn.MultiheadAttention(E, H), [_f(L, N, E), _f(S, N, E), _f(S, N, E)]),
    Row("MHA-self-batch-first", lambda nn: nn.MultiheadAttention(E, H, batch_first=True), [_f(N, L, E)],
        call=self_attention()),
    Row("MHA-kdim-vdim-bias-kv", lambda nn: nn.MultiheadAttention(E, H, add_bias_kv=True, kdim=3, vdim=5),
        [_f(L, N, E), _f(S, N, 3), _f(S, N, 5)]),
    Row("MHA-zero-attn-no-bias", lambda nn: nn.MultiheadAttention(E, 4, bias=False, add_zero_attn=True),
        [_f(L, N, E), _f(S, N, E), _f(S, N, E), _mask(N, S)], call=kw(key_padding_mask="#3")),
    Row("MHA-masks-per-head", lambda nn: nn.MultiheadAttention(E, H, batch_first=True),
        [_f(N, L, E), _f(N, S, E), _f(N, S, E), _mask(N, S), _f(L, S)],
        call=kw(key_padding_mask="#3", attn_mask="#4", average_attn_weights=False)),
    Row("MHA-no-weights-causal", lambda nn: nn.MultiheadAttention(E, H), [_f(L, N, E), _causal(L)],
        call=self_attention(attn_mask="#1", need_weights=False, is_causal=True)),
    Row("MHA-unbatched", lambda nn: nn.MultiheadAttention(E, H, kdim=4, vdim=4),
        [_f(L, E), _f(S, 4), _f(S, 4), _mask(S)], call=kw(key_padding_mask="#3")),
    Row("MHA-bool-attn-mask", lambda nn: nn.MultiheadAttention(E, H),
        [_f(L, N, E), _f(S, N, E), _mask(L, S)], call=lambda m, xs: m(xs[0], xs[1], xs[1], attn_mask=xs[2])),
    Row("TransformerEncoderLayer", lambda nn: nn.TransformerEncoderLayer(E, H, 16, dropout=0.0), [_f(L, N, E)]),
    Row("TransformerEncoderLayer-norm-first-gelu",
        lambda nn: nn.TransformerEncoderLayer(E, H, 16, activation="gelu", norm_first=True, batch_first=True),
        [_f(N, L, E), _mask(N, L)], call=kw(src_key_padding_mask="#1")),
    Row("TransformerEncoderLayer-callable-no-bias",
        lambda nn: nn.TransformerEncoderLayer(E, H, 16, activation=nn.Tanh(), bias=False, layer_norm_eps=1e-3),
        [_f(L, N, E), _f(L, L)], call=kw(src_mask="#1")),
    Row("TransformerEncoder", lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16), 2,
                                                               nn.LayerNorm(E), enable_nested_tensor=False),
        [_f(L, N, E), _causal(L)], call=kw(mask="#1")),
    Row("TransformerDecoderLayer", lambda nn: nn.TransformerDecoderLayer(E, H, 16), [_f(L, N, E), _f(S, N, E)]),
    Row("TransformerDecoderLayer-norm-first",
        lambda nn: nn.TransformerDecoderLayer(E, H, 16, norm_first=True, batch_first=True, activation="gelu"),
        [_f(N, L, E), _f(N, S, E), _causal(L), _mask(N, S)],
        call=kw(tgt_mask="#2", memory_key_padding_mask="#3", tgt_is_causal=True)),
    Row("TransformerDecoder", lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, 16), 2),
        [_f(L, N, E), _f(S, N, E), _causal(L), _f(L, S)], call=kw(tgt_mask="#2", memory_mask="#3")),
    Row("Transformer", lambda nn: nn.Transformer(E, H, 1, 2, 16, batch_first=True),
        [_f(N, S, E), _f(N, L, E), _causal(L), _mask(N, S)],
        call=kw(tgt_mask="#2", src_key_padding_mask="#3", memory_key_padding_mask="#3")),
    Row("Transformer-unbatched-norm-first", lambda nn: nn.Transformer(E, H, 1, 1, 16, norm_first=True),
        [_f(S, E), _f(L, E)]),
]

ROWS = ACTIVATIONS + DROPOUTS + LOSSES + NORMS + OTHERS + ATTENTION


def _weight(nn, n):
    """Class weights 0.5, 1, 1.5, ... as a tensor of nn's library (float64)."""
    lib = torch if nn is torch.nn else _LIBS[nn]
    return lib.tensor([0.5 * (i + 1) for i in range(n)], dtype=lib.float64)


_LIBS = {}


def _lib(dg):
    _LIBS[dg.nn] = dg
    return dg


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _run(lib, module, arrays, nograd, call):
    xs = []
    for i, a in enumerate(arrays):
        t = lib.tensor(a)
        if a.dtype == np.float64 and i not in nograd:
            t.requires_grad_(True)
        xs.append(t)
    outs = [o for o in _as_list(call(module, xs) if call else module(*xs)) if o is not None]
    return xs, outs


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _same_repr(ours, theirs):
    norm = lambda s: re.sub(r"\btorch\.|\bdyngrad\.(reference\.)?", "L.", s)  # noqa: E731
    return norm(ours) == norm(theirs)


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_layer_matches_torch(dg, row):
    lib = _lib(dg)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch's nested-tensor notice
        theirs = row.make(torch.nn).double()
    ours = row.make(lib.nn).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert _same_repr(repr(ours), repr(theirs)), f"\n{ours}\n{theirs}"
    for (name, a), (_, b) in zip(theirs.named_modules(), ours.named_modules()):   # public attributes as torch's
        for key, value in vars(a).items():
            if not key.startswith("_"):
                assert key in vars(b), f"{row}: {name or 'module'}.{key} is missing"
                # (use_nested_tensor: dyngrad has no nested tensors, so it is always False)
                if isinstance(value, (bool, int, float, str, tuple, list, type(None))) and key != "use_nested_tensor":
                    assert vars(b)[key] == value, f"{row}: {name or 'module'}.{key}"
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    ours.train(row.train)
    theirs.train(row.train)
    rng = np.random.default_rng(abs(hash(row.name)) % 2 ** 32)
    rtol, atol = row.tol or (RTOL, ATOL)
    for step in range(row.steps):
        arrays = [make(rng) for make in row.inputs]
        our_x, our_out = _run(lib, ours, arrays, row.nograd, row.call)
        their_x, their_out = _run(torch, theirs, arrays, row.nograd, row.call)
        assert len(our_out) == len(their_out)
        for o, t in zip(our_out, their_out):
            assert tuple(o.shape) == tuple(t.shape)
            np.testing.assert_allclose(_np(o), _np(t), rtol=rtol, atol=atol, err_msg=f"{row} output, step {step}")
        cots = [rng.normal(size=tuple(t.shape)) for t in their_out]
        assert [o.requires_grad for o in our_out] == [t.requires_grad for t in their_out]
        for outs, tensor in ((our_out, lib.tensor), (their_out, torch.tensor)):
            terms = [(o * tensor(c)).sum() for o, c in zip(outs, cots) if o.requires_grad]
            if terms:
                sum(terms[1:], terms[0]).backward()
        for i, (a, b) in enumerate(zip(our_x, their_x)):
            if b.requires_grad:
                assert (a.grad is None) == (b.grad is None), f"{row} input {i} grad"
                if b.grad is not None:
                    np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=rtol, atol=atol,
                                               err_msg=f"{row} grad of input {i}")
    their_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        q = their_params[name]
        assert (p.grad is None) == (q.grad is None), f"{row} grad of {name}"
        if q.grad is not None:
            np.testing.assert_allclose(_np(p.grad), _np(q.grad), rtol=rtol, atol=atol, err_msg=f"{row} grad of {name}")
    their_state = theirs.state_dict()
    for name, b in ours.state_dict().items():
        np.testing.assert_allclose(_np(b), _np(their_state[name]), rtol=rtol, atol=atol, err_msg=f"{row} {name}")


# ----- what the table cannot show: training-mode randomness, initialisation, options, errors ----------------------

def outcome(fn):
    try:
        fn()
        return "ok"
    except Exception as exc:  # noqa: BLE001  the exception type is what is compared
        return type(exc).__name__


@pytest.mark.parametrize("name, shape, spatial", [("Dropout1d", (40, 6, 5), 1), ("Dropout2d", (40, 6, 2, 3), 2),
                                                  ("Dropout3d", (40, 6, 2, 2, 2), 3), ("Dropout1d", (6, 5), 1),
                                                  ("Dropout2d", (6, 2, 3), 1), ("Dropout3d", (6, 2, 2, 2), 3)])
def test_channel_dropouts_in_training(dg, name, shape, spatial):
    """Whole channels are zeroed (about p of them) and the rest scaled by 1 / (1 - p); eval is the identity.
    (A 3-D input of Dropout2d is (N, C, L), as torch reads it, with a warning.)"""
    dg.manual_seed(0)
    m = getattr(dg.nn, name)(0.4)
    x = dg.tensor(np.random.default_rng(0).uniform(1.0, 2.0, shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = m(x).numpy()
    ratio = (y / x.numpy()).reshape(int(np.prod(shape[:len(shape) - spatial])), -1)
    for row in ratio:                       # each channel all dropped or all kept
        assert np.allclose(row, 0.0) or np.allclose(row, 1 / 0.6)
    dropped = np.mean([np.allclose(r, 0.0) for r in ratio])
    assert 0.0 < dropped < 1.0 and (len(ratio) < 100 or 0.3 < dropped < 0.5)
    m.eval()
    np.testing.assert_array_equal(m(x).numpy(), x.numpy())


@pytest.mark.parametrize("name", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropouts_keep_mean_and_variance(dg, name):
    dg.manual_seed(0)
    m = getattr(dg.nn, name)(0.2)
    x = dg.tensor(np.random.default_rng(1).normal(size=(400, 50, 4)))
    y = m(x).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1.0) < 0.05
    assert not np.allclose(y, x.numpy())
    m.eval()
    np.testing.assert_array_equal(m(x).numpy(), x.numpy())


def test_rrelu_in_training_draws_slopes_in_range(dg):
    dg.manual_seed(0)
    m = dg.nn.RReLU(0.1, 0.3)
    x = -dg.ones(1000, dtype=dg.float64)
    slopes = -m(x).numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    m.eval()
    np.testing.assert_allclose(-m(x).numpy(), 0.2)


def test_initialisation_as_torch(dg):
    """torch's init schemes: xavier-uniform projections, zero biases, xavier-normal bias_k/bias_v; Bilinear from
    U(-1/sqrt(in1), 1/sqrt(in1)); PReLU at init; norms at ones and zeros."""
    dg.manual_seed(0)
    mha = dg.nn.MultiheadAttention(16, 4, add_bias_kv=True)
    w = mha.in_proj_weight.detach().numpy()
    bound = math.sqrt(6 / (16 + 48))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not mha.in_proj_bias.detach().numpy().any() and not mha.out_proj.bias.detach().numpy().any()
    assert 0.05 < mha.bias_k.detach().numpy().std() < 0.5        # xavier normal: std sqrt(2 / 32) = 0.25
    sep = dg.nn.MultiheadAttention(16, 4, kdim=8, vdim=4)
    assert np.abs(sep.k_proj_weight.detach().numpy()).max() <= math.sqrt(6 / (16 + 8))
    bil = dg.nn.Bilinear(25, 3, 40)
    for p in (bil.weight, bil.bias):
        a = p.detach().numpy()
        assert np.abs(a).max() <= 0.2 and np.abs(a).max() > 0.18
    np.testing.assert_array_equal(dg.nn.PReLU(3, init=0.3).weight.detach().numpy(), np.full(3, 0.3, np.float32))
    for m in (dg.nn.BatchNorm2d(3), dg.nn.GroupNorm(1, 3), dg.nn.InstanceNorm1d(3, affine=True)):
        np.testing.assert_array_equal(m.weight.detach().numpy(), 1.0)
        np.testing.assert_array_equal(m.bias.detach().numpy(), 0.0)
    np.testing.assert_array_equal(dg.nn.RMSNorm(3).weight.detach().numpy(), 1.0)
    t = dg.nn.Transformer(16, 2, 1, 1, 32)
    lin = t.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(lin).max() <= math.sqrt(6 / (16 + 32))        # Transformer re-inits every matrix xavier-uniform


def test_device_and_dtype_arguments(dg):
    makers = [lambda **k: dg.nn.PReLU(2, **k), lambda **k: dg.nn.Bilinear(2, 3, 4, **k),
              lambda **k: dg.nn.BatchNorm2d(2, **k), lambda **k: dg.nn.InstanceNorm3d(2, affine=True, **k),
              lambda **k: dg.nn.GroupNorm(1, 2, **k), lambda **k: dg.nn.RMSNorm(2, **k),
              lambda **k: dg.nn.LayerNorm(2, **k), lambda **k: dg.nn.LazyLinear(3, **k),
              lambda **k: dg.nn.MultiheadAttention(4, 2, kdim=3, add_bias_kv=True, **k),
              lambda **k: dg.nn.TransformerEncoderLayer(4, 2, 8, **k),
              lambda **k: dg.nn.TransformerDecoderLayer(4, 2, 8, **k),
              lambda **k: dg.nn.Transformer(4, 2, 1, 1, 8, **k)]
    for make in makers:
        m = make(device="cpu", dtype=dg.float64)
        assert all(p.dtype == dg.float64 for p in m.parameters()), m
        with pytest.raises(RuntimeError, match="cuda"):
            make(device="cuda")
    bn = dg.nn.BatchNorm1d(2, dtype=dg.float64)
    assert bn.running_mean.dtype == dg.float64 and bn.num_batches_tracked.dtype == dg.int64


@pytest.mark.parametrize("name, kwargs, shape", [
    ("LazyLinear", dict(out_features=3), (2, 5)), ("LazyBatchNorm1d", {}, (4, 3)),
    ("LazyBatchNorm2d", dict(momentum=None, eps=1e-3), (2, 3, 2, 2)), ("LazyBatchNorm3d", {}, (2, 2, 2, 1, 2)),
    ("LazyInstanceNorm1d", dict(affine=False), (2, 3, 4)), ("LazyInstanceNorm2d", {}, (2, 3, 2, 2)),
    ("LazyInstanceNorm3d", dict(track_running_stats=False), (2, 2, 2, 1, 2))])
def test_lazy_modules_become_their_class(dg, name, kwargs, shape):
    """Shapes read from the first input; the same Parameter objects; the class, repr, state_dict and numbers as
    torch's afterwards."""
    x = np.random.default_rng(3).normal(size=shape).astype(np.float32)

    def scenario(lib):
        m = getattr(lib.nn, name)(**kwargs)
        before = repr(m), list(m.state_dict())
        params = list(m.parameters())
        y = m(lib.tensor(x))
        same = all(p is q for p, q in zip(params, m.parameters()))
        text = before, repr(m), type(m).__name__, same, [tuple(p.shape) for p in m.parameters()]
        return text, [_np(v) for v in m.state_dict().values()], _np(y)
    ours, theirs = scenario(dg), scenario(torch)
    assert _same_repr(str(ours[0]), str(theirs[0])), f"\n{ours[0]}\n{theirs[0]}"
    if name == "LazyLinear":                  # random weights: the shapes (above) are what can be compared
        return
    for a, b in zip(ours[1], theirs[1]):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-4, atol=1e-5)


def test_square_subsequent_mask(dg):
    for sz, dtype in ((1, None), (4, None), (3, "float64")):
        ours = dg.nn.Transformer.generate_square_subsequent_mask(sz, dtype=dtype and getattr(dg, dtype))
        theirs = torch.nn.Transformer.generate_square_subsequent_mask(sz, dtype=dtype and getattr(torch, dtype))
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_legacy_loss_flags_map_to_reduction(dg):
    for kwargs, want in ((dict(size_average=False), "sum"), (dict(reduce=False), "none"),
                         (dict(size_average=True, reduce=True), "mean")):
        with pytest.warns(UserWarning, match="size_average and reduce"):
            ours = dg.nn.SmoothL1Loss(**kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert ours.reduction == torch.nn.SmoothL1Loss(**kwargs).reduction == want
    with pytest.warns(UserWarning):
        assert dg.nn.CrossEntropyLoss(reduce=False).reduction == "none"


ERRORS = [
    lambda nn, lib: nn.MultiheadAttention(6, 4),
    lambda nn, lib: nn.MultiheadAttention(0, 1),
    lambda nn, lib: nn.TransformerEncoderLayer(4, 2, 8, activation="tanh"),
    lambda nn, lib: nn.Transformer(4, 2, 1, 1, 8)(lib.ones(3, 2, 4), lib.ones(3, 5, 4)),
    lambda nn, lib: nn.Transformer(4, 2, 1, 1, 8)(lib.ones(3, 2, 4), lib.ones(3, 2, 6)),
    lambda nn, lib: nn.BatchNorm2d(3)(lib.ones(2, 3, 4)),
    lambda nn, lib: nn.BatchNorm1d(3)(lib.ones(2, 4)),
    lambda nn, lib: nn.BatchNorm1d(3)(lib.ones(1, 3)),
    lambda nn, lib: nn.InstanceNorm1d(3, affine=True)(lib.ones(2, 4, 5)),
    lambda nn, lib: nn.InstanceNorm2d(3)(lib.ones(2, 3)),
    lambda nn, lib: nn.GroupNorm(3, 4),
    lambda nn, lib: nn.Softmax2d()(lib.ones(2, 3)),
    lambda nn, lib: nn.Hardtanh(1.0, 0.5),
    lambda nn, lib: nn.MultiMarginLoss(p=3),
    lambda nn, lib: nn.TripletMarginLoss(margin=0.0),
    lambda nn, lib: nn.TripletMarginWithDistanceLoss(margin=-1.0),
    lambda nn, lib: nn.Dropout2d(1.5),
    lambda nn, lib: nn.AlphaDropout(-0.1),
    lambda nn, lib: nn.PReLU(3)(lib.ones(2, 4)),
    lambda nn, lib: nn.Bilinear(2, 3, 4)(lib.ones(5, 3), lib.ones(5, 3)),
    lambda nn, lib: nn.MultiheadAttention(4, 2)(lib.ones(3, 2, 4), lib.ones(5, 2, 4), lib.ones(4, 2, 4)),
    lambda nn, lib: nn.LayerNorm(3)(lib.ones(2, 4)),
    lambda nn, lib: nn.RMSNorm(3)(lib.ones(2, 4)),
    lambda nn, lib: nn.SyncBatchNorm(3)(lib.ones(3)),
    lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(4, 6, [3, 3]),
    lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(4, 6, [])(lib.ones(2, 4), lib.tensor([0, 6])),
    lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(4, 6, [3])(lib.ones(2, 4), lib.tensor([0, 6])),
    lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(4, 6, [3])(lib.ones(2, 4), lib.tensor([[0, 1]])),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_have_torchs_types(dg, i):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = outcome(lambda: ERRORS[i](dg.nn, dg))
        theirs = outcome(lambda: ERRORS[i](torch.nn, torch))
    assert theirs != "ok"
    assert ours == theirs, f"dyngrad raised {ours}, torch {theirs}"


GRADCHECKED = [
    ("MultiheadAttention", lambda nn: nn.MultiheadAttention(4, 2, add_bias_kv=True, kdim=3), [(2, 1, 4), (3, 1, 3),
                                                                                             (3, 1, 4)]),
    ("TransformerEncoderLayer", lambda nn: nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, norm_first=True),
     [(3, 1, 4)]),
    ("BatchNorm1d-train", lambda nn: nn.BatchNorm1d(2), [(3, 2)]),
    ("InstanceNorm1d", lambda nn: nn.InstanceNorm1d(2, affine=True), [(2, 2, 3)]),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 4), [(2, 4, 2)]),
    ("RMSNorm", lambda nn: nn.RMSNorm(3), [(2, 3)]),
    ("Bilinear", lambda nn: nn.Bilinear(2, 3, 2), [(2, 2), (2, 3)]),
    ("PReLU", lambda nn: nn.PReLU(2), [(3, 2)]),
]


@pytest.mark.parametrize("name, make, shapes", GRADCHECKED, ids=[g[0] for g in GRADCHECKED])
def test_gradcheck_float64(dg, name, make, shapes):
    """Finite differences in float64 for the module's parameters and inputs (training mode where it matters)."""
    dg.manual_seed(0)
    m = make(dg.nn).double()
    rng = np.random.default_rng(7)
    xs = [dg.tensor(rng.normal(size=s)).requires_grad_() for s in shapes]
    params = list(m.parameters())
    n = len(xs)

    def fn(*args):
        out = m(*args[:n])
        return out[0] if isinstance(out, tuple) else out

    assert dg.autograd.gradcheck(fn, tuple(xs) + tuple(params), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_transformer_inference_float32_as_torch(dg):
    """Eval mode without autograd in float32, where torch takes its fused fast path (nested tensors): the same
    numbers at every real position. At padded positions torch's encoder outputs zeros; ours the layers' values
    (documented in nn/modules/transformer.py)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2).eval()
    ours = dg.nn.TransformerEncoder(dg.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2).eval()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    pad = np.zeros((2, 5), bool)
    pad[0, 3:] = True
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = theirs(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).numpy()
        a_causal = theirs(torch.tensor(x), mask=torch.nn.Transformer.generate_square_subsequent_mask(5)).numpy()
    with dg.no_grad():
        b = ours(dg.tensor(x), src_key_padding_mask=dg.tensor(pad)).numpy()
        b_causal = ours(dg.tensor(x), mask=dg.nn.Transformer.generate_square_subsequent_mask(5)).numpy()
    np.testing.assert_allclose(b[~pad], a[~pad], rtol=1e-5, atol=2e-6)
    assert np.isfinite(b).all()
    np.testing.assert_allclose(b_causal, a_causal, rtol=1e-5, atol=2e-6)


def test_attention_dropout_in_training(dg):
    """MultiheadAttention's dropout acts on the attention weights while training (each kept weight scaled by
    1 / (1 - p), rows no longer summing to 1) and not in eval; a Transformer in training mode is random, in eval
    mode deterministic, and gradients reach every parameter."""
    dg.manual_seed(0)
    mha = dg.nn.MultiheadAttention(8, 2, dropout=0.5).double()
    x = dg.tensor(np.random.default_rng(0).normal(size=(6, 3, 8)))
    _, w = mha(x, x, x, average_attn_weights=False)
    w = w.detach().numpy()
    assert (w == 0).mean() > 0.2 and not np.allclose(w.sum(-1), 1.0)
    mha.eval()
    _, w = mha(x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(w.detach().numpy().sum(-1), 1.0)
    model = dg.nn.Transformer(8, 2, 1, 1, 16, dropout=0.3).double()
    src, tgt = x, x[:4]
    a, b = model(src, tgt), model(src, tgt)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    a.sum().backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in model.parameters())
    model.eval()
    np.testing.assert_array_equal(model(src, tgt).detach().numpy(), model(src, tgt).detach().numpy())


def test_lazy_modules_load_state_dict_and_hooks(dg):
    """A checkpoint loads into a lazy module before its first call (shapes from the checkpoint); the inference runs
    before the user's forward pre-hooks, as torch's."""
    def scenario(lib):
        m = lib.nn.LazyLinear(3)
        seen = []
        m.register_forward_pre_hook(lambda mod, args: seen.append(tuple(mod.weight.shape)))
        m(lib.ones(1, 4))
        lin = lib.nn.Linear(5, 3)
        lazy = lib.nn.LazyLinear(3)
        keys = lazy.load_state_dict(lin.state_dict())
        before = tuple(lazy.weight.shape)     # (torch's repr says in_features=0 until the first call; ours 5)
        y = lazy(lib.ones(2, 5))
        same = bool((y == lin(lib.ones(2, 5))).all())
        bn = lib.nn.LazyBatchNorm2d()
        bn.load_state_dict(lib.nn.BatchNorm2d(4).state_dict())
        shapes = [tuple(t.shape) for t in bn.state_dict().values()]
        return seen, keys, before, repr(lazy), same, shapes
    ours, theirs = scenario(dg), scenario(torch)
    assert _same_repr(str(ours), str(theirs)), f"\n{ours}\n{theirs}"


def test_multi_head_attention_forward_static_kv_as_torch(dg):
    """F.multi_head_attention_forward with static_k / static_v (precomputed per-head keys and values) and
    separate projection weights, against torch."""
    rng = np.random.default_rng(5)
    e, h, tl, sl, n = 6, 3, 2, 4, 2
    arrays = dict(q=rng.normal(size=(tl, n, e)), k=rng.normal(size=(sl, n, e)), v=rng.normal(size=(sl, n, e)),
                  wq=rng.normal(size=(e, e)), wk=rng.normal(size=(e, e)), wv=rng.normal(size=(e, e)),
                  b=rng.normal(size=(3 * e,)), wo=rng.normal(size=(e, e)), bo=rng.normal(size=(e,)),
                  sk=rng.normal(size=(n * h, sl, e // h)), sv=rng.normal(size=(n * h, sl, e // h)),
                  mask=rng.normal(size=(tl, sl)))

    def run(lib):
        t = {k: lib.tensor(a, requires_grad=k not in ("mask",)) for k, a in arrays.items()}
        out, w = lib.nn.functional.multi_head_attention_forward(
            t["q"], t["k"], t["v"], e, h, None, t["b"], None, None, False, 0.0, t["wo"], t["bo"], training=False,
            attn_mask=t["mask"], use_separate_proj_weight=True, q_proj_weight=t["wq"], k_proj_weight=t["wk"],
            v_proj_weight=t["wv"], static_k=t["sk"], static_v=t["sv"], average_attn_weights=False)
        (out.sum() + (w * w).sum()).backward()
        return [_np(out), _np(w)] + [_np(t[k].grad) if t[k].grad is not None else None for k in sorted(t)]
    for a, b in zip(run(dg), run(torch)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)

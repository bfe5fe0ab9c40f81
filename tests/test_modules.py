"""nn.Module's API as torch's (issue 14): registration and positions, traversal, lookup, hooks (forward, pre, full
backward, backward pre), modes, dtype moves, state_dict / load_state_dict, the containers, and every layer's repr.
Each scenario runs the same code on torch 2.13 and on each engine and compares what it observes."""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def same_text(ours, theirs):
    """Observations may name the library (torch.Size, torch.float32); the rest must be equal."""
    norm = lambda s: re.sub(r"\btorch\.|\bdyngrad\.(reference\.)?", "L.", s)  # noqa: E731
    return norm(str(ours)) == norm(str(theirs))


def outcome(fn):
    try:
        return "ok", fn()
    except Exception as exc:  # noqa: BLE001  the outcome is what is compared
        return type(exc).__name__, str(exc)


def both(dg, scenario):
    """scenario(lib) on dyngrad (dg) and on torch, observations compared as text."""
    ours, theirs = scenario(dg), scenario(torch)
    assert same_text(ours, theirs), f"\ndyngrad: {ours}\ntorch:   {theirs}"
    return ours


# ----- registration, positions, traversal ------------------------------------------------------------------------

def net(lib):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.register_buffer("steps", lib.zeros(1))
            self.register_buffer("scratch", lib.zeros(2), persistent=False)
            self.act = nn.Tanh()
            self.scale = nn.Parameter(lib.ones(1))

        def forward(self, x):
            return self.act(self.fc(x)) * self.scale

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
            self.shared = self.seq[0]
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 1)})

        def forward(self, x):
            return self.heads["a"](self.seq(self.block(x)))

    return Net()


def test_traversal_as_torch(dg):
    def scenario(lib):
        m = net(lib)
        return (list(m.state_dict()), [n for n, _ in m.named_parameters()],
                [n for n, _ in m.named_parameters(prefix="model", remove_duplicate=False)],
                [n for n, _ in m.named_parameters(recurse=False)], [n for n, _ in m.block.named_parameters()],
                [n for n, _ in m.named_buffers()], [n for n, _ in m.named_buffers(prefix="p", recurse=True)],
                [n for n, _ in m.named_modules()], [n for n, _ in m.named_modules(prefix="root")],
                [n for n, _ in m.named_modules(remove_duplicate=False)], [n for n, _ in m.named_children()],
                len(list(m.parameters())), len(list(m.modules())), len(list(m.buffers())),
                list(m.state_dict(prefix="pre.", keep_vars=True))[:3])
    both(dg, scenario)


def test_named_modules_memo(dg):
    def scenario(lib):
        m = net(lib)
        memo = {m.seq}
        return [n for n, _ in m.named_modules(memo=memo)], len(memo)
    both(dg, scenario)


def test_reassignment_keeps_positions(dg):
    def scenario(lib):
        nn = lib.nn
        m = net(lib)
        m.block.fc = nn.Linear(3, 4)                  # a module reassigned keeps its place
        m.block.scale = nn.Parameter(lib.ones(1))     # a parameter too
        m.block.steps = lib.ones(1)                   # and a buffer
        m.seq[1] = nn.Tanh()
        m.block.extra = nn.Linear(1, 1)               # a new one goes last
        keys = list(m.state_dict())
        del m.block.extra
        m.block.fc = None
        return keys, list(m.state_dict()), repr(m.seq), m.block.fc
    both(dg, scenario)


def test_registration_errors_as_torch(dg):
    calls = [
        lambda lib, m: m.register_parameter("a.b", None), lambda lib, m: m.register_parameter("", None),
        lambda lib, m: m.register_parameter(3, None), lambda lib, m: m.register_buffer("fc", lib.ones(1)),
        lambda lib, m: m.register_parameter("fc", None), lambda lib, m: m.add_module("scale", lib.nn.ReLU()),
        lambda lib, m: m.register_buffer("x", 3), lambda lib, m: m.add_module("x", 3),
        lambda lib, m: m.register_parameter("x", lib.ones(1)),
        lambda lib, m: setattr(m, "fc", lib.ones(1)), lambda lib, m: setattr(m, "scale", lib.ones(1)),
        lambda lib, m: setattr(m, "steps", 3), lambda lib, m: m.register_parameter("y", lib.nn.Parameter(
            lib.ones(1)) * 2 if False else None),
        lambda lib, m: m.nope,
    ]
    for i, call in enumerate(calls):
        def scenario(lib):
            kind, msg = outcome(lambda: call(lib, net(lib).block))
            return kind, (msg if kind != "TypeError" else "")     # TypeError messages name the class paths
        both(dg, scenario)
    class Early(dg.nn.Module):
        def __init__(self):
            self.w = dg.nn.Parameter(dg.ones(1))
    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        Early()


def test_lookup_as_torch(dg):
    calls = [lambda m: m.get_submodule("block.fc"), lambda m: m.get_submodule(""),
             lambda m: m.get_submodule("block.nope"), lambda m: m.get_submodule("block.scale"),
             lambda m: m.get_parameter("block.fc.weight"), lambda m: m.get_parameter("block.steps"),
             lambda m: m.get_parameter("block.fc.nope"), lambda m: m.get_buffer("block.steps"),
             lambda m: m.get_buffer("block.scratch"), lambda m: m.get_buffer("block.scale"),
             lambda m: m.get_buffer("nope.x")]
    for call in calls:
        def scenario(lib):
            kind, value = outcome(lambda: call(net(lib)))
            return kind, (type(value).__name__ if kind == "ok" else value)
        both(dg, scenario)


def test_modes_and_gradients(dg):
    def scenario(lib):
        m = net(lib)
        seen = []
        m.apply(lambda mod: seen.append(type(mod).__name__))
        m.eval()
        modes = [mod.training for mod in m.modules()]
        m.seq.train()
        modes2 = [mod.training for mod in m.modules()]
        m.requires_grad_(False)
        frozen = [p.requires_grad for p in m.parameters()]
        m.requires_grad_()
        m(lib.ones(2, 3)).sum().backward()
        m.zero_grad(set_to_none=False)
        zeros = [None if p.grad is None else float(p.grad.abs().sum()) for p in m.parameters()]
        m.zero_grad()
        nones = [p.grad is None for p in m.parameters()]
        return seen, modes, modes2, frozen, zeros, nones, outcome(lambda: m.train("yes"))
    both(dg, scenario)


def test_dtype_moves(dg):
    def scenario(lib):
        m = net(lib)
        m.block.register_buffer("count", lib.zeros(2, dtype=lib.int64))
        p = m.block.fc.weight
        m.to(lib.float64)
        a = (str(p.dtype), p is m.block.fc.weight, str(m.block.steps.dtype), str(m.block.count.dtype))
        m.float()
        b = str(p.dtype)
        m.double()
        m.to(lib.ones(1))                          # to(tensor): its dtype
        c = str(p.dtype)
        m.to("cpu", lib.float64)
        d = str(m.heads.a.bias.dtype)
        return a, b, c, d, outcome(lambda: m.to(lib.int64))[0], m.cpu() is m
    both(dg, scenario)


# ----- state dicts -----------------------------------------------------------------------------------------------

def test_load_state_dict_as_torch(dg):
    def scenario(lib):
        a, b = net(lib), net(lib)
        sd = a.state_dict()
        r1 = b.load_state_dict(sd)
        partial = {k: v for k, v in sd.items() if k != "heads.b.bias"}
        partial["block.extra"] = lib.ones(1)
        partial["heads.c.weight"] = lib.ones(1)
        r2 = b.load_state_dict(partial, strict=False)
        e1 = outcome(lambda: b.load_state_dict(partial))
        bad = dict(sd)
        bad["block.fc.weight"] = lib.ones(3, 3)
        e2 = outcome(lambda: b.load_state_dict(bad))
        e3 = outcome(lambda: b.load_state_dict(3))
        eq = all(np.array_equal(np.asarray(x.detach()), np.asarray(y.detach()))
                 for x, y in zip(a.state_dict().values(), b.state_dict().values()))
        return repr(r1), repr(r2), r2.missing_keys, r2.unexpected_keys, e1, e2, e3[0], eq
    both(dg, scenario)


def test_load_state_dict_assign(dg):
    def scenario(lib):
        m = lib.nn.Linear(2, 2)
        w = lib.ones(2, 2)
        m.load_state_dict({"weight": w, "bias": lib.zeros(2)}, assign=True)
        with lib.no_grad():
            w.add_(1)
        return (type(m.weight).__name__, m.weight.requires_grad, float(m.weight.detach().sum()),
                type(m.bias).__name__)
    both(dg, scenario)


def test_load_from_torch_state_dict(dg):
    """A torch model's state_dict loads into the same dyngrad model (its tensors have __array__)."""
    theirs = net(torch)
    ours = net(dg)
    ours.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(ours(dg.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


# ----- hooks -----------------------------------------------------------------------------------------------------

def test_forward_hooks_as_torch(dg):
    def scenario(lib):
        m = lib.nn.Linear(2, 2)
        log = []
        h1 = m.register_forward_pre_hook(lambda mod, args: log.append(("pre1", len(args))))
        h2 = m.register_forward_pre_hook(lambda mod, args: log.append(("pre0",)), prepend=True)
        h3 = m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 0,), kwargs), with_kwargs=True)
        h4 = m.register_forward_hook(lambda mod, args, out: log.append(("fwd", tuple(out.shape))))
        h5 = m.register_forward_hook(lambda mod, args, kwargs, out: out + 1, with_kwargs=True)
        h6 = m.register_forward_hook(lambda mod, args, out: log.append(("first",)), prepend=True)
        out = m(lib.ones(3, 2))
        r1 = float((out.sum() - 3 * m.bias.sum()).detach())
        for h in (h1, h2, h3, h4, h5, h6):
            h.remove()
        h1.remove()                                           # twice is fine
        out2 = m(lib.ones(3, 2))
        with m.register_forward_pre_hook(lambda mod, args: args[0] * 2) as h:   # a single value is wrapped
            out3 = m(lib.ones(3, 2))
        return log, round(r1, 5), bool((out2 == m(lib.ones(3, 2))).all()), tuple(out3.shape)
    both(dg, scenario)


def test_forward_hook_errors_and_always_call(dg):
    def scenario(lib):
        class Boom(lib.nn.Module):
            def forward(self, x):
                raise ValueError("boom")
        m = Boom()
        log = []
        m.register_forward_hook(lambda mod, args, out: log.append("never"))
        m.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
        e = outcome(lambda: m(lib.ones(1)))
        lin = lib.nn.Linear(1, 1)
        lin.register_forward_pre_hook(lambda mod, args, kwargs: 3, with_kwargs=True)
        return log, e, outcome(lambda: lin(lib.ones(1)))
    both(dg, scenario)


def grads_of(lib, m, x, hooks):
    x = lib.tensor(x, requires_grad=True)
    out = m(x)
    out.sum().backward()
    return np.asarray(x.grad), [np.asarray(p.grad) for p in m.parameters()]


def test_full_backward_hooks_as_torch(dg):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 2))
    xv = rng.standard_normal((4, 2))

    def scenario(lib):
        nn = lib.nn
        m = nn.Sequential(nn.Linear(2, 3, bias=False), nn.Tanh())
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(w, dtype=lib.float32))
        log = []

        def hook(mod, grad_input, grad_output):
            log.append(("full", type(mod).__name__, [None if g is None else np.round(np.asarray(g), 5).tolist()
                                                     for g in grad_input],
                        [np.round(np.asarray(g), 5).tolist() for g in grad_output]))
            return tuple(None if g is None else g * 2 for g in grad_input)

        def pre(mod, grad_output):
            log.append(("pre", type(mod).__name__))
            return (grad_output[0] * 10,)

        m[1].register_full_backward_pre_hook(pre)
        m[1].register_full_backward_hook(hook)
        m[0].register_full_backward_hook(hook)                 # its input does not require grad
        x = lib.tensor(xv, dtype=lib.float32)
        out = m(x)
        with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed with respect "
                                             "to module outputs since no inputs require gradients"):
            out.sum().backward()
        gw = np.round(np.asarray(m[0].weight.grad), 4).tolist()
        xr = lib.tensor(xv, dtype=lib.float32, requires_grad=True)
        m(xr).sum().backward()
        return log, gw, np.round(np.asarray(xr.grad), 4).tolist(), outcome(lambda: m[0].register_backward_hook(hook))
    both(dg, scenario)


def test_backward_hook_with_several_inputs_and_outputs(dg):
    def scenario(lib):
        class Split(lib.nn.Module):
            def forward(self, a, b, scale):
                return a * scale, b * 2, "note"
        m = Split()
        seen = []
        m.register_full_backward_hook(lambda mod, gi, go: seen.append(
            ([None if g is None else g.tolist() for g in gi], [None if g is None else g.tolist() for g in go])))
        a, b = lib.ones(2, requires_grad=True), lib.ones(2)
        out = m(a, b, 3.0)
        (out[0].sum() * 5).backward()
        name = out[0].grad_fn.name().rstrip("0")
        lin = lib.nn.Linear(2, 2)
        lin.register_full_backward_hook(lambda mod, gi, go: None)
        with pytest.warns(UserWarning, match="module output should be a Tensor or a tuple of Tensors"):
            lin.register_forward_hook(lambda mod, args, out: [out])
            lin(a)
        return seen, name
    both(dg, scenario)


def test_deprecated_backward_hook(dg):
    lin = dg.nn.Linear(2, 2)
    seen = []
    lin.register_backward_hook(lambda mod, gi, go: seen.append(len(go)))
    lin(dg.ones(1, 2, requires_grad=True)).sum().backward()
    assert seen == [1]
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        lin.register_full_backward_hook(lambda *a: None)


# ----- containers ------------------------------------------------------------------------------------------------

def test_sequential_as_torch(dg):
    def scenario(lib):
        nn = lib.nn
        s = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 3), nn.Tanh())
        obs = [repr(s[1:3]), type(s[-1]).__name__, outcome(lambda: s[4])]
        s[1] = nn.Sigmoid()
        obs.append(list(s.state_dict()))
        del s[0]
        obs.append(repr(s))
        obs.append(type(s.pop(1)).__name__)
        s.insert(0, nn.ReLU())
        s.insert(-1, nn.GELU())
        s.append(nn.Identity())
        s.extend(nn.Sequential(nn.SiLU()))
        obs.append(repr(s))
        obs.append(outcome(lambda: s.insert(20, nn.ReLU())))
        del s[1:3]
        obs.append(repr(s))
        obs.append(repr(s + nn.Sequential(nn.ReLU())))
        obs.append(repr(nn.Sequential(nn.ReLU()) * 2))
        from collections import OrderedDict
        named = nn.Sequential(OrderedDict([("first", nn.ReLU()), ("second", nn.Tanh())]))
        obs.append(repr(named))
        del named[0]
        obs.append(repr(named))
        obs.append(len(s))
        return obs
    both(dg, scenario)


def test_module_list_and_dict_as_torch(dg):
    def scenario(lib):
        nn = lib.nn
        ml = nn.ModuleList([nn.ReLU(), nn.Tanh(), nn.ReLU(), nn.ReLU(), nn.Linear(1, 1)])
        obs = [repr(ml), repr(ml[1:3]), outcome(lambda: ml[7])]
        ml[0] = nn.SiLU()
        del ml[1]
        obs.append(repr(ml))
        obs.append(type(ml.pop(0)).__name__)
        ml.insert(1, nn.GELU())
        ml.append(nn.Identity())
        ml.extend([nn.ReLU()])
        ml += nn.ModuleList([nn.Sigmoid()])
        obs.append(repr(ml))
        obs.append(outcome(lambda: ml.extend(3)))
        obs.append(repr(ml + nn.ModuleList([nn.Tanh()])))
        del ml[::2]
        obs.append(repr(ml))
        md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
        md["c"] = nn.SiLU()
        md.update([("d", nn.GELU())])
        obs += [repr(md), list(md.keys()), "a" in md, len(md), type(md.pop("a")).__name__, list(md)]
        obs.append(outcome(lambda: md.update([("x",)])))
        md.clear()
        obs.append(repr(md))
        return obs
    both(dg, scenario)


def test_parameter_containers(dg):
    def scenario(lib):
        nn = lib.nn
        pl = nn.ParameterList([nn.Parameter(lib.ones(2)), lib.ones(2, 3, dtype=lib.float64)])
        pl.append(lib.zeros(1))
        obs = [repr(pl), len(pl), [type(p).__name__ for p in pl], [n for n, _ in pl.named_parameters()],
               type(pl[1:]).__name__, len(pl[1:])]
        pl[0] = lib.ones(3)
        obs.append(tuple(pl[0].shape))
        pd = nn.ParameterDict({"w": nn.Parameter(lib.ones(2)), "b": lib.zeros(1)})
        pd["c"] = lib.ones(1)
        obs += [repr(pd), list(pd.keys()), [n for n, _ in pd.named_parameters()], "w" in pd, len(pd),
                type(pd.pop("w")).__name__, list(pd)]
        holder = nn.Module()
        holder.params = pl
        obs.append(list(holder.state_dict()))
        return obs
    both(dg, scenario)


# ----- reprs -----------------------------------------------------------------------------------------------------

REPRS = [
    lambda nn, lib: nn.Linear(2, 3), lambda nn, lib: nn.Linear(2, 3, bias=False), lambda nn, lib: nn.Identity(),
    lambda nn, lib: nn.Flatten(), lambda nn, lib: nn.Unflatten(1, (2, 3)), lambda nn, lib: nn.Embedding(5, 3),
    lambda nn, lib: nn.Embedding(5, 3, padding_idx=0), lambda nn, lib: nn.Conv2d(1, 2, 3),
    lambda nn, lib: nn.Conv2d(1, 2, (3, 2), stride=2, padding=1, bias=False), lambda nn, lib: nn.MaxPool2d(2),
    lambda nn, lib: nn.MaxPool2d(2, 1, 1), lambda nn, lib: nn.AvgPool2d(2), lambda nn, lib: nn.AvgPool2d(3, 2),
    lambda nn, lib: nn.RNNCell(2, 3), lambda nn, lib: nn.RNNCell(2, 3, nonlinearity="relu", bias=False),
    lambda nn, lib: nn.LSTMCell(2, 3), lambda nn, lib: nn.GRUCell(2, 3), lambda nn, lib: nn.RNN(2, 3),
    lambda nn, lib: nn.RNN(2, 3, 2, nonlinearity="relu", batch_first=True, dropout=0.5, bidirectional=True),
    lambda nn, lib: nn.LSTM(2, 3, proj_size=2), lambda nn, lib: nn.GRU(2, 3, bias=False),
    lambda nn, lib: nn.LayerNorm(3), lambda nn, lib: nn.LayerNorm((2, 3), elementwise_affine=False),
    lambda nn, lib: nn.LayerNorm(3, bias=False), lambda nn, lib: nn.BatchNorm1d(3),
    lambda nn, lib: nn.BatchNorm1d(3, affine=False), lambda nn, lib: nn.Dropout(),
    lambda nn, lib: nn.Dropout(0.2, inplace=True), lambda nn, lib: nn.ReLU(), lambda nn, lib: nn.ReLU(inplace=True),
    lambda nn, lib: nn.Sigmoid(), lambda nn, lib: nn.Tanh(), lambda nn, lib: nn.LeakyReLU(),
    lambda nn, lib: nn.LeakyReLU(0.2, True), lambda nn, lib: nn.GELU(), lambda nn, lib: nn.GELU("tanh"),
    lambda nn, lib: nn.Softplus(), lambda nn, lib: nn.SiLU(), lambda nn, lib: nn.Softmax(),
    lambda nn, lib: nn.Softmax(1), lambda nn, lib: nn.LogSoftmax(dim=1), lambda nn, lib: nn.CrossEntropyLoss(),
    lambda nn, lib: nn.NLLLoss(), lambda nn, lib: nn.MSELoss(), lambda nn, lib: nn.L1Loss(),
    lambda nn, lib: nn.BCEWithLogitsLoss(), lambda nn, lib: nn.Sequential(nn.Linear(1, 2), nn.ReLU()),
    lambda nn, lib: nn.ModuleList([nn.ReLU(), nn.ReLU()]), lambda nn, lib: nn.ModuleDict({"a": nn.ReLU()}),
    lambda nn, lib: nn.Sequential(), lambda nn, lib: nn.ModuleList(), lambda nn, lib: net(lib),
]


@pytest.mark.parametrize("i", range(len(REPRS)))
def test_reprs_as_torch(dg, i):
    both(dg, lambda lib: repr(REPRS[i](lib.nn, lib)))


def test_state_dict_names_of_layers(dg):
    for make in REPRS:
        both(dg, lambda lib: [(k, tuple(v.shape)) for k, v in make(lib.nn, lib).state_dict().items()])


def test_losses_keep_weights_as_buffers(dg):
    both(dg, lambda lib: (list(lib.nn.CrossEntropyLoss(weight=lib.ones(3)).state_dict()),
                          list(lib.nn.BCEWithLogitsLoss(pos_weight=lib.ones(2)).state_dict()),
                          list(lib.nn.NLLLoss().state_dict())))


def test_embedding_from_pretrained(dg):
    def scenario(lib):
        e = lib.nn.Embedding.from_pretrained(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        f = lib.nn.Embedding.from_pretrained(lib.tensor([[1.0, 2.0]]), freeze=False, padding_idx=0)
        return e(lib.tensor([1, 0])).tolist(), e.weight.requires_grad, f.weight.requires_grad, repr(f)
    both(dg, scenario)

"""One torch-facing API over two narrow engines (docs/design.md, "Shared code" and "How to add an op").

- The two engine cores (`dyngrad._C`, the C++ extension, and `dyngrad.reference._C`) expose the same names with the
  same parameter names.
- The table (python/dyngrad/_api/table.py) is what each engine exports, and every row resolves on both.
- The same call behaves the same on both engines: same results, and on bad input the same exception type and
  message. On the C++ engine, a hot row's fast path behaves exactly as the Python definition behind it.
"""
import inspect
import re

import numpy as np
import pytest

from helpers import subprocess_env  # noqa: F401  (imports the dyngrad the run uses)

# Names only the C++ core has, and why: optional accelerators the shared code looks up with getattr, and
# C++ memory/cycle bookkeeping the reference engine (plain Python objects) does not need.
CPP_ONLY = {
    "_sgd_step": "fused optimiser step (Note [Fused optimiser steps]); the reference runs the update as tensor ops",
    "_recorder_setup": "the C++ recorder of dyngrad.compile (Note [Recording in C++]); the reference records in Python",
    "_recorder_set_bindings": "the C++ recorder's fast paths that record (Note [Fast paths that record])",
    "_recorder_user_line": "capture.user_line's frame walk in C++",
    "_entry_key_matches": "static replay's entry guard compared in place (Note [Entry guards compared in place]); "
                          "the reference builds the key",
    "_reachable": "compiling._reachable's walk in C++, for that comparison",
    "_layer_norm_fast": "layer_norm's fused case in one call (Note [Fast paths of the gpt step]); the reference runs "
                        "the Python checks",
    "_embedding_fast": "embedding's plain case in one call (Note [Fast paths of the gpt step])",
    "_adam_step": "fused optimiser step", "_adagrad_step": "fused optimiser step",
    "_rmsprop_step": "fused optimiser step",
    "_set_blas": "hands OpenBLAS to the C++ kernels", "_blas_loaded": "whether it did",
    "_set_blas_threads": "the shared BLAS pool's size outside dyngrad's calls (Note [One BLAS])",
    "_blas_threads": "the shared BLAS pool's size outside dyngrad's calls",
    "_gemm_kernel": "the C++ float32 product kernel in use (Note [Own small-product kernel])",
    "_set_gemm_kernel": "chooses it: the own AVX-512 kernel or the BLAS path (tests run both)",
    "_cached_buffer_bytes": "the C++ buffer cache", "_empty_cache": "the C++ buffer cache",
    "_live_node_count": "C++ leak counters", "_live_storage_count": "C++ leak counters",
    "_collect_cycles": "Note [Cycles through C++]", "_cycle_suspects_noted": "Note [Cycles through C++]",
    "_set_parallel_grain": "the C++ kernels' thread threshold, for bench/parallel_grain.py",
    "_parallel_grain": "the C++ kernels' thread threshold",
    "_entry_key": "static replay's entry guard key built in C++ (Note [Entry guards in C++]); the reference builds "
                  "the same tuple in Python (compiling.entry_key_python)",
    "_fft_plan": "how the C++ FFT plans a size (Note [FFT plans]); numpy.fft plans the reference's",
    "_fft_cached_plan_count": "the C++ FFT's plan cache", "_fft_clear_plan_cache": "the C++ FFT's plan cache",
    "_plan_backward": "static replay's planned backward (Note [The backward as a recorded program]); the reference "
                      "replays its backward over the graph",
    "_plan_profile": "the planned backward's per-entry timing, for bench/static_profile.py",
    "_set_replay_fusion": "static replay's fused groups of steps (Note [Fused steps]); the reference's replay runs "
                          "every step",
}


def core_functions(core):
    names = {}
    for name in dir(core):
        if name.startswith("__"):
            continue
        obj = getattr(core, name)
        if callable(obj) and not isinstance(obj, type) and not inspect.ismodule(obj):
            names[name] = obj
    return names


def parameter_names(fn):
    """Parameter names of a Python function, or of a pybind11 function from its docstring signature."""
    try:
        return [p for p in inspect.signature(fn).parameters]
    except (TypeError, ValueError):
        pass
    first = (fn.__doc__ or "").strip().splitlines()[0]
    inside = first[first.index("(") + 1:first.rindex(")")]
    names, depth, current = [], 0, ""
    for ch in inside:                      # split on top-level commas only (types hold brackets)
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            names.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        names.append(current)
    return [n.split(":")[0].split("=")[0].strip() for n in names]


def test_cores_expose_the_same_functions(cpp, ref):
    c, r = core_functions(cpp._C), core_functions(ref._C)
    only_cpp = sorted(set(c) - set(r) - set(CPP_ONLY))
    only_ref = sorted(set(r) - set(c))
    assert not only_cpp and not only_ref, f"only in dyngrad._C: {only_cpp}; only in dyngrad.reference._C: {only_ref}"
    assert set(CPP_ONLY) <= set(c), f"CPP_ONLY lists names the C++ core lacks: {sorted(set(CPP_ONLY) - set(c))}"


def test_cores_take_the_same_parameters(cpp, ref):
    c, r = core_functions(cpp._C), core_functions(ref._C)
    differ = []
    for name in sorted(set(c) & set(r)):
        pc, pr = parameter_names(c[name]), parameter_names(r[name])
        if pc != pr:
            differ.append(f"{name}: C++ {pc}, reference {pr}")
    assert not differ, "core signatures differ:\n" + "\n".join(differ)


def test_core_tensors_have_the_same_core(cpp, ref):
    """The table's `core` rows are what each engine's Tensor brings itself."""
    from dyngrad._api.table import rows
    missing = [(m.__name__, row.name) for row in rows() if row.impl == "core" for m in (cpp, ref)
               if ("method" in row.kinds or "prop" in row.kinds) and not hasattr(m._C.Tensor, row.name)]
    assert not missing, f"core Tensor attributes missing: {missing}"


def test_exports_are_the_table(dg):
    from dyngrad._api.table import rows
    table = {row.name for row in rows() if "fn" in row.kinds}
    public = {n for n in dir(dg) if not n.startswith("_") and not inspect.ismodule(getattr(dg, n))}
    assert public == table, f"not in the table: {sorted(public - table)}; in the table, not exported: " \
                            f"{sorted(table - public)}"
    functional = {row.name for row in rows() if "F" in row.kinds}
    exported = {n for n in dir(dg.nn.functional) if not n.startswith("_")}
    assert functional <= exported, f"nn.functional lacks {sorted(functional - exported)}"


def test_tensor_attributes_are_the_table(dg):
    from dyngrad._api.table import rows
    names = set()
    for row in rows():
        if {"method", "prop", "op"} & set(row.kinds):
            names.add(row.name)
        if row.inplace:
            names.add(row.inplace)
    public = {n for n in dir(dg.Tensor) if not n.startswith("_")}
    assert public <= names, f"Tensor attributes outside the table: {sorted(public - names)}"
    assert {n for n in names if not n.startswith("_")} <= public


def test_hot_rows_are_the_fast_paths(cpp):
    """Note [Fast paths]: the C++ engine speeds up exactly the table's hot rows (it refuses to start otherwise)."""
    from dyngrad._api.table import rows
    fast = set(cpp._C._fast_path_names())
    hot = set()
    for row in rows():
        if row.hot:
            hot |= {row.name if k in ("fn", "F") else "Tensor." + row.name for k in row.kinds}
            if row.inplace:
                hot.add("Tensor." + row.inplace)
    assert fast <= hot, f"fast paths of rows not marked hot: {sorted(fast - hot)}"
    for row in rows():
        if row.hot:
            keys = {row.name, "Tensor." + row.name, "Tensor." + (row.inplace or "")}
            assert keys & fast, f"row {row.name} is marked hot but has no fast path in csrc/bindings/fast_paths.cpp"


# ----- behaviour: the same call, the same outcome ----------------------------------------------------------------

def _outcome(fn):
    """('ok', values) or (exception type name, message) of calling fn()."""
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001  the outcome is what is compared
        return type(exc).__name__, str(exc)
    return "ok", _values(out)


def _values(out):
    if isinstance(out, (tuple, list)):
        return tuple(_values(o) for o in out)
    if hasattr(out, "_numpy_view"):
        return ("tensor", out.dtype.name, tuple(out.shape), out.detach()._numpy_view().tolist())
    if hasattr(out, "name") and hasattr(out, "is_floating_point"):       # a dtype
        return ("dtype", out.name)
    return out if isinstance(out, (int, float, bool, str, type(None))) else type(out).__name__


def _bad_argument_lists(dg):
    t = dg.tensor([[1.0, -2.0], [3.0, 0.5]])
    i = dg.tensor([1, 0])
    return [(), (None,), ("abc",), (object(),), ([1, "x"],), (t, None), (t, "abc"), (t, object()), (i, t),
            (t, t, t, t, t, t, t, t), (t, (0, 1, 2)), (t, -7), (t, 2.5)]


SKIP_BEHAVIOUR = {"seed", "manual_seed", "initial_seed", "get_num_threads", "rand", "randn", "randint", "randperm", "rand_like", "randn_like",
                  "normal", "bernoulli", "dropout", "empty", "empty_like", "set_num_threads", "set_default_dtype", "Tensor",
                  "FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor",
                  "get_rng_state", "set_rng_state", "randint_like", "multinomial", "poisson", "binomial"}


def _engine_words(message):
    """Messages may name the engine's own module or class, or an object's address; the rest must be equal."""
    return re.sub(r"0x[0-9a-f]+", "0x", re.sub(r"dyngrad\.reference\.|dyngrad\._C\.|dyngrad\.", "", message))


def _same(a, b):
    """Equal outcomes: the same exception and message, or equal values (float32 rounding and NaN allowed)."""
    if a[0] != b[0]:
        return False
    if a[0] != "ok":
        return _engine_words(a[1]) == _engine_words(b[1])
    return _close(a[1], b[1])


def _close(x, y):
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_close(u, v) for u, v in zip(x, y))
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(u, v) for u, v in zip(x, y))
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (x != x and y != y) or abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y))
    return x == y


@pytest.mark.filterwarnings("ignore::UserWarning")      # e.g. mse_loss's broadcasting warning, as torch's
def test_same_outcome_on_bad_and_odd_arguments(cpp, ref):
    """Every public function, called with the same odd arguments on both engines: equal results, or the same
    exception type and message."""
    from dyngrad._api.table import rows
    names = sorted({row.name for row in rows() if "fn" in row.kinds and row.name not in SKIP_BEHAVIOUR
                    and callable(getattr(cpp, row.name)) and not isinstance(getattr(cpp, row.name), type)})
    differ = []
    tried = 0
    for name in names:
        for k in range(len(_bad_argument_lists(cpp))):
            outs = []
            for m in (cpp, ref):
                args = _bad_argument_lists(m)[k]
                m.manual_seed(k)      # the same draws on both engines for what samples (svd_lowrank's sketch)
                outs.append(_outcome(lambda: getattr(m, name)(*args)))
                # a setter called with an odd truthy argument (set_anomaly_enabled(1)) leaves its mode on: the tests
                # that run after this one expect the default
                m.set_anomaly_enabled(False)
            tried += 1
            a, b = outs
            if not _same(a, b):
                differ.append(f"{name}{k}: dyngrad {a!s:.160}\n{' ' * (len(name) + 2)}reference {b!s:.160}")
    assert tried > 500
    assert not differ, f"{len(differ)} of {tried} calls differ between the engines:\n" + "\n".join(differ)


HOT_CALLS = [
    ("add", lambda dg, x, y: dg.add(x, y)), ("add_number", lambda dg, x, y: dg.add(x, 2)),
    ("sub", lambda dg, x, y: dg.sub(x, y)), ("mul", lambda dg, x, y: x.mul(y)), ("div", lambda dg, x, y: x.div(3)),
    ("matmul", lambda dg, x, y: dg.matmul(x, y.T)), ("sum", lambda dg, x, y: x.sum()),
    ("sum_dim", lambda dg, x, y: dg.sum(x, 1, keepdim=True)), ("mean", lambda dg, x, y: x.mean(dim=0)),
    ("mean_neg", lambda dg, x, y: x.mean(-1)), ("tanh", lambda dg, x, y: dg.tanh(x)),
    ("relu", lambda dg, x, y: x.relu()), ("exp", lambda dg, x, y: x.exp()), ("neg", lambda dg, x, y: dg.neg(x)),
    ("linear", lambda dg, x, y: dg.nn.functional.linear(x, y)),
    ("linear_bias", lambda dg, x, y: dg.nn.functional.linear(x, y, y[0])),
    ("cross_entropy", lambda dg, x, y: dg.cross_entropy(x, dg.tensor([1, 0, 2]))),
    ("getitem", lambda dg, x, y: x[1:, None, 0]), ("getitem_int", lambda dg, x, y: x[-1]),
    ("radd", lambda dg, x, y: 2 + x), ("rsub", lambda dg, x, y: 1.5 - x), ("rmul", lambda dg, x, y: True * x),
    ("rdiv", lambda dg, x, y: 1 / x), ("operators", lambda dg, x, y: (x @ y.T) * x - y / 2),
]


@pytest.mark.parametrize("name,call", HOT_CALLS, ids=[n for n, _ in HOT_CALLS])
def test_fast_paths_behave_as_their_definition(cpp, ref, name, call):
    """The C++ fast path and the shared Python definition give the same values, node names and gradients; the
    reference engine (which has no fast paths) agrees."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    results = []
    for m in (cpp, ref):
        x = m.tensor(a, requires_grad=True)
        y = m.tensor(b, requires_grad=True)
        out = call(m, x, y)
        out.sum().backward() if out.requires_grad else None
        results.append((out.detach().numpy(), out.grad_fn.name() if out.grad_fn else None,
                        None if x.grad is None else x.grad.numpy(), None if y.grad is None else y.grad.numpy()))
    (vc, nc, gxc, gyc), (vr, nr, gxr, gyr) = results
    assert nc == nr
    np.testing.assert_allclose(vc, vr, rtol=1e-12, atol=1e-12)
    for gc, gr in ((gxc, gxr), (gyc, gyr)):
        assert (gc is None) == (gr is None)
        if gc is not None:
            np.testing.assert_allclose(gc, gr, rtol=1e-12, atol=1e-12)


INPLACE_CALLS = [   # (name, in-place call, the out-of-place value it must equal bit for bit)
    ("mul_number", lambda x, y: x.mul_(0.3), lambda x, y: x * 0.3),
    ("mul_tensor", lambda x, y: x.mul_(y), lambda x, y: x * y),
    ("mul_row", lambda x, y: x.mul_(y[0]), lambda x, y: x * y[0]),
    ("mul_0d", lambda x, y: x.mul_(y[0, 0]), lambda x, y: x * y[0, 0]),
    ("add_", lambda x, y: x.add_(y), lambda x, y: x + y),
    ("add_alpha", lambda x, y: x.add_(y, alpha=-0.1), lambda x, y: x + y * -0.1),
    ("add_alpha_row", lambda x, y: x.add_(y[1], alpha=2.5), lambda x, y: x + y[1] * 2.5),
    ("add_self", lambda x, y: x.add_(x, alpha=3.0), lambda x, y: x + x * 3.0),
    ("sub_", lambda x, y: x.sub_(y), lambda x, y: x - y),
    ("div_", lambda x, y: x.div_(y), lambda x, y: x / y),
    ("div_number", lambda x, y: x.div_(7), lambda x, y: x / 7),
    ("mul_self", lambda x, y: x.mul_(x), lambda x, y: x * x),
    ("overlap", lambda x, y: x[1:].add_(x[:-1]), lambda x, y: x[1:] + x[:-1]),
    ("overlap_t", lambda x, y: x.mul_(x.T), lambda x, y: x * x.T),
    ("column_view", lambda x, y: x[:, 1].mul_(y[:, 2]), lambda x, y: x[:, 1] * y[:, 2]),
    ("transposed", lambda x, y: x.T.add_(y, alpha=0.5), lambda x, y: x.T + y * 0.5),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,inplace,expected", INPLACE_CALLS, ids=[n for n, _, _ in INPLACE_CALLS])
def test_inplace_arithmetic_without_a_graph_is_the_out_of_place_value(cpp, ref, dtype, name, inplace, expected):
    """Note [In-place arithmetic without a temporary]: with no graph, x.op_(...) computed straight into x (the C++
    fast path) writes exactly the out-of-place op's bits, into views too, with overlapping operands read before
    written, and bumps the version; the reference engine agrees."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 3)), rng.uniform(0.5, 2.0, size=(3, 3))
    for m in (cpp, ref):
        with m.no_grad():
            x, y = m.tensor(a, dtype=getattr(m, dtype)), m.tensor(b, dtype=getattr(m, dtype))
            want = expected(x.clone(), y).numpy()
            version = x._version
            out = inplace(x, y)
            assert x._version > version
            np.testing.assert_array_equal(out.numpy(), want)
        np.testing.assert_array_equal(expected(m.tensor(a, dtype=getattr(m, dtype)), y).numpy(), want)
    x, y = cpp.tensor(a), cpp.tensor(b, requires_grad=True)   # with a graph: the general path records it
    out = inplace(x, y)
    if out.requires_grad:
        out.sum().backward()
        assert y.grad is not None
    i = cpp.tensor([1, 2, 3])
    i.mul_(2)                                                 # int64: not the fast path, same result
    assert i.tolist() == [2, 4, 6]
    with pytest.raises(RuntimeError, match="a leaf tensor that requires grad"):
        cpp.ones(2, requires_grad=True).mul_(2.0)


def test_fast_path_errors_are_the_definitions(cpp, ref):
    """Where the fast path raises itself (the core refused), the message is the one the Python definition gives."""
    x = [m.ones(2, 3) for m in (cpp, ref)]
    calls = [lambda m, t: m.matmul(t, t), lambda m, t: t.sum(5), lambda m, t: t[5], lambda m, t: t + m.ones(4),
             lambda m, t: m.cross_entropy(t, m.tensor([9, 0])), lambda m, t: t[0, 0, 0], lambda m, t: t.mean(dim=-3)]
    for call in calls:
        outs = [_outcome(lambda: call(m, t)) for m, t in zip((cpp, ref), x)]
        assert outs[0][0] == outs[1][0] and _engine_words(outs[0][1]) == _engine_words(outs[1][1]), outs


# ----- the drift found by a new user (issue "One torch-facing API") ----------------------------------------------

def test_gelu_tanh_matches_torch(dg):
    torch = pytest.importorskip("torch")
    v = np.linspace(-4, 4, 17)
    out = dg.nn.functional.gelu(dg.tensor(v), approximate="tanh").numpy()
    expect = torch.nn.functional.gelu(torch.tensor(v, dtype=torch.float32), approximate="tanh").numpy()
    np.testing.assert_allclose(out, expect, rtol=1e-6, atol=1e-7)
    with pytest.raises(RuntimeError, match="gelu: approximate must be 'none' or 'tanh'"):  # torch raises RuntimeError
        dg.nn.functional.gelu(dg.tensor(v), approximate="fast")


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_class_weights_match_torch(dg, reduction, label_smoothing):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    logits, w = rng.normal(size=(5, 4)), rng.uniform(0.2, 2.0, size=4)
    target = np.array([0, 3, 1, 1, -100])
    x = dg.tensor(logits, requires_grad=True)
    loss = dg.nn.functional.cross_entropy(x, dg.tensor(target), weight=dg.tensor(w), reduction=reduction,
                                          label_smoothing=label_smoothing)
    loss.sum().backward()
    tx = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor(target), weight=torch.tensor(w), reduction=reduction,
                                              label_smoothing=label_smoothing)
    tloss.sum().backward()
    np.testing.assert_allclose(loss.detach().numpy(), tloss.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    logp = dg.log_softmax(dg.tensor(logits), 1)
    nll = dg.nn.functional.nll_loss(logp, dg.tensor(target), weight=dg.tensor(w), reduction=reduction)
    tnll = torch.nn.functional.nll_loss(torch.log_softmax(torch.tensor(logits), 1), torch.tensor(target),
                                        weight=torch.tensor(w), reduction=reduction)
    np.testing.assert_allclose(nll.numpy(), tnll.numpy(), rtol=1e-10)


def test_pos_weight_matches_torch(dg):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    logits, target, pw = rng.normal(size=(4, 3)), rng.uniform(0, 1, size=(4, 3)), rng.uniform(0.5, 3, size=3)
    x = dg.tensor(logits, requires_grad=True)
    loss = dg.nn.functional.binary_cross_entropy_with_logits(x, dg.tensor(target), pos_weight=dg.tensor(pw))
    loss.backward()
    tx = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.binary_cross_entropy_with_logits(tx, torch.tensor(target),
                                                                 pos_weight=torch.tensor(pw))
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9)


def test_legacy_constructors(dg):
    t = dg.Tensor([-4.0])
    assert t.dtype is dg.float32 and t.tolist() == [-4.0] and not t.requires_grad
    u = dg.Tensor(2, 3)
    assert u.shape == (2, 3) and u.dtype is dg.float32
    assert dg.Tensor([1, 2]).dtype is dg.float32              # torch.Tensor is always float32
    assert dg.Tensor().shape == (0,)
    assert dg.LongTensor([1, 2]).dtype is dg.int64 and dg.FloatTensor(3).shape == (3,)
    assert dg.DoubleTensor([0.5]).dtype is dg.float64 and dg.BoolTensor([1, 0]).tolist() == [True, False]
    src = dg.ones(2)
    alias = dg.Tensor(src)
    alias.add_(1)
    assert src.tolist() == [2.0, 2.0]                      # Tensor(t) shares memory, as torch


def test_numpy_of_a_tensor_requiring_grad_raises(dg):
    x = dg.ones(2, requires_grad=True)
    for convert in (lambda: np.array(x), lambda: x.numpy(), lambda: np.asarray(x)):
        with pytest.raises(RuntimeError, match="requires grad"):
            convert()
    assert np.array(x.detach()).tolist() == [1.0, 1.0]
    assert x.numpy(force=True).tolist() == [1.0, 1.0]


def test_api_page_is_current():
    """docs/api.md is generated from the table: regenerate it with scripts/gen_api_docs.py after editing."""
    import importlib.util
    import os
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    spec = importlib.util.spec_from_file_location("gen_api_docs", os.path.join(root, "scripts", "gen_api_docs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with open(os.path.join(root, "docs", "api.md"), encoding="utf-8") as f:
        assert f.read() == gen.render(), "docs/api.md is stale: run `PYTHONPATH=python python scripts/gen_api_docs.py`"


def _signature(obj, method):
    """The signature as text; a method's first parameter (self, or input where a function serves as the method)
    is shown as `self`."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if method and params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        params[0] = params[0].replace(name="self", kind=params[0].POSITIONAL_OR_KEYWORD)
    return str(sig.replace(parameters=params))


def test_same_signatures_on_both_engines(cpp, ref):
    """inspect.signature of every public function and Tensor method is the same on both engines (on the C++
    engine, a fast path shows the signature of the Python definition behind it)."""
    from dyngrad._api.table import rows
    differ, checked = [], 0
    for row in rows():
        if row.impl.startswith("core") and row.name in ("Tensor", "dtype"):
            continue
        places = []
        if "fn" in row.kinds:
            places.append((row.name, getattr(cpp, row.name), getattr(ref, row.name)))
        if "method" in row.kinds and not row.impl.startswith("core"):
            places.append(("Tensor." + row.name, getattr(cpp.Tensor, row.name), getattr(ref.Tensor, row.name)))
        if row.inplace:
            places.append(("Tensor." + row.inplace, getattr(cpp.Tensor, row.inplace),
                           getattr(ref.Tensor, row.inplace)))
        for where, a, b in places:
            if not callable(a) or isinstance(a, type):
                continue
            sa, sb = _signature(a, "." in where), _signature(b, "." in where)
            checked += 1
            if sa != sb:
                differ.append(f"{where}: dyngrad {sa}, reference {sb}")
    assert checked > 200
    assert not differ, "signatures differ:\n" + "\n".join(differ)


def test_api_page_walks_every_package():
    """docs/api.md lists the names of nn, optim, autograd, utils and distributions, not only the table's, with the
    engine column computed from both engines."""
    import importlib.util
    import os
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    spec = importlib.util.spec_from_file_location("gen_api_docs", os.path.join(root, "scripts", "gen_api_docs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    cpp_names, ref_names = gen._public_names("dyngrad"), gen._public_names("dyngrad.reference")
    for path in ("nn.Linear", "nn.init.kaiming_uniform_", "optim.Adam", "optim.lr_scheduler.StepLR", "autograd.grad",
                 "autograd.Function", "utils.data.DataLoader", "distributions.Normal", "viz.to_dot"):
        assert path in cpp_names and path in ref_names, path
    assert gen._engine_text((True, False)) == "C++ only" and gen._engine_text((False, True)) == "reference only"
    page = gen.render()
    assert "| `Linear` | class | both |" in page and "### `dyngrad.optim`" in page

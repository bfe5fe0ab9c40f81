"""The recorded run behind docs/coverage.md: which public name each passing test called, on which engine, and what
the test checked about it. Opt-in (conftest.py registers it only when DYNGRAD_COVERAGE names the output file):

    DYNGRAD_COVERAGE=/tmp/coverage.json PYTHONPYCACHEPREFIX=/tmp/dyngrad-coverage-pyc PYTHONPATH=python \\
        python -m pytest -q -p no:warnings -o enable_assertion_pass_hook=true tests/
    PYTHONPATH=python python scripts/gen_coverage_docs.py /tmp/coverage.json

Note [Coverage evidence]
Every public name of python/dyngrad/_api/table.py (dyngrad.NAME, Tensor.NAME and its in-place form,
nn.functional.NAME, special.NAME, linalg.NAME) is wrapped on both engines. A wrapper records a call only when no
other public name is running (depth 0): a call made by the test (or by a module, optimizer, ... it drives), not one
a composite makes internally. Evidence comes from three places, and only from tests that passed:
  1. the check helpers of tests/helpers.py. The names called inside the `fn` given to check_op get: forward
     "numpy" when it has an np_fn, backward "finite differences" for the names whose output required grad;
     check_torch gives "torch" / "vs torch"; check_exact "exact values"; check_gradgrad and
     dyngrad.autograd.gradcheck / gradgradcheck (on the function they are given) "gradgradcheck" / "gradcheck".
  2. comparison calls in tests (np.testing.assert_allclose / assert_array_equal / assert_equal /
     assert_array_almost_equal / assert_almost_equal, helpers.assert_close): a compared value remembers the
     public name that produced it (through .numpy(), detach(), to_numpy() and the like, Note [Transparent names]);
     the other side says against what: a torch tensor or array read from one -> "torch", the other engine's
     value -> "other engine" (parity, not an oracle), anything else -> "values" (numpy or literals).
  3. plain asserts (pytest's assertion-pass hook): a tensor read (.tolist(), .item(), .numpy(), bool(), float(),
     ...) on the lines of an assert that passed was checked against "values", or "torch" if a torch tensor was
     read in the same assert.
A compared value that is a gradient (Tensor.grad, autograd.grad) checks the backward of every name that produced
an output requiring grad earlier in the same test on the same engine: an upper bound, stated on the page.
"""
import functools
import importlib.util
import json
import os
import sys
import threading
import weakref

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = {"cpp": "dyngrad", "reference": "dyngrad.reference"}

# Note [Transparent names]: their result is the same values as their input, so it keeps the input's origin.
TRANSPARENT = {"Tensor.detach", "Tensor.detach_", "Tensor.numpy", "Tensor.cpu", "Tensor.contiguous", "Tensor.to",
               "Tensor.float", "Tensor.double", "Tensor.__array__", "Tensor.tolist", "Tensor.data",
               "Tensor.requires_grad_", "Tensor.clone", "clone", "Tensor.type_as", "Tensor.type"}
READS = {"Tensor.tolist", "Tensor.item", "Tensor.numpy", "Tensor.__bool__", "Tensor.__float__", "Tensor.__int__",
         "Tensor.__index__", "Tensor.__array__", "Tensor.__iter__", "Tensor.__complex__"}


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_coverage_docs", os.path.join(HERE, "..", "scripts", "gen_coverage_docs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


class _State(threading.local):
    depth = 0           # public names running in this thread
    helper = 0          # check helpers running (their own asserts are not test evidence)


TLS = _State()

# Note [Wrapper frames]: the wrapper is compiled as a file of dyngrad/_api/, so that code looking for the user's
# frame (call sites of graph nodes, the deprecation warnings of _api/ops/linalg.py) skips it as it skips the API layer.
_WRAPPER_SOURCE = """
def make(fn, rec, engine, name, TLS):
    def wrapper(*args, **kwargs):
        outer = TLS.depth
        TLS.depth = outer + 1
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            if outer == 0 and rec.test is not None:
                rec.test["calls"].add((engine, name))
            raise
        finally:
            TLS.depth = outer
        if outer == 0:
            rec.called(engine, name, args, out)
        return out
    return wrapper
"""


def _compile_wrapper():
    import dyngrad._api
    namespace = {}
    where = os.path.join(os.path.dirname(os.path.abspath(dyngrad._api.__file__)), "_coverage_wrapper.py")
    exec(compile(_WRAPPER_SOURCE, where, "exec"), namespace)
    return namespace["make"]


_WRAPPER = _compile_wrapper()


class Recorder:
    def __init__(self, path):
        self.path = path
        self.test = None            # the running test's record, or None between tests
        self.tags = {}              # id(obj) -> (ref, tag); tag = ("dg", engine, names, is_grad) or ("torch",)
        self.keep = []              # tagged objects without weak references (lists), kept alive for the test
        self.scopes = []            # collectors of the check helpers' fn calls, innermost last
        self.reads = []             # (filename, lineno, tag) of tensor reads since the last passing assert
        self.names = {}             # name -> engine -> {"tests": n, "example", "fwd": {how: test}, "bwd": {...}}
        self.installed = False
        self.outcomes = {"passed": 0, "not passed": 0}     # tests run under the recording (call phase)
        self.files = set()
        self.ran, self.collected = {}, {}         # test file -> tests run under the recording / collected

    # ----- tags: where a value came from ------------------------------------------------------------------------
    def tag(self, obj, tag):
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda r, k=key: self.tags.pop(k, None) if self.tags.get(k, (None,))[0] is r
                              else None)
        except TypeError:
            self.keep.append(obj)
            ref = (lambda o: (lambda: o))(obj)
        self.tags[key] = (ref, tag)

    def tag_of(self, obj):
        entry = self.tags.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return entry[1]
        if type(obj).__module__.startswith("torch") and type(obj).__name__ in ("Tensor", "Parameter"):
            return ("torch",)
        return None

    # ----- what a test did ----------------------------------------------------------------------------------------
    def called(self, engine, name, args, out):
        t = self.test
        if t is None:
            return
        t["calls"].add((engine, name))
        computed = _is_tensor(out) or (isinstance(out, tuple) and any(_is_tensor(o) for o in out))
        for scope in self.scopes:
            if scope["active"] and computed:     # x.shape inside fn is not part of what the helper checks
                scope["names"].add((engine, name))
        source = self.tag_of(args[0]) if (name in TRANSPARENT and args) else None
        if name == "Tensor.grad":
            tag = ("dg", engine, (name,), True)
        elif source is not None and source[0] == "dg":
            tag = source[:2] + (source[2] + (name,), source[3])     # the value and every name it went through
        else:
            tag = ("dg", engine, (name,), False)
        grad_out = False
        if computed:
            for o in (out if isinstance(out, tuple) else (out,)):
                if _is_tensor(o):
                    self.tag(o, tag)
                    # a result of the graph (not a leaf made by tensor(..., requires_grad=True))
                    grad_out = grad_out or bool(o.requires_grad and o.grad_fn is not None)
        elif isinstance(out, (np.ndarray, list)):
            self.tag(out, tag)
        elif out is not None and name not in READS:
            self.read(tag)      # a plain value (x.dim(), x.shape, x.is_leaf, dg.equal(...)) read where asserted
        if grad_out and name not in TRANSPARENT:
            t["graph"].add((engine, name))
            for scope in self.scopes:
                if scope["active"]:
                    scope["grad"].add((engine, name))
        if name in READS and args:
            self.read(self.tag_of(args[0]))

    def read(self, tag):
        if tag is None or self.test is None or TLS.helper:
            return
        frame = sys._getframe(3)
        self.reads.append((frame.f_code.co_filename, frame.f_lineno, tag))

    def evidence(self, engine, name, side, how):
        t = self.test
        if t is not None and name is not None:
            t[side].setdefault((engine, name), set()).add(how)

    def compared(self, tag, other):
        """tag's value was found equal (close) to other's."""
        if tag is None or tag[0] != "dg":
            return
        _, engine, names, is_grad = tag
        if other is None:
            how = "values"
        elif other[0] == "torch":
            how = "torch"
        elif other[1] != engine:
            how = "other engine"
        else:
            return          # one engine against itself (e.g. a view against a copy): not a check of the values
        for name in names:      # the producer (or Tensor.grad) and the transparent names it went through
            self.evidence(engine, name, "fwd", how)
        if is_grad:
            for eng, n in list(self.test["graph"]) if self.test else ():
                if eng == engine:
                    self.evidence(eng, n, "bwd", "vs " + how)

    # ----- installing the wrappers --------------------------------------------------------------------------------
    def wrap(self, engine, name, fn):
        wrapper = functools.wraps(fn)(_WRAPPER(fn, self, engine, name, TLS))
        wrapper.__dyngrad_coverage__ = True
        return wrapper

    def install(self):
        import dyngrad  # noqa: F401  both engines, before any test module imports them
        gen = _generator()
        from dyngrad._api.table import rows
        for engine, modname in ENGINES.items():
            m = importlib.import_module(modname)
            spaces = {"fn": m, "F": m.nn.functional, "special": m.special, "linalg": m.linalg,
                      "masked": m.masked, "fft": m.fft, "windows": m.signal.windows}
            for name, kind, attr in gen.public_names(rows()):
                if name in gen.UNTRACED:
                    continue
                owner = m.Tensor if name.startswith("Tensor.") else spaces[kind]
                obj = owner.__dict__.get(attr) if owner is m.Tensor else getattr(owner, attr, None)
                if obj is None or getattr(obj, "__dyngrad_coverage__", False):
                    continue
                if isinstance(obj, property):
                    getter = self.wrap(engine, name, obj.fget)
                    setattr(owner, attr, property(getter, obj.fset, obj.fdel, obj.__doc__))
                elif isinstance(obj, type) or not callable(obj):
                    continue        # classes and values (dtypes): not traced (docs/coverage.md says so)
                else:
                    setattr(owner, attr, self.wrap(engine, name, obj))
            for which in ("gradcheck", "gradgradcheck"):
                setattr(m.autograd, which, self.scoped(getattr(m.autograd, which), which))
            grad = m.autograd.grad
            setattr(m.autograd, "grad", self.grads(engine, grad))
        import helpers
        helpers.check_op = self.scoped(helpers.check_op, "check_op")
        helpers.check_torch = self.scoped(helpers.check_torch, "check_torch")
        helpers.check_exact = self.scoped(helpers.check_exact, "check_exact")
        helpers.check_gradgrad = self.scoped(helpers.check_gradgrad, "check_gradgrad")
        helpers.assert_close = self.sink(helpers.assert_close)
        to_numpy = helpers.to_numpy

        def traced_to_numpy(t):
            out = to_numpy(t)
            tag = self.tag_of(t)
            if tag is not None and self.test is not None:
                self.tag(out, tag)
            return out
        helpers.to_numpy = traced_to_numpy
        for which in ("assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal",
                      "assert_almost_equal"):
            setattr(np.testing, which, self.sink(getattr(np.testing, which)))
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            for which in ("numpy", "tolist", "item"):
                setattr(torch.Tensor, which, self.torch_read(getattr(torch.Tensor, which), which))
        self.installed = True

    def grads(self, engine, fn):
        """autograd.grad's results are gradients (of every name in the test's graph)."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            if self.test is not None:
                for o in (out if isinstance(out, (tuple, list)) else (out,)):
                    if o is not None:
                        self.tag(o, ("dg", engine, (), True))
            return out
        return wrapper

    def torch_read(self, fn, which):
        @functools.wraps(fn)
        def wrapper(t, *args, **kwargs):
            out = fn(t, *args, **kwargs)
            if self.test is not None and not TLS.helper:
                if which != "item":
                    self.tag(out, ("torch",))
                frame = sys._getframe(1)
                self.reads.append((frame.f_code.co_filename, frame.f_lineno, ("torch",)))
            return out
        return wrapper

    def sink(self, fn):
        """A comparison: when it passes, each compared value was checked against the other."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            if self.test is not None and not TLS.helper and len(args) >= 2:
                a, b = self.tag_of(args[0]), self.tag_of(args[1])
                self.compared(a, b)
                self.compared(b, a)
            return out
        return wrapper

    def scoped(self, fn, kind):
        """A check helper: the names its `fn` calls are checked as the helper checks (Note [Coverage evidence])."""
        rec = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if rec.test is None:
                return fn(*args, **kwargs)
            scope = {"names": set(), "grad": set(), "active": 0}
            args = list(args)
            pos = 0 if kind in ("gradcheck", "gradgradcheck") else (2 if kind in ("check_op", "check_gradgrad")
                                                                   else 1)
            key = "func" if kind in ("gradcheck", "gradgradcheck") else "fn"
            user = kwargs.get(key, args[pos] if len(args) > pos else None)

            def traced(*a, **k):
                scope["active"] += 1
                outer, TLS.depth = TLS.depth, 0        # fn is test code: its calls are the test's own
                try:
                    return user(*a, **k)
                finally:
                    TLS.depth = outer
                    scope["active"] -= 1
            if user is not None:
                if key in kwargs:
                    kwargs[key] = traced
                else:
                    args[pos] = traced
            rec.scopes.append(scope)
            TLS.helper += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                TLS.helper -= 1
                rec.scopes.remove(scope)
            if kind in ("gradcheck", "gradgradcheck") and out is False:
                return out
            names, grads = scope["names"], scope["grad"]
            bound = _bind(fn, args, kwargs)
            if kind == "check_op":
                if bound.get("np_fn") is not None:
                    for e, n in names:
                        rec.evidence(e, n, "fwd", "numpy")
                if bound.get("grad", True) and "float64" in bound.get("dtypes", ("float64",)):
                    for e, n in grads:
                        rec.evidence(e, n, "bwd", "finite differences")
            elif kind == "check_torch":
                for e, n in names:
                    rec.evidence(e, n, "fwd", "torch")
                for e, n in grads:
                    rec.evidence(e, n, "bwd", "vs torch")
            elif kind == "check_exact":
                for e, n in names:
                    rec.evidence(e, n, "fwd", "exact values")
                if bound.get("expect_grad") is not None:
                    for e, n in grads:
                        rec.evidence(e, n, "bwd", "exact values")
            else:
                how = "gradgradcheck" if kind in ("gradgradcheck", "check_gradgrad") else "gradcheck"
                for e, n in grads:
                    rec.evidence(e, n, "bwd", how)
            return out
        return wrapper

    # ----- pytest hooks -------------------------------------------------------------------------------------------
    def pytest_configure(self, config):
        if not config.getini("enable_assertion_pass_hook") or sys.pycache_prefix is None:
            raise pytest.UsageError(
                "DYNGRAD_COVERAGE needs `-o enable_assertion_pass_hook=true` and PYTHONPYCACHEPREFIX set to a "
                "folder of its own (pytest would reuse test modules rewritten without the hook)")
        self.install()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        self.test = {"calls": set(), "graph": set(), "fwd": {}, "bwd": {}}
        self.reads = []
        self.files.add(item.nodeid.split("::")[0])
        try:
            result = yield
        except BaseException:
            self.outcomes["not passed"] += 1
            self._forget()
            raise
        self.outcomes["passed"] += 1
        self._commit(item.nodeid)
        if self.outcomes["passed"] % 500 == 0:
            self._write()
        return result

    def pytest_runtest_logreport(self, report):
        if report.when == "setup":          # every test has one, also those skipped before their call
            where = report.nodeid.split("::")[0]
            self.ran[where] = self.ran.get(where, 0) + 1

    def pytest_collection_finish(self, session):
        for item in session.items:
            where = item.nodeid.split("::")[0]
            self.collected[where] = self.collected.get(where, 0) + 1

    def pytest_assertion_pass(self, item, lineno, orig, expl):
        if self.test is None:
            return
        last = lineno + orig.count("\n")
        here = [tag for _, line, tag in self.reads if lineno <= line <= last]
        self.reads = []
        other = ("torch",) if any(t[0] == "torch" for t in here) else None
        for tag in here:
            if tag[0] == "dg":
                self.compared(tag, other)

    def _forget(self):
        self.test = None
        self.reads = []
        self.keep.clear()

    def _commit(self, nodeid):
        t = self.test
        self._forget()
        for engine, name in t["calls"]:
            entry = self.names.setdefault(name, {}).setdefault(engine, {"tests": 0, "example": nodeid, "fwd": {},
                                                                        "bwd": {}})
            entry["tests"] += 1
        for engine, name in t["graph"]:
            self.names.setdefault(name, {}).setdefault(engine, {"tests": 0, "example": nodeid, "fwd": {},
                                                                "bwd": {}})["differentiable"] = True
        for side in ("fwd", "bwd"):
            for (engine, name), hows in t[side].items():
                entry = self.names.setdefault(name, {}).setdefault(engine, {"tests": 0, "example": nodeid,
                                                                            "fwd": {}, "bwd": {}})
                for how in hows:
                    entry[side].setdefault(how, nodeid)

    def pytest_sessionfinish(self, session):
        if self.installed:      # also after --collect-only: the collected counts tell a cut run's missing part
            self._write()

    def _write(self):
        """Also every 500 passing tests, so that a run cut short still leaves its evidence so far."""
        with open(self.path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"format": 1, "names": self.names, "outcomes": self.outcomes, "files": sorted(self.files),
                       "ran": self.ran, "collected": self.collected}, f, indent=0, sort_keys=True)
        os.replace(self.path + ".tmp", self.path)


def _is_tensor(o):
    return hasattr(o, "grad_fn") and hasattr(o, "requires_grad") and hasattr(o, "_numpy_view")


def _bind(fn, args, kwargs):
    import inspect
    try:
        return dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
    except TypeError:
        return dict(kwargs)

"""Every warning dyngrad raises names the user's line, not dyngrad's internals (issue 25: mse_loss, std and var
pointed at _api/node_names.py). All of them go through python/dyngrad/_user_frame.py's warn (Note [Warnings at the
user's line]); the last tests keep it that way."""
import ast
import os
import re
import warnings

import numpy as np
import pytest

import dyngrad

PACKAGE = os.path.dirname(os.path.abspath(dyngrad.__file__))
CSRC = os.path.join(os.path.dirname(os.path.dirname(PACKAGE)), "csrc")


def _read_only(shape=(3,)):
    a = np.ones(shape)
    a.setflags(write=False)
    return a


# (what, a call that warns, a regex of the message); each call is a user's line in this file
CALLS = [
    ("F.mse_loss", lambda dg: dg.nn.functional.mse_loss(dg.ones(3, 1), dg.ones(3)), r"mse_loss: using a target size"),
    ("nn.MSELoss", lambda dg: dg.nn.MSELoss()(dg.ones(3, 1), dg.ones(3)), r"mse_loss: using a target size"),
    ("Tensor.std", lambda dg: dg.ones(1).std(), r"std\(\): degrees of freedom"),
    ("Tensor.var", lambda dg: dg.ones(1).var(), r"var\(\): degrees of freedom"),
    ("dyngrad.var", lambda dg: dg.var(dg.ones(1)), r"var\(\): degrees of freedom"),
    ("from_numpy", lambda dg: dg.from_numpy(_read_only()), r"from_numpy: the given numpy array is not writable"),
    ("non-leaf .grad", lambda dg: (dg.ones(2, requires_grad=True) * 2).grad, r"non-leaf tensor"),
    ("meshgrid", lambda dg: dg.meshgrid(dg.ones(2), dg.ones(3)), r"meshgrid: .*indexing"),
    ("softmax without dim", lambda dg: dg.nn.functional.softmax(dg.ones(2, 3)), r"implicit dimension"),
    ("nn.init on empty", lambda dg: dg.nn.init.kaiming_uniform_(dg.empty(0, 3)), r"zero-element"),
    ("kl_div mean", lambda dg: dg.nn.functional.kl_div(dg.zeros(2, 3), dg.ones(2, 3)), r"kl_div: reduction='mean'"),
]


@pytest.mark.parametrize("what,call,message", CALLS, ids=[c[0] for c in CALLS])
def test_warning_names_the_users_line(dg, what, call, message):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(dg)
    ours = [w for w in caught if re.search(message, str(w.message))]
    assert ours, f"{what}: no warning matching {message!r}; got {[str(w.message) for w in caught]}"
    for w in ours:
        assert os.path.abspath(w.filename) == os.path.abspath(__file__), f"{what}: points at {w.filename}:{w.lineno}"


def test_warning_from_a_users_function_names_that_function(dg):
    """A user's function called by dyngrad (a Module's forward) is the user's line, though dyngrad called it."""
    class Model(dg.nn.Module):
        def forward(self, x):
            return dg.nn.functional.mse_loss(x, dg.ones(3))      # the line the warning must name

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Model()(dg.ones(3, 1))
    [w] = [w for w in caught if "mse_loss" in str(w.message)]
    assert os.path.abspath(w.filename) == os.path.abspath(__file__)
    assert "the line the warning must name" in open(__file__).read().splitlines()[w.lineno - 1]


def test_error_filter_raises_at_the_users_call(dg):
    """-W error (here: simplefilter('error')) turns the warning into an exception raised from the user's call."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="degrees of freedom"):
            dg.ones(1).std()


def _python_files():
    for base, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(base, name)


def test_no_warning_bypasses_the_user_frame_helper():
    """warnings.warn with a hand-counted stacklevel is right for one call path only; use _user_frame.warn."""
    bare = []
    for path in _python_files():
        if os.path.basename(path) == "_user_frame.py":
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"):
                bare.append(f"{os.path.relpath(path, PACKAGE)}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module == "warnings" and any(
                    alias.name == "warn" for alias in node.names):
                bare.append(f"{os.path.relpath(path, PACKAGE)}:{node.lineno} (from warnings import warn)")
    assert not bare, f"warnings.warn outside _user_frame.py (use `from .._user_frame import warn`): {bare}"


@pytest.mark.skipif(not os.path.isdir(CSRC), reason="needs the source tree (csrc/)")
def test_cpp_warnings_go_through_the_helper():
    direct = []
    for base, _, files in os.walk(CSRC):
        for name in files:
            path = os.path.join(base, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if re.search(r"\bPyErr_Warn(Ex|Format|Explicit)?\b", line):
                        direct.append(f"{os.path.relpath(path, CSRC)}:{number}")
    assert not direct, f"C++ warnings with a fixed stacklevel (call warn_at_user_line): {direct}"

"""scripts/gen_ops.py: the reference engine's table of primitives (python/dyngrad/reference/primitives.py) is
generated from csrc/dyngrad/ops.def and saved.h, and kept current."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_ops", os.path.join(ROOT, "scripts", "gen_ops.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_primitives_module_is_current():
    gen = load_generator()
    with open(gen.OUTPUT, encoding="utf-8") as f:
        assert f.read() == gen.render(), "python/dyngrad/reference/primitives.py is stale: run " \
                                         "`python scripts/gen_ops.py`"


def test_api_rows_module_is_current():
    """_api/primitive_rows.py lists ops.def's plain unary primitives, whose public functions and table rows need
    no hand-written line."""
    gen = load_generator()
    with open(gen.API_OUTPUT, encoding="utf-8") as f:
        assert f.read() == gen.render_api(), "python/dyngrad/_api/primitive_rows.py is stale: run " \
                                             "`python scripts/gen_ops.py`"


def test_every_plain_unary_primitive_is_public(cpp, ref):
    """Each ops.def unary kernel op has a table row (its own or the generated one) and runs on both engines."""
    gen = load_generator()
    with open(gen.OPS_DEF, encoding="utf-8") as f:
        names = [op.name for op in gen.read_ops(f.read()) if gen.plain_unary(op)]
    from dyngrad._api.table import rows
    public = {row.name for row in rows() if "fn" in row.kinds}
    assert set(names) <= public, sorted(set(names) - public)
    for engine in (cpp, ref):
        x = engine.tensor([0.25, 0.5])
        for name in names:
            assert getattr(engine, name)(x).shape == (2,), name
            assert getattr(x, name)().shape == (2,), name


def test_help_and_check_write_nothing(tmp_path):
    gen = load_generator()
    before = os.stat(gen.OUTPUT).st_mtime_ns
    script = os.path.join(ROOT, "scripts", "gen_ops.py")
    shown = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--check" in shown.stdout
    checked = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout
    assert os.stat(gen.OUTPUT).st_mtime_ns == before


def test_the_table_is_ops_def(cpp, ref):
    """Both engines list the primitives of ops.def in its order, with its display names and saved structs."""
    gen = load_generator()
    with open(gen.OPS_DEF, encoding="utf-8") as f:
        ops = gen.read_ops(f.read())
    assert [op.name for op in ops] == list(cpp._C.op_names()) == list(ref._C.op_names())
    from dyngrad.reference import primitives
    assert [(op.name, op.display, op.signature, op.hot) for op in ops] == \
        [(row[0], row[1], row[3], row[4]) for row in primitives.PRIMITIVES]


def test_malformed_lines_are_refused():
    gen = load_generator()
    with pytest.raises(SystemExit, match="takes 5 columns"):
        gen.read_ops("// family math: x\nDG_OP( add, Add, SavesNothing, binary )\n")
    with pytest.raises(SystemExit, match="no `// family F:` line"):
        gen.read_ops("DG_OP( add, Add, SavesNothing, binary, hot )\n")
    with pytest.raises(SystemExit, match="needs one of the signatures"):
        gen.read_ops("// family math: x\nDG_KERNEL_OP( add, Add, SavesNothing, binary, hot, Add )\n")


def test_saved_structs_are_read_with_their_fields():
    gen = load_generator()
    text = ("struct SavesNothing {\n};\n"
            "DG_SAVED(SavesClamp, (SavedTensor, a), (std::optional<double>, lo),\n"
            "         (std::optional<double>, hi));  // clamp\n")
    assert gen.read_structs(text) == {"SavesNothing": ((), None), "SavesClamp": (("a", "lo", "hi"), "clamp")}
    assert gen.snake_case("TanhGradFromOut") == "tanh_grad_from_out" and gen.snake_case("Exp") == "exp"

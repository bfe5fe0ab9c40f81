"""Calls every row of the API table on small inputs and records which calls crossed the numpy bridge
(python/dyngrad/_api/bridge.py, Note [The numpy bridge]); tests/test_numpy_bridge.py runs it in a subprocess (the
settings rows change process-wide state, and a crash must not take pytest with it) and compares the result with
the table's `uses` column.

    python tests/bridge_driver.py --engine dyngrad --report R

Each public name of a row (dyngrad.NAME, Tensor.NAME, nn.functional.NAME, special.NAME, linalg.NAME, masked.NAME)
is tried with the argument lists of SAMPLES[row name] if it has some, else with the generic CANDIDATES, in order, until one call
returns; the crossings of the bridge's functions made during that call are counted (the calls that raised are
tried again with the next list, their crossings dropped). The report (JSON) maps each row's index in table.rows()
to {"called": bool, "crossed": bool, "how": the argument list that worked, "functions": the bridge's functions
the call used}.
"""
import argparse
import copy
import functools
import importlib
import json
import math
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CROSSINGS = ("view", "host_array", "host_values", "validate", "share", "copy", "from_array", "host_result",
             "round_to")

# rows whose calls change the process (settings, the global generator): tried with their SAMPLES only, which leave
# the state as it was (the driver runs in a process of its own, but the later rows run after them)
SAMPLES_ONLY = {"manual_seed", "seed", "set_rng_state", "set_num_threads", "set_num_interop_threads",
                "use_deterministic_algorithms", "set_deterministic_debug_mode", "set_float32_matmul_precision",
                "set_warn_always", "set_default_tensor_type", "set_default_dtype", "set_default_device",
                "set_printoptions", "set_anomaly_enabled", "set_grad_enabled", "compile", "vmap"}


def inputs(m):
    """Fresh small inputs, float64 unless said otherwise."""
    rng = np.random.default_rng(0)
    f = lambda *shape: m.tensor(rng.uniform(0.1, 0.9, shape))        # noqa: E731
    spd = rng.uniform(-1, 1, (3, 3))
    sq = m.tensor(spd @ spd.T + 3 * np.eye(3))
    lu, piv = m.linalg.lu_factor(sq)
    ld, ldpiv = m.linalg.ldl_factor(sq)
    return {
        "x": f(2, 3), "y": f(2, 3), "v": f(3), "w": f(3), "s": m.tensor(0.5, dtype=m.float64),
        "sq": m.tensor(spd @ spd.T + 3 * np.eye(3)), "i": m.tensor([[0, 1, 2], [2, 1, 0]]), "iv": m.tensor([0, 2, 1]),
        "labels": m.tensor([0, 2]), "mask": m.tensor([[True, False, True], [False, True, False]]),
        "img": f(1, 2, 5, 5), "w4": f(3, 2, 3, 3), "seq": f(1, 2, 5), "w3": f(3, 2, 3), "vol": f(1, 2, 3, 4, 4),
        "b": f(1, 3, 4), "bt": f(1, 4, 3), "row": f(1, 3), "col": f(3, 1), "m34": f(3, 4), "m42": f(4, 2),
        "pos": m.tensor([0, 4]), "lengths": m.tensor([5]), "small": m.tensor([1, 1]), "grid": f(1, 2, 2, 2) * 2 - 1,
        "theta": f(1, 2, 3), "i2": m.tensor([[0, 1, 1], [1, 0, 0]]), "ibag": m.tensor([1, 2, 0, 1]),
        "off": m.tensor([0, 2]), "w2": f(3, 2), "lp": f(5, 1, 3).log_softmax(2), "tgt": m.tensor([[1, 2]]),
        "tl": m.tensor([2]), "il": m.tensor([5]), "ones": m.tensor([1.0, -1.0]), "k3": f(3, 2, 2, 2, 2),
        "kt1": f(2, 3, 2), "kt2": f(2, 3, 2, 2), "kt3": f(2, 3, 2, 2, 2), "upos1": m.tensor([[[0, 2], [1, 3]]]),
        "upos2": m.zeros(1, 2, 5, 5, dtype=m.int64), "upos3": m.zeros(1, 2, 3, 4, 4, dtype=m.int64),
        "tbc": f(5, 1, 2), "ktbc": f(2, 2, 3), "mq": f(3, 1, 4), "inw": f(12, 4), "inb": f(12), "outw": f(4, 4),
        "outb": f(4), "cnt": m.tensor([[1.0, 2, 3], [4, 5, 6]], dtype=m.float64), "bsq": f(1, 3, 3), "s22": f(2, 2), "xg": f(2, 3).requires_grad_(), "one": m.tensor(1), "iv01": m.tensor([0, 1]), "u1": f(1, 2, 2), "c2": f(2), "rng": m.get_rng_state(),
        "threads": m.get_num_threads(), "interop": m.get_num_interop_threads(),
        "lu": lu, "piv": piv, "ld": ld, "ldpiv": ldpiv, "z": m.tensor([1 + 2j, 3 - 4j]),
        "spec": m.ones(3, 5, dtype=m.complex64),
    }


# the generic argument lists, in the order they are tried (a string names an input of inputs(), ("L", a, b) is a
# Python list of inputs, a dict at the end holds keyword arguments; anything else is passed as it is)
CANDIDATES = [
    ("x",), ("x", "y"), ("x", 1), ("x", 0.5), ("x", 0), ("x", -1), ("sq",), ("sq", "sq"), ("v",), ("v", "w"),
    ("i",), ("i", "i"), ("iv",), ("x", "i"), ("x", 1, "i"), ("x", 0, "i"), ("x", 1, "i", "y"), ("x", 1, "iv"),
    ("x", "labels"), ("x", "mask"), ("x", "mask", 0.0), ("mask",), ("x", "y", "y"), ("x", "y", 0.5), ("x", 2, 3),
    ("x", [0, 1]), ("x", (3, 2)), ("x", 2), ("v", 2), ("v", "iv"), ("img",), ("img", "w4"), ("img", 2),
    ("img", 3), ("seq",), ("seq", "w3"), ("seq", 2), ("vol",), ("vol", 2), ("b", "b"), ("x", "v"), ("x", "row"),
    ("s",), ("s", "s"), (3,), (2, 3), ((2, 3),), (3, 3), (0, 5), (0, 5, 2), ("x", "y", "y", "y"), ("x", 0, 1),
    ("x", 1, 0, 2), ("x", 1, 1), ("x", (0,), (1,)), ("x", (3,)), ("x", 1, "i2"), ("x", 1, "i2", "y"),
    ("x", 1, "i2", 2.0), ("x", 1, "iv", "y"), ("x", "mask", "y"), ("b", "bt"), ("sq", "sq", "sq"),
    ("v", "sq", "v"), ("sq", "v", "w"), ("m34", "m42"), ("row", "col"), (2, "v"), ("x", (2, 2), (1, 2)),
    ("x", 2, 1), ("x", 1, 2), ("x", 2, 1, 2), ("x", "y", "v"), ("x", "y", "ones"), ("x", "i", "y"), (),
]

# rows the generic lists do not reach, or do not reach on their numpy path: argument lists of their own
SAMPLES = {
    "general_cosine": [(4, {"a": [0.5, 0.5]})], "stft": [("x", 2, {"hop_length": 1, "return_complex": False})],
    "istft": [("spec", 4, {"hop_length": 1})],
    "div": [("x", 2, {"rounding_mode": "floor"})], "divide": [("x", 2, {"rounding_mode": "trunc"})],
    "cat": [(("L", "x", "y"),)], "stack": [(("L", "x", "y"),)], "hstack": [(("L", "x", "y"),)],
    "vstack": [(("L", "x", "y"),)], "dstack": [(("L", "x", "y"),)], "column_stack": [(("L", "x", "y"),)],
    "row_stack": [(("L", "x", "y"),)], "concat": [(("L", "x", "y"),)], "concatenate": [(("L", "x", "y"),)],
    "multi_dot": [(("L", "sq", "sq"),)], "chain_matmul": [("sq", "sq")],
    "from_numpy": [(np.ones(3),)], "frombuffer": [(bytearray(b"abcd"), {"dtype": "uint8"})],
    "empty_strided": [((2, 2), (2, 1))], "new_empty_strided": [("x", (2, 2), (2, 1))], "new_full": [("x", (2,), 1.5)],
    "binomial": [("cnt", "x")], "polygamma": [(1, "x")], "addbmm": [("row", "b", "bt")], "baddbmm": [("bsq", "b", "bt")],
    "solve_triangular": [("sq", "sq", {"upper": True})], "householder_product": [("sq", "v")],
    "orgqr": [("sq", "v")], "ormqr": [("sq", "v", "sq")], "unravel_index": [("iv", (3,))],
    "nonzero_static": [("x", {"size": 2})], "put": [("x", "iv", "v")], "index_reduce": [("x", 1, "iv", "y", ("S", "prod"))],
    "scatter_reduce": [("x", 1, "i", "y", ("S", "sum"))], "index_put": [("x", ("L", "iv01"), "v")],
    "index_put_": [("x", ("L", "iv01"), "v")], "masked_scatter": [("x", "mask", "y")],
    "embedding": [("iv", "sq")], "bilinear": [("x", "x", "bsq")], "embedding_bag": [("ibag", "sq", "off")],
    "batch_norm": [("x", "v", "w", {"training": True}), ("x", "v", "w", "v", "w", True, 0.1, 1e-5, False)], "instance_norm": [("seq",), ("seq", "c2", "c2", "c2", "c2", True, 0.1, 1e-5, False)], "layer_norm": [("x", (3,))],
    "rms_norm": [("x", (3,))], "renorm": [("x", 2, 0, 1.0)], "poisson_nll_loss": [("x", "y"), ("x", "y", True, False, 1e-8, 1)],
    "cosine_embedding_loss": [("x", "y", "ones")], "ctc_loss": [("lp", "tgt", "il", "tl")],
    "affine_grid": [("theta", (1, 1, 2, 2), {"align_corners": False})],
    "grid_sample": [("img", "grid", {"align_corners": False})],
    "fractional_max_pool2d": [("img", 2, {"output_size": 2})],
    "fractional_max_pool3d": [("vol", 2, {"output_size": 1})],
    "fractional_max_pool2d_with_indices": [("img", 2, {"output_size": 2})],
    "fractional_max_pool3d_with_indices": [("vol", 2, {"output_size": 1})],
    "lp_pool2d": [("img", 2, 2)], "lp_pool3d": [("vol", 2, 2)], "conv3d": [("vol", "k3")],
    "conv_transpose1d": [("seq", "kt1")], "conv_transpose2d": [("img", "kt2")], "conv_transpose3d": [("vol", "kt3")],
    "fold": [("x", (1, 3), (1, 1))], "unfold": [("x", 1, 2, 1)], "as_strided": [("x", (2, 2), (1, 2))],
    "as_strided_": [("x", (2, 2), (1, 2))], "as_strided_scatter": [("x", "s22", (2, 2), (1, 2))],
    "as_strided_copy": [("x", (2, 2), (1, 2))], "unflatten": [("x", 1, (3, 1))], "dsplit": [("b", 2)],
    "select_scatter": [("x", "v", 0, 0)], "split_with_sizes": [("x", [1, 2], 1)],
    "unsafe_split_with_sizes": [("x", [1, 2], 1)], "split_with_sizes_copy": [("x", [1, 2], 1)],
    "narrow_copy": [("x", 1, 0, 2)], "expand_copy": [("v", (2, 3))], "select_copy": [("x", 0, 1)],
    "transpose_copy": [("x", 0, 1)], "unfold_copy": [("x", 1, 2, 1)], "index_fill": [("x", 1, "iv", 2.0)],
    "index_copy": [("x", 1, "iv", "sq")], "index_add": [("x", 1, "iv", "sq")], "addmv_": [("v", "sq", "v")],
    "apply_": [("x", abs)], "map_": [("x", "y", max)], "map2_": [("x", "y", "y", lambda a, b, c: a)],
    "__format__": [("s", ("S", ".2f"))], "__deepcopy__": [("x", ("V", {}))], "broadcast_to": [("x", (2, 2, 3))], "pixel_shuffle": [("img", 1)],
    "max_unpool1d": [("u1", "upos1", 2)], "max_unpool2d": [("img", "upos2", 1)],
    "max_unpool3d": [("vol", "upos3", 1)], "conv_tbc": [("tbc", "ktbc", "v")],
    "multi_head_attention_forward": [("mq", "mq", "mq", 4, 2, "inw", "inb", None, None, False, 0.0, "outw", "outb")],
    "finfo": [(("D", "float32"),)], "iinfo": [(("D", "int32"),)], "promote_types": [(("D", "int32"), ("D", "float32"))],
    "can_cast": [(("D", "int32"), ("D", "float32"))], "device": [(("S", "cpu"),)], "retain_grad": [("xg",)],
    "register_hook": [("xg", abs)], "register_post_accumulate_grad_hook": [("xg", abs)], "backward": [("xg", "x")],
    "__index__": [("one",)], "cuda": [], "pin_memory": [], "imag": [("z",)],
    "view_as_real": [("z",)], "view_as_complex": [("s22",)],
    "lu_solve": [("lu", "piv", "sq"), ("sq", "lu", "piv")],
    "manual_seed": [(0,)], "seed": [()], "set_rng_state": [("rng",)], "set_num_threads": [("threads",)],
    "set_num_interop_threads": [("interop",)], "use_deterministic_algorithms": [(False,)],
    "set_deterministic_debug_mode": [(0,)], "set_float32_matmul_precision": [(("S", "highest"),)],
    "set_warn_always": [(False,)], "set_default_tensor_type": [(("S", "torch.FloatTensor"),)],
    "set_default_dtype": [(("D", "float32"),)], "set_default_device": [(("S", "cpu"),)], "set_printoptions": [()],
    "set_anomaly_enabled": [(False,)], "autocast": [(("S", "cpu"),)], "get_autocast_dtype": [(("S", "cpu"),)],
    "set_autocast_enabled": [(False,)], "set_autocast_cpu_enabled": [(False,)],
    "set_autocast_dtype": [(("S", "cpu"), ("D", "bfloat16"))], "set_autocast_cpu_dtype": [(("D", "bfloat16"),)],
    "set_autocast_gpu_dtype": [(("D", "float16"),)], "set_autocast_cache_enabled": [(True,)], "set_grad_enabled": [(True,)], "compile": [(abs,)], "vmap": [(abs,)], "lu_unpack": [("lu", "piv")], "ldl_solve": [("ld", "ldpiv", "sq")],
}


def _list(m, names, env):
    args, kwargs = [], {}
    for n in names:
        if isinstance(n, str):
            args.append(env[n])
        elif isinstance(n, tuple) and n and n[0] == "L":
            args.append([env[k] for k in n[1:]])
        elif isinstance(n, tuple) and n and n[0] == "S":          # a string argument
            args.append(n[1])
        elif isinstance(n, tuple) and n and n[0] == "V":          # a value (a dict, say): a fresh copy per call,
            args.append(copy.copy(n[1]))                         # or deepcopy's memo kept old ids' copies
        elif isinstance(n, tuple) and n and n[0] == "D":          # a dtype
            args.append(getattr(m, n[1]))
        elif isinstance(n, dict) and n is names[-1]:
            kwargs = {k: getattr(m, v) if k == "dtype" else v for k, v in n.items()}
        else:
            args.append(n)
    return args, kwargs


def sample_lists(m, row):
    """The argument lists to try for a row, in order, as (names, args, kwargs) on fresh inputs of engine m:
    SAMPLES[row name], then the generic CANDIDATES (unless the row is SAMPLES_ONLY); a list that cannot be built
    (an input this engine lacks) is skipped. This driver and tests/vmap_driver.py find a row's call with it."""
    for names in SAMPLES.get(row.name, []) + ([] if row.name in SAMPLES_ONLY else CANDIDATES):
        try:
            args, kwargs = _list(m, names, inputs(m))
        except Exception:
            continue
        yield names, args, kwargs


def _call(fn, args, kwargs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            out = fn(*args, **(kwargs or {}))
    if hasattr(out, "__next__"):            # a generator (Tensor.__iter__): run it
        out = list(out)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="dyngrad")
    parser.add_argument("--report", required=True)
    opts = parser.parse_args()
    m = importlib.import_module(opts.engine)
    bridge = importlib.import_module(f"{opts.engine}._api.bridge")
    from dyngrad._api.table import rows
    count = [0]
    used = set()

    def counted(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            count[0] += 1
            used.add(fn.__name__)
            return fn(*a, **k)
        return wrapper
    for name in CROSSINGS:
        setattr(bridge, name, counted(getattr(bridge, name)))

    spaces = {"fn": m, "F": m.nn.functional, "special": m.special, "linalg": m.linalg, "masked": m.masked,
              "fft": m.fft, "windows": m.signal.windows}
    report = {}
    for index, row in enumerate(rows()):
        entry = {"called": False, "crossed": False, "how": None, "functions": []}
        report[index] = entry
        places = []
        for kind in row.kinds:
            if kind in spaces:
                places.append((kind, getattr(spaces[kind], row.name, None), False))
            elif kind in ("method", "op"):
                places.append((kind, getattr(m.Tensor, row.name, None), True))
            elif kind == "prop":
                places.append((kind, (lambda p: (lambda self: getattr(self, p)))(row.name), True))
        for kind, fn, _ in places:
            if fn is None or not callable(fn):
                continue
            for names, args, kwargs in sample_lists(m, row):
                count[0] = 0
                used.clear()
                try:
                    _call(fn, args, kwargs)
                except Exception:
                    continue
                entry["called"] = True
                entry["crossed"] = entry["crossed"] or count[0] > 0
                entry["how"] = entry["how"] or f"{kind} {names!r}"
                entry["functions"] = sorted(set(entry["functions"]) | used)
                break
    with open(opts.report, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()

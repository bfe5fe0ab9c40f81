"""Shows the results: a text table (values per unit and speed-up ratios), a JSON file and, with matplotlib, a PNG."""
import json
import os

from .engines import NUMPY

COLUMNS = ("dyngrad", "reference", "pytorch", NUMPY)
SHORT = {"reference": "ref", "pytorch": "torch", NUMPY: "numpy"}
# One colour per engine, the same in every chart (matplotlib's colour cycle gave orange to numpy in a run without
# PyTorch and to PyTorch in the next); a hollow single-call bar keeps its engine's colour as outline and hatch.
CHART_COLOURS = {"dyngrad": "#555555", "reference": "#2ca02c", "pytorch": "#ee4c2c", NUMPY: "#4d77cf"}

# how a seconds-per-unit figure is shown in each unit; throughputs are inverted (units are flops or bytes)
_SCALE = {"us/op": 1e6, "us/graph": 1e6, "ms/step": 1e3, "ms/seq": 1e3, "ms/tree": 1e3, "s": 1.0}
_THROUGHPUT = {"GFLOPS": 1e-9, "GB/s": 1e-9}


def display_value(unit, per_unit_s):
    if unit in _THROUGHPUT:
        return _THROUGHPUT[unit] / per_unit_s
    return per_unit_s * _SCALE[unit]


def _number(x):
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _ratio(x):
    return f"{x:.0f}x" if x >= 100 else f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def _cell(result, name, notes):
    """The table cell of one engine on one workload, adding a numbered note for anything unusual."""
    record = result["runs"].get(name)
    if record is None:
        return "-"

    def note(text):
        notes.append(f"{result['name']}, {name}: {text}")
        return f"[{len(notes)}]"

    if "error" in record:
        return "error" + note(record["error"])
    if "skipped" in record:
        return "skipped" + note(f"skipped, {record['skipped']}")
    text = _number(display_value(result["unit"], record["per_unit_s"]))
    if record.get("check_ok") is False:
        text += " MISMATCH" + note(f"results differ from dyngrad's: {record['check']}")
    elif len(record["seconds"]) == 1:
        text += "*"
    return text


def table(results, engines, info):
    """The printed table: one row per workload; values in the row's unit; ratios > 1 mean dyngrad is faster."""
    columns = [c for c in COLUMNS if c in engines or (c == NUMPY and any(NUMPY in r["runs"] for r in results))]
    others = [c for c in columns if c != "dyngrad"] if "dyngrad" in columns else []
    header = ["workload", "unit", *columns, *[f"{SHORT[c]}/dg" for c in others]]
    rows, notes = [], []
    for result in results:
        cells = [result["name"], result["unit"], *[_cell(result, c, notes) for c in columns]]
        for c in others:
            ratio = result["ratios_vs_dyngrad"].get(c)
            cells.append((_ratio(ratio) + ("*" if c in result.get("single_call_ratios", ()) else "")) if ratio else "-")
        rows.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [_title(info), "", line(header), line(["-" * w for w in widths]), *map(line, rows), ""]
    out.append("Values are medians per unit (us/op, ms/step, ...; GFLOPS and GB/s are throughputs). Ratios are "
               "time per unit of that engine / dyngrad's: > 1 means dyngrad is faster.")
    out.append("numpy: the same work written by hand with numpy arrays (no autograd). "
               "* = a single timed call (slow engine, reduced repeats, or --quick); a ratio marked * rests on one and is not "
               "a measurement.")
    out += [_per_call(r, columns) for r in results if r["unit"] in _THROUGHPUT]
    if info.get("digits"):
        out.append(f"mlp-train data: {info['digits']}.")
    load = info.get("load_average")
    if load and info.get("cores") and load[0] > 0.75 * info["cores"]:
        out.append(f"WARNING: the machine was busy (load {load[0]:.1f} on {info['cores']} cores at the start): "
                   "multithreaded kernels (gemm, elementwise, BLAS in mlp-train) wait for cores and are unreliable.")
    out += [f"[{i}] {text}" for i, text in enumerate(notes, 1)]
    return "\n".join(out)


def _per_call(result, columns):
    """Milliseconds per call, for rows shown as throughputs (issue 2 quotes the gemm and elementwise times)."""
    size = ", ".join(f"{k}={v:,}" for k, v in result["size"].items())
    times = [f"{c} {result['runs'][c]['median_s'] * 1e3:.1f} ms" for c in columns
             if "median_s" in result["runs"].get(c, {})]
    return f"{result['name']} ({size}), one forward + backward: {', '.join(times)}."


def _title(info):
    torch = f", torch {info['torch']} ({info['torch_threads']} threads)" if info.get("torch") else ""
    load = info.get("load_average")
    load = f", load {load[0]:.1f}" if load else ""
    return (f"dyngrad bench ({info['mode']}), {info['date']}: {info['cpu']}, {info['cores']} cores, "
            f"Python {info['python']}, numpy {info['numpy']}{torch}{load}")


def write_json(path, results, info):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"machine": info, "results": results}, f, indent=1, default=_plain)
        f.write("\n")


def _plain(obj):
    """numpy scalars in sizes and records -> plain Python numbers for JSON."""
    return obj.item() if hasattr(obj, "item") else str(obj)


def write_png(path, results, info):
    """A bar chart of the ratios (log scale). Returns False when matplotlib is not installed."""
    fig = chart(results, info)
    if fig is None:
        return False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    fig.clear()
    return True


def chart(results, info):
    """The matplotlib Figure of write_png (None without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        return None
    names = [r["name"] for r in results]
    others = [c for c in COLUMNS[1:] if any(c in r["ratios_vs_dyngrad"] for r in results)]
    fig = Figure(figsize=(9, 0.45 * len(names) * max(len(others), 1) + 1.6))     # no pyplot: no global state
    ax = fig.add_subplot()
    height = 0.8 / max(len(others), 1)
    for k, other in enumerate(others):
        ys = [i + k * height for i in range(len(names))]
        values = [r["ratios_vs_dyngrad"].get(other, 1.0) for r in results]
        single = [other in r.get("single_call_ratios", ()) for r in results]
        # bars grow from 1 (parity): rightwards where dyngrad is faster, leftwards where it is slower; a ratio from a
        # single timed call is drawn hollow and labelled with a *, so that it does not read as a measurement
        colour = CHART_COLOURS[other]
        bars = ax.barh(ys, [v - 1.0 for v in values], left=1.0, height=height, color=colour, edgecolor=colour,
                       label=f"{other} time / dyngrad time")
        for bar, one in zip(bars, single):
            if one:
                bar.set_fill(False)          # outline and hatch are drawn in the edge colour: the engine's
                bar.set_hatch("//")
        ax.bar_label(bars, labels=[_ratio(r["ratios_vs_dyngrad"][other]) + ("*" if one else "")
                                   if other in r["ratios_vs_dyngrad"] else "" for r, one in zip(results, single)],
                     fontsize=7, padding=2)
    ax.set_yticks([i + height * (len(others) - 1) / 2 for i in range(len(names))], names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color=CHART_COLOURS["dyngrad"], linewidth=0.8)
    ax.set_xlabel("ratio (> 1: dyngrad is faster)" + ("; hollow bars, *: a single timed call, not a measurement"
                                                        if any(r.get("single_call_ratios") for r in results) else ""))
    ax.set_title(f"dyngrad bench ({info['mode']}), {info['date'][:10]}, {info['cpu']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig

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
    compared = comparison_table(comparison(results, info))
    if compared:
        out += ["", compared]
    return "\n".join(out)


# ---- issue 20's dynamic-vs-static comparison: rows "<w>-eager" (or "<w>"), "<w>-verified", "<w>-static" ----------
_COMPARED = (("eager", "dyngrad eager"), ("verified", "verified replay"), ("static", "static replay"),
             ("torch_eager", "torch eager"), ("torch_compile", "torch.compile"))
# the ratios drawn and printed: (key, numerator, denominator); > 1: the denominator's engine is faster
_COMPARISON_RATIOS = (("eager/static", "eager", "static"), ("eager/verified", "eager", "verified"),
                      ("torch eager/static", "torch_eager", "static"),
                      ("torch eager/verified", "torch_eager", "verified"),
                      ("torch.compile/static", "torch_compile", "static"))


def comparison(results, info=None):
    """Per workload that has a static-replay row: seconds per unit of dyngrad eager, verified and static replay,
    PyTorch eager (the eager row's torch column) and torch.compile (the static row's torch column, when the run
    compiled it: DYNGRAD_BENCH_TORCH_COMPILE=1), and their ratios."""
    by_name = {r["name"]: r for r in results}
    torch_compiled = bool((info or {}).get("torch_compile"))
    rows = []
    for r in results:
        if not r["name"].endswith("-static"):
            continue
        base = r["name"][:-len("-static")]
        eager, verified = by_name.get(base + "-eager") or by_name.get(base), by_name.get(base + "-verified")

        def per_unit(result, engine):
            return ((result or {}).get("runs", {}).get(engine) or {}).get("per_unit_s")

        row = {"workload": base, "unit": r["unit"], "threads": r.get("threads"),
               "eager": per_unit(eager, "dyngrad"), "verified": per_unit(verified, "dyngrad"),
               "static": per_unit(r, "dyngrad"), "torch_eager": per_unit(eager, "pytorch"),
               "torch_compile": per_unit(r, "pytorch") if torch_compiled else None}
        row["ratios"] = {key: row[a] / row[b] for key, a, b in _COMPARISON_RATIOS if row[a] and row[b]}
        rows.append(row)
    return rows


def comparison_table(rows):
    """The comparison as text (empty without compiled rows)."""
    if not rows:
        return ""
    header = ["workload", "unit", *[title for _, title in _COMPARED], *[key for key, _, _ in _COMPARISON_RATIOS]]
    lines = []
    for row in rows:
        cells = [row["workload"], row["unit"]]
        cells += [_number(display_value(row["unit"], row[k])) if row[k] else "-" for k, _ in _COMPARED]
        cells += [_ratio(row["ratios"][key]) if key in row["ratios"] else "-" for key, _, _ in _COMPARISON_RATIOS]
        lines.append(cells)
    widths = [max(len(str(c[i])) for c in [header, *lines]) for i in range(len(header))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join(["Dynamic against static graphs (dyngrad.compile, issue 20): the same step eagerly, under "
                      "verified replay (mode='verified') and static replay (mode='reduce-overhead'); ratios > 1 mean "
                      "the replay (right of the slash) is faster. Compile time (the recording call) is excluded.",
                      line(header), line(["-" * w for w in widths]), *map(line, lines)])


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
        json.dump({"machine": info, "results": results, "compile_comparison": comparison(results, info)}, f,
                  indent=1, default=_plain)
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
    compared = comparison(results, info)
    main_height = 0.45 * len(names) * max(len(others), 1) + 1.6
    extra = 0.3 * len(compared) * len(_COMPARISON_RATIOS) + 1.6 if compared else 0
    fig = Figure(figsize=(9, main_height + extra))     # no pyplot: no global state
    if compared:
        ax, ax2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [main_height, extra]})
        _comparison_axes(ax2, compared)
    else:
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


_COMPARISON_COLOURS = ("#555555", "#999999", "#ee4c2c", "#f4a582", "#8c2d04")


def _comparison_axes(ax, rows):
    """The comparison's ratios per workload (log scale, bars from 1: right where the replay is faster)."""
    keys = [key for key, _, _ in _COMPARISON_RATIOS if any(key in row["ratios"] for row in rows)]
    height = 0.8 / max(len(keys), 1)
    for k, key in enumerate(keys):
        ys = [i + k * height for i in range(len(rows))]
        values = [row["ratios"].get(key, 1.0) for row in rows]
        bars = ax.barh(ys, [v - 1.0 for v in values], left=1.0, height=height, color=_COMPARISON_COLOURS[k], label=key)
        ax.bar_label(bars, labels=[_ratio(row["ratios"][key]) if key in row["ratios"] else "" for row in rows],
                     fontsize=7, padding=2)
    ax.set_yticks([i + height * (len(keys) - 1) / 2 for i in range(len(rows))], [row["workload"] for row in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="#555555", linewidth=0.8)
    ax.set_xlabel("time ratio (> 1: the replay on the right of the slash is faster)")
    ax.set_title("dynamic against static graphs (dyngrad.compile)", fontsize=9)
    ax.legend(fontsize=7)

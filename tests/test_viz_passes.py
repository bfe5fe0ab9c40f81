"""The loop graph drawn per pass (issue 25: it was a 1237 x 5083 px strip): to_dot groups the ops of each loop pass
into a Graphviz cluster (Note [Loop passes] in python/dyngrad/viz/dot.py), and collapse_chains=k keeps the first
and last pass of a longer loop around one summary node that counts the rest."""
import re

import pytest

from test_viz import parse_dot

CLUSTER = re.compile(r'^\s+subgraph cluster_pass(\d+) \{ label="pass (\d+)";.*?((?:\w+; )+)\}$')


def parse_clusters(src):
    """{pass number: [node ids]} of the clusters in a DOT source."""
    clusters = {}
    for line in src.splitlines():
        if line.strip().startswith("subgraph"):
            m = CLUSTER.match(line)
            assert m and m.group(1) == m.group(2), line
            ids = [part.strip() for part in m.group(3).split(";") if part.strip()]
            clusters[int(m.group(1))] = [i for i in ids if not i.isdigit()]
    return clusters


def cube_root_loop(dg, passes):
    """examples/loop_graph.py's loop: x <- x - lr * (x^3 - a); the first pass records fewer ops (x is constant)."""
    a = dg.tensor(2.0, dtype=dg.float64, requires_grad=True)
    lr = dg.tensor(0.05, dtype=dg.float64, requires_grad=True)
    x = dg.tensor(1.0, dtype=dg.float64)
    for _ in range(passes):
        step = lr * (x * x * x - a)
        x = x - step
    return x


def rnn_loop(dg, steps):
    w = dg.ones(3, 3, requires_grad=True)
    xs = dg.ones(steps, 3, requires_grad=True)
    h = dg.zeros(3)
    for t in range(steps):
        h = dg.tanh(h @ w + xs[t])
    return h.sum()


def _labels(nodes, ids):
    return [nodes[i]["label"].split("\n")[0] for i in ids]


def test_a_cluster_per_pass(dg):
    src = dg.viz.to_dot(cube_root_loop(dg, 12))
    nodes, _ = parse_dot(src)
    clusters = parse_clusters(src)
    assert sorted(clusters) == list(range(1, 13))
    assert sorted(_labels(nodes, clusters[1])) == ["MulBackward", "SubBackward", "SubBackward"]
    for k in range(2, 13):                      # x*x, *x, - a, lr *, x - step
        assert sorted(_labels(nodes, clusters[k])) == ["MulBackward"] * 3 + ["SubBackward"] * 2
    grouped = {i for ids in clusters.values() for i in ids}
    assert all(nodes[i]["fillcolor"] == "lightgrey" for i in grouped)          # ops only, no leaves


def test_passes_follow_creation_order(dg):
    """Pass i holds the ops of the i-th step: an RNN's step t reads xs[t] (SelectBackward)."""
    src = dg.viz.to_dot(rnn_loop(dg, 6))
    nodes, edges = parse_dot(src)
    clusters = parse_clusters(src)
    assert sorted(clusters) == list(range(1, 7))
    producer_of = {}
    for s, d, _ in edges:
        producer_of.setdefault(d, []).append(s)
    for k, ids in clusters.items():
        assert sorted(_labels(nodes, ids))[-1] == "TanhBackward"
        tanh = [i for i in ids if nodes[i]["label"].startswith("TanhBackward")]
        assert len(tanh) == 1
        # the next pass's tanh consumes (through mm and add) this pass's tanh
        if k + 1 in clusters:
            later = {i for i in clusters[k + 1]}
            reached = set()
            frontier = [i for i in later]
            while frontier:
                cur = frontier.pop()
                for p in producer_of.get(cur, []):
                    if p not in reached:
                        reached.add(p)
                        frontier.append(p)
            assert tanh[0] in reached


def test_passes_can_be_turned_off_and_chains_are_not_loops(dg):
    assert parse_clusters(dg.viz.to_dot(cube_root_loop(dg, 5), passes=False)) == {}
    y = dg.ones(1, requires_grad=True)
    for _ in range(20):
        y = y * 1.5                               # a loop of one op a pass: a chain, for collapse_chains
    assert parse_clusters(dg.viz.to_dot(y)) == {}
    x = dg.ones(2, requires_grad=True)
    assert parse_clusters(dg.viz.to_dot((x * 2).sum())) == {}        # no loop at all


def test_collapse_chains_summarises_a_long_loop(dg):
    full_src = dg.viz.to_dot(cube_root_loop(dg, 18))
    src = dg.viz.to_dot(cube_root_loop(dg, 18), collapse_chains=4)
    full, _ = parse_dot(full_src)
    nodes, edges = parse_dot(src)
    assert len(nodes) < len(full) // 3                 # collapse_chains changes the loop graph
    assert sorted(parse_clusters(src)) == [1, 18]      # first and last pass kept whole
    [summary] = [n["label"] for n in nodes.values() if n["fillcolor"] == "lightyellow"]
    assert summary == "passes 2-17 collapsed (16 passes, 80 nodes)\nMulBackward x48, SubBackward x32"
    assert len(edges) == len({(s, d) for s, d, _ in edges})
    # a loop no longer than k passes is left as it is
    assert sorted(parse_clusters(dg.viz.to_dot(cube_root_loop(dg, 4), collapse_chains=4))) == [1, 2, 3, 4]


@pytest.mark.skipif(not __import__("shutil").which("dot"), reason="needs Graphviz's dot")
def test_the_loop_graph_is_drawn_wide_not_as_a_strip(dg, tmp_path):
    """The picture of a 18-pass loop, collapsed, is no longer a strip thousands of pixels tall."""
    path = dg.viz.render(cube_root_loop(dg, 18), path=str(tmp_path / "loop.svg"), collapse_chains=4)
    svg = open(path).read()
    height = float(re.search(r'<svg[^>]*height="([\d.]+)pt"', svg).group(1))
    assert height < 1200 and "pass 1" in svg and "pass 18" in svg

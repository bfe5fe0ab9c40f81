"""A recursive network over expression trees: Python recursion builds a different graph for every tree.

    python examples/tree_net.py [--engine reference] [--smoke]

Task (synthetic, seeded): random arithmetic trees such as ((3 - 1) + (4 - (2 + 0))) over the digits 0..4 with
+ and -, of depth 1 to 4; predict the sign of the value (negative, zero or positive). A leaf's vector is an
embedding of its digit; an inner node's vector is tanh(W_op [left; right] + b_op), one weight per operator
(a TreeRNN); a linear head classifies the root vector. Each tree gives a graph shaped like the tree itself: after
training, the graphs of two test trees and their diff are printed (and written as DOT/SVG and a TensorBoard log
under --plot-dir).
"""
import time

import numpy as np

from _common import parse_args, progress, set_postfix, save_plot, log, show_graphs


def random_tree(rng, depth):
    if depth == 0 or (depth < 3 and rng.random() < 0.3):
        return int(rng.integers(0, 5))
    return ("+" if rng.random() < 0.5 else "-", random_tree(rng, depth - 1), random_tree(rng, depth - 1))


def value(tree):
    if isinstance(tree, int):
        return tree
    op, left, right = tree
    return value(left) + value(right) if op == "+" else value(left) - value(right)


def show(tree):
    if isinstance(tree, int):
        return str(tree)
    return f"({show(tree[1])} {tree[0]} {show(tree[2])})"


def make_data(n, rng):
    trees = [random_tree(rng, int(rng.integers(1, 5))) for _ in range(n)]
    labels = np.array([int(np.sign(value(t))) + 1 for t in trees])   # 0: negative, 1: zero, 2: positive
    return trees, labels


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--epochs", type=int, default=20))
    dg = args.dg
    nn = dg.nn
    rng = np.random.default_rng(args.seed)
    n_train, n_test = (48, 24) if args.smoke else (1500, 400)
    train_x, train_y = make_data(n_train, rng)
    test_x, test_y = make_data(n_test, rng)
    dim = 32

    class TreeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf = nn.Embedding(5, dim)
            self.combine = nn.ModuleDict({"+": nn.Linear(2 * dim, dim), "-": nn.Linear(2 * dim, dim)})
            self.head = nn.Linear(dim, 3)

        def encode(self, tree):
            if isinstance(tree, int):
                return self.leaf(dg.tensor([tree]))[0]
            op, left, right = tree
            children = dg.cat([self.encode(left), self.encode(right)])    # recursion = graph construction
            return dg.tanh(self.combine[op](children))

        def forward(self, trees):
            return self.head(dg.stack([self.encode(t) for t in trees]))

    model = TreeNet()
    opt = dg.optim.Adam(model.parameters(), lr=5e-3)
    epochs = 1 if args.smoke else args.epochs
    batch = 25
    accs = []
    start = time.perf_counter()
    bar = progress(range(epochs), desc=f"tree_net ({args.engine})", enabled=not args.smoke)
    for epoch in bar:
        order = rng.permutation(n_train)
        total = 0.0
        for i in range(0, n_train, batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model([train_x[j] for j in idx]), dg.tensor(train_y[idx]))
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        with dg.no_grad():
            pred = model(test_x).argmax(dim=1).numpy()
        accs.append(float((pred == test_y).mean()))
        set_postfix(bar, loss=total / n_train, test_acc=accs[-1])
        log(bar, f"epoch {epoch + 1:3d}  train loss {total / n_train:.4f}  test accuracy {accs[-1]:.2%}")
    majority = max(np.mean(test_y == c) for c in range(3))
    print(f"final test accuracy {accs[-1]:.2%} (majority class {majority:.2%}), "
          f"{time.perf_counter() - start:.1f} s on the {args.engine} engine")
    with dg.no_grad():
        for tree in test_x[:3]:
            probs = nn.functional.softmax(model([tree]), dim=1)[0].tolist()
            print(f"  {show(tree)} = {value(tree)}: P(neg, zero, pos) = {[round(p, 3) for p in probs]}")
    # the graph is the tree: two trees of different shapes record two different graphs
    shallow, deep = min(test_x, key=lambda t: len(show(t))), max(test_x, key=lambda t: len(show(t)))
    outputs = [nn.functional.cross_entropy(model([t]), dg.tensor([int(np.sign(value(t))) + 1]))
               for t in (shallow, deep)]
    show_graphs(args, "tree_net", outputs, [show(shallow), show(deep)], params=model)
    save_plot(args, "tree_net.png", lambda plt: (
        plt.plot(range(1, epochs + 1), accs, marker="o"), plt.xlabel("epoch"), plt.ylabel("test accuracy"),
        plt.title("TreeRNN on expression signs")))


if __name__ == "__main__":
    main()

"""A multilayer perceptron on scikit-learn's 8x8 digits: 64 -> 128 -> 64 -> 10, Adam, >= 95% test accuracy.

    python examples/digits_mlp.py [--engine reference] [--smoke]
"""
from _common import parse_args
from _digits import load_digits_split, train_classifier


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--epochs", type=int, default=30))
    nn = args.dg.nn
    x_train, y_train, x_test, y_test = load_digits_split(args.smoke, args.seed)
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )
    print(model)
    epochs = 1 if args.smoke else args.epochs
    accuracy = train_classifier(args, model, x_train, y_train, x_test, y_test, epochs, lr=3e-3, name="digits_mlp")
    if not args.smoke and accuracy < 0.95:
        raise SystemExit(f"test accuracy {accuracy:.2%} is below the 95% target")


if __name__ == "__main__":
    main()

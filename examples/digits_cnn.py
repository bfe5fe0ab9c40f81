"""A small convolutional network on scikit-learn's 8x8 digits: two conv + max-pool blocks, >= 95% test accuracy.

    python examples/digits_cnn.py [--engine reference] [--smoke]
"""
from _common import parse_args
from _digits import load_digits_split, train_classifier


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--epochs", type=int, default=15))
    nn = args.dg.nn
    x_train, y_train, x_test, y_test = load_digits_split(args.smoke, args.seed)
    x_train, x_test = x_train[:, None], x_test[:, None]          # (N, 1, 8, 8): one input channel
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # -> (16, 4, 4)
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # -> (32, 2, 2)
        nn.Flatten(),
        nn.Linear(128, 64), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(64, 10),
    )
    print(model)
    epochs = 1 if args.smoke else args.epochs
    accuracy = train_classifier(args, model, x_train, y_train, x_test, y_test, epochs, lr=3e-3, name="digits_cnn")
    if not args.smoke and accuracy < 0.95:
        raise SystemExit(f"test accuracy {accuracy:.2%} is below the 95% target")


if __name__ == "__main__":
    main()

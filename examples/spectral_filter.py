"""Learn a filter in the frequency domain: a 1-D Fourier layer y = irfft(W * rfft(x)) with one complex weight per
frequency, trained with Adam to imitate an unknown filter from input/output pairs.

    python examples/spectral_filter.py [--engine reference] [--smoke]

Data: white-noise signals x of n points and their outputs under a hidden filter H, a low-pass (gain 1 up to a
cutoff, falling smoothly to 0) followed by a delay of 3 samples (a phase of -2 pi k 3 / n at frequency k), plus a
little noise. The model's weights W = complex(re, im) start at 1 (the identity); the loss is the mean squared error
of the real outputs, so its gradient reaches re and im through irfft, the complex product and rfft. After
training, W must match H (gain and phase) within 0.05 at every frequency. When PyTorch is installed, the first
step's gradient is compared with torch.fft's (printed as OK / MISMATCH).
"""
import numpy as np

from _common import parse_args, save_plot

DELAY = 3


def hidden_filter(n):
    """H at the n // 2 + 1 frequencies of an n-point real signal: a smooth low-pass times a delay of DELAY."""
    k = np.arange(n // 2 + 1)
    cutoff = n // 8
    gain = 1.0 / (1.0 + (k / cutoff) ** 8)
    return gain * np.exp(-2j * np.pi * k * DELAY / n)


def make_data(rng, batch, n):
    x = rng.standard_normal((batch, n))
    y = np.fft.irfft(np.fft.rfft(x) * hidden_filter(n), n=n) + 0.01 * rng.standard_normal((batch, n))
    return x, y


def loss_and_weights(lib, re, im, x, y, n):
    w = lib.complex(re, im)
    out = lib.fft.irfft(lib.fft.rfft(x) * w, n=n)
    return ((out - y) ** 2).mean(), w


def first_gradient(lib, x_np, y_np, n):
    re = lib.ones(n // 2 + 1, dtype=lib.float64, requires_grad=True)
    im = lib.zeros(n // 2 + 1, dtype=lib.float64, requires_grad=True)
    loss, _ = loss_and_weights(lib, re, im, lib.tensor(x_np), lib.tensor(y_np), n)
    loss.backward()
    return np.concatenate([re.grad.numpy(), im.grad.numpy()])


def main():
    args = parse_args(__doc__.splitlines()[0])
    dg = args.dg
    rng = np.random.default_rng(args.seed)
    n = 32 if args.smoke else 128
    batch = 16 if args.smoke else 64
    steps = 300 if args.smoke else 1500
    x_np, y_np = make_data(rng, batch, n)
    x, y = dg.tensor(x_np), dg.tensor(y_np)

    re = dg.nn.Parameter(dg.ones(n // 2 + 1, dtype=dg.float64))
    im = dg.nn.Parameter(dg.zeros(n // 2 + 1, dtype=dg.float64))
    opt = dg.optim.Adam([re, im], lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss, w = loss_and_weights(dg, re, im, x, y, n)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    learnt = w.detach().numpy()
    error = np.abs(learnt - hidden_filter(n)).max()
    print(f"{args.engine}: {steps} Adam steps, mse {losses[0]:.3e} -> {losses[-1]:.3e} (noise variance "
          f"{0.01 ** 2:.1e}); largest |W - H| over the {n // 2 + 1} frequencies {error:.3f}")
    if error > 0.05:
        raise SystemExit(f"the learnt filter misses the hidden one by {error:.3f} (expected <= 0.05)")

    try:
        import torch
    except ImportError:
        print("(PyTorch is not installed: no comparison)")
    else:
        ours, theirs = first_gradient(dg, x_np, y_np, n), first_gradient(torch, x_np, y_np, n)
        diff = float(np.abs(ours - theirs).max())
        status = "OK" if diff < 1e-10 else "MISMATCH"
        print(f"first gradient against torch.fft: largest difference {diff:.1e} {status}")
        if status != "OK":
            raise SystemExit("dyngrad's FFT gradients do not follow torch's")

    def draw(plt):
        k = np.arange(n // 2 + 1)
        plt.plot(k, np.abs(hidden_filter(n)), label="|H| (hidden)")
        plt.plot(k, np.abs(learnt), "--", label="|W| (learnt)")
        plt.xlabel("frequency")
        plt.legend()
        plt.title("a spectral filter learnt from input/output pairs")
    save_plot(args, "spectral_filter.png", draw)


if __name__ == "__main__":
    main()

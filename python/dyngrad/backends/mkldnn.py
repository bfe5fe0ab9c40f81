"""torch.backends.mkldnn: dyngrad's kernels do not use oneDNN."""
enabled = True


def is_available():
    return False

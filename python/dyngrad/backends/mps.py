"""torch.backends.mps: no Metal (MPS) backend here."""


def is_available():
    return False


def is_built():
    return False

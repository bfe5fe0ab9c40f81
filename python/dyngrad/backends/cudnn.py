"""torch.backends.cudnn: no cuDNN here. The flags are plain attributes with torch's defaults (setting them, as
training scripts do, changes nothing)."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None

"""dyngrad.amp (torch.amp): autocast and GradScaler on the CPU (Note [Autocast] in python/dyngrad/_api/autocast.py).

    scaler = dg.amp.GradScaler("cpu")
    with dg.autocast("cpu"):                    # bfloat16 where torch's CPU autocast computes in it
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "GradScaler"]

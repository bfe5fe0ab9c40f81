"""dyngrad.utils.tensorboard: PyTorch's SummaryWriter at PyTorch's module path, backed by tensorboardX.

    from dyngrad.utils.tensorboard import SummaryWriter
    with SummaryWriter("runs/exp1") as writer:
        writer.add_graph(model, x)                    # the graph that x builds: no tracing needed
        writer.add_scalar("loss", loss, step)         # numbers, 0-d tensors
        writer.add_histogram("fc.weight", model.fc.weight, step)
        writer.add_image("input", x[0], step)         # CHW by default
    # tensorboard --logdir runs

Tensors are handed to tensorboardX as numpy arrays. add_graph runs the model once on the input and writes the
graph that this call recorded (dyngrad.viz.add_graph): PyTorch's add_graph needs torch.jit.trace and a static
graph; a define-by-run graph is simply there. Needs tensorboardX (pip install tensorboardX).
"""
try:
    import tensorboardX as _tbx
except ImportError:
    raise ImportError("dyngrad.utils.tensorboard needs tensorboardX, which is not installed: pip install "
                      "tensorboardX (or pip install 'dyngrad[viz]').") from None

import contextlib

import numpy as np

from ... import _C
from ...autograd.grad_mode import enable_grad
from ...viz.tensorboard import add_graph as _viz_add_graph, module_scopes as _module_scopes

__all__ = ["SummaryWriter"]


def _numpy(value, what):
    """A tensor (detached) or anything array-like as a numpy array."""
    if isinstance(value, _C.Tensor):
        return value.detach().numpy()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _C.Tensor) for v in value):
        return np.stack([v.detach().numpy() for v in value])
    return value


def _scalar(value, what):
    if isinstance(value, _C.Tensor):
        if value.numel() != 1:
            raise ValueError(f"SummaryWriter.{what}: a scalar must have one element, got a tensor of shape "
                             f"{tuple(value.shape)}.")
        return value.item()
    if isinstance(value, np.ndarray) and value.size == 1:
        return value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"SummaryWriter.{what}: expected a number or a one-element tensor, got "
                        f"{type(value).__name__}.")
    return value


class SummaryWriter:
    """Writes TensorBoard event files under log_dir (default runs/DATETIME_HOSTNAME+comment), with
    torch.utils.tensorboard.SummaryWriter's methods and arguments. A context manager (closes on exit)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        self._writer = _tbx.SummaryWriter(logdir=log_dir, comment=comment, purge_step=purge_step,
                                          max_queue=max_queue, flush_secs=flush_secs,
                                          filename_suffix=filename_suffix)
        self.log_dir = self._writer.logdir

    def get_logdir(self):
        return self.log_dir

    # ----- values -----
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        self._writer.add_scalar(tag, _scalar(scalar_value, "add_scalar"), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError(f"SummaryWriter.add_scalars: tag_scalar_dict must be a dict, got "
                            f"{type(tag_scalar_dict).__name__}.")
        values = {k: _scalar(v, "add_scalars") for k, v in tag_scalar_dict.items()}
        self._writer.add_scalars(main_tag, values, global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        array = np.asarray(_numpy(values, "add_histogram"))
        if array.size == 0:
            raise ValueError(f"SummaryWriter.add_histogram: '{tag}' has no values.")
        self._writer.add_histogram(tag, array, global_step, bins, walltime, max_bins)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        self._writer.add_image(tag, _numpy(img_tensor, "add_image"), global_step, walltime, dataformats)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        self._writer.add_images(tag, _numpy(img_tensor, "add_images"), global_step, walltime, dataformats)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        if not isinstance(text_string, str):
            raise TypeError(f"SummaryWriter.add_text: text_string must be a str, got {type(text_string).__name__}.")
        self._writer.add_text(tag, text_string, global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        self._writer.add_figure(tag, figure, global_step, close, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        metrics = {k: _scalar(v, "add_hparams") for k, v in metric_dict.items()}
        self._writer.add_hparams(hparam_dict, metrics, name=run_name, global_step=global_step)

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        self._writer.add_embedding(_numpy(mat, "add_embedding"), metadata, _numpy(label_img, "add_embedding"),
                                   global_step, tag, metadata_header)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127, weights=None,
                     walltime=None):
        self._writer.add_pr_curve(tag, _numpy(labels, "add_pr_curve"), _numpy(predictions, "add_pr_curve"),
                                  global_step, num_thresholds, _numpy(weights, "add_pr_curve"), walltime)

    # ----- the graph -----
    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True, global_step=None):
        """Runs model(input_to_model) (a tuple is spread as positional arguments) with grad recording on, and
        writes the graph that this call built, its leaves named after the model's parameters and its nodes
        grouped by module as PyTorch's are ("Net/Linear[fc1]", Note [Module scopes] in viz/tensorboard.py; by the
        Python function that created them when model is a plain function). verbose and use_strict_trace are
        accepted for compatibility (there is no tracing)."""
        if not callable(model):
            raise TypeError(f"SummaryWriter.add_graph: model must be callable (a Module or a function), got "
                            f"{type(model).__name__}.")
        if input_to_model is None:
            args = ()
        elif isinstance(input_to_model, (tuple, list)):
            args = tuple(input_to_model)
        else:
            args = (input_to_model,)
        scopes = _module_scopes(model) if hasattr(model, "named_modules") else contextlib.nullcontext()
        with enable_grad(), scopes:
            output = model(*args)
        outputs = [output] if isinstance(output, _C.Tensor) else (
            list(output.values()) if isinstance(output, dict) else list(output)
            if isinstance(output, (tuple, list)) else None)
        if outputs is None or not all(isinstance(o, _C.Tensor) for o in outputs):
            raise TypeError(f"SummaryWriter.add_graph: the model must return a Tensor, or a tuple/list/dict of "
                            f"Tensors, got {type(output).__name__}.")
        if not any(o.grad_fn is not None for o in outputs):
            raise RuntimeError("SummaryWriter.add_graph: the model's output has no recorded graph: nothing it "
                               "used requires grad (no parameters, and the input does not require grad).")
        params = model if hasattr(model, "named_parameters") else None
        return _viz_add_graph(self._writer, *outputs, params=params, step=global_step,
                              scopes=scopes if params is not None else None)

    # ----- lifetime -----
    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

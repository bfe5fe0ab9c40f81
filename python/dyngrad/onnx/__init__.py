"""dyngrad.onnx (torch.onnx): importable, so that a script which exports only behind a flag runs; exporting raises.

Note [No ONNX export]: torch.onnx.export traces the model into TorchScript (or FX) and writes ONNX from that graph.
dyngrad records a graph only for autograd, of the ops one call ran, with no converter to ONNX's operator set, so
export() and dynamo_export() raise NotImplementedError saying what to do instead: a dyngrad state_dict loads into
the same model built with PyTorch, which exports it. The names a call of export() evaluates in its arguments
(TrainingMode, OperatorExportTypes) exist, so the error that comes is this one, not an AttributeError.
"""
import enum

__all__ = ["export", "dynamo_export", "is_in_onnx_export", "register_custom_op_symbolic",
           "unregister_custom_op_symbolic", "select_model_mode_for_export", "TrainingMode", "OperatorExportTypes"]

_WHAT_TO_DO = ("dyngrad cannot write ONNX files (it has no tracer or ONNX converter). To export this model, save "
               "its state_dict (dyngrad.save(model.state_dict(), path)), load it into the same model class built "
               "with PyTorch (model.load_state_dict(torch.load(path))) and call torch.onnx.export there.")


class TrainingMode(enum.IntEnum):
    """torch.onnx.TrainingMode: the mode a model is exported in."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """torch.onnx.OperatorExportTypes: how operators without an ONNX counterpart are exported."""
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


def _refuse(name):
    raise NotImplementedError(f"dyngrad.onnx.{name}: {_WHAT_TO_DO}")


def export(model, args=(), f=None, **options):
    """torch.onnx.export: raises NotImplementedError (Note [No ONNX export])."""
    _refuse("export")


def dynamo_export(model, *model_args, **options):
    """torch.onnx.dynamo_export: raises NotImplementedError (Note [No ONNX export])."""
    _refuse("dynamo_export")


def register_custom_op_symbolic(symbolic_name, symbolic_fn, opset_version):
    """torch.onnx.register_custom_op_symbolic: raises NotImplementedError (Note [No ONNX export])."""
    _refuse("register_custom_op_symbolic")


def unregister_custom_op_symbolic(symbolic_name, opset_version):
    """torch.onnx.unregister_custom_op_symbolic: raises NotImplementedError (Note [No ONNX export])."""
    _refuse("unregister_custom_op_symbolic")


def select_model_mode_for_export(model, mode):
    """torch.onnx.select_model_mode_for_export: raises NotImplementedError (Note [No ONNX export])."""
    _refuse("select_model_mode_for_export")


def is_in_onnx_export():
    """False: no export is ever running (torch.onnx.is_in_onnx_export, which models check in forward)."""
    return False

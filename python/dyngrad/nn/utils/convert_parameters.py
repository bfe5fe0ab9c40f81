"""parameters_to_vector / vector_to_parameters, as torch.nn.utils.convert_parameters."""
from ... import Tensor, cat


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated (differentiable)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Each parameter's data becomes its slice of vec (a view: they share vec's memory, as in torch)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected dyngrad.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for param in parameters:
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n

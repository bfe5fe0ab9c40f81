"""dyngrad.nn: modules, layers, losses and initialisers, written once over the Tensor API for both engines.

`import dyngrad.nn` runs this package over the C++ engine and `import dyngrad.reference.nn` over the reference
engine: every `from .. import X` below resolves to the engine root that loaded it (see "Shared code" in
docs/design.md).
"""
from .parameter import Parameter, Buffer
from .modules.module import Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .modules.linear import Identity, Linear, Flatten, Unflatten, Embedding
from .modules.conv import Conv2d, MaxPool2d, AvgPool2d
from .modules.conv import Conv1d, ConvTranspose1d, ConvTranspose2d, Fold, Unfold
from .modules.rnn import RNNCellBase, RNNCell, LSTMCell, GRUCell, RNNBase, RNN, LSTM, GRU
from .modules.batchnorm import LayerNorm, BatchNorm1d
from .modules.dropout import Dropout
from .modules.activation import ReLU, Sigmoid, Tanh, LeakyReLU, GELU, Softplus, SiLU, Softmax, LogSoftmax
from .modules.loss import CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss
# ----- layers over nn.functional's activations, losses, norms, dropouts, distances and attention (issue 14) -----
from .modules.activation import (Threshold, Hardtanh, ReLU6, SELU, Mish, Hardsigmoid, Hardswish, ELU, CELU, GLU, Hardshrink,
                         Softshrink, Tanhshrink, LogSigmoid, Softsign, Softmin, Softmax2d, PReLU, RReLU,
                         MultiheadAttention)
from .modules.loss import (BCELoss, SmoothL1Loss, HuberLoss, KLDivLoss, PoissonNLLLoss, GaussianNLLLoss, SoftMarginLoss,
                   MultiLabelSoftMarginLoss, MultiLabelMarginLoss, MultiMarginLoss, MarginRankingLoss,
                   HingeEmbeddingLoss, CosineEmbeddingLoss, TripletMarginLoss, TripletMarginWithDistanceLoss, CTCLoss,
                   NLLLoss2d)
from .modules.batchnorm import (BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, GroupNorm, RMSNorm,
                   LocalResponseNorm, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d,
                   LazyInstanceNorm2d, LazyInstanceNorm3d, SyncBatchNorm)
from .modules.dropout import Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from .modules.linear import Bilinear, LazyLinear
from .modules.distance import CosineSimilarity, PairwiseDistance
from .modules.adaptive import AdaptiveLogSoftmaxWithLoss
from .modules.transformer import (Transformer, TransformerEncoder, TransformerDecoder, TransformerEncoderLayer,
                          TransformerDecoderLayer)
_LAYERS = [
    "Threshold", "Hardtanh", "ReLU6", "SELU", "Mish", "Hardsigmoid", "Hardswish", "ELU", "CELU", "GLU",
    "Hardshrink", "Softshrink", "Tanhshrink", "LogSigmoid", "Softsign", "Softmin", "Softmax2d", "PReLU", "RReLU",
    "MultiheadAttention", "BCELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "MarginRankingLoss",
    "HingeEmbeddingLoss", "CosineEmbeddingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss",
    "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "GroupNorm", "RMSNorm",
    "LocalResponseNorm", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d", "NLLLoss2d", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
    "FeatureAlphaDropout", "Bilinear", "LazyLinear", "CosineSimilarity", "PairwiseDistance",
    "AdaptiveLogSoftmaxWithLoss", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "SyncBatchNorm",
]
# ----- end of issue 14 layers ------------------------------------------------------------------------------------
# ----- pooling, padding, upsampling, shuffles, EmbeddingBag (issues 10 and 14) --------------------------------
from .modules.pooling import (MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d,
                      AdaptiveMaxPool2d, MaxUnpool1d, MaxUnpool2d, LPPool1d, LPPool2d, MaxPool3d, AvgPool3d,
                      AdaptiveAvgPool3d, AdaptiveMaxPool3d, MaxUnpool3d, LPPool3d)
from .modules.padding import (ZeroPad1d, ZeroPad2d, ZeroPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                      ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      CircularPad1d, CircularPad2d, CircularPad3d)
from .modules.upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d
from .modules.pixelshuffle import PixelShuffle, PixelUnshuffle, ChannelShuffle
from .modules.sparse import EmbeddingBag
_POOLING = [
    "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "MaxUnpool1d", "MaxUnpool2d", "LPPool1d", "LPPool2d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d", "MaxUnpool3d", "LPPool3d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
    "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "EmbeddingBag",
]
# ----- end of pooling layers -------------------------------------------------------------------------------------
# ----- 3-d and lazy convolutions, fractional max pooling (issues 10 and 14: vision ops) ---------------------------
from .modules.conv import (Conv3d, ConvTranspose3d, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,
                   LazyConvTranspose2d, LazyConvTranspose3d)
from .modules.pooling import FractionalMaxPool2d, FractionalMaxPool3d
_VISION = [
    "Conv3d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
    "LazyConvTranspose2d", "LazyConvTranspose3d", "FractionalMaxPool2d", "FractionalMaxPool3d",
]
# ----- end of vision layers --------------------------------------------------------------------------------------
from . import functional, init, utils, parallel

__all__ = [
    "Parameter", "Buffer", "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Identity", "Linear", "Flatten", "Unflatten", "Embedding", "Conv2d", "MaxPool2d", "AvgPool2d",
    "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNN", "LSTM", "GRU", "LayerNorm", "BatchNorm1d",
    "Dropout",
    "ReLU", "Sigmoid", "Tanh", "LeakyReLU", "GELU", "Softplus", "SiLU", "Softmax", "LogSoftmax",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "functional", "init", "utils",
    "parallel",
    "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "Fold", "Unfold",
]
__all__ += _LAYERS
__all__ += _POOLING
__all__ += _VISION

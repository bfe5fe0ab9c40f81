"""dyngrad.optim: optimisers (torch's update rules) and learning-rate schedules, shared by both engines."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .adamax import Adamax
from .nadam import NAdam
from .radam import RAdam
from .rprop import Rprop
from .asgd import ASGD
from .adadelta import Adadelta
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .lbfgs import LBFGS
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD", "Adadelta",
           "RMSprop", "Adagrad", "LBFGS", "lr_scheduler"]

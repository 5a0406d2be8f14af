"""Communication cost models: fitted (alpha-beta, piecewise, interp) and analytic formulas."""

from gradsched.costmodel.base import (
    AlphaBetaModel,
    CommModel,
    load_comm_spec,
    model_from_dict,
    register_model,
)

# Importing these modules registers their model kinds (and interp the --comm CSV loader).
from gradsched.costmodel.formulas import AnalyticModel
from gradsched.costmodel.interp import InterpModel
from gradsched.costmodel.nccl import NCCLModel
from gradsched.costmodel.piecewise import PiecewiseModel
from gradsched.costmodel.ps import PSModel
from gradsched.costmodel.scaling import ScaledModel
from gradsched.costmodel.series import AlphaBetaSeriesModel, SeriesModel
from gradsched.costmodel.topology import FlatRingModel, HierarchicalModel, Topology
from gradsched.costmodel.tuned import TunedModel

__all__ = [
    "AlphaBetaModel",
    "AlphaBetaSeriesModel",
    "AnalyticModel",
    "CommModel",
    "FlatRingModel",
    "HierarchicalModel",
    "InterpModel",
    "NCCLModel",
    "PSModel",
    "PiecewiseModel",
    "ScaledModel",
    "SeriesModel",
    "Topology",
    "TunedModel",
    "load_comm_spec",
    "model_from_dict",
    "register_model",
]

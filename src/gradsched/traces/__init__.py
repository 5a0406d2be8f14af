"""Trace bundles (compute and comm), their column dictionaries, validation and importers."""

from gradsched.traces.bundle import CommTrace, ComputeTrace, meta_path
from gradsched.traces.columns import COLLECTIVES, COMM_COLUMNS, COMPUTE_COLUMNS

__all__ = ["COLLECTIVES", "COMM_COLUMNS", "COMPUTE_COLUMNS", "CommTrace", "ComputeTrace",
           "meta_path"]

"""Replay engine: discrete-event simulation of plans over several iterations, lower
bounds, and timeline export."""

from gradsched.replay.bounds import LowerBound, lower_bound
from gradsched.replay.engine import ReplayOptions, ReplayResult, TimelineEvent, replay

__all__ = ["LowerBound", "ReplayOptions", "ReplayResult", "TimelineEvent", "lower_bound",
           "replay"]

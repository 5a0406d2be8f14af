"""gradsched: communication scheduling for data-parallel deep-learning training.

Stages (data flows one way): traces -> costmodel -> planners -> Plan -> replay ->
experiments -> report. The planners never import the replay: the planners that score
candidate plans are given the replay as their scorer by :mod:`gradsched.experiments`.
The planners and the replay never import torch, so trace replay stays light.
"""

__version__ = "0.1.0"

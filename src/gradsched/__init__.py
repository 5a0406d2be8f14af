"""gradsched: communication scheduling for data-parallel deep-learning training.

Stages (data flows one way): traces -> costmodel -> planners -> Plan -> replay -> report.
The planners and the replay never import torch, so trace replay stays light.
"""

__version__ = "0.1.0"

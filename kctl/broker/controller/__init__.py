"""The cluster controller (runs in the broker that won /controller): the event loop
(controller.py), leader selection (election.py), replica placement (placement.py) and partition
reassignment (reassignment.py). See docs/architecture.md, "Cluster mode: the controller"."""

from kctl.broker.controller.controller import REBALANCE, Controller
from kctl.broker.controller.placement import InvalidReplicationFactorError, assign_replicas

__all__ = ["REBALANCE", "Controller", "InvalidReplicationFactorError", "assign_replicas"]

"""Reactors: deterministic stand-ins for the controllers of a Trainer/JobSet/Kueue cluster.

Each reactor is level-triggered: ``reconcile()`` looks at the whole store and makes one round
of corrections. ``Cluster.reconcile()`` runs all of them in a fixed order until nothing changes.
None of them runs in the background.
"""

from .base import Reactor
from .jobs import JobReactor
from .jobset import JobSetReactor
from .kueue import KueueReactor
from .pods import PodReactor
from .trainer import TrainerReactor

__all__ = ["JobReactor", "JobSetReactor", "KueueReactor", "PodReactor", "Reactor", "TrainerReactor"]

"""Reactors: deterministic stand-ins for the controllers of a Trainer/JobSet/Kueue cluster.

Each reactor is level-triggered: ``reconcile()`` looks at the whole of what its ObjectStore shows and makes one
round of corrections. In-process, ``Cluster.reconcile()`` runs all of them in a fixed order until nothing changes,
in the caller's thread; in front of the real apiextensions-apiserver the controller loop (controllers.py) runs them
in the background, woken by watches, against an APIStore.
"""

from .base import Reactor
from .jobs import JobReactor
from .jobset import JobSetReactor
from .kueue import KueueReactor
from .pods import PodReactor
from .trainer import TrainerReactor

__all__ = ["JobReactor", "JobSetReactor", "KueueReactor", "PodReactor", "Reactor", "TrainerReactor"]

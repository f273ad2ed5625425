"""Pruning the Slurm adapter's files under ``<output.dir>/.jobs``: pointers and arrays' marker maps past their
retention, so that they do not pile up and finding an array task by its marker reads the recent maps only.

* A **marker map** finds an array's tasks by marker until their ids are recorded (a crash between ``sbatch
  --array`` and the record): seconds, or the time a supervisor takes to come back. It is kept ``output.keepMaps``
  after it was written (7 days by default). :data:`dispatch.slurm.arrays.FIND` reads only the maps written after
  the find's horizon less :data:`MAP_SLACK`, so a find costs the maps of that window, not every map ever written.
* A **pointer** finds a job's output files after the scheduler forgot the job. It is kept ``output.keepPointers``
  after the submission (90 days by default); after that the files are found through squeue/sacct while they
  still know the job (the files themselves are never deleted: they are the user's).

:data:`PRUNE` runs inside a submitting script at most every :data:`PRUNE_EVERY` seconds per backend (no round
trip of its own). It deletes only regular files of the user's alone named as dispatch names them, in a pointers'
directory of the user's alone (:mod:`dispatch.slurm.trust`): never a link, never what a file points at.
"""

from __future__ import annotations

import math

from dispatch.adapterkit.programs import program
from dispatch.slurm.trust import TRUSTED

PRUNE_EVERY = 3600.0
"""Seconds between two prunes by one backend."""
MAP_SLACK = 3600
"""Seconds before a find's horizon from which maps are read (a map is written just before its ``sbatch``)."""

PRUNE = TRUSTED + program("dispatch.slurm", "prune.sh")
"""``programs/prune.sh``, ``bash -c PRUNE _ <pointers' dir> <cluster> <maps' dir> <pointer minutes> <map minutes>``:
delete the pointers ``<cluster>.*`` and the maps ``dspa-*`` last written more than that many minutes ago (0: none);
prints each path deleted."""


def minutes(seconds: float) -> str:
    """A retention as ``find -mmin`` minutes (0: keep forever)."""
    return str(math.ceil(seconds / 60)) if seconds > 0 else "0"

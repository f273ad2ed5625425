"""The submission number a marker carries, and execution identities ``<N>.<scheduler id>.<R>``.

The core gives every submission a marker ``dsp-<job id>-<N>`` (:func:`dispatch.actions.marker_for`) and
writes it to the record before :meth:`~dispatch.spi.Backend.start`. An adapter stores the marker on the
scheduler object (a job name, a label) and, when it reads the object back, recovers N from it, so the
execution identities it reports match the ones the job saw in ``DISPATCH_EXECUTION``.
"""

from __future__ import annotations

import re

from dispatch.identity import RestartId

_MARKER = re.compile(r"dsp-[A-Za-z0-9_\-]+-([1-9][0-9]*)")


def submission_of(marker: str | None, default: int = 1) -> int:
    """The submission number N of a ``dsp-<job id>-<N>`` marker; ``default`` for a marker of another form
    (an object dispatch did not create, or a name the scheduler shortened)."""
    m = _MARKER.fullmatch(marker or "")
    return int(m.group(1)) if m else default


def execution_identity(submission: int, scheduler_id: str, restart: int) -> str:
    """The text of execution ``restart`` of submission ``submission`` on scheduler object ``scheduler_id``.
    Raises ValueError for parts that cannot form one (N < 1, R < 0, an id with characters outside
    ``[A-Za-z0-9_-]``)."""
    return str(RestartId(submission, scheduler_id, restart))

"""Reading a slice of an output file on the cluster: the shell snippet and the parsing of its answer.

The snippet runs once per slice inside one script (so every viewer's slice of a cycle costs one round trip): it
prints ``MISSING`` for a file not written yet, else ``<start> <size>`` on a line and then the bytes from
``start`` (at most the limit) in base64. ``tail -c +N`` seeks in a regular file, so the bytes before the offset
are never read.

:class:`OutputReading` is the backend's part that reads a job's output: the files' prefix its pointer names
(:data:`POINTED`), each read or slice one call of the snippets here.
"""

from __future__ import annotations

import base64
import binascii
import logging
import posixpath
from collections.abc import Iterator, Sequence

from dispatch.adapterkit.programs import program
from dispatch.errors import DispatchError, NotFound, Unavailable, Unsupported
from dispatch.slurm import submit, trust
from dispatch.slurm.core import SlurmCore, _job_id
from dispatch.slurm.mapping import outcome_of
from dispatch.slurm.observation import Observation
from dispatch.slurm.trust import TRUSTED
from dispatch.spi import OutputPiece, OutputSlice

UNTRUSTED = "UNTRUSTED"
"""What :data:`SLICE` and :data:`WHOLE` print for a file that is not the user's alone (never read)."""
UNTRUSTED_WHY = "it is not a file of yours alone (a symbolic link, another user's file, or writable by others)"

SLICE = program("dispatch.slurm", "slice.sh")
"""``programs/slice.sh``, ``bash -c SLICE _ PATH OFFSET LIMIT``: a negative OFFSET counts from the end; ``UNTRUSTED``
for a file that is not the user's alone (:mod:`dispatch.slurm.trust`: one ``stat`` gives the size, mode and
owner)."""
WHOLE = TRUSTED + program("dispatch.slurm", "whole.sh")
"""``programs/whole.sh``, ``bash -c WHOLE _ PATH START``: the file from byte START (1-based) in base64, ``MISSING``
or ``UNTRUSTED``."""


def parse_slice(stdout: str, offset: int) -> OutputPiece:
    """The piece :data:`SLICE` printed (``offset`` as asked, for a file not written yet); Unavailable for an
    answer of another shape."""
    head, _, body = stdout.partition("\n")
    if head.strip() == "MISSING":
        return OutputPiece(b"", max(0, offset), 0)
    if head.strip() == UNTRUSTED:
        raise Unavailable(f"reading output: not read: {UNTRUSTED_WHY}")
    try:
        start_text, size_text = head.split()
        start, size = int(start_text), int(size_text)
        data = base64.b64decode(body.strip(), validate=True)
    except (ValueError, binascii.Error):
        raise Unavailable(f"reading output: unusable answer {stdout[:100]!r}") from None
    return OutputPiece(data, start, max(size, start + len(data)))


log = logging.getLogger("dispatch.slurm.backend")
PATHS_KEPT = 1024
"""Output paths :meth:`OutputReading.read_slices` keeps (per job, execution and stream; the oldest go first)."""
POINTED = trust.TRUSTED + program("dispatch.slurm", "pointed.sh", pointer_max=trust.POINTER_MAX)
"""The pointer ``$1`` of job ``$2``: ``NONE``; ``UNTRUSTED <why>`` when it or its directory is not the user's
alone (:mod:`dispatch.slurm.trust`) or it is too large; else its first line (the files' prefix) and then one
line ``<restart>.out`` per execution that has a stdout file (a regular file, not a link)."""


class OutputReading:
    """OutputReader and OutputSlices: the files a job's pointer names."""

    def __init__(self, core: SlurmCore, observation: Observation) -> None:
        self.core = core
        self.observation = observation
        self._paths: dict[tuple[str, int | None, str], str] = {}
        self._bases: dict[str, str] = {}  # job id -> its output files' prefix, from its pointer (never changes)

    def _output_path(self, scheduler_id: str, execution: int | None, stream: str) -> tuple[str, bool]:
        """The path of one execution's ``stream`` file and whether that execution has ended. The files' prefix
        comes from the pointer written at submission (:data:`~dispatch.slurm.submission.SUBMIT`), so nothing
        depends on the scheduler still knowing the job; the scheduler is asked only which execution is current and
        whether it ended. Once neither squeue nor sacct has the job, it has ended, and its latest execution is the
        highest one with a file. A job submitted without a pointer is looked up in squeue/sacct
        (:meth:`_listed_path`)."""
        jid = _job_id(scheduler_id)
        base = self._bases.get(jid)
        if base is None:
            pointed = self._pointed(jid)
            if pointed is None:
                return self._listed_path(scheduler_id, execution, stream)
            base = self._bases[jid] = pointed[0]
        obs = self.observation.observe([jid]).get(jid)
        if obs is not None:
            rec = obs.live or obs.history[-1]
            current = rec.restart_cnt or 0
            over = outcome_of(rec, self.core.evidence(rec.source)).outcome.state.ended
        else:
            restarts = (self._pointed(jid) or ("", []))[1]
            if not restarts:
                raise NotFound(f"Slurm job {jid} has no output file (it never ran, or its files were removed)")
            current, over = max(restarts), True
        r = current if execution is None else execution
        if r < 0 or r > current:
            raise NotFound(f"job {jid} has no execution {r}")
        out_path, err_path = submit.output_paths(posixpath.dirname(base), posixpath.basename(base), jid, r)
        return (out_path if stream == "stdout" else err_path), over or r < current

    def _pointed(self, jid: str) -> tuple[str, list[int]] | None:
        """The files' prefix the submission of ``jid`` recorded and the restarts that have a stdout file; None
        when there is no pointer."""
        s = self.core.script()
        path = self.core.pointer(jid)
        s.shell(POINTED, path, jid)
        call = self.core.need(self.core.run(s, False), 0, f"read the output pointer of job {jid}", write=False)
        lines = call.stdout.strip("\n").splitlines()
        if not lines or lines[0] == "NONE":
            return None
        base, why = (None, lines[0][10:]) if lines[0].startswith("UNTRUSTED ") else trust.pointed_base(lines[0])
        if base is None:
            log.warning("the output pointer %s of job %s is ignored: %s", path, jid, why)
            return None
        restarts = [int(x[: -len(".out")]) for x in lines[1:] if x.endswith(".out") and x[: -len(".out")].isdigit()]
        return base, restarts

    def _listed_path(self, scheduler_id: str, execution: int | None, stream: str) -> tuple[str, bool]:
        """The path as squeue/sacct show it (jobs submitted before submissions wrote pointers)."""
        ev_obs = self.observation.observe([scheduler_id], full=True).get(_job_id(scheduler_id))
        if ev_obs is None:
            raise NotFound(f"Slurm job {scheduler_id} is gone")
        rec = ev_obs.live or ev_obs.history[-1]
        current = rec.restart_cnt or 0
        r = current if execution is None else execution
        if r < 0 or r > current:
            raise NotFound(f"job {rec.job_id} has no execution {r}")
        pattern = rec.stdout or (ev_obs.history[-1].stdout if ev_obs.history else "")
        out_dir = (
            posixpath.dirname(pattern)
            if pattern.startswith("/")
            else (self.core.settings.output.dir or self.core.default_output_dir)
        )
        out_path, err_path = submit.output_paths(out_dir, rec.name, rec.job_id, r)
        ended = outcome_of(rec, self.core.evidence("squeue")).outcome.state.ended or r < current
        return (out_path if stream == "stdout" else err_path), ended

    def _read(
        self, scheduler_id: str, execution: int | None, follow: bool, stream: str, offset: int = 0
    ) -> Iterator[bytes]:
        path, ended = self._output_path(scheduler_id, execution, stream)
        while True:
            s = self.core.script()
            s.shell(WHOLE, path, str(offset + 1))
            call = self.core.need(self.core.run(s, False), 0, f"read {path}", write=False)
            text = call.stdout.strip()
            if text == UNTRUSTED:
                raise Unavailable(f"{path} is not read: {UNTRUSTED_WHY}")
            if text != "MISSING" and text:
                data = base64.b64decode(text)
                offset += len(data)
                yield data
            if not follow or ended:
                return
            self.core.clock.sleep(1.0)
            path, ended = self._output_path(scheduler_id, execution, stream)

    def stdout(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        return self._read(scheduler_id, execution, follow, "stdout", max(0, offset))

    def stderr(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        return self._read(scheduler_id, execution, follow, "stderr", max(0, offset))

    def output_per_rank(self) -> bool:
        """No: every rank of an execution writes to the execution's one file (``%j.%x.<restart>.out``)."""
        return False

    def read_slices(self, slices: Sequence[OutputSlice]) -> list[OutputPiece | DispatchError]:
        """Every slice in one script: ``tail -c +OFFSET | head -c LIMIT`` of each file (one round trip for all
        of them). A file's path is looked up once per job, execution and stream and then kept, except for the
        current execution (None), whose path changes when the job is requeued."""
        answers: list[OutputPiece | DispatchError | None] = [None] * len(slices)
        s = self.core.script()
        calls: list[tuple[int, int, str]] = []
        for i, sl in enumerate(slices):
            try:
                if sl.rank is not None:
                    raise Unsupported("Slurm keeps one output file per execution, holding every rank's output")
                if sl.stream not in ("stdout", "stderr"):
                    raise Unsupported(f"the Slurm adapter has no stream {sl.stream!r}")
                path = self._slice_path(sl)
            except DispatchError as exc:
                answers[i] = exc
                continue
            calls.append((i, s.shell(SLICE, path, str(sl.offset), str(max(0, sl.limit))), path))
        if calls:
            out = self.core.run(s, False)
            for i, index, path in calls:
                try:
                    call = self.core.need(out, index, f"read {path}", write=False)
                    answers[i] = parse_slice(call.stdout, slices[i].offset)
                except DispatchError as exc:
                    answers[i] = exc
        return [a if a is not None else Unavailable("not read") for a in answers]

    def _slice_path(self, sl: OutputSlice) -> str:
        key = (sl.scheduler_id, sl.execution, sl.stream)
        path = self._paths.get(key)
        if path is None:
            path, _ = self._output_path(sl.scheduler_id, sl.execution, sl.stream)
            if sl.execution is not None:
                if len(self._paths) >= PATHS_KEPT:
                    self._paths.pop(next(iter(self._paths)))
                self._paths[key] = path
        return path

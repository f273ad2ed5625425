"""Finding jobs by marker on Slurm: squeue and sacct by name, and array tasks through their marker maps
(:data:`dispatch.slurm.arrays.FIND`).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence

from dispatch.adapterkit.programs import program
from dispatch.capabilities import Capability
from dispatch.errors import Unavailable
from dispatch.slurm import arrays
from dispatch.slurm.core import SlurmCore, _id_order
from dispatch.slurm.parse import ParseError, filter_jobs, parse_squeue
from dispatch.spi import Found

log = logging.getLogger("dispatch.slurm.backend")
SACCT_NAMES = program("dispatch.slurm", "sacct-names.sh")
"""``programs/sacct-names.sh``: the jobs named ``$2`` that sacct has since ``$1`` (``<id>|<name>|<submit>``)."""


class Finding:
    """Backend.find and MultiFinder."""

    def __init__(self, core: SlurmCore) -> None:
        self.core = core

    def find(self, marker: str, since: float) -> list[Found]:
        return self.find_many([marker], since).get(marker, [])

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        try:
            return self._find_many_parsed(markers, since)
        except ParseError as exc:
            raise Unavailable(f"squeue/sacct: unusable output: {str(exc)[:300]}") from None

    def _find_many_parsed(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        wanted = list(dict.fromkeys(markers))
        if not wanted:
            return {}
        s = self.core.script()
        if self.core.dialect == "v0.0.38":
            s.call(["squeue", "--json"])
        else:
            s.call(["squeue", "--json", "-t", "all", "--name=" + ",".join(wanted)])
        acct = self.core.caps[Capability.ACCOUNTING_HISTORY].yes
        if acct:
            s.shell(
                SACCT_NAMES,
                str(max(0, int(since + self.core.offset) - 1)),  # sacct refuses a start before the epoch (find(m, 0))
                ",".join(wanted),
            )
        maps = posixpath.dirname(arrays.map_path(self.core.pointer(""), "_"))
        s.shell(arrays.FIND, "1" if acct else "0", maps, str(max(0, int(since + self.core.offset) - 1)), *wanted)
        out = self.core.run(s, False)
        found: dict[str, dict[str, Found]] = {m: {} for m in wanted}
        tasks = self.core.need(out, 2 if acct else 1, "find array tasks", write=False)
        array_tasks = arrays.parse_find(tasks.stdout)
        for line in tasks.stdout.splitlines():
            if line.startswith("U "):
                log.warning("array marker maps ignored: %s", line[2:])
        sq = self.core.need(out, 0, "squeue", write=False)
        _, jobs = parse_squeue(sq.stdout)
        for j in filter_jobs(jobs, names=wanted):
            created = (j.submit_time - self.core.offset) if j.submit_time else None
            if created is None or created >= since - self.core.uncertainty - 1:
                found[j.name].setdefault(j.job_id, Found(j.job_id, j.name, created))
        if acct:
            sa = self.core.need(out, 1, "sacct", write=False)
            for line in sa.stdout.splitlines():
                parts = line.split("|")
                if len(parts) >= 3 and parts[1] in found:
                    created = float(parts[2]) - self.core.offset if parts[2].isdigit() else None
                    found[parts[1]].setdefault(parts[0], Found(parts[0], parts[1], created))
        for task in array_tasks:
            created = task.created - self.core.offset if task.created is not None else None
            if task.marker in found and (created is None or created >= since - self.core.uncertainty - 1):
                found[task.marker].setdefault(task.scheduler_id, Found(task.scheduler_id, task.marker, created))
        return {m: sorted(v.values(), key=lambda f: _id_order(f.scheduler_id)) for m, v in found.items()}

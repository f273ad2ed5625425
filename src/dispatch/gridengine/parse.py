"""Grid Engine's answers as records: ``qstat -xml`` (live jobs), ``qstat -xml -j`` (one job's detail) and
``qacct -j`` (ended jobs). Pure functions; unusable output raises :class:`ParseError`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime


class ParseError(ValueError):
    """Output that is not what the command prints."""


@dataclass(frozen=True)
class LiveJob:
    """One job as ``qstat -xml`` lists it."""

    job_id: str
    name: str
    state: str
    queue: str = ""
    start: float | None = None
    submitted: float | None = None

    @property
    def host(self) -> str:
        return self.queue.split("@", 1)[1] if "@" in self.queue else ""


@dataclass(frozen=True)
class JobDetail:
    """What ``qstat -xml -j`` adds: the job's context variables and its earliest start time (``-a``)."""

    job_id: str
    context: dict[str, str] = field(default_factory=dict)
    execution_time: float | None = None


@dataclass(frozen=True)
class AccountingRecord:
    """One ``qacct -j`` record (a job rescheduled in place has several)."""

    job_id: str
    name: str
    failed: int
    failed_text: str
    exit_status: int
    submitted: float | None
    start: float | None
    end: float | None
    wallclock: float | None
    maxvmem: float | None
    category: str
    host: str


def _xml(text: str, what: str) -> ET.Element:
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError(f"{what}: not XML ({exc}): {text[:200]!r}") from None


def _iso(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()  # qstat prints the cell's local time, as this host
    except ValueError:
        return None


def parse_qstat(text: str) -> list[LiveJob]:
    """Every job of ``qstat -xml -u '*'`` (running ones under queue_info, the rest under job_info)."""
    root = _xml(text, "qstat -xml")
    jobs = []
    for el in root.iter("job_list"):
        jid = (el.findtext("JB_job_number") or "").strip()
        if not jid.isdigit():
            raise ParseError(f"qstat -xml: a job without a number: {ET.tostring(el)[:200]!r}")
        jobs.append(
            LiveJob(
                job_id=jid,
                name=el.findtext("JB_name") or "",
                state=(el.findtext("state") or "").strip(),
                queue=(el.findtext("queue_name") or "").strip(),
                start=_iso(el.findtext("JAT_start_time")),
                submitted=_iso(el.findtext("JB_submission_time")),
            )
        )
    return jobs


def parse_detail(text: str) -> dict[str, JobDetail]:
    """The jobs of ``qstat -xml -j <ids>``, by id."""
    root = _xml(text, "qstat -xml -j")
    out: dict[str, JobDetail] = {}
    for el in root.iter("element"):
        jid = el.findtext("JB_job_number")
        if jid is None:
            continue
        context = {}
        for var in el.iter("context_list"):
            name = var.findtext("VA_variable")
            if name:
                context[name] = var.findtext("VA_value") or ""
        exe = el.findtext("JB_execution_time")
        out[jid.strip()] = JobDetail(jid.strip(), context, float(exe) if exe and exe.lstrip("-").isdigit() else None)
    return out


_QACCT_TIME = "%a %b %d %H:%M:%S %Y"
_SIZE = re.compile(r"([0-9.]+)([KMGT]?)B?")


def _acct_time(text: str) -> float | None:
    text = text.strip()
    if not text or text == "-/-":
        return None
    try:
        return datetime.strptime(text, _QACCT_TIME).timestamp()
    except ValueError:
        return None


def _seconds(text: str) -> float | None:
    m = re.fullmatch(r"([0-9.]+)s?", text.strip())
    return float(m.group(1)) if m else None


def size_bytes(text: str) -> float | None:
    """``1.750MB`` or ``100M`` as bytes (K, M, G, T are powers of 1024, as Grid Engine counts)."""
    m = _SIZE.fullmatch(text.strip().upper())
    if not m:
        return None
    return float(m.group(1)) * float(1024 ** " KMGT".index(m.group(2) or " "))


def parse_qacct(text: str) -> list[AccountingRecord]:
    """Every record of ``qacct -j`` output (records are separated by lines of ``=``)."""
    records = []
    for block in re.split(r"^=+\s*$", text, flags=re.M):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            if key:
                fields[key] = value.strip()
        if "jobnumber" not in fields:
            continue
        failed_text = fields.get("failed", "0")
        try:
            failed = int(failed_text.split(":")[0].strip() or 0)
            exit_status = int(fields.get("exit_status", "0").split()[0])
        except ValueError:
            raise ParseError(f"qacct: unreadable failed/exit_status in {fields!r}") from None
        records.append(
            AccountingRecord(
                job_id=fields["jobnumber"],
                name=fields.get("jobname", ""),
                failed=failed,
                failed_text=failed_text,
                exit_status=exit_status,
                submitted=_acct_time(fields.get("qsub_time", "")),
                start=_acct_time(fields.get("start_time", "")),
                end=_acct_time(fields.get("end_time", "")),
                wallclock=_seconds(fields.get("ru_wallclock", "")),
                maxvmem=size_bytes(fields.get("maxvmem", "")),
                category=fields.get("category", ""),
                host=fields.get("hostname", ""),
            )
        )
    return records


def requested(category: str, resource: str) -> str | None:
    """The value of ``-l resource=value`` in a qacct category (``-l h_rt=60,h_vmem=100M``)."""
    m = re.search(rf"(?:^|[\s,]){re.escape(resource)}=([^\s,]+)", category)
    return m.group(1) if m else None


def parse_duration(text: str) -> float | None:
    """``60``, ``0:1:0`` or ``00:01:00`` as seconds (Grid Engine's time values)."""
    text = text.strip()
    if not text:
        return None
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        return None
    total = 0.0
    for p in parts:
        total = total * 60 + p
    return total

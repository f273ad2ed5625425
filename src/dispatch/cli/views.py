"""Read commands: ``status``, ``show``, ``logs``. Each has ``--json``."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from dispatch import present
from dispatch.cli.app import App

if TYPE_CHECKING:
    from dispatch.cli.logsource import Target
    from dispatch.records.base import Records
    from dispatch.records.model import JobRecord, JobSummary
    from dispatch.spi import RankProgress

pass_app = click.make_pass_decorator(App)
CTX = {"help_option_names": ["-h", "--help"]}


def complete_job_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of job ids from the record store (newest first); silent on any error."""
    from click.shell_completion import CompletionItem

    try:
        from dispatch.cli.config import is_postgres, load, open_records

        setting = load(None).records
        if not is_postgres(setting) and not os.path.exists(setting):
            return []
        records = open_records(setting, read_only=True)
        try:
            rows = records.summaries(limit=200)
        finally:
            records.close()
    except Exception:
        return []
    return [CompletionItem(s.id, help=f"{s.state.value} {s.name or ''}") for s in rows if s.id.startswith(incomplete)]


def refresh_active(
    app: App, jobs: list[JobRecord], progress: dict[str, tuple[RankProgress, ...]] | None = None
) -> list[JobRecord]:
    """The jobs as observed now: active ones are inspected (one batched call per cluster) and changes written
    where no supervisor owns the job (see :func:`dispatch.cli.observe.refresh`).

    A cluster that cannot be opened or reached is skipped with a note: its jobs keep their last recorded
    evidence. ``progress`` receives what the read showed of running jobs' progress, by job id.
    """
    from dispatch.cli import ui
    from dispatch.cli.observe import refresh
    from dispatch.errors import DispatchError
    from dispatch.records.model import needs_supervision

    records = app.records()
    by_cluster: dict[str, list[JobRecord]] = {}
    for j in jobs:
        if needs_supervision(j):  # the clusters to open; refresh reads only what needs_observation picks
            by_cluster.setdefault(j.cluster, []).append(j)
    seen: dict[str, JobRecord] = {}
    for name, group in by_cluster.items():
        try:
            cluster = app.cluster(name)
            for j in refresh(records, cluster.backend, group, cluster.clock.now(), progress=progress):
                seen[j.id] = j
        except DispatchError as exc:
            ui.note(f"cluster {name}: not refreshed ({exc}); showing the last recorded state")
    return [seen.get(j.id, j) for j in jobs]


def status_rows(
    rows: list[JobSummary], now: float, show_cluster: bool, progress: Mapping[str, str] | None = None
) -> str:
    """The status table; a PROGRESS column (:func:`dispatch.progress.summary`) when a listed job reported."""
    from dispatch.cli import ui

    headers = ["JOB", "NAME", *(["CLUSTER"] if show_cluster else []), "STATE", "CAUSE", "EXECUTION", "AGE"]
    shown = {r.id: progress[r.id] for r in rows if progress and r.id in progress}
    if shown:
        headers.append("PROGRESS")
    body = []
    for s in rows:
        body.append(
            [
                s.id,
                ui.cell(s.name),
                *([ui.cell(s.cluster)] if show_cluster else []),
                s.state.value,
                present.cause_text(s),
                ui.cell(s.execution),
                present.age(now - s.created_at),
                *([shown.get(s.id, present.NONE)] if shown else []),
            ]
        )
    state_col = headers.index("STATE")

    def colour_state(text: str, padded: str) -> str:
        return ui.state_style(padded, text)

    styles: list[Any] = [None] * len(headers)
    styles[state_col] = colour_state
    return ui.table(headers, body, styles)


@click.command(context_settings=CTX)
@click.argument("jobs", nargs=-1, shell_complete=complete_job_ids)
@click.option("-a", "--all", "show_all", is_flag=True, help="Show every job (default: the newest --limit).")
@click.option("-n", "--limit", type=click.IntRange(1), default=30, show_default=True, help="Newest jobs shown.")
@click.option("--active", is_flag=True, help="Only jobs that are not closed.")
@click.option(
    "--all-clusters/--this-cluster", "all_clusters", default=True, help="Jobs of every cluster, or of --cluster."
)
@click.option("--refresh/--no-refresh", default=True, show_default=True, help="Observe active jobs first.")
@click.option("-w", "--watch", is_flag=True, help="Refresh the table until Ctrl-C.")
@click.option(
    "--interval", type=click.FloatRange(0.2), default=2.0, show_default=True, help="Seconds between --watch refreshes."
)
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as a JSON list.")
@pass_app
def status(
    app: App,
    jobs: tuple[str, ...],
    show_all: bool,
    limit: int,
    active: bool,
    all_clusters: bool,
    refresh: bool,
    watch: bool,
    interval: float,
    as_json: bool,
) -> None:
    """A table of jobs: state, cause, current execution, age (newest first)."""
    from dispatch.cli import ui

    def once() -> None:
        records = app.records_if_present()
        cluster = app.cluster_config().name if (app.cluster_name or not all_clusters) else None
        if records is None:
            rows: list[JobSummary] = []
            total = 0
        elif jobs:
            rows = [_summary(app.resolve_job(j)) for j in jobs]
            total = len(rows)
        else:
            everything = records.summaries(active_only=active, cluster=cluster)
            total = len(everything)
            rows = everything if show_all else everything[:limit]
        reported: dict[str, tuple[RankProgress, ...]] = {}
        if refresh and rows and any(not (r.closed and r.state.ended) for r in rows):
            assert records is not None
            live = [records.get(r.id) for r in rows if not (r.closed and r.state.ended)]
            fresh = {j.id: _summary(j) for j in refresh_active(app, live, reported)}
            rows = [fresh.get(r.id, r) for r in rows]
        now = time.time()
        if as_json:
            ui.print_json([_with_progress(r.to_json(), reported.get(r.id), now) for r in rows])
            return
        if not rows:
            ui.note("no jobs yet; start one with: dispatch run --nodes 2 -- python train.py")
            return
        from dispatch import progress as progress_view

        cells = {k: progress_view.summary(v, now) for k, v in reported.items()}
        click.echo(status_rows(rows, now, show_cluster=len({r.cluster for r in rows}) > 1, progress=cells))
        if len(rows) < total:
            ui.note(f"({len(rows)} of {total} jobs; --all for every one)")
        assert records is not None
        for line in escalation_hints(records, rows):
            ui.note(line)

    if not watch:
        once()
        return
    tty = sys.stdout.isatty()
    # Ctrl-C ends the watch between refreshes: a KeyboardInterrupt raised inside a refresh (a record store's
    # query, a scheduler call) could leave it half-done. A second Ctrl-C interrupts at once.
    stop = threading.Event()

    def on_interrupt(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while not stop.is_set():
            if tty:
                click.echo("\x1b[H\x1b[2J", nl=False)
            once()
            if not tty:
                click.echo("")
            stop.wait(interval)
    except KeyboardInterrupt:
        return
    finally:
        signal.signal(signal.SIGINT, previous)


def escalation_hints(records: Records, rows: list[JobSummary]) -> list[str]:
    """One line per listed job with an escalation no one has resolved: a supervisor handed it to a human; and
    one per job waiting for a reason that will not change by itself (cause ``unrunnable``), with the
    scheduler's reason. Succeeded jobs are not read (nothing escalates a success)."""
    from dispatch.follow import unrunnable, unrunnable_reason
    from dispatch.outcome import State

    candidates = [r.id for r in rows if r.state is not State.SUCCEEDED]
    found = {j.id: j for j in records.get_many(candidates)} if candidates else {}
    lines = []
    for r in rows:
        job = found.get(r.id)
        open_ = [e for e in job.escalations if e.resolved_at is None] if job is not None else []
        if open_:
            e = open_[-1]
            done = f"; once dealt with: dispatch ack {r.id}" if job is not None and job.closed else ""
            lines.append(f"job {r.id} waits for a human ({e.cause.value}: {e.reason}); see: dispatch show {r.id}{done}")
        elif job is not None and unrunnable(job):
            lines.append(f"{unrunnable_reason(job)}; it will not start by itself: dispatch stop {r.id}")
    return lines


def _with_progress(row: dict[str, Any], reports: tuple[RankProgress, ...] | None, now: float) -> dict[str, Any]:
    """A job's JSON with ``progress`` (one entry per rank, :class:`dispatch.progress.RankView`) when it reported."""
    if reports:
        from dispatch import progress as progress_view

        row["progress"] = [v.to_json() for v in progress_view.views(reports, now)]
    return row


def _summary(job: JobRecord) -> JobSummary:
    from dispatch.records.model import JobSummary

    return JobSummary.of(job)


@click.command(context_settings=CTX)
@click.argument("job", shell_complete=complete_job_ids)
@click.option(
    "--refresh/--no-refresh",
    default=True,
    show_default=True,
    help="Observe the job first, and read a failed launch's reason from the cluster.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the record and its events as JSON.")
@click.option(
    "--timeline", is_flag=True, help="Draw the job's submissions, executions, holds and decisions along time."
)
@pass_app
def show(app: App, job: str, refresh: bool, as_json: bool, timeline: bool) -> None:
    """Everything about JOB: executions with causes, holds, decisions, escalations, and the events behind them."""
    from dispatch.cli import ui

    record = app.resolve_job(job)
    reported: dict[str, tuple[RankProgress, ...]] = {}
    if refresh and not (record.closed and record.state.ended):
        (record,) = refresh_active(app, [record], reported)
    events = app.records().events(record.id)
    if as_json:
        ui.print_json(
            _with_progress(
                {
                    "job": record.to_json(),
                    "events": [{"seq": e.seq, "at": e.at, "kind": e.kind, "data": e.data} for e in events],
                },
                reported.get(record.id),
                time.time(),
            )
        )
        return
    if timeline:
        import shutil

        from dispatch import timeline as model
        from dispatch.cli.timeline import render_text

        columns = shutil.get_terminal_size((100, 24)).columns
        click.echo(render_text(model.build(record, time.time()), width=max(24, min(columns, 160) - 20)))
        return
    # --no-refresh asks nothing of the cluster: the launch failure's own words are read from it only on a refresh
    click.echo(render_show(record, events, time.time(), reason=_launch_reason(app, record) if refresh else None))
    if reported.get(record.id):
        from dispatch import progress as progress_view

        click.echo("progress (as read now):")
        for line in progress_view.lines(reported[record.id], time.time()):
            click.echo(f"  {line}")


def _launch_reason(app: App, job: JobRecord) -> str | None:
    """Why the job's launch failed, as its job script said (None if not, or if its cluster cannot tell now)."""
    from dispatch.cli.launch import launch_failed, launch_reason
    from dispatch.errors import DispatchError

    if not launch_failed(job):
        return None
    try:
        return launch_reason(app.cluster_of(job, read_only=True), job)
    except DispatchError:
        return None


def render_show(job: JobRecord, events: list[Any], now: float, reason: str | None = None) -> str:
    """``dispatch show``'s text. ``reason``: why the launch failed (:func:`dispatch.cli.launch.launch_reason`)."""
    import shlex

    from dispatch.cli import ui

    out = job.outcome
    state = job.state.value
    head = f"job {ui.style(job.id, bold=True)}"
    if job.spec.name:
        head += f" ({ui.cell(job.spec.name)})"
    cause = job.cause.value if job.cause else "-"
    lines = [
        f"{head}  cluster {job.cluster}  {ui.state_style(state)} ({cause})"
        + (f"  exit {out.exit_code}" if out and out.exit_code is not None else "")
        + ("  closed" if job.closed else ""),
        f"  command    {ui.cell(shlex.join(job.spec.command))}",
        f"  shape      {job.spec.nodes} node(s) x {job.spec.procs_per_node} rank(s)"
        + (f", time limit {present.duration(job.spec.time_limit)}" if job.spec.time_limit else ""),
        f"  created    {present.when(job.created_at)} ({present.age(now - job.created_at)} ago)",
        f"  rules      {ui.cell(present.rules_origin(job, events))}",
    ]
    if not job.spec.resources.empty:
        lines.insert(3, f"  resources  {job.spec.resources.describe()}")
    if reason:
        lines.append(f"  reason     {ui.cell('launch failed: ' + reason)}")
    if out and out.detail:
        lines.append(f"  detail     {ui.cell(out.detail)}")
    for sub in job.submissions:
        lines.append("")
        lines.append(
            f"submission {sub.n}  scheduler id {sub.scheduler_id or '-'}  gate {sub.gate.value}"
            + ("  gone from the scheduler" if sub.gone else "")
        )
        if not sub.executions:
            so = sub.outcome
            lines.append(
                f"  no execution yet: {so.state.value} ({so.cause.value if so and so.cause else '-'})"
                if so
                else "  no execution yet"
            )
        rows = []
        for e in sub.executions:
            o = e.outcome
            ran = e.ended_at - e.started_at if e.ended_at and e.started_at else None
            rows.append(
                [
                    e.identity,
                    o.state.value,
                    (o.cause.value if o.cause else "-"),
                    "-" if o.exit_code is None else str(o.exit_code) + (f" (signal {o.signal})" if o.signal else ""),
                    present.when(e.started_at),
                    present.duration(ran),
                    ui.cell(o.detail),
                ]
            )
        if rows:
            table = ui.table(
                ["  EXECUTION", "STATE", "CAUSE", "EXIT", "STARTED", "RAN", "DETAIL"],
                [["  " + r[0], *r[1:]] for r in rows],
            )
            lines.append(table)
    if job.holds:
        lines.append("")
        lines.append("holds")
        for h in job.holds:
            status = "active" if h.active else f"released {present.when(h.released_at)}"
            lines.append(
                f"  {h.instance}  by {h.owner}  on submission {h.submission}  placed {present.when(h.placed_at)}"
                f"  {status}" + (f"  ({h.reason})" if h.reason else "")
            )
    if job.escalations:
        lines.append("")
        lines.append("escalations")
        for x in job.escalations:
            lines.append(
                f"  #{x.seq} {present.when(x.at)}  {x.cause.value}: {x.reason}"
                + ("  resolved" if x.resolved_at else "")
            )
    if job.decisions:
        lines.append("")
        lines.append("decisions (and the events that led to each)")
        last = 0.0
        for d in job.decisions:
            lines.append(
                f"  #{d.seq} {present.when(d.at)}  execution {d.execution} ended {d.cause.value} -> {d.action}"
                f"  (rule {d.rule}: {d.reason}; by {d.by})"
            )
            for e in events:
                if last < e.at <= d.at and e.kind in ("observed", "execution", "vanished", "call"):
                    lines.append(f"      {present.when(e.at)}  {e.kind:<9} {_event_text(e)}")
            last = d.at
    lines.append("")
    lines.append("events")
    for e in events:
        lines.append(f"  {present.when(e.at)}  {e.kind:<14} {_event_text(e)}")
    return "\n".join(lines)


def _event_text(e: Any) -> str:
    from dispatch.cli import ui

    data = dict(e.data)
    data.pop("spec", None)
    return ui.cell(", ".join(f"{k}={v}" for k, v in data.items() if v not in (None, "")))


@click.command(context_settings=CTX)
@click.argument("job", shell_complete=complete_job_ids)
@click.option(
    "-e",
    "--execution",
    metavar="E",
    help="Execution: its restart number R in the submission, or its identity as `dispatch show` lists it"
    " (default: the current one).",
)
@click.option("--submission", type=click.IntRange(1), metavar="N", help="Submission N (default: the current one).")
@click.option(
    "-r", "--rank", "ranks", type=click.IntRange(0), multiple=True, metavar="RANK", help="Only this rank (repeatable)."
)
@click.option("--stderr", "stderr_", is_flag=True, help="Show stderr instead of stdout.")
@click.option("-f", "--follow", is_flag=True, help="Keep showing output until the execution ends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per chunk: rank, stream, text, archived.")
@pass_app
def logs(
    app: App,
    job: str,
    execution: str | None,
    submission: int | None,
    ranks: tuple[int, ...],
    stderr_: bool,
    follow: bool,
    as_json: bool,
) -> None:
    """Show JOB's output: each rank's stdout (or --stderr), prefixed [rank] when there are several.

    An execution whose output the cluster no longer has (Kubernetes: its pods are gone) is shown from the
    supervisor's archive: rank 0's stdout, kept when the execution ended (docs/supervisor.md).
    """
    import json

    from dispatch.cli import logsource, ui
    from dispatch.errors import NotFound, Unavailable, Unsupported
    from dispatch.records.archive import ArchiveStatus

    record = app.resolve_job(job)
    t = logsource.target(record, submission, execution)
    what = t.name(record.id)
    stream = "stderr" if stderr_ else "stdout"
    entry = logsource.archived(app.records(), record.id, t)
    archived = not t.latest and entry is not None and entry.status is ArchiveStatus.KEPT
    chunks: Any = None
    if not archived:
        if t.submission.scheduler_id is None:
            raise NotFound(f"job {record.id} has not been created on its cluster yet")
        try:
            chunks = logsource.primed(_live(app, record, t, stream, ranks, follow))
        except (NotFound, Unsupported, Unavailable) as exc:
            if entry is None and t.execution is None:
                raise  # no execution to look up in the archive
            in_archive = entry is not None and entry.status is ArchiveStatus.KEPT
            if isinstance(exc, (Unavailable, Unsupported)) and not in_archive:
                raise  # the cluster did not answer, or cannot do that: say so, unless the archive has the output
            if isinstance(exc, Unsupported) and stderr_:
                raise  # the cluster keeps no stderr apart (Kubernetes): nor does its archive of rank 0's stdout
            logsource.from_archive(entry, f"{what} (the cluster: {exc})", stderr_, ranks)
            archived = True
    if archived:
        kept = logsource.from_archive(entry, what, stderr_, ranks)
        chunks = iter([(kept.rank, kept.data)])
        how = f"the last {len(kept.data)} of {kept.size} bytes" if kept.truncated else "all of it"
        ui.note(f"{what}: rank {kept.rank}'s {kept.stream} as the supervisor archived it ({how})")
    prefix = record.spec.world_size > 1 and len(ranks) != 1 and not archived
    out = sys.stdout.buffer
    try:
        for rank, chunk in chunks:
            if as_json:
                text = chunk.decode("utf-8", "replace")
                click.echo(json.dumps({"rank": rank, "stream": stream, "text": text, "archived": archived}))
                continue
            if prefix and rank is not None:
                tag = f"[{rank}] ".encode()
                chunk = b"".join(tag + line for line in chunk.splitlines(keepends=True))
            out.write(chunk)
            out.flush()
    except KeyboardInterrupt:
        return


def _live(app: App, record: JobRecord, t: Target, stream: str, ranks: tuple[int, ...], follow: bool) -> Any:
    """The (rank, chunk) pairs of the target execution as the cluster has them."""
    from dispatch.errors import Unsupported
    from dispatch.spi import OutputReader

    cluster = app.cluster_of(record, read_only=True)
    backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
    sid = t.submission.scheduler_id
    assert sid is not None  # the caller checked
    lines = getattr(backend, "lines", None)
    if callable(lines):
        return lines(sid, stream, execution=t.restart, ranks=list(ranks) or None, follow=follow)
    if isinstance(backend, OutputReader):
        if ranks:
            from dispatch.capabilities import Capability

            how = cluster.backend.capabilities()[Capability.OUTPUT_READ].reason
            name = cluster.backend.name
            raise Unsupported(f"the {name} adapter cannot show one rank's output ({how}): leave out --rank")
        read = backend.stderr if stream == "stderr" else backend.stdout
        return ((None, c) for c in read(sid, t.restart, follow))
    raise Unsupported(f"the {backend.name} adapter cannot read output (capability OutputRead)")

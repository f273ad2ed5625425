"""Commands that act on jobs: ``run``, ``submit``, ``stop``, ``hold``, ``release``, ``ack``."""

from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from dispatch import present
from dispatch.cli.app import App, option_duration
from dispatch.cli.exitcodes import Exit
from dispatch.cli.launch import launch_reason

if TYPE_CHECKING:
    from collections.abc import Callable

    from dispatch.cluster import Cluster
    from dispatch.progressbar import Live
    from dispatch.records.model import JobRecord
    from dispatch.resources import Resources
    from dispatch.rules import RuleSet
    from dispatch.spec import JobSpec
    from dispatch.spi import RankProgress

pass_app = click.make_pass_decorator(App)
COMMAND_CONTEXT = {"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]}


def _job_id_completion(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from dispatch.cli.views import complete_job_ids

    return complete_job_ids(ctx, param, incomplete)


def spec_options_command_optional(fn: Any) -> Any:
    """:func:`spec_options` with COMMAND optional (``submit --from FILE`` takes none)."""
    return spec_options(fn, command_required=False)


def spec_options(fn: Any, *, command_required: bool = True) -> Any:
    """The options that describe a job, shared by ``run`` and ``submit``."""
    options = [
        click.option("-N", "--nodes", type=click.IntRange(1), default=1, show_default=True, help="Nodes."),
        click.option(
            "-p", "--procs-per-node", type=click.IntRange(1), default=1, show_default=True, help="Ranks per node."
        ),
        click.option("--name", help="A human name for the job (not unique)."),
        click.option("-e", "--env", "env", multiple=True, metavar="NAME=VALUE", help="Set a variable (repeatable)."),
        click.option(
            "-w",
            "--workdir",
            type=click.Path(file_okay=False),
            help="Working directory (default: the current one; on a cluster reached over SSH, your home directory"
            " there; Kubeflow: the image's).",
        ),
        click.option("-t", "--time-limit", metavar="DURATION", help="Wall time limit: 90s, 30m, 2h, 1h30m."),
        click.option("--memory-mb", type=click.IntRange(1), help="Memory limit per rank in MiB (local: local.Limits)."),
        click.option(
            "--gpus-per-node", metavar="[TYPE:]N", help="GPUs on each node, of any type (4) or one type (a100:4)."
        ),
        click.option("--cpus-per-proc", type=click.IntRange(1), help="CPUs for each process (rank)."),
        click.option("--mem-per-node", metavar="SIZE", help="Memory on each node: 64G, 512M (binary units)."),
        click.option("--exclusive", is_flag=True, help="No other job shares the job's nodes."),
        click.option(
            "-x",
            "--extension",
            "extensions",
            multiple=True,
            metavar="KIND=JSON",
            help='An extension, e.g. -x \'dispatch.Image={"ref": "pytorch:2.4"}\' (repeatable).',
        ),
        click.option("--rules", "rules_file", type=click.Path(dir_okay=False), help="Recovery rules file."),
        click.option("--dry-run", is_flag=True, help="Print exactly what would be sent; submit nothing."),
        click.argument("command", nargs=-1, required=command_required, type=click.UNPROCESSED),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def build_spec(
    *,
    command: tuple[str, ...],
    nodes: int,
    procs_per_node: int,
    name: str | None,
    env: tuple[str, ...],
    workdir: str | None,
    time_limit: str | None,
    memory_mb: int | None,
    extensions: tuple[str, ...],
    gpus_per_node: str | None = None,
    cpus_per_proc: int | None = None,
    mem_per_node: str | None = None,
    exclusive: bool = False,
) -> JobSpec:
    """A JobSpec from command-line options. Errors name the option."""
    from dispatch.errors import SpecError
    from dispatch.extensions import extension_from_json
    from dispatch.spec import JobSpec

    variables: dict[str, str] = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep:
            raise SpecError(f"--env {item}", "must be NAME=VALUE")
        variables[key] = value
    exts = []
    for i, item in enumerate(extensions):
        kind, sep, raw = item.partition("=")
        try:
            data = json.loads(raw) if sep else {}
        except ValueError as exc:
            raise SpecError(f"--extension {kind}", f"the value is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SpecError(f"--extension {kind}", "the value must be a JSON object")
        exts.append(extension_from_json({"kind": kind, **data}, f"extensions[{i}]"))
    if memory_mb is not None:
        from dispatch.local.limits import Limits

        exts.append(Limits(memory_mb=memory_mb))
    limit = option_duration(time_limit, "--time-limit") if time_limit is not None else None
    resources = build_resources(gpus_per_node, cpus_per_proc, mem_per_node, exclusive)
    return JobSpec(
        command=command,
        nodes=nodes,
        procs_per_node=procs_per_node,
        working_dir=os.path.abspath(workdir) if workdir else None,
        env=variables,
        time_limit=limit,
        name=name,
        extensions=tuple(exts),
        resources=resources,
    )


def build_resources(gpus: str | None, cpus: int | None, mem: str | None, exclusive: bool) -> Resources:
    """The spec's ``resources`` from ``--gpus-per-node``, ``--cpus-per-proc``, ``--mem-per-node`` and
    ``--exclusive``; errors name the option."""
    from dispatch.errors import SpecError
    from dispatch.resources import Resources, parse_gpus, parse_memory

    count, kind = parse_gpus(gpus, "--gpus-per-node") if gpus is not None else (0, None)
    mib = parse_memory(mem, "--mem-per-node") if mem is not None else None
    try:
        return Resources(gpus_per_node=count, gpu_type=kind, cpus_per_proc=cpus, mem_per_node=mib, exclusive=exclusive)
    except SpecError as exc:
        option = {"gpusPerNode": "--gpus-per-node", "gpuType": "--gpus-per-node", "cpusPerProc": "--cpus-per-proc"}
        raise SpecError(option.get(exc.path.rpartition(".")[2], exc.path), exc.message) from None


def load_rules(path: str | None) -> RuleSet | None:
    if path is None:
        return None
    from dispatch.rules import RuleSet

    return RuleSet.load(path)


def show_dry_run(app: App, spec: JobSpec, rules: RuleSet | None) -> None:
    """Print what would be sent: the adapter's rendering of the start request, else the spec as JSON."""
    from dispatch.actions import marker_for
    from dispatch.cli import ui
    from dispatch.cluster import check_spec, new_job_id
    from dispatch.spi import StartRequest

    cluster = app.cluster(read_only=True, store=False)
    check_spec(cluster.backend, spec)
    if rules is not None:
        rules.check_against(cluster.backend, cluster.capabilities())
    job_id = new_job_id(cluster.clock.now())
    request = StartRequest(job_id, 1, marker_for(job_id, 1), spec)
    backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
    render = getattr(backend, "render", None)
    if callable(render):
        click.echo(render(request), nl=False)
    else:
        ui.note(f"# the {cluster.backend.name} adapter has no renderer; the job spec that would be submitted:")
        ui.print_json(spec.to_json())
    ui.note(f"# dry run on cluster {cluster.name}: nothing was recorded or submitted")


def do_submit(app: App, spec: JobSpec, rules: RuleSet | None) -> tuple[Cluster, str]:
    from dispatch.cli import ui

    cluster = app.cluster()
    with ui.spinner(f"submitting to {cluster.name}"):
        job_id = cluster.operator.submit(spec, rules)
    return cluster, job_id


@click.command(context_settings=COMMAND_CONTEXT)
@spec_options_command_optional
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Submit many jobs: a file of JobSpecs (JSON lines) or one parameter sweep (- reads stdin).",
)
@click.option(
    "--key",
    "batch_key",
    metavar="KEY",
    help="With --from: the batch's key. Submitting FILE again with the same key finishes an interrupted batch"
    " and starts no job twice [default: a fresh key, shown if the batch is incomplete].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job id as JSON.")
@pass_app
def submit(
    app: App,
    /,
    rules_file: str | None,
    dry_run: bool,
    as_json: bool,
    from_file: str | None,
    batch_key: str | None,
    **opts: Any,
) -> None:
    """Submit COMMAND as a job and print its id.

    \b
    Everything after the options (or after --) is the command, passed as is:
      dispatch submit --nodes 2 -- python train.py --lr 0.1
    With --from FILE, every job of FILE is submitted in one batch (one id per line);
    --key KEY makes running the same command again safe: it finishes the batch.
    On a terminal, stderr shows how far the batch went (recorded, started, opened).
    """
    app.cluster_config()  # a wrong cluster name fails before anything else
    rules = load_rules(rules_file)
    if from_file is not None:
        submit_from(app, from_file, rules, dry_run, as_json, opts, batch_key)
        return
    if batch_key is not None:
        raise click.UsageError("--key names a batch: it goes with --from FILE")
    if not opts["command"]:
        raise click.UsageError("Missing argument 'COMMAND...' (or --from FILE).")
    if dry_run:
        app.cluster(read_only=True, store=False)
        show_dry_run(app, build_spec(**opts), rules)
        return
    cluster = app.cluster()
    spec = build_spec(**opts)
    _, job_id = do_submit(app, spec, rules)
    if as_json:
        from dispatch.cli import ui

        ui.print_json({"job": job_id, "cluster": cluster.name})
    else:
        click.echo(job_id)


def submit_from(
    app: App,
    path: str,
    rules: RuleSet | None,
    dry_run: bool,
    as_json: bool,
    opts: dict[str, Any],
    key: str | None = None,
) -> None:
    """``submit --from FILE``: the specs of FILE (:func:`dispatch.batch.load_specs`), in one ``submit_many`` with
    batch key ``key`` (a fresh one when None). An incomplete batch prints what it recorded, then the command
    that finishes it, and exits 5 (unknown)."""
    from contextlib import nullcontext

    from click.core import ParameterSource

    from dispatch import progressbar
    from dispatch.batch import load_specs
    from dispatch.cli import ui
    from dispatch.cli.exitcodes import exit_for
    from dispatch.cluster import BatchIncomplete, new_batch_key

    ctx = click.get_current_context()
    given = [n for n in opts if ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE]
    if given or opts["command"]:
        names = ", ".join("COMMAND" if n == "command" else "--" + n.replace("_", "-") for n in given or ["command"])
        raise click.UsageError(f"--from FILE describes every job itself; drop {names}")
    if path == "-":
        specs = load_specs(sys.stdin.read(), "stdin")
    else:
        with open(path, encoding="utf-8") as f:
            specs = load_specs(f.read(), path)
    if dry_run:
        app.cluster(read_only=True, store=False)
        for spec in specs:
            show_dry_run(app, spec, rules)
        return
    cluster = app.cluster()
    key = key if key is not None else new_batch_key()
    incomplete: BatchIncomplete | None = None
    line = None if as_json else progressbar.live()
    shown = ui.spinner(f"submitting {len(specs)} jobs to {cluster.name}") if line is None else nullcontext()
    with shown:
        try:
            got = cluster.operator.submit_many(specs, rules, key=key, progress=submission_progress(line, cluster.name))
        except BatchIncomplete as exc:
            incomplete, got = exc, exc.submitted
        finally:
            if line is not None:
                line.close()
    worst = Exit.OK
    for item in got:
        if item.error is not None:
            click.echo(f"dispatch: error: job {item.job_id}: {item.error}", err=True)
            worst = max(worst, exit_for(item.error))
    if incomplete is not None:
        again = shlex.join(["dispatch", "submit", "--from", path, "--key", key])
        click.echo(f"dispatch: error: {incomplete}\nfinish it with: {again}", err=True)
        worst = max(worst, exit_for(incomplete))
    elif worst is not Exit.OK:
        again = shlex.join(["dispatch", "submit", "--from", path, "--key", key])
        ui.note(f"batch key {key}: {again} tries again what certainly did not start, and starts nothing twice")
    if as_json:
        ui.print_json(
            {
                "cluster": cluster.name,
                "key": key,
                "complete": incomplete is None,
                "jobs": [{"job": g.job_id, "error": None if g.ok else str(g.error), "existed": g.existed} for g in got],
            }
        )
    else:
        for item in got:
            click.echo(item.job_id)
    if worst is not Exit.OK:
        raise click.exceptions.Exit(int(worst))


def submission_progress(line: Live | None, cluster: str) -> Callable[[str, int, int], None] | None:
    """What tells ``line`` how far a batched submission went (:func:`dispatch.progressbar.submit_line`), or None
    without a line."""
    if line is None:
        return None
    import time

    from dispatch.progressbar import submit_line

    phases: dict[str, tuple[int, int]] = {}
    began = time.monotonic()

    def tell(phase: str, done: int, total: int) -> None:
        phases[phase] = (done, total)
        line.update(submit_line(phases, time.monotonic() - began, f"jobs to {cluster}"), force=done == total)

    return tell


@click.command(context_settings=COMMAND_CONTEXT)
@spec_options
@click.option("-q", "--quiet", is_flag=True, help="Do not show the job's output.")
@click.option("--json", "as_json", is_flag=True, help="Print the final outcome as JSON (no job output).")
@pass_app
def run(app: App, /, rules_file: str | None, dry_run: bool, quiet: bool, as_json: bool, **opts: Any) -> None:
    """Submit COMMAND, show its output, and wait for it to end.

    A job the cluster can never run (more nodes, CPUs or memory per node than
    it has) is refused before anything is recorded or queued (exit 4). One the
    scheduler keeps waiting for a reason that will not change (cause
    unrunnable: Slurm's BadConstraints, a per-job limit) is stopped, the
    reason recorded, and run exits 4 saying why: nothing is left in the queue.

    \b
    The exit code comes from the outcome: 0 succeeded, 1 failed or cancelled,
    5 unknown. Ctrl-C stops the job (a second Ctrl-C leaves it running).
      dispatch run --nodes 2 -- python train.py

    While it waits, this process supervises the cluster's jobs (dispatch.supervise):
    --rules are applied here. If dispatch is killed, the job runs on; dispatch
    status (from any process) shows how it is doing. On a terminal (not with
    --quiet or --json), stderr shows the step the job reports (dispatch.job.progress),
    its rate and the time left, redrawn in place.
    """
    app.cluster_config()
    rules = load_rules(rules_file)
    if dry_run:
        app.cluster(read_only=True, store=False)
        show_dry_run(app, build_spec(**opts), rules)
        return
    cluster = app.cluster()
    spec = build_spec(**opts)
    cluster, job_id = do_submit(app, spec, rules)
    from dispatch.cli import ui

    ui.note(
        f"job {job_id} submitted to {cluster.name}: {spec.nodes} node(s) x {spec.procs_per_node} rank(s)"
        f" (follow: dispatch logs {job_id} -f)"
    )
    gave_up: list[str] = []
    from dispatch import progressbar

    line = None if quiet or as_json else progressbar.live()
    job = follow_job(app, cluster, job_id, show_output=not (quiet or as_json), gave_up=gave_up, line=line)
    code = Exit.REFUSED if gave_up else outcome_exit(job)
    if as_json:
        from dispatch.records.model import JobSummary

        ui.print_json(JobSummary.of(job).to_json())
    if gave_up:
        ui.note(f"refused: {gave_up[0]}; dispatch stopped it (nothing is left in the queue)")
    elif not as_json:
        ui.note(describe_end(job, stderr=wrote_stderr(cluster, job), reason=launch_reason(cluster, job)))
    raise click.exceptions.Exit(int(code))


def outcome_exit(job: JobRecord) -> Exit:
    from dispatch.outcome import State

    state = job.state
    if state is State.SUCCEEDED:
        return Exit.OK
    if state in (State.FAILED, State.CANCELLED):
        return Exit.JOB_FAILED
    return Exit.UNKNOWN


def wrote_stderr(cluster: Cluster, job: JobRecord) -> bool:
    """True when the job's last execution wrote to stderr (as far as the cluster can still tell; False when it
    cannot read the output)."""
    from dispatch.errors import DispatchError

    sub = job.current
    if sub is None or sub.scheduler_id is None:
        return False
    backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
    read = getattr(backend, "stderr", None)
    if not callable(read):
        return False
    restart = sub.executions[-1].restart if sub.executions else None
    try:
        return any(chunk.strip() for chunk in read(sub.scheduler_id, restart, False))
    except (DispatchError, OSError):
        return False


def describe_end(job: JobRecord, *, stderr: bool = False, reason: str | None = None) -> str:
    """One line on how the job ended. ``stderr``: its last execution wrote to stderr (then the line says how to
    read it). ``reason``: why its launch failed (:func:`dispatch.cli.launch.launch_reason`), said instead of the
    outcome's detail."""
    from dispatch.cli import ui

    out = job.outcome
    if out is None:
        return f"job {job.id}: no outcome recorded"
    what = out.state.value
    if out.cause is not None and out.state.value != "succeeded":
        if out.cause.value == "exit":
            what += f" (exit code {out.exit_code})"
        else:
            what += f" ({out.cause.value})"
    detail = f": {reason}" if reason else f": {out.detail}" if out.detail else ""
    cur = job.current
    took = ""
    if cur and cur.executions and cur.executions[-1].started_at and cur.executions[-1].ended_at:
        took = f" after {present.duration(cur.executions[-1].ended_at - cur.executions[-1].started_at)}"
    more = ""
    if stderr and out.cause is not None and out.cause.value in ("exit", "launch-failed", "not-launchable"):
        more = f"; stderr: dispatch logs {job.id} --stderr"
    elif out.state.value != "succeeded":
        more = f"; see: dispatch show {job.id}"
    return f"job {job.id} {ui.state_style(what, out.state.value)}{took}{detail}{more}"


class OutputPump:
    """Shows a job's output as it is written: one thread per stream, following each execution in turn.

    The main thread tells it which executions exist (``offer``) and when the job is over (``finish``); it drains
    each execution's files to the end before moving to the next.
    """

    def __init__(self, backend: Any, prefix_ranks: bool, line: Live | None = None) -> None:
        import queue

        self.backend = getattr(backend, "unrestricted", backend)
        self.prefix = prefix_ranks
        self.line = line
        """The progress line on the terminal, cleared around output written to a terminal."""
        self.queues: dict[str, queue.Queue[tuple[str, int] | None]] = {
            "stdout": queue.Queue(),
            "stderr": queue.Queue(),
        }
        self.offered: set[tuple[str, int]] = set()
        self.threads = [
            threading.Thread(target=self._pump, args=(s,), daemon=True, name=f"dispatch-{s}") for s in self.queues
        ]
        for t in self.threads:
            t.start()

    def offer(self, scheduler_id: str, restart: int) -> None:
        if (scheduler_id, restart) in self.offered:
            return
        self.offered.add((scheduler_id, restart))
        for q in self.queues.values():
            q.put((scheduler_id, restart))

    def finish(self, timeout: float = 10.0) -> None:
        for q in self.queues.values():
            q.put(None)
        for t in self.threads:
            t.join(timeout)

    def _chunks(self, stream: str, sid: str, restart: int) -> Any:
        lines = getattr(self.backend, "lines", None)
        if callable(lines):
            return lines(sid, stream, execution=restart, follow=True)
        read = getattr(self.backend, stream, None)
        if read is None:
            return iter(())
        return ((None, c) for c in read(sid, restart, True))

    def _pump(self, stream: str) -> None:
        from dispatch.cli import ui
        from dispatch.errors import DispatchError

        out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
        tty = sys.stdout if stream == "stdout" else sys.stderr
        while True:
            target = self.queues[stream].get()
            if target is None:
                return
            sid, restart = target
            try:
                for rank, chunk in self._chunks(stream, sid, restart):
                    if self.prefix and rank is not None:
                        tag = f"[{rank}] "
                        if ui.colour_enabled(tty):
                            tag = click.style(tag, dim=True)
                        lines = chunk.splitlines(keepends=True)
                        chunk = b"".join(tag.encode() + line for line in lines)
                    if self.line is not None and tty.isatty():
                        self.line.output(functools.partial(_write, out, chunk), ends_line=chunk.endswith(b"\n"))
                    else:
                        _write(out, chunk)
            except (DispatchError, OSError):
                continue


def _write(out: Any, chunk: bytes) -> None:
    out.write(chunk)
    out.flush()


def follow_job(
    app: App,
    cluster: Cluster,
    job_id: str,
    *,
    show_output: bool,
    gave_up: list[str] | None = None,
    line: Live | None = None,
) -> JobRecord:
    """Supervise one job in this process until it is over (:func:`dispatch.follow.follow`, the library's
    ``Cluster.wait``); show its output meanwhile. Ctrl-C stops the job; a second Ctrl-C leaves it running.
    With ``gave_up``, a job the scheduler says can never run (:func:`dispatch.follow.unrunnable`) is stopped,
    with the reason recorded, and the reason appended to ``gave_up``; without, :func:`follow` raises. With
    ``line``, the job's reported progress is drawn there while it runs (:func:`dispatch.progressbar.step_line`),
    and the line is closed before this returns."""
    from dispatch.cli import ui
    from dispatch.follow import follow, unrunnable, unrunnable_reason

    job = app.records().get(job_id)
    pump = OutputPump(cluster.backend, prefix_ranks=job.spec.world_size > 1, line=line) if show_output else None
    interrupted = 0
    stopping = False
    previous = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted += 1
        if interrupted >= 2:
            raise KeyboardInterrupt

    def each(job: JobRecord) -> None:
        nonlocal stopping
        if pump is not None:
            for sub in job.submissions:
                for e in sub.executions:
                    if sub.scheduler_id is not None:
                        pump.offer(sub.scheduler_id, e.restart)
        if interrupted and not stopping:
            stopping = True
            if line is not None:
                line.close()
            ui.note(f"stopping job {job_id} (Ctrl-C again to leave it running)")
            cluster.operator.stop(job_id)
        elif gave_up is not None and unrunnable(job) and not stopping:
            stopping = True
            why = unrunnable_reason(job)
            gave_up.append(why)
            cluster.operator.stop(job_id, reason=why)

    def shown(job: JobRecord, reports: tuple[RankProgress, ...]) -> None:
        if line is None or not reports:
            return
        from dispatch.progressbar import step_line

        cur = job.current
        began = cur.executions[-1].started_at if cur is not None and cur.executions else None
        now = time.time()
        line.update(step_line(reports, now, None if began is None else now - began))

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        return follow(cluster, job_id, each=each, progress=shown if line is not None else None)
    except KeyboardInterrupt:
        if line is not None:
            line.close()
        ui.note(f"left job {job_id} running; see: dispatch status {job_id}")
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
        if pump is not None:
            pump.finish()
        if line is not None:
            line.close()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", shell_complete=_job_id_completion)
@click.option("--wait/--no-wait", default=False, help="Wait until the job has ended.")
@pass_app
def stop(app: App, job: str, wait: bool) -> None:
    """Stop JOB: no more recovery; its processes get SIGTERM, then SIGKILL after the grace period.

    \b
    Exit code 0 once the stop is requested (with --wait: once the job has ended,
    whatever its outcome; 5 if its end is unknown). A job already closed is not
    touched: its outcome is printed and the exit code is 4.
    """
    from dispatch.cli import ui
    from dispatch.cli.views import refresh_active
    from dispatch.follow import over

    record = app.resolve_job(job)
    if not over(record):
        (record,) = refresh_active(app, [record])  # it may have ended since it was last observed
    if over(record):
        ui.note(f"job {record.id} is already closed: nothing to stop")
        ui.note(describe_end(record))
        raise click.exceptions.Exit(int(Exit.REFUSED))
    cluster = app.cluster_of(record)
    cluster.operator.stop(record.id)
    ui.note(f"job {record.id}: stop requested")
    if wait:
        ended = follow_job(app, cluster, record.id, show_output=False)
        ui.note(describe_end(ended, stderr=wrote_stderr(cluster, ended), reason=launch_reason(cluster, ended)))
        if not ended.state.ended:
            raise click.exceptions.Exit(int(Exit.UNKNOWN))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", shell_complete=_job_id_completion)
@click.option("--reason", default="held by a user", show_default=True, help="Why (kept in the record).")
@pass_app
def hold(app: App, job: str, reason: str) -> None:
    """Hold JOB so it does not start; prints the hold's instance (release it with: dispatch release)."""
    record = app.resolve_job(job)
    cluster = app.cluster_of(record)
    instance = cluster.operator.hold(record.id, reason)
    click.echo(instance)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", shell_complete=_job_id_completion)
@click.option("--instance", help="Lift this hold only (needed for a hold a supervisor placed).")
@pass_app
def release(app: App, job: str, instance: str | None) -> None:
    """Lift your holds on JOB (or the one --instance), so it may start."""
    from dispatch.cli import ui

    record = app.resolve_job(job)
    cluster = app.cluster_of(record)
    lifted = cluster.operator.release(record.id, instance)
    if not lifted:
        ui.note(f"job {record.id} has no hold of yours to release")
    for i in lifted:
        click.echo(i)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", shell_complete=_job_id_completion)
@click.option("--note", help="What you did about it (kept in the record).")
@pass_app
def ack(app: App, job: str, note: str | None) -> None:
    """Acknowledge JOB's escalations: the job no longer waits for a human, and `dispatch status` stops
    pointing at it.

    For a closed job (one the supervisor handed over: a failure no rule recovers, a limit reached). The record
    keeps the escalation, marked resolved, with who acknowledged it and the --note. On a job still open, an
    escalation ends when its cause does (a hold released): ack refuses it (exit 4).
    """
    from dispatch.cli import ui

    record = app.resolve_job(job)
    cluster = app.cluster_of(record)
    resolved = cluster.operator.acknowledge(record.id, note)
    if not resolved:
        ui.note(f"job {record.id} has no escalation waiting for a human")
        return
    seqs = ", ".join(f"#{n}" for n in resolved)
    click.echo(f"job {record.id}: escalation {seqs} acknowledged")

"""Preflight: what the adapter learns about a cluster at open, as a fixed sequence of scripts.

1. **Environment** (every open): the commands exist (``sbatch squeue scontrol scancel sacct srun timeout``),
   the cluster's clock (``date +%s.%N``, bracketed by two reads of the caller's clock: offset = cluster -
   midpoint, uncertainty = half the round trip), ``scontrol show config``, ``$HOME``, and the GPUs per
   partition from ``sinfo``'s Gres (the ``Accelerators`` inventory: read at every open, read-only too), and
   each partition's nodes by CPUs and memory and its MaxNodes (:mod:`dispatch.slurm.nodeshapes`, for the
   ShapeCheck that refuses a job no node could ever run).
2. **Cache**: a probe result younger than ``preflight.freshness`` in ``preflight.cacheDir``, keyed by the
   cluster's identity (transport, host, user, ClusterName, SLURM_VERSION, AuthType), is used as is (unless it
   was probed with another ``container.apptainer`` or ``container.options``).
3. **Probe** (writable open without a fresh cache): submit a held probe job (script 2), then in script 3 set
   its begin time to an encoded hold instance and read it back from ``squeue --json`` (Hold), look it up in
   ``sacct`` (AccountingHistory), and cancel it; the same script starts a test container with Apptainer
   (ContainerImage, :mod:`dispatch.slurm.images`). The result is written to the cache.

A read-only open submits nothing: it uses a fresh cache, or answers Hold, AccountingHistory and ContainerImage
``unknown``.

Declarations: NodeLossWindow = 2 x SlurmdTimeout + 60 s; PolledLoss = MinJobAge for state, cause and exit
code, execution UNBOUNDED with accounting and 0 without (or unknown); CallBound = timeouts.script + 2 x clock
uncertainty + min(timeouts.call + 2 s, auth TTL) + 1 s, and 0 when the AuthType gives no credential
lifetime (neither auth/munge nor auth/slurm).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.accelerators import Inventory
from dispatch.adapterkit.private import not_private
from dispatch.adapterkit.programs import program
from dispatch.capabilities import Capabilities, Capability, CapabilityAnswer, Provenance, no, unknown, yes
from dispatch.clock import Clock
from dispatch.declarations import UNBOUNDED, Declarations, PolledLoss
from dispatch.errors import Unavailable, Unsupported
from dispatch.slurm import images, progress
from dispatch.slurm.gres import SINFO, parse_sinfo_gres
from dispatch.slurm.holds import encode_hold
from dispatch.slurm.nodeshapes import SINFO_SHAPES, Partitions, parse_shapes
from dispatch.slurm.parse import (
    auth_ttl,
    config_seconds,
    filter_jobs,
    parse_config,
    parse_sbatch_id,
    parse_squeue,
)
from dispatch.slurm.scripts import Script, ScriptOutput
from dispatch.slurm.settings import SlurmSettings

log = logging.getLogger("dispatch.slurm.preflight")

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sacct", "srun", "timeout")
PROBE_INSTANCE = "h00000001"
PROBE_NAME = "dispatch-preflight-probe"

RunScript = Callable[[Script, bool], ScriptOutput]


@dataclass
class ClusterFacts:
    """What preflight read from the cluster."""

    config: dict[str, str]
    version: str
    cluster_name: str
    home: str
    user: str
    offset: float
    uncertainty: float
    hold: CapabilityAnswer = field(default_factory=lambda: unknown("not probed"))
    accounting: CapabilityAnswer = field(default_factory=lambda: unknown("not probed"))
    container: CapabilityAnswer = field(default_factory=lambda: unknown("not probed"))
    """ContainerImage: whether Apptainer starts a container on the login node (:mod:`dispatch.slurm.images`)."""
    accelerators: Inventory | None = None
    """The GPUs ``sinfo`` lists per partition, read at every open (None: sinfo failed)."""
    partitions: Partitions | None = None
    """Each partition's nodes by CPUs and memory, read at every open (None: sinfo failed)."""

    @property
    def auth_ttl(self) -> float | None:
        return auth_ttl(self.config)

    @property
    def accounting_configured(self) -> bool:
        return self.config.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none"


def environment_script(settings: SlurmSettings) -> Script:
    s = Script(call_timeout=settings.timeouts.call, env=settings.env)
    s.shell(program("dispatch.slurm", "missing-commands.sh"), *COMMANDS)
    s.call(["date", "+%s.%N"])
    s.call(["scontrol", "show", "config"])
    s.shell(program("dispatch.slurm", "home-user.sh"))
    s.call(SINFO)
    s.call(SINFO_SHAPES)
    return s


def read_environment(out: ScriptOutput, before: float, after: float) -> ClusterFacts:
    missing_call = out.call(0)
    if missing_call is None or missing_call.status is None:
        raise Unavailable("preflight: the environment script did not complete")
    missing = missing_call.stdout.split()
    if missing:
        raise Unavailable(f"preflight: commands missing on the cluster: {', '.join(missing)}")
    date = out.call(1)
    config = out.call(2)
    home = out.call(3)
    if date is None or not date.ok or config is None or not config.ok or home is None:
        err = config.stderr.strip() if config else ""
        raise Unavailable(f"preflight: scontrol show config failed: {err or 'no answer'}")
    cfg = parse_config(config.stdout)
    version = cfg.get("SLURM_VERSION", "")
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        raise Unavailable(f"preflight: cannot read SLURM_VERSION from scontrol show config ({version!r})") from None
    if (major, minor) < (22, 5):
        raise Unsupported(f"Slurm {version} is older than 22.05, the oldest release this adapter supports")
    cluster_now = float(date.stdout.strip().replace("N", "0") or 0)
    mid = (before + after) / 2
    lines = [*home.stdout.splitlines(), "", ""][:2]
    sinfo = out.call(4)
    shapes = out.call(5)
    return ClusterFacts(
        config=cfg,
        version=version,
        cluster_name=cfg.get("ClusterName", ""),
        home=lines[0],
        user=lines[1],
        offset=cluster_now - mid,
        uncertainty=(after - before) / 2 + 0.01,
        accelerators=parse_sinfo_gres(sinfo.stdout) if sinfo is not None and sinfo.ok else None,
        partitions=parse_shapes(shapes.stdout) if shapes is not None and shapes.ok else None,
    )


def cache_key(settings: SlurmSettings, facts: ClusterFacts) -> str:
    ssh = settings.ssh
    ident = "|".join(
        [
            settings.transport,
            ssh.host if ssh else "",
            facts.user,
            facts.cluster_name,
            facts.version,
            facts.config.get("AuthType", ""),
        ]
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def _cache_path(settings: SlurmSettings, facts: ClusterFacts) -> str | None:
    d = settings.preflight.cache_dir
    return os.path.join(d, f"slurm-{cache_key(settings, facts)}.json") if d else None


def read_cache(settings: SlurmSettings, facts: ClusterFacts, now: float) -> bool:
    """Fill ``facts.hold``/``facts.accounting`` from a fresh cache entry; True when one was used."""
    path = _cache_path(settings, facts)
    if path is None or not os.path.lexists(path):
        return False
    why = not_private(os.path.dirname(path)) or not_private(path, directory=False)
    if why:  # another user could have written it: its answers are not taken (probed again instead)
        log.warning("the preflight cache %s is ignored: it or its directory %s", path, why)
        return False
    try:
        with open(path, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
        at = float(data["at"])
        if now - at > settings.preflight.freshness or at > now + 60:
            return False
        facts.hold = _answer(data["hold"], Provenance.CACHED)
        facts.accounting = _answer(data["accounting"], Provenance.CACHED)
        if data["container"]["with"] != _container_words(settings):
            return False  # probed with another Apptainer or other options
        facts.container = _answer(data["container"], Provenance.CACHED)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _container_words(settings: SlurmSettings) -> list[str]:
    """What the container probe depends on besides the cluster: Apptainer's program and options."""
    return [settings.container.apptainer, *settings.container.options]


def _answer(data: Mapping[str, Any], provenance: Provenance) -> CapabilityAnswer:
    from dispatch.capabilities import Answer

    return CapabilityAnswer(Answer(str(data["answer"])), f"{data['reason']} (cached)", provenance)


def write_cache(settings: SlurmSettings, facts: ClusterFacts, now: float) -> None:
    path = _cache_path(settings, facts)
    if path is None:
        return
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    data = {
        "at": now,
        "cluster": facts.cluster_name,
        "version": facts.version,
        "hold": {"answer": facts.hold.answer.value, "reason": facts.hold.reason},
        "accounting": {"answer": facts.accounting.answer.value, "reason": facts.accounting.reason},
        "container": {
            "answer": facts.container.answer.value,
            "reason": facts.container.reason,
            "with": _container_words(settings),
        },
    }
    tmp = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a stale one of a dead process with this pid (or a planted link): never written through
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def probe_submit_script(settings: SlurmSettings) -> Script:
    s = Script(call_timeout=settings.timeouts.call, env=settings.env)
    argv = ["sbatch", "--parsable", "--hold", "--no-requeue", f"--job-name={PROBE_NAME}", "--output=/dev/null"]
    argv += ["--error=/dev/null", "--time=1", "--nodes=1", "--ntasks=1"]
    d = settings.defaults
    for opt, value in (("partition", d.partition), ("account", d.account), ("qos", d.qos)):
        if value:
            argv.append(f"--{opt}={value}")
    s.call(argv, stdin="#!/bin/bash\ntrue\n")
    return s


def probe_check_script(settings: SlurmSettings, job_id: str) -> Script:
    s = Script(call_timeout=settings.timeouts.call, env=settings.env)
    s.call(["scontrol", "update", f"JobId={job_id}", f"StartTime=uts{encode_hold(PROBE_INSTANCE)}"])
    s.call(["squeue", "--json", "-t", "all", "-j", job_id])
    s.shell(program("dispatch.slurm", "probe-accounting.sh"), job_id)  # sacct learns of a job a moment late
    s.call(["scancel", job_id])
    images.add_probe(s, settings.container)
    return s


def read_probe(facts: ClusterFacts, job_id: str, out: ScriptOutput, settings: SlurmSettings) -> None:
    update, sq, sa = out.call(0), out.call(1), out.call(2)
    facts.container = images.read_probe(out.call(4), settings.container)
    if update is None or not update.ok:
        facts.hold = no(
            f"scontrol update StartTime was refused: {update.stderr.strip() if update else 'no answer'}",
            Provenance.PROBED,
        )
    elif sq is None or not sq.ok:
        facts.hold = unknown("the probe job could not be read back", Provenance.PROBED)
    else:
        _, jobs = parse_squeue(sq.stdout)
        mine = filter_jobs(jobs, ids=[job_id])
        want = encode_hold(PROBE_INSTANCE)
        if mine and mine[0].eligible_time is not None and int(mine[0].eligible_time) == want:
            facts.hold = yes(
                "a far-future start time encoding a hold instance was set and read back", Provenance.PROBED
            )
        else:
            got = mine[0].eligible_time if mine else None
            facts.hold = no(f"the start time set ({want}) read back as {got}", Provenance.PROBED)
    if not facts.accounting_configured:
        facts.accounting = no("AccountingStorageType is accounting_storage/none", Provenance.PROBED)
    elif sa is not None and sa.ok and job_id in sa.stdout.split():
        facts.accounting = yes("sacct found the probe job", Provenance.PROBED)
    else:
        facts.accounting = no(
            f"sacct did not find the probe job: {sa.stderr.strip()[:200] if sa else 'no answer'}", Provenance.PROBED
        )


def run_preflight(settings: SlurmSettings, run: RunScript, clock: Clock, *, read_only: bool) -> ClusterFacts:
    """The whole sequence; ``run(script, write)`` runs one script (raising dispatch errors)."""
    before = clock.now()
    env_out = run(environment_script(settings), False)
    after = clock.now()
    facts = read_environment(env_out, before, after)
    if read_cache(settings, facts, clock.now()):
        return facts
    if not facts.accounting_configured:
        facts.accounting = no("AccountingStorageType is accounting_storage/none")
    if read_only:
        facts.container = unknown("read-only open without a fresh preflight cache: the container runtime not probed")
        facts.hold = unknown("read-only open without a fresh preflight cache: holds not probed")
        if facts.accounting_configured:
            facts.accounting = unknown("read-only open without a fresh preflight cache: accounting not probed")
        return facts
    sub = run(probe_submit_script(settings), True).call(0)
    if sub is None or not sub.ok:
        raise Unavailable(f"preflight: the probe job was refused: {sub.stderr.strip() if sub else 'no answer'}")
    job_id = parse_sbatch_id(sub.stdout)
    read_probe(facts, job_id, run(probe_check_script(settings, job_id), True), settings)
    write_cache(settings, facts, clock.now())
    return facts


def declarations_of(settings: SlurmSettings, facts: ClusterFacts) -> Declarations:
    slurmd_timeout = config_seconds(facts.config, "SlurmdTimeout", 300.0)
    min_job_age = config_seconds(facts.config, "MinJobAge", 300.0)
    execution = UNBOUNDED if facts.accounting.yes else 0.0
    ttl = facts.auth_ttl
    if ttl is None:
        call_bound = 0.0
    else:
        call = min(settings.timeouts.call + 2.0, ttl)
        call_bound = settings.timeouts.script + 2 * facts.uncertainty + call + 1.0
    return Declarations(
        node_loss_window=2 * slurmd_timeout + 60.0,
        call_bound=float(math.ceil(call_bound)),
        polled_loss=PolledLoss(state=min_job_age, cause=min_job_age, exit_code=min_job_age, execution=execution),
    )


def pre_termination_reason(config: Mapping[str, str], kill_wait: float) -> str:
    """What a job on this cluster is sent before SIGKILL, by cause (the figures are the cluster's own)."""
    preempt_mode = config.get("PreemptMode", "OFF") or "OFF"
    user_signal = "send_user_signal" in (config.get("PreemptParameters") or "")
    preempt = (
        "preemption: not configured (PreemptMode=OFF)"
        if preempt_mode.upper().startswith("OFF")
        else f"preemption (PreemptMode={preempt_mode}): "
        + ("the CessationWarning signal" if user_signal else "SIGTERM")
        + f" at once, SIGKILL after the partition's GraceTime + KillWait={kill_wait:g}s"
    )
    return (
        f"scancel, requeue, node drain: SIGTERM, SIGKILL after KillWait={kill_wait:g}s; "
        "time limit: the CessationWarning signal (--signal=<sig>@<seconds>, to every rank; Slurm may send it up "
        f"to 60 s early), then SIGTERM at the limit and SIGKILL after KillWait={kill_wait:g}s; {preempt}"
    )


def capabilities_of(facts: ClusterFacts) -> Capabilities:
    kill_wait = config_seconds(facts.config, "KillWait", 30.0)
    return Capabilities(
        {
            Capability.CONTAINER_IMAGE: facts.container,
            Capability.NATIVE_REQUEUE: no("jobs are submitted with --no-requeue; requeue is dispatch's own call"),
            Capability.NATIVE_RESTART: no("Slurm does not restart a job in place by itself"),
            Capability.HOLD: facts.hold,
            Capability.PRE_TERMINATION_SIGNAL: yes(pre_termination_reason(facts.config, kill_wait)),
            Capability.ACCOUNTING_HISTORY: facts.accounting,
            Capability.ATTEMPT_INJECTION: yes("DISPATCH_EXECUTION=<N>.<job id>.<restart> is exported to every rank"),
            Capability.WORKING_DIRECTORY: yes(
                "sbatch --chdir; default: the current directory with the local transport, the home directory on"
                " the cluster over SSH"
            ),
            Capability.PROCS_PER_NODE: yes("sbatch --ntasks-per-node; srun starts the ranks"),
            Capability.OUTPUT_PATH: yes("per-execution files in output.dir or the dispatch.Output directory"),
            Capability.OUTPUT_READ: yes("Slurm keeps one stdout and one stderr file per execution, all ranks together"),
            Capability.OUTPUT_FOLLOW: yes("output files are re-read from the last offset while the job runs"),
            Capability.OUTPUT_RETAINED: yes(
                "output files stay in the output directory after the job ends, and each submission records where"
                " they are (<output.dir>/.jobs/<cluster>.<job id>), so they are read after squeue and sacct forgot"
                " the job"
            ),
            Capability.READMISSION_GATE: yes(
                "--no-requeue: Slurm never restarts an evicted job; only dispatch's requeue or resubmission does"
            ),
            Capability.NODE_EXCLUSION: yes("sbatch --exclude keeps a submission off named nodes"),
            Capability.ACCELERATORS: (
                facts.accelerators.answer()
                if facts.accelerators is not None
                else unknown("sinfo could not be read at open", Provenance.PROBED)
            ),
            Capability.SHARED_STORAGE: no("the backend answers from its sharedStorage setting"),
            Capability.PROGRESS_REPORTING: yes(
                f"each rank writes {progress.LAYOUT}/rank-<r>.json on the shared output directory; read with "
                "squeue's listing, for the running jobs that have reports"
            ),
            Capability.BATCH_THROTTLE: throttle_answer(facts.config),
        }
    )


def throttle_answer(config: Mapping[str, str]) -> CapabilityAnswer:
    """BatchThrottle: the array throttle ``--array=0-<n-1>%K`` where the cluster allows arrays
    (``MaxArraySize`` above 1; Slurm's default 1001 when the configuration does not say)."""
    raw = config.get("MaxArraySize", "1001").strip()
    size = int(raw) if raw.isdigit() else 1001
    if size <= 1:
        return no(f"MaxArraySize={size}: this cluster allows no job arrays, so no array throttle")
    return yes(
        f"sbatch --array=0-<n-1>%K: Slurm runs at most K tasks of the array at once; a throttled batch must go as"
        f" one array (the same sbatch options, at most {size} jobs: MaxArraySize={size})"
    )

"""dispatch.job: the context read from each adapter's environment, and the cessation warning (in a subprocess,
so the test runner's own signal handlers are never touched)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from dispatch import job
from dispatch.adapterkit.rankenv import PORT_BASE, PORT_SPAN

LOCAL_ENV = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "NODE_RANK": "1",
    "GROUP_RANK": "1",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "41234",
    "DISPATCH_JOB": "j-abc",
    "DISPATCH_SUBMISSION": "2",
    "DISPATCH_SCHEDULER_ID": "7",
    "DISPATCH_EXECUTION": "2.7.1",
    "DISPATCH_RESTART": "1",
    "DISPATCH_RANK": "3",
    "DISPATCH_WORLD_SIZE": "4",
    "DISPATCH_CHECKPOINT_DIR": "/ckpt/j-abc",
    "DISPATCH_DEADLINE": "1800000000.5",
    "DISPATCH_CESSATION_SIGNAL": "USR1",
    "DISPATCH_CESSATION_GRACE": "20",
}

SLURM_ENV = {
    "SLURM_JOB_ID": "1234",
    "SLURM_PROCID": "1",
    "SLURM_NTASKS": "2",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1",
    "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.5",
    "DISPATCH_JOB": "j-x",
    "DISPATCH_SUBMISSION": "1",
    "DISPATCH_EXECUTION": "1.1234.0",
    "DISPATCH_CHECKPOINT_DIR": "/shared/ckpt",
}


def test_context_from_the_local_adapter_environment() -> None:
    ctx = job.context(LOCAL_ENV)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.node_rank) == (3, 4, 1, 1)
    assert (ctx.job, ctx.submission, ctx.execution, ctx.restart) == ("j-abc", 2, "2.7.1", 1)
    assert ctx.checkpoint_dir == "/ckpt/j-abc"
    assert ctx.deadline == 1800000000.5
    assert ctx.seconds_left(now=1800000000.0) == 0.5
    assert (ctx.master_addr, ctx.master_port) == ("127.0.0.1", 41234)
    assert (ctx.warning_signal, ctx.warning_grace) == ("USR1", 20.0)
    assert not ctx.is_main


def test_context_under_srun_reads_slurm_variables_and_derives_the_rendezvous() -> None:
    ctx = job.context(SLURM_ENV)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.node_rank) == (1, 2, 0, 1)
    assert (ctx.submission, ctx.execution, ctx.restart) == (1, "1.1234.0", 0)
    assert ctx.master_addr == "10.0.0.5"
    # the port the Slurm adapter sets (rankenv.port_expression), below the kernel's ephemeral ports
    assert ctx.master_port == PORT_BASE + int(SLURM_ENV["SLURM_JOB_ID"]) % PORT_SPAN < 32768
    # the same on every rank of the job, different for another job
    assert job.context({**SLURM_ENV, "SLURM_PROCID": "0"}).master_port == ctx.master_port
    assert job.context({**SLURM_ENV, "SLURM_JOB_ID": "1235"}).master_port != ctx.master_port
    assert ctx.deadline is None and ctx.seconds_left() is None


def test_restart_comes_from_the_execution_identity_or_slurm() -> None:
    assert job.context({"DISPATCH_EXECUTION": "1.99.4"}).restart == 4
    assert job.context({"SLURM_RESTART_COUNT": "2"}).restart == 2


def test_outside_dispatch_a_single_process_context() -> None:
    ctx = job.context({})
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.node_rank, ctx.restart) == (0, 1, 0, 0, 0)
    assert ctx.job is None and ctx.submission is None and ctx.checkpoint_dir is None and ctx.deadline is None
    assert ctx.is_main


@pytest.mark.parametrize(("name", "value"), [("RANK", "x"), ("DISPATCH_DEADLINE", "soon"), ("MASTER_PORT", "")])
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    env = {name: value}
    if value == "":
        assert job.context(env).master_port == 29500  # empty counts as unset
        return
    with pytest.raises(ValueError, match=name):
        job.context(env)


def test_the_job_module_needs_nothing_outside_the_standard_library() -> None:
    code = (
        "import sys, importlib.util\n"
        "spec = importlib.util.spec_from_file_location('j', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['j'] = m; spec.loader.exec_module(m)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('dispatch', 'yaml', 'click')))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code, job.__file__], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_the_job_module_loads_the_standard_library_and_nothing_else_of_dispatch() -> None:
    """A training script's ``from dispatch import job`` must be cheap and safe before anything else: the package
    imports its public names lazily, so only ``dispatch`` itself and ``dispatch.job`` are added."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from dispatch import job\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    added = out.stdout.split()
    assert "dispatch.job" in added, added
    ours = sorted(m for m in added if m.split(".")[0] == "dispatch")
    assert ours == ["dispatch", "dispatch.job"], ours
    foreign = [m for m in added if m.split(".")[0] not in (*sys.stdlib_module_names, "dispatch")]
    assert not foreign, foreign


def test_the_package_still_offers_its_public_names() -> None:
    import dispatch

    for name in dispatch.__all__:
        assert getattr(dispatch, name) is not None, name
    assert dispatch.JobSpec.__module__ == "dispatch.spec"
    assert set(dispatch.__all__) <= set(dir(dispatch))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = dispatch.no_such_name  # type: ignore[attr-defined]


def test_a_submodule_is_an_attribute_of_the_package_after_a_plain_import() -> None:
    """``import dispatch`` then ``dispatch.rules.RuleSet``, as callers wrote it when the package imported every
    submodule eagerly (bench/faults.py does): the submodule is imported on first use."""
    code = "import dispatch; print(dispatch.rules.RuleSet.__name__, dispatch.supervise.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["RuleSet", "dispatch.supervise"]


CHILD = textwrap.dedent(
    """
    import sys, time
    from dispatch import job
    seen = []
    job.on_cessation(lambda n: seen.append(n.name))
    print("ready", job.ceasing(), flush=True)
    assert job.wait(30)
    n = job.cessation()
    print("warned", n.name, n.terminating, job.ceasing(), seen, flush=True)
    deadline = time.time() + 30
    while not job.cessation().terminating and time.time() < deadline:
        time.sleep(0.01)
    n = job.cessation()
    print("terminating", n.name, n.terminating, seen, flush=True)
    sys.exit(n.exit_code)
    """
)


def _child(env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready False"
    return proc


def test_the_warning_signal_then_sigterm_reach_callbacks_and_the_flag() -> None:
    proc = _child({"DISPATCH_CESSATION_SIGNAL": "USR1"})
    assert proc.stdout is not None
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout.readline().split() == ["warned", "SIGUSR1", "False", "True", "['SIGUSR1']"]
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().split() == ["terminating", "SIGTERM", "True", "['SIGUSR1',", "'SIGTERM']"]
    assert proc.wait(30) == 128 + signal.SIGTERM


def test_sigterm_alone_is_a_warning_and_repeated_ones_do_not_end_the_process() -> None:
    # Slurm sends SIGTERM twice on preemption (slurmstepd, then srun); the job must live to checkpoint
    code = CHILD.replace('print("terminating"', 'time.sleep(1); print("terminating"')
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready False"
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().split() == ["warned", "SIGTERM", "True", "True", "['SIGTERM']"]
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().split() == ["terminating", "SIGTERM", "True", "['SIGTERM']"]
    assert proc.wait(30) == 128 + signal.SIGTERM


EARLY = textwrap.dedent(
    """
    import sys
    print("started", flush=True)
    sys.stdin.readline()  # the test signals this process here, before dispatch.job is imported
    from dispatch import job
    seen = []
    job.on_cessation(lambda n: seen.append(n.name))
    print("listening", job.ceasing(), seen, flush=True)
    """
)


def test_a_warning_sent_before_the_handler_exists_is_delivered_once_it_is_installed() -> None:
    """The adapters start a rank with the warning signal blocked (here as the Slurm adapter does it, with
    ``env --block-signal``): a warning that comes while the interpreter starts stays pending and reaches the
    handler when :mod:`dispatch.job` installs it, instead of being lost or ending the process."""
    proc = subprocess.Popen(
        ["env", "--block-signal=USR1", sys.executable, "-c", EARLY],
        env={**os.environ, "DISPATCH_CESSATION_SIGNAL": "USR1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGUSR1)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().split() == ["listening", "True", "['SIGUSR1']"]
    assert proc.wait(30) == 0


def test_without_a_warning_signal_usr1_keeps_its_default_action() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DISPATCH_CESSATION_SIGNAL"}
    proc = _child(env)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(30) == -signal.SIGUSR1


def test_an_unknown_warning_signal_is_named() -> None:
    job.reset_for_tests()
    saved = os.environ.get("DISPATCH_CESSATION_SIGNAL")
    os.environ["DISPATCH_CESSATION_SIGNAL"] = "NOPE"
    try:
        with pytest.raises(ValueError, match="DISPATCH_CESSATION_SIGNAL"):
            job.ceasing()
    finally:
        if saved is None:
            del os.environ["DISPATCH_CESSATION_SIGNAL"]
        else:
            os.environ["DISPATCH_CESSATION_SIGNAL"] = saved
        job.reset_for_tests()

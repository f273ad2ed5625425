"""Container images on Slurm without a cluster: the apptainer words each rank runs, the image reference, the
settings, and how the probe's output becomes ContainerImage (tests/slurm/test_images_clusters.py runs them for
real)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

import dispatch.slurm as slurm
from dispatch.capabilities import Answer, Capability, Provenance
from dispatch.clock import FakeClock
from dispatch.errors import ConfigError, SpecError
from dispatch.extensions import CessationWarning, Image, SharedCheckpoint
from dispatch.settings import decode
from dispatch.slurm import images
from dispatch.slurm.scripts import CallOutput
from dispatch.slurm.settings import ContainerSettings, SlurmSettings
from dispatch.slurm.submit import build
from dispatch.slurmtest import RELEASE_2605, TranscriptExecutor, ready_preflight
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

C = ContainerSettings(options=["--userns", "--nv"])


def test_the_words_carry_the_clusters_options_each_bind_once_the_working_directory_and_the_image() -> None:
    words = images.apptainer_words(Image("/shared/img.sif"), C, ["/w", "/out", "/w"], "/w")
    assert words == [
        "apptainer", "exec", "--userns", "--nv", "--bind", "/w", "--bind", "/out", "--pwd", "/w",
        "--", "/shared/img.sif",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("ref", "given"),
    [
        ("/shared/img.sif", "/shared/img.sif"),
        ("/shared/sandbox", "/shared/sandbox"),
        ("docker://ghcr.io/x/y:1", "docker://ghcr.io/x/y:1"),
        ("oras://example.org/y:1", "oras://example.org/y:1"),
        ("pytorch/pytorch:2.1", "docker://pytorch/pytorch:2.1"),  # as Kubernetes reads it: one spec for both
        ("registry.example/team/img@sha256:ab", "docker://registry.example/team/img@sha256:ab"),
    ],
)
def test_the_image_reference_apptainer_is_given(ref: str, given: str) -> None:
    assert images.image_ref(Image(ref)) == given


def test_the_image_is_after_the_end_of_apptainers_options() -> None:
    """``--`` ends Apptainer's options (cobra/pflag drops it): the image and the argv after it are never options."""
    words = images.apptainer_words(Image("oras://x/-y:1"), C, ["/w"], "/w")
    assert words[-2:] == ["--", "oras://x/-y:1"]
    assert words.index("--") > max(i for i, w in enumerate(words[:-2]) if w.startswith("-") and w != "--")


@pytest.mark.parametrize("ref", ["-x://y", "--help", "-/i.sif"])
def test_an_image_reference_starting_with_a_dash_is_refused_when_read(ref: str) -> None:
    with pytest.raises(SpecError, match="does not start with '-'"):
        Image(ref)


def test_pull_policy_always_skips_the_cache_and_never_needs_a_path() -> None:
    assert "--disable-cache" in images.apptainer_words(Image("x:1", pull_policy="Always"), C, [], "")
    assert "--disable-cache" not in images.apptainer_words(Image("/i.sif", pull_policy="Always"), C, [], "")
    assert images.apptainer_words(Image("/i.sif", pull_policy="Never"), C, [], "")[-1] == "/i.sif"
    with pytest.raises(SpecError, match="pullPolicy"):
        images.apptainer_words(Image("x:1", pull_policy="Never"), C, [], "")


@pytest.mark.parametrize("bad", ["/a,b", "/a:b"])
def test_a_directory_apptainer_cannot_bind_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(SpecError, match="cannot be bound"):
        images.apptainer_words(Image("/i.sif"), C, [bad], bad)


def test_the_batch_script_binds_the_working_output_and_checkpoint_directories() -> None:
    spec = JobSpec(
        ("python3", "train.py", "--lr", "1e-3"),
        nodes=2,
        working_dir="/scratch/run 1",
        extensions=(Image("/shared/img.sif"), SharedCheckpoint("/shared/ckpt")),
    )
    settings = decode(SlurmSettings, {"container": {"apptainer": "/opt/apptainer/bin/apptainer", "options": ["-e"]}})
    batch = build(StartRequest("j", 1, "dsp-j-1", spec), settings, "26.05.5", "/o").batch
    assert batch.endswith(
        "dispatch-rank /opt/apptainer/bin/apptainer exec -e --bind '/scratch/run 1' --bind /o --bind /shared/ckpt"
        " --pwd '/scratch/run 1' -- /shared/img.sif python3 train.py --lr 1e-3\n"
    )
    # the launch checks look for Apptainer and the image where the batch script runs, not for the program
    assert "[ -f /opt/apptainer/bin/apptainer ] && [ -x /opt/apptainer/bin/apptainer ]" in batch
    assert "[ -e /shared/img.sif ] || " in batch and "python3 is not found" not in batch


def test_a_missing_image_fails_the_launch_before_srun(tmp_path: object) -> None:
    spec = JobSpec(("true",), extensions=(Image("/no/such/image.sif"),))
    settings = decode(SlurmSettings, {"container": {"apptainer": "bash"}})  # a program that exists here
    batch = build(StartRequest("j", 1, "dsp-j-1", spec), settings, "26.05.5", "/o", "/").batch
    done = subprocess.run(["bash", "-s"], input=batch, capture_output=True, text=True, timeout=60)
    assert done.returncode == 125, done.stderr
    assert done.stderr == "dispatch: launch failed: the image /no/such/image.sif does not exist\n"


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"apptainer": ""}, "container.apptainer"),
        ({"apptainer": "apptainer --userns"}, "container.apptainer"),
        ({"apptainer": "-x"}, "container.apptainer"),
        ({"options": ["--userns", "nv"]}, "container.options[1]"),
        ({"options": ["--bind=/a\n"]}, "container.options[0]"),
    ],
)
def test_bad_container_settings_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        decode(SlurmSettings, {"container": data})
    assert err.value.path == key


def _call(stdout: str, status: int = 0, stderr: str = "") -> CallOutput:
    return CallOutput(0, stdout, stderr, status)


def test_the_probe_answers_yes_when_its_container_ran() -> None:
    answer = images.read_probe(_call("found /usr/bin/apptainer\napptainer version 1.4.5\n"), C)
    assert answer.answer is Answer.YES and answer.provenance is Provenance.PROBED
    assert answer.reason == "apptainer version 1.4.5 at /usr/bin/apptainer started a test container on the login node"


def test_the_probe_answers_no_naming_apptainers_own_error() -> None:
    # the stderr of Debian's apptainer 1.4.5 as a normal user in the sid test cluster's chroot (colours and all)
    stderr = (
        "INFO   :   apptainer-suid, or compile with ./mconfig --with-suid\n"
        "\x1b[91mERROR  : Failed to create user namespace: not allowed to create user namespace\n\x1b[0m"
    )
    answer = images.read_probe(_call("found /usr/bin/apptainer\napptainer version 1.4.5\n", 1, stderr), C)
    assert answer.answer is Answer.NO
    assert answer.reason == (
        "apptainer version 1.4.5 at /usr/bin/apptainer cannot start a container on the login node: "
        "Failed to create user namespace: not allowed to create user namespace"
    )


def test_the_probe_answers_no_where_apptainer_is_missing_and_names_pyxis() -> None:
    assert images.read_probe(_call("missing\n"), C).reason == "apptainer is not found in PATH on the login node"
    with_pyxis = images.read_probe(_call("missing\npyxis\n"), C)
    assert with_pyxis.answer is Answer.NO and with_pyxis.reason.endswith(images.PYXIS)


def test_a_probe_that_did_not_report_is_unknown() -> None:
    assert images.read_probe(None, C).answer is Answer.UNKNOWN
    assert images.read_probe(CallOutput(0, "found /x\n", "", None), C).answer is Answer.UNKNOWN


def test_the_probe_script_runs_here_and_finds_no_such_program() -> None:
    """The probe's bash, run on this machine with a program that does not exist."""
    done = subprocess.run(
        ["bash", "-c", images.PROBE, "_", "dispatch-no-such-apptainer", "--userns"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "missing")


def test_the_warning_signal_is_neutralised_again_inside_the_image() -> None:
    """Apptainer's starter clears the signal mask and dispositions, so the blocking wrapper runs twice: on the
    node (around the rank wrapper) and inside the image (around the program)."""

    spec = JobSpec(("train",), time_limit=600, extensions=(Image("/i.sif"), CessationWarning(seconds=30)))
    batch = build(StartRequest("j", 1, "dsp-j-1", spec), SlurmSettings(), "26.05.5", "/o", "/w").batch
    words = shlex.split(batch[batch.index("exec srun ") :])
    rank = words[words.index("--") + 1 :]
    image = rank.index("/i.sif")
    assert rank[0] == "/bin/sh" and 'trap "" USR1' in rank[2]  # on the node
    assert rank[image + 1] == "/bin/sh" and 'trap "" USR1' in rank[image + 3] and rank[-1] == "train"  # in the image


def test_the_cached_answer_serves_the_same_apptainer_and_options_only(tmp_path: object) -> None:
    now = 1_800_000_000.0
    cache = {"cacheDir": str(tmp_path)}
    ex = TranscriptExecutor(ready_preflight(RELEASE_2605, now=now, apptainer=True))
    slurm.new({"preflight": cache}, executor=ex, clock=FakeClock(now))
    again = TranscriptExecutor(ready_preflight(RELEASE_2605, now=now, read_only=True))
    b = slurm.new({"preflight": cache}, executor=again, clock=FakeClock(now + 10), read_only=True)
    answer = b.capabilities()[Capability.CONTAINER_IMAGE]
    assert (answer.answer, answer.provenance) == (Answer.YES, Provenance.CACHED)
    other = TranscriptExecutor(ready_preflight(RELEASE_2605, now=now, read_only=True))
    changed = {"preflight": cache, "container": {"options": ["--userns"]}}
    b = slurm.new(changed, executor=other, clock=FakeClock(now + 10), read_only=True)
    assert b.capabilities()[Capability.CONTAINER_IMAGE].answer is Answer.UNKNOWN  # not probed with these options

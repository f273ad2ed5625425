"""Container images on Slurm: every rank runs inside the job's ``dispatch.Image`` through Apptainer.

**Probe** (:data:`PROBE`, run with the other preflight probes and cached with them): Apptainer's program
(``container.apptainer``) is looked up in PATH on the login node, and asked to start a real container there: an
empty temporary sandbox directory with the host's ``/usr`` (and ``/bin``, ``/lib``... as directories or links)
bound in, running ``true``, with the cluster's ``container.options``. ``ContainerImage`` is yes when that
container ran; no, with the reason, when the program is missing or could not start a container (no user
namespaces and no setuid install, say: its own error line is the reason). pyxis (``--container-image`` in
``srun --help``) is detected and named in the reason, but dispatch does not start ranks through it.

**Run** (:func:`apptainer_words`): the words that go between the rank wrapper and the user's argv, so each
rank's environment is computed on the node and then ``exec apptainer exec [options] --bind <dir>...
--pwd <working dir> -- <image> <argv>``: the ``--`` ends Apptainer's options (its command line is parsed by
cobra/pflag, which takes a bare ``--`` as the end of the flags and drops it, so the image is the first word after
it), so neither the image reference nor the user's argv is ever read as an option. Apptainer passes the
environment into the container (``MASTER_ADDR``, ``RANK``, ``DISPATCH_*`` and the spec's ``env`` arrive intact)
and the argv as argv. The image reference:

* an absolute path (a SIF file or a sandbox directory on a filesystem the nodes share) is used as is, and its
  existence is a launch check;
* a reference with a scheme (``docker://``, ``oras://``, ``library://``...) is used as is;
* anything else is a registry image name as Kubernetes reads it (``pytorch/pytorch:2.1``) and becomes
  ``docker://<ref>``, so one spec runs on both.

``pullPolicy``: Apptainer keeps a pulled registry image in its cache (``IfNotPresent``, the default);
``Always`` adds ``--disable-cache``; ``Never`` is refused for a registry reference (a path is never pulled).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT, launch_checks
from dispatch.adapterkit.programs import program
from dispatch.capabilities import CapabilityAnswer, Provenance, no, unknown, yes
from dispatch.errors import SpecError
from dispatch.extensions import Image
from dispatch.slurm.scripts import CallOutput, Script
from dispatch.slurm.settings import ContainerSettings

PROBE = program("dispatch.slurm", "apptainer-probe.sh")
"""The probe (``programs/apptainer-probe.sh``, ``bash -c PROBE _ <apptainer> <options>...``): stdout ``missing``, or
``found <path>``, the version line, ``pyxis`` when srun has ``--container-image``; the status is the container
start's; stderr its errors."""

PYXIS = "pyxis's --container-image is in srun --help, but dispatch starts images through Apptainer only"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def add_probe(script: Script, settings: ContainerSettings) -> int:
    """Add the probe call to ``script`` (under the script's call deadline, ``timeouts.call``); its index."""
    return script.shell(PROBE, settings.apptainer, *settings.options)


def read_probe(call: CallOutput | None, settings: ContainerSettings) -> CapabilityAnswer:
    """``ContainerImage`` from the probe call's output (unknown when it did not report)."""
    if call is None or call.status is None:
        return unknown("the container probe did not report", Provenance.PROBED)
    lines = call.stdout.splitlines()
    pyxis = f"; {PYXIS}" if "pyxis" in lines else ""
    if not lines or lines[0] == "missing":
        return no(f"{settings.apptainer} is not found in PATH on the login node{pyxis}", Provenance.PROBED)
    path = lines[0].removeprefix("found ")
    version = lines[1].strip() if len(lines) > 1 and lines[1] != "pyxis" else "unknown version"
    if call.ok:
        return yes(f"{version} at {path} started a test container on the login node", Provenance.PROBED)
    errors = [ln.strip() for ln in _ANSI.sub("", call.stderr).splitlines() if ln.strip()]
    worst = [ln for ln in errors if ln.startswith(("ERROR", "FATAL"))] or errors or [f"exit {call.status}"]
    why = re.sub(r"^(ERROR|FATAL)\s*:\s*", "", worst[-1])[:300]
    return no(f"{version} at {path} cannot start a container on the login node: {why}{pyxis}", Provenance.PROBED)


def image_ref(image: Image) -> str:
    """What ``apptainer exec`` is given for ``image`` (see the module docstring)."""
    ref = image.ref
    if ref.startswith("/") or "://" in ref:
        return ref
    return f"docker://{ref}"


def apptainer_words(image: Image, settings: ContainerSettings, binds: Sequence[str], workdir: str) -> list[str]:
    """``apptainer exec`` with the cluster's options, a ``--bind`` for each of ``binds`` (absolute directories,
    each once, in order), ``--pwd`` ``workdir`` (when given) and the image; the argv follows. SpecError for a
    bind Apptainer's ``--bind`` syntax cannot carry (``,`` or ``:``) or a ``pullPolicy`` it cannot honour."""
    ref = image_ref(image)
    local = ref.startswith("/")
    if image.pull_policy == "Never" and not local:
        raise SpecError(
            "extensions.dispatch.Image.pullPolicy", "Never needs an image path on Slurm: a registry image is pulled"
        )
    words = [settings.apptainer, "exec", *settings.options]
    if image.pull_policy == "Always" and not local:
        words.append("--disable-cache")
    seen: set[str] = set()
    for path in binds:
        if path in seen:
            continue
        seen.add(path)
        if "," in path or ":" in path:
            raise SpecError("working_dir", f"{path!r} cannot be bound into the image (Apptainer reads , and : in it)")
        words += ["--bind", path]
    if workdir:
        words += ["--pwd", workdir]
    words += ["--", ref]
    return words


def image_checks(image: Image, settings: ContainerSettings, workdir: str | None) -> list[str]:
    """The launch checks of an image job (:func:`dispatch.adapterkit.jobscript.launch_checks`'s, for the batch
    script's node): the working directory can be entered, Apptainer's program is an executable file (or found in
    PATH), and an image given as a path exists. The user's program is inside the image: not checked here (a
    missing one is Apptainer's error, exit 255, read as the rank's exit)."""
    lines = launch_checks([settings.apptainer], workdir)
    ref = image_ref(image)
    if ref.startswith("/"):
        q = shlex.quote(ref)
        text = shlex.quote(f"dispatch: launch failed: the image {ref} does not exist")
        lines.append(f"[ -e {q} ] || {{ printf '%s\\n' {text} >&2; exit {LAUNCH_FAILED_EXIT}; }}")
    return lines

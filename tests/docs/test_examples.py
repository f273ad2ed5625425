"""Every fenced block in README.md and docs/ is run, so no example can drift from the code.

How each language is run, and how a block is exempted, is in docs/dev/docs-examples.md. Blocks of one document
run in order in one working directory with their own XDG config and state directories (so the local adapter's
records and a config file written by one block are seen by the next); the working directory starts with
``train.py`` (a rank-aware script that prints and exits 0) and a link to the repository's ``examples/``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from dispatch.cli import config as cli_config
from dispatch.registry import adapter
from dispatch.rules import RuleSet
from dispatch.settings import decode

from .blocks import ROOT, RUN, TEXT, Block, all_blocks, blocks, documents

TIMEOUT = 120.0
TRAIN_PY = """\
import os, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
for step in range(2):
    time.sleep(0.1)
    print(f"rank {rank}/{world} step {step}", flush=True)
"""
_JOB_ID = re.compile(r"\b(?:[0-9a-f]{16}|[0-9a-f]{14})\b")
_CONFIG_KEYS = {"default", "records", "clusters"}


def _workdir(tmp: Path) -> tuple[Path, dict[str, str]]:
    work = tmp / "work"
    work.mkdir()
    (work / "train.py").write_text(TRAIN_PY)
    (work / "examples").symlink_to(ROOT / "examples")
    bindir = tmp / "bin"
    bindir.mkdir()
    for name in ("python", "python3"):
        (bindir / name).symlink_to(sys.executable)
    dispatch_bin = shutil.which("dispatch") or str(Path(sys.executable).parent / "dispatch")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(
        XDG_CONFIG_HOME=str(tmp / "config"),
        XDG_STATE_HOME=str(tmp / "state"),
        PATH=os.pathsep.join([str(bindir), str(Path(dispatch_bin).parent), env.get("PATH", "")]),
        NO_COLOR="1",
        # an example that reads an SPI name from ``dispatch`` (moved to ``dispatch.spi``) fails
        PYTHONWARNINGS="error:dispatch.:DeprecationWarning",
    )
    return work, env


def _run(argv: list[str], block: Block, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after {TIMEOUT:g}s: {argv[-1][:200]}")


def _require(done: subprocess.CompletedProcess[str], block: Block, code: int = 0) -> None:
    if done.returncode != code:
        pytest.fail(
            f"{block.where} ({block.lang}): exit {done.returncode} (expected {code})\n"
            f"--- block ---\n{block.text}--- stdout ---\n{done.stdout[-3000:]}--- stderr ---\n{done.stderr[-3000:]}"
        )


def _console(block: Block, work: Path, env: dict[str, str], ids: dict[str, str]) -> None:
    """``$ command`` lines run in order; job ids shown in the documented output are mapped to the real ones.

    A command must exit 0 unless the next command is ``echo $?``, whose documented output is the expected code.
    """
    steps: list[tuple[str, list[str]]] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            steps.append((cmd, []))
        elif steps:
            steps[-1][1].append(line)
        i += 1
    if not steps:
        pytest.fail(f"{block.where}: a console block without a `$ command` line (use ```text for output)")
    last = 0
    for n, (cmd, shown) in enumerate(steps):
        if cmd.strip() == "echo $?":
            assert shown and shown[0].strip() == str(last), f"{block.where}: `{cmd}` shows {shown[:1]}, exit was {last}"
            continue
        real_cmd = _JOB_ID.sub(lambda m: ids.get(m.group(0), m.group(0)), cmd)
        done = _run(["bash", "-c", real_cmd], block, work, env)
        expected = int(steps[n + 1][1][0]) if n + 1 < len(steps) and steps[n + 1][0].strip() == "echo $?" else 0
        _require(done, block, expected)
        last = done.returncode
        real_ids = _JOB_ID.findall(done.stdout + done.stderr)
        for doc_id in _JOB_ID.findall("\n".join(shown)):
            if doc_id not in ids and real_ids:
                ids[doc_id] = real_ids.pop(0)
            elif real_ids and ids.get(doc_id) == real_ids[0]:
                real_ids.pop(0)


def _toml(block: Block, work: Path) -> None:
    """A CLI config (top-level keys among default/records/clusters): loaded by the CLI's loader and each cluster's
    settings decoded by its adapter's settings class. Anything else is a rules file."""
    data = tomllib.loads(block.text)
    if data and set(data) <= _CONFIG_KEYS:
        path = work / "config.toml"
        path.write_text(block.text)
        cfg = cli_config.load(path)
        for cluster in cfg.clusters.values():
            info = adapter(cluster.adapter)
            if info.settings is not None:
                decode(info.settings, cluster.settings, path="")
    else:
        path = work / "rules.toml"
        path.write_text(block.text)
        RuleSet.load(path)


def run_block(block: Block, work: Path, env: dict[str, str], ids: dict[str, str]) -> None:
    """Run one block; ``ids`` maps job ids shown in the document to those its commands really made."""
    if block.file:
        (work / block.file).write_text(block.text)
    elif block.lang == "python":
        _require(_run([sys.executable, "-c", block.text], block, work, env), block)
    elif block.lang in ("bash", "sh"):
        _require(_run(["bash", "-euo", "pipefail", "-c", block.text], block, work, env), block)
    elif block.lang == "console":
        _console(block, work, env, ids)
    elif block.lang == "toml":
        _toml(block, work)
    elif block.lang == "yaml":
        RuleSet.from_data(yaml.safe_load(block.text))
    elif block.lang == "json":
        json.loads(block.text)
    else:  # pragma: no cover - test_every_block_is_known fails first
        raise AssertionError(block.lang)


DOCS = [d for d in documents() if any(b.lang in RUN and not b.skip for b in blocks(d))]


LEFT_OUT = {m for m in os.environ.get("DISPATCH_DOCS_LEFT_OUT", "").replace(",", " ").split() if m}
"""Modules this environment leaves out on purpose (scripts/fresh-venv.sh: torch, never installed there)."""


def _missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_document_examples_run(doc: Path, tmp_path: Path) -> None:
    """A document needing a module that is missing fails, unless this environment leaves it out on purpose."""
    runnable = [b for b in blocks(doc) if b.lang in RUN and not b.skip]
    missing = sorted({m for b in runnable for m in _missing(b.needs)})
    if missing and set(missing) <= LEFT_OUT:
        pytest.skip(f"needs {', '.join(missing)}, which this environment leaves out (DISPATCH_DOCS_LEFT_OUT)")
    assert not missing, f"{doc.relative_to(ROOT)} needs {', '.join(missing)}: install it (scripts/test does)"
    work, env = _workdir(tmp_path)
    ids: dict[str, str] = {}
    for block in blocks(doc):
        if block.lang in RUN and not block.skip:
            run_block(block, work, env, ids)


def test_every_block_is_known() -> None:
    """Each block names a language the harness runs, or ``text``; an exemption states why."""
    bad = [f"{b.where}: ```{b.lang or '(none)'}" for b in all_blocks() if b.lang not in RUN | TEXT]
    assert not bad, "blocks without a known language (python, bash, sh, console, toml, yaml, json, text):\n" + (
        "\n".join(bad)
    )
    vague = [b.where for b in all_blocks() if b.skip is not None and len(b.skip) < 15]
    assert not vague, f"exemptions must say why (docs-test: skip: <reason>): {vague}"


EXEMPT = [b for b in all_blocks() if b.skip and b.lang in RUN]


def _shell_of(block: Block) -> str:
    """The shell text of a ``bash``/``sh`` block, or the ``$`` commands of a ``console`` block (a command
    continued with ``\\`` on the next lines, as :func:`_console` reads it)."""
    if block.lang != "console":
        return block.text
    commands: list[str] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ "):
            cmd = lines[i][2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            commands.append(cmd)
        i += 1
    return "\n".join(commands) + "\n"


@pytest.mark.parametrize("block", EXEMPT, ids=[b.where for b in EXEMPT])
def test_an_exempt_block_is_still_well_formed(block: Block) -> None:
    """An exempt block is not run (its document says why), but it must still parse: Python compiles, shell
    text (and a console block's ``$`` commands) passes ``bash -n``."""
    if block.lang == "python":
        compile(block.text, block.where, "exec")
    elif block.lang in ("bash", "sh", "console"):
        got = subprocess.run(["bash", "-n"], input=_shell_of(block), capture_output=True, text=True, timeout=30)
        assert got.returncode == 0, f"{block.where}: {got.stderr}"
    else:  # data: parsed, as an exempt block of any other language is
        {"toml": tomllib.loads, "yaml": yaml.safe_load, "json": json.loads}[block.lang](block.text)


def test_the_well_formed_check_sees_a_broken_block() -> None:
    broken = Block(ROOT / "x.md", 1, "console", "$ dispatch run -- 'unclosed\n", skip="a test")
    got = subprocess.run(["bash", "-n"], input=_shell_of(broken), capture_output=True, text=True, timeout=30)
    assert got.returncode != 0


def test_annotations_are_read(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(
        "<!-- docs-test: needs torch, numpy -->\n<!-- docs-test: file train.py -->\n\n```python\nimport torch\n```\n"
        "<!-- docs-test: skip: it would drain a node of the shared cluster -->\n```sh\nscontrol\n```\n```text\nx\n```\n"
    )
    first, second, third = blocks(doc)
    assert (first.file, first.needs, first.skip) == ("train.py", ("torch", "numpy"), None)
    assert (second.skip, second.needs) == ("it would drain a node of the shared cluster", ())
    assert (third.lang, third.skip, third.file) == ("text", None, None)
    assert _missing(("json", "no_such_module_here")) == ["no_such_module_here"]

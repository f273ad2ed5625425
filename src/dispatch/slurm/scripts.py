"""Scripts: every operation is one bash script, framed by a random nonce, each Slurm call under a deadline.

A script starts by printing ``@@<nonce>:start`` (so a caller can tell "nothing ran" from "something may have
run" when the transport fails), sets an absolute deadline in cluster time, then runs its calls through a
shell function ``_dsp_call`` that, for call ``i``:

* prints ``@@<nonce>:i:out``, then the call's stdout;
* if the deadline has passed, runs nothing and reports status ``notrun``;
* otherwise runs the argv under ``timeout`` (SIGTERM at the call deadline, SIGKILL 2 s later);
* prints ``@@<nonce>:i:err``, the call's stderr, and ``@@<nonce>:i:status:<rc>``.

Every script runs under ``umask 077`` (:mod:`dispatch.slurm.trust`). Every marker line is preceded by a newline
that is not part of the call's output, so outputs come back byte for byte. Every value is shlex-quoted; a batch
script travels in a heredoc whose quoted terminator carries the nonce. :func:`parse_output` reads a script's
stdout back into :class:`CallOutput` values.
"""

from __future__ import annotations

import math
import re
import secrets
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

NONCE_PREFIX = "dsn"
NONCE_RE = re.compile(NONCE_PREFIX + r"[0-9a-f]{16}")
TIMEOUT_STATUS = 124


def new_nonce() -> str:
    return NONCE_PREFIX + secrets.token_hex(8)


@dataclass(frozen=True)
class CallOutput:
    """One call's stdout, stderr and status (``None`` when it never reported one: the script was cut)."""

    index: int
    stdout: str
    stderr: str
    status: int | None
    not_run: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def expired(self) -> bool:
        """The call ran into its deadline (it may have acted before it was killed)."""
        return self.status in (TIMEOUT_STATUS, 137)


@dataclass(frozen=True)
class ScriptOutput:
    started: bool
    calls: Mapping[int, CallOutput]

    def call(self, index: int) -> CallOutput | None:
        return self.calls.get(index)


@dataclass
class Script:
    """A script under construction. ``deadline`` is absolute cluster time (epoch seconds) or None."""

    nonce: str = field(default_factory=new_nonce)
    call_timeout: float = 30.0
    deadline: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    width: int = 4
    """How many :meth:`call_concurrently` calls run at once."""
    _body: list[str] = field(default_factory=list)
    _calls: int = 0
    _pending: list[int] = field(default_factory=list)
    _concurrent: bool = False
    _payloads: bool = False

    def call(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float | None = None) -> int:
        """Add one deadline-wrapped call of ``argv``; ``stdin`` is fed through a nonce-terminated heredoc, or, from
        :data:`PAYLOAD_MIN` characters on, as a payload: ``head -c <bytes>`` copies it from the script's own input
        to a file the call reads. bash reads a script from a pipe one byte at a time (so that the commands it
        runs can read what follows), which costs a system call per byte of a heredoc (seconds for a megabyte
        over SSH); ``head`` reads the payload in blocks, exactly its bytes, and bash goes on after them. A
        payload cut short ends the script there: the call it was for is never read, so never run."""
        self._flush()
        return self._add("_dsp_call", argv, stdin, timeout, "")

    def call_concurrently(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float | None = None) -> int:
        """Like :meth:`call`, but run in the background, :attr:`width` at a time, with the calls added next to
        it. Their framed outputs are printed together, in order, once the last of them ended (before the next
        ordinary call, or at the end of the script): a connection cut meanwhile leaves all of them unreported
        (unknown), never one reported for another."""
        self._concurrent = True
        if len(self._pending) % max(1, self.width) == 0 and self._pending:
            self._body.append("wait")
        index = self._add("_dsp_bg", argv, stdin, timeout, " &")
        self._pending.append(index)
        return index

    def _add(self, fn: str, argv: Sequence[str], stdin: str | None, timeout: float | None, suffix: str) -> int:
        index = self._calls
        self._calls += 1
        limit = self.call_timeout if timeout is None else timeout
        words = " ".join(shlex.quote(a) for a in argv)
        line = f"{fn} {index} {_seconds(limit)} {words}"
        if stdin is None:
            self._body.append(line + " </dev/null" + suffix)
        elif len(stdin) >= PAYLOAD_MIN:
            self._payloads = True
            size = len(stdin.encode("utf-8", "surrogateescape"))
            self._body.append(f'head -c {size} >"$_dsp_pay/{index}"\n{stdin}')
            self._body.append(f'{line} <"$_dsp_pay/{index}"{suffix}')
        else:
            end = f"END_{self.nonce}"
            if end in stdin:
                raise ValueError("a heredoc body contains its own terminator")
            body = stdin if stdin.endswith("\n") else stdin + "\n"
            self._body.append(f"{line} <<'{end}'{suffix}\n{body}{end}")
        return index

    def _flush(self) -> None:
        if self._pending:
            self._body.append("wait")
            self._body.extend(f"_dsp_show {i}" for i in self._pending)
            self._pending = []

    def shell(self, text: str, *args: str, timeout: float | None = None) -> int:
        """A call that runs a fixed bash snippet written by the adapter; values travel as ``$1``, ``$2``..."""
        return self.call(["bash", "-c", text, "_", *args], timeout=timeout)

    def render(self) -> str:
        self._flush()
        n = self.nonce
        dl = "0" if self.deadline is None or math.isinf(self.deadline) else str(math.ceil(self.deadline))
        cleanup = ' "$_dsp_pay"' if self._payloads else ""
        head = [
            "set -u",
            "umask 077",  # every file and directory a script makes is the user's alone (dispatch.slurm.trust)
            "export LC_ALL=C",
            *(f"export {k}={shlex.quote(v)}" for k, v in sorted(self.env.items())),
            f"printf '@@{n}:start\\n'",
            f"_dsp_deadline={dl}",
            # a kept shell (dispatch.slurm.transport.kept) lends its file; a shell of the script's own makes one
            'if [ -n "${_dsp_kept_call:-}" ]; then _dsp_err=$_dsp_kept_call; _dsp_own=""',
            'else _dsp_err=$(mktemp "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70; _dsp_own=1; fi',
            *(['_dsp_pay=$(mktemp -d "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70'] if self._payloads else []),
            *([f"trap 'rm -rf ${{_dsp_own:+\"$_dsp_err\"}}{cleanup}' EXIT"] if cleanup else []),
            *([] if cleanup else ['[ -z "$_dsp_own" ] || trap \'rm -f "$_dsp_err"\' EXIT']),
            "_dsp_call() {",
            "  local i=$1 t=$2; shift 2",
            f"  printf '\\n@@{n}:%s:out\\n' \"$i\"",
            "  local now; printf -v now '%(%s)T' -1",
            '  if [ "$_dsp_deadline" != 0 ] && [ "$now" -ge "$_dsp_deadline" ]; then',
            f"    printf '\\n@@{n}:%s:err\\n' \"$i\"; printf '\\n@@{n}:%s:status:notrun\\n' \"$i\"; return 0",
            "  fi",
            '  timeout -k 2 "$t" "$@" 2>"$_dsp_err"; local rc=$?',
            f'  printf \'\\n@@{n}:%s:err\\n\' "$i"; [ ! -s "$_dsp_err" ] || cat "$_dsp_err"',
            f'  printf \'\\n@@{n}:%s:status:%s\\n\' "$i" "$rc"',
            "}",
        ]
        if self._concurrent:
            head += [
                '_dsp_dir=$(mktemp -d "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70',
                f'trap \'rm -rf ${{_dsp_own:+"$_dsp_err"}} "$_dsp_dir"{cleanup}\' EXIT',
                "_dsp_bg() {",
                "  local i=$1 t=$2; shift 2",
                "  local now; printf -v now '%(%s)T' -1",
                '  if [ "$_dsp_deadline" != 0 ] && [ "$now" -ge "$_dsp_deadline" ]; then',
                '    echo notrun >"$_dsp_dir/$i.rc"; return 0',
                "  fi",
                '  timeout -k 2 "$t" "$@" >"$_dsp_dir/$i.out" 2>"$_dsp_dir/$i.err"; echo $? >"$_dsp_dir/$i.rc"',
                "}",
                "_dsp_show() {",
                "  local i=$1 rc",
                '  rc=$(cat "$_dsp_dir/$i.rc" 2>/dev/null) || rc=""',
                '  [ -n "$rc" ] || return 0',  # never finished: report nothing (unknown)
                f'  printf \'\\n@@{n}:%s:out\\n\' "$i"; cat "$_dsp_dir/$i.out" 2>/dev/null',
                f'  printf \'\\n@@{n}:%s:err\\n\' "$i"; cat "$_dsp_dir/$i.err" 2>/dev/null',
                f'  printf \'\\n@@{n}:%s:status:%s\\n\' "$i" "$rc"',
                "}",
            ]
        return "\n".join([*head, *self._body, f"printf '\\n@@{n}:done\\n'", ""])


PAYLOAD_MIN = 64 * 1024
"""From this many characters on, a call's stdin travels as a payload (:meth:`Script.call`), not as a heredoc."""


def _seconds(value: float) -> str:
    return f"{max(1, math.ceil(value))}"


def parse_output(nonce: str, stdout: str) -> ScriptOutput:
    """Read the calls of a script's stdout (tolerating a cut-off tail: missing calls are absent). Plain string
    searches: a script's markers carry its own nonce, so no pattern is compiled per script."""
    mark = f"@@{nonce}:"
    started = f"{mark}start\n" in stdout
    calls: dict[int, CallOutput] = {}
    at = stdout.find(mark)
    while at >= 0:
        head = at + len(mark)
        colon = stdout.find(":", head, head + 12)
        if (at == 0 or stdout[at - 1] == "\n") and colon > head and stdout[head:colon].isdigit():
            tag = stdout[colon : colon + 5]
            if tag == ":out\n":
                i = int(stdout[head:colon])
                calls[i] = _call(i, stdout[colon + 5 :], mark)
        at = stdout.find(mark, head)
    return ScriptOutput(started, calls)


def _call(i: int, rest: str, mark: str) -> CallOutput:
    """Call ``i`` from what follows its ``out`` marker: its stdout up to the ``err`` marker, its stderr up to the
    ``status`` marker, and the status word (``notrun``, or a number)."""
    err_marker = f"\n{mark}{i}:err\n"
    e = rest.find(err_marker)
    if e < 0:
        return CallOutput(i, rest, "", None)
    out = rest[:e]
    after = rest[e + len(err_marker) :]
    shift = 1 if after.startswith("@@") else 0
    hay = "\n" + after if shift else after
    status_marker = f"\n{mark}{i}:status:"
    s = hay.find(status_marker)
    while s >= 0:
        word_at = s + len(status_marker)
        nl = hay.find("\n", word_at)
        word = hay[word_at:nl] if nl >= 0 else ""
        if word == "notrun" or (word.isascii() and word.isdigit()):
            err = after[: max(0, s - shift)]
            if word == "notrun":
                return CallOutput(i, out, err, None, not_run=True)
            return CallOutput(i, out, err, int(word))
        s = hay.find(status_marker, s + 1)
    return CallOutput(i, out, after, None)


Renderer = Callable[[Script], None]

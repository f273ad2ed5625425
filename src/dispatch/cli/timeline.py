"""``dispatch show --timeline``: a :class:`~dispatch.timeline.Timeline` drawn in the terminal.

One row per submission over a shared time axis, then the markers' row, then a legend listing every bar and
marker with its times, so nothing depends on colour. Cells: ``:`` start gate closed, ``h`` held, ``-`` waiting,
and each execution in its state's character (``=`` running, ``#`` succeeded, ``X`` failed, ``/`` cancelled,
``?`` unknown); ``^`` marks a decision, ``!`` an escalation.
"""

from __future__ import annotations

import time

from dispatch import present
from dispatch.timeline import Timeline

STATE_CHARS = {
    "running": "=",
    "succeeded": "#",
    "failed": "X",
    "cancelled": "/",
    "unknown": "?",
    "pending": "-",
    "held": "h",
}
SHADE_CHARS = {"gate": ":", "hold": "h"}
MARKER_CHARS = {"decision": "^", "escalation": "!"}


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def render_text(tl: Timeline, width: int = 64) -> str:
    """The timeline in ``width`` columns of axis (plus a label column), as plain text with colour on a tty."""
    from dispatch.cli import ui

    width = max(width, 16)

    def col(at: float) -> int:
        return min(width - 1, max(0, int((at - tl.start) / tl.span * width)))

    label_w = max([len(lane.title) for lane in tl.lanes] + [len("markers")]) + 2
    lines = [
        f"timeline  {_clock(tl.start)} -> {_clock(tl.end)} ({present.duration(tl.end - tl.start)}),"
        f" one column = {present.duration(tl.span / width)}",
        " " * label_w + _clock(tl.start).ljust(width - 8) + _clock(tl.end),
    ]
    for lane in tl.lanes:
        cells = [" "] * width
        keys: list[str | None] = [None] * width
        for b in lane.bars:
            if b.kind == "wait":
                for c in range(col(b.start), col(b.end) + 1):
                    cells[c] = "-"
        for s in lane.shades:
            for c in range(col(s.start), col(s.end) + 1):
                cells[c] = SHADE_CHARS.get(s.kind, ".")
        for b in lane.bars:
            if b.kind == "wait":
                continue
            ch = STATE_CHARS.get(b.state, "=")
            for c in range(col(b.start), col(b.end) + 1):
                cells[c] = ch
                keys[c] = b.state
        row = "".join(ui.state_style(ch, k) if k else ch for ch, k in zip(cells, keys, strict=True))
        lines.append(ui.cell(lane.title).ljust(label_w) + row.rstrip())
    if tl.markers:
        cells = [" "] * width
        for m in tl.markers:
            cells[col(m.at)] = MARKER_CHARS.get(m.kind, "*")
        lines.append("markers".ljust(label_w) + "".join(cells).rstrip())
    lines.append("")
    for lane in tl.lanes:
        for b in lane.bars:
            what = f"execution {b.execution}" if b.kind == "execution" else "waiting"
            until = "now" if b.open else _clock(b.end)
            lines.append(
                f"  {ui.cell(lane.title)}  {what}  {_clock(b.start)} - {until}  {present.duration(b.end - b.start)}"
                f"  {ui.state_style(b.state)} ({ui.cell(b.label)})"
            )
        for s in lane.shades:
            until = "now" if s.open else _clock(s.end)
            lines.append(
                f"  {ui.cell(lane.title)}  {s.kind}  {_clock(s.start)} - {until}  {present.duration(s.end - s.start)}"
                f"  {ui.cell(s.label)}"
            )
    for m in tl.markers:
        lines.append(f"  {MARKER_CHARS.get(m.kind, '*')} {_clock(m.at)}  {ui.cell(m.label)}  {ui.cell(m.detail)}")
    return "\n".join(lines)

"""Geometry of the timeline picture: a :class:`~dispatch.timeline.Timeline` placed on an SVG canvas.

This module only computes positions and classes; the template (``_timeline.html``) writes the SVG, so every
text that came from a record passes through the template engine's escaping.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dispatch.timeline import Timeline

WIDTH = 960
LABEL = 150
TITLE_CHARS = 18
LANE = 34
TOP = 26
BAR = 20
AXIS_TICKS = 6


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    cls: str
    title: str
    label: str = ""


@dataclass(frozen=True)
class Tick:
    x: float
    text: str
    anchor: str = "middle"


@dataclass(frozen=True)
class Pin:
    x: float
    y1: float
    y2: float
    cls: str
    title: str
    label: str


@dataclass(frozen=True)
class Picture:
    width: int
    height: int
    lanes: list[tuple[float, str]]
    """(y of the lane's middle, its title, cut to :data:`TITLE_CHARS`)."""
    left: int
    shades: list[Rect]
    bars: list[Rect]
    pins: list[Pin]
    ticks: list[Tick]
    axis_y: float


def _clock(at: float, span: float) -> str:
    return time.strftime("%H:%M:%S" if span < 3 * 3600 else "%d %b %H:%M", time.localtime(at))


def _tick(start: float, offset: float, span: float) -> str:
    """An axis label: the clock time, or for spans under two minutes the offset from the first tick (clock
    seconds would repeat)."""
    if offset == 0 or span >= 120:
        return _clock(start + offset, span)
    return f"+{offset:.1f}s" if span < 20 else f"+{offset:.0f}s"


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{seconds:.0f}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def picture(tl: Timeline, width: int = WIDTH) -> Picture:
    plot = width - LABEL - 16

    def x(at: float) -> float:
        return round(LABEL + (at - tl.start) / tl.span * plot, 1)

    def w(start: float, end: float) -> float:
        return max(round((end - start) / tl.span * plot, 1), 2.0)

    shades: list[Rect] = []
    bars: list[Rect] = []
    lanes: list[tuple[float, str]] = []
    for k, lane in enumerate(tl.lanes):
        top = TOP + k * LANE
        title = lane.title if len(lane.title) <= TITLE_CHARS else lane.title[: TITLE_CHARS - 1] + "…"
        lanes.append((top + LANE / 2, title))
        for s in lane.shades:
            until = "now" if s.open else _clock(s.end, tl.span)
            title = f"{s.label}: {_clock(s.start, tl.span)} - {until} ({_duration(s.end - s.start)})"
            shades.append(Rect(x(s.start), top + 2, w(s.start, s.end), LANE - 4, f"shade {s.kind}", title))
        for b in lane.bars:
            until = "now" if b.open else _clock(b.end, tl.span)
            title = f"{b.detail}; {_clock(b.start, tl.span)} - {until} ({_duration(b.end - b.start)})"
            cls = f"bar {b.kind} s-{b.state}" + (" open" if b.open else "")
            height = BAR if b.kind == "execution" else BAR / 2
            y = top + (LANE - height) / 2
            label = b.label if b.kind == "execution" else ""
            bars.append(Rect(x(b.start), y, w(b.start, b.end), height, cls, title, label))
    bottom = TOP + max(len(tl.lanes), 1) * LANE
    pins = [
        Pin(x(m.at), TOP - 8, bottom, f"pin {m.kind}", f"{_clock(m.at, tl.span)} {m.label}: {m.detail}", m.label)
        for m in tl.markers
    ]
    ticks = [
        Tick(
            x(tl.start + tl.span * i / AXIS_TICKS),
            _tick(tl.start, tl.span * i / AXIS_TICKS, tl.span),
            "start" if i == 0 else "end" if i == AXIS_TICKS else "middle",
        )
        for i in range(AXIS_TICKS + 1)
    ]
    return Picture(width, bottom + 26, lanes, LABEL, shades, bars, pins, ticks, bottom + 4)

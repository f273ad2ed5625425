"""The dashboard's web application (Starlette, Jinja2 templates with autoescape, server-rendered SVG).

Pages: ``/`` overview, ``/jobs`` the jobs table, ``/jobs/{id}`` a job, ``/clusters/{name}`` a cluster. Live
updates poll small fragments (``/jobs/rows``, ``/jobs/{id}/live``) and ``/jobs/{id}/output`` (JSON, from a byte
offset) with the vendored ``ui.js``; nothing else runs in the browser.

Safety, by construction:

* read-only: every route is a GET; the :class:`~dispatch.ui.source.Source` holds a read-only store and opens
  clusters read-only;
* escaping: templates autoescape, fragments are rendered server-side, and ``ui.js`` only inserts server-escaped
  HTML or sets ``textContent``; a Content-Security-Policy allows scripts and styles from this server only;
* access: with a ``token``, every request must carry it (``Authorization: Bearer``, or ``?token=`` once, which
  sets an HttpOnly cookie); the Host header must name an allowed host (DNS rebinding).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from dispatch import present
from dispatch import progress as progress_view
from dispatch import timeline as model
from dispatch.errors import DispatchError, NotFound
from dispatch.outcome import Cause, State
from dispatch.records.browse import NO_CAUSE, JobQuery
from dispatch.spi import SLICE_LIMIT
from dispatch.ui import svg
from dispatch.ui.reads import Busy
from dispatch.ui.source import Source

HERE = Path(__file__).parent
PER_PAGE = 50
OUTPUT_TAIL = SLICE_LIMIT
"""The most output one response carries: a first view of a long log starts at its last 256 KiB."""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
STATE_ORDER = [s.value for s in State]


def _templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "svg"), default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = present.age
    env.filters["when"] = present.when
    env.filters["cause"] = present.cause_text
    env.filters["step"] = progress_view.step_text
    env.filters["rate"] = progress_view.rate_text
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, sort_keys=True)
    return env


def cookie_name(instance: str) -> str:
    """The session cookie's name for dashboard ``instance``: cookies are not scoped by port, so each instance
    has its own name (two dashboards on one host never overwrite or read each other's)."""
    return f"dispatch_ui_{instance}"


def cookie_value(token: str, instance: str) -> str:
    """What the session cookie holds: an HMAC of the instance id under the token, never the token itself (a
    server that received the cookie cannot use it as a token, nor on another instance)."""
    return hmac.new(token.encode(), b"dispatch-ui-session:" + instance.encode(), hashlib.sha256).hexdigest()


class TokenGate:
    """Every request carries the token: a Bearer header, this instance's session cookie, or ``?token=``
    (answered with a redirect that sets the cookie and drops the token from the address). Comparisons take
    the same time whatever the value (``hmac.compare_digest`` over fixed-length digests)."""

    def __init__(self, app: ASGIApp, token: str, instance: str) -> None:
        self.app = app
        self._token = hashlib.sha256(token.encode()).digest()
        self.cookie = cookie_name(instance)
        self._session = cookie_value(token, instance)

    def _token_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(hashlib.sha256(value.encode()).digest(), self._token)

    def _session_ok(self, value: str | None) -> bool:
        given = hashlib.sha256((value or "").encode()).digest()
        return value is not None and hmac.compare_digest(given, hashlib.sha256(self._session.encode()).digest())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        if self._token_ok(bearer) or self._session_ok(request.cookies.get(self.cookie)):
            await self.app(scope, receive, send)
            return
        if self._token_ok(request.query_params.get("token")):
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, self._session, path="/", httponly=True, samesite="strict")
        else:
            response = PlainTextResponse(
                "401: this dashboard needs its token (open the address dispatch ui printed)", status_code=401
            )
        await response(scope, receive, send)


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cache-control", b"no-store"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]


def create_app(
    source: Source,
    *,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    now: Callable[[], float] = time.time,
    per_page: int = PER_PAGE,
    instance: str | None = None,
) -> Starlette:
    """The dashboard over ``source``. ``allowed_hosts`` are the Host header values accepted (default: loopback
    names); with ``token`` set, every request must carry it (:class:`TokenGate`). ``instance`` names this
    dashboard's session cookie (default: random, so no two instances accept each other's cookie;
    ``app.state.cookie`` holds the name). The jobs table shows ``per_page`` rows a page."""
    instance = instance or secrets.token_hex(8)
    env = _templates()
    known_clusters: list[Any] = [0.0, []]

    def clusters() -> list[str]:
        """The cluster names in the records, re-read at most every 10 s (a filter menu, not a fact)."""
        if now() - known_clusters[0] > 10:
            known_clusters[:] = [now(), source.records.clusters()]
        return list(known_clusters[1])

    def page(template: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("where", source.where)
        context["request"] = request
        return HTMLResponse(env.get_template(template).render(**context), status_code=status)

    def query_of(request: Request) -> tuple[JobQuery, int]:
        q = request.query_params
        try:
            number = max(1, int(q.get("page", "1")))
        except ValueError:
            number = 1
        state = q.get("state") or None
        cause = q.get("cause") or None
        query = JobQuery(
            state=state if state in STATE_ORDER else None,
            cause=cause if cause in {c.value for c in Cause} | {NO_CAUSE} else None,
            cluster=q.get("cluster") or None,
            name=(q.get("name") or "").strip()[:200] or None,
            offset=(number - 1) * per_page,
            limit=per_page,
        )
        return query, number

    def rows_context(request: Request) -> dict[str, Any]:
        query, number = query_of(request)
        found = source.records.find(query)
        pages = max(1, -(-found.total // per_page))
        filters = {k: v for k, v in (("state", query.state), ("cause", query.cause), ("cluster", query.cluster),
                                      ("name", query.name)) if v}  # fmt: skip
        t = now()
        active = [r.id for r in found.rows if not (r.closed or r.state.ended)]
        reported = source.progress(source.records.get_many(active)) if active else {}
        return {
            "rows": found.rows,
            "progress": {k: progress_view.summary(v, t) for k, v in reported.items()},
            "total": found.total,
            "number": number,
            "pages": pages,
            "filters": filters,
            "link": lambda n: "/jobs?" + urlencode({**filters, "page": n}),
            "now": t,
        }

    def overview(request: Request) -> HTMLResponse:
        t = now()
        since = t - 86400
        counts = source.records.tally(since)
        by_state: dict[str, int] = {}
        by_cause: dict[str, int] = {}
        hours: list[dict[str, int]] = [{} for _ in range(24)]
        for c in counts:
            by_state[c.state] = by_state.get(c.state, 0) + c.count
            key = c.cause or "-"
            by_cause[key] = by_cause.get(key, 0) + c.count
            if 0 <= c.hour < 24:
                hours[c.hour][c.state] = hours[c.hour].get(c.state, 0) + c.count
        tallest = max([sum(h.values()) for h in hours] + [1])
        columns = []
        for k, h in enumerate(hours):
            y = 120.0
            parts = []
            for state in STATE_ORDER:
                n = h.get(state, 0)
                if n:
                    height = round(n / tallest * 110, 1)
                    y -= height
                    parts.append({"state": state, "n": n, "y": round(y, 1), "h": height})
            columns.append({"x": 40 + k * 36, "parts": parts, "hour": _clock_hour(since + k * 3600)})
        return page(
            "overview.html",
            request,
            by_state=sorted(by_state.items(), key=lambda kv: STATE_ORDER.index(kv[0]) if kv[0] in STATE_ORDER else 99),
            by_cause=sorted(by_cause.items(), key=lambda kv: -kv[1]),
            columns=columns,
            tallest=tallest,
            leases=source.records.leases(),
            clusters=clusters(),
            suspects=[(c, s) for c in clusters() for s in source.suspects(c, t)],
            now=t,
        )

    def jobs(request: Request) -> HTMLResponse:
        return page(
            "jobs.html",
            request,
            states=STATE_ORDER,
            causes=[c.value for c in Cause] + [NO_CAUSE],
            clusters=clusters(),
            **rows_context(request),
        )

    def job_rows(request: Request) -> HTMLResponse:
        return page("_rows.html", request, **rows_context(request))

    def job_context(job_id: str) -> dict[str, Any]:
        job = source.job(job_id)
        t = now()
        tl = model.build(job, t)
        live = not (job.closed and job.state.ended)
        reported = source.progress([job]).get(job.id, ())
        return {
            "job": job,
            "cause": model.cause_label(job.outcome),
            "picture": svg.picture(tl),
            "timeline": tl,
            "live": live,
            "per_rank": source.per_rank(job.cluster),
            "progress": progress_view.views(reported, t),
            "progress_error": source.readings.error(job.cluster) if live else None,
            "now": t,
        }

    def job_page(request: Request) -> HTMLResponse:
        ctx = job_context(request.path_params["job_id"])
        job = ctx["job"]
        events = source.records.events(job.id)
        return page(
            "job.html",
            request,
            command=shlex.join(job.spec.command),
            spec=job.spec.to_json(),
            events=events,
            rules_origin=present.rules_origin(job, events),
            **ctx,
        )

    def job_live(request: Request) -> HTMLResponse:
        return page("_live.html", request, **job_context(request.path_params["job_id"]))

    def output(request: Request) -> JSONResponse:
        """Output from ``offset`` (absent: the last :data:`OUTPUT_TAIL` bytes), at most that many bytes; the
        answer's ``offset`` is where to ask next. 429 when this instance's round of reads is full."""
        job = source.job(request.path_params["job_id"])
        q = request.query_params
        try:
            submission = int(q.get("submission", ""))
            execution = int(q["execution"]) if q.get("execution") else None
            rank = int(q["rank"]) if q.get("rank") else None
            offset = max(0, int(q["offset"])) if q.get("offset") else -OUTPUT_TAIL
        except ValueError:
            return JSONResponse({"error": "submission, execution, rank and offset are integers"}, status_code=400)
        stream = q.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            return JSONResponse({"error": "stream is stdout or stderr"}, status_code=400)
        if rank is not None and not 0 <= rank < job.spec.world_size:
            return JSONResponse({"error": f"rank {rank} is not in 0..{job.spec.world_size - 1}"}, status_code=400)
        try:
            piece = source.output(job, submission, execution, rank, stream, offset)
        except KeyError as exc:
            return JSONResponse({"error": str(exc.args[0]) if exc.args else "not found"}, status_code=404)
        except DispatchError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except Busy as exc:
            retry = str(max(1, round(exc.retry_after)))
            return JSONResponse({"error": str(exc)}, status_code=429, headers={"retry-after": retry})
        sub = job.submission(submission)
        # the execution read: the one asked for, else the latest (what the adapter reads by default)
        ex = next((e for e in reversed(sub.executions) if execution is None or e.restart == execution), None)
        running = ex is not None and not ex.outcome.state.ended and not sub.gone
        more = running or piece.start + len(piece.data) < piece.size
        data = piece.data[: whole_utf8(piece.data)] if more else piece.data
        return JSONResponse(
            {
                "text": data.decode("utf-8", "replace"),
                "offset": piece.start + len(data),
                "skipped": piece.start if offset < 0 else 0,
                "running": running and not (job.closed and job.state.ended),
            }
        )

    def cluster_page(request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        try:
            cluster = source.cluster(name)
        except DispatchError as exc:
            return page("error.html", request, 404, title=f"cluster {name}", message=str(exc))
        from dispatch.spi import interfaces_of

        backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
        caps = backend.capabilities()
        decl = cluster.declarations().to_json()
        return page(
            "cluster.html",
            request,
            name=name,
            adapter=cluster.backend.name,
            capabilities=[(c.value, a.answer.value, a.provenance.value, a.reason) for c, a in caps.items()],
            declarations=decl,
            interfaces=interfaces_of(backend),
            suspects=source.suspects(name, now()),
            policy=source.policy_of(name),
            now=now(),
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return page("error.html", request, 404, title="not found", message=str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 500)
        return page("error.html", request, code, title=str(code), message=getattr(exc, "detail", ""))

    routes = [
        Route("/", overview),
        Route("/jobs", jobs),
        Route("/jobs/rows", job_rows),
        Route("/jobs/{job_id}", job_page),
        Route("/jobs/{job_id}/live", job_live),
        Route("/jobs/{job_id}/output", output),
        Route("/clusters/{name}", cluster_page),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    hosts = allowed_hosts or ["127.0.0.1", "localhost", "[::1]"]
    middleware = [Middleware(SecurityHeaders), Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
    if token:
        middleware.append(Middleware(TokenGate, token=token, instance=instance))
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        NotFound: not_found,
        404: http_error,
        405: http_error,
    }
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.source = source
    app.state.cookie = cookie_name(instance) if token else None
    return app


def whole_utf8(data: bytes) -> int:
    """The length of ``data`` less a UTF-8 character cut at its end (its rest comes with the next read)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


def _clock_hour(at: float) -> str:
    return time.strftime("%H:00", time.localtime(at))

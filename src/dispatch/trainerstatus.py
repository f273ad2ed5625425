"""Progress to the Kubeflow Trainer's status server, from inside a TrainJob's pod (standard library only).

A Trainer that runs with its ``TrainJobStatus`` feature gate gives every trainer container the address of its
status server (``KUBEFLOW_TRAINER_SERVER_URL``), the server's CA certificate
(``KUBEFLOW_TRAINER_SERVER_CA_CERT``) and a projected service-account token whose audience is that TrainJob's
status endpoint (``KUBEFLOW_TRAINER_SERVER_TOKEN``, a file path). A POST of an ``UpdateTrainJobStatusRequest``
there is written by the Trainer into the TrainJob's ``status.trainerStatus``, which the adapter already watches:
the pod needs no Kubernetes permission, the adapter no extra request.

:func:`dispatch.job.progress` hands rank 0's reports to :class:`Sender` there (the status is one per TrainJob, so
one rank speaks for the execution; a hang in a collective stops rank 0 as well). The report travels as the
status's ``metrics``: the Trainer keeps them as name/value strings, and the ``dispatch.*`` names below carry what
:class:`~dispatch.spi.RankProgress` needs (step, total, time, first report, execution), beside the job's own
metrics; ``progressPercentage`` and ``lastUpdatedTime`` are filled too, for anyone reading the Trainer's status.

The POST runs on a daemon thread that sends the latest report only: a slow or absent status server never
holds up the training loop, and a failure warns once (RuntimeWarning) and is tried again with the next report.
At interpreter exit the report still queued is handed over (waiting at most :data:`TIMEOUT` seconds), so a
script's last report is not lost to its exit.
"""

from __future__ import annotations

import atexit
import json
import math
import ssl
import threading
import urllib.request
import warnings
from datetime import UTC, datetime

URL_VARIABLE = "KUBEFLOW_TRAINER_SERVER_URL"
CA_VARIABLE = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_VARIABLE = "KUBEFLOW_TRAINER_SERVER_TOKEN"

STEP = "dispatch.step"
TOTAL = "dispatch.total"
AT = "dispatch.at"
FIRST_STEP = "dispatch.firstStep"
FIRST_AT = "dispatch.firstAt"
EXECUTION = "dispatch.execution"
"""The metric names that carry dispatch's report in ``trainerStatus.metrics``."""
MAX_VALUE = 64
"""The longest metric value the Trainer's schema accepts."""
TIMEOUT = 10.0
"""Seconds one POST may take before it counts as failed."""


def request_body(report: dict[str, object]) -> dict[str, object]:
    """The ``UpdateTrainJobStatusRequest`` for one report of :func:`dispatch.job.progress` (its keys ``step``,
    ``total``, ``at``, ``first``, ``execution``, ``metrics``)."""
    step, total, at = report["step"], report.get("total"), report["at"]
    assert isinstance(step, int) and isinstance(at, float | int)
    metrics: list[dict[str, str]] = [{"name": STEP, "value": str(step)}, {"name": AT, "value": f"{at:.3f}"}]
    status: dict[str, object] = {}
    if isinstance(total, int):
        metrics.append({"name": TOTAL, "value": str(total)})
        status["progressPercentage"] = max(0, min(100, step * 100 // total))
    first = report.get("first")
    if isinstance(first, dict):
        metrics.append({"name": FIRST_STEP, "value": str(first["step"])})
        metrics.append({"name": FIRST_AT, "value": f"{first['at']:.3f}"})
        rate = (step - first["step"]) / (at - first["at"]) if at > first["at"] else 0.0
        if isinstance(total, int) and rate > 0 and total >= step:
            status["estimatedRemainingSeconds"] = min(2**31 - 1, math.ceil((total - step) / rate))
    execution = report.get("execution")
    if isinstance(execution, str) and 0 < len(execution) <= MAX_VALUE:
        metrics.append({"name": EXECUTION, "value": execution})
    raw = report.get("metrics")
    for name, value in raw.items() if isinstance(raw, dict) else ():
        # the schema wants a non-empty value: a NaN or infinity recorded as null travels as "nan"
        metrics.append({"name": name, "value": "nan" if value is None else repr(value)[:MAX_VALUE]})
    stamp = datetime.fromtimestamp(float(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"trainerStatus": {**status, "metrics": metrics, "lastUpdatedTime": stamp}}


class Sender:
    """Posts the latest report to the status server at ``url`` on a daemon thread (see the module docstring).
    ``ca`` and ``token`` are file paths (the token is read at every POST: the kubelet rotates it)."""

    def __init__(self, url: str, ca: str | None, token: str | None) -> None:
        self.url = url
        self.ca = ca
        self.token = token
        self.sent = 0
        """Reports the server accepted (for tests and diagnostics)."""
        self._latest: dict[str, object] | None = None
        self._cond = threading.Condition()
        self._warned = False
        self._thread: threading.Thread | None = None

    def offer(self, report: dict[str, object]) -> None:
        """Queue ``report`` in place of any not yet sent; never blocks on the network."""
        with self._cond:
            self._latest = report
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dispatch-trainer-status", daemon=True)
                self._thread.start()
                atexit.register(self.flush, TIMEOUT)
            self._cond.notify()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the queued report to be handed over; whether it was."""
        with self._cond:
            return self._cond.wait_for(lambda: self._latest is None, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._latest is not None)
                report = self._latest
            assert report is not None
            self._post(report)
            with self._cond:
                if self._latest is report:
                    self._latest = None
                self._cond.notify_all()

    def _post(self, report: dict[str, object]) -> None:
        try:
            body = json.dumps(request_body(report), separators=(",", ":"), allow_nan=False).encode()
            req = urllib.request.Request(self.url, data=body, method="POST")
            req.add_header("Content-Type", "application/json")
            if self.token:
                with open(self.token, encoding="utf-8") as f:
                    req.add_header("Authorization", f"Bearer {f.read().strip()}")
            context = ssl.create_default_context(cafile=self.ca) if self.ca else None
            with urllib.request.urlopen(req, timeout=TIMEOUT, context=context) as resp:
                resp.read()
            self.sent += 1
        except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"dispatch.job.progress: the Trainer's status server at {self.url} refused the report: {exc}",
                    RuntimeWarning,
                    stacklevel=1,
                )


__all__ = ["AT", "EXECUTION", "FIRST_AT", "FIRST_STEP", "STEP", "TOTAL", "Sender", "request_body"]

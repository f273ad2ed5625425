"""The Kubeflow adapter: dispatch jobs as Kubeflow Trainer v2 TrainJobs, with or without Kueue.

Importing it registers the adapter ``kubeflow`` and the ``kubeflow.RuntimeRef`` extension::

    cluster = dispatch.open("kubeflow", adapter={"kubeconfig": {"path": "~/.kube/config"}, "namespace": "ml",
                                                 "mode": "kueue", "localQueue": "team-a"}, records=...)

Modules: ``settings`` (strict settings), ``client`` (transport and the error table), ``preflight``,
``render`` (JobSpec -> TrainJob), ``mapping`` (evidence -> state and cause), ``watch`` (informers, cache,
journal), ``backend`` (the SPI). See docs/adapters/kubeflow.md.
"""

from __future__ import annotations

from dispatch.kubeflow.backend import NAME, KubeflowBackend, KueueBackend
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.kubeflow.settings import KubeflowSettings, Mode, schema
from dispatch.registry import OpenOptions
from dispatch.registry import register as _register
from dispatch.spi import Backend


def open_backend(settings: KubeflowSettings, options: OpenOptions | None = None) -> KubeflowBackend:
    """Connect, run preflight, start the watches: the backend for ``settings`` (a :class:`KueueBackend`, which
    adds Readmitter, in Kueue mode)."""
    from dispatch.kubeflow import client, preflight

    opts = options or OpenOptions()
    kube = client.Kube(settings)
    try:
        result = preflight.run(kube, settings, read_only=opts.read_only)
    except BaseException:
        kube.close()
        raise
    cls = KueueBackend if settings.mode is Mode.KUEUE else KubeflowBackend
    return cls(settings, kube, result, opts.clock, read_only=opts.read_only)


def _factory(settings: KubeflowSettings, options: OpenOptions) -> Backend:
    return open_backend(settings, options)


def register() -> None:
    """Register the adapter (done on import; also usable as an entry-point hook)."""
    _register(
        NAME, _factory, settings=KubeflowSettings, description="Kubeflow Trainer v2 (plain or Kueue)", replace=True
    )


register()

__all__ = [
    "NAME",
    "KubeflowBackend",
    "KubeflowSettings",
    "KueueBackend",
    "Mode",
    "RuntimeRef",
    "open_backend",
    "register",
    "schema",
]

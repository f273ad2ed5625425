"""Transport: the lightkube client, the resource types the adapter uses, and the error table.

Every apiserver call of the adapter goes through :class:`Kube`, which maps Kubernetes answers to
:mod:`dispatch.errors` sentinels (the table is :func:`map_error`, documented in docs/adapters/kubeflow.md):

=====================================  ==================================================================
apiserver answer                        sentinel
=====================================  ==================================================================
404 NotFound                            NotFound
409 AlreadyExists / Conflict            Rejected (the object exists / changed under us; re-observe)
410 Gone / Expired                      Unavailable (reads; the watcher re-lists)
422 Invalid                             Rejected (the apiserver refused the object; nothing changed)
403 from an admission webhook           Rejected (the message names the webhook)
403 from RBAC                           ReadOnly on writes, Unsupported on reads
401 Unauthorized                        Unavailable (credentials refused; nothing done)
400 BadRequest, 415                     Rejected
429, 5xx, timeout, transport error      reads and writes that cannot have landed: Unavailable;
                                        writes that may have landed: OutcomeUnknown
=====================================  ==================================================================

The token is never logged or put in an error message.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import User
from lightkube.core.exceptions import ConfigError as LightkubeConfigError
from lightkube.core.resource import api_info
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType

from dispatch.errors import (
    ConfigError,
    DispatchError,
    NotFound,
    OutcomeUnknown,
    ReadOnly,
    Rejected,
    Unavailable,
    Unsupported,
)
from dispatch.kubeflow.settings import KubeflowSettings
from dispatch.kubeflow.streams import Liveness, watch_transport

JSON = dict[str, Any]
T = TypeVar("T")

TRAINER = "trainer.kubeflow.org"
JOBSET_GROUP = "jobset.x-k8s.io"
KUEUE = "kueue.x-k8s.io"

TrainJob = create_namespaced_resource(TRAINER, "v1alpha1", "TrainJob", "trainjobs")
TrainingRuntime = create_namespaced_resource(TRAINER, "v1alpha1", "TrainingRuntime", "trainingruntimes")
ClusterTrainingRuntime = create_global_resource(
    TRAINER, "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes"
)
JobSet = create_namespaced_resource(JOBSET_GROUP, "v1alpha2", "JobSet", "jobsets")
Workload = create_namespaced_resource(KUEUE, "v1beta2", "Workload", "workloads")
LocalQueue = create_namespaced_resource(KUEUE, "v1beta2", "LocalQueue", "localqueues")
ClusterQueue = create_global_resource(KUEUE, "v1beta2", "ClusterQueue", "clusterqueues")
AdmissionCheck = create_global_resource(KUEUE, "v1beta2", "AdmissionCheck", "admissionchecks")
Pod = create_namespaced_resource("", "v1", "Pod", "pods")
Node = create_global_resource("", "v1", "Node", "nodes")
Lease = create_namespaced_resource("coordination.k8s.io", "v1", "Lease", "leases")
SelfSubjectAccessReview = create_global_resource(
    "authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews"
)

FIELD_MANAGER = "dispatch-kubeflow"
RUNTIME_LAG_TRIES = 8
"""Creates of a TrainJob a webhook refuses for a runtime copy it has not seen yet (Kube.create_trainjob)."""


def runtime_not_seen(message: str, runtime: str) -> bool:
    """Whether a refused TrainJob create is an admission webhook's "runtime not found" for ``runtime``. Two webhooks
    look the runtime up in their informer caches, and the API server reports whichever refused (both seen on the
    test control plane):

    - Kueue v0.19's ``vtrainjob.kb.io`` (its TopologyAwareScheduling check builds the pod sets from the runtime):
      ``runtime 'NAME' not found``;
    - Trainer v2.3.0's ``validator.trainjob.trainer.kubeflow.org``: ``spec.runtimeRef: Invalid value: {...}:
      TrainingRuntime.trainer.kubeflow.org "NAME" not found: specified trainingRuntime must be created before the
      TrainJob is created``."""
    kueue = f"runtime '{runtime}' not found" in message
    trainer = f'"{runtime}" not found' in message and "must be created before the TrainJob is created" in message
    return kueue or trainer


_WRITES = frozenset({"create", "patch", "update", "delete", "apply"})


def load_config(settings: KubeflowSettings) -> SingleConfig:
    """The client configuration the settings name (kubeconfig and context, or in-cluster), with the token."""
    try:
        if settings.in_cluster:
            conf = KubeConfig.from_service_account().get()
        else:
            path = settings.kubeconfig.path or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
            if not Path(path).is_file():
                raise ConfigError("kubeconfig.path", f"no kubeconfig file at {path}")
            conf = KubeConfig.from_file(path).get(settings.kubeconfig.context)
    except LightkubeConfigError as exc:
        key = "inCluster" if settings.in_cluster else "kubeconfig"
        raise ConfigError(key, str(exc)) from None
    except OSError as exc:
        raise ConfigError("inCluster" if settings.in_cluster else "kubeconfig.path", str(exc)) from None
    assert conf is not None
    if settings.token is not None:
        conf = conf._replace(user=User(token=settings.token))
    return conf


def make_client(settings: KubeflowSettings, *, stream: bool = False, live: Liveness | None = None) -> Client:
    """A lightkube client bound to the settings' namespace. ``stream`` clients (log follow) have no read
    timeout; the others time out after ``timeouts.apiserverRequest``. With ``live``, a watching client: its
    watch streams go through a :class:`~dispatch.kubeflow.streams.WatchTransport` reporting to ``live``."""
    conf = load_config(settings)
    t = settings.timeouts.api_server_request
    timeout = httpx2.Timeout(t, read=None) if stream else httpx2.Timeout(t)
    transport = watch_transport(conf, live) if live is not None else None
    return Client(
        conf,
        namespace=settings.namespace,
        timeout=timeout,
        field_manager=FIELD_MANAGER,
        trust_env=False,
        transport=transport,
    )


def status_of(exc: ApiError) -> tuple[int, str, str]:
    s = exc.status
    return int(s.code or 0), str(s.reason or ""), str(s.message or "")


def map_error(exc: BaseException, verb: str, what: str) -> DispatchError:
    """The sentinel for an exception raised by a call ``verb`` on ``what`` (the table above)."""
    write = verb in _WRITES
    if isinstance(exc, ApiError):
        code, reason, message = status_of(exc)
        text = f"{verb} {what}: {code} {reason}: {message}"
        if code == 404:
            return NotFound(text)
        if code == 409:
            return Rejected(text)
        if code == 410:
            return Unavailable(text)
        if code in (400, 415, 422):
            return Rejected(text)
        if code == 403:
            if "admission webhook" in message:
                return Rejected(text)
            return ReadOnly(text) if write else Unsupported(text)
        if code == 401:
            return Unavailable(f"{verb} {what}: 401 Unauthorized: the credentials were refused")
        if code == 429 or code >= 500:
            # 429 is refused before anything happens; a 5xx on a write may have landed.
            if write and code != 429:
                return OutcomeUnknown(text)
            return Unavailable(text)
        return Unavailable(text)
    if isinstance(exc, httpx2.TimeoutException | httpx2.RemoteProtocolError | httpx2.ReadError | httpx2.WriteError):
        if write:
            return OutcomeUnknown(f"{verb} {what}: the request may have landed: {type(exc).__name__}")
        return Unavailable(f"{verb} {what}: {type(exc).__name__}")
    if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        return Unavailable(f"{verb} {what}: cannot reach the apiserver ({type(exc).__name__})")
    if isinstance(exc, httpx2.HTTPError):
        if write:
            return OutcomeUnknown(f"{verb} {what}: {type(exc).__name__}")
        return Unavailable(f"{verb} {what}: {type(exc).__name__}")
    raise exc


def build(res: Any, body: JSON) -> Any:
    """A lightkube generic object from a dict (its stubs do not show the dict constructor)."""
    return res(body)


def as_dict(obj: Any) -> JSON:
    """A lightkube object as a plain dict."""
    if isinstance(obj, dict):
        return obj
    out: JSON = obj.to_dict()
    return out


class Kube:
    """The adapter's apiserver calls, each mapped through :func:`map_error`. Counts requests (for the bench)."""

    def __init__(self, settings: KubeflowSettings, client: Client | None = None) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self.client = client or make_client(settings)
        self.requests = 0

    def call(self, verb: str, what: str, fn: Callable[[], T]) -> T:
        self.requests += 1
        try:
            return fn()
        except (ApiError, httpx2.HTTPError) as exc:
            raise map_error(exc, verb, what) from exc

    # ---- generic helpers ---------------------------------------------------------------------------------

    def get(self, res: Any, name: str, *, namespace: str | None = None) -> JSON:
        ns = namespace if namespace is not None else self.namespace
        kind = api_info(res).resource.kind
        return as_dict(self.call("get", f"{kind} {name}", lambda: self._get(res, name, ns)))

    def _get(self, res: Any, name: str, ns: str) -> Any:
        if _namespaced(res):
            return self.client.get(res, name, namespace=ns)
        return self.client.get(res, name)

    def list(
        self, res: Any, *, labels: dict[str, Any] | None = None, namespace: str | None = None
    ) -> tuple[list[JSON], str]:
        """Every object (one request per page) and the list's resourceVersion."""
        kind = api_info(res).resource.kind

        def run() -> tuple[list[JSON], str]:
            if _namespaced(res):
                it = self.client.list(res, namespace=namespace or self.namespace, labels=labels, chunk_size=500)
            else:
                it = self.client.list(res, labels=labels, chunk_size=500)
            items = [as_dict(o) for o in it]
            return items, str(it.resourceVersion)

        return self.call("list", kind, run)

    def list_one(self, res: Any) -> None:
        """List at most one object: proves the resource is served (404 otherwise) and readable."""
        kind = api_info(res).resource.kind

        def run() -> None:
            if _namespaced(res):
                it = self.client.list(res, namespace=self.namespace, chunk_size=1)
            else:
                it = self.client.list(res, chunk_size=1)
            for _ in it:
                break

        self.call("list", kind, run)

    def create(self, res: Any, body: JSON) -> JSON:
        kind = api_info(res).resource.kind
        name = body.get("metadata", {}).get("name", "")
        return as_dict(self.call("create", f"{kind} {name}", lambda: self.client.create(build(res, body))))

    def create_trainjob(self, body: JSON, runtime: str, *, sleep: Callable[[float], None]) -> JSON:
        """Create a TrainJob on the runtime copy ``runtime`` made just before it. While an admission webhook refuses
        it because it has not yet seen that copy (Kueue's and the Trainer's read informer caches, which can lag
        behind the API server by seconds on a loaded control plane; see ``runtime_not_seen``), the same create
        again, RUNTIME_LAG_TRIES times with a doubling pause (about 13 s in all). Any other refusal, or the last,
        is raised."""
        for attempt in range(RUNTIME_LAG_TRIES):
            try:
                return self.create(TrainJob, body)
            except Rejected as exc:
                if not runtime_not_seen(str(exc), runtime) or attempt == RUNTIME_LAG_TRIES - 1:
                    raise
                sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")

    def merge_patch(self, res: Any, name: str, patch: JSON, *, namespace: str | None = None) -> JSON:
        kind = api_info(res).resource.kind
        ns = namespace or self.namespace

        def run() -> Any:
            if _namespaced(res):
                return self.client.patch(res, name, patch, namespace=ns, patch_type=PatchType.MERGE)
            return self.client.patch(res, name, patch, patch_type=PatchType.MERGE)

        return as_dict(self.call("patch", f"{kind} {name}", run))

    def delete(self, res: Any, name: str, *, namespace: str | None = None) -> None:
        kind = api_info(res).resource.kind
        ns = namespace or self.namespace
        self.call("delete", f"{kind} {name}", lambda: self.client.delete(res, name, namespace=ns))

    def log(self, pod: str, *, container: str, follow: bool) -> Iterator[str]:
        it = self.call(
            "get",
            f"pods/log {pod}",
            lambda: self.client.log(pod, namespace=self.namespace, container=container, follow=follow),
        )
        try:
            yield from it
        except (ApiError, httpx2.HTTPError) as exc:
            raise map_error(exc, "get", f"pods/log {pod}") from exc

    def access(self, verb: str, group: str, resource: str, *, subresource: str = "", namespaced: bool = True) -> bool:
        """A SelfSubjectAccessReview: may we ``verb`` the resource?"""
        attrs: JSON = {"verb": verb, "group": group, "resource": resource}
        if subresource:
            attrs["subresource"] = subresource
        if namespaced:
            attrs["namespace"] = self.namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        out = self.call(
            "create", "SelfSubjectAccessReview", lambda: self.client.create(build(SelfSubjectAccessReview, body))
        )
        return bool((as_dict(out).get("status") or {}).get("allowed"))

    def close(self) -> None:
        self.client.close()


def _namespaced(res: Any) -> bool:
    from lightkube.core.resource import NamespacedResource

    return issubclass(res, NamespacedResource)

"""dispatch_kubetest: a fake Kubernetes API server (real HTTP) with Trainer/JobSet/Kueue reactors.

Usage::

    with FakeAPIServer() as server:
        cluster = server.control
        cluster.add_node("worker-0")
        cluster.add_runtime(num_nodes=2)
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", token="t")
        ...  # point the code under test (lightkube) at the kubeconfig

See docs/dev/fake-apiserver.md for what is modelled and what is not.
"""

from .clock import FakeClock
from .control import Cluster, ReconcileLoopError, torch_runtime
from .errors import StatusError
from .handler import RequestRecord
from .kubeconfig import kubeconfig_dict, write_kubeconfig
from .rbac import Rule, rule
from .resources import KUEUE_VERSION, ResourceType
from .server import FakeAPIServer

__all__ = [
    "KUEUE_VERSION",
    "Cluster",
    "FakeAPIServer",
    "FakeClock",
    "ReconcileLoopError",
    "RequestRecord",
    "ResourceType",
    "Rule",
    "StatusError",
    "kubeconfig_dict",
    "rule",
    "torch_runtime",
    "write_kubeconfig",
]

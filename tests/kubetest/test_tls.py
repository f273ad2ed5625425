"""HTTPS and the in-cluster service-account path of a real client."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Pod

from dispatch_kubetest import FakeAPIServer, rule

from .conftest import TrainJob, trainjob


def test_in_cluster_service_account_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAPIServer(tls=True) as server:
        assert server.url.startswith("https://127.0.0.1:")
        server.control.add_namespace("ml")
        server.control.add_runtime()  # the Trainer refuses a TrainJob whose runtime does not exist
        server.control.set_rules(
            "sa-token",
            [rule("*", "trainer.kubeflow.org", "trainjobs", ["ml"]), rule("list", "", "pods", ["ml"])],
            user="system:serviceaccount:ml:dispatch",
        )
        env = server.write_service_account(tmp_path / "sa", token="sa-token", namespace="ml")
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        client = Client(KubeConfig.from_service_account(str(tmp_path / "sa")), timeout=10)
        assert list(client.list(Pod)) == []  # the namespace comes from the service account
        created = client.create(TrainJob({**trainjob("in-cluster"), "metadata": {"name": "in-cluster"}}))
        assert created.metadata.namespace == "ml"
        assert [r.user for r in server.requests(method="POST")] == ["system:serviceaccount:ml:dispatch"]

        kubeconfig = server.write_kubeconfig(tmp_path / "kc", token="sa-token", namespace="ml")
        via_kubeconfig = Client(KubeConfig.from_file(str(kubeconfig)), timeout=10)
        assert [t.metadata.name for t in via_kubeconfig.list(TrainJob)] == ["in-cluster"]

"""Strict settings: defaults, errors naming the key, the token never shown, the schema, registration."""

from __future__ import annotations

import pytest

from dispatch.errors import ConfigError
from dispatch.kubeflow import KubeflowSettings, Mode, schema
from dispatch.registry import adapter
from dispatch.settings import decode


def test_defaults_and_declared_bounds() -> None:
    s = decode(KubeflowSettings, {})
    assert s.mode is Mode.PLAIN and s.namespace == "default" and s.node_loss_window == 300.0
    assert s.timeouts.api_server_request == 60.0 and s.call_bound == 65.0
    assert s.gate_name == "dispatch.io/start" and not s.allow_rank_restart
    s = decode(KubeflowSettings, {"timeouts": {"apiserverRequest": "30s"}, "nodeLossWindow": "2m"})
    assert s.call_bound == 35.0 and s.node_loss_window == 120.0


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"mode": "kueue"}, "localQueue"),
        ({"mode": "slurm"}, "mode"),
        ({"namespace": "Not_A_Namespace"}, "namespace"),
        ({"gateName": "no-domain"}, "gateName"),
        ({"timeouts": {"apiserverRequest": "0s"}}, "timeouts.apiserverRequest"),
        ({"timeouts": {"request": "1s"}}, "timeouts.request"),
        ({"kubeconfig": {"path": 3}}, "kubeconfig.path"),
        ({"inCluster": True, "kubeconfig": {"path": "/x"}}, "inCluster"),
        ({"token": "has space"}, "token"),
        ({"nodeLossWindow": "soon"}, "nodeLossWindow"),
        ({"surprise": 1}, "surprise"),
        ({"localQueue": "Bad Queue"}, "localQueue"),
    ],
)
def test_errors_name_the_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        decode(KubeflowSettings, data)
    assert err.value.path == key


def test_token_is_never_shown() -> None:
    s = decode(KubeflowSettings, {"token": "s3cr3t-token"})
    assert "s3cr3t" not in repr(s) and "s3cr3t" not in str(s)
    with pytest.raises(ConfigError) as err:
        decode(KubeflowSettings, {"token": "s3cr3t token"})
    assert "s3cr3t" not in str(err.value)


def test_schema_lists_every_key() -> None:
    props = schema()["properties"]
    for key in (
        "kubeconfig",
        "inCluster",
        "token",
        "namespace",
        "mode",
        "localQueue",
        "gateName",
        "nodeLossWindow",
        "timeouts",
        "allowRankRestart",
        "preflight",
    ):
        assert key in props
    assert props["mode"]["enum"] == ["plain", "kueue"]
    assert schema()["additionalProperties"] is False


def test_registered_as_kubeflow_with_runtime_ref_extension() -> None:
    from dispatch.extensions import extension_kinds

    a = adapter("kubeflow")
    assert a.settings is KubeflowSettings
    assert "kubeflow.RuntimeRef" in extension_kinds()


def test_missing_kubeconfig_is_a_config_error(tmp_path: object) -> None:
    from dispatch.kubeflow.client import load_config

    with pytest.raises(ConfigError) as err:
        load_config(decode(KubeflowSettings, {"kubeconfig": {"path": "/nonexistent/kubeconfig"}}))
    assert err.value.path == "kubeconfig.path"

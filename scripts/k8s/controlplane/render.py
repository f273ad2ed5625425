"""Render the JobSet, Kueue and Trainer manifests from their Go modules for an out-of-cluster start.

Each project's own kustomization (read from the module cache, the same module version that was
compiled) is rendered with ``kubectl kustomize``; from the result this keeps only what the API server
needs: the CustomResourceDefinitions, the admission webhook configurations and the Trainer's default
ClusterTrainingRuntimes. Webhooks are rewritten from an in-cluster ``service`` to a ``url`` on
127.0.0.1 with our CA as ``caBundle`` (as controller-runtime's envtest does), and Kueue's are cut down
to the integrations that run here (its own types, batch/Job, JobSet and TrainJob). The controllers'
own configuration files are written beside them: internal certificate management off, leader election
off, webhook port and probe address as given.

Usage: render.py OUT_DIR CA_FILE JOBSET_DIR KUEUE_DIR TRAINER_DIR PORTS_JSON
"""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import sys
from typing import Any

import yaml

KUEUE_FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
KUEUE_WEBHOOK_PATHS = ("kueue-x-k8s-io", "batch-v1-job", "jobset-x-k8s-io", "trainer-kubeflow-org")


def kustomize(path: pathlib.Path) -> list[dict[str, Any]]:
    out = subprocess.run(["kubectl", "kustomize", str(path)], check=True, capture_output=True, text=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def to_url(doc: dict[str, Any], port: int, ca_b64: str, keep: tuple[str, ...] | None) -> dict[str, Any]:
    hooks = []
    for hook in doc.get("webhooks", []):
        path = hook["clientConfig"]["service"]["path"]
        if keep is not None and not any(k in path for k in keep):
            continue
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_b64}
        hooks.append(hook)
    doc["webhooks"] = hooks
    doc["metadata"] = {"name": doc["metadata"]["name"]}
    return doc


def config_from_map(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name:
            text = next(iter(d["data"].values()))
            cfg: dict[str, Any] = yaml.safe_load(text)
            return cfg
    raise SystemExit(f"render.py: no ConfigMap {name} in the rendered manifests")


def out_of_cluster(cfg: dict[str, Any], webhook_port: int, health_port: int) -> dict[str, Any]:
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["webhook"] = {**cfg.get("webhook", {}), "port": webhook_port, "host": "127.0.0.1"}
    cfg["health"] = {**cfg.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    cfg["metrics"] = {**cfg.get("metrics", {}), "bindAddress": "0"}
    return cfg


def main(argv: list[str]) -> None:
    out, ca_file, jobset, kueue, trainer, ports_json = argv
    out_dir = pathlib.Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ports = json.loads(ports_json)
    ca_b64 = base64.b64encode(pathlib.Path(ca_file).read_bytes()).decode()

    crds: list[dict[str, Any]] = []
    hooks: list[dict[str, Any]] = []
    js = kustomize(pathlib.Path(jobset) / "config" / "default")
    ku = kustomize(pathlib.Path(kueue) / "config" / "default")
    tr_base = pathlib.Path(trainer) / "manifests" / "base"
    tr = kustomize(tr_base / "crds") + kustomize(tr_base / "webhook")
    sources = ((js, ports["jobset"], None), (ku, ports["kueue"], KUEUE_WEBHOOK_PATHS), (tr, ports["trainer"], None))
    for docs, port, keep in sources:
        for d in docs:
            if d["kind"] == "CustomResourceDefinition":
                conv = d["spec"].get("conversion") or {}
                if conv.get("strategy") == "Webhook" and len(d["spec"]["versions"]) > 1:
                    path = conv["webhook"]["clientConfig"]["service"]["path"]
                    conv["webhook"]["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_b64}
                else:  # one version needs no conversion (JobSet's patch points at an in-cluster service)
                    d["spec"].pop("conversion", None)
                d["metadata"].pop("annotations", None)
                crds.append(d)
            elif d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                hooks.append(to_url(d, port, ca_b64, keep))
    runtimes = kustomize(pathlib.Path(trainer) / "manifests" / "overlays" / "runtimes")

    js_cfg = out_of_cluster(config_from_map(js, "jobset-manager-config"), ports["jobset"], ports["jobset_health"])
    js_cfg["internalCertManagement"] = {"enable": False}
    js_cfg["webhook"]["certDir"] = ports["certdir"]
    ku_cfg = out_of_cluster(config_from_map(ku, "kueue-manager-config"), ports["kueue"], ports["kueue_health"])
    ku_cfg["internalCertManagement"] = {"enable": False}
    ku_cfg["webhook"]["certDir"] = ports["certdir"]
    ku_cfg["integrations"] = {"frameworks": KUEUE_FRAMEWORKS}
    ku_cfg["namespace"] = "kueue-system"
    tr_cfg = yaml.safe_load((tr_base / "manager" / "controller_manager_config.yaml").read_text())
    tr_cfg = out_of_cluster(tr_cfg, ports["trainer"], ports["trainer_health"])
    tr_cfg["certManagement"] = {"enable": False}  # no certDir field: the process gets TMPDIR instead
    tr_cfg["statusServer"] = {**tr_cfg.get("statusServer", {}), "port": ports["trainer_status"]}

    def dump(name: str, docs: list[dict[str, Any]]) -> None:
        (out_dir / name).write_text(yaml.safe_dump_all(docs, sort_keys=False))

    dump("crds.yaml", crds)
    dump("webhooks.yaml", hooks)
    dump("runtimes.yaml", runtimes)
    dump("jobset-config.yaml", [js_cfg])
    dump("kueue-config.yaml", [ku_cfg])
    dump("trainer-config.yaml", [tr_cfg])


if __name__ == "__main__":
    main(sys.argv[1:])

"""Reading the RBAC manifests under deploy/ (shared by the adapter's and the controller's RBAC tests)."""

from __future__ import annotations

from pathlib import Path

import yaml

from dispatch_kubetest import Rule, rule

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubeflow"


def grants(path: Path, namespace: str = "default") -> tuple[set[tuple[str, str, str, bool]], list[Rule]]:
    """(verb, group, resource, namespaced) granted by the Roles and ClusterRoles in ``path``, and the same as
    fake-server rules (Role rules limited to ``namespace``, the test world's)."""
    out: set[tuple[str, str, str, bool]] = set()
    rules: list[Rule] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict) or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        namespaced = doc["kind"] == "Role"
        for r in doc.get("rules") or []:
            for g in r["apiGroups"]:
                for res in r["resources"]:
                    for v in r["verbs"]:
                        out.add((v, g, res, namespaced))
            rules.append(
                rule(list(r["verbs"]), list(r["apiGroups"]), list(r["resources"]), [namespace] if namespaced else None)
            )
    return out, rules

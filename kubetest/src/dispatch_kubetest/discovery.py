"""Discovery documents: ``/version``, ``/api``, ``/apis``, ``/apis/<group>`` and the
resource lists of ``/api/v1`` and ``/apis/<group>/<version>``."""

from __future__ import annotations

from typing import Any

from .resources import Catalogue

JSON = dict[str, Any]

VERSION_INFO = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-dispatch-fake",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(catalogue: Catalogue) -> JSON:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"] if catalogue.is_served("v1") else [],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def group_list(catalogue: Catalogue) -> JSON:
    groups = []
    for group, versions in catalogue.group_versions().items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resource_list(catalogue: Catalogue, group: str, version: str) -> JSON:
    resources: list[JSON] = []
    for rt in catalogue.served():
        if rt.group != group or rt.version != version:
            continue
        entry: JSON = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        resources.append(entry)
        for sub in sorted(rt.subresources):
            verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
            kind = "Pod" if sub == "log" else rt.kind
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

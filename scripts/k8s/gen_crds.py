#!/usr/bin/env python3
"""Generate the CustomResourceDefinitions of Kubeflow Trainer v1alpha1 and JobSet v1alpha2.

The structural schemas come from the pydantic models of the ``kubeflow-trainer-api`` package (generated upstream
from Trainer's OpenAPI, with the core types they embed): each model's JSON schema is inlined into an OpenAPI v3
structural schema. Nothing about field names or types is written by hand.

What the models do not carry is taken from the kubebuilder markers of the upstream Go types and listed in
``MARKERS`` below, each with the upstream file it comes from: defaults, list-map keys (server-side apply merges
such lists per key), the CEL rules the adapter depends on and the printer columns.

Usage: python scripts/k8s/gen_crds.py [--check]
(writes kubetest/src/dispatch_kubetest/crds/{trainer,jobset,kueue}.yaml;
--check fails if the committed files differ from what the installed models give).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from kubeflow_trainer_api import models

OUT = Path(__file__).resolve().parents[2] / "kubetest" / "src" / "dispatch_kubetest" / "crds"

# Facts from the upstream Go types (kubebuilder markers), not in the pydantic models.
# Trainer: pkg/apis/trainer/v1alpha1/{trainjob,trainingruntime}_types.go; JobSet: api/jobset/v1alpha2/jobset_types.go;
# core types: the +listType/+listMapKey markers of k8s.io/api/core/v1 and k8s.io/apimachinery metav1.Condition.
LIST_MAP_KEYS: dict[str, list[str]] = {
    # model class name -> keys of lists of that item type
    "IoK8sApiCoreV1Container": ["name"],
    "IoK8sApiCoreV1EnvVar": ["name"],
    "IoK8sApiCoreV1Volume": ["name"],
    "IoK8sApimachineryPkgApisMetaV1Condition": ["type"],
    "TrainerV1alpha1RuntimePatch": ["manager"],
    "JobsetV1alpha2ReplicatedJob": ["name"],
}
# (model class, property) -> default
DEFAULTS: dict[tuple[str, str], Any] = {
    ("TrainerV1alpha1RuntimeRef", "apiGroup"): "trainer.kubeflow.org",
    ("TrainerV1alpha1RuntimeRef", "kind"): "ClusterTrainingRuntime",
    ("TrainerV1alpha1TrainJobSpec", "suspend"): False,
    ("TrainerV1alpha1TrainJobSpec", "managedBy"): "trainer.kubeflow.org/trainjob-controller",
    ("JobsetV1alpha2ReplicatedJob", "replicas"): 1,
}
# (model class, property) -> x-kubernetes-validations
RULES: dict[tuple[str, str], list[dict[str, str]]] = {
    ("TrainerV1alpha1TrainJobSpec", "runtimeRef"): [{"rule": "self == oldSelf", "message": "field is immutable"}],
    ("TrainerV1alpha1TrainJobSpec", "trainer"): [{"rule": "self == oldSelf", "message": "field is immutable"}],
    ("TrainerV1alpha1TrainJobSpec", "activeDeadlineSeconds"): [
        {"rule": "self == oldSelf", "message": "field is immutable"}
    ],
}
MINIMUM: dict[tuple[str, str], int] = {("TrainerV1alpha1TrainJobSpec", "activeDeadlineSeconds"): 1}
TOP_RULES: dict[str, list[dict[str, str]]] = {
    "TrainJob": [
        {
            "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "message": "metadata.name must match RFC 1035 DNS label format",
        },
        {"rule": "size(self.metadata.name) <= 63", "message": "metadata.name must be no more than 63 characters"},
    ],
}
AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
PRINTER_COLUMNS: dict[str, list[dict[str, str]]] = {
    "TrainJob": [{"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"}, AGE],
    "TrainingRuntime": [AGE],
    "ClusterTrainingRuntime": [AGE],
    "JobSet": [
        {
            "name": "TerminalState",
            "type": "string",
            "jsonPath": ".status.terminalState",
            "description": "Final state of JobSet",
        },
        {"name": "Restarts", "type": "string", "jsonPath": ".status.restarts", "description": "Number of restarts"},
        {"name": "Completed", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Completed")].status'},
        {"name": "Suspended", "type": "string", "jsonPath": ".spec.suspend", "description": "JobSet suspended"},
        AGE,
    ],
}

KINDS = [
    # (file, group, version, kind, plural, scope, model class, short names)
    (
        "trainer",
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainJob",
        "trainjobs",
        "Namespaced",
        "TrainerV1alpha1TrainJob",
        [],
    ),
    (
        "trainer",
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainingRuntime",
        "trainingruntimes",
        "Namespaced",
        "TrainerV1alpha1TrainingRuntime",
        [],
    ),
    (
        "trainer",
        "trainer.kubeflow.org",
        "v1alpha1",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
        "Cluster",
        "TrainerV1alpha1ClusterTrainingRuntime",
        [],
    ),
    ("jobset", "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", "Namespaced", "JobsetV1alpha2JobSet", []),
]


class Converter:
    """Pydantic JSON schema (with $defs) -> OpenAPI v3 structural schema, inlined."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.in_core = 0  # >0 while inside a core Kubernetes type: descriptions left out (size; see below)

    def convert(self, node: dict[str, Any], stack: tuple[str, ...] = ()) -> dict[str, Any]:
        node = _strip_null(node)
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in stack:
                raise SystemExit(f"recursive type {' -> '.join((*stack, name))}: not expressible structurally")
            # The core types' descriptions would make TrainingRuntime's CRD larger than etcd's request limit
            # (1.5 MiB); kubectl explain documents those types anyway. Trainer's and JobSet's own are kept.
            core = name.startswith("IoK8s")
            self.in_core += core
            try:
                out = self.model(name, (*stack, name))
            finally:
                self.in_core -= core
            return _with_desc(out, node) if not self.in_core else out
        if "allOf" in node and len(node["allOf"]) == 1:
            out = self.convert(node["allOf"][0], stack)
            if node.get("description"):
                out["description"] = node["description"]
            return out
        if "anyOf" in node:  # a union the models express, e.g. number | integer
            kinds = {_strip_null(o).get("type") for o in node["anyOf"]}
            if kinds <= {"number", "integer"}:
                return _with_desc({"type": "number"}, node)
            raise SystemExit(f"union not expressible structurally: {node['anyOf']}")
        t = node.get("type")
        if t == "object":
            if "properties" in node:
                raise SystemExit("inline object with properties: expected a $ref")
            ap = node.get("additionalProperties")
            out: dict[str, Any] = {"type": "object"}
            if isinstance(ap, dict) and ap:
                out["additionalProperties"] = self.convert(ap, stack)
            else:
                out["x-kubernetes-preserve-unknown-fields"] = True
            return _with_desc(out, node)
        if t == "array":
            items = node.get("items") or {}
            out = {"type": "array", "items": self.convert(items, stack)}
            ref = _strip_null(items).get("$ref", "")
            keys = LIST_MAP_KEYS.get(ref.rsplit("/", 1)[-1])
            if keys:
                out["x-kubernetes-list-type"] = "map"
                out["x-kubernetes-list-map-keys"] = keys
            return _with_desc(out, node)
        if t in ("string", "integer", "number", "boolean"):
            out = {"type": t}
            if node.get("format") in ("date-time", "byte", "int32", "int64", "double"):
                out["format"] = node["format"]
            if "enum" in node:
                out["enum"] = node["enum"]
            if node.get("default") is not None:
                out["default"] = node["default"]
            return _with_desc(out, node)
        if not node or set(node) <= {"description", "title", "default"}:  # Any
            return _with_desc({"x-kubernetes-preserve-unknown-fields": True}, node)
        raise SystemExit(f"unexpected schema node: {node}")

    def model(self, name: str, stack: tuple[str, ...]) -> dict[str, Any]:
        d = self.defs[name]
        props = d.get("properties") or {}
        if "one_of_schemas" in props:  # openapi-generator's oneOf wrapper: Quantity, IntOrString
            return {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        out: dict[str, Any] = {"type": "object"}
        if d.get("description") and not self.in_core:
            out["description"] = d["description"]
        properties: dict[str, Any] = {}
        for pname, pnode in props.items():
            if name.endswith("ObjectMeta") and len(stack) > 1 and pname not in ("labels", "annotations"):
                continue  # embedded (template) metadata: only labels and annotations are kept upstream
            p = self.convert(pnode, stack)
            if self.in_core:
                p.pop("description", None)
            if (name, pname) in DEFAULTS:
                p["default"] = DEFAULTS[(name, pname)]
            if (name, pname) in RULES:
                p["x-kubernetes-validations"] = RULES[(name, pname)]
            if (name, pname) in MINIMUM:
                p["minimum"] = MINIMUM[(name, pname)]
            properties[pname] = p
        if properties:
            out["properties"] = properties
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
        required = [r for r in d.get("required", []) if r in properties and (name, r) not in DEFAULTS]
        if required:
            out["required"] = required
        return out


def _strip_null(node: dict[str, Any]) -> dict[str, Any]:
    """Optional[X] in pydantic is anyOf [X, null]: structural schemas say optional by not requiring."""
    if "anyOf" in node:
        rest = [o for o in node["anyOf"] if o != {"type": "null"}]
        if len(rest) == 1:
            merged = {k: v for k, v in node.items() if k != "anyOf"}
            merged.update(rest[0])
            return merged
    return node


def _with_desc(out: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    if node.get("description"):
        out["description"] = node["description"]
    return out


def crd(group: str, version: str, kind: str, plural: str, scope: str, cls: str, short: list[str]) -> dict[str, Any]:
    model = getattr(models, cls)
    js = model.model_json_schema(by_alias=True, mode="serialization")
    conv = Converter(js.get("$defs", {}))
    top = {"$ref": f"#/$defs/{cls}"}
    conv.defs = {**conv.defs, cls: js}
    schema = conv.convert(top, ())
    props = schema["properties"]
    # top-level metadata is the API server's: a structural schema may only say "object" there
    props["metadata"] = {"type": "object"}
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    schema.pop("required", None)
    if kind in TOP_RULES:
        schema["x-kubernetes-validations"] = TOP_RULES[kind]
    names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    if short:
        names["shortNames"] = short
    ver: dict[str, Any] = {"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if "status" in props:
        ver["subresources"] = {"status": {}}
    ver["additionalPrinterColumns"] = PRINTER_COLUMNS[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "annotations": {"dispatch.io/generated-by": "scripts/k8s/gen_crds.py from kubeflow-trainer-api"},
        },
        "spec": {"group": group, "names": names, "scope": scope, "versions": [ver]},
    }


# ---------------------------------------------------------------------------------------------------- Kueue
# Kueue ships no Python models. Its schemas below are written from Kueue's API reference (kueue.x-k8s.io/v1beta2,
# apis/kueue/v1beta2/*_types.go of Kueue v0.20) for the fields the adapter, dispatch-admission and the test
# world use; each object keeps the rest (x-kubernetes-preserve-unknown-fields) instead of pruning it. The core
# types they embed (PodTemplateSpec, Toleration, Condition) are generated from the models like the rest.


def _core(cls: str) -> dict[str, Any]:
    js = getattr(models, cls).model_json_schema(by_alias=True, mode="serialization")
    conv = Converter({**js.get("$defs", {}), cls: js})
    conv.in_core = 1
    out = conv.convert({"$ref": f"#/$defs/{cls}"})
    out.pop("description", None)
    return out


def _obj(
    props: dict[str, Any] | None = None, *, required: list[str] | None = None, open_: bool = False, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", **extra}
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    if open_ or not props:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _map_list(item: dict[str, Any], key: str = "name", **extra: Any) -> dict[str, Any]:
    return {
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
        **extra,
    }


STR = {"type": "string"}
INT = {"type": "integer", "format": "int32"}
STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}
QUANTITY = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
RESOURCE_LIST = {"type": "object", "additionalProperties": QUANTITY}
NAME63 = {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}


def kueue_crds() -> list[dict[str, Any]]:
    cond = _map_list(_core("IoK8sApimachineryPkgApisMetaV1Condition"), "type")
    tolerations = {"type": "array", "items": _core("IoK8sApiCoreV1Toleration"), "x-kubernetes-list-type": "atomic"}
    pod_set = _obj(
        {
            "name": NAME63,
            "count": {**INT, "minimum": 0},
            "minCount": INT,
            "template": _core("IoK8sApiCoreV1PodTemplateSpec"),
            "topologyRequest": _obj(),
        },
        required=["name", "count", "template"],
    )
    pod_set_update = _obj(
        {
            "name": NAME63,
            "labels": STRMAP,
            "annotations": STRMAP,
            "nodeSelector": STRMAP,
            "tolerations": tolerations,
        },
        required=["name"],
    )
    check_state = _obj(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": 316},
            "state": {"type": "string", "enum": ["Pending", "Ready", "Retry", "Rejected"]},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "podSetUpdates": {
                "type": "array",
                "items": pod_set_update,
                "maxItems": 8,
                "x-kubernetes-list-type": "atomic",
            },
            "retryCount": INT,
            "requeueAfterSeconds": INT,
        },
        required=["name", "state", "lastTransitionTime", "message"],
    )
    assignment = _obj(
        {
            "name": {**NAME63, "default": "main"},
            "flavors": STRMAP,
            "resourceUsage": RESOURCE_LIST,
            "count": {**INT, "minimum": 0},
        },
        open_=True,
    )
    workload = {
        "spec": _obj(
            {
                "podSets": _map_list(pod_set, minItems=1, maxItems=8),
                "queueName": STR,
                "priorityClassRef": _obj({"group": STR, "kind": STR, "name": STR}, required=["group", "kind", "name"]),
                "priority": INT,
                "active": {"type": "boolean", "default": True},
                "maximumExecutionTimeSeconds": {**INT, "minimum": 1},
            }
        ),
        "status": _obj(
            {
                "conditions": cond,
                "admission": _obj(
                    {"clusterQueue": STR, "podSetAssignments": _map_list(assignment, maxItems=8)},
                    required=["clusterQueue"],
                ),
                "admissionChecks": _map_list(check_state, maxItems=16),
                "requeueState": _obj({"count": INT, "requeueAt": {"type": "string", "format": "date-time"}}),
                "schedulingStats": _obj(
                    {
                        "evictions": _map_list(
                            _obj(
                                {"reason": STR, "underlyingCause": STR, "count": INT},
                                required=["reason", "underlyingCause", "count"],
                            ),
                            "reason",
                        )
                    },
                    open_=True,
                ),
                "reclaimablePods": {"type": "array", "items": _obj(open_=True)},
            },
            open_=True,
        ),
    }
    # evictions: a list keyed by (reason, underlyingCause) upstream
    workload["status"]["properties"]["schedulingStats"]["properties"]["evictions"]["x-kubernetes-list-map-keys"] = [
        "reason",
        "underlyingCause",
    ]
    quota = _obj(
        {"name": STR, "nominalQuota": QUANTITY, "borrowingLimit": QUANTITY, "lendingLimit": QUANTITY},
        required=["name", "nominalQuota"],
    )
    cluster_queue = {
        "spec": _obj(
            {
                "resourceGroups": {
                    "type": "array",
                    "items": _obj(
                        {
                            "coveredResources": {"type": "array", "items": STR},
                            "flavors": _map_list(
                                _obj({"name": STR, "resources": _map_list(quota)}, required=["name", "resources"])
                            ),
                        },
                        required=["coveredResources", "flavors"],
                    ),
                    "x-kubernetes-list-type": "atomic",
                },
                "cohortName": STR,
                "queueingStrategy": {
                    "type": "string",
                    "enum": ["StrictFIFO", "BestEffortFIFO"],
                    "default": "BestEffortFIFO",
                },
                "namespaceSelector": _obj(open_=True),
                "admissionChecks": {"type": "array", "items": STR},  # v1beta1 name; kept for older manifests
                "admissionChecksStrategy": _obj(
                    {
                        "admissionChecks": {
                            "type": "array",
                            "items": _obj(
                                {"name": STR, "onFlavors": {"type": "array", "items": STR}}, required=["name"]
                            ),
                        }
                    }
                ),
                "preemption": _obj(
                    {
                        "withinClusterQueue": {
                            "type": "string",
                            "enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
                            "default": "Never",
                        },
                        "reclaimWithinCohort": {
                            "type": "string",
                            "enum": ["Never", "LowerPriority", "Any"],
                            "default": "Never",
                        },
                        "borrowWithinCohort": _obj(open_=True),
                    }
                ),
                "stopPolicy": {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"], "default": "None"},
            },
            open_=True,
        ),
        "status": _obj(
            {
                "conditions": cond,
                "pendingWorkloads": INT,
                "reservingWorkloads": INT,
                "admittedWorkloads": INT,
            },
            open_=True,
        ),
    }
    local_queue = {
        "spec": _obj(
            {
                "clusterQueue": STR,
                "stopPolicy": {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"], "default": "None"},
            },
            open_=True,
        ),
        "status": _obj(
            {"conditions": cond, "pendingWorkloads": INT, "reservingWorkloads": INT, "admittedWorkloads": INT},
            open_=True,
        ),
    }
    admission_check = {
        "spec": _obj(
            {
                "controllerName": {
                    **STR,
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "field is immutable"}],
                },
                "parameters": _obj({"apiGroup": STR, "kind": STR, "name": STR}, required=["apiGroup", "kind", "name"]),
            },
            required=["controllerName"],
        ),
        "status": _obj({"conditions": cond}),
    }
    flavor = {
        "spec": _obj(
            {
                "nodeLabels": STRMAP,
                "nodeTaints": {"type": "array", "items": _core("IoK8sApiCoreV1Taint")},
                "tolerations": tolerations,
                "topologyName": STR,
            }
        )
    }
    cols_cq = [
        {"name": "Cohort", "type": "string", "jsonPath": ".spec.cohortName"},
        {"name": "Strategy", "type": "string", "jsonPath": ".spec.queueingStrategy", "priority": 1},
        {"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
        {"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads", "priority": 1},
    ]
    cols_lq = [
        {"name": "ClusterQueue", "type": "string", "jsonPath": ".spec.clusterQueue"},
        {"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
        {"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads"},
    ]
    cols_wl = [
        {"name": "Queue", "type": "string", "jsonPath": ".spec.queueName"},
        {"name": "Reserved in", "type": "string", "jsonPath": ".status.admission.clusterQueue"},
        {"name": "Admitted", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Admitted')].status"},
        {"name": "Finished", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Finished')].status"},
        AGE,
    ]
    cols_wpc = [{"name": "Value", "type": "integer", "jsonPath": ".value"}]
    kinds = [
        ("Workload", "workloads", "Namespaced", workload, cols_wl, ["wl"]),
        ("ClusterQueue", "clusterqueues", "Cluster", cluster_queue, cols_cq, ["cq"]),
        ("LocalQueue", "localqueues", "Namespaced", local_queue, cols_lq, ["lq", "queue", "queues"]),
        ("AdmissionCheck", "admissionchecks", "Cluster", admission_check, [AGE], []),
        ("ResourceFlavor", "resourceflavors", "Cluster", flavor, [AGE], ["flavor", "flavors", "rf"]),
        ("WorkloadPriorityClass", "workloadpriorityclasses", "Cluster", None, cols_wpc, []),
    ]
    out = []
    for kind, plural, scope, parts, cols, short in kinds:
        props: dict[str, Any] = {"apiVersion": STR, "kind": STR, "metadata": {"type": "object"}}
        if parts is None:  # WorkloadPriorityClass: top-level value and description, no spec/status
            props |= {"value": INT, "description": STR}
            schema = _obj(props, required=["value"])
        else:
            props |= parts
            schema = _obj(props)
        ver: dict[str, Any] = {
            "name": KUEUE_VERSION,
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": schema},
            "additionalPrinterColumns": cols,
        }
        if parts and "status" in parts:
            ver["subresources"] = {"status": {}}
        names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
        if short:
            names["shortNames"] = short
        out.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": f"{plural}.kueue.x-k8s.io",
                    "annotations": {
                        "dispatch.io/generated-by": "scripts/k8s/gen_crds.py from Kueue's API reference (fields used)"
                    },
                },
                "spec": {"group": "kueue.x-k8s.io", "names": names, "scope": scope, "versions": [ver]},
            }
        )
    return out


KUEUE_VERSION = "v1beta2"


def render() -> dict[str, str]:
    files: dict[str, list[dict[str, Any]]] = {}
    for file, *args in KINDS:
        files.setdefault(file, []).append(crd(*args))  # type: ignore[arg-type]
    files["kueue"] = kueue_crds()
    header = (
        "# GENERATED by scripts/k8s/gen_crds.py; do not edit. Trainer and JobSet: from the kubeflow-trainer-api\n"
        "# models (defaults, list-map keys, CEL rules, printer columns: the upstream kubebuilder markers). Kueue:\n"
        "# written in the script from Kueue's API reference for the fields used; core types from the models.\n"
    )
    return {f: header + yaml.safe_dump_all(docs, sort_keys=True, width=120) for f, docs in files.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed CRDs are not what the models give")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for f, text in render().items():
        path = OUT / f"{f}.yaml"
        if a.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
            print(f"wrote {path} ({len(text)} bytes)")
    if stale:
        print("stale (run scripts/k8s/gen_crds.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

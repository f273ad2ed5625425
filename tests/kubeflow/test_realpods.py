"""Real nodes beside kwok's (scripts/k8s/nodes-up.sh): kubelets with a containerd each, registered with the real
control plane, whose pods are real containers on one CNI bridge.

These tests start nothing: they read ``real_nodes`` from ``$DISPATCH_TEST_STATE/k8s/control-plane.json`` and fail,
naming the script, when it lists fewer than two. Each pod asks for its node by name and tolerates the nodes' taint
(``dispatch.dev/real=true:NoSchedule``), which keeps every other test's pods on the kwok nodes. The image is the
busybox image nodes-up.sh imported into each node's containerd (no registry: ``imagePullPolicy: Never``).
"""

# ruff: noqa: F811  (the fixtures control_plane and k are imported from test_controlplane)

from __future__ import annotations

import importlib.util
import ipaddress
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_controlplane import CONTROL_PLANE_JSON, Kubectl, condition, control_plane, k, wait_for  # noqa: F401

pytestmark = pytest.mark.realpods

TAINT = "dispatch.dev/real"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# an HTTP server on port 8080 answering its pod's hostname
SERVE = "mkdir -p /tmp/www && echo served-by-$(hostname) >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"


@pytest.fixture(scope="module")
def real_nodes(control_plane: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = control_plane.get("real_nodes") or []
    if len(nodes) < 2:
        pytest.fail(f"{CONTROL_PLANE_JSON} lists {len(nodes)} real nodes: start them with scripts/k8s/nodes-up.sh")
    return nodes


def pod(control_plane: dict[str, Any], name: str, node: str, script: str, *, tolerate: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "main",
                "image": control_plane["real_images"]["busybox"],
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", script],
            }
        ],
    }
    if tolerate:
        spec["tolerations"] = [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def phase(k: Kubectl, name: str, *phases: str) -> dict[str, Any] | None:
    p: dict[str, Any] = k.get("pod", name)
    return p if p["status"].get("phase") in phases else None


def test_the_real_nodes_are_ready_tainted_and_run_the_control_planes_release(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    release = control_plane["components"]["kube-apiserver"]["version"]
    for entry in real_nodes:
        node = k.get("node", entry["name"], namespaced=False)
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", ready
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == entry["kubelet"]["version"] == release
        assert info["containerRuntimeVersion"] == entry["runtime"]["version"]
        assert entry["runtime"]["version"].startswith("containerd://")
        taints = {(t["key"], t.get("value"), t["effect"]) for t in node["spec"].get("taints") or []}
        assert (TAINT, "true", "NoSchedule") in taints
        assert node["metadata"]["labels"].get(TAINT) == "true"
        assert {"type": "InternalIP", "address": entry["address"]} in node["status"]["addresses"]
        assert "kwok.x-k8s.io/node" not in (node["metadata"].get("annotations") or {})


def test_a_pod_that_does_not_tolerate_the_taint_stays_off_a_real_node(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    k.apply(pod(control_plane, "intruder", real_nodes[0]["name"], "true", tolerate=False))

    def unschedulable() -> str | None:
        for c in k.get("pod", "intruder")["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return str(c.get("message", ""))
        return None

    message = wait_for("the scheduler's refusal", unschedulable)
    assert "untolerated taint" in message, message  # kube-scheduler 1.36 names no key
    assert not k.get("pod", "intruder")["spec"].get("nodeName")


def test_each_real_node_runs_a_container_whose_log_and_exit_code_are_read(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """The output comes through kube-apiserver's pods/log from the kubelet, as containerd wrote it; exit 3 is 3."""
    for entry in real_nodes:
        name = f"exit3-{entry['name']}"
        k.apply(pod(control_plane, name, entry["name"], 'echo "hello from $(hostname)"; echo to-stderr >&2; exit 3'))
    for entry in real_nodes:
        name = f"exit3-{entry['name']}"
        done = wait_for(f"pod {name} Failed", lambda name=name: phase(k, name, "Failed", "Succeeded"), timeout=180)
        assert done["status"]["phase"] == "Failed"
        assert done["spec"]["nodeName"] == entry["name"]
        term = done["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (3, "Error"), term
        assert term["containerID"].startswith("containerd://")
        low, high = (ipaddress.ip_address(a) for a in entry["pod_range"].split("-"))
        assert low <= ipaddress.ip_address(done["status"]["podIP"]) <= high, done["status"]["podIP"]
        assert done["status"]["hostIP"] == entry["address"]
        # containerd reads stdout and stderr from two pipes and stamps each line as it reads it: lines of the two
        # streams written a moment apart may come in either order (seen both ways here)
        assert sorted(k.run("logs", name).splitlines()) == [f"hello from {name}", "to-stderr"]


def test_a_pod_on_one_real_node_reaches_a_pod_on_the_other_by_ip(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    client_node, server_node = real_nodes[0]["name"], real_nodes[1]["name"]
    k.apply(pod(control_plane, "server", server_node, SERVE))
    server = wait_for("pod server Running", lambda: phase(k, "server", "Running"), timeout=180)
    ip = server["status"]["podIP"]
    # (Debian's busybox-static 1.35 wget crashes with its own -T timeout: the timeout applet stands in)
    fetch = f"for i in $(seq 20); do timeout 3 wget -q -O - http://{ip}:8080/ && exit 0; sleep 0.5; done; exit 1"
    k.apply(pod(control_plane, "client", client_node, fetch))
    done = wait_for("pod client done", lambda: phase(k, "client", "Succeeded", "Failed"), timeout=180)
    log = k.run("logs", "client")
    assert done["status"]["phase"] == "Succeeded", log
    assert log.strip() == "served-by-server"
    assert done["status"]["podIP"] != ip and done["spec"]["nodeName"] == client_node


def test_a_headless_services_pod_is_found_by_name_through_cluster_dns(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """CoreDNS answers the cluster domain from the API server: the pod behind a headless Service by its hostname and
    subdomain (as a JobSet names its pods) and the Service's own name, for a pod on the other node."""
    dns = control_plane.get("cluster_dns")
    if not dns:
        pytest.fail(f"{CONTROL_PLANE_JSON} names no cluster DNS: start the nodes with scripts/k8s/nodes-up.sh")
    k.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc"},
            "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 8080}]},
        }
    )
    server = pod(control_plane, "web", real_nodes[1]["name"], SERVE)
    server["metadata"]["labels"] = {"app": "web"}
    server["spec"] |= {"hostname": "web", "subdomain": "svc"}
    k.apply(server)
    ip = wait_for("pod web Running", lambda: phase(k, "web", "Running"), timeout=180)["status"]["podIP"]
    zone = f"{k.ns}.svc.{dns['domain']}"
    resolve = (
        'for i in $(seq 30); do a=$(nslookup "$1" | awk \'$1 == "Address:" && $2 !~ /:53$/ {print $2}\'); '
        '[ -n "$a" ] && echo "$1 $a" && return 0; sleep 1; done; echo "$1 unresolved"; return 1'
    )
    script = (
        f"resolve() {{ {resolve}; }}; grep nameserver /etc/resolv.conf; resolve web.svc.{zone} && resolve svc.{zone} "
        f"&& timeout 3 wget -q -O - http://$(resolve web.svc.{zone} | cut -d' ' -f2):8080/"
    )
    k.apply(pod(control_plane, "asker", real_nodes[0]["name"], script))
    done = wait_for("pod asker done", lambda: phase(k, "asker", "Succeeded", "Failed"), timeout=180)
    log = k.run("logs", "asker")
    assert done["status"]["phase"] == "Succeeded", log
    assert log.splitlines() == [
        f"nameserver {dns['address']}",
        f"web.svc.{zone} {ip}",
        f"svc.{zone} {ip}",
        "served-by-web",
    ]


def host_torch_runtime(control_plane: dict[str, Any]) -> dict[str, Any]:
    """A TrainingRuntime of the Trainer's torch plugin (as ``torch-distributed``) whose ranks run the host's Python
    and torch and the repository's examples, all mounted read-only into the host-usr image, one rank per real node."""
    prefixes = sorted({sys.base_prefix, sys.prefix})
    mounts = [("usr", "/usr"), *((f"python{i}", p) for i, p in enumerate(prefixes)), ("examples", str(EXAMPLES))]
    pod_spec = {
        "nodeSelector": {TAINT: "true"},
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "trainer.kubeflow.org/trainjob-ancestor-step", "operator": "Exists"}
                            ]
                        },
                        # (the key may not be in labelSelector too: kube-apiserver refuses the pod)
                        "matchLabelKeys": ["jobset.sigs.k8s.io/jobset-name"],
                    }
                ]
            }
        },
        "containers": [
            {
                "name": "node",
                "image": control_plane["real_images"]["host_usr"],
                "imagePullPolicy": "Never",
                "volumeMounts": [
                    {"name": name, "mountPath": "/examples" if name == "examples" else path, "readOnly": True}
                    for name, path in mounts
                ],
            }
        ],
        "volumes": [{"name": name, "hostPath": {"path": path, "type": "Directory"}} for name, path in mounts],
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "host-torch"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "groupName": "default",
                            "replicas": 1,
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"template": {"spec": pod_spec}},
                            },
                        }
                    ]
                }
            },
        },
    }


def test_a_trainjob_of_two_ranks_runs_on_the_two_real_nodes_through_the_torch_runtime(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """The real Trainer, JobSet and Job controllers, the scheduler and two kubelets: torchrun in each pod takes
    the node rank, world size and master address the torch plugin gives it (``PET_*``), reaches rank 0 through
    the JobSet's headless Service by cluster DNS, and each rank prints who it is."""
    if importlib.util.find_spec("torch") is None:
        pytest.fail("torch is not installed for this Python: scripts/training-deps.sh installs it")
    k.apply(host_torch_runtime(control_plane))
    runtime_ref = {"name": "host-torch", "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"}
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "hello"},
        "spec": {
            "runtimeRef": runtime_ref,
            "trainer": {
                "numNodes": 2,
                "command": [sys.executable, "-m", "torch.distributed.run", "/examples/hello_ranks.py"],
            },
        },
    }
    # the Trainer's webhook may not have seen the runtime yet (docs/dev/k8s-control-plane.md): retried
    wait_for("the TrainJob admitted", lambda: _created(k, trainjob), timeout=30)
    wait_for("TrainJob hello Complete", lambda: condition(k.get("trainjob", "hello"), "Complete"), timeout=300)
    pods = sorted(k.items("pods", "jobset.sigs.k8s.io/jobset-name=hello"), key=lambda p: p["metadata"]["name"])
    assert [p["metadata"]["name"].rsplit("-", 1)[0] for p in pods] == ["hello-node-0-0", "hello-node-0-1"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(n["name"] for n in real_nodes[:2])
    for rank, p in enumerate(pods):
        lines = [line for line in k.run("logs", p["metadata"]["name"]).splitlines() if line.startswith("rank ")]
        assert lines == [
            *(f"rank {rank}/2 on hello-node-0-{rank} execution ?: step {step}" for step in range(3)),
            f"rank {rank}: done (rendezvous hello-node-0-0.hello:29500)",
        ], lines


def _created(k: Kubectl, doc: dict[str, Any]) -> bool:
    try:
        k.apply(doc)
    except AssertionError as e:
        if "admission webhook" in str(e):
            return False
        raise
    return True


# ------------------------------------------------------------------- what only a real kubelet can tell


def limited(doc: dict[str, Any], memory: str) -> dict[str, Any]:
    doc["spec"]["containers"][0]["resources"] = {"limits": {"memory": memory}}
    return doc


def test_the_memory_cgroup_kills_a_container_over_its_limit_read_oomkilled_137(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """busybox tail, looking for a newline in /dev/zero, holds all it reads: the memory cgroup's OOM killer ends
    it (the container's own process) and the kubelet reports exit 137, OOMKilled."""
    k.apply(limited(pod(control_plane, "oom", real_nodes[0]["name"], "echo start; exec tail </dev/zero"), "32Mi"))
    done = wait_for("pod oom ended", lambda: phase(k, "oom", "Failed", "Succeeded"), timeout=180)
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (done["status"]["phase"], term["exitCode"], term["reason"]) == ("Failed", 137, "OOMKilled"), term


def test_an_oom_kill_of_a_child_marks_a_container_that_exits_0_oomkilled(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """A child killed by the memory cgroup while the container's own process goes on and exits 0: the pod
    Succeeded, its container reads exit 0 **and** reason OOMKilled (containerd reports any OOM event of the
    container's cgroup). So OOMKilled alone does not say the program failed."""
    script = "head -c 200m /dev/zero | tail >/dev/null; echo survived"
    k.apply(limited(pod(control_plane, "oomchild", real_nodes[1]["name"], script), "32Mi"))
    done = wait_for("pod oomchild ended", lambda: phase(k, "oomchild", "Failed", "Succeeded"), timeout=180)
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (done["status"]["phase"], term["exitCode"], term["reason"]) == ("Succeeded", 0, "OOMKilled"), term
    # the shell's "Killed" (stderr) and "survived" (stdout) may come in either order (the log's two pipes)
    assert sorted(k.run("logs", "oomchild").splitlines()) == ["Killed", "survived"]


def test_a_deleted_pods_process_gets_sigterm_then_sigkill_after_its_grace_period(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl, tmp_path: Path
) -> None:
    """What a rank receives when its pod is deleted (preemption, eviction): SIGTERM at once, then, as it ignores
    it, SIGKILL when terminationGracePeriodSeconds (5) has passed. The rank writes what it got to a hostPath
    directory, stamped with the uptime clock, which the host shares."""
    out = tmp_path / "signals"
    out.mkdir(mode=0o777)
    script = (
        "trap 'echo TERM $(cut -d\" \" -f1 /proc/uptime) >>/out/got' TERM; "
        "echo started $(cut -d' ' -f1 /proc/uptime) >>/out/got; while true; do sleep 0.2; done"
    )
    doc = pod(control_plane, "term", real_nodes[1]["name"], script)
    doc["spec"]["terminationGracePeriodSeconds"] = 5
    doc["spec"]["containers"][0]["volumeMounts"] = [{"name": "out", "mountPath": "/out"}]
    doc["spec"]["volumes"] = [{"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}]
    k.apply(doc)
    wait_for("the rank started", lambda: (out / "got").exists(), timeout=180)
    t0 = uptime()
    k.run("delete", "pod", "term", "--wait=true", "--timeout=60s")
    gone = uptime() - t0
    got = dict(line.split() for line in (out / "got").read_text().splitlines())
    assert "TERM" in got, got
    assert float(got["TERM"]) - t0 < 3, (got, t0)  # at once (kubectl and the kubelet's next sync)
    assert 5 <= gone < 15, gone  # killed after the grace period, not before


def uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def test_an_image_that_is_not_there_is_reported_by_the_kubelet_with_its_reason(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """Never pulled: ErrImageNeverPull. IfNotPresent, no registry answers: ErrImagePull, then ImagePullBackOff,
    with containerd's words."""
    for name, policy, node in (("never", "Never", real_nodes[0]), ("ifnotpresent", "IfNotPresent", real_nodes[1])):
        doc = pod(control_plane, name, node["name"], "true")
        doc["spec"]["containers"][0] |= {"image": "dispatch.local/not-there:1", "imagePullPolicy": policy}
        k.apply(doc)

    def waiting(name: str) -> dict[str, Any] | None:
        for cs in k.get("pod", name)["status"].get("containerStatuses") or []:
            w = cs.get("state", {}).get("waiting")
            if w and w.get("reason") not in (None, "ContainerCreating"):
                return dict(w)
        return None

    never = wait_for("pod never waiting", lambda: waiting("never"), timeout=180)
    assert never["reason"] == "ErrImageNeverPull", never
    assert 'image "dispatch.local/not-there:1" is not present with pull policy of Never' in never["message"]
    pull = wait_for("pod ifnotpresent waiting", lambda: waiting("ifnotpresent"), timeout=180)
    assert pull["reason"] in ("ErrImagePull", "ImagePullBackOff"), pull
    assert "failed to resolve reference" in pull["message"], pull


def test_a_node_whose_kubelet_stops_answering_has_its_pods_evicted_and_ended_when_it_returns(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """The kubelet of the second node frozen (SIGSTOP): 60 s after its last heartbeat (the grace period here) the node
    reads Ready=Unknown and is tainted unreachable, and 10 s later (the API server's default toleration) the taint
    manager evicts the pod, which stays Terminating with its container still running: nobody on the node answers.
    The kubelet let go again (SIGCONT) ends the container and the pod is gone."""
    node = real_nodes[1]
    k.apply(pod(control_plane, "stranded", node["name"], "while true; do sleep 1; done"))
    wait_for("pod stranded Running", lambda: phase(k, "stranded", "Running"), timeout=180)
    pid = int(node["kubelet"]["pid"])
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "kubelet", f"{pid} is not {node['name']}'s kubelet"

    def ready() -> str:
        conds = k.get("node", node["name"], namespaced=False)["status"]["conditions"]
        return next(str(c["status"]) for c in conds if c["type"] == "Ready")

    t0 = uptime()
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for("the node Ready=Unknown", lambda: ready() == "Unknown", timeout=150)
        unknown = uptime() - t0

        def evicted() -> dict[str, Any] | None:
            p: dict[str, Any] = k.get("pod", "stranded")
            reasons = [c.get("reason") for c in p["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
            return p if p["metadata"].get("deletionTimestamp") and reasons else None

        p = wait_for("the pod evicted by the taint manager", evicted, timeout=60)
        gone = uptime() - t0
        target = next(c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert target["reason"] == "DeletionByTaintManager", target
        # the grace period runs from the last heartbeat (a lease renewed every 10 s), not from the freeze
        assert 45 <= unknown < 90 and 5 <= gone - unknown < 40, (unknown, gone)
        assert "running" in p["status"]["containerStatuses"][0]["state"]  # nobody told the node
    finally:
        os.kill(pid, signal.SIGCONT)
        wait_for("the node Ready again", lambda: ready() == "True", timeout=120)  # for the tests after this one
    wait_for("the pod gone", lambda: all(q["metadata"]["name"] != "stranded" for q in k.items("pods")), timeout=120)

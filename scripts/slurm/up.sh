#!/usr/bin/env bash
# up.sh: bring up the three test clusters (local-up.sh, sid-up.sh and trixie-up.sh, in
# parallel; their host apt steps are serialised by a lock) and write the machine-readable description
# ${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}/clusters.json that the tests read.
# Idempotent: with all clusters up it only checks them (about 1 s).
# Run as root. Env: see local-up.sh and chroot-up.sh. See docs/dev/test-clusters.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
LOG_TAG=up
need_root
T0=$SECONDS
mkdir -p "$DISPATCH_TEST_STATE"

# debootstrap (small) first: then the chroots' downloads overlap the host's Slurm install
for c in sid trixie; do
  v="${c^^}_SLURM_ROOT"
  if [ ! -f "${!v:-/opt/dispatch-slurm-$c}/.dispatch-bootstrapped" ]; then
    host_apt_install debootstrap
  fi
done
CLUSTERS=(local sid trixie)
declare -A pids
for c in "${CLUSTERS[@]}"; do
  "$HERE/$c-up.sh" &
  pids[$c]=$!
done
failed=()
for c in "${CLUSTERS[@]}"; do
  rc=0
  wait "${pids[$c]}" || rc=$?
  [ "$rc" = 0 ] || { log "$c-up.sh failed (exit $rc)"; failed+=("$c"); }
done
[ "${#failed[@]}" = 0 ] || { rm -f "$DISPATCH_TEST_STATE/clusters.json"; die "cluster bring-up failed: ${failed[*]}"; }

# clusters.json must not point into a clone that may be deleted: the admin helper is
# installed next to it (admin.sh finds lib.sh in its own directory)
install -d -m 755 "$DISPATCH_TEST_STATE/bin"
install -m 755 "$HERE/admin.sh" "$DISPATCH_TEST_STATE/bin/admin.sh"
install -m 644 "$HERE/lib.sh" "$DISPATCH_TEST_STATE/bin/lib.sh"
# the settings in clusters.json are read back from the running controllers
for c in "${CLUSTERS[@]}"; do
  "$HERE/admin.sh" "$c" scontrol show config >"$DISPATCH_TEST_STATE/$c-config.txt"
done
python3 - "$DISPATCH_TEST_STATE" "$HERE" <<'PY'
import datetime, json, os, re, sys

state, here = sys.argv[1:]
out = os.path.join(state, "clusters.json")
admin = os.path.join(state, "bin", "admin.sh")
KEYS = ["SLURM_VERSION", "ClusterName", "MinJobAge", "KillWait", "SlurmdTimeout", "SlurmctldTimeout",
        "MessageTimeout", "OverTimeLimit", "JobRequeue", "ReturnToService", "AuthType", "AuthInfo",
        "CredType", "PreemptType", "PreemptMode", "SelectType", "SelectTypeParameters", "DefMemPerCPU",
        "TaskPlugin", "ProctrackType", "SchedulerType", "SchedulerParameters", "AccountingStorageType",
        "AccountingStorageEnforce", "SlurmctldPort", "PriorityType"]


def env_file(name):
    values = {}
    with open(os.path.join(state, f"{name}.env")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                values[k] = v
    return values


def settings(name):
    cfg = {}
    with open(os.path.join(state, f"{name}-config.txt")) as f:
        for line in f:
            m = re.match(r"^(\w+)\s+= (.*)$", line.rstrip("\n"))
            if m and m.group(1) in KEYS:
                cfg[m.group(1)] = m.group(2).strip()
    return cfg


def seconds(value):
    m = re.match(r"^(\d+) sec$", value or "")
    return int(m.group(1)) if m else None


def timings(cfg, requeue_delay):
    return {"min_job_age_s": seconds(cfg.get("MinJobAge")), "kill_wait_s": seconds(cfg.get("KillWait")),
            "slurmd_timeout_s": seconds(cfg.get("SlurmdTimeout")), "requeue_delay_s": requeue_delay}


def local():
    env = env_file("local")
    cfg = settings("local")
    m = re.search(r"cred_expire=(\d+)", cfg.get("AuthInfo", ""))
    nodes, spare = int(env["LOCAL_NODES"]), int(env.get("LOCAL_SPARE", 0))
    return {
        "version": env["LOCAL_VERSION"],
        "cluster_name": "localcluster",
        "transport": "local",
        "user": "root",
        "account": "testacct",
        "partitions": {"default": "normal", "preempt": "high", "wide": "wide"},
        "nodes": [f"n{i}" for i in range(1, nodes + 1)],
        "spare_nodes": [f"n{i}" for i in range(nodes + 1, nodes + spare + 1)],
        "cpus_per_node": 2,
        "memory_per_node_mb": 4000,
        "memory_enforced": env["LOCAL_MEMORY_ENFORCED"] == "true",
        "gpus_per_node": int(env.get("LOCAL_GPUS_PER_NODE", 0)),
        "env": {"SLURM_CONF": "/etc/slurm/slurm.conf"},
        "settings": cfg,
        "timings": timings(cfg, int(m.group(1)) if m else 120),
        "ports": {"slurmctld": 6817, "slurmdbd": 6819, "slurmd": [6821 + i for i in range(nodes + spare)], "mariadb": 3306},
        "admin": {
            "command": [admin, "local"],
            "exec_prefix": ["env", "SLURM_CONF=/etc/slurm/slurm.conf"],
            "user": "root",
        },
        "logs": {"dir": "/var/log/slurm"},
    }


# the chroot clusters (chroot-up.sh): ssh port, user, and the base of the Slurm ports
CHROOTS = {"sid": (2222, "ada", 7800, 3307), "trixie": (2223, "grace", 8800, 3308)}


def chroot(name):
    pfx = name.upper()
    env = env_file(name)
    cfg = settings(name)
    default_port, default_user, base, db_port = CHROOTS[name]
    port = int(env.get(f"{pfx}_SSH_PORT", default_port))
    user = env.get(f"{pfx}_USER", default_user)
    keydir, root, nodes = env[f"{pfx}_KEYDIR"], env[f"{pfx}_ROOT"], int(env[f"{pfx}_NODES"])
    spare = int(env.get(f"{pfx}_SPARE", 0))
    m = re.search(r"requeue_delay=(\d+)", cfg.get("SchedulerParameters", "")) or re.search(
        r"cred_expire=(\d+)", cfg.get("AuthInfo", "")
    )
    key = os.path.join(keydir, "id_ed25519")
    known_hosts = os.path.join(keydir, "known_hosts")
    return {
        "version": env[f"{pfx}_VERSION"],
        "cluster_name": name,
        "transport": "ssh",
        "host": "127.0.0.1",
        "port": port,
        "user": user,
        "identity_file": key,
        "known_hosts": known_hosts,
        "ssh_config": os.path.join(keydir, "ssh_config"),
        "ssh_host_alias": f"slurm-{name}",
        "ssh_options": [
            "-p", str(port), "-i", key,
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
        ],
        "account": "research",
        "partitions": {"default": "batch", "preempt": "urgent", "wide": "wide"},
        "nodes": [f"node{i}" for i in range(1, nodes + 1)],
        "spare_nodes": [f"node{i}" for i in range(nodes + 1, nodes + spare + 1)],
        "cpus_per_node": 2,
        "memory_per_node_mb": 4000,
        "memory_enforced": env[f"{pfx}_MEMORY_ENFORCED"] == "true",
        "gpus_per_node": int(env.get(f"{pfx}_GPUS_PER_NODE", 0)),
        "env": {},
        "settings": cfg,
        "timings": timings(cfg, int(m.group(1)) if m else 120),
        "ports": {"ssh": port, "slurmctld": base + 17, "slurmdbd": base + 19,
                  "slurmd": [base + 21 + i for i in range(nodes + spare)], "mariadb": db_port},
        "chroot": root,
        "admin": {
            "command": [admin, name],
            "exec_prefix": ["chroot", root, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
            "user": "root",
        },
        "logs": {"dir": os.path.join(root, "var/log/slurm")},
    }


data = {
    "schema_version": 1,
    "generated_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "generated_by": os.path.join(here, "up.sh"),
    "local": local(),
    "sid": chroot("sid"),
    "trixie": chroot("trixie"),
}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, out)
PY
log "all three clusters up; wrote $DISPATCH_TEST_STATE/clusters.json ($((SECONDS - T0)) s)"

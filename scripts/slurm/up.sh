#!/usr/bin/env bash
# up.sh: bring up both test clusters (local-up.sh and sid-up.sh, in parallel; their host
# apt steps are serialised by a lock) and write the machine-readable description
# ${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}/clusters.json that the tests read.
# Idempotent: with both clusters up it only checks them (about 1 s).
# Run as root. Env: see local-up.sh and sid-up.sh. See docs/dev/test-clusters.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
LOG_TAG=up
need_root
T0=$SECONDS
mkdir -p "$DISPATCH_TEST_STATE"

# debootstrap (small) first: then the sid chroot's download overlaps the host's Slurm install
if [ ! -f "${SID_SLURM_ROOT:-/opt/dispatch-slurm-sid}/.dispatch-bootstrapped" ]; then
  host_apt_install debootstrap
fi
"$HERE/local-up.sh" &
pid_local=$!
"$HERE/sid-up.sh" &
pid_sid=$!
rc_local=0 rc_sid=0
wait "$pid_local" || rc_local=$?
wait "$pid_sid" || rc_sid=$?
[ "$rc_local" = 0 ] || log "local-up.sh failed (exit $rc_local)"
[ "$rc_sid" = 0 ] || log "sid-up.sh failed (exit $rc_sid)"
[ "$rc_local" = 0 ] && [ "$rc_sid" = 0 ] || { rm -f "$DISPATCH_TEST_STATE/clusters.json"; die "cluster bring-up failed"; }

# shellcheck disable=SC1091
. "$DISPATCH_TEST_STATE/local.env"
# shellcheck disable=SC1091
. "$DISPATCH_TEST_STATE/sid.env"
# clusters.json must not point into a clone that may be deleted: the admin helper is
# installed next to it (admin.sh finds lib.sh in its own directory)
install -d -m 755 "$DISPATCH_TEST_STATE/bin"
install -m 755 "$HERE/admin.sh" "$DISPATCH_TEST_STATE/bin/admin.sh"
install -m 644 "$HERE/lib.sh" "$DISPATCH_TEST_STATE/bin/lib.sh"
# the settings in clusters.json are read back from the running controllers
"$HERE/admin.sh" local scontrol show config >"$DISPATCH_TEST_STATE/local-config.txt"
"$HERE/admin.sh" sid scontrol show config >"$DISPATCH_TEST_STATE/sid-config.txt"
python3 - "$DISPATCH_TEST_STATE/clusters.json" "$HERE" "$LOCAL_VERSION" "$LOCAL_NODES" \
  "$LOCAL_MEMORY_ENFORCED" "$SID_VERSION" "$SID_ROOT" "$SID_KEYDIR" "$SID_NODES" "$SID_MEMORY_ENFORCED" \
  "$DISPATCH_TEST_STATE/local-config.txt" "$DISPATCH_TEST_STATE/sid-config.txt" <<'PY'
import datetime, json, os, re, sys

(out, here, local_version, local_nodes, local_mem, sid_version, sid_root, sid_keydir,
 sid_nodes, sid_mem, local_cfg, sid_cfg) = sys.argv[1:]
admin = os.path.join(os.path.dirname(out), "bin", "admin.sh")
KEYS = ["SLURM_VERSION", "ClusterName", "MinJobAge", "KillWait", "SlurmdTimeout", "SlurmctldTimeout",
        "MessageTimeout", "OverTimeLimit", "JobRequeue", "ReturnToService", "AuthType", "AuthInfo",
        "CredType", "PreemptType", "PreemptMode", "SelectType", "SelectTypeParameters", "DefMemPerCPU",
        "TaskPlugin", "ProctrackType", "SchedulerType", "SchedulerParameters", "AccountingStorageType",
        "AccountingStorageEnforce", "SlurmctldPort", "PriorityType"]


def settings(path):
    cfg = {}
    with open(path) as f:
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


local_settings = settings(local_cfg)
sid_settings = settings(sid_cfg)
m = re.search(r"cred_expire=(\d+)", local_settings.get("AuthInfo", ""))
local_requeue_delay = int(m.group(1)) if m else 120
m = re.search(r"requeue_delay=(\d+)", sid_settings.get("SchedulerParameters", ""))
sid_requeue_delay = int(m.group(1)) if m else 120
key = os.path.join(sid_keydir, "id_ed25519")
known_hosts = os.path.join(sid_keydir, "known_hosts")
ssh_options = [
    "-p", "2222", "-i", key,
    "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
    "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
    "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
]
data = {
    "schema_version": 1,
    "generated_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "generated_by": os.path.join(here, "up.sh"),
    "local": {
        "version": local_version,
        "cluster_name": "localcluster",
        "transport": "local",
        "user": "root",
        "account": "testacct",
        "partitions": {"default": "normal", "preempt": "high"},
        "nodes": [f"n{i}" for i in range(1, int(local_nodes) + 1)],
        "cpus_per_node": 2,
        "memory_per_node_mb": 4000,
        "memory_enforced": local_mem == "true",
        "env": {"SLURM_CONF": "/etc/slurm/slurm.conf"},
        "settings": local_settings,
        "timings": timings(local_settings, local_requeue_delay),
        "ports": {"slurmctld": 6817, "slurmdbd": 6819, "slurmd": [6821 + i for i in range(int(local_nodes))],
                  "mariadb": 3306},
        "admin": {
            "command": [admin, "local"],
            "exec_prefix": ["env", "SLURM_CONF=/etc/slurm/slurm.conf"],
            "user": "root",
        },
        "logs": {"dir": "/var/log/slurm"},
    },
    "sid": {
        "version": sid_version,
        "cluster_name": "sid",
        "transport": "ssh",
        "host": "127.0.0.1",
        "port": 2222,
        "user": "ada",
        "identity_file": key,
        "known_hosts": known_hosts,
        "ssh_config": os.path.join(sid_keydir, "ssh_config"),
        "ssh_host_alias": "slurm-sid",
        "ssh_options": ssh_options,
        "account": "research",
        "partitions": {"default": "batch", "preempt": "urgent"},
        "nodes": [f"node{i}" for i in range(1, int(sid_nodes) + 1)],
        "cpus_per_node": 2,
        "memory_per_node_mb": 4000,
        "memory_enforced": sid_mem == "true",
        "env": {},
        "settings": sid_settings,
        "timings": timings(sid_settings, sid_requeue_delay),
        "ports": {"ssh": 2222, "slurmctld": 7817, "slurmdbd": 7819,
                  "slurmd": [7821 + i for i in range(int(sid_nodes))], "mariadb": 3307},
        "chroot": sid_root,
        "admin": {
            "command": [admin, "sid"],
            "exec_prefix": ["chroot", sid_root, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
            "user": "root",
        },
        "logs": {"dir": os.path.join(sid_root, "var/log/slurm")},
    },
}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, out)
PY
log "both clusters up; wrote $DISPATCH_TEST_STATE/clusters.json ($((SECONDS - T0)) s)"

#!/usr/bin/env bash
# controlplane-up.sh: start, idempotently and as root, a real Kubernetes control plane on 127.0.0.1
# from the binaries controlplane-build.sh made (built first if missing):
#   etcd, kube-apiserver (TLS, RBAC, our own CA), kube-controller-manager (all default controllers:
#   Job, garbage collector, node lifecycle, ...), kube-scheduler, kwok (simulated kubelets for
#   $K8S_CP_NODES nodes, with kwok's own stages: pods run, succeed, fail with an exit code or OOMKilled,
#   nodes go NotReady) and then the real JobSet, Kueue and Kubeflow Trainer controllers with their
#   CRDs, their admission webhooks served out of cluster (a `url` client config, our CA), and the
#   Trainer's default ClusterTrainingRuntimes, all from their Go modules.
# Writes $DISPATCH_TEST_STATE/k8s/control-plane.json (each running component with its version and
# address, the administrator kubeconfig and certificates, the Trainer's status server). A warm run with everything up returns at
# once; a run that (re)starts etcd begins with an empty store.
# Usage: controlplane-up.sh [core|all]  (core: no JobSet, Kueue or Trainer)
# Env: DISPATCH_TEST_STATE, K8S_CP_ROOT, K8S_CP_PORT_BASE (17000), K8S_CP_NODES (4).
# See docs/dev/k8s-control-plane.md. Stop: scripts/k8s/controlplane-down.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
# shellcheck source=scripts/k8s/controlplane-lib.sh
. "$HERE/controlplane-lib.sh"
LOG_TAG=k8s-cp-up
need_root
T0=$SECONDS

what=${1:-all}
case $what in core | all) ;; *) die "usage: $0 [core|all]" ;; esac
BIN=$(bash "$HERE/controlplane-build.sh" "$what" | tail -n 1)
[ -x "$BIN/kube-apiserver" ] || die "controlplane-build.sh gave no binaries"
host_apt_install openssl curl

S=$DISPATCH_TEST_STATE/k8s/cp
JSON=$DISPATCH_TEST_STATE/k8s/control-plane.json
P=${K8S_CP_PORT_BASE:-17000}
ETCD_PORT=$((P + 379)) PEER_PORT=$((P + 380)) API_PORT=$((P + 443))
KCM_PORT=$((P + 257)) SCHED_PORT=$((P + 259)) KWOK_PORT=$((P + 250))
JOBSET_PORT=$((P + 501)) KUEUE_PORT=$((P + 502)) TRAINER_PORT=$((P + 503))
NODES=${K8S_CP_NODES:-4}
URL=https://127.0.0.1:$API_PORT
mkdir -p "$S"
exec 8>"$S/up.lock"
flock -w 600 8 || die "another controlplane-up.sh is still running"

# ------------------------------------------------------------------ 1. certificates (kept across runs)
ossl() { openssl "$@" >>"$S/openssl.log" 2>&1 || { LOGHINT=$S/openssl.log; die "openssl $1 failed"; }; }
# cert NAME SUBJECT EXT: a key and a certificate signed by our CA
cert() {
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" -keyout "$S/$1.key" -out "$S/$1.csr"
  printf '%b\n' "$3" >"$S/$1.ext"
  ossl x509 -req -in "$S/$1.csr" -CA "$S/ca.crt" -CAkey "$S/ca.key" -CAcreateserial -days 3650 \
    -extfile "$S/$1.ext" -out "$S/$1.crt"
}
# The webhooks' and the Trainer's status server's certificate: the status server is reached from real pods by its
# Service name (scripts/k8s/nodes-up.sh), so the name is in it. A certificate of an earlier set-up without the name
# is made again (same CA) and the Trainer, its one user by that name, restarted with it below.
STATUS_NAME=kubeflow-trainer-controller-manager.kubeflow-system.svc
WEBHOOK_SAN="subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$STATUS_NAME\nextendedKeyUsage=serverAuth"
if [ -s "$S/webhook.crt" ] && ! openssl x509 -in "$S/webhook.crt" -noout -ext subjectAltName | grep -q "DNS:$STATUS_NAME"; then
  log "the serving certificate lacks $STATUS_NAME: made again, the Trainer restarted"
  umask 077; cert webhook "/CN=dispatch-webhooks" "$WEBHOOK_SAN"; umask 022; chmod 644 "$S/webhook.crt"
  stop_pidfile "$S/trainer.pid" trainer-control / 10
fi
if [ ! -s "$S/webhook.crt" ]; then
  log "making a CA, serving, client and service-account keys in $S"
  umask 077
  ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=dispatch-controlplane-ca" -keyout "$S/ca.key" -out "$S/ca.crt"
  cert server "/CN=kube-apiserver" \
    'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth'
  cert admin "/O=system:masters/CN=dispatch-admin" 'extendedKeyUsage=clientAuth'
  cert kubelet "/CN=kwok-kubelet" 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth'
  cert webhook "/CN=dispatch-webhooks" "$WEBHOOK_SAN"
  ossl genrsa -out "$S/sa.key" 2048
  ossl rsa -in "$S/sa.key" -pubout -out "$S/sa.pub"
  umask 022
  chmod 644 "$S"/*.crt "$S/sa.pub"
fi
cat >"$S/admin.kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters: [{name: dispatch-cp, cluster: {server: "$URL", certificate-authority: "$S/ca.crt"}}]
users: [{name: admin, user: {client-certificate: "$S/admin.crt", client-key: "$S/admin.key"}}]
contexts: [{name: dispatch-cp, context: {cluster: dispatch-cp, user: admin, namespace: default}}]
current-context: dispatch-cp
EOK
KC=$S/admin.kubeconfig
kc() { kubectl --kubeconfig "$KC" "$@"; }
api() { curl -sf --cacert "$S/ca.crt" --cert "$S/admin.crt" --key "$S/admin.key" "$URL$1"; }
etcd_ok() { curl -sf "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
healthz() { curl -sfk "https://127.0.0.1:$1/healthz" >/dev/null; }
probe() { curl -sf "http://127.0.0.1:$1/readyz" >/dev/null; }

# start NAME COMM PORT -- ARGV...: start a daemon in its own session unless its pid file names a
# live process of that name; record its pid.
start() {
  local name=$1 comm=$2 port=$3
  shift 4
  pidfile_alive "$S/$name.pid" "$comm" / && return 1
  [ "$port" = - ] || port_free "$port" "$name"
  log "starting $name (log: $S/$name.log)"
  setsid "$@" >"$S/$name.log" 2>&1 8>&- </dev/null &
  echo $! >"$S/$name.pid"
  LOGHINT=$S/$name.log
  return 0
}

# ------------------------------------------------------------------ 2. etcd
NEW_STORE=0
if ! pidfile_alive "$S/etcd.pid" etcd /; then
  NEW_STORE=1
  # a store that is gone takes everything built on it
  for n in trainer:trainer-control kueue:kueue jobset:jobset kwok:kwok kube-scheduler:kube-scheduler \
    kube-controller-manager:kube-controller kube-apiserver:kube-apiserver; do
    stop_pidfile "$S/${n%%:*}.pid" "${n#*:}" / 10   # pid file : process name (comm, 15 characters)
  done
  rm -rf -- "$S/etcd-data"
  port_free "$PEER_PORT" "etcd (peer)"
  # --unsafe-no-fsync: test data, thrown away at the next start
  start etcd etcd "$ETCD_PORT" -- "$BIN/etcd" --name dispatch-cp --data-dir "$S/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-cluster "dispatch-cp=http://127.0.0.1:$PEER_PORT" --unsafe-no-fsync --listen-metrics-urls ""
  waitfor 60 "etcd health" etcd_ok
  LOGHINT=""
fi

# ------------------------------------------------------------------ 3. kube-apiserver
# --endpoint-reconciler-type=none: the `kubernetes` Service would need a non-loopback address.
# Short default toleration of NotReady/unreachable nodes so that node loss evicts pods in seconds.
# The first service-account issuer is this server's own URL: the Trainer's status server discovers the issuer's
# OIDC keys at <issuer>/.well-known/openid-configuration, which only this address serves on this host.
if start kube-apiserver kube-apiserver "$API_PORT" -- "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
  --tls-cert-file "$S/server.crt" --tls-private-key-file "$S/server.key" --client-ca-file "$S/ca.crt" \
  --service-account-issuer "$URL" --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$S/sa.pub" \
  --service-account-signing-key-file "$S/sa.key" --service-cluster-ip-range 10.96.0.0/24 \
  --authorization-mode Node,RBAC --allow-privileged --endpoint-reconciler-type none \
  --kubelet-preferred-address-types InternalIP --kubelet-client-certificate "$S/admin.crt" \
  --kubelet-client-key "$S/admin.key" \
  --default-not-ready-toleration-seconds 10 --default-unreachable-toleration-seconds 10 \
  --enable-priority-and-fairness=false --profiling=false; then
  waitfor 120 "kube-apiserver /readyz" api /readyz
  LOGHINT=""
fi

# ------------------------------------------------------------------ 4. controller-manager, scheduler
# The node grace period is longer than kwok's heartbeat (its node-heartbeat stage: every 20 s plus up to
# 5 s of jitter); at 20 s every node went Ready=Unknown for a moment each heartbeat. A lost node is not
# waited for: kwok's node-not-ready stage sets Ready=False itself, seen at the next 2 s monitor period.
if start kube-controller-manager kube-controller "$KCM_PORT" -- "$BIN/kube-controller-manager" \
  --kubeconfig "$KC" --authentication-kubeconfig "$KC" --authorization-kubeconfig "$KC" \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
  --service-account-private-key-file "$S/sa.key" --root-ca-file "$S/ca.crt" \
  --node-monitor-period 2s --node-monitor-grace-period 60s --profiling=false; then
  waitfor 60 "kube-controller-manager /healthz" healthz "$KCM_PORT"
  LOGHINT=""
fi
if start kube-scheduler kube-scheduler "$SCHED_PORT" -- "$BIN/kube-scheduler" \
  --kubeconfig "$KC" --authentication-kubeconfig "$KC" --authorization-kubeconfig "$KC" \
  --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false --profiling=false; then
  waitfor 60 "kube-scheduler /healthz" healthz "$SCHED_PORT"
  LOGHINT=""
fi

# ------------------------------------------------------------------ 5. kwok and its nodes
# kwok's own stages, from the module that was built: pods are created, run, complete (pods of a Job,
# after pod-complete.stage.kwok.x-k8s.io/delay) and are deleted; the chaos stages end a running
# container with an exit code and reason from annotations (pod-container-running-failed.stage.kwok.x-k8s.io/
# exit-code, /reason: e.g. 137 and OOMKilled) and take a node NotReady (label
# node-not-ready.stage.kwok.x-k8s.io=true). Nodes heartbeat like a kubelet, so the node lifecycle
# controller sees them stop.
KWOK_SRC=$(cp_module_dir sigs.k8s.io/kwok "$KWOK_VERSION")/kustomize/stage
[ -d "$KWOK_SRC" ] || die "no kwok stages in the module cache at $KWOK_SRC"
{
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml node/chaos/node-not-ready.yaml \
    pod/general/pod-create.yaml pod/general/pod-init-container-running.yaml \
    pod/general/pod-init-container-completed.yaml pod/general/pod-ready.yaml pod/general/pod-complete.yaml \
    pod/general/pod-delete.yaml pod/chaos/pod-container-running-failed.yaml \
    pod/chaos/pod-init-container-running-failed.yaml; do
    echo '---'
    cat "$KWOK_SRC/$f"
  done
} >"$S/kwok-stages.yaml"
if start kwok kwok "$KWOK_PORT" -- "$BIN/kwok" --kubeconfig "$KC" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --node-ip 127.0.0.1 --node-port "$KWOK_PORT" --server-address "127.0.0.1:$KWOK_PORT" \
  --tls-cert-file "$S/kubelet.crt" --tls-private-key-file "$S/kubelet.key" \
  --cidr 10.244.0.0/16 --config "$S/kwok-stages.yaml"; then
  waitfor 60 "kwok /healthz" healthz "$KWOK_PORT"
  LOGHINT=""
fi
for ((i = 0; i < NODES; i++)); do
  cat <<EON
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
status:
  addresses: [{type: InternalIP, address: 127.0.0.1}, {type: Hostname, address: kwok-node-$i}]
EON
done >"$S/nodes.yaml"
# Both addresses from the start: kwok's node-initialize stage, run again whenever a node is not Ready, writes
# `addresses:` with nothing under it when only one of InternalIP and Hostname is there (its NodeName is empty
# here), which wipes the InternalIP kube-apiserver reaches the kubelet endpoint by (pods/log, exec).
kc apply -f "$S/nodes.yaml" >"$S/kubectl.log" 2>&1 || { LOGHINT=$S/kubectl.log; die "creating the kwok nodes failed"; }
node_ready() { [ "$(kc get node kwok-node-0 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
waitfor 60 "kwok-node-0 Ready" node_ready

# ------------------------------------------------------------------ 6. JobSet, Kueue, Trainer
if [ "$what" = all ]; then
  M=$S/manifests
  mkdir -p "$M" "$S/webhook-tmp/k8s-webhook-server/serving-certs"
  cp "$S/webhook.crt" "$S/webhook-tmp/k8s-webhook-server/serving-certs/tls.crt"
  cp "$S/webhook.key" "$S/webhook-tmp/k8s-webhook-server/serving-certs/tls.key"
  ports=$(printf '{"jobset":%d,"kueue":%d,"trainer":%d,"jobset_health":%d,"kueue_health":%d,"trainer_health":%d,"trainer_status":%d,"certdir":"%s"}' \
    "$JOBSET_PORT" "$KUEUE_PORT" "$TRAINER_PORT" $((JOBSET_PORT + 10)) $((KUEUE_PORT + 10)) $((TRAINER_PORT + 10)) \
    $((TRAINER_PORT + 20)) "$S/webhook-tmp/k8s-webhook-server/serving-certs")
  LOGHINT=$S/render.log
  python3 "$CP_SRC/render.py" "$M" "$S/ca.crt" "$(cp_module_dir sigs.k8s.io/jobset "$JOBSET_VERSION")" \
    "$(cp_module_dir sigs.k8s.io/kueue "$KUEUE_VERSION")" \
    "$(cp_module_dir github.com/kubeflow/trainer/v2 "$TRAINER_VERSION")" "$ports" >"$LOGHINT" 2>&1 \
    || die "rendering the controllers' manifests failed"
  LOGHINT=$S/kubectl.log
  kc create namespace jobset-system --dry-run=client -o yaml | kc apply -f - >"$LOGHINT" 2>&1
  kc create namespace kueue-system --dry-run=client -o yaml | kc apply -f - >>"$LOGHINT" 2>&1
  kc create namespace kubeflow-system --dry-run=client -o yaml | kc apply -f - >>"$LOGHINT" 2>&1
  kc apply --server-side --force-conflicts -f "$M/crds.yaml" >>"$LOGHINT" 2>&1 || die "applying the CRDs failed"
  kc wait --for condition=Established --timeout 60s crd --all >>"$LOGHINT" 2>&1 || die "CRDs not established"
  LOGHINT=""
  # Kueue 0.19 reads its metrics serving certificate from this fixed path when internal cert management is off
  mkdir -p /etc/kueue/metrics/certs
  install -m 644 "$S/webhook.crt" /etc/kueue/metrics/certs/tls.crt
  install -m 600 "$S/webhook.key" /etc/kueue/metrics/certs/tls.key
  export KUBECONFIG=$KC TMPDIR=$S/webhook-tmp
  if start jobset jobset "$JOBSET_PORT" -- "$BIN/jobset" --config "$M/jobset-config.yaml"; then
    waitfor 60 "jobset /readyz" probe $((JOBSET_PORT + 10)); LOGHINT=""
  fi
  if start kueue kueue "$KUEUE_PORT" -- "$BIN/kueue" --config "$M/kueue-config.yaml" \
    --feature-gates VisibilityOnDemand=false; then
    waitfor 90 "kueue /readyz" probe $((KUEUE_PORT + 10)); LOGHINT=""
  fi
  # The Trainer's status server (feature gate TrainJobStatus: dispatch.job.progress reaches status.trainerStatus)
  # reads two fixed in-pod paths: its issuer from /var/run/secrets/kubernetes.io/serviceaccount/token and its
  # serving certificate from /tmp/k8s-webhook-server/serving-certs. Out of cluster, the process gets them in a
  # mount namespace of its own (nothing on the host changes but the empty mount point), with a token of its
  # service account; the CA its TrainJobs' pods trust is the secret certManagement would have made.
  LOGHINT=$S/kubectl.log
  kc -n kubeflow-system create serviceaccount kubeflow-trainer-controller-manager --dry-run=client -o yaml \
    | kc apply -f - >>"$LOGHINT" 2>&1 || die "creating the Trainer's service account failed"
  kc -n kubeflow-system create secret generic kubeflow-trainer-webhook-cert --from-file "ca.crt=$S/ca.crt" \
    --from-file "tls.crt=$S/webhook.crt" --from-file "tls.key=$S/webhook.key" --dry-run=client -o yaml \
    | kc apply -f - >>"$LOGHINT" 2>&1 || die "creating the Trainer's certificate secret failed"
  mkdir -p "$S/trainer-sa" /tmp/k8s-webhook-server
  echo kubeflow-system >"$S/trainer-sa/namespace"
  kc -n kubeflow-system create token kubeflow-trainer-controller-manager --duration 8760h >"$S/trainer-sa/token" \
    2>>"$LOGHINT" || die "no service-account token for the Trainer"
  LOGHINT=""
  # shellcheck disable=SC2016  # expanded by the inner shell
  INPOD='mount --bind "$1" /tmp/k8s-webhook-server && mount -t tmpfs tmpfs /run &&
    mkdir -p /run/secrets/kubernetes.io/serviceaccount && cp "$2"/token "$2"/namespace /run/secrets/kubernetes.io/serviceaccount/ &&
    shift 2 && exec "$@"'
  if start trainer trainer-control "$TRAINER_PORT" -- unshare -m --propagation private -- /bin/sh -c "$INPOD" sh \
    "$S/webhook-tmp/k8s-webhook-server" "$S/trainer-sa" \
    "$BIN/trainer-controller-manager" --config "$M/trainer-config.yaml" --feature-gates TrainJobStatus=true; then
    waitfor 90 "trainer /readyz" probe $((TRAINER_PORT + 10)); LOGHINT=""
  fi
  unset KUBECONFIG TMPDIR
  LOGHINT=$S/kubectl.log
  kc apply --server-side --force-conflicts -f "$M/webhooks.yaml" >>"$LOGHINT" 2>&1 || die "applying the webhooks failed"
  kc apply --server-side --force-conflicts -f "$M/runtimes.yaml" >>"$LOGHINT" 2>&1 \
    || die "applying the Trainer's default runtimes failed"
  LOGHINT=""
fi

# ------------------------------------------------------------------ 7. control-plane.json
declare -A ADDR=(
  [etcd]=http://127.0.0.1:$ETCD_PORT [kube-apiserver]=$URL [kube-controller-manager]=https://127.0.0.1:$KCM_PORT
  [kube-scheduler]=https://127.0.0.1:$SCHED_PORT [kwok]=https://127.0.0.1:$KWOK_PORT
  [jobset]=https://127.0.0.1:$JOBSET_PORT [kueue]=https://127.0.0.1:$KUEUE_PORT
  [trainer-controller-manager]=https://127.0.0.1:$TRAINER_PORT
)
declare -A PIDF=([trainer-controller-manager]=trainer)
declare -A COMM=([kube-controller-manager]=kube-controller [trainer-controller-manager]=trainer-control)
rows=()
for n in "${CP_CORE[@]}" "${CP_CONTROLLERS[@]}"; do
  pf=$S/${PIDF[$n]:-$n}.pid
  pidfile_alive "$pf" "${COMM[$n]:-$n}" / || continue
  rows+=("$n" "${CP_VERSION[$n]}" "${ADDR[$n]}" "$(head -n 1 "$pf")")
done
python3 - "$JSON" "$S" "$URL" "$NODES" "https://127.0.0.1:$((TRAINER_PORT + 20))" "$NEW_STORE" "${rows[@]}" <<'EOP'
import json, os, sys
out, s, url, nodes, status, new_store, *rows = sys.argv[1:]
comps = {rows[i]: {"version": rows[i + 1], "address": rows[i + 2], "pid": int(rows[i + 3])} for i in range(0, len(rows), 4)}
doc = {"server": url, "kubeconfig": f"{s}/admin.kubeconfig", "ca": f"{s}/ca.crt", "client_cert": f"{s}/admin.crt",
       "client_key": f"{s}/admin.key", "nodes": [f"kwok-node-{i}" for i in range(int(nodes))], "components": comps}
if "trainer-controller-manager" in comps:  # its status server (TrainJobStatus), as this host reaches it
    doc["trainer_status_server"] = status
# The real nodes (scripts/k8s/nodes-up.sh) stay listed while their Nodes can be in the store; a new store has none
# of them, and nodes-up.sh registers them again.
if new_store == "0" and os.path.exists(out):
    with open(out) as f:
        old = json.load(f)
    doc |= {key: old[key] for key in ("real_nodes", "real_images", "real_network", "cluster_dns") if key in old}
with open(out + ".new", "w") as f:
    json.dump(doc, f, indent=2)
EOP
mv -f "$JSON.new" "$JSON"
log "control plane ($what) ready at $URL; wrote $JSON ($((SECONDS - T0)) s)"

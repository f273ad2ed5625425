#!/usr/bin/env bash
# nodes-up.sh: start, idempotently and as root, $K8S_REAL_NODES (2) real Kubernetes nodes beside kwok's, registered
# with the control plane controlplane-up.sh started (run that first): each node is a kubelet (built from
# k8s.io/kubernetes at the control plane's release by controlplane-build.sh) with a containerd of its own (Debian's
# containerd, runc and CNI plugins), so pods there are real containers. Pods of every node share one CNI bridge
# (bridge + host-local, a range of one /24 per node), so they reach each other by IP. Images need no registry: the
# pause image (gcc, from the kubelet's module), a busybox image (Debian's busybox-static) and the training image
# host-usr (the layout for the host's /usr, Python and code mounted read-only) are written as OCI layout tars and
# imported into each containerd. The nodes are tainted dispatch.dev/real=true:NoSchedule and
# labelled dispatch.dev/real=true: only a pod that tolerates the taint runs there.
# CoreDNS (built from its Go module) serves the cluster domain on the bridge's address, the nodes' cluster DNS.
# Adds `real_nodes` (each with its kubelet and runtime versions), `real_images` and `cluster_dns` to
# $DISPATCH_TEST_STATE/k8s/control-plane.json. Host changes are limited to: the packages, one bridge with its
# addresses, one cgroup per node in each v1 hierarchy, a shared bind mount of each kubelet's root directory on
# itself, and the empty mount points /var/lib/kubelet and /var/log/containers. No sysctl of the host is written:
# each kubelet runs in a mount namespace of its own with /proc/sys read-only and the values it checks
# (protectKernelDefaults) bound over their files. A warm run with everything up returns in seconds.
# Usage: nodes-up.sh
# Env: DISPATCH_TEST_STATE, K8S_CP_ROOT, K8S_CP_PORT_BASE (17000: kubelet N listens on base+600+10N, its healthz
#      on base+601+10N, CoreDNS's health on base+680; node N's cgroups are /dispatch-k8s<base>-real-N), K8S_REAL_NODES (2), K8S_NODES_BRIDGE (dispatch-k8s0), K8S_NODES_NET (10.201.0: the bridge
#      .1, node N .(1+N), node N's pods .(64N) to .(64N+63)), CP_NICE (the kubelet's build; 10).
# See docs/dev/k8s-control-plane.md (Real nodes). Stop: scripts/k8s/nodes-down.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
# shellcheck source=scripts/k8s/controlplane-lib.sh
. "$HERE/controlplane-lib.sh"
LOG_TAG=k8s-nodes-up
need_root
T0=$SECONDS

CPS=$DISPATCH_TEST_STATE/k8s/cp
JSON=$DISPATCH_TEST_STATE/k8s/control-plane.json
S=$DISPATCH_TEST_STATE/k8s/nodes
COUNT=${K8S_REAL_NODES:-2}
P=${K8S_CP_PORT_BASE:-17000}
BRIDGE=${K8S_NODES_BRIDGE:-dispatch-k8s0}
NET=${K8S_NODES_NET:-10.201.0}
TAINT_KEY=dispatch.dev/real
PAUSE_IMAGE=dispatch.local/pause:3.10.2
BUSYBOX_IMAGE=dispatch.local/busybox:1.35.0
HOSTUSR_IMAGE=dispatch.local/host-usr:1
case $COUNT in 1 | 2 | 3) ;; *) die "K8S_REAL_NODES must be 1 to 3 (one /24 holds 3 pod ranges of 64)" ;; esac
if [ ! -s "$JSON" ] || [ ! -s "$CPS/ca.key" ]; then
  die "no control plane at $CPS: run scripts/k8s/controlplane-up.sh first"
fi
URL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server"])' "$JSON")
mkdir -p "$S"
exec 8>"$S/up.lock"
flock -w 900 8 || die "another nodes-up.sh is still running"
KC=$CPS/admin.kubeconfig
kc() { kubectl --kubeconfig "$KC" "$@"; }

# ------------------------------------------------------------------ 1. packages and the kubelet
host_apt_install containerd runc containernetworking-plugins busybox-static openssl
CNI_BIN=/usr/lib/cni
for p in bridge host-local loopback; do [ -x "$CNI_BIN/$p" ] || die "no $p CNI plugin in $CNI_BIN"; done
BIN=$(bash "$HERE/controlplane-build.sh" nodes | tail -n 1)
[ -x "$BIN/kubelet" ] || die "controlplane-build.sh nodes gave no kubelet"
CONTAINERD_VERSION=$(dpkg-query -W -f '${Version}' containerd)
# CoreDNS from its own Go module (scripts/k8s/coredns: only the plugins the cluster domain needs); it needs
# client-go 0.37, so it cannot join the control plane's module graph. Keyed like the control plane's binaries.
COREDNS_VERSION=v1.15.0
CD_SRC=$HERE/coredns
CD_BIN=$CP_ROOT/bin/coredns-$COREDNS_VERSION-$(cat "$CD_SRC/go.mod" "$CD_SRC/go.sum" "$CD_SRC/main.go" | sha256sum | cut -c1-12)
if [ ! -x "$CD_BIN/coredns" ]; then
  command -v go >/dev/null || die "no go on PATH (Go >= 1.26 is needed)"
  exec 6>"$DISPATCH_TEST_STATE/k8s-cp-build.lock"  # one Go build at a time on the shared caches
  flock -w 3600 6 || die "another Go build still holds $DISPATCH_TEST_STATE/k8s-cp-build.lock"
  log "go build coredns $COREDNS_VERSION (nice ${CP_NICE:-10}; log: $DISPATCH_TEST_STATE/k8s-cp-build-coredns.log)"
  LOGHINT=$DISPATCH_TEST_STATE/k8s-cp-build-coredns.log
  mkdir -p "$CD_BIN.tmp"
  (cd "$CD_SRC" && GOMODCACHE=$CP_GOMODCACHE GOCACHE=$CP_ROOT/go-build GOFLAGS="-buildvcs=false -mod=readonly" \
    CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local} nice -n "${CP_NICE:-10}" \
    go build -trimpath -ldflags "-s -w" -o "$CD_BIN.tmp/coredns" .) >"$LOGHINT" 2>&1 || die "go build coredns failed"
  mv -f "$CD_BIN.tmp" "$CD_BIN"
  LOGHINT=""
  exec 6>&-
fi

# ------------------------------------------------------------------ 2. images (OCI layout tars, rebuilt when missing)
I=$S/images
mkdir -p "$I"
if [ ! -s "$I/pause.tar" ]; then
  log "building the pause image from k8s.io/kubernetes' build/pause/linux/pause.c"
  rm -rf -- "$I/pause-rootfs"; mkdir -p "$I/pause-rootfs"
  LOGHINT=$I/build.log
  gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-dispatch -o "$I/pause-rootfs/pause" \
    "$(cp_module_dir k8s.io/kubernetes "$KUBE_VERSION")/build/pause/linux/pause.c" >"$LOGHINT" 2>&1 \
    || die "compiling pause.c failed"
  python3 "$HERE/nodes/oci_image.py" "$I/pause-rootfs" "$I/pause.tar" "$PAUSE_IMAGE" --entrypoint /pause \
    --user 65535:65535 >"$I/pause.digest" 2>>"$LOGHINT" || die "writing the pause image failed"
  LOGHINT=""
fi
if [ ! -s "$I/busybox.tar" ]; then
  log "building the busybox image from Debian's busybox-static"
  R=$I/busybox-rootfs
  rm -rf -- "$R"; mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/root" "$R/proc" "$R/sys" "$R/dev"
  chmod 1777 "$R/tmp"; chmod 700 "$R/root"
  install -m 755 /bin/busybox "$R/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$R/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
  LOGHINT=$I/build.log
  python3 "$HERE/nodes/oci_image.py" "$R" "$I/busybox.tar" "$BUSYBOX_IMAGE" --cmd sh >"$I/busybox.digest" \
    2>>"$LOGHINT" || die "writing the busybox image failed"
  LOGHINT=""
fi
if [ ! -s "$I/host-usr.tar" ]; then
  # The training image: the host's merged /usr layout and nothing in it. A pod mounts the host's /usr, its
  # Python's prefix (torch inside) and the code read-only (hostPath), as the Slurm chroots do: no second copy
  # of torch (GBs) to build or keep in step, and the ranks run the interpreter the host's tests run.
  log "building the host-usr image (the layout for the host's /usr, mounted read-only)"
  R=$I/host-usr-rootfs
  rm -rf -- "$R"; mkdir -p "$R/usr" "$R/etc" "$R/tmp" "$R/root" "$R/proc" "$R/sys" "$R/dev" "$R/var/tmp"
  chmod 1777 "$R/tmp" "$R/var/tmp"; chmod 700 "$R/root"
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$R/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
  printf 'hosts: files dns\n' >"$R/etc/nsswitch.conf"
  LOGHINT=$I/build.log
  python3 "$HERE/nodes/oci_image.py" "$R" "$I/host-usr.tar" "$HOSTUSR_IMAGE" --cmd /bin/sh >"$I/host-usr.digest" \
    2>>"$LOGHINT" || die "writing the host-usr image failed"
  LOGHINT=""
fi

# ------------------------------------------------------------------ 3. certificates (kept while the CA is the same)
ossl() { openssl "$@" >>"$S/openssl.log" 2>&1 || { LOGHINT=$S/openssl.log; die "openssl $1 failed"; }; }
node_cert() { # FILE SUBJECT EXT
  [ -s "$1.crt" ] && openssl verify -CAfile "$CPS/ca.crt" "$1.crt" >/dev/null 2>&1 && return 0
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr"
  printf '%b\n' "$3" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA "$CPS/ca.crt" -CAkey "$CPS/ca.key" -CAcreateserial -days 3650 \
    -extfile "$1.ext" -out "$1.crt"
  chmod 600 "$1.key"
}

# ------------------------------------------------------------------ 4. the bridge all nodes' pods share
# Made here (not by the CNI plugin) so the nodes' own addresses exist before any pod; isGateway stays off, so the
# bridge plugin never turns on the host's IP forwarding (pods reach each other on the bridge, and the host's
# addresses on it, without it).
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  log "creating the bridge $BRIDGE ($NET.0/24)"
  ip link add name "$BRIDGE" type bridge
fi
# the listing read whole first: `ip ... | grep -q` under pipefail fails when grep stops reading before ip's next line
has_addr() { local a; a=$(ip -4 -o addr show dev "$BRIDGE"); [[ $a == *" $1/"* ]]; }
has_addr "$NET.1" || ip addr add "$NET.1/24" dev "$BRIDGE"
for ((n = 1; n <= COUNT; n++)); do has_addr "$NET.$((1 + n))" || ip addr add "$NET.$((1 + n))/32" dev "$BRIDGE"; done
ip link set "$BRIDGE" up

# ------------------------------------------------------------------ 4b. cluster DNS on the bridge's own address
# CoreDNS answers the cluster domain from the API server (Services, headless Services' pods, pods by address) on
# $NET.1:53, which every pod reaches on the bridge; names outside the cluster domain are not served.
DNS_HEALTH=$((P + 680))
if write_if_changed "$S/Corefile" 644; then
  stop_pidfile "$S/coredns.pid" coredns / 10
fi <<EOC
cluster.local:53 {
    bind $NET.1
    errors
    health 127.0.0.1:$DNS_HEALTH
    kubernetes cluster.local {
        kubeconfig $KC dispatch-cp
        pods insecure
        ttl 5
    }
}
EOC
dns_ok() { curl -sf "http://127.0.0.1:$DNS_HEALTH/health" >/dev/null; }
if ! pidfile_alive "$S/coredns.pid" coredns /; then
  port_free "$DNS_HEALTH" "CoreDNS (health)"
  log "starting CoreDNS on $NET.1:53 (log: $S/coredns.log)"
  setsid "$CD_BIN/coredns" -conf "$S/Corefile" >"$S/coredns.log" 2>&1 8>&- </dev/null &
  echo $! >"$S/coredns.pid"
  LOGHINT=$S/coredns.log
  waitfor 60 "CoreDNS health" dns_ok
  LOGHINT=""
fi

# ------------------------------------------------------------------ 4c. the Trainer's status server, by name
# The Trainer gives a TrainJob's trainer pods https://kubeflow-trainer-controller-manager.kubeflow-system.svc:PORT
# (its certManagement service name and its status server's port). Here the Trainer is a host process listening on
# every address: a headless Service of that name whose one endpoint is the bridge's own address makes CoreDNS
# answer the name with it (no kube-proxy is needed for a headless Service), and controlplane-up.sh's serving
# certificate carries the name.
STATUS_PORT=$(python3 -c 'import json, sys, urllib.parse as u; print(u.urlsplit(json.load(open(sys.argv[1]))["trainer_status_server"]).port)' "$JSON" 2>/dev/null || true)
if [ -n "$STATUS_PORT" ]; then
  LOGHINT=$S/kubectl.log
  kc apply --server-side --force-conflicts -f - >>"$LOGHINT" 2>&1 <<EOS || die "the Trainer's status server Service failed"
apiVersion: v1
kind: Service
metadata: {name: kubeflow-trainer-controller-manager, namespace: kubeflow-system}
spec:
  clusterIP: None
  ports: [{name: status, port: $STATUS_PORT, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubeflow-trainer-controller-manager-host
  namespace: kubeflow-system
  labels: {kubernetes.io/service-name: kubeflow-trainer-controller-manager}
addressType: IPv4
ports: [{name: status, port: $STATUS_PORT, protocol: TCP}]
endpoints: [{addresses: ["$NET.1"], conditions: {ready: true}}]
EOS
  LOGHINT=""
fi

# ------------------------------------------------------------------ 5. each node: containerd, then the kubelet
# cgroup_root NAME: NAME under every cgroup v1 hierarchy (the kubelet's cgroupRoot must exist); a new cpuset gets
# its parent's CPUs and memory nodes, which cgroup v1 leaves empty.
cgroup_root() {
  local h
  for h in /sys/fs/cgroup/*; do
    [ "$(stat -f -c %T "$h" 2>/dev/null)" = cgroupfs ] || continue
    mkdir -p "$h/$1"
    if [ -f "$h/cpuset.cpus" ]; then
      [ -n "$(tr -d '\n' <"$h/$1/cpuset.cpus")" ] || cat "$h/cpuset.cpus" >"$h/$1/cpuset.cpus"
      [ -n "$(tr -d '\n' <"$h/$1/cpuset.mems")" ] || cat "$h/cpuset.mems" >"$h/$1/cpuset.mems"
    fi
  done
}
ctr_() { ctr --address "$D/containerd.sock" --namespace k8s.io "$@"; }
node_ready() {
  [ "$(kc get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
healthz() { curl -sf "http://127.0.0.1:$1/healthz" >/dev/null; }
# The kubelet's mount namespace: mounts made there stay there (the host's / and /proc are private), except under
# its root directory, a shared mount on the host, so the volumes it mounts reach containerd.
# shellcheck disable=SC2016  # expanded by the inner shell
INNS='set -e; d=$1; shift
mount --make-rprivate /proc
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
for f in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys \
  kernel/keys/root_maxbytes; do mount --bind "$d/sysctl/$(echo "$f" | tr / .)" "/proc/sys/$f"; done
mount --bind "$d/var-lib-kubelet" /var/lib/kubelet
mount --bind "$d/var-log-containers" /var/log/containers
exec "$@"'
# On a host whose / propagates mounts, the namespace's binds over /var/lib/kubelet and /var/log/containers would reach
# the host: refuse rather than change it.
case $(findmnt -no PROPAGATION /) in
  private | slave | unbindable) ;;
  *) die "/ is a shared mount here: the kubelets' mount namespaces would change the host's mounts" ;;
esac
mkdir -p /var/lib/kubelet /var/log/containers

NODES=()
for ((n = 1; n <= COUNT; n++)); do
  NAME=real-$n
  NODES+=("$NAME")
  D=$S/$NAME
  IP=$NET.$((1 + n))
  KPORT=$((P + 600 + 10 * n)) HPORT=$((P + 601 + 10 * n))
  mkdir -p "$D/cni" "$D/containerd" "$D/kubelet" "$D/pods-logs" "$D/var-lib-kubelet" "$D/var-log-containers" \
    "$D/sysctl" "$D/pki"
  changed=0

  # containerd: own root, state, socket and runc root; the CRI plugin's CNI from this node's conf dir; the oom
  # score adjustment clamped (this host's processes lack CAP_SYS_RESOURCE: the kubelet's -998 for a sandbox made
  # every RunPodSandbox fail in runc)
  if write_if_changed "$D/containerd.toml" 644; then changed=1; fi <<EOT
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
[grpc]
  address = "$D/containerd.sock"
[ttrpc]
  address = "$D/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$D/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$D/cni"
EOT
  write_if_changed "$D/cni/10-dispatch.conflist" 644 <<EOT || true
{"cniVersion": "1.0.0", "name": "dispatch-real", "plugins": [{"type": "bridge", "bridge": "$BRIDGE",
 "isGateway": false, "ipMasq": false, "ipam": {"type": "host-local", "dataDir": "$D/cni-ipam",
 "ranges": [[{"subnet": "$NET.0/24", "rangeStart": "$NET.$((64 * n))", "rangeEnd": "$NET.$((64 * n + 63))"}]]}}]}
EOT
  if [ "$changed" = 1 ] && pidfile_alive "$D/containerd.pid" containerd /; then
    stop_pidfile "$D/kubelet.pid" kubelet / 20
    stop_pidfile "$D/containerd.pid" containerd / 20
  fi
  if ! pidfile_alive "$D/containerd.pid" containerd /; then
    log "starting containerd of $NAME (log: $D/containerd.log)"
    setsid containerd --config "$D/containerd.toml" >"$D/containerd.log" 2>&1 8>&- </dev/null &
    echo $! >"$D/containerd.pid"
    LOGHINT=$D/containerd.log
    waitfor 60 "containerd of $NAME" ctr_ version
    LOGHINT=""
  fi
  for img in pause:$PAUSE_IMAGE busybox:$BUSYBOX_IMAGE host-usr:$HOSTUSR_IMAGE; do
    f=${img%%:*} ref=${img#*:}
    if [ "$(ctr_ images ls "name==$ref" 2>/dev/null | awk 'NR == 2 {print $3}')" != "$(cat "$I/$f.digest")" ]; then
      log "importing $ref into the containerd of $NAME"
      LOGHINT=$D/import.log
      ctr_ images import "$I/$f.tar" >"$LOGHINT" 2>&1 || die "importing $ref failed"
      LOGHINT=""
    fi
  done

  node_cert "$D/pki/client" "/O=system:nodes/CN=system:node:$NAME" 'extendedKeyUsage=clientAuth'
  node_cert "$D/pki/serving" "/CN=$NAME" "subjectAltName=IP:$IP,DNS:$NAME\nextendedKeyUsage=serverAuth"
  if write_if_changed "$D/kubeconfig" 600; then changed=1; fi <<EOK
apiVersion: v1
kind: Config
clusters: [{name: dispatch-cp, cluster: {server: "$URL", certificate-authority: "$CPS/ca.crt"}}]
users: [{name: $NAME, user: {client-certificate: "$D/pki/client.crt", client-key: "$D/pki/client.key"}}]
contexts: [{name: dispatch-cp, context: {cluster: dispatch-cp, user: $NAME}}]
current-context: dispatch-cp
EOK
  # cgroup v1 (failCgroupV1 off) through cgroupfs: containerd 1.6 has no RuntimeConfig call to name its driver.
  # Only a holder of a certificate of the control plane's CA reaches the kubelet's API (kube-apiserver's pods/log,
  # exec). No iptables chains of the kubelet's own (KUBE-FIREWALL, its canaries) on this shared host. Image garbage collection and disk-pressure eviction are kept out of the way of the imported images and
  # of the other users of this shared disk.
  if write_if_changed "$D/kubelet.yaml" 644; then changed=1; fi <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /dispatch-k8s$P-$NAME
containerRuntimeEndpoint: unix://$D/containerd.sock
address: $IP
port: $KPORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $HPORT
tlsCertFile: $D/pki/serving.crt
tlsPrivateKeyFile: $D/pki/serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $CPS/ca.crt}
authorization: {mode: AlwaysAllow}
podLogsDir: $D/pods-logs
protectKernelDefaults: true
failSwapOn: false
registerWithTaints: [{key: $TAINT_KEY, value: "true", effect: NoSchedule}]
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, nodefs.inodesFree: 2%, imagefs.available: 2%}
maxPods: 32
makeIPTablesUtilChains: false
clusterDNS: [$NET.1]
clusterDomain: cluster.local
EOT
  printf '1\n' >"$D/sysctl/vm.overcommit_memory"
  printf '0\n' >"$D/sysctl/vm.panic_on_oom"
  printf '10\n' >"$D/sysctl/kernel.panic"
  printf '1\n' >"$D/sysctl/kernel.panic_on_oops"
  printf '1000000\n' >"$D/sysctl/kernel.keys.root_maxkeys"
  printf '25000000\n' >"$D/sysctl/kernel.keys.root_maxbytes"

  # a kubelet whose Node is gone (etcd started again) never registers again by itself
  if pidfile_alive "$D/kubelet.pid" kubelet / && { [ "$changed" = 1 ] || ! kc get node "$NAME" >/dev/null 2>&1; }; then
    stop_pidfile "$D/kubelet.pid" kubelet / 20
  fi
  if ! pidfile_alive "$D/kubelet.pid" kubelet /; then
    cgroup_root "dispatch-k8s$P-$NAME"
    mountpoint -q "$D/kubelet" || mount --bind "$D/kubelet" "$D/kubelet"
    mount --make-rshared "$D/kubelet"
    port_free "$KPORT" "the kubelet of $NAME"
    port_free "$HPORT" "the kubelet of $NAME (healthz)"
    log "starting the kubelet of $NAME on $IP:$KPORT (log: $D/kubelet.log)"
    setsid unshare --mount --propagation unchanged -- /bin/sh -c "$INNS" sh "$D" \
      "$BIN/kubelet" --config "$D/kubelet.yaml" --kubeconfig "$D/kubeconfig" --root-dir "$D/kubelet" \
      --cert-dir "$D/pki" --hostname-override "$NAME" --node-ip "$IP" --node-labels "$TAINT_KEY=true" --v 2 \
      >"$D/kubelet.log" 2>&1 8>&- </dev/null &
    echo $! >"$D/kubelet.pid"
    LOGHINT=$D/kubelet.log
    waitfor 60 "the kubelet of $NAME (healthz)" healthz "$HPORT"
    LOGHINT=""
  fi
done
for NAME in "${NODES[@]}"; do
  LOGHINT=$S/$NAME/kubelet.log
  waitfor 120 "$NAME Ready" node_ready "$NAME"
done
LOGHINT=""

# ------------------------------------------------------------------ 6. control-plane.json
# Under controlplane-up.sh's lock: it writes the file whole.
exec 7>"$CPS/up.lock"
flock -w 600 7 || die "controlplane-up.sh holds its lock"
rows=()
for ((n = 1; n <= COUNT; n++)); do
  NAME=real-$n D=$S/$NAME
  rows+=("$NAME" "$NET.$((1 + n))" $((P + 600 + 10 * n)) "$(head -n 1 "$D/kubelet.pid")" "$D/containerd.sock"
    "$(head -n 1 "$D/containerd.pid")" "$NET.$((64 * n))-$NET.$((64 * n + 63))"
    "$(kc get node "$NAME" -o 'jsonpath={.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}')")
done
python3 - "$JSON" "$TAINT_KEY" "$BRIDGE" "$NET.1" "$PAUSE_IMAGE" "$BUSYBOX_IMAGE" "$HOSTUSR_IMAGE" "$CONTAINERD_VERSION" \
  "$COREDNS_VERSION" "$(head -n 1 "$S/coredns.pid")" "${rows[@]}" <<'EOP'
import json, sys
out, taint, bridge, gateway, pause, busybox, host_usr, containerd, coredns, dns_pid, *rows = sys.argv[1:]
with open(out) as f:
    doc = json.load(f)
nodes = []
for i in range(0, len(rows), 8):
    name, ip, port, kpid, sock, cpid, pods, versions = rows[i : i + 8]
    kubelet_version, runtime_version = versions.split(" ", 1)
    nodes.append({
        "name": name, "address": ip, "pod_range": pods, "label": f"{taint}=true", "taint": f"{taint}=true:NoSchedule",
        "kubelet": {"version": kubelet_version, "port": int(port), "pid": int(kpid)},
        "runtime": {"name": "containerd", "version": runtime_version, "package": containerd, "socket": sock,
                    "pid": int(cpid)},
    })
doc["real_nodes"] = nodes
doc["real_network"] = {"bridge": bridge, "host_address": gateway}
doc["real_images"] = {"pause": pause, "busybox": busybox, "host_usr": host_usr}
doc["cluster_dns"] = {"address": gateway, "domain": "cluster.local", "coredns": coredns, "pid": int(dns_pid)}
with open(out + ".new", "w") as f:
    json.dump(doc, f, indent=2)
EOP
mv -f "$JSON.new" "$JSON"
log "real nodes ${NODES[*]} ready; wrote them into $JSON ($((SECONDS - T0)) s)"

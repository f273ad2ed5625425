#!/usr/bin/env bash
# up.sh: start, idempotently and as root, the real Kubernetes API machinery the tests use for custom resources:
# sid's etcd on 127.0.0.1:7879 and the project's build of the upstream apiextensions-apiserver
# (scripts/k8s/apiserver/main.go, built by build.sh, cached) on https://127.0.0.1:7843, with TLS from an own CA
# and an administrator client certificate (O=system:masters). Nothing else may authenticate: no anonymous
# access (it is authenticated but never authorized: 403), no tokens. A warm run with both daemons up returns at once; a run that starts them begins with an
# empty etcd. Writes $DISPATCH_TEST_STATE/k8s/k8s.json (url, CA, client certificate and key, kubeconfig).
# Env: K8S_BIN, DISPATCH_TEST_STATE, K8S_APISERVER_PORT (7843), K8S_ETCD_PORT (7879, peer +1).
# See docs/dev/k8s-apiserver.md. Stop: scripts/k8s/down.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
LOG_TAG=k8s-up
need_root
T0=$SECONDS

BIN=${K8S_BIN:-/opt/dispatch-k8s/bin}
S=$DISPATCH_TEST_STATE/k8s
API_PORT=${K8S_APISERVER_PORT:-7843}
ETCD_PORT=${K8S_ETCD_PORT:-7879}
PEER_PORT=$((ETCD_PORT + 1))

bash "$HERE/build.sh"
host_apt_install openssl curl
mkdir -p "$S"
exec 8>"$S/up.lock"
flock -w 300 8 || die "another up.sh is still running"

# ------------------------------------------------------------------ 1. certificates (kept across runs)
ossl() { openssl "$@" >>"$S/openssl.log" 2>&1 || { LOGHINT=$S/openssl.log; die "openssl $1 failed"; }; }
if [ ! -s "$S/ca.crt" ] || [ ! -s "$S/admin.crt" ] || [ ! -s "$S/server.crt" ]; then
  log "making a CA, the server certificate and the admin client certificate in $S"
  umask 077
  ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=dispatch-test-ca" -keyout "$S/ca.key" -out "$S/ca.crt"
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$S/server.key" -out "$S/server.csr"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$S/server.ext"
  ossl x509 -req -in "$S/server.csr" -CA "$S/ca.crt" -CAkey "$S/ca.key" -CAcreateserial -days 3650 \
    -extfile "$S/server.ext" -out "$S/server.crt"
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=system:masters/CN=dispatch-admin" \
    -keyout "$S/admin.key" -out "$S/admin.csr"
  printf 'extendedKeyUsage=clientAuth\n' >"$S/admin.ext"
  ossl x509 -req -in "$S/admin.csr" -CA "$S/ca.crt" -CAkey "$S/ca.key" -CAcreateserial -days 3650 \
    -extfile "$S/admin.ext" -out "$S/admin.crt"
  umask 022
  chmod 644 "$S/ca.crt" "$S/server.crt" "$S/admin.crt"
fi
# The upstream server insists on kubeconfigs for delegated authentication/authorization; nothing listens there
# (with --authentication-skip-lookup it is never asked; only system:masters is authorized).
cat >"$S/nowhere.kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: nobody, user: {}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]
current-context: nowhere
EOK
URL=https://127.0.0.1:$API_PORT
cat >"$S/admin.kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters: [{name: crd-apiserver, cluster: {server: "$URL", certificate-authority: "$S/ca.crt"}}]
users: [{name: admin, user: {client-certificate: "$S/admin.crt", client-key: "$S/admin.key"}}]
contexts: [{name: crd-apiserver, context: {cluster: crd-apiserver, user: admin, namespace: default}}]
current-context: crd-apiserver
EOK

ready() { curl -sf --cacert "$S/ca.crt" --cert "$S/admin.crt" --key "$S/admin.key" "$URL/readyz" >/dev/null; }
etcd_ok() { curl -sf "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }

# ------------------------------------------------------------------ 2. etcd
if ! pidfile_alive "$S/etcd.pid" etcd /; then
  stop_pidfile "$S/apiserver.pid" dispatch-crd-ap / 10   # a server without its etcd is of no use
  port_free "$ETCD_PORT" etcd; port_free "$PEER_PORT" "etcd (peer)"
  rm -rf -- "$S/etcd-data"
  log "starting etcd on 127.0.0.1:$ETCD_PORT (log: $S/etcd.log)"
  # --unsafe-no-fsync: test data, thrown away at the next start; fsync on a shared disk only slows the tests.
  setsid "$BIN/etcd" --name dispatch-test --data-dir "$S/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-cluster "dispatch-test=http://127.0.0.1:$PEER_PORT" --unsafe-no-fsync \
    --listen-metrics-urls "" >"$S/etcd.log" 2>&1 8>&- </dev/null &
  echo $! >"$S/etcd.pid"
  LOGHINT=$S/etcd.log
  waitfor 30 "etcd health" etcd_ok
  LOGHINT=""
fi

# ------------------------------------------------------------------ 3. apiextensions-apiserver
if ! pidfile_alive "$S/apiserver.pid" dispatch-crd-ap /; then
  port_free "$API_PORT" dispatch-crd-apiserver
  log "starting dispatch-crd-apiserver on $URL (log: $S/apiserver.log)"
  setsid "$BIN/dispatch-crd-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$S/server.crt" --tls-private-key-file "$S/server.key" --client-ca-file "$S/ca.crt" \
    --kubeconfig "$S/nowhere.kubeconfig" --authentication-kubeconfig "$S/nowhere.kubeconfig" \
    --authorization-kubeconfig "$S/nowhere.kubeconfig" --authentication-skip-lookup \
    --disable-admission-plugins NamespaceLifecycle,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook \
    >"$S/apiserver.log" 2>&1 8>&- </dev/null &
  echo $! >"$S/apiserver.pid"
  LOGHINT=$S/apiserver.log
  waitfor 60 "dispatch-crd-apiserver /readyz" ready
  LOGHINT=""
fi

python3 - "$S" "$URL" "$API_PORT" "$ETCD_PORT" <<'EOP'
import json, sys
s, url, port, etcd = sys.argv[1:]
json.dump({"url": url, "port": int(port), "etcd": f"http://127.0.0.1:{etcd}", "ca": f"{s}/ca.crt",
           "client_cert": f"{s}/admin.crt", "client_key": f"{s}/admin.key", "kubeconfig": f"{s}/admin.kubeconfig",
           "version": "v1.36.4"}, open(f"{s}/k8s.json.new", "w"), indent=2)
EOP
mv -f "$S/k8s.json.new" "$S/k8s.json"
log "apiextensions-apiserver ready at $URL; wrote $S/k8s.json ($((SECONDS - T0)) s)"

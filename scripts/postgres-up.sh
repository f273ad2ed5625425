#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 with a database the tests may use.
# Installs Debian's server if it is missing; starts the cluster if it is stopped. Idempotent.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /etc/postgresql | sort -V | tail -n 1)
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
fi
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
pg_isready -h 127.0.0.1 -p 5432
su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname='dispatch_test'\"" | grep -q 1 ||
  su postgres -c "createdb dispatch_test"

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
# The tests connect over loopback as postgres to their own database, with no password (Debian's default asks
# loopback clients for one): trust exactly that database from 127.0.0.1 and ::1, ahead of the default lines.
hba=/etc/postgresql/$version/main/pg_hba.conf
if ! grep -q '^host dispatch_test postgres 127.0.0.1/32 trust' "$hba"; then
  { printf 'host dispatch_test postgres 127.0.0.1/32 trust\nhost dispatch_test postgres ::1/128 trust\n'
    cat "$hba"; } >"$hba.new"
  chown postgres:postgres "$hba.new" && chmod 640 "$hba.new" && mv "$hba.new" "$hba"
  if pg_isready -q -h 127.0.0.1 -p 5432; then pg_ctlcluster --skip-systemctl-redirect "$version" main reload; fi
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
fi
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
pg_isready -h 127.0.0.1 -p 5432
su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname='dispatch_test'\"" | grep -q 1 ||
  su postgres -c "createdb dispatch_test"

#!/bin/bash
# A one-host Son of Grid Engine 8.1.9 cell from Debian 12's packages, for the gridengine tests.
#
# Idempotent: installs the packages once (debconf preseeded: cell "default", this host as master), starts
# sge_qmaster and sge_execd when they are not running, and (re)applies the cell's test configuration: this
# host as admin, submit and execution host; all.q with two slots; scheduling every second; accounting
# flushed at once (qacct sees a job as soon as it ends). Writes $STATE/gridengine.json for the tests.
set -euo pipefail
STATE=${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}
LOG=${STATE}/gridengine-up.log
mkdir -p "$STATE"
HOST=$(hostname)
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default

if ! dpkg -s gridengine-master gridengine-exec gridengine-client >/dev/null 2>&1; then
  {
    echo "gridengine-common shared/gridengineconfig boolean true"
    echo "gridengine-common shared/gridenginecell string default"
    echo "gridengine-common shared/gridenginemaster string $HOST"
    echo "gridengine-master shared/gridengineconfig boolean true"
    echo "gridengine-master shared/gridenginecell string default"
    echo "gridengine-master shared/gridenginemaster string $HOST"
  } | debconf-set-selections
  (
    flock 9
    [ -e "$STATE/apt-updated" ] || { apt-get update -q && touch "$STATE/apt-updated"; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      gridengine-master gridengine-exec gridengine-client
  ) 9>"$STATE/apt.lock" >>"$LOG" 2>&1
fi

# This machine's name resolves to 127.0.0.1, which reads back as "localhost": Grid Engine refuses a client
# whose two names differ, unless host_aliases makes them one host.
ALIASES=$SGE_ROOT/$SGE_CELL/common/host_aliases
if [ "$(getent hosts "$HOST" | awk '{print $1}' | head -1)" = 127.0.0.1 ] && [ "$HOST" != localhost ] \
  && ! grep -qx "localhost $HOST" "$ALIASES" 2>/dev/null; then
  echo "localhost $HOST" >>"$ALIASES"
  [ -f /var/spool/gridengine/qmaster/qmaster.pid ] && kill "$(cat /var/spool/gridengine/qmaster/qmaster.pid)" 2>/dev/null || true
  sleep 2
fi
HOST=$(/usr/lib/gridengine/gethostname -aname)

running() { pgrep -x "$1" >/dev/null; }
if ! running sge_qmaster; then
  /etc/init.d/gridengine-master start >>"$LOG" 2>&1 || true
fi
for _ in $(seq 1 30); do qstat -f >/dev/null 2>&1 && break; sleep 1; done
qstat -f >/dev/null 2>&1 || { echo "sge_qmaster did not answer; see $LOG" >&2; exit 1; }

qconf -sh 2>/dev/null | grep -qx "$HOST" || qconf -ah "$HOST" >>"$LOG" 2>&1
qconf -ss 2>/dev/null | grep -qx "$HOST" || qconf -as "$HOST" >>"$LOG" 2>&1
if ! qconf -sel 2>/dev/null | grep -qx "$HOST"; then
  tmp=$(mktemp)
  printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' "$HOST" >"$tmp"
  qconf -Ae "$tmp" >>"$LOG" 2>&1
  rm -f "$tmp"
fi

# global configuration: accounting flushed at once, root may submit (the tests run as root), jobs of a lost
# host never rescheduled (reschedule_unknown 0, the default)
tmpd=$(mktemp -d)
tmp=$tmpd/global  # qconf -Mconf names the configuration after the file
qconf -sconf global >"$tmp"
sed -i -e 's/^reporting_params .*/reporting_params accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00/' \
  -e 's/^load_report_time .*/load_report_time 00:00:05/' \
  -e 's/^max_unheard .*/max_unheard 00:00:30/' -e 's/^min_uid .*/min_uid 0/' -e 's/^min_gid .*/min_gid 0/' "$tmp"
qconf -Mconf "$tmp" >>"$LOG" 2>&1
rm -rf "$tmpd"

# scheduler: every second, and at once on submit and finish
tmp=$(mktemp)
qconf -ssconf >"$tmp"
sed -i -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
  -e 's/^flush_submit_sec .*/flush_submit_sec 1/' -e 's/^flush_finish_sec .*/flush_finish_sec 1/' "$tmp"
qconf -Msconf "$tmp" >>"$LOG" 2>&1 || true
rm -f "$tmp"

# all.q: this host, two slots, no load threshold (a shared, loaded machine must not put it in alarm)
tmp=$(mktemp)
if qconf -sq all.q >"$tmp" 2>/dev/null; then
  sed -i -e "s/^hostlist .*/hostlist $HOST/" -e 's/^slots .*/slots 2/' -e 's/^shell .*/shell \/bin\/bash/' \
    -e 's/^shell_start_mode .*/shell_start_mode unix_behavior/' \
    -e 's/^load_thresholds .*/load_thresholds NONE/' "$tmp"
  qconf -Mq "$tmp" >>"$LOG" 2>&1
else
  qconf -sq 2>/dev/null >"$tmp" || true
  sed -i -e "s/^qname .*/qname all.q/" -e "s/^hostlist .*/hostlist $HOST/" -e 's/^slots .*/slots 2/' \
    -e 's/^shell .*/shell \/bin\/bash/' -e 's/^shell_start_mode .*/shell_start_mode unix_behavior/' \
    -e 's/^pe_list .*/pe_list NONE/' -e 's/^load_thresholds .*/load_thresholds NONE/' "$tmp"
  qconf -Aq "$tmp" >>"$LOG" 2>&1
fi
rm -f "$tmp"

if ! running sge_execd; then
  /etc/init.d/gridengine-exec start >>"$LOG" 2>&1 || true
fi
for _ in $(seq 1 30); do
  qstat -f -q all.q 2>/dev/null | grep -q "all.q@$HOST" && ! qstat -f -q all.q | grep "all.q@$HOST" | grep -q ' au' && break
  sleep 1
done
qstat -f -q all.q | grep "all.q@$HOST" | grep -vq ' au$' || { echo "sge_execd on $HOST did not report; see $LOG" >&2; exit 1; }

cat >"$STATE/gridengine.json" <<JSON
{"sge_root": "$SGE_ROOT", "sge_cell": "$SGE_CELL", "host": "$HOST", "queue": "all.q", "slots": 2,
 "version": "$(qstat -help 2>/dev/null | head -1 | tr -d '\n')"}
JSON
echo "gridengine: cell $SGE_CELL on $HOST ready ($(qstat -help | head -1))"

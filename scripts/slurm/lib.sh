# shellcheck shell=bash
# Helpers shared by the scripts/slurm/*.sh scripts. Source it; do not run it.

DISPATCH_TEST_STATE=${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}

log() { printf '[%s %(%H:%M:%S)T] %s\n' "${LOG_TAG:-slurm}" -1 "$*" >&2; }
# LOGHINT: a log file whose tail die() prints (set it before a step that may fail)
LOGHINT=""
die() {
  printf '%s: ERROR: %s\n' "${LOG_TAG:-slurm}" "$*" >&2
  if [ -n "$LOGHINT" ] && [ -f "$LOGHINT" ]; then
    printf -- '--- last lines of %s:\n' "$LOGHINT" >&2
    tail -n 15 -- "$LOGHINT" >&2 || true
  fi
  exit 1
}
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

# waitfor SECONDS DESCRIPTION CMD [ARGS...]: poll CMD every 0.2 s (no busy loop)
waitfor() {
  local n=$(( $1 * 5 )) what=$2 i
  shift 2
  for ((i = 0; i < n; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "timed out after ${n}x0.2 s waiting for $what"
}

# pid_alive PID COMM [ROOT]: PID runs a process named COMM (and, if ROOT is given,
# whose root directory is ROOT; "/" for the host). Never matches by name alone.
pid_alive() {
  local p=$1 comm=$2 root=${3:-} c r
  case $p in ''|*[!0-9]*) return 1 ;; esac
  [ -d "/proc/$p" ] || return 1
  c=$(cat "/proc/$p/comm" 2>/dev/null) || return 1
  [ "$c" = "$comm" ] || return 1
  if [ -n "$root" ]; then
    r=$(readlink "/proc/$p/root" 2>/dev/null) || return 1
    [ "$r" = "$root" ] || return 1
  fi
  return 0
}
# pidfile_alive FILE COMM [ROOT]
pidfile_alive() {
  local p
  [ -s "$1" ] || return 1
  p=$(head -n 1 -- "$1" 2>/dev/null) || return 1
  pid_alive "$p" "$2" "${3:-}"
}
# stop_pidfile FILE COMM [ROOT] [SECONDS]: TERM, wait, then KILL; removes FILE.
stop_pidfile() {
  local f=$1 comm=$2 root=${3:-} secs=${4:-20} p i
  [ -s "$f" ] || { rm -f -- "$f"; return 0; }
  p=$(head -n 1 -- "$f" 2>/dev/null || true)
  if pid_alive "$p" "$comm" "$root"; then
    log "stopping $comm (pid $p, $f)"
    kill -TERM "$p" 2>/dev/null || true
    for ((i = 0; i < secs * 5; i++)); do
      pid_alive "$p" "$comm" "$root" || break
      sleep 0.2
    done
    if pid_alive "$p" "$comm" "$root"; then
      log "$comm (pid $p) still alive after ${secs}s: SIGKILL"
      kill -KILL "$p" 2>/dev/null || true
      sleep 0.3
    fi
  fi
  rm -f -- "$f"
}

# host_apt_install PKG...: install missing Debian packages on the host. Serialised by a
# lock so that local-up.sh and sid-up.sh can run in parallel; "apt-get update" runs at
# most once per hour (stamp file), and only when something is missing.
host_apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  mkdir -p "$DISPATCH_TEST_STATE"
  (
    flock -w 900 9 || die "could not get $DISPATCH_TEST_STATE/apt.lock"
    local still=() stamp="$DISPATCH_TEST_STATE/apt-updated"
    for p in "${missing[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || still+=("$p")
    done
    [ "${#still[@]}" -eq 0 ] && exit 0
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "$(find "$stamp" -mmin -60 2>/dev/null || true)" ]; then
      log "apt-get update (host)"
      apt-get -o DPkg::Lock::Timeout=600 update -q >"$DISPATCH_TEST_STATE/apt-update.log" 2>&1 \
        || log "apt-get update reported errors (see $DISPATCH_TEST_STATE/apt-update.log); trying the install anyway"
      touch "$stamp"
    fi
    # Keep package postinsts from starting daemons (no systemd here; we start them ourselves).
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
    fi
    log "apt-get install ${still[*]} (host)"
    local rc=0 alog="$DISPATCH_TEST_STATE/apt-install-${LOG_TAG:-slurm}.log"
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${still[@]}" >"$alog" 2>&1 || rc=$?
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || { LOGHINT=$alog; die "apt-get install ${still[*]} failed"; }
  ) 9>"$DISPATCH_TEST_STATE/apt.lock"
}

# write_if_changed FILE MODE: write stdin to FILE only if its content differs; returns 0
# if the file changed (was written), 1 if it was already identical.
write_if_changed() {
  local f=$1 mode=$2 tmp
  tmp=$(mktemp "$f.XXXXXX")
  cat >"$tmp"
  chmod "$mode" "$tmp"
  if [ -f "$f" ] && cmp -s "$tmp" "$f"; then rm -f -- "$tmp"; return 1; fi
  mv -f -- "$tmp" "$f"
  return 0
}

# port_free PORT WHAT: die with a clear message if something already listens on TCP PORT
# (called only before starting the daemon that needs it, i.e. when ours is not running).
port_free() {
  local out
  command -v ss >/dev/null || return 0
  out=$(ss -ltnpH "sport = :$1" 2>/dev/null || true)
  [ -z "$out" ] || die "port $1, needed by $2, is already in use: $out"
}

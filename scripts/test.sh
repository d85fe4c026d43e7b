#!/usr/bin/env bash
# The test command: set up the S3 test servers (idempotent), then run every test.
# Extra arguments go to `cargo test` (e.g. scripts/test.sh --test it engine:: to run one module).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup-test-env.sh"
export LEASECTL_VENV_DIR="${LEASECTL_VENV_DIR:-$repo/.venv}"
cd "$repo"
cargo test --all-targets "$@"
# Doc tests (e.g. the compile-time proof that a read-only store cannot be written)
# are not part of --all-targets.
if [ $# -eq 0 ]; then cargo test --doc; fi

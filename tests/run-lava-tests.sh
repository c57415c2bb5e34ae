#!/bin/sh
# Run the REAL LAVA test only: installs lava-server + lava-dispatcher (Debian 2023.01) if missing,
# starts server + scheduler + worker on loopback (tests/lava_server.py), runs real qemu jobs with
# two Debian kernels, stops every process it started.  Needs root, apt, and PostgreSQL on
# 127.0.0.1:5432.  Takes ~1.5 min to install (first time) plus ~4-6 min of jobs.
set -eu
cd "$(dirname "$0")/.."
PYTEST="${PYTEST:-.venv/bin/pytest}"
[ -x "$PYTEST" ] || PYTEST=pytest
export REGTRIAGE_LAVA=1
exec "$PYTEST" -v -s -rs \
    "tests/test_lava_backend.py::test_real_lava" "$@"

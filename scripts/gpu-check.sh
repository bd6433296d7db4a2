#!/usr/bin/env bash
# The GPU check on a GPU node that can install packages (a Debian 12 node with a registry, and the CUDA
# toolkit): installs the project's packages, builds the GPU kit here for this node's GPU
# (scripts/device-kit.sh), and runs it (scripts/device-check.sh). A node that reaches no registry runs the
# same check from a kit made on a build machine and carried there (docs/gpu.md, "Running the GPU check").
#
#   bash scripts/gpu-check.sh [--logs DIR] [device-check flags...]    (default logs: out/gpu-check)
#
# Exit status: device-check's (0 pass, 1 a check failed, 3 no GPU: everything skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
logs=out/gpu-check
if [ "${1:-}" = "--logs" ]; then logs=$2; shift 2; fi
command -v mpiexec >/dev/null 2>&1 && command -v cmake >/dev/null 2>&1 || bash scripts/install-deps.sh
# this node's architecture (sm_90 on an H100/H200), else the kit's default (A100 and Hopper)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d . || true)
bash scripts/device-kit.sh --build-dir build-gpu --out out/gpu-check-kit ${arch:+--arch "$arch"}
bash scripts/device-check.sh --kit out/gpu-check-kit/axonn-gpu-kit.tar.xz --logs "$logs" "$@"

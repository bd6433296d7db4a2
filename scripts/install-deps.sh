#!/usr/bin/env bash
# Installs what axonn needs to build and test, from Debian 12's packages. Run as root (or with sudo).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec sudo "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  build-essential cmake git ca-certificates python3 \
  libopenmpi-dev openmpi-bin \
  libopenblas-dev libdnnl-dev \
  libcli11-dev nlohmann-json3-dev libxxhash-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  >/dev/null
echo "install-deps: done"

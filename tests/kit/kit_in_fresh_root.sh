#!/usr/bin/env bash
# The GPU kit is self-contained: proved in a fresh minbase Debian 12 root that holds none of the project's
# packages (no MPI, oneDNN, OpenBLAS, ...), with the CUDA libraries of this machine's toolkit made visible
# only as a GPU node provides them (a toolkit folder under /usr/local/cuda, not in the loader's cache) and no
# NVIDIA driver. In that root, from a clean clone of this checkout:
#   - every binary and library of the kit loads: `ldd` finds everything but the driver's libcuda.so.1;
#   - scripts/device-check.sh runs to its end and reports every GPU check skipped for want of a GPU (exit 3),
#     none failed for a loader or launch error;
#   - the kit's mpirun starts 2 ranks there (device-check's cpu_np2 row: `axonn train` on a 2-rank grid).
# CI runs it after the CUDA build (.ci/run). As root (debootstrap, mount, chroot):
#
#   sudo bash tests/kit/kit_in_fresh_root.sh out/gpu-kit/axonn-gpu-kit.tar.xz
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
kit=${1:-}
[ -n "$kit" ] && [ -f "$kit" ] || { echo "kit-fresh-root: give the kit (out/gpu-kit/axonn-gpu-kit.tar.xz; scripts/device-kit.sh makes it)" >&2; exit 2; }
kit=$(cd "$(dirname "$kit")" && pwd)/$(basename "$kit")
[ "$(id -u)" -eq 0 ] || { echo "kit-fresh-root: needs root (debootstrap, mount, chroot)" >&2; exit 2; }
cuda=$(readlink -f /usr/local/cuda)
[ -d "$cuda" ] || { echo "kit-fresh-root: no CUDA toolkit at /usr/local/cuda: nothing to stand for the GPU node's" >&2; exit 2; }
start=$(date +%s)
say() { echo "kit-fresh-root: $*"; }

root=$(mktemp -d /var/tmp/axonn-kit-root.XXXXXX)
chmod 755 "$root"
# mirror_url, mounts_under_root (of $root)
# shellcheck source=scripts/fresh-root-lib.sh
source "$repo/scripts/fresh-root-lib.sh"
cleanup() {
  local rc=$? m
  trap - EXIT INT TERM
  for m in $(mounts_under_root); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  if [ -n "$(mounts_under_root)" ]; then
    echo "kit-fresh-root: still mounted under $root, so it is NOT removed" >&2; rc=1
  else
    rm -rf --one-file-system "$root"
  fi
  echo "kit-fresh-root: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! command -v debootstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
mirror=$(mirror_url)
say "debootstrap minbase bookworm into $root ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
cp /etc/hosts /etc/resolv.conf "$root/etc/"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
# the node's CUDA: the toolkit's folder, read-only, at the same path; /usr/local/cuda points to it
mkdir -p "$root$cuda"
mount --bind "$cuda" "$root$cuda"
mount -o remount,bind,ro "$root$cuda"
ln -s "$cuda" "$root/usr/local/cuda"
mkdir -p "$root/work"
git clone --quiet --no-hardlinks "$repo" "$root/work/axonn"
# the kit folder as device-kit.sh wrote it: the archive, its sha256, and xz (minbase has no xz command)
mkdir -p "$root/work/gpu-kit"
cp "$kit" "$kit.sha256" "$(dirname "$kit")/xz" "$root/work/gpu-kit/"

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" bash -c "cd /work/axonn && $1"
}
# none of the project's packages (minbase has Debian's base libraries, PCRE2 and xxHash among them: any node
# has those), nor the driver
packages=$(in_root "dpkg-query -W -f='\${Package}\n'" | grep -E '^(openmpi|libopenmpi|libdnnl|libopenblas|libgomp|libgfortran|libsentencepiece|libtomlplusplus|libpng|libhwloc|libevent|libpmix|libmunge|ocl-icd|nvidia|libcuda|libnccl)' || true)
[ -z "$packages" ] || { echo "kit-fresh-root: the root already holds: $packages" >&2; exit 1; }
in_root "! command -v xz && ! command -v python3" >/dev/null ||
  { echo "kit-fresh-root: the root has xz or python3: the xz carried beside the kit is not proved" >&2; exit 1; }
in_root "! ldconfig -p | grep -qE 'libcuda|libcublas|libnccl|libmpi'" ||
  { echo "kit-fresh-root: CUDA or MPI libraries are in the root's loader cache" >&2; exit 1; }

say "scripts/device-check.sh in the root (no GPU, no driver)"
set +e
in_root "bash scripts/device-check.sh --kit /work/gpu-kit/axonn-gpu-kit.tar.xz --logs /tmp/device-check" | tee "$root/check.txt"
rc=${PIPESTATUS[0]}
set -e
table=$(sed -n '/^check  /,$p' "$root/check.txt")
fail() { echo "kit-fresh-root: $*" >&2; in_root "tail -n 30 /tmp/device-check/*.log" >&2 || true; exit 1; }
[ "$rc" -eq 3 ] || fail "device-check exited $rc, not 3 (no GPU: every GPU check skipped)"
echo "$table" | grep -qE '^loader +PASS ' || fail "the kit's files do not all load"
echo "$table" | grep -qE '^cpu_np2 +PASS ' || fail "the kit's mpirun did not run 2 ranks"
# every GPU test binary ran and skipped (not a loader or launch error)
for r in kernels_fp32 kernels_bf16 kernels_bf16_mma staged_np1 staged_np2 nccl_np1 gpt grid_np2 grid_np4; do
  echo "$table" | grep -qE "^$r +SKIP +[0-9]+ skipped" || fail "row $r is not 'SKIP n skipped': $(echo "$table" | grep "^$r ")"
done
! echo "$table" | grep -qE ' FAIL ' || fail "a row failed"
in_root "grep -q 'on 2 ranks' /tmp/device-check/cpu_np2.log" || fail "cpu_np2's log does not show 2 ranks"
# and the loader row can fail: the kit without its oneDNN (unpacked; device-check takes a kit folder too)
set +e
in_root "mkdir /tmp/broken && /work/gpu-kit/xz -dc /work/gpu-kit/axonn-gpu-kit.tar.xz | tar -C /tmp/broken -xf - &&
  rm /tmp/broken/axonn-gpu-kit/lib/libdnnl.so.2 &&
  bash scripts/device-check.sh --kit /tmp/broken/axonn-gpu-kit --logs /tmp/broken-check --quick" >"$root/broken.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -qE '^loader +FAIL +libdnnl\.so\.2 not found' "$root/broken.txt" ||
  { cat "$root/broken.txt" >&2; echo "kit-fresh-root: a kit without libdnnl.so.2 did not fail the loader row (exit $rc)" >&2; exit 1; }
say "every kit file loads, every GPU check skipped for want of a GPU, 2 ranks ran under the kit's mpirun; a kit without a library fails its loader row"

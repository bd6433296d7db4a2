#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 machine: a new minbase root of bookworm, made with
# debootstrap from the Debian mirror this machine's apt sources use, with a clean clone of the
# project (its committed HEAD) and ../shared beside it; inside it, as root, the main job
# (`bash scripts/quickstart.sh`) and then the tests (`bash scripts/test.sh`); then the Debian packages of
# that build (cpack), installed with `dpkg -i`, the examples built against them (scripts/check-examples.sh
# --installed /usr) and the main job run from /usr/bin/axonn. Nothing installed on this machine can make it
# pass: the root starts with Debian's minimal set of packages only.
#
#   sudo bash scripts/fresh-check.sh [--keep-root] [--root DIR]
#
# Prints each phase's time. The root lives in a new directory under /var/tmp (or DIR, which must not
# exist) and is removed at the end, on every exit path, but only once nothing is mounted under it any
# more (removing a root that still holds a bind mount of /dev would delete the host's devices); with
# --keep-root it is left for inspection, unmounted.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep_root=0 root=
while [ $# -gt 0 ]; do
  case $1 in
    --keep-root) keep_root=1 ;;
    --root) root=$2; shift ;;
    *) echo "fresh-check: unknown argument '$1' (use --keep-root, --root DIR)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: needs root (debootstrap, mount, chroot): run it with sudo" >&2; exit 2; }

start=$(date +%s)
phase_start=$start
phase() {  # phase NAME: ends the previous phase (printing its time) and names the next
  local now
  now=$(date +%s)
  [ -z "${phase_name:-}" ] || echo "fresh-check: phase '$phase_name' took $(( now - phase_start )) s"
  phase_name=$1 phase_start=$now failed_phase=$1
  [ -z "$phase_name" ] || echo "fresh-check: === $phase_name"
}

# mirror_url, mounts_under_root (of $root): shared with tests/kit/kit_in_fresh_root.sh
# shellcheck source=scripts/fresh-root-lib.sh
source "$repo/scripts/fresh-root-lib.sh"

cleanup() {
  local rc=$? m failed=${failed_phase:-}
  trap - EXIT INT TERM
  phase ""
  if [ -n "$root" ] && [ -d "$root" ]; then
    for m in $(mounts_under_root); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    if [ -n "$(mounts_under_root)" ]; then
      echo "fresh-check: still mounted under $root, so it is NOT removed:" >&2
      mounts_under_root >&2
      rc=1
    elif [ "$keep_root" -eq 1 ]; then
      echo "fresh-check: root kept at $root (nothing mounted)"
    else
      # --one-file-system: never cross into a file system mounted below the root
      rm -rf --one-file-system "$root"
    fi
  fi
  [ "$rc" -eq 0 ] || [ -z "$failed" ] || echo "fresh-check: phase '$failed' failed (exit $rc)"
  echo "fresh-check: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase "host tools"
if ! command -v debootstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
if [ -z "$root" ]; then
  root=$(mktemp -d /var/tmp/axonn-fresh.XXXXXX)
  chmod 755 "$root"  # it is the new system's /: mktemp's 0700 would lock out every user but root (_apt, munge)
else
  [ ! -e "$root" ] || { echo "fresh-check: --root $root exists; give a new path" >&2; root=; exit 2; }
  mkdir -p "$root"
  root=$(cd "$root" && pwd)
fi
mirror=$(mirror_url)
echo "fresh-check: root $root, mirror $mirror, project $(git -C "$repo" rev-parse --short HEAD)"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-check: note: uncommitted changes in $repo are not tested (the root gets a clone of HEAD)"
fi

phase "debootstrap (minbase bookworm)"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
  tail -20 "$root.debootstrap.log" >&2; rm -f "$root.debootstrap.log"; exit 1; }
rm -f "$root.debootstrap.log"

phase "prepare the root"
# the host's apt sources (the same mirror, with its updates and security suites), name resolution: a
# minbase root has no /etc/hosts, and without it every MPI start stalls resolving the machine's name;
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
  cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
  rm -f "$root/etc/apt/sources.list"
fi
cp /etc/hosts /etc/resolv.conf "$root/etc/"
# and the machine's own trust anchors (here: the CA of the TLS-intercepting egress proxy that HTTPS, e.g.
# the npm registry, goes through): network configuration like the two files above, not software. The root's
# ca-certificates package, when install-deps installs it, adds them to its store.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
mkdir -p "$root/work"
git clone --quiet --no-hardlinks "$repo" "$root/work/axonn"
if [ -d "$repo/../shared" ]; then
  cp -a "$repo/../shared" "$root/work/shared"
fi

# in_root CMD: CMD under bash inside the root, in the project's clone, as root, with a clean
# environment (what a new user's shell has, plus what CI sets)
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" \
    bash -c "cd /work/axonn && $1"
}

phase "README command 1: bash scripts/quickstart.sh (install, build, main job)"
in_root "bash scripts/quickstart.sh"

phase "README command 2: bash scripts/test.sh (install, build, tests)"
in_root "bash scripts/test.sh"

# The Debian packages of that build (issue 20): made with cpack, installed with dpkg (apt-get fetches a
# Depends the root lacks), then used as a user would, from outside the source tree: the examples built
# against /usr, and the main job run by /usr/bin/axonn.
phase "Debian packages: cpack --preset cpu-release, dpkg -i"
in_root "cpack --preset cpu-release >/tmp/cpack.log 2>&1 || { tail -30 /tmp/cpack.log; exit 1; }
  debs=\$(ls build/packages/axonn_*.deb build/packages/libaxonn-dev_*.deb)
  dpkg -i \$debs || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -f --no-install-recommends
  for p in axonn libaxonn-dev; do
    [ \"\$(dpkg-query -W -f='\${Status}' \$p)\" = 'install ok installed' ] || { echo \"package \$p is not installed\"; exit 1; }
  done
  [ \"\$(dpkg -S /usr/bin/axonn)\" = 'axonn: /usr/bin/axonn' ] || { echo '/usr/bin/axonn is not the package'\"'\"'s'; exit 1; }
  # the installed binary is this clone's build
  /usr/bin/axonn --version | grep -qF \"(git \$(git rev-parse HEAD))\" ||
    { echo \"/usr/bin/axonn --version: '\$(/usr/bin/axonn --version)', not this clone's commit\"; exit 1; }"

phase "examples against the installed packages: scripts/check-examples.sh --installed /usr"
in_root "bash scripts/check-examples.sh --installed /usr --each-header"

phase "the main job from /usr/bin/axonn"
# one rank, the built-in data, from an empty folder: the loss must fall
in_root "mkdir -p /tmp/main-job && cd /tmp/main-job &&
  /usr/bin/axonn train --steps 40 --batch-size 8 --seq-len 64 --lr 1e-2 --warmup-steps 5 2>&1 | tee log
  first=\$(sed -nE 's#^step +1/40 [|] loss ([0-9.]+) .*#\\1#p' log)
  last=\$(sed -nE 's#^step +40/40 [|] loss ([0-9.]+) .*#\\1#p' log)
  [ -n \"\$first\" ] && [ -n \"\$last\" ] || { echo 'no loss on steps 1 and 40 in the output above'; exit 1; }
  awk -v a=\"\$first\" -v b=\"\$last\" 'BEGIN { exit !(b < a - 0.5) }' ||
    { echo \"the loss did not fall: \$first -> \$last\"; exit 1; }
  echo \"main job from /usr/bin/axonn: loss \$first -> \$last in 40 steps\""

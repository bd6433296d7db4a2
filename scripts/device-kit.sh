#!/usr/bin/env bash
# The GPU kit: everything scripts/device-check.sh needs on a GPU node that the node lacks, made here, on a
# Debian 12 build machine with the project's packages (scripts/install-deps.sh) and the CUDA toolkit.
#
# A GPU node of an HPC centre often reaches no package registry: it has the NVIDIA driver, a CUDA toolkit
# or PyTorch's CUDA wheels, and little else. So the kit carries prebuilt binaries and the shared libraries
# they need, and the node provides only what every such node has:
#   - the C and C++ runtimes (glibc, libstdc++, libgcc_s). The kit needs the glibc of the build machine's
#     libraries (2.36 from Debian 12; the manifest records it); Debian 12's libstdc++ and libgcc_s travel in
#     lib/fallback and are used only where the node's are older than the binaries need (env.sh asks ldd);
#   - CUDA's own libraries, found at run time by env.sh: libcudart, libcublas, libcublasLt (CUDA 13) and
#     NCCL's libnccl, from the loader's cache, $CUDA_HOME / /usr/local/cuda (lib64, lib, targets/.../lib),
#     or the nvidia/*/lib folders of the node's Python wheels (PyTorch's); the driver's libcuda.so.1 from
#     the loader's cache or /usr/local/nvidia/lib64.
# Everything else travels: Open MPI (mpirun, its components and help files, made relocatable through
# OPAL_PREFIX), oneDNN, OpenBLAS, OpenMP, SentencePiece, PCRE2, xxHash, toml++, libpng and what they need.
#
#   bash scripts/device-kit.sh [--out DIR] [--build-dir DIR] [--arch "80;90"] [--jobs N]
#
#   --out DIR        the kit folder (default out/gpu-kit); it must not exist, or must be a kit this script
#                    made (it is then replaced)
#   --build-dir DIR  the CUDA build to use or make (default build-cuda, the preset cuda-release's): Release,
#                    -DAXONN_CUDA=ON, not tuned to this CPU (-march=x86-64-v3: AVX2, which every GPU node's
#                    host has; a build tuned to this CPU would stop with an illegal instruction on another)
#   --arch LIST      CUDA architectures (default "80;90": A100, H100/H200; 90 alone builds in half the time)
#
# The kit folder holds axonn-gpu-kit.tar.xz (bin/, lib/, mpi/, env.sh, MANIFEST), its sha256, and xz (for
# nodes without it); at most 48 MiB, so that it travels with a checkout within a 64 MiB transfer. On the node:
#   bash scripts/device-check.sh --kit DIR/axonn-gpu-kit.tar.xz --logs LOGDIR
# tests/kit/kit_in_fresh_root.sh proves, in a fresh minbase Debian root, that the kit needs nothing more.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/out/gpu-kit build=$repo/build-cuda arch="80;90" jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift ;;
    --build-dir) build=$2; shift ;;
    --arch) arch=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-kit: unknown argument '$1' (use --out DIR, --build-dir DIR, --arch LIST, --jobs N)" >&2; exit 2 ;;
  esac
  shift
done
log() { echo "device-kit: $*"; }
die() { echo "device-kit: $*" >&2; exit 1; }
trap 'echo "device-kit: failed at line $LINENO" >&2' ERR
limit_mib=48
out=$(mkdir -p "$(dirname "$out")" && cd "$(dirname "$out")" && pwd)/$(basename "$out")
if [ -e "$out" ] && [ ! -f "$out/axonn-gpu-kit.tar.xz" ]; then
  die "--out $out exists and is not a kit this script made: give a new folder"
fi

# ---- the build -------------------------------------------------------------------------------------------
nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
[ -n "$nvcc_bin" ] || die "no nvcc: the kit is built with the CUDA toolkit (install it, or put nvcc on PATH)"
command -v mpiexec >/dev/null || die "no mpiexec: install the project's packages first (scripts/install-deps.sh)"
if [ -f "$build/CMakeCache.txt" ]; then
  # a build made by someone else must be the kit's kind of build: binaries tuned to this CPU would stop
  # with an illegal instruction on another host
  for want in AXONN_CUDA:BOOL=ON AXONN_NATIVE:BOOL=OFF CMAKE_BUILD_TYPE:STRING=Release; do
    grep -qx "$want" "$build/CMakeCache.txt" ||
      die "$build is not a kit build (it lacks $want): give another --build-dir, or remove it"
  done
fi
log "configure $build (Release, CUDA architectures $arch, -march=x86-64-v3)"
# the compiler only on a new build (naming it again, even the same one, would make CMake start afresh)
compiler=()
[ -f "$build/CMakeCache.txt" ] || compiler=(-DCMAKE_CUDA_COMPILER="$nvcc_bin")
mkdir -p "$build"  # its logs go inside it
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAXONN_CUDA=ON "${compiler[@]}" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DAXONN_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
  -DAXONN_BUILD_TOOLS=ON -DAXONN_BUILD_BENCH=ON -DAXONN_BUILD_TESTS=ON >"$build/device-kit.configure.log" 2>&1 ||
  { tail -30 "$build/device-kit.configure.log"; die "configure failed (log: $build/device-kit.configure.log)"; }
grep -q "AXONN_NCCL:BOOL=ON" "$build/CMakeCache.txt" || die "the kit needs NCCL (AXONN_NCCL=ON): set NCCL_ROOT"
# what scripts/device-check.sh runs: the GPU tests, the benchmarks, and the tool itself
binaries="axonn bench_gpt2_step bench_flash_attention bench_cuda_ops test_cuda_kernels test_cuda_bf16 test_cuda_staged
          test_cuda_nccl test_cuda_gpt test_cuda_gpt_grid"
log "build $(echo $binaries) with $jobs jobs"
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $binaries >"$build/device-kit.build.log" 2>&1 ||
  { grep -E "error|Error" "$build/device-kit.build.log" | head -30
    die "build failed (log: $build/device-kit.build.log)"; }

# ---- the folder ------------------------------------------------------------------------------------------
stage=$(mktemp -d "${TMPDIR:-/tmp}/axonn-kit.XXXXXX")
trap 'rm -rf "$stage"' EXIT
kit=$stage/axonn-gpu-kit
mkdir -p "$kit/bin" "$kit/lib/fallback" "$kit/mpi"
for b in $binaries; do
  f=$(find "$build" -type f -name "$b" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  [ -n "$f" ] || die "built $b but cannot find it under $build"
  cp "$f" "$kit/bin/"
done

# Open MPI, as Debian lays it out under /usr, copied under mpi/ (OPAL_PREFIX=$kit/mpi stands for /usr):
# the launcher, the components (not those for fabrics a GPU node's single-host check never uses: InfiniBand
# verbs, UCX, libfabric, PSM, which would bring tens of MiB of libraries), the help texts, and PMIx's
# components and help texts (PMIX_INSTALL_PREFIX).
ompi_lib=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libmpi\.so\.40 / {print $NF; exit}')")")
ompi_pkglib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2
[ -d "$ompi_pkglib" ] && [ -d "$pmix_dir" ] && [ -d /usr/share/openmpi ] ||
  die "Open MPI is not laid out as Debian 12's openmpi-bin 4.1 (no $ompi_pkglib, $pmix_dir or /usr/share/openmpi)"
mkdir -p "$kit/mpi/bin" "$kit/mpi/share" "$kit/mpi${ompi_pkglib#/usr}" "$kit/mpi${pmix_dir#/usr}/lib"
cp "$(readlink -f /usr/bin/orterun)" "$kit/mpi/bin/orterun"
for n in mpirun mpiexec; do ln -s orterun "$kit/mpi/bin/$n"; done
cp -r /usr/share/openmpi "$kit/mpi/share/"
cp -r "$pmix_dir/lib/pmix" "$kit/mpi${pmix_dir#/usr}/lib/"
cp -r "$pmix_dir/share" "$kit/mpi${pmix_dir#/usr}/"
skipped_components=""
for c in "$ompi_pkglib"/*.so; do
  if ldd "$c" | grep -qE 'lib(ibverbs|rdmacm|ucp|uct|ucs|ucm|fabric|psm_infinipath|psm2|jvm|mlx5|efa)\.'; then
    skipped_components="$skipped_components $(basename "$c" .so)"
    continue
  fi
  cp "$c" "$kit/mpi${ompi_pkglib#/usr}/"
done

# What the node provides (above): not carried. libstdc++ and libgcc_s travel as a fallback only.
provided='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libcuda|libcudart|libcublas|libcublasLt|libnccl|libstdc\+\+|libgcc_s)\.so'
# every library a kit file needs, directly or through another library (ldd lists the whole closure), by its
# name as ldd resolves it on this machine; none may be missing here
closure() {
  local f
  for f in "$@"; do
    ldd "$f" | awk -v file="$f" '/not found/ {print "MISSING " $1 " (needed by " file ")"; next}
                                  $2 == "=>" && $3 ~ /^\// {print $1, $3}'
  done | sort -u
}
mapfile -t needed < <(closure "$kit"/bin/* "$kit/mpi/bin/orterun" $(find "$kit/mpi" -name '*.so') "$ompi_lib/libmpi.so.40")
for line in "${needed[@]}"; do
  case $line in MISSING*) die "${line#MISSING }: install it here first";; esac
  name=${line%% *} path=${line#* }
  if [[ $name =~ $provided ]]; then
    case $name in libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$kit/lib/fallback/$name" ;; esac
    continue
  fi
  cp -L "$path" "$kit/lib/$name"
done

# ---- env.sh: the node's side, sourced by scripts/device-check.sh (or by a user's shell) ------------------
cat >"$kit/env.sh" <<'EOF'
# Sourced (bash): puts the kit's programs and libraries first, finds CUDA's libraries on this node.
# Sets AXONN_KIT, PATH, LD_LIBRARY_PATH, OPAL_PREFIX, PMIX_INSTALL_PREFIX, and AXONN_KIT_CUDA_LIBS (where each
# CUDA library was found, or "MISSING"). Leaves the caller's variables in AXONN_KIT_ORIG_* for programs
# that must not see the kit's libraries (python3 with PyTorch).
AXONN_KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export AXONN_KIT
export AXONN_KIT_ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} AXONN_KIT_ORIG_PATH=$PATH
axonn_kit_find() {  # axonn_kit_find SONAME: the folder that holds it on this node, or nothing
  local so=$1 d hit
  hit=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so {print $NF; exit}')
  [ -n "$hit" ] && { dirname "$hit"; return; }
  for d in ${CUDA_HOME:+$CUDA_HOME/lib64 $CUDA_HOME/lib} ${CUDA_PATH:+$CUDA_PATH/lib64} \
           /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 \
           $(echo "${AXONN_KIT_ORIG_LD_LIBRARY_PATH}" | tr ':' ' '); do
    [ -e "$d/$so" ] && { echo "$d"; return; }
  done
  # the CUDA wheels of the node's Python (PyTorch's): site-packages/nvidia/*/lib
  if command -v python3 >/dev/null 2>&1; then
    for d in $(PATH=$AXONN_KIT_ORIG_PATH LD_LIBRARY_PATH=$AXONN_KIT_ORIG_LD_LIBRARY_PATH python3 -c \
        'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
      [ -d "$d/nvidia" ] || continue
      hit=$(find "$d/nvidia" -maxdepth 4 -name "$so" 2>/dev/null | head -1)
      [ -n "$hit" ] && { dirname "$hit"; return; }
    done
  fi
}
axonn_kit_path=$AXONN_KIT/lib
AXONN_KIT_CUDA_LIBS=""
for so in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  d=$(axonn_kit_find "$so")
  AXONN_KIT_CUDA_LIBS="$AXONN_KIT_CUDA_LIBS $so=${d:-MISSING}"
  case ":$axonn_kit_path:" in *":$d:"*) ;; *) [ -n "$d" ] && axonn_kit_path=$axonn_kit_path:$d ;; esac
done
export AXONN_KIT_CUDA_LIBS
export LD_LIBRARY_PATH=$axonn_kit_path${AXONN_KIT_ORIG_LD_LIBRARY_PATH:+:$AXONN_KIT_ORIG_LD_LIBRARY_PATH}
# Debian 12's C++ runtime only where the node's is older than the binaries need
if LD_LIBRARY_PATH=$LD_LIBRARY_PATH ldd "$AXONN_KIT/bin/axonn" 2>&1 | grep -qE "GLIBCXX|CXXABI|GCC_[0-9.]+' not found"; then
  export LD_LIBRARY_PATH=$AXONN_KIT/lib/fallback:$LD_LIBRARY_PATH
fi
export PATH=$AXONN_KIT/bin:$AXONN_KIT/mpi/bin:$PATH
export OPAL_PREFIX=$AXONN_KIT/mpi PMIX_INSTALL_PREFIX=$AXONN_KIT/mpi/lib/x86_64-linux-gnu/pmix2
# one host: shared memory between the ranks, no fabric; no complaint about the fabrics the kit leaves out
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_rmaps_base_oversubscribe=1
# a process started without mpirun (a test, bench_gpt2_step) is an MPI singleton: isolated, it needs no orted
# daemon (the kit carries none)
export OMPI_MCA_ess_singleton_isolated=1
# the kit's mpirun starts ranks on this node only (it carries no orted for other nodes): the isolated launcher,
# which needs no ssh or rsh (a node image may have neither); a user's OMPI_MCA_plm wins
export OMPI_MCA_plm=${OMPI_MCA_plm:-isolated}
unset d so axonn_kit_path
# axonn_kit_unloadable: "FILE: LIB => not found" for every library a kit file needs that the loader cannot
# find with the settings above, the driver's libcuda.so.1 left out (absent where there is no GPU)
axonn_kit_unloadable() {
  local f
  for f in "$AXONN_KIT"/bin/* "$AXONN_KIT/mpi/bin/orterun" $(find "$AXONN_KIT/lib" "$AXONN_KIT/mpi" -name '*.so*' -type f); do
    ldd "$f" 2>&1 | grep -E 'not found' | grep -v 'libcuda\.so\.1' | sed "s#^[[:space:]]*#$f: #" || true
  done
}
EOF
# ---- check it here, then the manifest and the archive ----------------------------------------------------
# every file loads with the kit's libraries and this machine's CUDA ones (only the driver may be absent)
( unset LD_LIBRARY_PATH; source "$kit/env.sh"; axonn_kit_unloadable ) | sed 's/^/device-kit: /' | tee "$stage/ldd.txt"
[ -s "$stage/ldd.txt" ] && die "some kit files do not load (above)"
glibc=$(objdump -T "$kit"/bin/* "$kit"/lib/*.so* "$kit/mpi/bin/orterun" 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1)
{
  echo "axonn GPU kit (scripts/device-kit.sh)"
  echo "commit: $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "cuda: $("$nvcc_bin" --version | tail -1), architectures $arch; host code -march=x86-64-v3"
  echo "needs on the node: ${glibc/_/ } or newer, the NVIDIA driver (libcuda.so.1), libcudart/libcublas/libcublasLt 13 and libnccl 2"
  echo "open mpi: $(ompi_info --version 2>/dev/null | head -1); components left out:${skipped_components:- none}"
  echo "files (bytes):"
  (cd "$kit" && find . -type f -printf '%s %p\n' | sort -k2)
} >"$kit/MANIFEST"
rm -rf "$out.new" && mkdir -p "$out.new"
# xz -9, a 64 MiB dictionary: the binaries share most of their code, which a smaller window misses (an sm_90
# kit of 170 MiB: 21.7 MB with -9, 32.8 MB with xz's default -6; about 80 s either way)
tar -C "$stage" -cf - axonn-gpu-kit | xz -9 -T1 >"$out.new/axonn-gpu-kit.tar.xz"
(cd "$out.new" && sha256sum axonn-gpu-kit.tar.xz >axonn-gpu-kit.tar.xz.sha256)
cp "$kit/MANIFEST" "$out.new/MANIFEST"
# xz itself (90 KB, needs only glibc and liblzma, which dpkg and systemd bring to every Debian or Ubuntu
# system), for nodes whose image lacks the command: device-check.sh takes it where there is no other
cp "$(command -v xz)" "$out.new/xz"
bytes=$(stat -c %s "$out.new/axonn-gpu-kit.tar.xz")
raw=$(du -sb "$kit" | cut -f1)
rm -rf "$out" && mv "$out.new" "$out"
log "kit: $out/axonn-gpu-kit.tar.xz, $(( bytes / 1024 / 1024 )) MiB ($bytes bytes; $(( raw / 1024 / 1024 )) MiB unpacked)"
[ "$bytes" -le $(( limit_mib * 1024 * 1024 )) ] || die "the kit is over $limit_mib MiB"
log "on the GPU node: bash scripts/device-check.sh --kit $out/axonn-gpu-kit.tar.xz --logs LOGDIR"

#!/usr/bin/env bash
# tests/multihost/netns.sh — a small cluster on one machine: N "hosts" as network namespaces joined
# by veth links to a bridge, one Open MPI job across them over TCP (shared memory inside a host), the
# links optionally shaped to a bandwidth and a latency, and optionally a Slurm cluster on the hosts.
#
#   netns.sh [--hosts N] [--slots S] [--rate RATE] [--delay TIME] [--slurm] [--keep] -- CMD [ARG...]
#
#   --hosts N     hosts host0 .. host{N-1} (default 2); host i has the address 198.18.0.(i+1)/24
#   --slots S     MPI slots per host (default 2): ranks fill host0 first, as Slurm's block distribution
#   --rate RATE   every host's link is limited to RATE each way (tc units: 1gbit, 100mbit; tbf), so a
#                 host's ranks share one "NIC"; default: unshaped (veth, as fast as the CPU copies)
#   --delay TIME  one-way latency added to every packet a host sends (0.5ms, 500us): tc netem where the
#                 kernel has it, else tests/multihost/netdelay (iptables NFQUEUE; the binary from
#                 --netdelay PATH or $AXONN_NETDELAY, built as target axonn_netdelay)
#   --netdelay PATH  the netdelay binary for --delay without netem
#   --slurm       start munged, slurmctld (on host0) and one slurmd per host (NodeName=hostI) from a
#                 generated slurm.conf; SLURM_CONF is set for CMD. Jobs may span hosts (sbatch -N 2).
#   --keep        keep the work directory (configuration and logs) and print where it is
#
# CMD runs on host0 (its network namespace, host name "host0") with:
#   AXONN_HOSTS      "host0 host1 ..."            AXONN_NETNS_DIR   the work directory
#   AXONN_HOSTFILE   Open MPI hostfile (slots=S)  AXONN_MPIRUN      mpirun across the hosts: the
#     hostfile, an rsh agent that enters each host's namespaces, TCP restricted to the hosts' subnet;
#     use as `"$AXONN_MPIRUN" -np 4 axonn train ...`
#   OMPI_MCA_btl_tcp_if_include / OMPI_MCA_oob_tcp_if_include  the hosts' subnet, for any mpirun
#   OMPI_MCA_mpi_yield_when_idle=1  (the hosts share the machine's cores)
#   SLURM_CONF (with --slurm)
#
# Addresses are 198.18.0.0/24 (RFC 2544's range for benchmarking networks) inside namespaces that
# nothing outside can see. Everything runs in a new PID, mount, network and UTS namespace (unshare),
# so no interface, route, port or host name of the machine is touched, and when this script ends in
# any way (even SIGKILL) the kernel ends every process it started and frees every namespace; on a
# normal exit or a signal it also stops the daemons and removes the work directory itself.
#
# Exit status: CMD's; 77 (CTest's skip code) with "SKIP: <reason>" on stderr when the namespaces,
# the links, the shaping or the Slurm cluster cannot be made here; 2 on bad arguments.
set -euo pipefail

hosts=2 slots=2 rate= delay= slurm=0 keep=0 netdelay=${AXONN_NETDELAY:-}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift ;;
    --slots) slots=$2; shift ;;
    --rate) rate=$2; shift ;;
    --delay) delay=$2; shift ;;
    --netdelay) netdelay=$2; shift ;;
    --slurm) slurm=1 ;;
    --keep) keep=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "netns.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "netns.sh: no command given: netns.sh [options] -- CMD [ARG...]" >&2; exit 2; }
[[ $hosts =~ ^[1-9][0-9]?$ ]] && [ "$hosts" -le 64 ] || { echo "netns.sh: --hosts wants 1..64, got '$hosts'" >&2; exit 2; }
[[ $slots =~ ^[1-9][0-9]*$ ]] || { echo "netns.sh: --slots wants a positive integer, got '$slots'" >&2; exit 2; }
skip() { echo "SKIP: $*" >&2; exit 77; }
# scaled VALUE UNIT=FACTOR...: VALUE (a number and one of the units) times the unit's factor, or "bad"
scaled() {
  local v=${1,,} n u pair
  n=${v%%[a-z]*} u=${v#"$n"}
  shift
  [[ $n =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo bad; return; }
  for pair in "$@"; do
    [ "$u" = "${pair%=*}" ] && { awk -v n="$n" -v f="${pair#*=}" 'BEGIN { printf "%.0f", n * f }'; return; }
  done
  echo bad
}
rate_bits() { scaled "$1" bit=1 kbit=1e3 mbit=1e6 gbit=1e9; }  # tc's rate in bits per second
delay_us() { scaled "$1" us=1 ms=1e3 s=1e6; }                     # 0.5ms, 500us in microseconds
[ -z "$delay" ] || [ "$(delay_us "$delay")" != bad ] ||
  { echo "netns.sh: --delay wants a number and us, ms or s (e.g. 0.5ms), got '$delay'" >&2; exit 2; }
[ -z "$rate" ] || [ "$(rate_bits "$rate")" != bad ] ||
  { echo "netns.sh: --rate wants a number and bit, kbit, mbit or gbit (e.g. 1gbit), got '$rate'" >&2; exit 2; }

# mount_cgroups: mounts on /sys/fs/cgroup the hierarchies /proc/self/cgroup lists (where a chroot
# has /sys without them). Only ever inside the sandbox's private mounts.
mount_cgroups() {
  local id ctrl path v1=0
  while IFS=: read -r id ctrl path; do [ "$id" = 0 ] || v1=1; done </proc/self/cgroup
  if [ "$v1" -eq 0 ]; then
    mount -t cgroup2 axonn-cgroup /sys/fs/cgroup
    return
  fi
  mount -t tmpfs -o mode=755 axonn-cgroup /sys/fs/cgroup || return 1
  while IFS=: read -r id ctrl path; do
    if [ "$id" = 0 ]; then
      mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 axonn-cgroup /sys/fs/cgroup/unified || return 1
    else
      local dir=${ctrl#name=}
      mkdir -p "/sys/fs/cgroup/$dir" && mount -t cgroup -o "$ctrl" axonn-cgroup "/sys/fs/cgroup/$dir" || return 1
    fi
  done </proc/self/cgroup
}

self=$(readlink -f "$0")
if [ "${AXONN_NETNS_INSIDE:-}" != 1 ]; then
  # --- outside: check that namespaces can be made, then run the sandbox and wait for it ---
  [ "$(id -u)" -eq 0 ] || skip "network namespaces need root (run as root, as CI does)"
  for tool in unshare nsenter ip setpriv; do
    command -v "$tool" >/dev/null || skip "'$tool' is not installed (Debian: util-linux, iproute2)"
  done
  why=$(unshare --pid --fork --mount --net --uts true 2>&1) ||
    skip "cannot create PID, mount, network and UTS namespaces here: $why"
  # the work directory: inside the sandbox's private /run (gone with it, whatever happens), or with
  # --keep a directory here that outlives it
  work=
  if [ "$keep" -eq 1 ]; then
    work=$(mktemp -d /tmp/axonn-netns.XXXXXX)
    chmod 755 "$work"  # munged wants its socket's directories searchable by everyone
  fi
  inner=(--hosts "$hosts" --slots "$slots")
  [ -z "$rate" ] || inner+=(--rate "$rate")
  [ -z "$delay" ] || inner+=(--delay "$delay")
  [ -z "$netdelay" ] || inner+=(--netdelay "$(readlink -f "$netdelay")")
  [ "$slurm" -eq 0 ] || inner+=(--slurm)
  # if this shell is killed outright, pdeathsig kills unshare, whose --kill-child kills the sandbox's
  # init, and with it everything in the sandbox
  AXONN_NETNS_INSIDE=1 AXONN_NETNS_DIR=$work setpriv --pdeathsig KILL \
    unshare --pid --fork --kill-child --mount --mount-proc --net --uts "$self" "${inner[@]}" -- "$@" &
  sandbox=$!
  # a signal here goes to the sandbox's init (unshare's child), which stops its daemons and cleans up
  forward() {
    local init
    init=$(cat "/proc/$sandbox/task/$sandbox/children" 2>/dev/null || true)
    [ -z "$init" ] || kill -"$1" $init 2>/dev/null || true
  }
  trap 'forward TERM' TERM
  trap 'forward INT' INT
  trap 'forward HUP' HUP
  rc=0
  while :; do
    wait "$sandbox" && rc=0 || rc=$?
    kill -0 "$sandbox" 2>/dev/null || break  # wait returned for a trapped signal: wait again
  done
  [ "$keep" -eq 0 ] || echo "netns.sh: work directory kept: $work" >&2
  exit "$rc"
fi

# --- inside the sandbox: PID 1 of a new PID namespace, with private mounts, network and host name ---
subnet=198.18.0.0/24
addr() { echo "198.18.0.$(( $1 + 1 ))"; }
daemons=()  # PIDs of the daemons started here, stopped in reverse order
cleanup() {
  local rc=$? i pid
  trap - EXIT INT TERM HUP
  if [ -n "${SLURM_CONF:-}" ]; then
    timeout 10 "$work/bin/on_host" host0 scancel --quiet --full --user=root 2>/dev/null || true
  fi
  # the daemons one at a time, last started first (slurmd before slurmctld before munged)
  for (( i=${#daemons[@]}-1; i>=0; i-- )); do
    pid=${daemons[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  # everything else in the sandbox (the command's processes, what the daemons left): from the init of
  # a PID namespace, kill -1 reaches every process of the namespace but itself
  kill -TERM -1 2>/dev/null || true
  sleep 0.2
  kill -KILL -1 2>/dev/null || true
  for (( i=0; i<hosts; i++ )); do ip netns del "host$i" 2>/dev/null || true; done
  ip netns del switch 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

ip link set lo up
# a private /run, so that `ip netns` keeps its names and mounts (/run/netns) inside the sandbox, and
# the work directory lives there unless --keep gave one
mount -t tmpfs -o mode=755 axonn-run /run || skip "cannot mount a tmpfs on /run in the sandbox"
work=${AXONN_NETNS_DIR:-/run/axonn-netns}
mkdir -p "$work"
# a private /dev/shm and temporary directory: Open MPI names its shared-memory segments and session
# directories by host name, process id and job, and every sandbox has the same host names, process ids
# from 1 and a Slurm whose first job is 1, so what a killed job of an earlier sandbox left in the
# machine's /tmp met this sandbox's ranks (one died of SIGSEGV in MPI_Init, after "A system call failed
# during shared memory initialization ... open(2)")
mount -t tmpfs -o mode=1777 axonn-shm /dev/shm || skip "cannot mount a tmpfs on /dev/shm in the sandbox"
export TMPDIR=$work/tmp
mkdir -p -m 1777 "$TMPDIR"

# --- the network: a bridge in namespace "switch", one veth per host ---
ip netns add switch || skip "cannot create network namespaces (ip netns add)"
ip -n switch link set lo up
ip -n switch link add br0 type bridge 2>/dev/null || skip "the kernel has no bridge (CONFIG_BRIDGE)"
ip -n switch link set br0 up
# --delay: tc netem if the kernel has it, else netdelay on an NFQUEUE
delay_with=
if [ -n "$delay" ]; then
  if ip netns exec switch tc qdisc add dev br0 root netem delay 1ms 2>/dev/null; then
    ip netns exec switch tc qdisc del dev br0 root
    delay_with=netem
  else
    [ -n "$netdelay" ] && [ -x "$netdelay" ] ||
      skip "--delay: this kernel has no tc netem (CONFIG_NET_SCH_NETEM), and no netdelay binary was given (--netdelay PATH or \$AXONN_NETDELAY; build target axonn_netdelay)"
    command -v iptables >/dev/null || skip "--delay without tc netem needs iptables (Debian: iptables)"
    delay_with=netdelay
  fi
fi
for (( i=0; i<hosts; i++ )); do
  h=host$i
  ip netns add "$h"
  # created directly inside the two namespaces: nothing ever appears in the machine's own namespace
  ip link add eth0 netns "$h" type veth peer name "port$i" netns switch 2>/dev/null ||
    skip "cannot create veth links (CONFIG_VETH)"
  ip -n switch link set "port$i" master br0 up
  ip -n "$h" link set lo up
  ip -n "$h" addr add "$(addr "$i")/24" dev eth0
  ip -n "$h" link set eth0 up
  if [ -n "$rate" ]; then
    # tbf on both ends: the host's sends (eth0) and what the switch delivers to it (port i)
    bits=$(rate_bits "$rate")
    burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 / 1000; if (x < 16384) x = 16384; printf "%d", x }')  # 1 ms of it
    for side in "$h eth0" "switch port$i"; do
      ns=${side% *} dev=${side#* }
      ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency 100ms \
        2>/dev/null || skip "tc cannot shape '$dev' to $rate with tbf (CONFIG_NET_SCH_TBF)"
    done
  fi
  if [ "$delay_with" = netem ]; then
    if [ -n "$rate" ]; then parent="parent 1:1"; else parent=root; fi
    ip netns exec "$h" tc qdisc add dev eth0 $parent handle 10: netem delay "$delay" limit 100000
  elif [ "$delay_with" = netdelay ]; then
    # what the host sends out of eth0 waits in netdelay's queue (--queue-bypass: never stuck without it)
    nsenter --net="/run/netns/$h" "$netdelay" 0 "$(delay_us "$delay")" >"$work/netdelay-$h.log" 2>&1 &
    daemons+=($!)
    for _ in $(seq 50); do grep -q ready "$work/netdelay-$h.log" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$work/netdelay-$h.log" || skip "netdelay did not start on $h: $(cat "$work/netdelay-$h.log")"
    ip netns exec "$h" iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass ||
      skip "iptables cannot queue $h's packets to netdelay (NFQUEUE)"
  fi
done

# --- MPI across the hosts ---
mkdir -p "$work/bin"
hostfile=$work/hostfile
: >"$hostfile"
host_list=
for (( i=0; i<hosts; i++ )); do
  echo "host$i slots=$slots" >>"$hostfile"
  host_list="$host_list${host_list:+ }host$i"
done
# on_host HOST CMD...: runs CMD in HOST's network namespace with HOST as its host name
# (nsenter rather than `ip netns exec`, which remounts /sys and so hides /sys/fs/cgroup from slurmd)
cat >"$work/bin/on_host" <<'EOF'
#!/bin/sh
host=$1; shift
exec nsenter --net="/run/netns/$host" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
EOF
# the rsh agent Open MPI calls as `agent HOST REMOTE-COMMAND...`; like ssh, it hands the words of
# the remote command to a shell, here on that host
cat >"$work/bin/rsh_netns" <<EOF
#!/bin/sh
host=\$1; shift
exec "$work/bin/on_host" "\$host" sh -c "\$*"
EOF
cat >"$work/bin/mpirun_hosts" <<EOF
#!/bin/sh
exec mpirun --hostfile "$hostfile" --mca plm_rsh_agent "$work/bin/rsh_netns" --mca plm_rsh_no_tree_spawn 1 "\$@"
EOF
chmod +x "$work/bin/on_host" "$work/bin/rsh_netns" "$work/bin/mpirun_hosts"
export AXONN_HOSTS=$host_list AXONN_HOSTFILE=$hostfile AXONN_MPIRUN=$work/bin/mpirun_hosts AXONN_NETNS_DIR=$work
export OMPI_MCA_btl_tcp_if_include=$subnet OMPI_MCA_oob_tcp_if_include=$subnet
# the hosts share this machine's cores, which Open MPI cannot know (each host has only its slots): without
# this, ranks waiting for a message spin and keep the ranks that would send it off the cores (steps 10x
# slower on 2 cores)
export OMPI_MCA_mpi_yield_when_idle=1

# --- Slurm on the hosts ---
if [ "$slurm" -eq 1 ]; then
  for tool in munged slurmctld slurmd srun sbatch salloc scontrol; do
    command -v "$tool" >/dev/null ||
      skip "Slurm cannot start: '$tool' is not installed (Debian 12: apt-get install slurmd slurmctld slurm-client munge)"
  done
  # slurmd 22.05 initialises its cgroup plugin even with proctrack/linuxproc and task/none, and wants
  # /sys/fs/cgroup as /proc/self/cgroup describes it (v1, v2, or v1 with v2 at unified/)
  mountpoint -q /sys/fs/cgroup || mount_cgroups ||
    skip "Slurm cannot start: slurmd needs the cgroup file systems on /sys/fs/cgroup, and they could not be mounted"
  mkdir -p "$work/slurm/state" "$work/slurm/log" "$work/slurm/tmp" "$work/munge/run"
  mkdir -m 700 "$work/munge/key"
  head -c 1024 /dev/urandom >"$work/munge/key/munge.key"
  chmod 400 "$work/munge/key/munge.key"
  chmod 755 "$work/munge" "$work/munge/run"
  socket=$work/munge/run/munge.sock
  "$work/bin/on_host" host0 munged --foreground --key-file="$work/munge/key/munge.key" --socket="$socket" \
    --pid-file="$work/munge/run/munged.pid" --log-file="$work/munge/key/munged.log" \
    --seed-file="$work/munge/key/munged.seed" >"$work/munge/key/munged.out" 2>&1 &
  daemons+=($!)
  for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
  [ -S "$socket" ] || skip "Slurm cannot start: munged did not start: $(tail -3 "$work/munge/key/munged.log" 2>/dev/null)"
  nodes=
  for (( i=0; i<hosts; i++ )); do
    mkdir -p "$work/slurm/spool/host$i" "$work/slurm/tmp/host$i"
    nodes="${nodes}NodeName=host$i NodeAddr=$(addr "$i") CPUs=$slots RealMemory=1000 State=UNKNOWN"$'\n'
  done
  export SLURM_CONF=$work/slurm/slurm.conf
  cat >"$SLURM_CONF" <<EOF
# generated by tests/multihost/netns.sh: a cluster of $hosts namespace hosts
ClusterName=axonn-netns
SlurmctldHost=host0($(addr 0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$work/slurm/state
SlurmdSpoolDir=$work/slurm/spool/%n
SlurmctldPidFile=$work/slurm/slurmctld.pid
SlurmdPidFile=$work/slurm/slurmd-%n.pid
SlurmctldLogFile=$work/slurm/log/slurmctld.log
SlurmdLogFile=$work/slurm/log/slurmd-%n.log
TmpFS=$work/slurm/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Debian 12: Open MPI 4.1.4 is built with PMIx (4.2) and without Slurm's PMI-2, so srun uses PMIx
MpiDefault=pmix
SwitchType=switch/none
ReturnToService=2
# the node's CPUs are the slots asked for, not the VM's cores (the tests oversubscribe)
SlurmdParameters=config_overrides
# the default 30 s, as a cluster has it: SIGTERM, then SIGKILL KillWait seconds later
KillWait=30
$nodes
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  "$work/bin/on_host" host0 slurmctld -D -i >"$work/slurm/log/slurmctld.out" 2>&1 &
  daemons+=($!)
  for (( i=0; i<hosts; i++ )); do
    "$work/bin/on_host" "host$i" slurmd -D -N "host$i" >"$work/slurm/log/slurmd-host$i.out" 2>&1 &
    daemons+=($!)
  done
  idle=0
  for _ in $(seq 100); do
    idle=$("$work/bin/on_host" host0 sinfo -h -t idle -o '%D' 2>/dev/null | head -1) || idle=0
    [ "${idle:-0}" -ge "$hosts" ] && break
    sleep 0.2
  done
  if [ "${idle:-0}" -lt "$hosts" ]; then
    tail -5 "$work"/slurm/log/*.log >&2 || true
    skip "Slurm cannot start: $hosts node(s) did not become idle within 20 s (logs above)"
  fi
fi

# --- the command, on host0 (in the background: a signal must reach the traps while it runs) ---
"$work/bin/on_host" host0 "$@" &
command_pid=$!
rc=0
wait "$command_pid" || rc=$?
exit "$rc"

#!/usr/bin/env bash
# 4D training across namespace hosts (tests/multihost/netns.sh: TCP between hosts over a shaped link,
# shared memory inside one) gives, bit for bit, the losses of the same grid on one host, and llm.c's
# within the CLI tests' bound.
# The run's `launch` and `placement` lines say where the ranks are and which groups cross hosts, as
# the rank mapping computed here from spec/axonn.md §2.1 says.
# Usage: cli_hosts.sh CASE AXONN_BIN REFERENCE_DIR SOURCE_DIR, CASE = HOSTSxSLOTS@GX,GY,GZ,GD[:ORDER]
#   e.g. 2x2@2,1,2,1: 2 hosts of 2 ranks; X inside a host, Z across. 2x2@2,1,2,1:zxy: the reverse.
# Skips (77) when the sandbox cannot be made here.
case_name=$1 axonn=$2 ref=$3 src=$4 mpiexec=mpirun
layout=${case_name%@*} grid=${case_name#*@}
order=xyz
case $grid in *:*) order=${grid#*:} grid=${grid%:*} ;; esac
hosts=${layout%x*} slots=${layout#*x}
if [ "${AXONN_IN_SANDBOX:-}" != 1 ]; then
  AXONN_IN_SANDBOX=1 exec "$src/tests/multihost/netns.sh" --hosts "$hosts" --slots "$slots" --rate 1gbit -- \
    bash "$0" "$@"
fi
. "$src/tests/cli/common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
np=$(( hosts * slots ))
steps=10  # enough to compare bits; 8 ranks over TCP on 2 cores are slow
train_args=(train --grid "$grid" --grid-order "$order" --init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --steps "$steps"
  --lr 3e-3 --lr-schedule constant --weight-decay 0 --grad-clip 0 --peak-gflops 100)
export OMP_NUM_THREADS=1
# each stage names itself and its seconds as it ends, so a slow or stuck stage is visible in CTest's output
SECONDS=0
stage() { echo "stage: $* (at ${SECONDS} s)"; }
CLI_TIMEOUT=100  # two runs, the hostname check and their kill grace fit CTest's 300 s

# tx_bytes HOST: bytes HOST has sent on its link
tx_bytes() { ip netns exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }  # (remounts /sys for the namespace)

# one host: every rank on host0, shared memory only
run "$mpiexec" -n "$np" --oversubscribe "$axonn" "${train_args[@]}" --metrics "$tmp/one.jsonl"
stage "trained on one host"
# across the hosts: $slots consecutive ranks per host
before=$(tx_bytes "host$(( hosts - 1 ))")
run "$AXONN_MPIRUN" -n "$np" "$axonn" "${train_args[@]}" --metrics "$tmp/hosts.jsonl"
sent=$(( $(tx_bytes "host$(( hosts - 1 ))") - before ))
stage "trained across the hosts"
# the job really spanned the hosts: the last host's ranks sent their share over its link
[ "$sent" -gt 100000 ] || fail "host$(( hosts - 1 )) sent only $sent bytes on its link: the ranks did not span the hosts"
echo "ok: host$(( hosts - 1 )) sent $sent bytes to the other hosts"
cp "$tmp/out" "$tmp/hosts.out"
expect_output "launch    mpirun: $np ranks on $hosts nodes \(host0 host1[^)]*\), up to $slots per node"
# which groups cross hosts: the rank of coordinates (x, y, z, d) with ORDER fastest first, hosts of
# SLOTS consecutive ranks
want=$(python3 - "$grid" "$order" "$slots" <<'PY'
import itertools, sys
ext = dict(zip("xyzd", map(int, sys.argv[1].split(","))))
order, slots = list(sys.argv[2].replace(",", "")) + ["d"], int(sys.argv[3])
def rank(c):
    r, stride = 0, 1
    for a in order:
        r, stride = r + c[a] * stride, stride * ext[a]
    return r
words = []
for axis, name in zip("xyzd", ["X", "Y", "Z", "data"]):
    if ext[axis] < 2:
        continue
    spans = set()
    for c in itertools.product(*(range(ext[a]) for a in "xyzd")):
        fixed = dict(zip("xyzd", c))
        hosts = {rank({**fixed, axis: i}) // slots for i in range(ext[axis])}
        spans.add(len(hosts))
    n = max(spans)
    words.append(name + (" inside nodes" if n == 1 else " across %d nodes" % n))
print(", ".join(words))
PY
)
expect_output "placement $want\$"
echo "ok: placement $want"
timeout -k 5 60 "$AXONN_MPIRUN" -n "$np" hostname >"$tmp/where" || fail "mpirun hostname across the hosts failed or took over 60 s"
stage "ranks placed"
for (( h=0; h<hosts; h++ )); do
  n=$(count "^host$h\$" "$tmp/where")
  [ "$n" -eq "$slots" ] || fail "host$h ran $n ranks, not $slots"
done

python3 - "$tmp/one.jsonl" "$tmp/hosts.jsonl" "$ref/gpt2-tiny/losses.txt" "$case_name" "$steps" <<'PY'
import json, sys
one = [json.loads(l) for l in open(sys.argv[1])]
hosts = [json.loads(l) for l in open(sys.argv[2])]
want = [float(l.split()[1]) for l in open(sys.argv[3])]
steps = int(sys.argv[5])
assert len(one) == len(hosts) == steps, (len(one), len(hosts))
for i, (a, b, w) in enumerate(zip(one, hosts, want)):
    assert a["step"] == b["step"] == i, (a, b)
    # the same grid and the same collectives: TCP or shared memory moves the same bits
    assert a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"], (i, a, b)
    assert abs(b["loss"] - w) <= 2e-5, (i, b["loss"], w)
print("ok: %s: %d steps across hosts equal to one host bit for bit, max |loss - llm.c| = %.3g"
      % (sys.argv[4], steps, max(abs(b["loss"] - w) for b, w in zip(hosts, want))))
PY

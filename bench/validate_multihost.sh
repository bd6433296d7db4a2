#!/usr/bin/env bash
# The planner against a two-level network (issue 18; docs/multi-host.md): HOSTS namespace hosts of
# SLOTS ranks (tests/multihost/netns.sh), their links shaped to RATE and DELAY; `axonn calibrate`
# measures that network, then bench_plan_validate times every admissible grid of a small GPT in every
# rank order that places its groups differently, with --overlap OVERLAP, and compares with the
# prediction from the calibrated profile (Spearman, the measured best's place, mean relative error).
#
#   bench/validate_multihost.sh [BUILD_DIR] [extra bench_plan_validate flags, e.g. --rounds 8 --json out.json]
#
# Environment: HOSTS (2), SLOTS (2), RATE (1gbit), DELAY (0.5ms; empty: none), OVERLAP (all),
# ORDERS (all), PROFILE_OUT (keep the calibrated profile there), CALIBRATE_FLAGS (e.g. --quick).
# Needs root (namespaces); the delay without tc netem needs iptables and the axonn_netdelay target.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
shift || true
here=$(cd "$(dirname "$0")/.." && pwd)
hosts=${HOSTS:-2} slots=${SLOTS:-2} rate=${RATE:-1gbit} delay=${DELAY-0.5ms}
np=$(( hosts * slots ))
shape=(--hosts "$hosts" --slots "$slots" --rate "$rate")
[ -z "$delay" ] || shape+=(--delay "$delay" --netdelay "$build/tests/multihost/axonn_netdelay")
export OMP_NUM_THREADS=1
# the sandbox needs root, and Open MPI refuses root unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== $(date -u +%FT%TZ) $hosts hosts x $slots ranks, links $rate${delay:+, $delay one way}; uptime: $(uptime)"
# shellcheck disable=SC2016  # expanded inside the sandbox
"$here/tests/multihost/netns.sh" "${shape[@]}" -- bash -c '
  set -euo pipefail
  build=$1 np=$2 profile=$3 overlap=$4 orders=$5 calibrate_flags=$6; shift 6
  "$AXONN_MPIRUN" -n "$np" "$build/bin/axonn" calibrate $calibrate_flags --out "$AXONN_NETNS_DIR/profile.json"
  [ -z "$profile" ] || cp "$AXONN_NETNS_DIR/profile.json" "$profile"
  echo "== uptime between: $(uptime)"
  "$AXONN_MPIRUN" -n "$np" "$build/bin/bench_plan_validate" --machine "$AXONN_NETNS_DIR/profile.json" \
    --layers 4 --channels 256 --heads 4 --vocab 2048 --seq-len 64 --batch-size 8 --rounds 6 --steps 1 \
    --overlap "$overlap" --orders "$orders" "$@"
' sandbox "$build" "$np" "${PROFILE_OUT:-}" "${OVERLAP:-all}" "${ORDERS:-all}" "${CALIBRATE_FLAGS:-}" "$@"
echo "== uptime after: $(uptime)"

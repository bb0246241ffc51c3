#!/usr/bin/env bash
# A looptrace run cut into N shards that GNU parallel runs on local cores or, with
# LOOPTRACE_SSHLOGIN, on other machines; the results come back in order.
#
#   examples/distributed/parallel_shards.sh N summary SPEC.yaml... [options] > whole.json
#   examples/distributed/parallel_shards.sh N trace SPEC.yaml... [options] > whole.jsonl
#
# summary: the N shard summaries are merged (`looptrace merge -`) into the whole run's,
# equal to an unsharded `looptrace summary`. trace: the N shards of the JSON Lines trace,
# concatenated in order, are the whole trace byte for byte.
#
# Environment: LOOPTRACE (the executable, default `looptrace`), LOOPTRACE_JOBS (shards
# run at once per machine, default: one per core), LOOPTRACE_SSHLOGIN (GNU parallel's
# --sshlogin list, e.g. "8/node1,8/node2,:"; looptrace must be installed there and the
# spec files at the same paths, or passed with parallel's --basefile).
set -euo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 N summary|trace SPEC.yaml... [looptrace options]" >&2
  exit 2
fi
count=$1 command=$2
shift 2
case "$command" in
  summary|trace) ;;
  *) echo "$0: the subcommand is summary or trace, not '$command'" >&2; exit 2 ;;
esac
looptrace=${LOOPTRACE:-looptrace}
jobs=(--jobs "${LOOPTRACE_JOBS:-100%}")
remote=()
[ -n "${LOOPTRACE_SSHLOGIN:-}" ] && remote=(--sshlogin "$LOOPTRACE_SSHLOGIN")

# --quote: arguments pass as they are (no shell); --keep-order: outputs in shard order;
# --halt soon,fail=1: one failing shard stops the run (no new shard starts).
run_shards() {
  parallel --will-cite --quote --keep-order --halt soon,fail=1 "${jobs[@]}" "${remote[@]}" \
    "$looptrace" "$command" "$@" --shard '{}/'"$count" ::: $(seq 0 $((count - 1)))
}
if [ "$command" = summary ]; then
  run_shards "$@" | "$looptrace" merge -
else
  run_shards "$@"
fi

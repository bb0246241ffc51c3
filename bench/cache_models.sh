#!/usr/bin/env bash
# CPU time and peak RSS of `looptrace cache` on whole transformer layers (issue 28): the
# README's GPT-3 175B layer (examples/gpt3_layer.mapping.yaml) and Llama 3 8B,
# DeepSeek-V3 and Mixtral 8x22B with their tiled TPU v4i mappings, decode (one new
# token against 2047 cached ones) and prefill (2048 new tokens), batch 1, as
# bench/movement_models.sh runs them; each once with a 1 MiB 16-way LRU cache over the
# trace at the compute, and once with a 64 KiB 8-way cache in front of MainMemory
# (--source transfers:MainMemory).
#
#   taskset -c 1 bash bench/cache_models.sh [LOOPTRACE]    # default build/src/looptrace
#   ONLY='decode' REPEAT=3 bash bench/cache_models.sh      # only matching labels; minimum of 3
#
# One line per run: label, status, user CPU seconds (the minimum of REPEAT runs), peak RSS
# in KB, line accesses. Status is ok, TIMEOUT (TIMEOUT seconds, default 120) or FAIL rc=N.
# ACCELFORGE_EXAMPLES is the AccelForge examples folder (default ../shared/accelforge-examples).
set -uo pipefail

if [ -n "${1:-}" ]; then
  looptrace=$(realpath -e -- "$1") || { echo "cache_models.sh: no looptrace binary at $1" >&2; exit 2; }
fi
cd "$(dirname "$0")/.." || exit 2
looptrace=${looptrace:-$(realpath -e build/src/looptrace 2>/dev/null)} ||
  { echo "cache_models.sh: no build/src/looptrace (give the binary as the first argument)" >&2; exit 2; }
examples=${ACCELFORGE_EXAMPLES:-../shared/accelforge-examples}
timeout_s=${TIMEOUT:-120}
repeat=${REPEAT:-1}
only=${ONLY:-}
transformers=$examples/workloads/transformers
arch=$examples/arches/tpu_v4i.yaml
[ -d "$transformers" ] || { echo "cache_models.sh: AccelForge examples not found at $examples" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "cache_models.sh: needs GNU time at /usr/bin/time" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

decode=(-D BATCH_SIZE=1 -D DECODE=True -D N_NEW_TOKENS=1 -D N_CACHED_TOKENS=2047)
prefill=(-D BATCH_SIZE=1 -D DECODE=False -D N_NEW_TOKENS=2048)
trace_cache=(--size 1MiB --ways 16)
memory_cache=(--size 64KiB --ways 8 --source transfers:MainMemory)

echo "# looptrace cache, whole layers: $looptrace, $(nproc --all) cores, $(date -u +%Y-%m-%dT%H:%MZ), minimum of $repeat"
printf '%-56s %-12s %9s %12s %14s\n' "# run" status "user s" "peak RSS KB" "line accesses"

# measure LABEL ARGS...: `looptrace cache ARGS...`, REPEAT times, the minimum CPU time.
measure() {
  local label=$1; shift
  if [ -n "$only" ] && ! grep -Eq -- "$only" <<< "$label"; then return; fi
  local best=- rss=- status=ok accesses=- user r
  for ((i = 0; i < repeat; ++i)); do
    /usr/bin/time -f '%U %M' -o "$tmp/time" timeout "$timeout_s" "$looptrace" cache "$@" > "$tmp/out" 2> "$tmp/err"
    r=$?
    if [ "$r" = 124 ]; then status=TIMEOUT; break; fi
    if [ "$r" != 0 ]; then status="FAIL rc=$r"; break; fi
    read -r user rss < <(tail -n 1 "$tmp/time")
    if [ "$best" = - ] || awk -v a="$user" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$user; fi
    accesses=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["caches"][0]["accesses"])' "$tmp/out")
  done
  printf '%-56s %-12s %9s %12s %14s\n' "$label" "$status" "$best" "$rss" "$accesses"
}

gpt3=$transformers/gpt/gpt3_175B.yaml
runs=("gpt3_175b|$gpt3|examples/gpt3_layer.mapping.yaml")
for model in "llama3_8b|$transformers/llama/llama3_8B.yaml" "deepseek_v3|$transformers/deepseek/deepseek_v3_671B.yaml" \
             "mixtral_8x22b|$transformers/mixtral/mixtral8x22B.yaml"; do
  IFS='|' read -r name workload <<< "$model"
  runs+=("$name|$workload $arch|examples/${name}_tpu_v4i.mapping.yaml")
done
for run in "${runs[@]}"; do
  IFS='|' read -r name files mapping <<< "$run"
  read -r -a files <<< "$files"
  for phase in decode prefill; do
    declare -n defines=$phase
    measure "$name $phase, 1 MiB 16-way over the trace" "${files[@]}" "$mapping" "${defines[@]}" "${trace_cache[@]}"
    measure "$name $phase, 64 KiB 8-way, transfers:MainMemory" "${files[@]}" "$mapping" "${defines[@]}" "${memory_cache[@]}"
  done
done

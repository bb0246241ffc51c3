#!/usr/bin/env bash
# Wall-clock figures of the looptrace command for issue 10: closed-form summaries of
# huge schedules, and trace --threads scaling. Each figure is the best of 3 runs.
#
#   bash bench/summary_scaling.sh [build/src/looptrace]
#
# Needs ../shared/accelforge-examples for the AccelForge workloads (skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."
looptrace=$(realpath "${1:-build/src/looptrace}")
examples=../shared/accelforge-examples/workloads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

best() {  # best of 3 wall-clock seconds of a command (output to /dev/null)
  local best=
  for _ in 1 2 3; do
    local start end
    start=$(date +%s.%N)
    "$@" > /dev/null
    end=$(date +%s.%N)
    best=$(echo "$start $end ${best:-1e9}" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
  done
  printf '%.3f' "$best"
}

huge=(bench/specs/gemm.workload.yaml bench/specs/huge_gemm.mapping.yaml -D M=10240 -D K=10240 -D N=10240)
echo "summary, huge_gemm M=K=N=10240 (1.07e12 timesteps), compact windows: $(best "$looptrace" summary "${huge[@]}" --windows compact) s"
echo "summary, huge_gemm, all 25,600 GlobalBuffer windows listed:           $(best "$looptrace" summary "${huge[@]}") s"

if [ -d "$examples" ]; then
  phi=$examples/compute_in_memory/msft_phi_1_5.yaml
  python3 bench/make_one_op_mapping.py --workload "$phi" -D BATCH_SIZE=1 --storage MainMemory -o "$tmp/phi.yaml"
  steps=$("$looptrace" summary "$phi" "$tmp/phi.yaml" -D BATCH_SIZE=1 --windows none |
          python3 -c 'import json, sys; d = json.load(sys.stdin); print("%.3g timesteps, %d Einsums" % (d["n_timesteps"], len(d["einsums"])))')
  echo "summary, Phi-1.5 one op per timestep ($steps): $(best "$looptrace" summary "$phi" "$tmp/phi.yaml" -D BATCH_SIZE=1) s"
else
  echo "summary, Phi-1.5: skipped ($examples not found)"
fi

gemm=(bench/specs/gemm.workload.yaml bench/specs/gemm_tiled.mapping.yaml --max-timesteps 40000)
for format in jsonl binary; do
  one=$(best "$looptrace" trace "${gemm[@]}" --format "$format")
  two=$(best "$looptrace" trace "${gemm[@]}" --format "$format" --threads 2)
  echo "trace --format $format, tiled GEMM prefix (4.35e7 accesses) to /dev/null: 1 thread $one s," \
       "--threads 2 $two s ($(echo "$one $two" | awk '{printf "%.2fx", $1 / $2}'))"
done

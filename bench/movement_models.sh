#!/usr/bin/env bash
# Wall time and peak RSS of `looptrace movement` on whole transformer layers (issue 15):
# GPT-3 175B with examples/gpt3_layer.mapping.yaml, Llama 3 8B, DeepSeek-V3 and Mixtral
# 8x22B with their tiled TPU v4i mappings (examples/*_tpu_v4i.mapping.yaml), the same
# five workloads with one operation per timestep (bench/make_one_op_mapping.py, a
# MainMemory !Storage of every tensor), and bench/specs/huge_gemm at M=K=N=10240.
# Decode is one new token against 2047 cached ones, prefill 2048 new tokens (and, for
# GPT-3, the README's prefill of 256), batch 1. The tiled layers run again with
# --partial-sums (ONLY=partial-sums for those alone).
#
#   bash bench/movement_models.sh [LOOPTRACE]      # default build/src/looptrace
#   TIMEOUT=5 bash bench/movement_models.sh /tmp/looptrace-stable
#   ONLY='decode' bash bench/movement_models.sh    # only the runs whose label matches
#
# One line per run: label, status, wall seconds, peak RSS in KB (/usr/bin/time -f '%e %M'
# around `timeout`), and for a failure the first line of stderr. Status is ok, TIMEOUT
# (killed after TIMEOUT seconds), OOM (out of memory under MEM_LIMIT_MB, or killed by
# SIGKILL), or FAIL rc=N. The script itself exits 0 when every run was attempted, 2 on
# bad setup (no binary, no AccelForge examples).
#
# Environment: TIMEOUT seconds per run (default 120); MEM_LIMIT_MB virtual-memory limit
# per run (`ulimit -v`, default 10240; 0 for none) so that a run out of memory fails
# instead of pushing the machine into the OOM killer; ONLY a grep -E pattern on labels;
# MOVEMENT_ARGS extra options for every `movement` run (e.g. '--threads 2');
# ACCELFORGE_EXAMPLES the AccelForge examples folder (default ../shared/accelforge-examples);
# PYTHON the interpreter for make_one_op_mapping.py.
set -uo pipefail

if [ -n "${1:-}" ]; then
  looptrace=$(realpath -e -- "$1") || { echo "movement_models.sh: no looptrace binary at $1" >&2; exit 2; }
fi
cd "$(dirname "$0")/.." || exit 2
looptrace=${looptrace:-$(realpath -e build/src/looptrace 2>/dev/null)} ||
  { echo "movement_models.sh: no build/src/looptrace (give the binary as the first argument)" >&2; exit 2; }
examples=${ACCELFORGE_EXAMPLES:-../shared/accelforge-examples}
timeout_s=${TIMEOUT:-120}
mem_limit_mb=${MEM_LIMIT_MB:-10240}
only=${ONLY:-}
read -r -a movement_args <<< "${MOVEMENT_ARGS:-}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

if ! version=$("$looptrace" --version 2>&1); then
  echo "movement_models.sh: $looptrace does not run: $version" >&2
  exit 2
fi
transformers=$examples/workloads/transformers
arch=$examples/arches/tpu_v4i.yaml
if [ ! -f "$arch" ] || [ ! -d "$transformers" ]; then
  echo "movement_models.sh: AccelForge examples not found at $examples (set ACCELFORGE_EXAMPLES)" >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "movement_models.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

decode=(-D BATCH_SIZE=1 -D DECODE=True -D N_NEW_TOKENS=1 -D N_CACHED_TOKENS=2047)
prefill=(-D BATCH_SIZE=1 -D DECODE=False -D N_NEW_TOKENS=2048)
prefill256=(-D BATCH_SIZE=1 -D DECODE=False -D N_NEW_TOKENS=256)

echo "# looptrace movement, whole layers: $looptrace ($version)"
echo "# timeout ${timeout_s} s, memory limit $([ "$mem_limit_mb" = 0 ] && echo none || echo "${mem_limit_mb} MB") per run, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-52s %-12s %9s %12s\n' "# run" status "wall s" "peak RSS KB"

# line LABEL STATUS WALL RSS [NOTE]
line() {
  printf '%-52s %-12s %9s %12s%s\n' "$1" "$2" "$3" "$4" "${5:+  $5}"
}

# measure LABEL ARGS...: `looptrace ARGS...` under the timeout and memory limit, one line.
measure() {
  local label=$1; shift
  if [ -n "$only" ] && ! grep -Eq -- "$only" <<< "$label"; then return; fi
  local out=$tmp/out err=$tmp/err times=$tmp/time rc
  : > "$times"
  (
    if [ "$mem_limit_mb" != 0 ]; then ulimit -v $((mem_limit_mb * 1024)) || exit 125; fi
    exec /usr/bin/time -f '%e %M' -o "$times" timeout -k 10 "$timeout_s" "$@"
  ) > "$out" 2> "$err"
  rc=$?
  # GNU time writes 'Command exited with non-zero status N' (or 'terminated by signal')
  # before the format line when the command fails: the figures are the last line.
  local wall=- rss=-
  if [ -s "$times" ]; then read -r wall rss < <(tail -n 1 "$times"); fi
  local status note=
  if [ "$rc" = 0 ] && [ -s "$out" ]; then
    status=ok
    # what the closed form handed to enumeration (JSON output only)
    note=$("$PYTHON" -c 'import json, sys
try: e = json.load(open(sys.argv[1])).get("enumerated", [])
except ValueError: e = []
print("; ".join("enumerated %s%s (%s)" % (x["level"], " " + x["tensor"] if "tensor" in x else "", x["reason"])
                for x in e))' "$out" 2>/dev/null)
  elif [ "$rc" = 0 ]; then
    status=FAIL; note="exit 0 but no output"
  elif [ "$rc" = 124 ] || { [ "$rc" = 137 ] && awk -v w="$wall" -v t="$timeout_s" 'BEGIN { exit !(w + 0 >= t) }'; }; then
    status=TIMEOUT   # 137 at the deadline: timeout's SIGKILL 10 s after a SIGTERM that did not stop it
  elif [ "$rc" = 137 ] || grep -Eqi 'out of memory|bad_alloc|cannot allocate' "$err"; then
    status=OOM; note=$(grep -m 1 -v '^Command ' "$err" | cut -c 1-160)
  else
    status="FAIL rc=$rc"; note=$(grep -m 1 -v '^Command ' "$err" | cut -c 1-160)
  fi
  line "$label" "$status" "$wall" "$rss" "$note"
}

# movement_run LABEL FILES... DEFINES...
movement_run() {
  local label=$1; shift
  measure "$label" "$looptrace" movement "$@" "${movement_args[@]}"
}

# one_op LABEL WORKLOAD DEFINES...: generate the one-op mapping, then time movement on it.
one_op() {
  local label=$1 workload=$2; shift 2
  if [ -n "$only" ] && ! grep -Eq -- "$only" <<< "$label"; then return; fi
  local mapping=$tmp/one_op_${label//[^A-Za-z0-9_]/_}.mapping.yaml
  if ! "$looptrace" describe "$workload" "$@" 2> "$tmp/gen_err" |
       "$PYTHON" bench/make_one_op_mapping.py - --storage MainMemory -o "$mapping" 2>> "$tmp/gen_err"; then
    line "$label" "FAIL" - - "generating the one-op mapping: $(head -n 1 "$tmp/gen_err" | cut -c 1-140)"
    return
  fi
  movement_run "$label" "$workload" "$mapping" "$@"
}

gpt3=$transformers/gpt/gpt3_175B.yaml
llama=$transformers/llama/llama3_8B.yaml
deepseek=$transformers/deepseek/deepseek_v3_671B.yaml
mixtral=$transformers/mixtral/mixtral8x22B.yaml

# Tiled mappings.
movement_run "gpt3_175b decode, gpt3_layer"          "$gpt3" examples/gpt3_layer.mapping.yaml "${decode[@]}"
movement_run "gpt3_175b prefill 256, gpt3_layer"     "$gpt3" examples/gpt3_layer.mapping.yaml "${prefill256[@]}"
movement_run "gpt3_175b prefill 2048, gpt3_layer"    "$gpt3" examples/gpt3_layer.mapping.yaml "${prefill[@]}"
for model in "llama3_8b $llama" "deepseek_v3 $deepseek" "mixtral_8x22b $mixtral"; do
  read -r name workload <<< "$model"
  mapping=examples/${name}_tpu_v4i.mapping.yaml
  movement_run "$name decode, tpu_v4i"  "$workload" "$arch" "$mapping" "${decode[@]}"
  movement_run "$name prefill, tpu_v4i" "$workload" "$arch" "$mapping" "${prefill[@]}"
done

# The tiled mappings again with --partial-sums (issue 27): the read-backs of outputs a
# reduction loop drains and writes again, fused intermediates included.
movement_run "gpt3_175b decode, gpt3_layer, --partial-sums"       "$gpt3" examples/gpt3_layer.mapping.yaml \
  "${decode[@]}" --partial-sums
movement_run "gpt3_175b prefill 2048, gpt3_layer, --partial-sums" "$gpt3" examples/gpt3_layer.mapping.yaml \
  "${prefill[@]}" --partial-sums
for model in "llama3_8b $llama" "deepseek_v3 $deepseek" "mixtral_8x22b $mixtral"; do
  read -r name workload <<< "$model"
  mapping=examples/${name}_tpu_v4i.mapping.yaml
  movement_run "$name decode, tpu_v4i, --partial-sums"  "$workload" "$arch" "$mapping" "${decode[@]}" --partial-sums
  movement_run "$name prefill, tpu_v4i, --partial-sums" "$workload" "$arch" "$mapping" "${prefill[@]}" --partial-sums
done

# AccelForge's own example mappings (the cases of its examples that name a mapping),
# with and without --partial-sums.
while IFS=$'\t' read -r id files defines; do
  read -r -a case_files <<< "$files"
  read -r -a case_defines <<< "$defines"
  movement_run "accelforge $id" "${case_files[@]}" "${case_defines[@]}"
  movement_run "accelforge $id, --partial-sums" "${case_files[@]}" "${case_defines[@]}" --partial-sums
done < <("$PYTHON" -c 'import json, os, sys
root = sys.argv[1]
for c in json.load(open(os.path.join(root, "cases.json"))):
    if any("mapping" in f for f in c["files"]):
        files = " ".join(os.path.join(root, f) for f in c["files"])
        defines = " ".join("-D %s=%s" % kv for kv in c.get("defines", {}).items())
        print(c["id"], files, defines, sep="\t")' "$examples")

# One operation per timestep, every tensor in MainMemory.
for model in "gpt3_175b $gpt3" "llama3_8b $llama" "deepseek_v3 $deepseek" "mixtral_8x22b $mixtral"; do
  read -r name workload <<< "$model"
  one_op "$name decode, one-op"  "$workload" "${decode[@]}"
  one_op "$name prefill, one-op" "$workload" "${prefill[@]}"
done

# A GEMM of 2^40 multiply-accumulates, one per timestep.
movement_run "huge_gemm M=K=N=10240" bench/specs/gemm.workload.yaml bench/specs/huge_gemm.mapping.yaml \
  -D M=10240 -D K=10240 -D N=10240

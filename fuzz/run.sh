#!/usr/bin/env bash
# Runs one libFuzzer target until it has used CPU_SECONDS of CPU time (not wall time:
# on a busy machine the two differ a lot), then stops it with SIGINT so it prints its
# final statistics. The corpus lives in CORPUS_DIR (default /tmp/looptrace-fuzz/NAME),
# seeded from ../shared/conformance/specs and ../shared/accelforge-examples; crashes are
# written to CORPUS_DIR/../artifacts.
#
# usage: fuzz/run.sh BUILD_DIR spec|jinja|expression|concise_einsum [CPU_SECONDS] [CORPUS_DIR]
# TIMEOUT=S: seconds one input may take (default 10; a loaded machine needs more).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"; name="$2"; cpu="${3:-600}"
corpus="${4:-/tmp/looptrace-fuzz/$name}"
exe="$build/fuzz/fuzz_$name"
[ -x "$exe" ] || { echo "no $exe: configure with CC=clang CXX=clang++ meson setup $build -Dfuzz=true" >&2; exit 2; }
seeds="$(dirname "$corpus")/seeds"
if [ ! -d "$seeds" ]; then
  python3 "$root/fuzz/make_corpus.py" "$root/../shared/conformance/specs" "$seeds"
fi
kind="$name"; [ "$name" = concise_einsum ] && kind=concise
dict="$root/fuzz/expression.dict"; [ "$name" = spec ] || [ "$name" = jinja ] && dict="$root/fuzz/spec.dict"
mkdir -p "$corpus" "$(dirname "$corpus")/artifacts"
"$exe" -print_final_stats=1 -dict="$dict" -timeout="${TIMEOUT:-10}" -rss_limit_mb=2048 -max_len=8192 \
  -artifact_prefix="$(dirname "$corpus")/artifacts/" "$corpus" "$seeds/$kind" &
pid=$!
trap 'kill -INT $pid 2>/dev/null || true' INT TERM
hz=$(getconf CLK_TCK)
while kill -0 "$pid" 2>/dev/null; do
  sleep 5
  read -r -a stat < "/proc/$pid/stat" 2>/dev/null || break
  used=$(( (stat[13] + stat[14]) / hz ))   # utime + stime, in seconds
  if [ "$used" -ge "$cpu" ]; then
    echo "run.sh: $used s of CPU used; stopping $name" >&2
    kill -INT "$pid"
    break
  fi
done
wait "$pid"

#!/usr/bin/env bash
# How heavy looptrace's public headers are for a user's build (issue 17): lines after
# preprocessing every public stage header together, and stream.hpp alone, counted
# without line markers (-P: the code the compiler reads) and with them (plain -E);
# then the time and memory to compile a consumer of stream.hpp (-fsyntax-only) and the
# README's "Writing a stage" example at -O2.
#
#   bash bench/header_weight.sh [build]
#
# Needs a configured build directory (for generated headers, if any) and g++.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cxx=(g++ -std=c++20 -Iinclude -I"$build")

for h in include/looptrace/stages/*.hpp; do echo "#include <looptrace/stages/$(basename "$h")>"; done > "$tmp/stages.cpp"
echo '#include <looptrace/stream.hpp>' > "$tmp/stream.cpp"
lines() { "${cxx[@]}" "$@" -E | wc -l; }
printf '%-34s %9s %12s\n' "preprocessed" "lines (-P)" "lines (-E)"
printf '%-34s %9d %12d\n' "every public stage header" "$(lines -P "$tmp/stages.cpp")" "$(lines "$tmp/stages.cpp")"
printf '%-34s %9d %12d\n' "looptrace/stream.hpp" "$(lines -P "$tmp/stream.cpp")" "$(lines "$tmp/stream.cpp")"

# The README's stage example, as tests/readme/run_snippets.py extracts it.
awk '/^### Writing a stage/{f=1} f&&/^```cpp/{g=1;next} g&&/^```/{exit} g' README.md > "$tmp/user_stage.cpp"
printf 'int main() {}\n' >> "$tmp/stream.cpp"
measure() { /usr/bin/time -f '%e s, %M KiB' "${cxx[@]}" "$@" 2>&1 >/dev/null | tail -n 1; }
echo "compile stream.hpp, -fsyntax-only:            $(measure -fsyntax-only "$tmp/stream.cpp")"
echo "compile README's user stage ($(wc -l < "$tmp/user_stage.cpp") lines), -O2 -c: $(measure -O2 -c "$tmp/user_stage.cpp" -o "$tmp/user_stage.o")"

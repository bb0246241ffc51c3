#!/usr/bin/env python3
"""Time to the first line of `looptrace transfers` on whole transformer layers (issue 27:
< 50 ms each), every level that has children, with and without --partial-sums: GPT-3
175B with examples/gpt3_layer.mapping.yaml and Llama 3 8B, DeepSeek-V3 and Mixtral
8x22B with their tpu_v4i mappings, decode (1 new token, 2047 cached) and prefill (2048
tokens), batch 1. The clock runs from the start of the process to its first line of
output (a level whose trace is empty says so on stderr and has no line).

    python3 bench/transfers_first_line.py [LOOPTRACE] [--examples DIR]

One line per run and the worst time last. Benchmarks report figures; no test asserts
on time."""
import argparse
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("looptrace", nargs="?", default=os.path.join(ROOT, "build/src/looptrace"))
    ap.add_argument("--examples", default=os.path.join(ROOT, "../shared/accelforge-examples"))
    a = ap.parse_args()
    t = os.path.join(a.examples, "workloads/transformers")
    arch = os.path.join(a.examples, "arches/tpu_v4i.yaml")
    decode = ["-D", "BATCH_SIZE=1", "-D", "DECODE=True", "-D", "N_NEW_TOKENS=1", "-D", "N_CACHED_TOKENS=2047"]
    prefill = ["-D", "BATCH_SIZE=1", "-D", "DECODE=False", "-D", "N_NEW_TOKENS=2048"]
    gpt3 = [os.path.join(t, "gpt/gpt3_175B.yaml"), os.path.join(ROOT, "examples/gpt3_layer.mapping.yaml")]
    runs = [("gpt3_175b decode", gpt3 + decode), ("gpt3_175b prefill", gpt3 + prefill)]
    for name, workload in (("llama3_8b", "llama/llama3_8B.yaml"), ("deepseek_v3", "deepseek/deepseek_v3_671B.yaml"),
                           ("mixtral_8x22b", "mixtral/mixtral8x22B.yaml")):
        files = [os.path.join(t, workload), arch, os.path.join(ROOT, f"examples/{name}_tpu_v4i.mapping.yaml")]
        runs += [(f"{name} decode", files + decode), (f"{name} prefill", files + prefill)]
    worst = 0.0
    for label, args in runs:
        report = json.loads(subprocess.run([a.looptrace, "movement", *args], capture_output=True, text=True,
                                           check=True).stdout)
        for level in (l["level"] for l in report["levels"]):
            for extra in ([], ["--partial-sums"]):
                start = time.perf_counter()
                p = subprocess.Popen([a.looptrace, "transfers", *args, "--level", level, *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                line = p.stdout.readline()
                took = time.perf_counter() - start
                p.kill()
                p.wait()
                if line:
                    worst = max(worst, took)
                print(f"{label:20s} {level:14s} {' '.join(extra):15s} "
                      f"{took * 1e3:6.1f} ms{'' if line else '  (empty trace)'}")
    print(f"worst first line: {worst * 1e3:.1f} ms")


if __name__ == "__main__":
    main()

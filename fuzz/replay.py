#!/usr/bin/env python3
"""Replays every seed and every kept regression input through each fuzz target of a
build configured with -Dfuzz=true (libFuzzer under clang, fuzz/replay_main.cpp under
g++; ASan and UBSan either way). A target that is missing (it did not build), exits
non-zero or prints a sanitizer report is one failure.

usage: replay.py --source DIR --build DIR

Prints one line per target and 'N passed, M failed' last; exits 1 on any failure."""
import argparse
import os
import subprocess
import sys
import tempfile

TARGETS = {"spec": "spec", "jinja": "jinja", "expression": "expression", "concise_einsum": "concise"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=".")
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    shared = os.path.join(a.source, "..", "shared")
    seeds = tempfile.mkdtemp(prefix="looptrace-seeds-")
    subprocess.run([sys.executable, os.path.join(a.source, "fuzz", "make_corpus.py"),
                    os.path.join(shared, "conformance", "specs"), seeds,
                    os.path.join(shared, "accelforge-examples")], check=True, stdout=subprocess.DEVNULL)
    passed = failed = 0
    for name, kind in TARGETS.items():
        exe = os.path.abspath(os.path.join(a.build, "fuzz", "fuzz_" + name))
        dirs = [d for d in (os.path.join(seeds, kind), os.path.join(a.source, "fuzz", "regressions", "fuzz_" + name))
                if os.path.isdir(d) and os.listdir(d)]
        if not os.access(exe, os.X_OK):
            print("FAIL fuzz_%s: not built (%s)" % (name, exe))
            failed += 1
            continue
        # fuzz_spec writes its include folder in the working directory: a scratch one.
        p = subprocess.run([exe, "-runs=0", "-rss_limit_mb=4096", "-timeout=60", *map(os.path.abspath, dirs)],
                           capture_output=True, text=True, errors="replace", cwd=tempfile.mkdtemp(), timeout=1800)
        n = sum(len(os.listdir(d)) for d in dirs)
        report = "AddressSanitizer" in p.stderr or "runtime error:" in p.stderr or "deadly signal" in p.stderr
        if p.returncode != 0 or report:
            print("FAIL fuzz_%s on %d inputs: exit %d\n%s" % (name, n, p.returncode, p.stderr[-3000:]))
            failed += 1
        else:
            print("ok   fuzz_%s: %d inputs replayed clean" % (name, n))
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Drives `looptrace cache`: the conv1d example at a 2-line cache (the README's
hand-worked figures), per tensor and per Einsum, --source transfers:MainMemory, a
hierarchy, the curve, --format text, --misses as DRAMsim3 / Ramulator 2 lines, and bad
input (exit 2 with a clear message).

usage: test_cache.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json
import os
import re

import harness
from harness import ROOT, check, run

CONV1D = [os.path.join(ROOT, "tests", "specs", f) for f in ("conv1d.workload.yaml", "conv1d.mapping.yaml")]


def cache(*args):
    r = run("cache", *CONV1D, *args)
    check(r.returncode == 0, "cache %s exits 0 (rc %d, %s)" % (" ".join(args), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout) if r.returncode == 0 else None


def counts(c, *fields):
    return tuple(c[f] for f in fields)


F = ("accesses", "hits", "misses", "cold", "capacity", "conflict", "writebacks")


def test_worked_example():
    # I, W, O at lines 0x0, 0x40, 0x80: direct mapped, 2 sets, I and O share set 0.
    out = cache("--size", "128", "--ways", "1", "--align", "64")
    c = out["caches"][0]
    check(counts(c, *F) == (72, 23, 49, 3, 69, -23, 24), "direct-mapped conv1d: %s" % (counts(c, *F),))
    check((c["sets"], c["ways"], c["policy"]) == (2, 1, "lru"), "shape %s" % c)
    t = {x["tensor"]: counts(x, *F) for x in c["tensors"]}
    check(t == {"I": (24, 0, 24, 1, 23, 0, 0), "W": (24, 23, 1, 1, 23, -23, 0), "O": (24, 0, 24, 1, 23, 0, 24)},
          "per tensor %s" % t)
    check([e["einsum"] for e in c["einsums"]] == ["Conv"] and "writebacks" not in c["einsums"][0], "einsums %s" % c["einsums"])
    full = cache("--size", "128", "--ways", "full")["caches"][0]
    check(counts(full, *F) == (72, 0, 72, 3, 69, 0, 24) and full["ways"] == "full", "full LRU %s" % (counts(full, *F),))


def test_transfers_source_and_hierarchy():
    c = cache("--size", "128", "--ways", "full", "--source", "transfers:MainMemory")["caches"][0]
    check(counts(c, "accesses", "misses", "cold", "writebacks") == (24, 24, 3, 8), "transfers source %s" % c)
    check(c["einsums"] == [], "no einsums for transfers")
    h = cache("--cache", "L1=64/1", "--cache", "L2=192/full", "--align", "64")
    l1, l2 = h["caches"]
    # L1 (one line) misses all 72; L2 sees each miss's write-back and fetch.
    check(l1["misses"] == 72 and l2["accesses"] == 72 + l1["writebacks"] - 1, "hierarchy %s %s" % (l1, l2))
    check(l2["cold"] == 3 and l2["misses"] == 3, "L2 holds the three lines: %s" % l2)


def test_curve():
    out = cache("--size", "128", "--ways", "full", "--curve", "--align", "64")
    cv = out["curve"]
    # Three lines in turn: distance 2 every time after the first three.
    check(cv["lines"] == [1, 2, 4] and cv["misses"] == [72, 72, 3], "curve %s" % cv)
    check(cv["histogram"] == [[2, 69]], "histogram %s" % cv["histogram"])
    check({t["tensor"]: t["misses"] for t in cv["tensors"]} == {"I": [24, 24, 1], "W": [24, 24, 1], "O": [24, 24, 1]},
          "per tensor curve %s" % cv["tensors"])
    check(out["caches"][0]["misses"] == cv["misses"][1], "the curve at 2 lines is the 2-line LRU cache")


def test_text():
    r = run("cache", *CONV1D, "--size", "128", "--ways", "1", "--format", "text", "--curve")
    check(r.returncode == 0 and "hit rate" in r.stdout and "tensor W" in r.stdout and "miss-ratio curve" in r.stdout,
          "text table: %s" % r.stdout[:300])


def test_misses():
    r = run("cache", *CONV1D, "--size", "128", "--ways", "full", "--misses", "--format", "dramsim3",
            "--source", "transfers:MainMemory", "--cycles-per-timestep", "10")
    lines = r.stdout.splitlines()
    ok = all(re.fullmatch(r"0x[0-9a-f]+ (READ|WRITE) \d+", x) for x in lines)
    check(r.returncode == 0 and ok and len(lines) == 31, "dramsim3 misses: %d lines %s" % (len(lines), lines[:4]))
    check(lines[:3] == ["0x0 READ 0", "0x1000 READ 0", "0x2000 READ 30"], "first misses %s" % lines[:3])
    r = run("cache", *CONV1D, "--size", "128", "--ways", "full", "--misses", "--format", "ramulator2")
    check(r.returncode == 0 and r.stdout.splitlines()[0] == "LD 0x0", "ramulator2 %s" % r.stdout[:40])


def test_selection():
    # A window starts the cache empty: 3 cold misses again.
    c = cache("--size", "128", "--ways", "full", "--from", "6", "--to", "12")["caches"][0]
    check(counts(c, "accesses", "cold") == (18, 3), "window %s" % c)
    c = cache("--size", "128", "--ways", "full", "--tensors", "W")["caches"][0]
    check(counts(c, "accesses", "misses", "cold") == (24, 1, 1), "only W (one line): %s" % c)


def test_layout_moves_the_conflict():
    # W blocked by 128 (its 3 bytes padded to one 128-byte block): W at 0x40 takes two
    # lines, so O goes to 0xc0 (line 3, set 1). Each timestep reads I (line 0), reads W
    # (line 1), writes O: now W and O fight over set 1 and I has set 0 alone. The totals
    # stay (3 lines in 2 one-way sets), but the misses move from I to W: I 1 miss, 23 hits.
    lay = harness.write("w_blocked.yaml", "layout:\n  tensors:\n    W: {block: {R: 128}}\n")
    c = cache("--size", "128", "--ways", "1", "--align", "64", "--layout", lay)["caches"][0]
    check(counts(c, *F) == (72, 23, 49, 3, 69, -23, 24), "blocked W: totals %s" % (counts(c, *F),))
    t = {x["tensor"]: counts(x, *F) for x in c["tensors"]}
    check(t == {"I": (24, 23, 1, 1, 23, -23, 0), "W": (24, 0, 24, 1, 23, 0, 0), "O": (24, 0, 24, 1, 23, 0, 24)},
          "blocked W: per tensor %s" % t)
    # The same file for MainMemory alone leaves the compute's cache row-major: the
    # trace sees a layout's entries for every level only.
    per_level = harness.write("w_main.yaml", "layout:\n  levels:\n    MainMemory: {tensors: {W: {block: {R: 128}}}}\n")
    c = cache("--size", "128", "--ways", "1", "--align", "64", "--layout", per_level)["caches"][0]
    t = {x["tensor"]: x["misses"] for x in c["tensors"]}
    check(t == {"I": 24, "W": 1, "O": 24}, "a MainMemory-only layout leaves the trace's cache as before: %s" % t)
    # A file that says what the default says: every figure as without it, byte for byte.
    same = harness.write("row_major.yaml", "layout:\n  tensors:\n    I: {order: [P]}\n    W: {}\n")
    for args in (["--size", "128", "--ways", "1", "--align", "64", "--curve"],
                 ["--size", "192", "--ways", "full", "--source", "transfers:MainMemory", "--curve"]):
        a, b = run("cache", *CONV1D, *args), run("cache", *CONV1D, *args, "--layout", same)
        check(a.returncode == 0 and a.stdout == b.stdout, "a row-major layout file changes nothing: %s" % args)


def test_layout_transfers_source():
    # In front of MainMemory the cache sees exactly the addresses `transfers --layout` writes.
    lay = harness.write("o_base.yaml", "layout:\n  levels:\n    MainMemory: {tensors: {O: {base: 0x40000}}}\n")
    r = run("transfers", *CONV1D, "--level", "MainMemory", "--layout", lay, "--format", "dramsim3")
    want = []
    for x in r.stdout.splitlines():  # a full LRU cache of 3 lines: the first request of each line misses
        a = x.split()[0]
        if a not in want:
            want.append(a)
    m = run("cache", *CONV1D, "--size", "192", "--ways", "full", "--source", "transfers:MainMemory",
            "--layout", lay, "--misses", "--format", "dramsim3")
    got = [x.split()[0] for x in m.stdout.splitlines() if x.split()[1] == "READ"]
    check(r.returncode == 0 and m.returncode == 0 and got == want and "0x40000" in got,
          "transfers:MainMemory misses %s, want %s (%s)" % (got, want, m.stderr.strip()))


def test_layout_errors():
    # A bad layout file: the error `transfers --layout` gives, exit 2.
    for name, text, words in [
        ("bad_tensor.yaml", "layout:\n  tensors:\n    Q: {order: [P]}\n", "Q"),
        ("bad_rank.yaml", "layout:\n  tensors:\n    W: {order: [P]}\n", "W"),
        ("bad_key.yaml", "layout:\n  tensors:\n    W: {colour: red}\n", "colour"),
    ]:
        lay = harness.write(name, text)
        c = run("cache", *CONV1D, "--layout", lay)
        t = run("transfers", *CONV1D, "--level", "MainMemory", "--layout", lay)
        check(c.returncode == 2 and words in c.stderr and name in c.stderr and c.stderr == t.stderr,
              "cache --layout %s: exit 2 as transfers (rc %d, %s | %s)" % (name, c.returncode, c.stderr.strip(),
                                                                            t.stderr.strip()))
    r = run("cache", *CONV1D, "--layout", "/nonexistent/layout.yaml")
    check(r.returncode == 2 and "layout.yaml" in r.stderr, "missing layout file: %d %s" % (r.returncode, r.stderr))


def test_errors():
    for args, words in [
        (["--size", "1000"], "not a whole number of 64 bytes lines"),
        (["--size", "1536", "--ways", "16"], "multiple of line x ways"),
        (["--size", "128", "--ways", "4"], "more than its 2 lines"),
        (["--line-bytes", "48", "--size", "4800", "--ways", "1"], "power of two"),
        (["--size", "768", "--ways", "3", "--policy", "plru"], "plru"),
        (["--source", "transfers:L9"], "no Storage node has level 'L9'"),
        (["--source", "dram"], "--source takes"),
        (["--size", "1.5MiB"], "takes bytes"),
        (["--cache", "L1"], "NAME=SIZE/WAYS"),
        (["--misses"], "--format dramsim3"),
        (["--sample-timesteps", "3"], "whole stretches"),
    ]:
        r = run("cache", *CONV1D, *args)
        check(r.returncode == 2 and words in r.stderr, "cache %s: exit 2 with '%s' (rc %d, %s)" %
              (" ".join(args), words, r.returncode, r.stderr.strip()))


COPY = """workload:
  iteration_space_shape:
    m: 0 <= m < 64
    n: 0 <= n < 16
  bits_per_value: {All: 32}
  einsums:
  - name: Copy
    tensor_accesses:
    - {name: A, projection: [m, n]}
    - {name: B, projection: [m, n], output: True}
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [A, B]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: Copy, component: MAC}
"""


def test_warp():
    # B[m, n] = A[m, n], one 64-byte row of each a timestep: a 4-line LRU cache holds
    # the last two rows of each, so every access misses for the first time and every B
    # line is written back (60 evicted, 4 at the end). From the third row on each row's
    # block ends in its start state shifted by a row: the rest is counted, not simulated.
    spec = harness.write("copy_rows.yaml", COPY)
    for ways in ("full", "2"):
        got = {}
        for warp in ([], ["--no-warp"]):
            r = run("cache", spec, "--size", "256", "--ways", ways, "--align", "4096", *warp)
            check(r.returncode == 0, "cache copy --ways %s %s exits 0 (%s)" % (ways, warp, r.stderr.strip()))
            got[bool(warp)] = json.loads(r.stdout) if r.returncode == 0 else None
        if None in got.values():
            continue
        c = got[False]["caches"][0]
        check(counts(c, *F) == (128, 0, 128, 128, 0, 0, 64), "copy rows --ways %s: %s" % (ways, counts(c, *F)))
        w = got[False]["warp"]
        check(w is not None and w["warps"] == 1 and w["skipped"] > 0 and w["simulated"] + w["skipped"] == 128,
              "copy rows --ways %s warps once: %s" % (ways, w))
        check(got[True]["warp"] is None, "--no-warp simulates every access")
        plain = dict(got[True], warp=None)
        check(dict(got[False], warp=None) == plain, "copy rows --ways %s: the warp's report is the plain one" % ways)


def test_warp_selection():
    # The copy with a bias C[n] that --tensors leaves out: C is not laid out (it sits at
    # address 0, over A), so it owns none of A's lines, and the loop over m warps as it
    # does without C, to the plain report. (C's lines were once taken for A's, which do
    # not stay in place as C's would: no warp, 60 s instead of 7 on a Llama layer.)
    spec = harness.write("copy_rows_bias.yaml", COPY.replace(
        "    - {name: B, projection: [m, n], output: True}",
        "    - {name: B, projection: [m, n], output: True}\n    - {name: C, projection: [n]}"))
    for ways in ("full", "2"):
        got = {}
        for warp in ([], ["--no-warp"]):
            r = run("cache", spec, "--size", "256", "--ways", ways, "--align", "4096", "--tensors", "A,B", *warp)
            check(r.returncode == 0, "cache copy+bias --tensors A,B --ways %s %s exits 0 (%s)" %
                  (ways, warp, r.stderr.strip()))
            got[bool(warp)] = json.loads(r.stdout) if r.returncode == 0 else None
        if None in got.values():
            continue
        c = got[False]["caches"][0]
        check(counts(c, *F) == (128, 0, 128, 128, 0, 0, 64), "copy+bias --tensors A,B --ways %s: %s" %
              (ways, counts(c, *F)))
        w = got[False]["warp"]
        check(w is not None and w["warps"] == 1 and w["simulated"] + w["skipped"] == 128 and w["skipped"] > 0,
              "copy+bias --tensors A,B --ways %s warps once: %s" % (ways, w))
        check(dict(got[False], warp=None) == dict(got[True], warp=None),
              "copy+bias --tensors A,B --ways %s: the warp's report is the plain one" % ways)


def test_transfers_warp():
    # The copy with a GlobalBuffer holding a row of A and B under the loop: MainMemory
    # sees, at each timestep t, the fill of A's row t and the drain of B's row t - 1 (B's
    # last at t = 64), one line each. All 128 miss for the first time in a 4-line cache,
    # and all 64 B lines are written back. Blocks of one timestep repeat the one before,
    # shifted by a row: each is checked as it streams by and counted, not simulated.
    spec = harness.write("copy_rows_buffered.yaml", COPY.replace(
        "  - !Compute", "  - !Storage {component: GlobalBuffer, tensors: [A, B]}\n  - !Compute"))
    for ways in ("full", "2"):
        got = {}
        for warp in ([], ["--no-warp"]):
            r = run("cache", spec, "--size", "256", "--ways", ways, "--align", "4096",
                    "--source", "transfers:MainMemory", *warp)
            check(r.returncode == 0, "cache transfers --ways %s %s exits 0 (%s)" % (ways, warp, r.stderr.strip()))
            got[bool(warp)] = json.loads(r.stdout) if r.returncode == 0 else None
        if None in got.values():
            continue
        c = got[False]["caches"][0]
        check(counts(c, "accesses", "hits", "misses", "cold", "writebacks") == (128, 0, 128, 128, 64),
              "transfers of the buffered copy --ways %s: %s" % (ways, c))
        w = got[False]["warp"]
        check(w is not None and w["warps"] == 1 and w["skipped"] > 100 and w["simulated"] + w["skipped"] == 128,
              "transfers of the buffered copy --ways %s warp once: %s" % (ways, w))
        check(dict(got[False], warp=None) == dict(got[True], warp=None),
              "transfers --ways %s: the warp's report is the plain one" % ways)


def main():
    return harness.main((test_warp, test_warp_selection, test_transfers_warp, test_worked_example, test_transfers_source_and_hierarchy,
                         test_curve, test_text, test_misses, test_selection, test_layout_moves_the_conflict, test_layout_transfers_source,
                         test_layout_errors, test_errors))


if __name__ == "__main__":
    raise SystemExit(main())

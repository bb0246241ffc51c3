#!/usr/bin/env python3
"""Drives `looptrace movement` and `looptrace transfers`: SEMANTICS' worked example
(the conv1d corpus case) as JSON and as text, cut windows and prefixes worked out by
hand, tensor filters that drop a level, errors (exit 2 with a clear message), the
dramsim3 and ramulator2 lines parsed the way the simulators' trace readers parse them,
shards that concatenate byte for byte, `| head`; and examples/transfer_model (a DRAM
model with banks and open rows fed by the transfer stage) against row hits recomputed
here from `transfers --format jsonl`.

usage: test_movement.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import fractions
import json
import math
import os
import re
import subprocess

import harness
from harness import EXE, ROOT, TMP, check, run, write  # noqa: F401

CONV1D = [os.path.join(ROOT, "tests", "specs", f) for f in ("conv1d.workload.yaml", "conv1d.mapping.yaml")]
MATMULS = [os.path.join(ROOT, "tests", "specs", f) for f in ("matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml")]
FUSED = [os.path.join(ROOT, "examples", "specs", f) for f in ("matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml")]


def movement(*args):
    r = run("movement", *args)
    check(r.returncode == 0, "movement %s exits 0 (rc %d, %s)" % (" ".join(args[2:]), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout) if r.returncode == 0 else {"levels": []}


def table(report):
    """{level: {tensor: (home, windows, max_tile, fills, drains)}} and {level: (peak, t)}."""
    counts = {l["level"]: {t["tensor"]: (t["home"], t["windows"], t["max_tile"], t["fills"], t["drains"])
                           for t in l["tensors"]} for l in report["levels"]}
    peaks = {l["level"]: (l["peak_footprint"]["elements"], l["peak_footprint"]["timestep"]) for l in report["levels"]}
    return counts, peaks


def test_worked_example():
    # SEMANTICS "Data movement": GlobalBuffer has 8 windows [3p, 3p+3); I's tile is
    # {p, p+1, p+2}; MainMemory is home to all three, one window [0, 24).
    report = movement(*CONV1D)
    check((report.get("n_timesteps"), report.get("from"), report.get("truncated")) == (24, 0, False),
          "the whole run: %r" % {k: report.get(k) for k in ("n_timesteps", "from", "truncated")})
    check([l["level"] for l in report["levels"]] == ["MainMemory", "GlobalBuffer"], "levels in tree order")
    counts, peaks = table(report)
    check(counts.get("GlobalBuffer") == {"I": (False, 8, 3, 24, 0), "W": (False, 8, 3, 24, 0),
                                         "O": (False, 8, 1, 0, 8)},
          "GlobalBuffer (home, windows, max_tile, fills, drains): %r" % counts.get("GlobalBuffer"))
    check(counts.get("MainMemory") == {"I": (True, 1, 10, 10, 0), "W": (True, 1, 3, 3, 0), "O": (True, 1, 8, 0, 8)},
          "MainMemory: %r" % counts.get("MainMemory"))
    check(peaks == {"MainMemory": (21, 0), "GlobalBuffer": (7, 0)}, "peak footprints 21 and 7 at t=0: %r" % peaks)
    # bits_per_value {All: 8}: one byte per element, so bytes equal elements.
    tensors = [t for l in report["levels"] for t in l["tensors"]]
    if any("fill_bytes" in t for t in tensors):
        check(all(t.get("bytes_per_value") == 1 and t.get("fill_bytes") == t["fills"] and
                  t.get("drain_bytes") == t["drains"] and t.get("max_tile_bytes") == t["max_tile"] for t in tensors),
              "8 bits per value: bytes equal elements")
        check([l.get("peak_footprint_bytes") for l in report["levels"]] ==
              [{"bytes": 21, "timestep": 0}, {"bytes": 7, "timestep": 0}], "peaks in bytes")
    else:
        print("NOTE: no byte figures for bits_per_value {All: 8}: byte checks skipped")


def test_cut_windows():
    # --from 4 --to 10: GlobalBuffer's windows [3, 6) and [9, 12) are cut to [4, 6) and
    # [9, 10), each a window of its own and filled again: tiles (p=1, r in 1..2) I {2, 3},
    # W {1, 2}, O {1}; (p=2) I {2, 3, 4}, W {0, 1, 2}, O {2}; (p=3, r=0) I {3}, W {0}, O {3}.
    report = movement(*CONV1D, "--from", "4", "--to", "10")
    check((report.get("n_timesteps"), report.get("from"), report.get("truncated")) == (10, 4, True),
          "window [4, 10): %r" % {k: report.get(k) for k in ("n_timesteps", "from", "truncated")})
    counts, peaks = table(report)
    check(counts.get("GlobalBuffer") == {"I": (False, 3, 3, 6, 0), "W": (False, 3, 3, 6, 0), "O": (False, 3, 1, 0, 3)},
          "GlobalBuffer over [4, 10): %r" % counts.get("GlobalBuffer"))
    check(counts.get("MainMemory") == {"I": (True, 1, 3, 3, 0), "W": (True, 1, 3, 3, 0), "O": (True, 1, 3, 0, 3)},
          "MainMemory over [4, 10): %r" % counts.get("MainMemory"))
    check(peaks == {"MainMemory": (9, 4), "GlobalBuffer": (7, 6)}, "peaks over [4, 10): %r" % peaks)

    # A prefix of 5: windows [0, 3) and [3, 5); I {0, 1, 2} then {1, 2}.
    counts, peaks = table(movement(*CONV1D, "--max-timesteps", "5"))
    check(counts.get("GlobalBuffer") == {"I": (False, 2, 3, 5, 0), "W": (False, 2, 3, 5, 0), "O": (False, 2, 1, 0, 2)},
          "GlobalBuffer, prefix 5: %r" % counts.get("GlobalBuffer"))
    check(counts.get("MainMemory") == {"I": (True, 1, 3, 3, 0), "W": (True, 1, 3, 3, 0), "O": (True, 1, 2, 0, 2)},
          "MainMemory, prefix 5: %r" % counts.get("MainMemory"))
    check(peaks == {"MainMemory": (8, 0), "GlobalBuffer": (7, 0)}, "peaks, prefix 5: %r" % peaks)

    # Shards cut windows too: the shards' fills add up to more than the whole's when a
    # window straddles a shard edge. 3 shards of 24: [0, 8), [8, 16), [16, 24); the
    # windows [6, 9) and [15, 18) are cut, so GlobalBuffer has 10 windows in all.
    shards = [table(movement(*CONV1D, "--shard", "%d/3" % i))[0]["GlobalBuffer"] for i in range(3)]
    check(sum(s["O"][1] for s in shards) == 10, "GlobalBuffer windows over 3 shards: %r" % [s["O"] for s in shards])


def test_tensor_filter_drops_levels():
    # GlobalBuffer holds I and W only: with --tensors O it has nothing, so it is absent.
    mapping = write("conv1d_no_o.mapping.yaml", open(CONV1D[1]).read().replace(
        "{component: GlobalBuffer, tensors: [I, W, O]}", "{component: GlobalBuffer, tensors: [I, W]}"))
    report = movement(CONV1D[0], mapping, "--tensors", "O")
    check([l["level"] for l in report["levels"]] == ["MainMemory"], "--tensors O: only MainMemory (%r)" %
          [l["level"] for l in report["levels"]])
    counts, peaks = table(report)
    check(counts.get("MainMemory") == {"O": (True, 1, 8, 0, 8)} and peaks.get("MainMemory") == (8, 0),
          "MainMemory with O only: %r %r" % (counts.get("MainMemory"), peaks.get("MainMemory")))
    report = movement(CONV1D[0], mapping, "--tensors", "W,I")
    check([[t["tensor"] for t in l["tensors"]] for l in report["levels"]] == [["I", "W"], ["I", "W"]],
          "tensors in the order the nodes list them, whatever the filter's order")


def test_text():
    r = run("movement", *CONV1D, "--format", "text")
    check(r.returncode == 0, "movement --format text exits 0 (%s)" % r.stderr.strip())
    lines = r.stdout.splitlines()
    check(bool(lines) and lines[0] == "timesteps [0, 24)", "a header naming the traced timesteps: %r" % lines[:1])
    header = next((l for l in lines if l.startswith("level")), "")
    check(header.split()[:7] == ["level", "tensor", "home", "windows", "max_tile", "fills", "drains"],
          "column names: %r" % header)
    rows = {}
    for l in lines:
        m = re.match(r"^(MainMemory|GlobalBuffer)\s+([IWO])\s+(yes)?\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s", l)
        if m:
            rows[(m.group(1), m.group(2))] = (m.group(3) == "yes", *map(int, m.group(4, 5, 6, 7)))
    counts, _ = table(movement(*CONV1D))
    want = {(lvl, t): v for lvl, d in counts.items() for t, v in d.items()}
    check(rows == want, "one row per level and tensor, the JSON's numbers: %r" % rows)
    # conv1d's workload gives bits_per_value {All: 8}: the bytes follow the elements.
    check("MainMemory: peak footprint 21 elements at t=0; 21 bytes at t=0" in lines and
          any(l.startswith("GlobalBuffer: peak footprint 7 elements at t=0; 7 bytes") for l in lines),
          "the peaks, one line per level: %r" % lines[-2:])
    r = run("movement", *CONV1D, "--format", "text", "--from", "4", "--to", "10")
    check(r.stdout.startswith("timesteps [4, 10) (part of the schedule)"), "a window says so: %r" % r.stdout[:60])
    # A row with no window in the selection is marked, not a row of measured zeros.
    r = run("movement", *CONV1D, "--format", "text", "--max-timesteps", "0")
    marked = [l for l in r.stdout.splitlines() if l.endswith("(no window in the selection)")]
    check(len(marked) == 6 and all(l.split()[-10:-5] == ["-"] * 5 for l in marked),
          "no window: six rows marked with '-' (%r)" % marked[:2])
    # Sizes print as whole bits and bytes.
    arch = write("arch.yaml", "arch:\n  nodes:\n  - !Memory {name: MainMemory, size: inf}\n"
                 "  - !Memory {name: GlobalBuffer, size: 1024*1024*128*8}\n")
    r = run("movement", arch, *CONV1D, "--format", "text")
    check("GlobalBuffer: peak footprint 7 elements at t=0; 7 bytes at t=0; size 1073741824 bits (134217728 bytes): "
          "fits" in r.stdout, "a whole size in bits and bytes (%r)" % r.stdout[-300:])


def test_errors():
    cases = [
        (["transfers", *CONV1D, "--level", "L2"], "--level names 'L2', which no Storage node has (levels: MainMemory, GlobalBuffer)"),
        (["transfers", *CONV1D], "--level"),
        (["movement", *CONV1D, "--sample-timesteps", "3"], "not --sample-timesteps"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--sample-timesteps", "3"], "not --sample-timesteps"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--line-bytes", "0"], "--line-bytes"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--line-bytes", "abc"], "--line-bytes"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--line-bytes", "-64"], "--line-bytes"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--align", "0"], "--align"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--cycles-per-timestep", "0"], "--cycles-per-timestep"),
        (["transfers", *CONV1D, "--level", "MainMemory", "--format", "dramsim2"], "--format"),
        (["movement", *CONV1D, "--format", "csv"], "--format"),
    ]
    for args, words in cases:
        r = run(*args)
        check(r.returncode == 2 and words in r.stderr and r.stdout == "",
              "%s exits 2 naming %r (rc %d, %r)" % (" ".join(a for a in args if a not in CONV1D), words,
                                                     r.returncode, r.stderr.strip()[:300]))


def jsonl(*args):
    r = run("transfers", *args)
    check(r.returncode == 0, "transfers %s exits 0 (%s)" % (" ".join(args[-4:]), r.stderr.strip()))
    return [json.loads(l) for l in r.stdout.splitlines()]


def test_worked_example_transfers():
    # SEMANTICS: I, W, O at 0x0, 0x1000, 0x2000; at 3q READ 0x0, READ 0x1000; at 3q+3
    # WRITE 0x2000, before the next window's reads.
    got = [(r["t"], r["op"], r["address"], r["level"], r["child"], r["tensor"])
           for r in jsonl(*CONV1D, "--level", "MainMemory")]
    want = []
    for q in range(8):
        if q:
            want.append((3 * q, "write", 0x2000, "MainMemory", "GlobalBuffer", "O"))
        want += [(3 * q, "read", 0x0, "MainMemory", "GlobalBuffer", "I"),
                 (3 * q, "read", 0x1000, "MainMemory", "GlobalBuffer", "W")]
    want.append((24, "write", 0x2000, "MainMemory", "GlobalBuffer", "O"))
    check(got == want, "MainMemory's requests: %r" % got[:6])
    # One byte per element, lines of 1 byte: a request per element, ascending.
    got = [(r["t"], r["op"], r["address"]) for r in jsonl(*CONV1D, "--level", "MainMemory", "--line-bytes", "1")
           if r["t"] in (3, 24)]
    check(got == [(3, "write", 0x2000), (3, "read", 1), (3, "read", 2), (3, "read", 3),
                  (3, "read", 0x1000), (3, "read", 0x1001), (3, "read", 0x1002), (24, "write", 0x2007)],
          "per element at t=3 and the last drain: %r" % got)
    # Addresses are of lines: with --align 16, lines of 64 bytes would all be line 0.
    got = [r["address"] for r in jsonl(*CONV1D, "--level", "MainMemory", "--align", "16", "--max-timesteps", "3")]
    check(got == [0, 0, 0], "--align 16, 64-byte lines: one line for all three (got %r)" % got)
    got = [r["address"] for r in jsonl(*CONV1D, "--level", "MainMemory", "--align", "16", "--line-bytes", "16",
                                       "--max-timesteps", "3")]
    check(got == [0, 16, 32], "--align 16, 16-byte lines: I, W, O at 0, 16, 32 (got %r)" % got)
    check(jsonl(*CONV1D, "--level", "GlobalBuffer") == [], "a level without children moves nothing to them")


def dramsim3_reader(text):
    """Each line as DRAMsim3's `is >> std::hex >> addr >> op >> std::dec >> cycle` reads it:
    (address, is_write, cycle); a line that would not parse to exactly these is an error."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        tokens = line.split()
        if len(tokens) != 3 or not re.fullmatch(r"(0[xX])?[0-9a-fA-F]+", tokens[0]) or \
                tokens[1] not in ("READ", "WRITE") or not re.fullmatch(r"[0-9]+", tokens[2]):
            raise ValueError("dramsim3 line %d: %r" % (n, line))
        out.append((int(tokens[0], 16), tokens[1] == "WRITE", int(tokens[2])))
    return out


def ramulator2_reader(text):
    """Each line as Ramulator 2's LoadStoreTrace reads it: exactly two tokens split at
    single spaces, LD or ST, and 0x<hex>: (address, is_write)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        tokens = line.split(" ")
        if len(tokens) != 2 or tokens[0] not in ("LD", "ST") or not re.fullmatch(r"0x[0-9a-fA-F]+", tokens[1]):
            raise ValueError("ramulator2 line %d: %r" % (n, line))
        out.append((int(tokens[1][2:], 16), tokens[0] == "ST"))
    return out


def test_simulator_formats():
    for spec, level in ((CONV1D, "MainMemory"), (FUSED + ["-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=4"], "MainMemory")):
        args = [*spec, "--level", level, "--line-bytes", "4"]
        reqs = jsonl(*args)
        check(len(reqs) > 4, "%s: some requests (%d)" % (level, len(reqs)))
        r = run("transfers", *args, "--format", "dramsim3", "--cycles-per-timestep", "10")
        try:
            got = dramsim3_reader(r.stdout)
            check(got == [(q["address"], q["op"] == "write", 10 * q["t"]) for q in reqs],
                  "dramsim3: the jsonl requests, at cycle 10 t")
            check(all(a[2] <= b[2] for a, b in zip(got, got[1:])), "dramsim3: cycles never go back")
        except ValueError as e:
            check(False, str(e))
        for rate in ("3", "1/3", "0.4"):  # an engine that issues one request every 1/rate cycles
            step, free, want = 1 / fractions.Fraction(rate), fractions.Fraction(0), []
            for q in reqs:
                at = max(fractions.Fraction(10 * q["t"]), free)
                want.append(math.floor(at))
                free = at + step
            r = run("transfers", *args, "--format", "dramsim3", "--cycles-per-timestep", "10", "--issue-rate", rate)
            got = dramsim3_reader(r.stdout)
            check([c for _, _, c in got] == want and [a for a, _, _ in got] == [q["address"] for q in reqs],
                  "dramsim3 --issue-rate %s: the requests in order, queued at the rate (%r, want %r)" % (rate, got[:6], want[:6]))
            timed = jsonl(*args, "--cycles-per-timestep", "10", "--issue-rate", rate)
            check([q.pop("cycle") for q in timed] == want and timed == reqs,
                  "jsonl --issue-rate %s: the same requests, each with its cycle" % rate)
        r = run("transfers", *args, "--format", "ramulator2")
        try:
            got = ramulator2_reader(r.stdout)
            check(got == [(q["address"], q["op"] == "write") for q in reqs], "ramulator2: the jsonl requests")
        except ValueError as e:
            check(False, str(e))
    r = run("transfers", *CONV1D, "--level", "MainMemory", "--format", "dramsim3", "--max-timesteps", "4")
    check(r.stdout == "0x0 READ 0\n0x1000 READ 0\n0x2000 WRITE 3\n0x0 READ 3\n0x1000 READ 3\n0x2000 WRITE 4\n",
          "dramsim3 lines of a prefix of 4 (the cut window drains at 4): %r" % r.stdout)
    r = run("transfers", *CONV1D, "--level", "MainMemory", "--format", "ramulator2", "--max-timesteps", "3")
    check(r.stdout == "LD 0x0\nLD 0x1000\nST 0x2000\n", "ramulator2 lines of a prefix of 3: %r" % r.stdout)


def test_shards_concatenate():
    # A window that ends where a shard starts drains there: the shard that starts at 3
    # lists GlobalBuffer's window [0, 3) drain of O at t=3.
    got = [(r["t"], r["op"]) for r in jsonl(*CONV1D, "--level", "MainMemory", "--from", "3", "--to", "4")]
    check(got == [(3, "write"), (3, "read"), (3, "read")], "--from 3 --to 4: the drain at 3, then the fills (%r)" % got)
    for spec, level, extra in ((CONV1D, "MainMemory", []),
                               (CONV1D, "MainMemory", ["--from", "3", "--to", "20"]),
                               (CONV1D, "MainMemory", ["--max-timesteps", "16", "--line-bytes", "1"]),
                               (MATMULS + ["-D", "N_EINSUMS=2", "-D", "M=4", "-D", "KN=4"], "MainMemory", ["--line-bytes", "2"]),
                               (FUSED + ["-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=4"], "MainMemory", ["--line-bytes", "1"])):
        for fmt in ("jsonl", "dramsim3"):
            args = [*spec, "--level", level, "--format", fmt, *extra]
            whole = run("transfers", *args).stdout
            for k in (2, 5, 7):
                parts = [run("transfers", *args, "--shard", "%d/%d" % (i, k)) for i in range(k)]
                check(all(p.returncode == 0 for p in parts) and "".join(p.stdout for p in parts) == whole and whole,
                      "%s %s %s: %d shards concatenate to the whole (%d lines)" %
                      (os.path.basename(spec[-1]), fmt, " ".join(extra), k, whole.count("\n")))


def test_head():
    # A long transfer trace whose reader goes away: exit 0, nothing on stderr.
    args = [*MATMULS, "-D", "N_EINSUMS=2", "-D", "M=64", "-D", "KN=64", "--level", "MainMemory", "--line-bytes", "1"]
    for fmt in ("jsonl", "dramsim3", "ramulator2"):
        p = subprocess.run(["bash", "-c", 'set -o pipefail; "$0" transfers "$@" | head -2 >/dev/null', EXE, *args,
                            "--format", fmt], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and p.stderr == "", "transfers --format %s | head -2: rc %d %r" %
              (fmt, p.returncode, p.stderr[:200]))
    p = subprocess.run(["bash", "-c", 'set -o pipefail; "$0" movement "$@" --format text | head -1 >/dev/null',
                        EXE, *CONV1D], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stderr == "", "movement --format text | head -1: rc %d %r" % (p.returncode, p.stderr))


def dram_model(requests, banks, row_bytes, cycles_per_timestep):
    """examples/transfer_model's DRAM, recomputed: each request's outcome (hit, miss or
    conflict of a bank's open row) and when the last bank is done (16-cycle timings)."""
    open_row, free_at, outcomes, finish = {}, {}, [], 0
    for r in requests:
        global_row = r["address"] // row_bytes
        bank, row = global_row % banks, global_row // banks
        outcome = "miss" if bank not in open_row else "hit" if open_row[bank] == row else "conflict"
        outcomes.append(outcome)
        open_row[bank] = row
        free_at[bank] = max(free_at.get(bank, 0), r["t"] * cycles_per_timestep) + \
            {"hit": 16, "miss": 32, "conflict": 48}[outcome]
        finish = max(finish, free_at[bank])
    return outcomes, finish


def test_transfer_model_example():
    exe = os.path.join(os.path.dirname(os.path.dirname(EXE)), "examples", "transfer_model")
    if not os.path.exists(exe):
        print("no %s (examples not built): skipped" % exe)
        return
    usage = "usage: transfer_model LEVEL SPEC.yaml..."
    for args, words in (([], "no LEVEL and no spec file"),
                        (["MainMemory"], "no spec file"),
                        (["--banks", *CONV1D], "the first argument is the LEVEL, not '--banks'"),
                        (["MainMemory", "no-such.yaml"], "cannot read the spec file 'no-such.yaml'"),
                        (["MainMemory", *CONV1D, "--banks", "0"], "--banks takes a whole number from 1 to 65536, not '0'"),
                        (["MainMemory", *CONV1D, "--banks", "abc"], "not 'abc'"),
                        (["MainMemory", *CONV1D, "--row-bytes", "-8"], "--row-bytes takes a whole number"),
                        (["MainMemory", *CONV1D, "--line-bytes", "4x"], "not '4x'"),
                        (["MainMemory", *CONV1D, "--line-bytes"], "--line-bytes takes a value"),
                        (["MainMemory", *CONV1D, "--row-bytes", "100", "--line-bytes", "64"],
                         "--row-bytes (100) must be a multiple of --line-bytes (64)"),
                        (["MainMemory", *CONV1D, "-D", "X"], "-D takes KEY=VALUE, not 'X'"),
                        (["MainMemory", *CONV1D, "--rows", "3"], "unknown option '--rows'")):
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and words in p.stderr and usage in p.stderr and p.stdout == "",
              "transfer_model %s exits 2 saying %r (rc %d, %r)" % (args[:1], words, p.returncode, p.stderr))
    p = subprocess.run([exe, "L2", *CONV1D], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "'L2', which no Storage node has" in p.stderr, "an unknown level: exit 2 (%r)" % p.stderr)

    # The worked example by hand: I, W, O in rows 0, 2, 4 of 2048 bytes, so banks 0, 2
    # and 4 of 8; each opens its row once (3 misses) and hits it 7 times. O's bank is
    # busiest at the end: written at t=3 (32 cycles, free at 35), then a hit every 3
    # cycles that waits for the previous one: 35 + 7 x 16 = 147.
    p = subprocess.run([exe, "MainMemory", *CONV1D], capture_output=True, text=True, timeout=60)
    for want in ("requests: 24 (16 reads, 8 writes)", "row hits: 21", "row misses: 3", "row conflicts: 0",
                 "estimated cycles: 147", "  O: 0 reads, 8 writes, 7 row hits"):
        check(p.returncode == 0 and want in p.stdout.splitlines(), "transfer_model on conv1d says %r (%r)" % (want, p.stdout))

    # Small rows over few banks, so that there are hits and conflicts, recomputed here
    # from `looptrace transfers --format jsonl`.
    conv2d = [os.path.join(ROOT, "tests", "specs", f) for f in ("conv2d.workload.yaml", "conv2d.mapping.yaml")]
    for spec, level, banks, row, line, cycles in (
            (conv2d, "DRAM", 4, 32, 4, 3),
            (FUSED + ["-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=4"], "MainMemory", 2, 16, 1, 1),
            (MATMULS + ["-D", "N_EINSUMS=2", "-D", "M=4", "-D", "KN=4"], "MainMemory", 2, 64, 4, 2)):
        reqs = jsonl(*spec, "--level", level, "--line-bytes", str(line))
        outcomes, finish = dram_model(reqs, banks, row, cycles)
        p = subprocess.run([exe, level, *spec, "--banks", str(banks), "--row-bytes", str(row), "--line-bytes",
                            str(line), "--cycles-per-timestep", str(cycles)], capture_output=True, text=True, timeout=60)
        lines = p.stdout.splitlines()
        want = ["requests: %d (%d reads, %d writes)" % (len(reqs), sum(r["op"] == "read" for r in reqs),
                                                        sum(r["op"] == "write" for r in reqs)),
                "row hits: %d" % outcomes.count("hit"), "row misses: %d" % outcomes.count("miss"),
                "row conflicts: %d" % outcomes.count("conflict"), "estimated cycles: %d" % finish]
        for tensor in sorted({r["tensor"] for r in reqs}):
            mine = [(r, o) for r, o in zip(reqs, outcomes) if r["tensor"] == tensor]
            want.append("  %s: %d reads, %d writes, %d row hits" % (
                tensor, sum(r["op"] == "read" for r, _ in mine), sum(r["op"] == "write" for r, _ in mine),
                sum(o == "hit" for _, o in mine)))
        check(p.returncode == 0 and [l for l in lines[2:] if l] == want,
              "transfer_model %s --banks %d --row-bytes %d --line-bytes %d: want %r, got %r" %
              (level, banks, row, line, want, lines[2:]))
        check(outcomes.count("conflict") > 0 and outcomes.count("hit") > 0,
              "the case has hits and conflicts (%d, %d)" % (outcomes.count("hit"), outcomes.count("conflict")))


def test_empty_notes():
    # Nothing to move: exit 0, empty or zero output, and stderr says why.
    r = run("transfers", *CONV1D, "--level", "GlobalBuffer")
    check(r.returncode == 0 and r.stdout == "" and
          "no Storage node below GlobalBuffer is filled from it" in r.stderr,
          "transfers of a level without children: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    r = run("transfers", *CONV1D, "--level", "MainMemory", "--from", "30")
    check(r.returncode == 0 and r.stdout == "" and "--from 30 is at or past the end" in r.stderr,
          "transfers past the end: %d %r" % (r.returncode, r.stderr))
    r = run("movement", *CONV1D, "--from", "30")
    check(r.returncode == 0 and "no window moves anything" in r.stderr, "movement past the end: %r" % r.stderr)
    r = run("movement", *CONV1D)
    check(r.returncode == 0 and r.stderr == "", "movement of the whole run says nothing on stderr: %r" % r.stderr)


def test_registers_per_einsum():
    """tpu_v4i's Register (`size: weight.bits_per_value if weight else 0`) on the Llama 3
    8B decode layer: a size per Einsum from its weight, against 128 x 128 PEs."""
    af = os.path.join(ROOT, "..", "shared", "accelforge-examples")
    spec = [os.path.join(af, "workloads", "transformers", "llama", "llama3_8B.yaml"),
            os.path.join(af, "arches", "tpu_v4i.yaml"), os.path.join(ROOT, "examples", "llama3_8b_tpu_v4i.mapping.yaml"),
            "-D", "BATCH_SIZE=1", "-D", "DECODE=True", "-D", "N_NEW_TOKENS=1", "-D", "N_CACHED_TOKENS=2047"]
    r = run("movement", *spec)
    check(r.returncode == 0, "movement of the Llama layer (rc %d, %r)" % (r.returncode, r.stderr[-300:]))
    if r.returncode:
        return
    reg = [l for l in json.loads(r.stdout)["levels"] if l["level"] == "Register"][0]
    per = {e["einsum"]: e for e in reg["capacity"]["per_einsum"]}
    # Ten Einsums keep a weight in the Register; the two of two tensors (I, QK_softmax)
    # keep nothing there and are not listed. The weights are 16 bits (All: 16).
    check(sorted(per) == sorted(["V", "K", "Q", "QK", "AV", "Z", "FFG", "FFU", "FFH", "FFB"]),
          "one entry per Einsum that holds something: %r" % sorted(per))
    check(per["Q"]["bits_of"] == ["WQ"] and per["QK"]["bits_of"] == ["K_cache"] and per["FFH"]["bits_of"] == ["FFU"],
          "the weight that gave each size (renames: QK's input is Q, FFH's is FFG): %r" %
          {k: v["bits_of"] for k, v in per.items()})
    check(all(e["size_bits"] == 16 for e in per.values()), "16 bits each")
    check(per["Q"]["instances"] == 128 * 128 and per["Q"]["total_bits"] == 16 * 128 * 128 and
          per["Q"]["peak_bits"] == 16 * 128 * 128 and per["Q"]["fits"] is True,
          "one 2-byte weight per PE fills the 128 x 128 registers exactly: %r" % per["Q"])
    check(reg["capacity"]["fits"] is True, "every Einsum's registers fit")
    r = run("movement", *spec, "--format", "text")
    check("  Q: 16 bits (2 bytes), from WQ's bits_per_value x 16384 instances; peak 32768 bytes at t=544: fits"
          in r.stdout.splitlines(), "the text names the tensor and the instances: %r" % r.stdout[-600:])
    # A Register of 8 bits cannot hold 16-bit weights: the same check fails, by 8 bits a PE.
    arch = write("tpu_small_reg.yaml", open(spec[1]).read().replace(
        "size: weight.bits_per_value if weight else 0", "size: weight.bits_per_value // 2 if weight else 0"))
    r = run("movement", spec[0], arch, *spec[2:])
    reg = [l for l in json.loads(r.stdout)["levels"] if l["level"] == "Register"][0] if r.returncode == 0 else {}
    check(reg and reg["capacity"]["fits"] is False and
          reg["capacity"]["per_einsum"][0]["over_by_bits"] == 8 * 128 * 128,
          "half the size does not fit, over by 8 bits x 16384 (%r)" % (reg.get("capacity", r.stderr[-300:]),))


def test_lattices_in_closed_form():
    # B[x] = A[x], x < 8: 4 PEs take 2 each and walk them in time, Buf inside: each
    # window's tile is {j, j + 2, j + 4, j + 6}, 2 windows. And O[p] = I[2p + r] with one
    # r per window: I's tiles {0, 2, .., 14}, {1, 3, .., 15}. Both in closed form, as the
    # enumeration counts them, and their transfers the same bytes.
    retiled = os.path.join(ROOT, "tests", "specs", "retiled_copy.yaml")
    strided = write("strided.yaml", """workload:
  iteration_space_shape: {p: 0 <= p < 8, r: 0 <= r < 2}
  einsums: ["O[p] = I[X: 2*p + r] * W[r]"]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [I, W, O]}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Storage {component: Buf, tensors: [I, W, O]}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Compute {einsum: O}
""")
    for spec, tensor, want in ((retiled, "A", (False, 2, 4, 8, 0)), (strided, "I", (False, 2, 8, 16, 0))):
        report = movement(spec)
        check(report.get("method") == "closed-form" and report.get("enumerated") == [],
              "%s in closed form, nothing enumerated: %r" % (os.path.basename(spec), report.get("enumerated")))
        counts, _ = table(report)
        check(counts.get("Buf", {}).get(tensor) == want, "Buf %s: %r" % (tensor, counts.get("Buf", {}).get(tensor)))
        check(report == dict(movement(spec, "--method", "enumerate"), method="closed-form"),
              "%s: the enumeration gives the same report" % os.path.basename(spec))
        r = run("transfers", spec, "--level", "DRAM", "--line-bytes", "1")
        e = run("transfers", spec, "--level", "DRAM", "--line-bytes", "1", "--method", "enumerate")
        check(r.returncode == 0 and r.stderr == "" and r.stdout == e.stdout and r.stdout,
              "%s: transfers from the boxes, byte for byte (%r)" % (os.path.basename(spec), r.stderr))


def main():
    return harness.main((test_lattices_in_closed_form, test_empty_notes, test_registers_per_einsum, test_worked_example, test_cut_windows, test_tensor_filter_drops_levels, test_text,
                         test_errors, test_worked_example_transfers, test_simulator_formats,
                         test_shards_concatenate, test_head, test_transfer_model_example))


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Drives the looptrace executable: help, exit codes and file:line of bad specs, output
formats, a reader that goes away early, and shards / samples / windows of the trace.

usage: test_cli.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json
import os
import struct
import subprocess
import sys

import harness

from harness import EXE, TMP, TINY_MAPPING, TINY_WORKLOAD, check, run, write  # noqa: E402


CONV1D = write("conv1d.yaml", harness.CONV1D)

MATMULS = write("matmuls.yaml", harness.MATMULS)


def lines_of(out):
    return out.splitlines(keepends=True)


def test_help():
    for args in (["--help"], ["summary", "--help"], ["trace", "--help"]):
        p = run(*args)
        check(p.returncode == 0, "%s exits 0 (got %d)" % (args, p.returncode))
        check("Usage" in p.stdout or "usage" in p.stdout.lower(), "%s prints a usage" % args)
    p = run()
    check(p.returncode != 0, "no subcommand is an error")


def test_bad_specs():
    # (name, workload text, mapping text, the file and line the error must name, a word of the message)
    cases = [
        ("bad-yaml", "workload:\n  einsums: [a, b\n  x: 1\n", TINY_MAPPING, "w", 3, "YAML"),
        ("unknown-tag", TINY_WORKLOAD,
         "mapping:\n  nodes:\n  - !Temporl {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: E}\n",
         "m", 3, "Temporal"),
        ("unknown-key", TINY_WORKLOAD.replace("tensor_accesses", "tensor_acesses"), TINY_MAPPING,
         "w", 5, "did you mean"),
        ("undefined-einsum", TINY_WORKLOAD,
         "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: F}\n",
         "m", 4, "'F'"),
        ("missing-rank-variable", TINY_WORKLOAD,
         "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 1}\n"
         "  - !Temporal {rank_variable: q, tile_shape: 1}\n  - !Compute {einsum: E}\n",
         "m", 4, "'q'"),
        ("non-affine", TINY_WORKLOAD.replace("projection: [m], output", "projection: {M: m*n}, output"),
         TINY_MAPPING, "w", 7, "affine"),
        ("unbounded", TINY_WORKLOAD.replace("[m, n]}", "[m, n, z]}"), TINY_MAPPING, "w", 4, "'z'"),
        ("tile-shape-0", TINY_WORKLOAD,
         "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 0}\n  - !Compute {einsum: E}\n",
         "m", 3, "positive"),
        ("storage-unknown-tensor", TINY_WORKLOAD,
         "mapping:\n  nodes:\n  - !Storage {component: X, tensors: [A, Q]}\n  - !Compute {einsum: E}\n",
         "m", 3, "'Q'"),
    ]
    for name, workload, mapping, which, line, word in cases:
        w = write(name + ".w.yaml", workload)
        m = write(name + ".m.yaml", mapping)
        for sub in ("summary", "trace"):
            p = run(sub, w, m)
            check(p.returncode == 2, "%s %s exits 2 (got %d; stderr %r)" % (name, sub, p.returncode, p.stderr))
            where = "%s:%d:" % (w if which == "w" else m, line)
            check(where in p.stderr, "%s %s names %s (stderr %r)" % (name, sub, where, p.stderr))
            check(word in p.stderr, "%s %s says %r (stderr %r)" % (name, sub, word, p.stderr))
            check(p.stdout == "", "%s %s prints nothing on stdout" % (name, sub))
    # the line of an error inside a Jinja-expanded file is the template's line
    tpl = write("tpl.yaml", "workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n"
                "  {% for i in range(3) %}\n  - B{{i}}[m] = A[m]\n  {% endfor %}\n"
                "  - name: Bad\n    tensor_acceses: []\n" + TINY_MAPPING.replace("E}", "B0}"))
    p = run("summary", tpl)
    check(p.returncode == 2 and tpl + ":8:" in p.stderr, "template line 8 (stderr %r)" % p.stderr)
    # a missing file, a bad -D, bad options
    p = run("summary", os.path.join(TMP, "no-such-file.yaml"))
    check(p.returncode == 2, "a missing file exits 2 (got %d)" % p.returncode)
    for args in (["--shard", "3/3"], ["--shard", "x"], ["--from", "5", "--to", "4"],
                 ["--tensors", "Nope"], ["--einsums", "Nope"], ["--format", "xml"],
                 ["-D", "novalue"], ["--max-timesteps", "-1"]):
        p = run("trace", CONV1D, *args)
        check(p.returncode == 2, "trace %s exits 2 (got %d)" % (args, p.returncode))
        check(p.stderr != "", "trace %s explains itself" % args)


def test_summary():
    p = run("summary", CONV1D)
    check(p.returncode == 0, "summary exits 0")
    s = json.loads(p.stdout)
    check(s["n_timesteps"] == 24, "conv1d has 24 timesteps")
    check(s["tensors"] == ["I", "W", "O"], "tensors in order of first trace")
    check(s["tensor_shapes"] == {"I": [10], "W": [3], "O": [8]}, "tensor shapes with the halo")
    check([t["n_accesses"] for t in s["traces"]] == [24, 24, 24], "24 accesses per trace")
    check(s["tile_windows"]["GlobalBuffer"]["I"][1] == [3, 6], "GlobalBuffer windows of 3 steps")
    p = run("summary", CONV1D, "--max-timesteps", "7")
    s = json.loads(p.stdout)
    check(s["n_timesteps"] == 7 and s["truncated"] is True, "a prefix is truncated")
    check([t["n_accesses"] for t in s["traces"]] == [7, 7, 7], "7 accesses per trace in the prefix")


def trace_lines(*args):
    p = run("trace", *args)
    check(p.returncode == 0, "trace %s exits 0 (stderr %r)" % (args, p.stderr))
    return p.stdout


def test_trace_formats():
    out = trace_lines(CONV1D)
    lines = lines_of(out)
    check(len(lines) == 72, "conv1d: 72 JSON lines (got %d)" % len(lines))
    check(lines[3 * 4] == '{"t": 4, "einsum": "Conv", "tensor": "I", "write": false, "element": 2, '
          '"coords": [2]}\n', "the line of I at timestep 4: %r" % (lines[12] if len(lines) > 12 else None))
    ts = [json.loads(l)["t"] for l in lines]
    check(ts == sorted(ts), "t never decreases")

    csv = trace_lines(CONV1D, "--format", "csv")
    rows = csv.splitlines()
    check(rows[0] == "timestep,einsum,tensor,is_output,element,coords", "CSV header %r" % rows[0])
    check(len(rows) == 73, "CSV: a header and 72 rows")
    check(rows[1 + 12] == "4,Conv,I,false,2,2", "CSV row of I at timestep 4: %r" % rows[13])

    p = run("trace", CONV1D, "--format", "binary", text=False)
    b = p.stdout
    check(p.returncode == 0, "binary exits 0")
    check(b[:8] == b"LOOPTRC1", "binary magic")
    header = 8 + 4 + 3 * (1 + 2 + 4 + 2 + 1 + 1 + 8)
    check(len(b) == header + 72 * 24, "binary: header and 72 records of 24 bytes (got %d)" % len(b))
    if len(b) >= header + 13 * 24:
        t, element, trace, zero = struct.unpack_from("<qqII", b, header + 12 * 24)
        check((t, element, trace, zero) == (4, 2, 0, 0), "binary record 12: %r" % ((t, element, trace, zero),))


def test_early_close():
    # A long trace whose reader goes away after one line: exit 0, nothing on stderr.
    p = subprocess.Popen([EXE, "trace", MATMULS, "-D", "N=120"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait(timeout=60)
    check(first.startswith(b'{"t": 0'), "the first line arrives (%r)" % first[:40])
    check(rc == 0, "trace | head -1 exits 0 (got %d)" % rc)
    check(err == b"", "trace | head -1 prints nothing on stderr (%r)" % err[:200])
    # the same through a shell pipe with pipefail
    p = subprocess.run(["bash", "-c", 'set -o pipefail; "$0" trace "$1" -D N=120 | head -1 >/dev/null',
                        EXE, MATMULS], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stderr == "", "bash pipefail | head -1: %d %r" % (p.returncode, p.stderr))


def test_selections():
    full = trace_lines(MATMULS)
    lines = lines_of(full)
    summary = json.loads(run("summary", MATMULS).stdout)
    n = summary["n_timesteps"]
    check(len(lines) == sum(t["n_accesses"] for t in summary["traces"]), "summary counts every line")
    check(n > 20, "a schedule long enough to cut (%d)" % n)
    t_of = [json.loads(l)["t"] for l in lines]

    for fmt in ("jsonl",):
        for count in (2, 3, 5):
            joined = "".join(trace_lines(MATMULS, "--shard", "%d/%d" % (i, count)) for i in range(count))
            check(joined == full, "--shard */%d concatenated equal the full output byte for byte" % count)

    for a, b in ((0, n), (5, 17), (n // 2, n // 2), (n - 3, n + 10)):
        got = trace_lines(MATMULS, "--from", str(a), "--to", str(b))
        want = "".join(l for l, t in zip(lines, t_of) if a <= t < b)
        check(got == want, "--from %d --to %d is the full output restricted" % (a, b))
    got = trace_lines(MATMULS, "--from", "9")
    check(got == "".join(l for l, t in zip(lines, t_of) if t >= 9), "--from 9 alone")
    got = trace_lines(MATMULS, "--max-timesteps", "11")
    check(got == "".join(l for l, t in zip(lines, t_of) if t < 11), "--max-timesteps 11 is a prefix")

    for seed in ("0", "5"):
        a = trace_lines(MATMULS, "--sample-timesteps", "6", "--seed", seed)
        b = trace_lines(MATMULS, "--sample-timesteps", "6", "--seed", seed)
        check(a == b and a != "", "--sample-timesteps 6 --seed %s is deterministic" % seed)
        picked = {json.loads(l)["t"] for l in lines_of(a)}
        check(len(picked) <= 6, "at most 6 timesteps sampled")
        want = "".join(l for l, t in zip(lines, t_of) if t in picked)
        check(a == want, "the sample is the full output at its timesteps (seed %s)" % seed)
        s = json.loads(run("summary", MATMULS, "--sample-timesteps", "6", "--seed", seed).stdout)
        check(sum(t["n_accesses"] for t in s["traces"]) == len(lines_of(a)),
              "the summary of a sample counts its lines (seed %s)" % seed)

    got = trace_lines(MATMULS, "--tensors", "Z", "--einsums", "Y")
    want = "".join(l for l in lines if '"einsum": "Y", "tensor": "Z"' in l)
    check(got == want and got != "", "--tensors Z --einsums Y keeps Y's reads of Z")


def main():
    return harness.main((test_help, test_bad_specs, test_summary, test_trace_formats,
                         test_early_close, test_selections))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Hostile input through the looptrace command: every bad spec or option exits 2 with a
message naming what is wrong (and, for a spec, the file, line and column); nothing dies
of a signal, prints an internal error, or hangs; `trace ... | head -1` exits cleanly.

usage: test_errors.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import os
import subprocess
import sys

import harness

from harness import EXE, TMP, check, run, write  # noqa: E402


WORKLOAD = harness.TINY_WORKLOAD
MAPPING = harness.TINY_MAPPING
GOOD = write("good.yaml", WORKLOAD + MAPPING)


def expect_error(args, words, where=None, what=None, status=2):
    """Runs looptrace with args; checks the exit status, that stderr has `where`
    ('file:line:column' or a prefix of it) and each of `words`, and stdout is empty."""
    what = what or " ".join(os.path.basename(a) for a in args)
    try:
        p = run(*args)
    except subprocess.TimeoutExpired:
        check(False, "%s: timed out" % what)
        return None
    check(p.returncode == status, "%s: exits %d (got %d; stderr %r)" % (what, status, p.returncode, p.stderr[-400:]))
    for w in words:
        check(w in p.stderr, "%s: stderr says %r (stderr %r)" % (what, w, p.stderr[-400:]))
    if where:
        check(where in p.stderr, "%s: stderr names %r (stderr %r)" % (what, where, p.stderr[-400:]))
    check("internal error" not in p.stderr and "terminate" not in p.stderr,
          "%s: no internal error (stderr %r)" % (what, p.stderr[-400:]))
    if status == 2:
        check(p.stderr.count("\n") <= 3, "%s: a short message (%r)" % (what, p.stderr[-400:]))
    return p


def test_spec_errors():
    bad_yaml = write("bad-yaml.yaml", "workload:\n  einsums: [a, b\n  x: 1\n" + MAPPING)
    expect_error(["summary", bad_yaml], ["invalid YAML"], bad_yaml + ":3:")

    typo = write("typo.yaml", WORKLOAD.replace("tensor_accesses", "tensor_acesses") + MAPPING)
    expect_error(["trace", typo], ["unknown key 'tensor_acesses'", "did you mean 'tensor_accesses'?",
                                   "expected one of:"], typo + ":5:5:")

    tag = write("tag.yaml", WORKLOAD + MAPPING.replace("!Temporal", "!Temporl"))
    expect_error(["trace", tag], ["unknown node tag '!Temporl'", "did you mean 'Temporal'?"], tag + ":10:")

    jinja = write("jinja.yaml", WORKLOAD + "{% for i in range(2) %}\nx{{i}}: {{ i + }}\n{% endfor %}\n" + MAPPING)
    expect_error(["summary", jinja], ["end of tag"], jinja + ":9:9:")

    expr = write("expr.yaml", WORKLOAD.replace("projection: [m], output", "projection: {M: m*n}, output") + MAPPING)
    expect_error(["summary", expr], ["'m*n'", "not affine"], expr + ":7:34:")

    dup = write("dup.yaml", WORKLOAD + MAPPING.replace("tile_shape: 1}", "tile_shape: 1, tile_shape: 2}"))
    expect_error(["trace", dup], ["key 'tile_shape' appears twice"], dup + ":10:")

    for bad, word in (("0", "must be a positive integer, not 0"), ("-2", "must be a positive integer, not -2"),
                      ("1.5", "must be an integer, not '1.5'"),
                      ("99999999999999999999", "must be an integer below 2^63")):
        f = write("tile-%s.yaml" % bad, WORKLOAD + MAPPING.replace("tile_shape: 1}", "tile_shape: %s}" % bad))
        expect_error(["trace", f], ["tile_shape " + word], f + ":10:")
    f = write("initial.yaml", WORKLOAD + MAPPING.replace("tile_shape: 1}", "tile_shape: 1, initial_tile_shape: 0}"))
    expect_error(["trace", f], ["initial_tile_shape must be a positive integer, not 0"], f + ":10:")

    f = write("empty-range.yaml", WORKLOAD.replace("0 <= m < 4", "4 <= m < 2") + MAPPING)
    expect_error(["summary", f], ["empty range"], f + ":4:")
    f = write("negative.yaml", WORKLOAD.replace("projection: [m, n]", "projection: {M: m - 1, N: n}") + MAPPING)
    expect_error(["summary", f], ["reaches negative coordinates"], f + ":6:")
    f = write("zero-size.yaml", WORKLOAD.replace("iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 3}",
                                                 "rank_sizes: {M: 0, N: 3}") + MAPPING)
    expect_error(["summary", f], ["rank size of 'M' must be positive, not 0"], f + ":2:")

    # A rank size's name in iteration_space_shape: AccelForge hands the constraint to ISL
    # as written and fails ("Error creating isl.Set"); the message gives the number.
    f = write("rank-size-name.yaml", WORKLOAD.replace("iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 3}",
                                                      "rank_sizes: {M: 4}\n  iteration_space_shape: "
                                                      "{m: 0 <= m < M, n: 0 <= n < 3}") + MAPPING)
    expect_error(["summary", f], ["constraint '0 <= m < M' names the rank size 'M'", "Error creating isl.Set",
                                  "write its value, 4, instead ('0 <= m < 4')"], f + ":3:")
    f = write("rank-size-name-einsum.yaml", WORKLOAD.replace("    tensor_accesses:",
                                                             "    rank_sizes: {NB: 3}\n"
                                                             "    iteration_space_shape: ['n < NB']\n"
                                                             "    tensor_accesses:") + MAPPING)
    expect_error(["summary", f], ["constraint 'n < NB' of Einsum 'E' names the rank size 'NB'",
                                  "write its value, 3, instead ('n < 3')"], f + ":6:")
    # The same constraint with the number is fine; so is a rank variable named as a rank.
    f = write("rank-size-number.yaml", WORKLOAD.replace("iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 3}",
                                                        "rank_sizes: {M: 4}\n  iteration_space_shape: "
                                                        "{m: 0 <= m < 4, n: 0 <= n < 3}") + MAPPING)
    p = run("summary", f)
    check(p.returncode == 0, "the constraint with the rank size's value loads (rc %d, %r)" % (p.returncode, p.stderr))

    # Hostile arch sizes that name tensor sets: evaluated per Einsum, bounded in depth and
    # work; what cannot be evaluated is said, never a crash or a hang.
    arch = "arch:\n  nodes:\n  - !Memory {name: MainMemory, size: inf}\n  - !Memory {name: R, size: '%s'}\n"
    mapping = MAPPING.replace("  - !Temporal", "  - !Storage {component: MainMemory, tensors: [A, B]}\n  - !Temporal").replace(
        "  - !Compute", "  - !Storage {component: R, tensors: [B]}\n  - !Compute")
    bomb = "1"
    for _ in range(30):
        bomb = "(%s if All else 1)" % bomb  # each `then` is read twice: 2^30 reads unbounded
    for label, size in (("not x 100000", "not " * 100000 + "All"), ("parentheses", "(" * 5000 + "All" + ")" * 5000),
                        ("nested conditionals", bomb), ("a set's bits", "All.bits_per_value"),
                        ("an undefined name", "weight.bits_per_value if weight else 0")):
        f = write("hostile-size.yaml", WORKLOAD + mapping + arch % size)
        try:
            p = run("movement", f, "--format", "text", timeout=30)
        except subprocess.TimeoutExpired:
            check(False, "arch size, %s: timed out" % label)
            continue
        check(p.returncode == 0 and "not evaluated" in p.stdout and "internal error" not in p.stderr,
              "arch size, %s: exits 0, says it is not evaluated (rc %d, %r)" % (label, p.returncode,
                                                                                (p.stdout + p.stderr)[-300:]))

    huge = write("huge.yaml", """\
workload:
  iteration_space_shape: {a: 0 <= a < 4000000000, b: 0 <= b < 4000000000, c: 0 <= c < 4000000000}
  einsums:
  - Z[a, b, c] = X[a]
mapping:
  nodes:
  - !Temporal {rank_variable: a, tile_shape: 1}
  - !Temporal {rank_variable: b, tile_shape: 1}
  - !Temporal {rank_variable: c, tile_shape: 1}
  - !Compute {einsum: Z}
""")
    expect_error(["summary", huge], ["more than 2^63 timesteps"], huge + ":")
    big = write("big-tensor.yaml", WORKLOAD.replace("0 <= m < 4, n: 0 <= n < 3",
                                                    "0 <= m < 2000000000000000000, n: 0 <= n < 2000000000000000000")
                + MAPPING)
    expect_error(["summary", big], ["tensor 'A' has more than 2^63 elements"], big + ":")

    # Files that are not specs at all.
    expect_error(["summary", write("empty.yaml", "")], ["no 'workload:'"])
    expect_error(["summary", write("binary.yaml", b"\x00\xff\xfe\x01workload\x00", "wb")], [])
    expect_error(["summary", write("list.yaml", "- 1\n- 2\n")], ["must be a mapping"])
    expect_error(["summary", TMP], [], what="a directory")
    expect_error(["summary", os.path.join(TMP, "missing.yaml")], [], what="a missing file")


def test_resource_limits():
    deep = write("deep.yaml", "workload: " + "[" * 100000 + "]" * 100000 + "\n")
    p = expect_error(["summary", deep], ["nested"], deep + ":1:")
    deep = write("deep-map.yaml", "workload: " + "{a: " * 100000 + "1" + "}" * 100000 + "\n")
    expect_error(["summary", deep], ["nested"], deep + ":1:")

    laughs = "workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n  - B[m] = A[m]\n" \
             "arch:\n  x0: &a0 !Compute {einsum: B}\n"
    for i in range(1, 10):
        laughs += "  x%d: &a%d !Sequential {nodes: [%s]}\n" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10))
    laughs = write("laughs.yaml", laughs + "mapping:\n  nodes: [*a9]\n")
    expect_error(["summary", laughs], ["more than 500000 nodes", "aliases"], laughs + ":")

    loops = write("loops.yaml", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n")
    expect_error(["summary", loops], ["loop iterations"], loops + ":1:")
    nested = write("nested.yaml", "{% if 1 %}" * 150)
    expect_error(["summary", nested], ["nested too deeply"], nested + ":1:")

    big = write("tile.yaml", WORKLOAD.replace("0 <= m < 4, n: 0 <= n < 3", "0 <= m < 3000, n: 0 <= n < 3000")
                + "mapping:\n  nodes:\n  - !Compute {einsum: E}\n")
    expect_error(["trace", big, "--max-tile-points", "1000"], ["more than the limit of 1000 (--max-tile-points)"],
                 big + ":")

    # An inner loop under a 10^12-wide tile: compiling used to visit every empty tile.
    hang = write("wide.yaml", WORKLOAD + """\
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 1000000000000}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
""")
    try:
        p = run("trace", hang, "--max-timesteps", "6", timeout=30)
        check(p.returncode == 0 and len(p.stdout.splitlines()) == 16,
              "a 10^12-iteration inner loop: 16 accesses in 6 timesteps (rc %d, stderr %r)" % (p.returncode, p.stderr))
        p = run("trace", hang, "--from", "999999999990", "--to", "1000000000000", timeout=30)
        check(p.returncode == 0 and p.stdout == "", "the empty end of that loop (rc %d)" % p.returncode)
    except subprocess.TimeoutExpired:
        check(False, "a 10^12-iteration inner loop hangs")


def test_option_errors():
    for args, words in (
            (["--nope"], ["--nope"]),
            (["--from", "abc"], ["--from"]),
            (["--from", "99999999999999999999"], ["--from takes a whole number >= 0, not 99999999999999999999 (too large)"]),
            (["--max-timesteps", "1e3"], ["--max-timesteps takes a whole number >= 0, not 1e3"]),
            (["--from", "-1"], ["--from"]),
            (["--to", "-5"], ["--to"]),
            (["--from", "5", "--to", "4"], ["--to (4) comes before --from (5)"]),
            (["--max-timesteps", "-1"], ["--max-timesteps"]),
            (["--max-tile-points", "0"], ["--max-tile-points"]),
            (["--max-tile-points", "-3"], ["--max-tile-points"]),
            (["--shard", "0/0"], ["--shard I/N needs 0 <= I < N"]),
            (["--shard", "-1/4"], ["--shard I/N needs 0 <= I < N"]),
            (["--shard", "4/4"], ["--shard I/N needs 0 <= I < N"]),
            (["--shard", "1/99999999999999999999"], ["--shard takes I/N"]),
            (["--shard", "1/2/3"], ["--shard takes I/N"]),
            (["--sample-timesteps", "9223372036854775807"], ["--sample-timesteps takes at most"]),
            (["--seed", "-1"], ["--seed takes a whole number from 0 to 18446744073709551615, not -1"]),
            (["--format", "xml"], ["--format"]),
            (["--tensors", "Q"], ["--tensors names 'Q'"]),
            (["--einsums", "Q"], ["--einsums names 'Q'"]),
            (["-D", "novalue"], ["-D takes KEY=VALUE"]),
            (["-D", "N=99999999999999999999"], ["does not fit in 64 bits"]),
    ):
        expect_error(["trace", GOOD, *args], words, what="trace %s" % " ".join(args))
    expect_error([], [], what="no subcommand")
    expect_error(["frobnicate"], [], what="an unknown subcommand")
    expect_error(["trace"], ["files"], what="no files")

    # Extreme but valid values: no output, exit 0, and a note on stderr that says why.
    for args, why in ((["--from", "9223372036854775807"], "past the end of the schedule (4 timesteps)"),
                      (["--from", "9223372036854775807", "--to", "9223372036854775807"], "past the end"),
                      (["--max-timesteps", "0"], "--max-timesteps 0"),
                      (["--shard", "3/9223372036854775807"], "of the 4 timesteps of [0, 4) is empty"),
                      (["--sample-timesteps", "0"], "--sample-timesteps 0")):
        p = run("trace", GOOD, *args)
        check(p.returncode == 0 and p.stdout == "" and
              p.stderr.startswith("looptrace: note: nothing selected: ") and why in p.stderr,
              "trace %s: exit 0, no output, a note naming %r (rc %d, %r)" % (args, why, p.returncode, p.stderr))
    p = run("trace", GOOD, "--max-timesteps", "9223372036854775807")
    check(p.returncode == 0 and len(p.stdout.splitlines()) == 16, "--max-timesteps 2^63-1 is everything")
    p = run("trace", GOOD, "-D", "N=-9223372036854775808")
    check(p.returncode == 0, "-D with INT64_MIN is fine (rc %d, %r)" % (p.returncode, p.stderr))


def test_head():
    # `looptrace trace ... | head -1` exits cleanly: status 0, nothing on stderr.
    tpl = write("long.yaml", WORKLOAD.replace("0 <= m < 4, n: 0 <= n < 3", "0 <= m < 100000, n: 0 <= n < 300")
                + MAPPING)
    for fmt in ("jsonl", "csv", "binary"):
        p = subprocess.run(["bash", "-c", 'set -o pipefail; "$0" trace "$1" --format "$2" | head -1 >/dev/null',
                            EXE, tpl, fmt], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and p.stderr == "",
              "trace --format %s | head -1: exit %d, stderr %r" % (fmt, p.returncode, p.stderr))


def main():
    return harness.main((test_spec_errors, test_resource_limits, test_option_errors, test_head))


if __name__ == "__main__":
    sys.exit(main())

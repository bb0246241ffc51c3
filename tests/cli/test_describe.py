#!/usr/bin/env python3
"""`looptrace describe`: the Einsums, tensors and compiled LoopTree of a spec as JSON or
text; -D values (booleans, overflow); warnings for unused -D values and top-level keys
given twice; errors in AccelForge's dialect (include cycles, failed asserts, unknown
top-level keys) exit 2 naming the file; a tensor whose accesses name different ranks
exits 2 in every subcommand alike. With ../shared/accelforge-examples, GPT-3 too.

usage: test_describe.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json
import os
import sys

import harness
from harness import ROOT, TMP, check, run, write

EXAMPLES = os.path.join(ROOT, "..", "shared", "accelforge-examples")

WORKLOAD = harness.CONV1D_WORKLOAD
MAPPING = harness.CONV1D_MAPPING


def describe(*args):
    p = run("describe", *args)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def test_workload_alone():
    w = write("conv.workload.yaml", WORKLOAD)
    p, d = describe(w)
    check(p.returncode == 0 and d is not None, "describe a workload: exit 0, JSON (rc %d, %r)" % (p.returncode, p.stderr))
    if d is None:
        return
    check(d["einsums"] == [{"name": "Conv", "rank_variables": {"p": 8, "r": 3},
                            "tensors": [{"name": "I", "output": False}, {"name": "W", "output": False},
                                        {"name": "O", "output": True}]}], "the Einsum: %r" % d["einsums"])
    # I is only read: the readers' image, p + r <= 9.
    check(d["tensors"] == {"I": {"ranks": ["P"], "shape": [10]}, "W": {"ranks": ["R"], "shape": [3]},
                           "O": {"ranks": ["P"], "shape": [8]}}, "the tensors: %r" % d["tensors"])
    check("mapping" not in d, "no mapping without one")
    check(p.stderr == "", "nothing on stderr (%r)" % p.stderr)


def test_with_mapping():
    w = write("conv.workload.yaml", WORKLOAD)
    m = write("conv.mapping.yaml", MAPPING)
    p, d = describe(w, m)
    check(p.returncode == 0 and d is not None, "describe with a mapping (rc %d, %r)" % (p.returncode, p.stderr))
    if d is None:
        return
    mapping = d.get("mapping", {})
    check(mapping.get("n_timesteps") == 24 and mapping.get("duration") == 24, "n_timesteps 24 (%r)" % mapping)
    kinds = [n["kind"] for n in mapping.get("nodes", [])]
    check(kinds == ["Storage", "Temporal", "Storage", "Temporal", "Compute"], "node kinds %r" % kinds)
    p_loop = mapping["nodes"][1]
    check(p_loop["rank_variable"] == "p" and p_loop["iterations"] == 8 and p_loop["iteration_duration"] == 3
          and p_loop["duration"] == 24 and p_loop["tile_shape"] == 1, "the p loop %r" % p_loop)
    check(mapping["nodes"][2] == {"kind": "Storage", "level": "GlobalBuffer", "tensors": ["I", "W", "O"],
                                  "duration": 3}, "the GlobalBuffer %r" % mapping["nodes"][2])
    t = run("describe", w, m, "--format", "text")
    lines = t.stdout.splitlines()
    check(t.returncode == 0 and "  Conv  p=8 r=3  I, W -> O" in lines
          and "  Temporal p  tile 1  8 iterations x 3 = 24 timesteps" in lines
          and "    Storage GlobalBuffer: I, W, O  (windows of 3 timesteps)" in lines
          and "      Compute Conv on MAC" in lines, "--format text (%r)" % t.stdout)
    bad = run("describe", w, "--format", "xml")
    check(bad.returncode == 2 and "--format" in bad.stderr, "--format xml is refused")


def test_defines():
    # -D X=True / -D X=False are booleans (SEMANTICS, settled questions).
    tpl = write("flag.yaml", "workload:\n  rank_sizes: {M: {{ 4 if FLAG else 2 }}}\n"
                             "  einsums: [\"E{{ FLAG }}[m] = A[m]\"]\n")
    for value, name, extent in (("False", "EFalse", 2), ("True", "ETrue", 4), ("false", "EFalse", 2)):
        p, d = describe(tpl, "-D", "FLAG=" + value)
        ok = d is not None and d["einsums"][0]["name"] == name and d["einsums"][0]["rank_variables"] == {"m": extent}
        check(p.returncode == 0 and ok, "-D FLAG=%s is a boolean (%r %r)" % (value, p.stdout[:200], p.stderr))
    p = run("describe", tpl, "-D", "FLAG=99999999999999999999")
    check(p.returncode == 2 and "-D FLAG=99999999999999999999: the integer" in p.stderr
          and "does not fit in 64 bits" in p.stderr, "an overflowing -D names the variable (%r)" % p.stderr)
    # A wrong -D value: the failing tag names it.
    loop = write("loop.yaml", "workload:\n  rank_sizes: {M: 2}\n  einsums:\n"
                              "  {% for i in range(N + 1) %}\n  - \"E{{i}}[m] = A[m]\"\n  {% endfor %}\n")
    p = run("describe", loop, "-D", "N=two")
    check(p.returncode == 2 and loop + ":4:3: error:" in p.stderr and "N is 'two' from -D N=two" in p.stderr,
          "a wrong -D value is named (%r)" % p.stderr)
    # An unused -D: a warning with the nearest used name; a later -D wins.
    p, d = describe(loop, "-D", "N=1", "-D", "NN=3", "-D", "n=2")
    check(p.returncode == 0 and d is not None and len(d["einsums"]) == 2, "N=1 gives 2 Einsums")
    check("looptrace: warning: -D NN is not used by any file" in p.stderr
          and "-D n is not used by any file" in p.stderr, "unused -D values are warned about (%r)" % p.stderr)
    p, d = describe(loop, "-D", "N=1", "-D", "N=2")
    check(d is not None and len(d["einsums"]) == 3, "the later -D N=2 wins")


def test_first_file_wins():
    a = write("a.yaml", WORKLOAD)
    b = write("b.yaml", WORKLOAD.replace("p < 8", "p < 5"))
    p, d = describe(a, b)
    check(p.returncode == 0 and d is not None and d["einsums"][0]["rank_variables"]["p"] == 8,
          "the first file's workload is used")
    check(b + ":1:1: warning: top-level key 'workload' is ignored here: " + a + " (line 1) gives it first"
          in p.stderr, "the warning names both files (%r)" % p.stderr)


def test_dialect_errors():
    def expect(args, words, what):
        p = run("describe", *args)
        check(p.returncode == 2, "%s: exit 2 (got %d, %r)" % (what, p.returncode, p.stderr))
        for word in words:
            check(word in p.stderr, "%s: stderr says %r (%r)" % (what, word, p.stderr))
        check("internal error" not in p.stderr, "%s: no internal error" % what)

    a = write("cycle-a.yaml", "{% set B = include('cycle-b.yaml') %}\nworkload: {{ B }}.workload\n")
    b = write("cycle-b.yaml", "{% set A = include('cycle-a.yaml') %}\nworkload: {{ A }}.workload\n")
    expect([a], [b + ":1:1: error: include cycle:", "(included from " + a + ":1:1)"], "an include cycle")
    part = write("part.yaml", "{% assert N > 2, 'N must exceed 2' %}\nworkload: {einsums: []}\n")
    main = write("main.yaml", "\n{% set P = include('part.yaml') %}\nworkload: {{ P }}.workload\n")
    expect([main, "-D", "N=1"], [part + ":1:1: error: {% assert %} failed: N must exceed 2 (included from " +
                                 main + ":2:1)"], "a failed assert in an included file")
    junk = write("junk.yaml", "arhc: {}\n")
    expect([junk], [junk + ":1:1: error: unknown top-level key 'arhc' in " + junk + " (did you mean 'arch'?)"],
           "an unknown top-level key")
    empty = write("empty.yaml", "")
    only = write("only-mapping.yaml", MAPPING)
    expect([empty, only], ["no 'workload:' in the spec files " + empty + ", " + only + " (" + empty + " is empty)"],
           "an empty file and a mapping")
    size = write("size.yaml", "workload:\n  rank_sizes: {M: 512/2}\n  einsums: [\"E[m] = A[m]\"]\n")
    expect([size], [size + ":2:19: error: rank size of 'M' must be an integer, not 256.0"], "a float rank size")


RANKS_SPEC = """\
workload:
  iteration_space_shape:
    m: 0 <= m < 2
    n: 0 <= n < 2
    k: 0 <= k < 2
  bits_per_value: {All: 8}
  einsums:
  - name: A
    tensor_accesses:
    - {name: X, projection: [m, n]}
    - {name: T, projection: [m, n], output: True}
  - name: B
    tensor_accesses:
    - {name: T, projection: [m, PROJ]}
    - {name: Y, projection: [m, k], output: True}
mapping:
  nodes:
  - !Storage {tensors: [X, T, Y], component: MainMemory}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: n, tile_shape: 1}
      - !Compute {einsum: A, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: B, component: MAC}
"""


def test_tensor_ranks():
    # ../shared/findings/stages/describe_ranks.yaml: B reads T as [M, K], A writes it as
    # [M, N]. AccelForge's Workload._validate rejects it; so does every subcommand, with
    # one message from the front end (describe alone used to).
    bad = write("ranks.yaml", RANKS_SPEC.replace("PROJ", "k"))
    message = (bad + ":14:7: error: tensor 'T' has ranks [M, K] in Einsum 'B' but [M, N] in Einsum 'A'; "
               "every access of a tensor names the same ranks\n")
    runs = [("describe",), ("describe", "--format", "text"), ("summary",), ("trace",), ("iterations",),
            ("movement",), ("plot",), ("transfers", "--level", "MainMemory")]
    for args in runs:
        p = run(args[0], bad, *args[1:])
        check(p.returncode == 2 and p.stdout == "" and p.stderr == "looptrace: " + message,
              "%s refuses a tensor with two rank lists (rc %d, %r)" % (" ".join(args), p.returncode, p.stderr))
    workload_only = write("ranks-workload.yaml", RANKS_SPEC.replace("PROJ", "k").split("mapping:")[0])
    p = run("describe", workload_only)
    check(p.returncode == 2 and "tensor 'T' has ranks [M, K] in Einsum 'B' but [M, N]" in p.stderr,
          "describe refuses it without a mapping too (%r)" % p.stderr)
    # The same spec with T read as [M, N]: every subcommand takes it.
    good = write("ranks-ok.yaml", RANKS_SPEC.replace("PROJ", "n"))
    for args in runs:
        p = run(args[0], good, *args[1:])
        wrote = p.stdout != "" or args[0] == "transfers"  # (no Storage below MainMemory: no requests)
        check(p.returncode == 0 and wrote, "%s takes T as [M, N] in both (rc %d, %r)"
              % (" ".join(args), p.returncode, p.stderr))


def test_unreached_branch():
    # The Nested after the root's Compute: no path reaches it; describe shows it (it used
    # to stop with an internal error) and summary compiles it the same way.
    spec = write("unreached.yaml", "workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n"
                                   "  - \"B[m] = A[m]\"\nmapping:\n  nodes:\n"
                                   "  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: B}\n"
                                   "  - !Nested\n    nodes:\n    - !Temporal {rank_variable: m, tile_shape: 3}\n"
                                   "    - !Compute {einsum: B}\n")
    p = run("describe", spec, "--format", "text")
    check(p.returncode == 0 and "    Nested  2 timesteps\n      Temporal m  tile 3  2 iterations x 1 = 2 timesteps\n"
          in p.stdout, "describe shows the unreached branch (rc %d, %r %r)" % (p.returncode, p.stdout, p.stderr))
    bad = write("unreached-bad.yaml", open(spec).read().replace("rank_variable: m, tile_shape: 3", "rank_variable: q, tile_shape: 3"))
    for cmd in ("describe", "summary", "trace"):
        p = run(cmd, bad)
        check(p.returncode == 2 and bad + ":11:7: error: !Temporal loop over rank variable 'q'" in p.stderr,
              "%s refuses a loop over q there (rc %d, %r)" % (cmd, p.returncode, p.stderr))


def test_accelforge_gpt3():
    gpt3 = os.path.join(EXAMPLES, "workloads", "transformers", "gpt", "gpt3_175B.yaml")
    if not os.path.isfile(gpt3):
        print("no %s; skipping the GPT-3 check" % gpt3)
        return
    p, d = describe(gpt3, "-D", "BATCH_SIZE=1", "-D", "DECODE=False", "-D", "N_NEW_TOKENS=256")
    check(p.returncode == 0 and d is not None, "GPT-3 175B prefill (rc %d, %r)" % (p.returncode, p.stderr[-300:]))
    if d is None:
        return
    names = [e["name"] for e in d["einsums"]]
    check(names == ["I", "V", "K", "Q", "QK", "QK_softmax", "AV", "Z", "FFA", "FFB"], "GPT-3's Einsums %r" % names)
    qk = d["einsums"][4]
    check(qk["rank_variables"] == {"b": 1, "m": 256, "h": 96, "e": 128, "p": 256}, "QK's extents %r" % qk)
    check(d["tensors"]["WFFA"] == {"ranks": ["G", "C"], "shape": [12288, 49152]}, "WFFA %r" % d["tensors"]["WFFA"])
    # The README's example: examples/gpt3_layer.mapping.yaml traced against it (decode).
    mapping = os.path.join(ROOT, "examples", "gpt3_layer.mapping.yaml")
    decode = ["-D", "BATCH_SIZE=1", "-D", "DECODE=True", "-D", "N_NEW_TOKENS=1", "-D", "N_CACHED_TOKENS=2047"]
    s = run("summary", gpt3, mapping, *decode)
    try:
        summary = json.loads(s.stdout)
    except ValueError:
        summary = {}
    check(s.returncode == 0 and summary.get("n_timesteps") == 1057
          and summary.get("einsum_timespans", {}).get("QK") == [289, 385]
          and sum(t["n_accesses"] for t in summary.get("traces", [])) == 1879707264,
          "the README's GPT-3 summary (rc %d, %r)" % (s.returncode, s.stderr[-300:]))
    t = run("trace", gpt3, mapping, *decode, "--einsums", "QK", "--from", "289", "--to", "290")
    first = t.stdout.splitlines()[:1]
    check(t.returncode == 0 and first == ['{"t": 289, "einsum": "QK", "tensor": "Q", "write": false, "element": 0, '
                                          '"coords": [0, 0, 0, 0]}'], "the README's GPT-3 trace %r" % first)
    p, d = describe(gpt3, "-D", "BATCH_SIZE=1", "-D", "DECODE=True", "-D", "N_NEW_TOKENS=1", "-D",
                    "N_CACHED_TOKENS=4096")
    check(p.returncode == 2 and "{% assert %} failed: N_NEW_TOKENS + N_CACHED_TOKENS exceeds MAX_N_TOKENS" in p.stderr
          and "_max_tokens_assert.yaml" in p.stderr and "gpt3_175B.yaml" in p.stderr,
          "GPT-3's token assert (%r)" % p.stderr)


def main():
    return harness.main((test_workload_alone, test_with_mapping, test_defines, test_first_file_wins,
                         test_dialect_errors, test_tensor_ranks, test_unreached_branch,
                         test_accelforge_gpt3))


if __name__ == "__main__":
    sys.exit(main())

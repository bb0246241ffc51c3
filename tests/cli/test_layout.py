#!/usr/bin/env python3
"""Drives `--layout FILE` (SEMANTICS "Layouts") of `looptrace transfers` and `looptrace
movement`: the README's worked examples with addresses worked out by hand (a conv1d with
a channel rank, its `order` reversed and blocked; a GEMM weight tile row-major against
8 x 8 blocks, 512 lines against 64), the costs per level with banks, an empty layout
file giving today's bytes, LayoutLoop's form read as the same layout, and bad layout
files (exit 2, the file and line named).

usage: test_layout.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json

import harness
from harness import check, run, write

# The conv1d of SEMANTICS with a channel rank: I[C, P] (2 x 10), W[C, R] (2 x 3), O[P].
CONV = """\
workload:
  iteration_space_shape:
    c: 0 <= c < 2
    p: 0 <= p < 8
    r: 0 <= r < 3
  bits_per_value: {All: 8}
  einsums:
  - name: Conv
    tensor_accesses:
    - {name: I, projection: {C: c, P: p + r}}
    - {name: W, projection: {C: c, R: r}}
    - {name: O, projection: [p], output: True}
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [I, W, O]}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [I, W, O]}
  - !Temporal {rank_variable: c, tile_shape: 1}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Compute {einsum: Conv, component: MAC}
"""

# W[K, N] (64 x 64 bytes) read by GlobalBuffer in 8 x 8 tiles.
GEMM = """\
workload:
  iteration_space_shape: {m: 0 <= m < 8, k: 0 <= k < 64, n: 0 <= n < 64}
  bits_per_value: {All: 8}
  einsums: ["Z[m, n] = A[m, k] * W[k, n]"]
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [A, W, Z]}
  - !Temporal {rank_variable: n, tile_shape: 8}
  - !Temporal {rank_variable: k, tile_shape: 8}
  - !Storage {component: GlobalBuffer, tensors: [W]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Compute {einsum: Z, component: MAC}
"""


def transfers(spec, layout, *extra, method=()):
    args = ["transfers", spec, "--level", "MainMemory", *extra, *method]
    if layout is not None:
        args += ["--layout", layout]
    r = run(*args)
    check(r.returncode == 0, "transfers %s exits 0 (%s)" % (" ".join(args[2:]), r.stderr.strip()))
    return r.stdout


def requests(text, t=None):
    out = [(q["t"], q["op"][0], q["address"], q["tensor"]) for q in map(json.loads, text.splitlines())]
    return [q for q in out if t is None or q[0] == t]


def both_engines(spec, layout, *extra):
    """The closed form's output, checked against --method enumerate's byte for byte."""
    a = transfers(spec, layout, *extra)
    b = transfers(spec, layout, *extra, method=("--method", "enumerate"))
    check(a == b, "closed form and enumeration agree under %s" % layout)
    return a


def test_conv_order_and_block():
    spec = write("conv.yaml", CONV)
    # Row-major I[c, p] at c*10 + p: the first window (p = 0) holds P 0..2 of both
    # channels, bytes 0-2 and 10-12: 4-byte lines 0, 8, 12.
    rm = both_engines(spec, None, "--line-bytes", "4")
    check(requests(rm, 0) == [(0, "r", 0, "I"), (0, "r", 8, "I"), (0, "r", 12, "I"),
                              (0, "r", 4096, "W"), (0, "r", 4100, "W")], "row-major t=0: %r" % requests(rm, 0))
    # order [P, C]: I[c, p] at p*2 + c, the tile is bytes 0-5: lines 0 and 4.
    rev = write("rev.yaml", "layout:\n  tensors:\n    I: {order: [P, C]}\n")
    got = both_engines(spec, rev, "--line-bytes", "4")
    check(requests(got, 0)[:2] == [(0, "r", 0, "I"), (0, "r", 4, "I")], "order [P, C] t=0: %r" % requests(got, 0))
    # block {C: 2, P: 4}: blocks of 2 x 4 in order [C, P], I[c, p] at (p // 4) * 8 + c * 4 + p % 4.
    # The window p = 2 (P 2..4) reads 2, 3, 6, 7, 8, 12: lines 0, 4, 8, 12.
    blk = write("blk.yaml", "layout:\n  tensors:\n    I: {block: {C: 2, P: 4}}\n")
    got = both_engines(spec, blk, "--line-bytes", "4")
    check([q for q in requests(got, 12) if q[1] == "r" and q[3] == "I"] ==
          [(12, "r", a, "I") for a in (0, 4, 8, 12)], "blocked t=12: %r" % requests(got, 12))
    # base and align: W at 0x8000, O at the next 256 after it
    based = write("based.yaml", "layout:\n  align: 256\n  tensors:\n    W: {base: 0x8000}\n")
    got = both_engines(spec, based, "--line-bytes", "4")
    check(requests(got, 6)[:2] == [(6, "w", 0x8100, "O"), (6, "r", 0, "I")] and
          (0, "r", 0x8000, "W") in requests(got, 0), "bases: %r" % requests(got, 6)[:3])


def test_conv_costs_with_banks():
    spec = write("conv.yaml", CONV)
    lay = write("banks.yaml", "layout:\n  tensors:\n    I: {block: {C: 2, P: 4}}\n"
                "  levels:\n    MainMemory: {banks: 2, bank_bytes: 4}\n")
    r = run("movement", spec, "--layout", lay, "--line-bytes", "4")
    check(r.returncode == 0, "movement --layout exits 0 (%s)" % r.stderr.strip())
    if r.returncode:
        return
    level = json.loads(r.stdout)["levels"][0]
    cost = level.get("layout", {})
    per = {t["tensor"]: t for t in cost.get("tensors", [])}
    # I: 6 bytes a window, 2 lines at the fewest (16 over 8 windows); blocked, the windows
    # p = 2, 3, 6, 7 straddle a block and take 4 lines: 24. Lines 0, 4, 8, 12 fall in banks
    # 0, 1, 0, 1: 1 cycle for a 2-line tile, 2 for a 4-line one, 12 in all.
    check((per.get("I", {}).get("fill_lines"), per.get("I", {}).get("min_fill_lines")) == (24, 16),
          "I fill lines 24 against 16: %r" % per.get("I"))
    check((per.get("I", {}).get("bank_cycles"), per.get("I", {}).get("max_tile_cycles")) == (12, 2),
          "I bank cycles 12, at most 2 a tile: %r" % per.get("I"))
    check((per.get("O", {}).get("drain_lines"), per.get("O", {}).get("min_drain_lines")) == (8, 8), "O drains")
    # t = 12: I's 4 lines (2 per bank), W's 2 (1 per bank), O's drain at 0x2000 (bank 0)
    check(cost.get("peak_bank_requests") == {"requests": 4, "timestep": 12},
          "peak bank requests: %r" % cost.get("peak_bank_requests"))
    text = run("movement", spec, "--layout", lay, "--line-bytes", "4", "--format", "text").stdout
    check("MainMemory layout (4-byte lines, 2 banks of 4 bytes)" in text, "the text table's heading")


def test_banks_from_the_arch():
    # AccelForge's `extra_attributes_for_component_model: {n_banks: 2}` on MainMemory: banks
    # of one line (the layout file gives none), so with 4-byte lines the same as above.
    spec = write("conv.yaml", CONV)
    arch = write("arch.yaml", "arch:\n  nodes:\n  - !Memory\n    name: MainMemory\n    size: inf\n"
                 "    extra_attributes_for_component_model: {n_banks: 2}\n"
                 "  - !Memory {name: GlobalBuffer, size: inf}\n  - !Compute {name: MAC}\n")
    lay = write("blk.yaml", "layout:\n  tensors:\n    I: {block: {C: 2, P: 4}}\n")
    r = run("movement", spec, arch, "--layout", lay, "--line-bytes", "4")
    check(r.returncode == 0, "movement with an arch exits 0 (rc %d: %s)" % (r.returncode, r.stderr.strip()))
    if r.returncode == 0:
        cost = json.loads(r.stdout)["levels"][0].get("layout", {})
        per = {t["tensor"]: t for t in cost.get("tensors", [])}
        check((cost.get("banks"), cost.get("bank_bytes"), per.get("I", {}).get("bank_cycles")) == (2, 4, 12),
              "n_banks from the arch: %r" % {k: cost.get(k) for k in ("banks", "bank_bytes")})
    # A level of the arch that no Storage node uses is no typo (LayoutLoop files list every level).
    arch2 = write("arch2.yaml", "arch:\n  nodes:\n  - !Memory {name: MainMemory, size: inf}\n"
                  "  - !Memory {name: GlobalBuffer, size: inf}\n  - !Memory {name: RegisterFile, size: 64}\n"
                  "  - !Compute {name: MAC}\n")
    rf = write("rf.yaml", "layout:\n  levels:\n    RegisterFile: {banks: 4}\n")
    r = run("transfers", spec, arch2, "--level", "MainMemory", "--layout", rf)
    check(r.returncode == 0, "a layout naming an arch level without Storage nodes (rc %d: %s)" % (r.returncode, r.stderr))
    r = run("transfers", spec, "--level", "MainMemory", "--layout", rf)
    check(r.returncode == 2 and "rf.yaml:3:" in r.stderr, "without the arch it is unknown (%s)" % r.stderr.strip())


def test_gemm_row_major_against_blocked():
    spec = write("gemm.yaml", GEMM)
    empty = write("empty.yaml", "layout:\n  tensors: {}\n")
    blocked = write("wblk.yaml", "layout:\n  tensors:\n    W: {block: {K: 8, N: 8}}\n")

    def w_cost(lay):
        r = run("movement", spec, "--layout", lay)
        check(r.returncode == 0, "movement exits 0 (%s)" % r.stderr.strip())
        level = json.loads(r.stdout)["levels"][0] if r.returncode == 0 else {}
        return {t["tensor"]: (t["fill_lines"], t["min_fill_lines"]) for t in level.get("layout", {}).get("tensors", [])}
    # 64 tiles of 8 x 8 bytes: row-major, each row of a tile is in its own 64-byte line (8
    # lines a tile); blocked, a tile is one block, one line.
    check(w_cost(empty) == {"W": (512, 64)}, "row-major W: %r" % w_cost(empty))
    check(w_cost(blocked) == {"W": (64, 64)}, "blocked W: %r" % w_cost(blocked))
    got = both_engines(spec, blocked)
    # the second tile (k 8..15) is the block after the first: 4096 + 512 (8 blocks of N)
    check(requests(got)[:2] == [(0, "r", 4096, "W"), (512, "r", 4608, "W")], "blocked W: %r" % requests(got)[:2])


def test_empty_layout_is_row_major():
    spec = write("conv.yaml", CONV)
    empty = write("empty.yaml", "layout:\n  tensors: {}\n")
    for lb in ("1", "4", "64"):
        check(transfers(spec, None, "--line-bytes", lb) == transfers(spec, empty, "--line-bytes", lb),
              "an empty layout file changes nothing (--line-bytes %s)" % lb)


def test_timeloop_form():
    spec = write("conv.yaml", CONV)
    # LayoutLoop: intraline factors are the block, the interline permutation (innermost
    # first) the order: "PC" reversed is [C, P]; the intraline one the block order.
    tl = write("tl.yaml", "layout:\n"
               "  - {target: MainMemory, type: interline, factors: \"C=1 P=3\", permutation: \"PCR\"}\n"
               "  - {target: MainMemory, type: intraline, factors: \"C=2 P=4\", permutation: \"PCR\",\n"
               "     num_read_ports: 1}\n")
    ours = write("ours.yaml", "layout:\n  levels:\n    MainMemory:\n      tensors:\n"
                 "        I: {block: {C: 2, P: 4}, pad: {P: 12, C: 2}}\n"
                 "        W: {block: {C: 2}, pad: {C: 2}}\n")
    a, b = transfers(spec, tl, "--line-bytes", "4"), transfers(spec, ours, "--line-bytes", "4")
    check(a == b and a != "", "LayoutLoop's form reads as the same layout")


def test_bad_files():
    spec = write("conv.yaml", CONV)
    cases = [
        ("dup.yaml", "layout:\n  tensors:\n    I: {order: [C, C]}\n", ":3:", "names rank C twice"),
        ("missing.yaml", "layout:\n  tensors:\n    I:\n      order: [P]\n", ":4:", "leaves out rank C"),
        ("lacks.yaml", "layout:\n  tensors:\n    W: {block: {P: 2}}\n", ":3:", "does not have"),
        ("overlap.yaml", "layout:\n  tensors:\n    I: {base: 0}\n    W:\n      base: 0x10\n", ":5:", "overlaps"),
        ("unknown.yaml", "layout:\n  tensors:\n    I: {blocks: {P: 2}}\n", ":3:", "unknown key 'blocks'"),
        ("tensor.yaml", "layout:\n  tensors:\n    X: {}\n", ":3:", "tensor X"),
        ("level.yaml", "layout:\n  levels:\n    DRAM: {banks: 4}\n", ":3:", "level DRAM"),
        ("zero.yaml", "layout:\n  tensors:\n    I: {block: {P: 0}}\n", ":3:", "at least 1"),
        ("yaml.yaml", "layout:\n  tensors: [\n", ":", "invalid YAML"),
        ("align.yaml", "layout:\n  align: 3\n", ":2:", "power of two"),
        ("tl.yaml", "layout:\n  - {target: MainMemory, type: sideways}\n", ":2:", "interline or intraline"),
    ]
    for name, text, line, words in cases:
        path = write(name, text)
        r = run("transfers", spec, "--level", "MainMemory", "--layout", path)
        check(r.returncode == 2 and (path + line) in r.stderr and words in r.stderr,
              "%s: exit 2 naming %s%s and '%s' (rc %d: %s)" % (name, name, line, words, r.returncode, r.stderr.strip()))
    r = run("movement", spec, "--layout", write("ok.yaml", "layout:\n  tensors: {}\n"), "--from", "2")
    check(r.returncode == 2 and "whole runs" in r.stderr, "movement --layout refuses --from (%s)" % r.stderr.strip())


def main():
    return harness.main((test_conv_order_and_block, test_conv_costs_with_banks, test_banks_from_the_arch,
                         test_gemm_row_major_against_blocked,
                         test_empty_layout_is_row_major, test_timeloop_form, test_bad_files))


if __name__ == "__main__":
    raise SystemExit(main())

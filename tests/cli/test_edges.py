#!/usr/bin/env python3
"""The rough edges of issue 12: --version, misspelt subcommands and options, options
offered only where they work, empty selections said on stderr, tensor filters and
memory levels, JSON output for hostile names.

usage: test_edges.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import collections
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import harness

from harness import EXE, ROOT, check, run, write  # noqa: E402

# harness.MATMULS at N=6: DRAM holds A, B, C, Y; Buffer holds Z, one window per m tile.
# Per m tile: 3 n-tiles x 4 m x 5 k = 60 steps of Z, then 4 m x 3 n-tiles = 12 of Y.
MATMULS = write("matmuls.yaml", harness.MATMULS)


def summary(*args):
    p = run("summary", MATMULS, *args)
    check(p.returncode == 0, "summary %s exits 0 (stderr %r)" % (args, p.stderr))
    return json.loads(p.stdout) if p.returncode == 0 else {}


def test_tensor_filter_drops_levels():
    s = summary()
    check(s.get("memory_levels") == ["DRAM", "Buffer"], "both levels without a filter")
    s = summary("--tensors", "A")
    check(s.get("memory_levels") == ["DRAM"], "--tensors A: Buffer (only Z) is dropped: %r"
          % s.get("memory_levels"))
    check(s.get("tile_windows") == {"DRAM": {"A": [[0, 144]]}}, "--tensors A windows %r"
          % s.get("tile_windows"))
    s = summary("--tensors", "Z")
    check(s.get("memory_levels") == ["Buffer"], "--tensors Z: DRAM is dropped")
    check(s.get("tile_windows") == {"Buffer": {"Z": [[0, 72], [72, 144]]}}, "--tensors Z windows")
    # A prefix keeps a level's entry even when it leaves it no window.
    s = summary("--tensors", "Z,A", "--max-timesteps", "0")
    check(s.get("memory_levels") == ["DRAM", "Buffer"], "a prefix keeps both levels")
    check(s.get("tile_windows") == {"DRAM": {"A": []}, "Buffer": {"Z": []}}, "empty windows kept")


def test_progress_forced_into_a_pipe():
    workload = os.path.join(ROOT, "bench", "specs", "gemm.workload.yaml")
    mapping = os.path.join(ROOT, "bench", "specs", "huge_gemm.mapping.yaml")
    # A few seconds of a 10240^3 GEMM: the line appears from 1 s on, one line a second.
    # (200M timesteps took 1.3 s by stop 47, and a run under 1 s printed no line.)
    p = subprocess.run([EXE, "trace", workload, mapping, "--progress", "--max-timesteps", "800000000",
                        "--format", "binary"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = p.stderr.splitlines()
    check(p.returncode == 0 and lines and all("/800M timesteps" in l for l in lines) and "\r" not in p.stderr,
          "--progress in a pipe: whole lines of the 800M timesteps (%r)" % p.stderr[:300])
    p = run("trace", workload, mapping, "--max-timesteps", "1000", "--format", "binary")
    check(p.stderr == "", "without --progress a pipe gets no line (%r)" % p.stderr[:200])
    p = run("movement", MATMULS, "--progress")
    check(p.returncode == 2 and "--progress" in p.stderr, "movement draws no progress: no --progress (%r)"
          % p.stderr[:200])


def test_version():
    version = re.search(r"version\s*:\s*'([^']+)'", open(os.path.join(ROOT, "meson.build")).read()).group(1)
    p = run("--version")
    check(p.returncode == 0 and p.stdout == "looptrace %s\n" % version,
          "--version prints 'looptrace %s' (rc %d, %r %r)" % (version, p.returncode, p.stdout, p.stderr))


def test_misspellings():
    # (arguments, what stderr must say); every one exits 2 and names no file.
    for args, words in (
            (["movment"], ["unknown subcommand 'movment'", "did you mean 'movement'?"]),
            (["zzzzzz"], ["unknown subcommand 'zzzzzz'", "summary, trace, plot, iterations", "transfers"]),
            (["tarce", MATMULS], ["unknown subcommand 'tarce'", "did you mean 'trace'?"]),
            (["summary", MATMULS, "--max-timestep", "3"],
             ["unknown option '--max-timestep'", "did you mean '--max-timesteps'?"]),
            (["trace", MATMULS, "--tensor=A"], ["unknown option '--tensor'", "did you mean '--tensors'?"]),
            (["trace", MATMULS, "-d", "N=3"], ["unknown option '-d'", "did you mean '-D'?"]),
            (["summary", MATMULS, "--format", "csv"],
             ["unknown option '--format' for 'looptrace summary'", "is an option of trace, plot"]),
            (["iterations", MATMULS, "--tensors", "A"],
             ["unknown option '--tensors' for 'looptrace iterations'"]),
            (["--frobnicate"], ["unknown option '--frobnicate'"])):
        p = run(*args)
        check(p.returncode == 2, "%s exits 2 (got %d)" % (args, p.returncode))
        for w in words:
            check(w in p.stderr, "%s: stderr says %r (%r)" % (args, w, p.stderr))
        check("File does not exist" not in p.stderr, "%s: no complaint about a file (%r)" % (args, p.stderr))
    # Values that look like options are still values.
    p = run("trace", MATMULS, "--from", "-1")
    check(p.returncode == 2 and "unknown option" not in p.stderr, "--from -1 is a bad value, not an option")


def help_options(sub):
    p = run(sub, "--help")
    return set(re.findall(r"(--[a-z][a-z-]*)", p.stdout))


def test_options_per_subcommand():
    selection = {"--einsums", "--max-timesteps", "--from", "--to", "--sample-timesteps", "--seed", "--shard",
                 "--define"}
    for sub in ("summary", "trace", "plot", "iterations"):
        opts = help_options(sub)
        check(selection <= opts, "%s offers the selection options (missing %s)" % (sub, selection - opts))
    it = help_options("iterations")
    # No tensor is projected, but a timestep's spatial instances are held: the tile limit bounds them.
    check("--tensors" not in it and "--max-tile-points" in it,
          "iterations offers --max-tile-points but not --tensors (%s)" % sorted(it))
    check("--format" not in help_options("summary"), "summary offers no --format")
    for sub in ("summary", "trace", "plot"):
        check({"--tensors", "--max-tile-points"} <= help_options(sub), "%s offers --tensors, --max-tile-points" % sub)
    check({"--elements", "--timesteps", "--memory-level"} <= help_options("plot"), "plot offers its zooms")
    # --einsums does work in iterations: only Y's lines.
    p = run("iterations", MATMULS, "--einsums", "Y")
    einsums = {json.loads(l)["einsum"] for l in p.stdout.splitlines()}
    check(p.returncode == 0 and einsums == {"Y"}, "iterations --einsums Y lists only Y (%s)" % einsums)


def test_nothing_selected():
    note = "looptrace: note: nothing selected: "
    # Z's accesses are A, B, Z: --tensors C --einsums Z share no pair.
    for sub in ("trace", "summary"):
        p = run(sub, MATMULS, "--tensors", "C", "--einsums", "Z")
        check(p.returncode == 0, "%s with disjoint filters exits 0" % sub)
        check(p.stderr.startswith(note) and "--einsums Z" in p.stderr and "--tensors C" in p.stderr and
              "Z accesses A, B, Z" in p.stderr, "%s: the note names the filters (%r)" % (sub, p.stderr))
    p = run("trace", MATMULS, "--tensors", "C", "--einsums", "Z")
    check(p.stdout == "", "an empty trace writes nothing")
    for sub in ("trace", "summary", "iterations"):
        p = run(sub, MATMULS, "--from", "300")
        check(p.returncode == 0 and p.stderr.startswith(note) and
              "--from 300 is at or past the end of the schedule (144 timesteps)" in p.stderr,
              "%s --from 300: note (%r)" % (sub, p.stderr))
    # Y computes only in [60, 72) of each 72-timestep m tile: nothing of it in [0, 50).
    p = run("trace", MATMULS, "--einsums", "Y", "--to", "50")
    check(p.returncode == 0 and p.stderr.startswith(note) and "--einsums Y access nothing in timesteps [0, 50)"
          in p.stderr, "Y before it computes: note (%r)" % p.stderr)
    # Runs that select something stay silent.
    for sub in ("trace", "summary", "iterations"):
        p = run(sub, MATMULS, "--to", "61")
        check(p.returncode == 0 and p.stderr == "", "%s with accesses: stderr empty (%r)" % (sub, p.stderr))


# Names with a control character, a quote, a backslash, a tab, an escape sequence,
# invalid UTF-8 (a lone 0xff, a truncated sequence, an encoded surrogate) and é.
EINSUM = b'"E\\x01\\"q\\\\b\\t\\u00e9"'
TENSOR_A = b'"A\\x1b[31m\\n"'
TENSOR_B = b'"B\xff\xfe\xc3("'
LEVEL = b'"L\\x02\xed\xa0\x80"'
HOSTILE = b"""workload:
  iteration_space_shape: {m: 0 <= m < 3}
  einsums:
  - name: %s
    tensor_accesses:
    - {name: %s, projection: [m]}
    - {name: %s, projection: [m], output: True}
mapping:
  nodes:
  - !Storage {component: %s, tensors: [%s, %s]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: %s}
""" % (EINSUM, TENSOR_A, TENSOR_B, LEVEL, TENSOR_A, TENSOR_B, EINSUM)


def parse_json(raw, what):
    """Python's json module on the bytes as UTF-8 (strict: invalid UTF-8 fails)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except Exception as e:  # noqa: BLE001
        check(False, "%s is not JSON: %r (%r)" % (what, e, raw[:200]))
        return None


def test_hostile_names_in_json():
    spec = write("hostile.yaml", HOSTILE, "wb")
    einsum = 'E\x01"q\\b\t\u00e9'
    tensor_a = "A\x1b[31m\n"
    tensor_b = "B\ufffd\ufffd\ufffd("  # each invalid sequence is one U+FFFD
    p = run("summary", spec, text=False)
    check(p.returncode == 0, "summary of hostile names exits 0 (%r)" % p.stderr[-300:])
    s = parse_json(p.stdout, "summary")
    if s is not None:
        check(s["tensors"] == [tensor_a, tensor_b], "summary tensors %r" % s["tensors"])
        check(s["einsums"] == [einsum], "summary einsums %r" % s["einsums"])
        check(s["memory_levels"] == ["L\x02\ufffd\ufffd\ufffd"], "summary level %r" % s["memory_levels"])
        check(s["traces"][1]["n_accesses"] == 3, "3 writes of B")
    p = run("trace", spec, text=False)
    lines = [parse_json(l, "trace line") for l in p.stdout.splitlines()]
    check(p.returncode == 0 and len(lines) == 6, "trace: 6 JSON lines (%d)" % len(lines))
    if lines and lines[0] is not None:
        check(lines[0] == {"t": 0, "einsum": einsum, "tensor": tensor_a, "write": False, "element": 0,
                           "coords": [0]}, "the first line %r" % lines[0])
        check({(l["tensor"], l["write"]) for l in lines if l} == {(tensor_a, False), (tensor_b, True)},
              "the tensors and the 'write' key of the lines")
    p = run("iterations", spec, text=False)
    its = [parse_json(l, "iteration line") for l in p.stdout.splitlines()]
    check(p.returncode == 0 and its == [{"t": t, "einsum": einsum, "origin": {"m": t}} for t in range(3)],
          "iterations: one JSON line per timestep (%r)" % its)
    p = run("movement", spec, text=False)
    check(p.returncode == 0, "movement of hostile names exits 0 (%r)" % p.stderr[-300:])
    m = parse_json(p.stdout, "movement") if p.returncode == 0 else None
    if m is not None:
        level = m["levels"][0]
        check(level["level"] == "L\x02\ufffd\ufffd\ufffd", "movement level %r" % level["level"])
        check([t["tensor"] for t in level["tensors"]] == [tensor_a, tensor_b],
              "movement tensors %r" % [t["tensor"] for t in level["tensors"]])
    # CSV and binary carry the bytes as given; the SVG is well-formed XML.
    p = run("plot", spec, text=False)
    try:
        root = ET.fromstring(p.stdout)
        labels = [e.text for e in root.iter() if e.get("class") == "title"]
        check(p.returncode == 0 and len(labels) == 2, "plot: a well-formed SVG with two panels (%r)" % labels)
    except ET.ParseError as e:
        check(False, "plot of hostile names is not XML: %r" % e)


def test_lru_cache_example():
    exe = os.path.join(os.path.dirname(os.path.dirname(EXE)), "examples", "lru_cache")
    if not os.path.exists(exe):
        print("no %s (examples not built): skipped" % exe)
        return
    example = [os.path.join(ROOT, "examples", "specs", f) for f in ("matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml")]
    defines = ["-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=4"]
    for args, words in ((["abc", *example], "CAPACITY must be a whole number of elements, at least 1, not 'abc'"),
                        (["0", *example], "not '0'"),
                        (["-3", *example], "not '-3'"),
                        (["99999999999999999999999", *example], "too large"),
                        (["16"], "no spec file"),
                        (["16", "no-such.yaml"], "cannot read the spec file 'no-such.yaml'"),
                        (["16", *example, "-D"], "-D takes KEY=VALUE"),
                        (["16", *example, "-D", "X"], "-D takes KEY=VALUE, not 'X'"),
                        (["16", *example, "--capacity", "3"], "unknown option '--capacity'")):
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and words in p.stderr and "usage: lru_cache" in p.stderr and p.stdout == "",
              "lru_cache %s exits 2 saying %r (rc %d, %r)" % (args[:1], words, p.returncode, p.stderr))
    # A good run: per tensor, the hits of an LRU cache of 16 (tensor, element) pairs fed
    # by `looptrace trace`, worked out here.
    p = subprocess.run([exe, "16", *example, *defines], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.startswith("LRU cache of 16 elements over 256 timesteps"),
          "lru_cache 16 runs (rc %d, %r)" % (p.returncode, p.stderr))
    cache, stats = collections.OrderedDict(), {}
    for line in run("trace", *example, *defines).stdout.splitlines():
        a = json.loads(line)
        key = (a["tensor"], a["element"])
        hit = key in cache
        if hit:
            cache.move_to_end(key)
        else:
            cache[key] = True
            if len(cache) > 16:
                cache.popitem(last=False)
        h, n = stats.get(a["tensor"], (0, 0))
        stats[a["tensor"]] = (h + hit, n + 1)
    for tensor, (h, n) in sorted(stats.items()):
        want = "  %s: %d hits / %d accesses" % (tensor, h, n)
        check(want in p.stdout, "lru_cache reports %r (%r)" % (want, p.stdout))


def main():
    return harness.main((test_tensor_filter_drops_levels, test_version, test_progress_forced_into_a_pipe,
                         test_misspellings,
                         test_options_per_subcommand, test_nothing_selected, test_hostile_names_in_json,
                         test_lru_cache_example))


if __name__ == "__main__":
    sys.exit(main())

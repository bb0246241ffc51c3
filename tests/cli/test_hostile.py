#!/usr/bin/env python3
"""Hostile input that once crashed or misled the command (issues 19 and 20): names of
any length and any bytes in every output format, the inputs of ../shared/findings
(each must end with exit 0, 1 or 2 and a message, never a signal), unbounded
allocation, failed writes, option messages, an empty mapping, control bytes in
messages and interrupts between records.

usage: test_hostile.py PATH/TO/looptrace

.ci/test runs it against the ASan + UBSan build (build-fuzz/src/looptrace), so a write
past a buffer is a failure here even where it would not crash. Prints one line per
failed check and 'N passed, M failed' last; exits 1 on any failure."""
import csv
import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import harness

from harness import EXE, ROOT, check, run, write  # noqa: E402

FINDINGS = os.path.join(ROOT, "..", "shared", "findings")
LENGTHS = (0, 255, 256, 600, 65536, 70000)


def yaml_quote(raw):
    """A YAML double-quoted scalar holding the bytes `raw` (control bytes escaped;
    other bytes, invalid UTF-8 among them, written as they are)."""
    out = bytearray(b'"')
    for b in raw:
        if b < 0x20 or b == 0x7f:
            out += b"\\x%02x" % b
        elif b in (0x22, 0x5c):
            out += b"\\" + bytes([b])
        else:
            out.append(b)
    return bytes(out + b'"')


def spec_with_names(einsum, tensor, level):
    """Y[m] = X[m] (m < 3) with the input tensor, the Einsum and the outer level named
    by these bytes (an empty name is left as it is: the loader must refuse it)."""
    return b"""workload:
  iteration_space_shape: {m: 0 <= m < 3}
  einsums:
  - name: %s
    tensor_accesses:
    - {name: %s, projection: [m]}
    - {name: Y, projection: [m], output: True}
mapping:
  nodes:
  - !Storage {component: %s, tensors: [%s, Y]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Storage {component: Buf, tensors: [%s, Y]}
  - !Compute {einsum: %s}
""" % (yaml_quote(einsum), yaml_quote(tensor), yaml_quote(level), yaml_quote(tensor), yaml_quote(tensor),
       yaml_quote(einsum))


def as_json_text(raw):
    """What a JSON writer gives for these bytes: invalid UTF-8 becomes U+FFFD."""
    return raw.decode("utf-8", errors="replace")


SUBCOMMANDS = (
    ("trace", "--format", "jsonl"), ("trace", "--format", "csv"), ("trace", "--format", "binary"),
    ("trace", "--format", "jsonl", "--threads", "2"),
    ("summary",), ("summary", "--windows", "compact"), ("iterations",), ("describe",),
    ("describe", "--format", "text"), ("movement",), ("movement", "--format", "text"),
    ("transfers", "--level", "{level}"), ("transfers", "--level", "{level}", "--format", "dramsim3"),
    ("transfers", "--level", "{level}", "--format", "ramulator2"), ("plot", "-o", "-"),
    ("cache", "--curve"), ("cache", "--format", "text"), ("cache", "--source", "transfers:{level}"),
    ("timeline",), ("plot", "--footprint", "-o", "-"),
)


def no_signal(p, what):
    check(p.returncode >= 0, "%s: ended by signal %d (stderr %r)" % (what, -p.returncode, p.stderr[-400:]))
    check(b"AddressSanitizer" not in p.stderr and b"runtime error" not in p.stderr,
          "%s: a sanitizer report: %r" % (what, p.stderr[-800:]))


def check_output(args, p, einsum, tensor, what):
    """The output parses in its format and carries the names."""
    out = p.stdout
    sub, fmt = args[0], args[args.index("--format") + 1] if "--format" in args else None
    want_tensor, want_einsum = as_json_text(tensor), as_json_text(einsum)
    try:
        if sub == "trace" and fmt == "jsonl":
            lines = [json.loads(l) for l in out.decode("utf-8").splitlines()]
            check(len(lines) == 6 and {l["tensor"] for l in lines} == {want_tensor, "Y"}
                  and {l["einsum"] for l in lines} == {want_einsum}, "%s: 6 lines naming the tensor" % what)
        elif sub == "trace" and fmt == "csv":
            rows = list(csv.reader(io.StringIO(out.decode("utf-8", errors="replace"))))
            check(len(rows) == 7, "%s: a header and 6 rows (%d)" % (what, len(rows)))
        elif sub == "trace" and fmt == "binary":
            check(out[:8] == b"LOOPTRC1", "%s: the magic" % what)
            n = struct.unpack_from("<I", out, 8)[0]
            at, names = 12, []
            for _ in range(n):
                at += 1
                for _ in range(2):
                    size = struct.unpack_from("<H", out, at)[0]
                    names.append(out[at + 2:at + 2 + size])
                    at += 2 + size
                at += 1 + 8 * out[at]
            check(names[:2] == [einsum, tensor] and (len(out) - at) == 6 * 24,
                  "%s: the header's names as given and 6 records" % what)
        elif sub in ("summary", "movement", "describe") and fmt != "text":
            doc = json.loads(out.decode("utf-8"))
            if sub == "summary":
                check(doc["tensors"] == [want_tensor, "Y"] and doc["einsums"] == [want_einsum],
                      "%s: the names (%r)" % (what, doc["tensors"][:1]))
        elif sub == "iterations":
            lines = [json.loads(l) for l in out.decode("utf-8").splitlines()]
            check([l["einsum"] for l in lines] == [want_einsum] * 3, "%s: 3 lines naming the Einsum" % what)
        elif sub == "transfers" and fmt is None:
            lines = [json.loads(l) for l in out.decode("utf-8").splitlines()]
            check(lines and all(l["tensor"] in (want_tensor, "Y") for l in lines), "%s: JSON lines" % what)
        elif sub == "cache" and fmt != "text":
            doc = json.loads(out.decode("utf-8"))
            names = [t["tensor"] for t in doc["caches"][0]["tensors"]]
            check(want_tensor in names, "%s: the tensor's name (%r)" % (what, names[:2]))
        elif sub == "timeline":
            doc = json.loads(out.decode("utf-8"))
            names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] in ("process_name", "thread_name")}
            check(want_tensor in names and {e["name"] for e in doc["traceEvents"] if e["ph"] == "X"} >=
                  {want_tensor, want_einsum}, "%s: the names as thread and slice names" % what)
        elif sub == "plot":
            ET.fromstring(out)
        else:
            check(len(out) > 0, "%s: some output" % what)
    except Exception as e:  # noqa: BLE001
        check(False, "%s: the output does not parse: %r (%r)" % (what, e, out[:200]))


def run_bytes(*args, timeout=120):
    return subprocess.run([EXE, *args], capture_output=True, timeout=timeout)


def test_names_of_every_length_in_every_format():
    for n in LENGTHS:
        for kind, name in (("tensor", b"T" * n), ("einsum", b"E" * n), ("level", b"L" * n)):
            tensor = name if kind == "tensor" else b"X"
            einsum = name if kind == "einsum" else b"Y"
            level = name if kind == "level" else b"DRAM"
            path = write("len-%s-%d.yaml" % (kind, n), spec_with_names(einsum, tensor, level), "wb")
            for args in SUBCOMMANDS:
                args = [a.replace("{level}", level.decode()) for a in args]
                what = "%s of %d bytes: %s" % (kind, n, " ".join(args)[:60])
                p = run_bytes(args[0], path, *args[1:])
                no_signal(p, what)
                if n == 0 and kind != "level":  # an empty name names nothing: refused where written
                    check(p.returncode == 2 and b"name is empty" in p.stderr, "%s: exit 2 (%d, %r)"
                          % (what, p.returncode, p.stderr[-200:]))
                elif n == 0 and args[0] == "transfers":  # an empty component is no component
                    check(p.returncode == 2 and b"transfers needs --level L" in p.stderr, "%s: exit 2 (%d, %r)"
                          % (what, p.returncode, p.stderr[-200:]))
                elif n == 0 and args[0] == "cache" and "--source" in args:  # no component, no level
                    check(p.returncode == 2 and b"needs a level's name" in p.stderr, "%s: exit 2 (%d, %r)"
                          % (what, p.returncode, p.stderr[-200:]))
                elif n > 65535 and "binary" in args and kind != "level":
                    check(p.returncode == 2 and b"at most 65535 bytes" in p.stderr and p.stdout == b"",
                          "%s: refused before any output (%d, %r)" % (what, p.returncode, p.stderr[-200:]))
                else:
                    check(p.returncode == 0, "%s: exit 0 (%d, %r)" % (what, p.returncode, p.stderr[-300:]))
                    if p.returncode == 0:
                        check_output(args, p, einsum, tensor, what)


def test_control_bytes_and_invalid_utf8_in_every_format():
    for label, name in (("control", bytes(range(1, 32)) + b"\x7f"), ("utf8", b"N\xff\xfe\xc3(\xed\xa0\x80"),
                        ("escapes", b'q"\\' * 300), ("controls600", b"\x01" * 600)):
        for kind in ("tensor", "einsum", "level"):
            tensor = name if kind == "tensor" else b"X"
            einsum = name if kind == "einsum" else b"Y"
            level = name if kind == "level" else b"DRAM"
            path = write("bytes-%s-%s.yaml" % (label, kind), spec_with_names(einsum, tensor, level), "wb")
            for args in SUBCOMMANDS:
                if "{level}" in " ".join(args) and kind == "level":
                    continue  # such a level cannot be named on a command line by these bytes
                args = [a.replace("{level}", "DRAM") for a in args]
                what = "%s %s: %s" % (label, kind, " ".join(args)[:60])
                p = run_bytes(args[0], path, *args[1:])
                no_signal(p, what)
                check(p.returncode == 0, "%s: exit 0 (%d, %r)" % (what, p.returncode, p.stderr[-300:]))
                if p.returncode == 0:
                    check_output(args, p, einsum, tensor, what)


def test_findings_end_with_a_message_never_a_signal():
    if not os.path.isdir(FINDINGS):
        check(False, "no %s" % FINDINGS)
        return
    for name in sorted(os.listdir(FINDINGS)):
        path = os.path.join(FINDINGS, name)
        for args in (("trace",), ("trace", "--format", "csv"), ("trace", "--format", "binary"), ("summary",),
                     ("describe",), ("movement",), ("iterations",), ("plot", "-o", "-"), ("timeline",)):
            p = run_bytes(args[0], path, *args[1:], timeout=60)
            what = "%s %s" % (name, " ".join(args))
            no_signal(p, what)
            check(p.returncode in (0, 1, 2), "%s: exit 0, 1 or 2 (%d)" % (what, p.returncode))
            check(p.returncode == 0 or p.stderr.startswith(b"looptrace: "), "%s: a message (%r)"
                  % (what, p.stderr[:200]))


def expect_error(args, words, status=2):
    p = run(*args)
    what = " ".join(os.path.basename(a) for a in args)[:80]
    check(p.returncode == status, "%s: exit %d (%d, %r)" % (what, status, p.returncode, p.stderr[-300:]))
    for w in words:
        check(w in p.stderr, "%s: stderr says %r (%r)" % (what, w, p.stderr[-300:]))
    return p


def test_spatial_instances_refused_before_allocating():
    path = os.path.join(FINDINGS, "spatial_1e9.yaml")
    for sub in ("trace", "summary", "iterations", "movement", "plot", "transfers"):
        extra = ["--level", "DRAM"] if sub == "transfers" else (["-o", "-"] if sub == "plot" else [])
        p = expect_error([sub, path, *extra], ["spatial_1e9.yaml:9:5"])
        check("!Spatial loop over 'a'" in p.stderr or "covers at least" in p.stderr,
              "%s names the loop or the tile (%r)" % (sub, p.stderr[-300:]))
    # A larger limit lets the same check pass and the next one speak.
    expect_error(["iterations", path, "--max-tile-points", "10"], ["more than 10 spatial instances"])


def test_storage_naming_a_tensor_twice():
    path = os.path.join(FINDINGS, "storage_same_tensor_twice.yaml")
    for sub in ("movement", "summary", "describe"):
        expect_error([sub, path], ["storage_same_tensor_twice.yaml:9:44", "names tensor 'X' twice"])


def test_null_and_empty_keys():
    for name in ("null_rank_sizes_key.yaml", "fuzz_spec-crash-09add7c2", "fuzz_spec-crash-955075c4"):
        expect_error(["summary", os.path.join(FINDINGS, name)], ["a mapping key must be a name"])
    path = write("empty-key.yaml", 'workload:\n  rank_sizes: {"": 4, M: 4}\n  einsums:\n  - "Y[m] = X[m]"\n')
    expect_error(["describe", path], ["empty-key.yaml:2:16", "not an empty string"])
    path = write("list-key.yaml", 'workload:\n  rank_sizes: {[a]: 4, M: 4}\n  einsums:\n  - "Y[m] = X[m]"\n')
    expect_error(["describe", path], ["list-key.yaml:2:16", "must be a single value"])


def test_failed_writes_exit_1():
    spec = write("conv1d.yaml", harness.CONV1D)
    for args in (["summary"], ["describe"], ["describe", "--format", "text"], ["trace"], ["trace", "--format",
                 "binary"], ["iterations"], ["movement"], ["movement", "--format", "text"],
                 ["transfers", "--level", "MainMemory"], ["plot", "-o", "-"]):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([EXE, args[0], spec, *args[1:]], stdout=full, stderr=subprocess.PIPE, text=True)
        check(p.returncode == 1 and "No space left on device" in p.stderr and "internal" not in p.stderr,
              "%s > /dev/full: exit 1 naming the cause (%d, %r)" % (" ".join(args), p.returncode, p.stderr))
    for args in (["--help"], ["--version"], ["trace", "--help"]):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([EXE, *args], stdout=full, stderr=subprocess.PIPE, text=True)
        check(p.returncode == 1 and "cannot write standard output" in p.stderr,
              "%s > /dev/full: exit 1 (%d, %r)" % (" ".join(args), p.returncode, p.stderr))
    # A reader that goes away is not an error.
    p = subprocess.run("%s trace %s | head -c 10 > /dev/null; exit ${PIPESTATUS[0]}" % (EXE, spec), shell=True,
                       executable="/bin/bash", capture_output=True, text=True)
    check(p.returncode == 0 and p.stderr == "", "trace | head: exit 0, quiet (%d, %r)" % (p.returncode, p.stderr))


def test_option_messages():
    spec = write("conv1d.yaml", harness.CONV1D)
    for args, message in (
            (["trace", "--max-timesteps", "-1"], "--max-timesteps takes a whole number >= 0, not -1"),
            (["trace", "--from", "x"], "--from takes a whole number >= 0, not 'x'"),
            (["trace", "--to", "1.5"], "--to takes a whole number >= 0, not 1.5"),
            (["trace", "--sample-timesteps", "-2"], "--sample-timesteps takes a whole number >= 0, not -2"),
            (["trace", "--max-tile-points", "0"], "--max-tile-points takes a whole number >= 1, not 0"),
            (["trace", "--seed", "-1"], "--seed takes a whole number from 0 to 18446744073709551615, not -1"),
            (["trace", "--threads", "0"], "--threads takes a whole number from 1 to 1024, not 0"),
            (["summary", "--threads", "2000"], "--threads takes a whole number from 1 to 1024, not 2000"),
            (["plot", "--width", "10", "-o", "-"], "--width takes a whole number from 300 to 20000, not 10"),
            (["plot", "--max-points", "-5", "-o", "-"], "--max-points takes a whole number >= 0, not -5"),
            (["transfers", "--level", "MainMemory", "--line-bytes", "0"],
             "--line-bytes takes a whole number from 1 to 1073741824, not 0"),
            (["transfers", "--level", "MainMemory", "--cycles-per-timestep", "-3"],
             "--cycles-per-timestep takes a whole number from 1 to 1048576, not -3"),
            (["trace", "--max-timesteps", "99999999999999999999"], "(too large)")):
        p = expect_error([args[0], spec, *args[1:]], [message])
        check(p.stderr.startswith("looptrace: error: ") and len(p.stderr) < 200,
              "%s: one short line (%r)" % (" ".join(args), p.stderr))


def test_transfer_layout_options():
    spec = write("conv1d.yaml", harness.CONV1D)
    expect_error(["transfers", spec, "--level", "MainMemory", "--line-bytes", "48"],
                 ["--line-bytes takes a power of two", "not 48"])
    expect_error(["transfers", spec, "--level", "MainMemory", "--align", "3"],
                 ["--align takes a power of two", "not 3"])
    three_bytes = write("three-bytes.yaml", harness.CONV1D.replace("  einsums:", "  bits_per_value: {All: 24}\n  einsums:"))
    p = run("transfers", three_bytes, "--level", "MainMemory", "--format", "dramsim3")
    addresses = sorted({int(l.split()[0], 16) for l in p.stdout.splitlines()})
    check(p.returncode == 0 and p.stderr == "" and addresses and addresses[0] == 0 and 4096 in addresses,
          "24-bit values under the default --align 4096: I at 0, W at 4096 (%r, %r)" % (addresses[:8], p.stderr))
    p = run("transfers", spec, "--level", "MainMemory", "--align", "2")
    check(p.returncode == 0 and "not a multiple of --line-bytes 64" in p.stderr,
          "--align 2: accepted, with a warning that tensors may share a line (%r)" % p.stderr)
    p = run("transfers", spec, "--level", "MainMemory", "--align", "128")
    check(p.returncode == 0 and p.stderr == "", "--align 128: quiet (%r)" % p.stderr)


def test_transfers_without_a_level_lists_the_levels():
    spec = write("conv1d.yaml", harness.CONV1D)
    expect_error(["transfers", spec], ["transfers needs --level L", "one of MainMemory, GlobalBuffer"])


ARCH = """arch:
  nodes:
  - !Memory {name: MainMemory, size: inf}
  - !Container
    name: PEs
    spatial: [{name: X, fanout: 4}]
  - !Memory {name: GlobalBuffer, size: 1024}
  - !Compute {name: MAC}
"""


def test_mapping_checked_against_the_arch():
    def mapping(storage="GlobalBuffer", compute="MAC", spatial="{rank_variable: m, tile_shape: 1, name: X, component: PEs}"):
        return ("mapping:\n  nodes:\n  - !Storage {component: MainMemory, tensors: [A, B]}\n"
                "  - !Spatial %s\n  - !Storage {component: %s, tensors: [A]}\n"
                "  - !Temporal {rank_variable: n, tile_shape: 1}\n  - !Compute {einsum: E, component: %s}\n"
                % (spatial, storage, compute))
    good = write("arch-good.yaml", ARCH + harness.TINY_WORKLOAD + mapping())
    p = run("summary", good)
    check(p.returncode == 0, "a mapping of the arch's own names passes (%r)" % p.stderr)
    for name, text, words in (
            ("storage", mapping(storage="GlobalBufer"), ["arch-storage.yaml:20:5", "!Storage component 'GlobalBufer'",
                                                        "did you mean 'GlobalBuffer'?"]),
            ("compute", mapping(compute="GlobalBuffer"), ["arch-compute.yaml:22:5",
                                                         "!Compute component 'GlobalBuffer' is not a !Compute",
                                                         "its compute units: MAC"]),
            ("spatial", mapping(spatial="{rank_variable: m, tile_shape: 1, name: Y, component: PEs}"),
             ["arch-spatial.yaml:19:5", "!Spatial name 'Y' is not a spatial dimension of 'PEs'", "it has: X"]),
            ("spatial-component", mapping(spatial="{rank_variable: m, tile_shape: 1, name: X, component: MAC}"),
             ["!Spatial name 'X' is not a spatial dimension of 'MAC'", "it has none"])):
        path = write("arch-%s.yaml" % name, ARCH + harness.TINY_WORKLOAD + text)
        expect_error(["summary", path], words)
    # Without an arch, nothing is said of the names.
    p = run("summary", write("no-arch.yaml", harness.TINY_WORKLOAD + mapping(storage="Anything")))
    check(p.returncode == 0, "no arch: the names are not checked (%r)" % p.stderr)


def test_spatial_fanout_checked_against_the_arch():
    # m has 4 values: 4 instances of X, split in two nested loops of 2, or given by name alone.
    def spec(name, fanout, spatial):
        nodes = "".join("  - !Spatial %s\n" % s for s in spatial)
        text = (ARCH.replace("fanout: 4", "fanout: %s" % fanout) + harness.TINY_WORKLOAD +
                "mapping:\n  nodes:\n  - !Storage {component: MainMemory, tensors: [A, B]}\n" + nodes +
                "  - !Temporal {rank_variable: n, tile_shape: 1}\n  - !Compute {einsum: E, component: MAC}\n")
        return write("fanout-%s.yaml" % name, text)
    one = "{rank_variable: m, tile_shape: 1, name: X, component: PEs}"
    two = ["{rank_variable: m, tile_shape: 2, name: X, component: PEs}", one]
    for name, fanout, spatial in (("exact", "4", [one]), ("expression", "2*2", two), ("by-name", "4", [one.replace(", component: PEs", "")])):
        p = run("summary", spec(name, fanout, spatial))
        check(p.returncode == 0 and p.stderr == "", "%s: 4 instances within a fanout of 4 (%r)" % (name, p.stderr))
    expect_error(["summary", spec("over", "3", [one])],
                 ["fanout-over.yaml:19:5", "the !Spatial loop over 'm' gives Einsum 'E' 4 instances of 'X' of 'PEs'",
                  "more than its fanout, 3 (", "fanout-over.yaml:6:33)"])
    expect_error(["summary", spec("nested", "3", two)],
                 ["fanout-nested.yaml:20:5", "2 x 2 instances (with the loops above) of 'X' of 'PEs'",
                  "more than its fanout, 3"])
    expect_error(["trace", spec("by-name-over", "2", [one.replace(", component: PEs", "")])],
                 ["4 instances of 'X' of 'PEs', more than its fanout, 2"])
    for bad, shown in (("0", "0"), ("-4", "-4"), ("3.5", "3.5"), ("true", "True")):
        expect_error(["summary", spec("bad-" + bad, bad, [one])],
                     ["fanout-bad-%s.yaml:6:" % bad, "the fanout of 'X' of 'PEs' must be a positive integer, not %s" % shown])


LINT = """workload:
  rank_sizes: {M: 8, K: 4, N: 3}
  einsums:
  - "Z[m, k] = A[m, k]"
  - "Y[m] = Z[m, k]"
  - "W[n] = B[n]"
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, Y, Z]}
  - !Temporal {rank_variable: m, tile_shape: 64}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Storage {component: Buf, tensors: [Y]}
      - !Compute {einsum: Z}
    - !Compute {einsum: Y}
"""


def test_mistakes_that_still_trace_are_warned():
    path = write("lint.yaml", LINT)
    p = run("summary", path)
    check(p.returncode == 0, "warnings only: exit 0 (%r)" % p.stderr)
    for want in ("lint.yaml:15:9: warning: !Storage holds tensor 'Y', which no Einsum below it accesses ('Z')",
                 "lint.yaml:10:5: warning: tile_shape 64 of the !Temporal loop over 'm' is larger than its rank "
                 "(m < 8 below it)",
                 "lint.yaml:8:3: warning: the mapping leaves Einsum 'W' of the workload unmapped (no !Compute names "
                 "it): it is not traced"):
        check(want in p.stderr, "stderr says %r (%r)" % (want, p.stderr))
    p = run("summary", write("conv1d.yaml", harness.CONV1D))
    check(p.stderr == "", "a clean mapping: no warning (%r)" % p.stderr)


def test_mapping_that_computes_nothing():
    no_compute = write("no-compute.yaml", harness.TINY_WORKLOAD + "mapping:\n  nodes:\n"
                       "  - !Temporal {rank_variable: m, tile_shape: 1}\n")
    empty = write("empty-mapping.yaml", harness.TINY_WORKLOAD + "mapping:\n  nodes: []\n")
    for path in (no_compute, empty):
        for sub in ("trace", "summary", "describe", "movement"):
            expect_error([sub, path], [os.path.basename(path) + ":", "the mapping computes nothing",
                                       "Einsums 'E' are unmapped"])


def test_control_bytes_in_messages_are_escaped():
    path = write("nul.yaml", b'workload:\n  rank_sizes: {M: 4}\n  einsums:\n  - "Y[m] = X[m] + \\0Q"\n', "wb")
    p = run_bytes("describe", path)
    check(p.returncode == 2 and b"found '\\x00'" in p.stderr and b"\x00" not in p.stderr,
          "a NUL is shown as \\x00, not cut (%r)" % p.stderr)
    path = write("esc.yaml", b'workload:\n  rank_sizes: {M: 4}\n  einsums:\n  - "Y[m] = X[m]"\nmapping:\n'
                 b'  nodes:\n  - !Storage {component: D, tensors: [X, "Z\\x1b[31mR\\nQ"]}\n'
                 b'  - !Compute {einsum: Y}\n', "wb")
    p = run_bytes("trace", path)
    check(p.returncode == 2 and b"Z\\x1b[31mR\\nQ" in p.stderr and b"\x1b" not in p.stderr
          and p.stderr.count(b"\n") == 1, "ESC and newline escaped in one line (%r)" % p.stderr)


def interrupted(fmt, sig, threads):
    path = os.path.join(harness.TMP, "interrupted.out")
    workload = os.path.join(ROOT, "bench", "specs", "gemm.workload.yaml")
    mapping = os.path.join(ROOT, "bench", "specs", "huge_gemm.mapping.yaml")
    with open(path, "wb") as out:
        p = subprocess.Popen([EXE, "trace", workload, mapping, "--format", fmt, "--threads", str(threads)],
                             stdout=out, stderr=subprocess.PIPE)
        time.sleep(1.0)
        p.send_signal(sig)
        p.wait(timeout=60)
    with open(path, "rb") as f:
        return p.returncode, f.read()


def test_interrupt_ends_between_records():
    for fmt, sig, threads in (("binary", signal.SIGINT, 1), ("jsonl", signal.SIGINT, 1), ("csv", signal.SIGTERM, 1),
                              ("binary", signal.SIGTERM, 2), ("jsonl", signal.SIGINT, 2)):
        rc, data = interrupted(fmt, sig, threads)
        what = "%s, %d thread(s), %s" % (fmt, threads, signal.Signals(sig).name)
        check(rc == 128 + sig, "%s: exit %d (%d)" % (what, 128 + sig, rc))
        check(len(data) > 0, "%s: the records before the interrupt are out" % what)
        if fmt == "binary":
            n = struct.unpack_from("<I", data, 8)[0]
            at = 12
            for _ in range(n):
                at += 1
                for _ in range(2):
                    at += 2 + struct.unpack_from("<H", data, at)[0]
                at += 1 + 8 * data[at]
            check((len(data) - at) % 24 == 0, "%s: whole 24-byte records (%d left over)"
                  % (what, (len(data) - at) % 24))
            last = struct.unpack_from("<qqII", data, len(data) - 24)
            check(last[3] == 0 and last[2] < n, "%s: the last record is a record %r" % (what, last))
        else:
            check(data.endswith(b"\n"), "%s: ends with a whole line" % what)
            last = data[data.rfind(b"\n", 0, len(data) - 1) + 1:]
            if fmt == "jsonl":
                try:
                    json.loads(last)
                    check(True, "")
                except ValueError:
                    check(False, "%s: the last line is JSON (%r)" % (what, last[:100]))


if __name__ == "__main__":
    sys.exit(harness.main([
        test_names_of_every_length_in_every_format,
        test_control_bytes_and_invalid_utf8_in_every_format,
        test_findings_end_with_a_message_never_a_signal,
        test_spatial_instances_refused_before_allocating,
        test_storage_naming_a_tensor_twice,
        test_null_and_empty_keys,
        test_failed_writes_exit_1,
        test_option_messages,
        test_transfer_layout_options,
        test_transfers_without_a_level_lists_the_levels,
        test_mapping_checked_against_the_arch,
        test_spatial_fanout_checked_against_the_arch,
        test_mistakes_that_still_trace_are_warned,
        test_mapping_that_computes_nothing,
        test_control_bytes_in_messages_are_escaped,
        test_interrupt_ends_between_records,
    ]))

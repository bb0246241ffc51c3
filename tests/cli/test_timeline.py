#!/usr/bin/env python3
"""Drives `looptrace timeline` (issue 30): the JSON validated against the Chrome
trace-event format as Perfetto and chrome://tracing read it (every event's required
fields, "M" names, counters in time order, slices nested per track, the event bound),
the conv1d example's footprints equal to `movement`'s peak at its timestep (GlobalBuffer
7 elements), cycles on the axis, merged slices past --max-events, errors (exit 2), and
the file's size and time on whole layers of the README's models; `plot --footprint`
draws the same peaks.

usage: test_timeline.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json
import os
import re
import time

import harness
from harness import ROOT, check, run

CONV1D = [os.path.join(ROOT, "examples", "specs", f)
          for f in ("conv1d.workload.yaml", "conv1d.mapping.yaml", "conv1d.arch.yaml")]
FUSED = [os.path.join(ROOT, "examples", "specs", f) for f in ("matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml")]
EXAMPLES = os.path.join(ROOT, "..", "shared", "accelforge-examples")
PREFILL = ["-D", "BATCH_SIZE=1", "-D", "DECODE=False", "-D", "N_NEW_TOKENS=2048"]


def timeline(*args):
    r = run("timeline", *args, timeout=120)
    check(r.returncode == 0, "timeline %s exits 0 (rc %d, %s)" % (" ".join(args[-4:]), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout) if r.returncode == 0 else {"traceEvents": []}


def validate(doc, max_events=200000):
    """Checks the trace-event format; returns {pid: level}, {(pid, name): [(ts, value)]}, {(pid, tid): [X events]}."""
    events = doc.get("traceEvents")
    check(isinstance(events, list) and events, "a non-empty traceEvents array")
    check(len(events) <= max_events, "%d events within --max-events %d" % (len(events), max_events))
    levels, counters, slices, bad = {}, {}, {}, []
    for e in events:
        if not all(k in e for k in ("name", "ph", "pid", "tid", "ts")) or not isinstance(e["ts"], (int, float)) \
                or e["ts"] < 0 or not isinstance(e["pid"], int) or not isinstance(e["tid"], int):
            bad.append(e)
            continue
        if e["ph"] == "X":
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                bad.append(e)
            slices.setdefault((e["pid"], e["tid"]), []).append(e)
        elif e["ph"] == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(isinstance(v, (int, float)) for v in args.values()):
                bad.append(e)
                continue
            counters.setdefault((e["pid"], e["name"]), []).append((e["ts"], args["value"]))
        elif e["ph"] == "M":
            if e["name"] not in ("process_name", "process_labels", "process_sort_index", "thread_name",
                                 "thread_sort_index") or not isinstance(e.get("args"), dict):
                bad.append(e)
            elif e["name"] == "process_name":
                levels[e["pid"]] = e["args"]["name"]
        else:
            bad.append(e)
    check(not bad, "every event has its required fields: %r" % bad[:3])
    for key, samples in counters.items():
        times = [t for t, _ in samples]
        check(times == sorted(set(times)), "counter %r: samples strictly in time order" % (key,))
    for key, xs in slices.items():
        check(key[0] in levels, "slices of track %r belong to a named process" % (key,))
        stack, ok = [], True
        for e in sorted(xs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            ok = ok and (not stack or e["ts"] + e["dur"] <= stack[-1])
            stack.append(e["ts"] + e["dur"])
        check(ok, "slices of track %r nest" % (key,))
    return levels, counters, slices


def value_at(samples, t):
    """A counter's value at time t (the last sample at or before it)."""
    v = None
    for ts, x in samples:
        if ts <= t:
            v = x
    return v


def test_conv1d_against_movement():
    doc = timeline(*CONV1D)
    levels, counters, slices = validate(doc)
    check(sorted(levels.values()) == ["GlobalBuffer", "MainMemory"], "one process per level: %r" % levels)
    r = run("movement", *CONV1D)
    movement = json.loads(r.stdout)
    for level in movement["levels"]:
        pid = next(p for p, name in levels.items() if name == level["level"])
        peak = level["peak_footprint"]
        samples = counters.get((pid, "footprint (elements)"), [])
        check(value_at(samples, peak["timestep"]) == peak["elements"],
              "%s footprint at t=%d is movement's peak %d: %r" % (level["level"], peak["timestep"], peak["elements"],
                                                                samples))
        check(max(v for _, v in samples) == peak["elements"], "%s: no sample above the peak" % level["level"])
        fills = sum(t["fills"] for t in level["tensors"])
        rate = counters.get((pid, "fills (elements/timestep)"), [])
        # Window by window the rate is a spike of one timestep: its integral is the fills.
        integral = sum(v * (rate[i + 1][0] - t) for i, (t, v) in enumerate(rate[:-1]))
        check(integral == fills, "%s: fills over time add up to movement's %d (got %r)" % (level["level"], fills, integral))
    gb = next(p for p, name in levels.items() if name == "GlobalBuffer")
    check(counters.get((gb, "footprint (elements)")) == [(0, 7), (24, 0)], "GlobalBuffer holds 7 over [0, 24)")
    check(counters.get((gb, "footprint (bytes)")) == [(0, 7), (24, 0)], "... 7 bytes (8 bits a value)")
    check(counters.get((gb, "size (bytes)")) == [(0, 6), (24, 6)], "... against its 48 bits")
    tiles = [e for (p, _), xs in slices.items() if p == gb for e in xs if e["cat"] == "tile" and e["name"] == "I"]
    check([(e["ts"], e["dur"], e["args"]["tile"]) for e in sorted(tiles, key=lambda e: e["ts"])] ==
          [(3 * p, 3, 3) for p in range(8)], "I's eight windows [3p, 3p+3) of 3 elements")
    check(any(e["ph"] == "X" and e["cat"] == "einsum" and e["name"] == "Conv" and e["dur"] == 24
              for e in doc["traceEvents"]), "the Einsum's span [0, 24)")


def test_cycles_and_file():
    out = os.path.join(harness.TMP, "layer.json")
    r = run("timeline", *CONV1D, "--cycles-per-timestep", "4", "-o", out)
    check(r.returncode == 0 and r.stdout == "", "-o writes the file, nothing on stdout: %d %r" % (r.returncode, r.stderr))
    with open(out) as f:
        doc = json.load(f)
    levels, counters, _ = validate(doc)
    gb = next(p for p, name in levels.items() if name == "GlobalBuffer")
    check(counters.get((gb, "footprint (elements)")) == [(0, 7), (96, 0)], "the axis in cycles: 24 timesteps x 4")
    fills = counters.get((gb, "fills (elements/cycle)"), [])
    check(fills[:2] == [(0, 1.5), (4, 0)], "6 elements in the first timestep's 4 cycles: 1.5 a cycle: %r" % fills[:2])
    check(doc.get("otherData", {}).get("time_unit") == "1 us = 1 cycle", "otherData names the unit")


def test_merged_past_max_events():
    full = timeline(*FUSED, "-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=8")
    n = len(full["traceEvents"])
    r = run("timeline", *FUSED, "-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=8", "--max-events", str(n - 1))
    check(r.returncode == 0 and "a merged slice's args say so" in r.stderr, "a note when slices merge: %r" % r.stderr)
    doc = json.loads(r.stdout) if r.returncode == 0 else {"traceEvents": [{}]}
    validate(doc, n - 1)
    merged = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "merged" in e.get("args", {})]
    check(merged and all(e["args"]["windows"] > 1 for e in merged), "merged slices say so, with their windows")
    count = lambda d: sum(e["args"].get("windows", 1) for e in d["traceEvents"] if e.get("ph") == "X" and e["cat"] == "tile")
    check(count(doc) == count(full), "every window is in some slice: %d vs %d" % (count(doc), count(full)))


def test_errors():
    for args, want in ((["--max-events", "0"], "--max-events"), (["--max-events", "3"], "--max-events 3 is too few"),
                       (["--sample-timesteps", "3"], "--sample-timesteps"),
                       (["--cycles-per-timestep", "0"], "--cycles-per-timestep")):
        r = run("timeline", *CONV1D, *args)
        check(r.returncode == 2 and want in r.stderr and r.stdout == "",
              "timeline %s: exit 2 naming %s (%d %r)" % (" ".join(args), want, r.returncode, r.stderr))
    r = run("timeline", *CONV1D, "-o", os.path.join(harness.TMP, "no", "such", "dir.json"))
    check(r.returncode == 2 and "cannot open" in r.stderr, "an -o that cannot be written: exit 2 (%r)" % r.stderr)
    r = run("timeline", *CONV1D, "--from", "30")
    check(r.returncode == 0 and "no tile window" in r.stderr, "past the end: a note (%r)" % r.stderr)


def test_plot_footprint():
    out = os.path.join(harness.TMP, "fp.svg")
    r = run("plot", *CONV1D, "--footprint", "-o", out)
    check(r.returncode == 0, "plot --footprint exits 0 (%r)" % r.stderr)
    svg = open(out).read() if r.returncode == 0 else ""
    panels = dict(re.findall(r'<g class="footprint" data-level="([^"]+)" data-unit="bytes" data-peak="(\d+)"', svg))
    check(panels == {"MainMemory": "21", "GlobalBuffer": "7"}, "a footprint panel per level, movement's peaks: %r" % panels)
    check('class="size"' in svg, "GlobalBuffer's size drawn as a line (48 bits = 6 bytes, under its peak of 7)")


def test_whole_layers():
    if not os.path.isdir(EXAMPLES):
        print("no AccelForge examples at %s: whole layers skipped" % EXAMPLES)
        return
    transformers = os.path.join(EXAMPLES, "workloads", "transformers")
    arch = os.path.join(EXAMPLES, "arches", "tpu_v4i.yaml")
    runs = [("gpt3_175b", [os.path.join(transformers, "gpt", "gpt3_175B.yaml"),
                           os.path.join(ROOT, "examples", "gpt3_layer.mapping.yaml")]),
            ("deepseek_v3", [os.path.join(transformers, "deepseek", "deepseek_v3_671B.yaml"), arch,
                             os.path.join(ROOT, "examples", "deepseek_v3_tpu_v4i.mapping.yaml")])]
    for name, files in runs:
        out = os.path.join(harness.TMP, name + ".json")
        start = time.monotonic()
        r = run("timeline", *files, *PREFILL, "-o", out, timeout=120)
        seconds = time.monotonic() - start
        check(r.returncode == 0, "%s prefill: exit 0 (%r)" % (name, r.stderr))
        if r.returncode != 0:
            continue
        size = os.path.getsize(out)
        with open(out) as f:
            levels, counters, _ = validate(json.load(f))
        # 200,000 events of at most ~250 bytes: the file stays far below what Perfetto chokes on.
        check(size < 50 << 20, "%s: %d bytes, under 50 MiB" % (name, size))
        check(seconds < 10, "%s: %.2f s (well under a second on an idle core)" % (name, seconds))
        movement = json.loads(run("movement", *files, *PREFILL, timeout=120).stdout)
        for level in movement["levels"]:
            pid = next(p for p, n in levels.items() if n == level["level"])
            samples = counters.get((pid, "footprint (elements)"), [])
            check(max(v for _, v in samples) >= level["peak_footprint"]["elements"],
                  "%s %s: the footprint reaches movement's peak" % (name, level["level"]))


def main():
    return harness.main((test_conv1d_against_movement, test_cycles_and_file, test_merged_past_max_events, test_errors,
                         test_plot_footprint, test_whole_layers))


if __name__ == "__main__":
    raise SystemExit(main())

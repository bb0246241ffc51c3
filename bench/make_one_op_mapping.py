#!/usr/bin/env python3
"""Writes a one-operation-per-timestep mapping for a workload: a !Sequential of one
!Nested per Einsum, each with a !Temporal loop of tile_shape 1 over every rank variable
(in the order given) and a !Compute. The shape of mapping that AccelForge's examples
use down at the MACs, over a whole network: the input the closed-form summary is
measured on (bench/summary_scaling.sh).

usage:
  make_one_op_mapping.py DESCRIBE.json [-o MAPPING.yaml] [--storage DRAM]
  looptrace describe WORKLOAD.yaml... | make_one_op_mapping.py - [-o MAPPING.yaml]
  make_one_op_mapping.py --workload WORKLOAD.yaml... [-D KEY=VALUE]... [-o MAPPING.yaml]

DESCRIBE.json is what `looptrace describe` prints:
  {"einsums": [{"name": "Z", "rank_variables": {"m": 64, "k": 32}, "tensors": [...]}, ...]}
(`tensors` entries may be names or objects with a "name"). --workload reads the
workload YAML itself (plain Jinja2 and PyYAML, through tests/differential/model.py), for
workloads that load without AccelForge's own Jinja globals. --storage LEVEL adds a
!Storage of every tensor at LEVEL above the Sequential (one window for the whole run)."""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def from_workload(paths, defines):
    """The describe structure of a workload, read with the differential test's model."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "differential"))
    import model  # noqa: E402
    spec = model.load_files(paths, defines)
    if "workload" not in spec:
        raise SystemExit("make_one_op_mapping.py: no 'workload:' in " + ", ".join(paths))
    einsums = model.load_workload(spec["workload"])
    return {"einsums": [{"name": e.name, "rank_variables": {v: e.extent[v] for v in e.vars},
                         "tensors": [t for t, _, _ in e.accesses]} for e in einsums]}


def tensor_names(einsum):
    out = []
    for t in einsum.get("tensors", []):
        name = t.get("name") if isinstance(t, dict) else t
        if name is not None and name not in out:
            out.append(str(name))
    return out


def quote(s):
    """A YAML scalar: bare when it is a plain identifier."""
    return s if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s) else json.dumps(s)


def mapping_yaml(describe, storage=None):
    einsums = describe.get("einsums")
    if not isinstance(einsums, list) or not einsums:
        raise SystemExit("make_one_op_mapping.py: the input has no 'einsums' list (is it `looptrace describe` output?)")
    lines = ["# One operation per timestep over every Einsum (bench/make_one_op_mapping.py).",
             "mapping:", "  nodes:"]
    if storage:
        tensors = []
        for e in einsums:
            tensors += [t for t in tensor_names(e) if t not in tensors]
        lines.append("  - !Storage {component: %s, tensors: [%s]}" % (quote(storage), ", ".join(map(quote, tensors))))
    lines += ["  - !Sequential", "    nodes:"]
    for e in einsums:
        if "name" not in e or not isinstance(e.get("rank_variables"), dict):
            raise SystemExit("make_one_op_mapping.py: an Einsum without 'name' or 'rank_variables': %s"
                             % json.dumps(e)[:200])
        lines += ["    - !Nested", "      nodes:"]
        for v in e["rank_variables"]:
            lines.append("      - !Temporal {rank_variable: %s, tile_shape: 1}" % quote(v))
        lines.append("      - !Compute {einsum: %s, component: MAC}" % quote(e["name"]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("describe", nargs="?", help="`looptrace describe` JSON ('-': stdin)")
    ap.add_argument("--workload", nargs="+", help="workload YAML files, read directly")
    ap.add_argument("-D", dest="defines", action="append", default=[], help="KEY=VALUE for --workload")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--storage", help="add a !Storage of every tensor at this level")
    a = ap.parse_args()
    if (a.describe is None) == (a.workload is None):
        ap.error("give either DESCRIBE.json or --workload FILES")
    if a.workload:
        defines = {}
        for d in a.defines:
            k, _, v = d.partition("=")
            defines[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
        describe = from_workload(a.workload, defines)
    else:
        text = sys.stdin.read() if a.describe == "-" else open(a.describe).read()
        describe = json.loads(text)
    out = mapping_yaml(describe, a.storage)
    if a.output == "-":
        sys.stdout.write(out)
    else:
        with open(a.output, "w") as f:
            f.write(out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets from the conformance specs.

usage: make_corpus.py SPECS_DIR OUT_DIR

OUT_DIR/spec/        one seed per conformance case: workload and mapping joined by the
                     fuzz_spec separator line '---8<---' (and each file on its own)
OUT_DIR/expression/  every projection and constraint string of the specs
OUT_DIR/concise/     every concise Einsum string, plus a few written here
"""
import hashlib
import json
import os
import re
import sys

specs, out = sys.argv[1], sys.argv[2]


def put(kind, text):
    d = os.path.join(out, kind)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(text.encode()).hexdigest()[:16]
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def read(name):
    with open(os.path.join(specs, name)) as f:
        return f.read()


files = sorted(f for f in os.listdir(specs) if f.endswith(".yaml"))
for f in files:
    put("spec", read(f))
# Concise Einsums, a template and a split, which the conformance specs do not use.
put("spec", """workload:
  {% set N = N | default(6) %}
  iteration_space_shape: {m: 0 <= m < {{N}}, k: 0 <= k < {{N - 1}}, n: 0 <= n < {{N + 1}}}
  rank_sizes: {J: 3}
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
  - einsum: Y[m, j] = Z[m, n] * C[n, J: j]
    name: Y
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B, C, Y]}
  - !Temporal {rank_variable: m, tile_shape: 4}
  - !Storage {component: Buffer, tensors: [Z]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: n, tile_shape: 2, initial_tile_shape: 3}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: Z}
    - !Pipeline
      nodes:
      - !Nested
        nodes:
        - !Spatial {rank_variable: j, tile_shape: 1, name: X, component: PE}
        - !Temporal {rank_variable: n, tile_shape: 3}
        - !Compute {einsum: Y}
""")
cases = os.path.join(specs, "..", "cases.json")
if os.path.exists(cases):
    with open(cases) as f:
        for case in json.load(f):
            put("spec", "\n---8<---\n".join(read(n) for n in case["files"]))

# Expressions: the values of projection and constraint entries (rough, on purpose).
expressions = set()
for f in files:
    text = read(f)
    for m in re.finditer(r"\b\d+\s*<=?[^\n#,}]*", text):
        expressions.add(m.group(0).strip())
    for m in re.finditer(r"projection:\s*\{([^}]*)\}", text):
        for part in m.group(1).split(","):
            if ":" in part:
                expressions.add(part.split(":", 1)[1].strip())
    for m in re.finditer(r"projection:\s*\[([^\]]*)\]", text):
        for part in m.group(1).split(","):
            expressions.add(part.strip())
expressions |= {"p + r", "2*p + r - 1", "(m + 1) // 2", "0 <= m < 128 and 0 <= n < 4",
                "-(a - 3*b) * 2", "0 <= p + r < 28", "q == 2*x + 1"}
for e in sorted(expressions):
    if e and "{" not in e:
        put("expression", e)

concise = set()
for f in files:
    for m in re.finditer(r'"([A-Za-z_]\w*(?:\[[^\]]*\])?\s*=[^"]*)"', read(f)):
        concise.add(m.group(1))
concise |= {"Z[m, n] = A[m, k] * B[k, n]", "O[k, p] = I[c, H: p + r] * W[k, c, r]",
            "S[] = X[i]", "Y = X", "K[b, M: p, h, e] = Q[b, p, h, e]"}
for c in sorted(concise):
    put("concise", c)

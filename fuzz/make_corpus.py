#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets from the conformance specs and
AccelForge's example files.

usage: make_corpus.py SPECS_DIR OUT_DIR [ACCELFORGE_EXAMPLES_DIR]

OUT_DIR/spec/        one seed per conformance case: workload and mapping joined by the
                     fuzz_spec separator line '---8<---' (and each file on its own);
                     every AccelForge example file; seeds that include() the files
                     fuzz_spec writes into its scratch folder (lib/, parts/)
OUT_DIR/jinja/       a Python expression line, then a template: AccelForge's files
OUT_DIR/expression/  every projection and constraint string of the specs
OUT_DIR/concise/     every concise Einsum string, plus a few written here
(ACCELFORGE_EXAMPLES_DIR defaults to SPECS_DIR/../../accelforge-examples.)
"""
import hashlib
import json
import os
import re
import sys

specs, out = sys.argv[1], sys.argv[2]
examples = sys.argv[3] if len(sys.argv) > 3 else os.path.join(specs, "..", "..", "accelforge-examples")


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

# AccelForge's dialect: its own files (includes resolve only inside fuzz_spec's scratch
# folder, so most fail there; the fuzzer still learns their syntax) and seeds that use
# the scratch folder's files.
if os.path.isdir(examples):
    for folder, _, names in os.walk(examples):
        for name in sorted(names):
            if name.endswith(".yaml") and "memory_cells" not in folder:
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                put("spec", text)
                put("jinja", "ceil(N * 2 / 3)\n" + text)
put("spec", """{{ add_to_path('lib') }}
{% set P = include('part.yaml', '', M=8) %}
{% set Q = include_all('parts/*.yaml', 'einsums') %}
{{ include_text('frag.yaml') }}
{% assert path_exists('sizes.yaml'), 'no sizes' %}
workload:
  rank_sizes:
    <<<: [{{P}}.workload.rank_sizes, {N: 2}]
  einsums:
  - {{P}}.workload.einsums
  - {{Q}}
  - "D[m, n] = C[m] + B[m] * C[m]"
---8<---
{{ include_text('mapping.yaml') }}
""")
put("spec", """{% from 'lib/part.yaml' import x %}{% macro tn(i) %}{{ 'ABC'[i] }}{% endmacro %}
workload:
  rank_sizes: {M: 2}
  einsums:
  - "{{ tn(1) }}[m] = {{ tn(0) }}[m]"
{% include 'lib/frag.yaml' %}
""")
put("spec", """{% set S = include('lib/sizes.yaml', 'rank_sizes', N=4) %}
variables: {v: 2 * 3}
workload:
  rank_sizes:
    <<: {{ S }}
    M: 128*32 // v
  einsums:
  - {einsum: "Z[m, n, xt] = A[m] * A[m]", tensor_accesses: [{name: A, bits_per_value: 8}]}
""")
for expression, template in (
        ("ceil(256*2/N)", "{% for k, v in D.items() if v is defined %}{{ k }}: {{ v | default(1) }}\n{% endfor %}"),
        ("128*32 + 512 // 3", "{{ [N, L | max] | min }} {{ 'y' if B else 'n' }} {{ S in ['abc'] }} {{ L[1:] }}"),
        ("min(N, 3) + max([1, 2]) + round(F)", "{% set ns = namespace(x=0) %}{% for i in L %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
        ("log2(N) * F", "{% raw %}{{ x }}{% endraw %}{% assert N > 1, 'small' %}{% set a, b = 1, 2 %}{{ a ~ b }}"),
        ("len(S) ** 2", "{% set d = dict(a=1) %}{% set _ = d.update({'b': 2}) %}{{ d | dictsort }} {{ echo(d.items() | list) }}"),
        ("X + 1", "{% with q = N * F %}{{ q | round(1) }}{% endwith %}{% set t %}{{ S | upper }}{% endset %}{{ t }}"),
        ("[N, 2][0]", "{% macro m(a, b=2) %}{{ a * b }}{% if a > 0 %}{{ m(a - 1) }}{% endif %}{% endmacro %}{{ m(3, b=N) }}"),
):
    put("jinja", expression + "\n" + template)

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
            "S[] = X[i]", "Y = X", "K[b, M: p, h, e] = Q[b, p, h, e]",
            "H[b, d, n] = HX[b, d, n] + HH[b, d, n]", "L[b, d] = DX[b, d] * DX[b, d]",
            "T0[p0, q0, n, m0] = I0[n, c0, H: p0 * 16 + r0, W: q0 * 16 + s0] * W0[r0, s0, c0, m0]"}
for c in sorted(concise):
    put("concise", c)

"""What the CLI test scripts share: the executable under test (argv[1]), a scratch
folder, a tally of checks, a main that runs test functions one by one (a crash in
one is one failure, not the end) and prints 'N passed, M failed' last, and the spec
texts that several scripts use."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "looptrace"
TMP = tempfile.mkdtemp(prefix="looptrace-cli-")
tally = {"passed": 0, "failed": 0}

# The conv1d of SEMANTICS: O[p] += I[p + r] * W[r], p < 8, r < 3, p outer; 24 timesteps.
CONV1D_WORKLOAD = """\
workload:
  iteration_space_shape:
    p: 0 <= p < 8
    r: 0 <= r < 3
  einsums:
  - name: Conv
    tensor_accesses:
    - {name: I, projection: {P: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True}
"""
CONV1D_MAPPING = """\
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [I, W, O]}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [I, W, O]}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Compute {einsum: Conv, component: MAC}
"""
CONV1D = CONV1D_WORKLOAD + CONV1D_MAPPING

# Two fused matmuls with imperfect tiles; N sets the size (a Jinja define, 6 unless given).
MATMULS = """\
workload:
  {% set N = N | default(6) %}
  iteration_space_shape:
    m: 0 <= m < {{N}}
    k: 0 <= k < {{N - 1}}
    n: 0 <= n < {{N + 1}}
    j: 0 <= j < 3
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
  - Y[m, j] = Z[m, n] * C[n, j]
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
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: Z}
    - !Nested
      nodes:
      - !Spatial {rank_variable: j, tile_shape: 1}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: n, tile_shape: 3}
      - !Compute {einsum: Y}
"""

# One Einsum, B[m] from A[m, n] (m < 4, n < 3), under one loop: the base that the error
# tests bend one piece of at a time.
TINY_WORKLOAD = """\
workload:
  iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 3}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, n]}
    - {name: B, projection: [m], output: True}
"""
TINY_MAPPING = """\
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
"""


def check(ok, what):
    tally["passed" if ok else "failed"] += 1
    if not ok:
        print("FAIL " + what)


def write(name, text, mode="w"):
    path = os.path.join(TMP, name)
    with open(path, mode) as f:
        f.write(text)
    return path


def run(*args, text=True, timeout=60):
    """Runs the executable with args; text output decoded with replacement."""
    if text:
        return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout,
                              errors="replace")
    return subprocess.run([EXE, *args], capture_output=True, timeout=timeout)


def guarded(test, *args):
    """Calls test(*args); an exception counts as one failed check. Returns its result."""
    try:
        return test(*args)
    except Exception as e:
        check(False, "%s raised %r" % (test.__name__, e))
        return None


def main(tests):
    try:
        for test in tests:
            guarded(test)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


def finish():
    print("%d passed, %d failed" % (tally["passed"], tally["failed"]))
    return 1 if tally["failed"] else 0

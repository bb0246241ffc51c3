#!/usr/bin/env python3
"""The rough edges of issue 12: --version, misspelt subcommands and options, options
offered only where they work, empty selections said on stderr, tensor filters and
memory levels, JSON output for hostile names.

usage: test_edges.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json
import sys

import harness

from harness import check, run, write  # noqa: E402

# Two fused matmuls (N=6): DRAM holds A, B, C, Y; Buffer holds Z, one window per m tile.
# Per m tile: 3 n-tiles x 4 m x 5 k = 60 steps of Z, then 4 m x 3 n-tiles = 12 of Y.
MATMULS = write("matmuls.yaml", """\
workload:
  iteration_space_shape:
    m: 0 <= m < 6
    k: 0 <= k < 5
    n: 0 <= n < 7
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
""")


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


def main():
    return harness.main((test_tensor_filter_drops_levels,))


if __name__ == "__main__":
    sys.exit(main())

"""Figures for the Python package (README, "From Python"). Tests never assert on time.

    PYTHONPATH=build/python taskset -c 1 /usr/bin/python3 bench/bench_python.py

1. `trace_accesses` on the 128^3 GEMM (bench/specs/gemm.workload.yaml, with the tiled
   mapping and with the one-op-per-timestep huge_gemm mapping), against an estimate of
   the reference (accelforge.tracegen, which is not installed here and cannot be: no
   network). The estimate runs, with numpy, the array operations the reference's
   trace_accesses runs on this spec, in its order: np.indices over the loop nest,
   per-loop tile offsets gathered by fancy indexing, the residual tile expanded with
   repeat/tile and bounds masks, each tensor's projection stacked, deduplicated with
   np.unique on a packed (timestep, coords) key plus a sort of the kept indices, then
   ravel_multi_index. It leaves out the reference's Python and library overheads (its
   LoopTree walk, sympy lambdify, ISL bounds, pydantic), so it is a lower bound on the
   reference's time and the speedup is an underestimate. The estimate's arrays are
   checked equal to looptrace's. Beside them, the floor of any implementation: numpy
   writing arrays of the result's sizes into fresh memory, and nothing else.
   Also the output-stationary mapping (gemm_output_stationary: k innermost). The
   workers that trace_accesses takes are the CPUs the process may use: run it under
   `taskset -c 1` for one, without for all.
2. `stream` on huge_gemm (M=K=N=10240, 1.07e12 timesteps): a prefix pulled in numpy
   batches, records per second.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import time
from pathlib import Path

import numpy as np

import looptrace

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "bench" / "specs"
GEMM_PROJECTIONS = {"A": ("m", "k"), "B": ("k", "n"), "Z": ("m", "n")}  # Z[m, n] = A[m, k] * B[k, n]


def best_of(n, fn):
    best, out = float("inf"), None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def reference_estimate(loops, extents, projections, t0=0):
    """The reference's numpy work for one leaf under a single Nested (see the module
    docstring). `loops`: (rank variable, tile_shape, iterations, stride) outermost first."""
    iters = tuple(n for _rv, _s, n, _st in loops)
    idx = np.indices(iters, dtype=np.int64).reshape(len(loops), -1)
    n_loop = idx.shape[1]
    timestep = np.full(n_loop, t0, dtype=np.int64)
    for i, (_rv, _s, _n, stride) in enumerate(loops):
        if stride:
            timestep = timestep + idx[i] * stride
    rvs = list(extents)
    innermost = {rv: i for i, (rv, _s, _n, _st) in enumerate(loops)}
    base = {rv: np.zeros(n_loop, dtype=np.int64) for rv in rvs}
    extent = {rv: np.full(n_loop, extents[rv], dtype=np.int64) for rv in rvs}
    for i, (rv, shape, n, _st) in enumerate(loops):
        j = np.arange(n, dtype=np.int64)
        offsets = np.where(j == 0, 0, shape + (j - 1) * shape)
        sizes = np.where(j == 0, shape, shape)
        base[rv] = base[rv] + offsets[idx[i]]
        if innermost[rv] == i:
            extent[rv] = sizes[idx[i]]
    residual_shape = [int(extent[rv].max()) if rv in innermost else extents[rv] for rv in rvs]
    n_res = int(np.prod(residual_shape))
    residual = np.indices(tuple(residual_shape), dtype=np.int64).reshape(len(rvs), -1)
    timestep = np.repeat(timestep, n_res)
    valid = np.ones(n_loop * n_res, dtype=bool)
    coords = {}
    for i, rv in enumerate(rvs):
        delta = np.tile(residual[i], n_loop)
        c = np.repeat(base[rv], n_res) + delta
        valid &= delta < np.repeat(extent[rv], n_res)
        valid &= c < extents[rv]
        coords[rv] = c
    timestep = timestep[valid]
    coords = {rv: c[valid] for rv, c in coords.items()}
    out = {}
    for tensor, ranks in projections.items():
        cols = np.stack([np.rint(np.broadcast_to(np.asarray(coords[rv]), timestep.shape)).astype(np.int64)
                         for rv in ranks], axis=1)
        key = timestep.astype(np.int64)
        for i in range(cols.shape[1]):
            key = key * max(int(cols[:, i].max()) + 1, 1) + cols[:, i]
        _, keep = np.unique(key, return_index=True)
        keep.sort()
        t, c = timestep[keep], cols[keep]
        shape = tuple(int(x) for x in c.max(axis=0) + 1)
        element = np.ravel_multi_index(tuple(c[:, i] for i in range(c.shape[1])), shape).astype(np.int64)
        out[tensor] = (t, element, c)
    return out


def loops_of(spec):
    """(rank variable, tile_shape, iterations, stride) of each loop of a single-leaf Nested."""
    loops = []
    for node in spec.describe()["mapping"]["nodes"]:
        if node["kind"] == "Temporal":
            loops.append((node["rank_variable"], node["tile_shape"], node["iterations"], node["iteration_duration"]))
    return loops


def bench_trace_accesses(repeats):
    cpus = len(os.sched_getaffinity(0))
    print("trace_accesses, 128^3 GEMM (best of %d; %d CPU%s, so %d worker%s)"
          % (repeats, cpus, "s" if cpus > 1 else "", min(cpus, 8), "s" if cpus > 1 else ""))
    for mapping in ("gemm_tiled", "huge_gemm", "gemm_output_stationary"):
        spec = looptrace.Spec.from_yaml(SPECS / "gemm.workload.yaml", SPECS / f"{mapping}.mapping.yaml",
                                        jinja_parse_data={"M": 128, "K": 128, "N": 128})
        with_coords = lambda: [t.coordinates for t in looptrace.trace_accesses(spec, max_points=1 << 40).traces]
        extents = spec.workload.einsums[0].rank_variables
        reference = lambda: reference_estimate(loops_of(spec), extents, GEMM_PROJECTIONS)
        trace = looptrace.trace_accesses(spec, max_points=1 << 40)
        sizes = [t.n_accesses for t in trace.traces]
        # The floor of any trace_accesses: writing its timestep and element arrays into
        # fresh memory, and nothing else.
        write_only = lambda: [np.full(n, 1, dtype=np.int64) for n in sizes for _ in (0, 1)]
        ours, coords, est, floor = float("inf"), float("inf"), float("inf"), float("inf")
        for _ in range(repeats):  # interleaved, so that load on the machine hits all alike
            ours = min(ours, best_of(1, lambda: looptrace.trace_accesses(spec, max_points=1 << 40))[0])
            coords = min(coords, best_of(1, with_coords)[0])
            est = min(est, best_of(1, reference)[0])
            floor = min(floor, best_of(1, write_only)[0])
        ref = reference()
        n = sum(t.n_accesses for t in trace.traces)
        for t in trace.traces:  # the estimate computes what the reference computes
            rt, re, rc = ref[t.tensor]
            assert np.array_equal(rt, t.timestep) and np.array_equal(re, t.element), t.tensor
            assert np.array_equal(rc, t.coordinates), t.tensor
        print(f"  {mapping:10s} {n:>9,} accesses: looptrace {ours * 1e3:6.1f} ms ({n / ours / 1e6:4.0f} M/s), "
              f"{coords * 1e3:6.1f} ms with every .coordinates; reference estimate {est * 1e3:7.1f} ms: "
              f"{est / ours:4.0f}x ({est / coords:4.0f}x with coordinates)")
        print(f"  {'':10s} writing the arrays alone: {floor * 1e3:6.1f} ms; 100x the estimate would be "
              f"{est / 100 * 1e3:5.1f} ms")


def bench_stream(records, batches):
    spec = looptrace.Spec.from_yaml(SPECS / "gemm.workload.yaml", SPECS / "huge_gemm.mapping.yaml",
                                    jinja_parse_data={"M": 10240, "K": 10240, "N": 10240})
    timesteps = records // 3  # three records (A, B, Z) per timestep
    print(f"stream, huge_gemm prefix of {timesteps:,} timesteps")
    for batch in batches:
        def run():
            n = 0
            for b in looptrace.stream(spec, max_timesteps=timesteps, batch=batch):
                n += len(b)
            return n
        run()  # warm up
        t, n = best_of(3, run)
        print(f"  batch {batch:>9,}: {n:,} records in {t:.3f} s = {n / t / 1e6:5.0f} M records/s")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--records", type=int, default=300_000_000)
    args = p.parse_args()
    # trace_accesses and its floor with arrays past 1 MiB in fresh pages every time, as
    # the floor's definition says: else glibc raises its mmap threshold after the first
    # frees, later arrays reuse pages faulted in before, and a row's floor depends on the
    # rows measured before it (4 ms or 17 ms for the same arrays). The stream's batches
    # then come from the heap again, as they do by default once the threshold has risen.
    mmap_threshold(1 << 20)
    bench_trace_accesses(args.repeats)
    mmap_threshold(64 << 20)
    bench_stream(args.records, (1 << 14, 1 << 16, 1 << 20))


def mmap_threshold(size):
    """glibc's M_MMAP_THRESHOLD (fixed from then on); nothing elsewhere."""
    try:
        ctypes.CDLL(None).mallopt(-3, int(size))
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    main()

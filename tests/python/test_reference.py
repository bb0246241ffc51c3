"""AccelForge's own test suite for the reference (tests/test_accesstrace.py of
Accelergy-Project/accelforge), restated with looptrace's imports.

What changes, and why:
- `af.examples...` and `EXAMPLES_DIR` are the copies of AccelForge's example files in
  ../shared/accelforge-examples; conv1d's input files are examples/specs/conv1d.*.
- That copy of `workloads/basic/matmuls.yaml` names its tensors T0, W0, T1, W1, T2 (a
  later AccelForge renamed them I, WA, A, WB, B); the tensor the reference calls "A",
  written by the first Einsum and read by the second, is T1 here.
- `evaluate_mapping(spec).mapping()` is the spec's own mapping (evaluating a mapping
  does not change it); `spec.map_workload_to_arch().mapping()` runs AccelForge's mapper,
  which looptrace does not have: the test uses the mapping the mapper gives
  (specs/fanout_at_glb_1matmul.mapping.yaml, AccelForge's golden mapping).
"""

import unittest

import numpy as np
from matplotlib.collections import PatchCollection

from conftest import EXAMPLES_DIR, ROOT, SPECS
from looptrace import Spec, plot_access_trace, trace_accesses

INPUT_FILES = ROOT / "examples" / "specs"
INTERMEDIATE = "T1"  # the reference's "A"


def _matmul_spec(mapping: str, **jinja):
    return Spec.from_yaml(
        EXAMPLES_DIR / "arches" / "simple.yaml",
        EXAMPLES_DIR / "workloads" / "basic" / "matmuls.yaml",
        EXAMPLES_DIR / "mappings" / f"{mapping}.yaml",
        jinja_parse_data={"N_EINSUMS": 2, "M": 8, "KN": 4, **jinja},
    )


def _blocks(axis):
    """The single PatchCollection of memory-level tile blocks drawn on ``axis``."""
    (blocks,) = [c for c in axis.collections if isinstance(c, PatchCollection)]
    return blocks


def _conv_spec():
    return Spec.from_yaml(
        EXAMPLES_DIR / "arches" / "simple.yaml",
        INPUT_FILES / "conv1d.workload.yaml",
        INPUT_FILES / "conv1d.mapping.yaml",
    )


class TestTraceAccesses(unittest.TestCase):
    def test_one_timestep_per_compute(self):
        """An untiled, unparallelized mapping runs exactly one compute per timestep."""
        spec = _matmul_spec("unfused_matmuls_to_simple")
        trace = trace_accesses(spec.mapping, workload=spec.workload)
        self.assertEqual(trace.n_timesteps, spec.workload.n_computes())

    def test_covers_every_tensor_element(self):
        spec = _matmul_spec("unfused_matmuls_to_simple")
        trace = trace_accesses(spec)
        for tensor in trace.tensors:
            touched = np.unique(np.concatenate([t.element for t in trace.for_tensor(tensor)]))
            size = int(np.prod(trace.tensor_shapes[tensor]))
            self.assertEqual(touched.tolist(), list(range(size)), tensor)

    def test_unfused_einsums_do_not_overlap(self):
        trace = trace_accesses(_matmul_spec("unfused_matmuls_to_simple"))
        (_, end0), (start1, _) = trace.einsum_timespans.values()
        self.assertLessEqual(end0, start1)

    def test_fused_einsums_interleave(self):
        spec = _matmul_spec("fused_matmuls_to_simple")
        trace = trace_accesses(spec)
        (start0, end0), (start1, end1) = trace.einsum_timespans.values()
        self.assertLess(start1, end0)
        self.assertLess(start0, end1)
        self.assertEqual(trace.n_timesteps, spec.workload.n_computes())

    def test_halo_projection(self):
        """I[p + r] slides a 3-wide window across a 10-element tensor."""
        trace = trace_accesses(_conv_spec())
        self.assertEqual(trace.tensor_shapes["I"], (10,))
        (inputs,) = trace.for_tensor("I")
        self.assertEqual(inputs.timestep.tolist(), list(range(24)))
        self.assertEqual(inputs.element.tolist(), [p + r for p in range(8) for r in range(3)])
        (outputs,) = trace.for_tensor("O")
        self.assertTrue(outputs.is_output)
        self.assertEqual(outputs.element.tolist(), [p for p in range(8) for _ in range(3)])

    def test_spatial_loops_share_a_timestep(self):
        """Spatial iterations run concurrently, so they do not advance the clock."""
        spec = Spec.from_yaml(
            EXAMPLES_DIR / "arches" / "fanout_variations" / "at_glb.yaml",
            EXAMPLES_DIR / "workloads" / "basic" / "matmuls.yaml",
            SPECS / "fanout_at_glb_1matmul.mapping.yaml",  # the mapper's mapping
            jinja_parse_data={"N_EINSUMS": 1, "M": 8, "KN": 4},
        )
        trace = trace_accesses(spec.mapping, workload=spec.workload)
        self.assertLess(trace.n_timesteps, spec.workload.n_computes())
        self.assertEqual(trace.n_timesteps, 8 * 4)  # m x n0; n1 is spread over 4 PEs

    def test_a_loop_above_a_storage_creates_tiles(self):
        trace = trace_accesses(_conv_spec())
        windows = trace.tile_lifetime("GlobalBuffer", "I")
        self.assertEqual(len(windows), trace.tensor_shapes["O"][0])
        self.assertEqual(windows, [(t, t + 3) for t in range(0, trace.n_timesteps, 3)])


class TestPlotAccessTrace(unittest.TestCase):
    def test_plots_one_axes_per_tensor(self):
        trace = trace_accesses(_matmul_spec("fused_matmuls_to_simple"))
        fig, axes = plot_access_trace(trace)
        self.assertEqual(len(axes), len(trace.tensors))
        self.assertEqual(axes[-1].get_xlabel(), "Timestep")

    def test_accepts_a_spec_directly(self):
        fig, axes = plot_access_trace(_conv_spec())
        self.assertEqual(len(axes), 3)

    def test_color_by_access_and_rank(self):
        spec = _matmul_spec("fused_matmuls_to_simple")
        fig, axes = plot_access_trace(spec, tensors=[INTERMEDIATE], color_by="access", rank="M")
        self.assertEqual(axes[0].get_ylabel(), "M")

    def test_memory_level_shades_one_block_per_tile(self):
        trace = trace_accesses(_matmul_spec("fused_matmuls_to_simple"))
        _, axes = plot_access_trace(trace, memory_level="GlobalBuffer")
        for axis, tensor in zip(axes, trace.tensors):
            self.assertEqual(
                len(_blocks(axis).get_paths()), len(trace.tile_lifetime("GlobalBuffer", tensor)), tensor
            )

    def test_memory_level_blocks_cover_the_tile(self):
        trace = trace_accesses(_matmul_spec("fused_matmuls_to_simple"))
        _, axes = plot_access_trace(trace, tensors=[INTERMEDIATE], memory_level="GlobalBuffer")
        (written,) = [t for t in trace.for_tensor(INTERMEDIATE) if t.is_output]
        windows = trace.tile_lifetime("GlobalBuffer", INTERMEDIATE)
        blocks = _blocks(axes[0])
        self.assertEqual(len(blocks.get_paths()), len(windows))
        for (start, end), path in zip(windows, blocks.get_paths()):
            resident = written.element[(written.timestep >= start) & (written.timestep < end)]
            extents = path.get_extents()  # a PatchCollection keeps its paths in data coordinates
            self.assertEqual(tuple(extents.min), (start - 0.5, resident.min() - 0.5))
            self.assertEqual(tuple(extents.max), (end - 0.5, resident.max() + 0.5))


if __name__ == "__main__":
    unittest.main()

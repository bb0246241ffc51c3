"""plot_access_trace beyond the reference's tests: rank labels, rasters for large
traces (binned in C++ from an AccessTrace, or streamed from a Spec), errors."""

import numpy as np
import pytest
from matplotlib.collections import PatchCollection, PathCollection
from matplotlib.image import AxesImage

from conftest import ROOT
import looptrace

SPECS = ROOT / "examples" / "specs"
BENCH = ROOT / "bench" / "specs"


def _fused(**d):
    return looptrace.Spec.from_yaml(SPECS / "matmuls.yaml", SPECS / "fused_matmuls_to_simple.mapping.yaml",
                                    jinja_parse_data={"N_EINSUMS": 2, "M": 8, "KN": 4, **d})


def test_points_rank_and_blocks_by_hand():
    spec = looptrace.Spec.from_yaml(SPECS / "conv1d.workload.yaml", SPECS / "conv1d.mapping.yaml")
    fig, axes = looptrace.plot_access_trace(spec, memory_level="GlobalBuffer", rank="P")
    assert [a.get_ylabel() for a in axes] == ["P", "R", "P"]  # tensors without P: their own rank
    assert [a.get_xlabel() for a in axes] == ["", "", "Timestep"]
    (blocks,) = [c for c in axes[0].collections if isinstance(c, PatchCollection)]
    # GlobalBuffer holds I[p .. p + 2] over [3p, 3p + 3).
    ext = [(tuple(p.get_extents().min), tuple(p.get_extents().max)) for p in blocks.get_paths()]
    assert ext == [((3 * p - 0.5, p - 0.5), (3 * p + 2.5, p + 2.5)) for p in range(8)]
    points = [c for c in axes[0].collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in points) == 24


def test_a_large_in_memory_trace_is_binned_not_scattered():
    spec = _fused(M=64, KN=32)
    trace = looptrace.trace_accesses(spec, max_points=1 << 30)
    n = sum(t.n_accesses for t in trace.traces)
    fig, axes = looptrace.plot_access_trace(trace, max_scatter_points=n - 1, raster_shape=(16, 64))
    for axis in axes:
        assert not [c for c in axis.collections if isinstance(c, PathCollection)]
        (image,) = axis.images
        assert image.get_array().shape == (16, 64, 4)


def test_a_huge_spec_is_streamed_into_rasters():
    spec = looptrace.Spec.from_yaml(BENCH / "gemm.workload.yaml", BENCH / "gemm_tiled.mapping.yaml",
                                    jinja_parse_data={"M": 256, "K": 256, "N": 256})  # 1.8e7 accesses
    fig, axes = looptrace.plot_access_trace(spec, memory_level="GlobalBuffer", raster_shape=(30, 100))
    assert len(axes) == 3 and axes[-1].get_xlabel() == "Timestep"
    for axis in axes:
        assert not axis.collections  # no points: images only
        images = [i for i in axis.images if isinstance(i, AxesImage)]
        assert 1 <= len(images) <= 2 and max(i.get_array().shape[0] for i in images) <= 30
    assert "density raster" in " ".join(t.get_text() for t in fig.texts)


def test_errors():
    trace = looptrace.trace_accesses(_fused())
    with pytest.raises(ValueError, match="color_by"):
        looptrace.plot_access_trace(trace, color_by="tensor")
    with pytest.raises(ValueError, match="No traced accesses"):
        looptrace.plot_access_trace(trace, tensors=["nope"])
    with pytest.raises(ValueError, match="holds none"):
        looptrace.plot_access_trace(trace, memory_level="Nowhere")
    with pytest.raises(TypeError):
        looptrace.plot_access_trace(trace, max_timesteps=3)
    with pytest.raises(ValueError, match="max_points"):  # passed to trace_accesses, as in the reference
        looptrace.plot_access_trace(_fused(), max_points=10)
    fig, axes = looptrace.plot_access_trace(_fused(), max_timesteps=40)
    assert "truncated" in " ".join(t.get_text() for t in fig.texts)

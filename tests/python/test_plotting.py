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


# ---- cache=: the accesses that miss, marked ------------------------------------------
def _conv():
    return looptrace.Spec.from_yaml(SPECS / "conv1d.workload.yaml", SPECS / "conv1d.mapping.yaml")


def _miss_points(axes):
    """Per axes, the (timestep, y) of the crosses plot_access_trace(cache=) drew."""
    out = []
    for axis in axes:
        marks = [c for c in axis.collections if isinstance(c, PathCollection) and c.get_gid() == "cache-miss"]
        assert len(marks) == 1
        out.append(sorted((int(t), int(y)) for t, y in marks[0].get_offsets()))
    return out


def test_cache_misses_by_hand():
    # conv1d: timestep t = 3p + r reads I[p + r] and W[r], then writes O[p] (a byte each).
    # With align=64 and 64-byte lines, I, W, O are lines 0, 1, 2. Two sets of one way: I
    # and O share set 0, W has set 1. t = 0: all three miss (cold); then each timestep I
    # misses (O holds set 0), W hits, O misses (I took set 0 back).
    every = [(3 * p + r, p + r) for p in range(8) for r in range(3)]
    fig, axes = looptrace.plot_access_trace(_conv(), cache={"size": 128, "ways": 1, "align": 64})
    assert [a.get_title(loc="left").split()[0] for a in axes] == ["I", "W", "O"]
    i, w, o = _miss_points(axes)
    assert i == sorted(every)
    assert w == [(0, 0)]
    assert o == [(t, t // 3) for t in range(24)]
    assert "cache miss" in [t.get_text() for t in fig.legends[0].get_texts()]
    # Three lines fully associative: the cold misses at t = 0 alone.
    fig, axes = looptrace.plot_access_trace(_conv(), cache={"size": 192, "ways": "full", "align": 64})
    assert _miss_points(axes) == [[(0, 0)], [(0, 0)], [(0, 0)]]
    # W blocked by 128 (README "Caches"): W's 128 bytes from 64 push O to line 3, so W
    # and O share set 1 and miss every time, and I alone in set 0 misses once.
    lay = {"layout": {"tensors": {"W": {"block": {"R": 128}}}}}
    fig, axes = looptrace.plot_access_trace(_conv(), cache={"size": 128, "ways": 1, "align": 64, "layout": lay})
    i, w, o = _miss_points(axes)
    assert i == [(0, 0)]
    assert w == [(t, t % 3) for t in range(24)]
    assert o == [(t, t // 3) for t in range(24)]
    # The same cache as an object with the option names as attributes.
    from types import SimpleNamespace

    fig, axes = looptrace.plot_access_trace(_conv(), cache=SimpleNamespace(size=128, ways=1, align=64))
    assert _miss_points(axes)[1] == [(0, 0)]


def _line_misses(trace, size, ways, line, bases):
    """An independent model of the contract (SEMANTICS "Caches"): per timestep the
    reads, then the writes, traces in order, a line once per trace and timestep; LRU
    sets (line mod sets), the least recent first. Yields the missed (t, trace, line)."""
    sets = size // line // ways
    cache = [[] for _ in range(sets)]
    order = sorted(range(len(trace.traces)), key=lambda k: trace.traces[k].is_output)
    for t in sorted({int(t) for s in trace.traces for t in s.timestep}):
        for k in order:
            s = trace.traces[k]
            for l in sorted({(bases[s.tensor] + int(e)) // line for e in s.element[s.timestep == t]}):
                lru = cache[l % sets]
                if l in lru:
                    lru.remove(l)
                else:
                    yield (t, k, l)
                    if len(lru) == ways:
                        lru.pop(0)
                lru.append(l)


def _brute_force_misses(trace, size, ways, line, bases):
    """Per trace, the (timestep, element) accesses whose line's access at that timestep
    missed (_line_misses)."""
    missed = set(_line_misses(trace, size, ways, line, bases))
    return {k: sorted((int(t), int(e)) for t, e in zip(s.timestep, s.element)
                      if (int(t), k, (bases[s.tensor] + int(e)) // line) in missed)
            for k, s in enumerate(trace.traces)}


def test_cache_misses_against_a_brute_force_model():
    # 4-byte lines: I's ten bytes are lines 0-2 (elements 4i .. 4i + 3), W line 16, O
    # lines 32-33; elements of one line at one timestep miss or hit together.
    spec = _conv()
    trace = looptrace.trace_accesses(spec)
    bases = {"I": 0, "W": 64, "O": 128}
    for size, ways in [(8, 1), (16, 2), (12, 1), (16, 1), (12, 3), (16, 4)]:
        want = _brute_force_misses(trace, size, ways, 4, bases)
        fig, axes = looptrace.plot_access_trace(spec, cache=dict(size=size, ways=ways, line_bytes=4, align=64))
        got = _miss_points(axes)
        assert got == [want[0], want[1], want[2]], (size, ways)
        # Not all or nothing: hits and misses both.
        assert 0 < sum(map(len, got)) < 72
        import matplotlib.pyplot as plt

        plt.close(fig)
    # The count of line misses agrees with looptrace.cache's.
    c = looptrace.cache(spec, size=8, ways=1, line_bytes=4, align=64)["caches"][0]
    assert c["misses"] == sum(1 for _ in _line_misses(trace, 8, 1, 4, bases))


def test_cache_misses_with_einsums_and_errors():
    spec = _fused()
    # Only Matmul1's accesses traced: the cache sees those alone, and the crosses sit
    # on points that are drawn.
    fig, axes = looptrace.plot_access_trace(spec, einsums=["Matmul1"],
                                            cache={"size": "1KiB", "ways": 2, "line_bytes": 16})
    for axis in axes:
        drawn = {(float(t), float(y)) for c in axis.collections if isinstance(c, PathCollection)
                 and c.get_gid() != "cache-miss" for t, y in c.get_offsets()}
        marks = [c for c in axis.collections if c.get_gid() == "cache-miss"][0]
        assert {(float(t), float(y)) for t, y in marks.get_offsets()} <= drawn
    with pytest.raises(TypeError, match="AccessTrace"):
        looptrace.plot_access_trace(looptrace.trace_accesses(spec), cache={"size": 128})
    with pytest.raises(TypeError, match="caches"):
        looptrace.plot_access_trace(spec, cache={"caches": ["L1=128/2"]})
    with pytest.raises(ValueError, match="max_scatter_points"):
        looptrace.plot_access_trace(spec, cache={"size": 128}, max_scatter_points=10)
    with pytest.raises(looptrace.SpecError, match="whole number"):
        looptrace.plot_access_trace(spec, cache={"size": 1000})

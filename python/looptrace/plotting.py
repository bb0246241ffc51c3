"""The iteration-space vs data-space picture on matplotlib (the reference's
``accelforge.plotting.accesstrace.plot_access_trace``).

x is the timestep, y the tensor element (or, with ``rank=``, the coordinate along that
rank), one axes per tensor on a shared time axis. ``memory_level=`` shades one block
per tile window of that level: from ``start - 0.5`` to ``end - 0.5`` in time and from
the lowest to the highest element resident in the window (+- 0.5), as one
``PatchCollection`` per axes. ``cache=`` runs one cache over the traced selection and
marks the accesses that miss it with crosses. Past ``max_scatter_points`` accesses the
panels are density rasters binned in C++ (a Spec is then streamed, never held), so
matplotlib never gets more than a raster's cells.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import _looptrace
from ._types import AccessTrace

__all__ = ["plot_access_trace"]

_COLORS = ("#2a78d6", "#eb6834", "#1baf7a", "#eda100", "#e87ba4", "#008300", "#4a3aa7", "#e34948")
_OTHER = "#8a8a85"
_MIXED = "#7f7f7f"
_READ_MARKER, _WRITE_MARKER = "s", "^"
_TILE_COLOR = "#dcdcd4"
_MISS_COLOR, _MISS_MARKER = "#d01c1c", "x"
# What cache= takes: cache()'s options for one cache over the trace.
_CACHE_OPTIONS = ("size", "ways", "line_bytes", "policy", "write_through", "write_allocate", "align", "layout")
_EMPTY, _SEVERAL = 0xFFFF, 0xFFFE


def plot_access_trace(
    trace,
    workload=None,
    tensors: Iterable[str] | None = None,
    color_by: str = "einsum",
    rank: str | None = None,
    memory_level: str | None = None,
    level_color: str = _TILE_COLOR,
    marker_size: float | None = None,
    ncols: int = 1,
    ax=None,
    figsize=None,
    max_scatter_points: int = 200_000,
    raster_shape: tuple = (120, 480),
    cache=None,
    miss_color: str = _MISS_COLOR,
    **trace_kwargs,
):
    """Plot timestep (x) against accessed element (y); returns ``(fig, axes)``.

    ``trace`` is an AccessTrace or anything ``trace_accesses`` takes (a Spec, a Mapping
    with ``workload=``); ``trace_kwargs`` (``max_timesteps=``, ``einsums=``, ...) go to
    the trace (``max_points=`` too, as in the reference). ``color_by`` is ``"einsum"`` or
    ``"access"`` (read vs write). More than ``max_scatter_points`` accesses are drawn as
    ``raster_shape`` (rows, columns) density rasters computed in C++; a Spec is then
    streamed, never held, and needs no ``max_points``.

    ``cache``: a dict of ``looptrace.cache()``'s options for one cache (``size``,
    ``ways``, ``line_bytes``, ``policy``, ``write_through``, ``write_allocate``,
    ``align``, ``layout``; the rest default as there), or an object with those
    attributes. The cache runs over the trace of the plotted selection (the tensors,
    Einsums and timesteps drawn, as ``cache(spec, tensors=..., einsums=...,
    max_timesteps=...)`` would), and each access that misses is marked with a
    ``miss_color`` cross over its point (legend: "cache miss"; the crosses are the
    collection whose ``get_gid()`` is ``"cache-miss"``). The cache sees lines, once
    per timestep and Einsum access (SEMANTICS.md "Caches"); an element access (timestep
    t, element e of a tensor, by an Einsum) misses when a line its bytes cover missed
    as that Einsum's access to the tensor at t, so the elements of one line at one
    timestep miss or hit together. Needs a Spec (or Mapping), not an AccessTrace, and
    a scatter (no more than ``max_scatter_points`` accesses).
    """
    if color_by not in ("einsum", "access"):
        raise ValueError(f"color_by must be 'einsum' or 'access'. Got {color_by!r}.")
    from . import _handle, _names, summary, trace_accesses

    names = _names(tensors)
    cache_options = None if cache is None else _cache_options(cache)
    if cache_options is not None and isinstance(trace, AccessTrace):
        raise TypeError("cache= runs the cache over the spec's trace: pass the Spec (or Mapping and workload=), "
                        "not an AccessTrace.")
    if not isinstance(trace, AccessTrace):
        handle = _handle(trace, workload)
        counted = summary(trace, workload, tensors=names, windows="none", **_summary_kwargs(trace_kwargs))
        total = sum(t["n_accesses"] for t in counted["traces"])
        if total > max_scatter_points:
            if cache_options is not None:
                raise ValueError(f"cache= marks misses on scattered points, but the trace has {total} accesses, "
                                 f"more than max_scatter_points={max_scatter_points}: raise it or trace less "
                                 f"(max_timesteps=, einsums=, tensors=).")
            return _plot_streamed_raster(handle, names, color_by, rank, memory_level, level_color, ncols, ax,
                                         figsize, raster_shape, trace_kwargs)
        trace = trace_accesses(trace, workload=workload, tensors=names, **trace_kwargs)
        if cache_options is not None:
            misses = _miss_masks(handle, trace, names, trace_kwargs, cache_options)
    elif trace_kwargs:
        raise TypeError(
            f"Got {sorted(trace_kwargs)}, but `trace` is already an AccessTrace. Pass "
            f"those arguments to trace_accesses() instead."
        )

    names = list(trace.tensors) if names is None else names
    missing = [t for t in names if not trace.for_tensor(t)]
    if missing:
        raise ValueError(f"No traced accesses for tensor(s) {missing}. The trace covers {trace.tensors}.")
    if not names:
        raise ValueError("The trace contains no tensor accesses to plot.")
    if memory_level is not None and not any(trace.tile_lifetime(memory_level, t) for t in names):
        raise ValueError(
            f"Memory level {memory_level!r} holds none of the tensors being plotted ({names}). "
            f"The mapping stores tensors in {trace.memory_levels}."
        )

    colors = _color_assignment(trace.einsums, color_by)
    fig, axes = _layout(len(names), ncols, ax, figsize)
    x_max = max(trace.n_timesteps, 1)
    n_points = sum(t.n_accesses for name in names for t in trace.for_tensor(name))
    raster = n_points > max_scatter_points
    if cache_options is not None and raster:
        raise ValueError(f"cache= marks misses on scattered points, but {n_points} accesses are more than "
                         f"max_scatter_points={max_scatter_points}.")
    for axis, tensor in zip(axes, names):
        subtraces = trace.for_tensor(tensor)
        windows = [] if memory_level is None else trace.tile_lifetime(memory_level, tensor)
        y_label, y_extent = _y_axis(subtraces[0], rank)
        blocks = _tile_blocks(subtraces, windows, rank)
        if blocks:
            _add_blocks(axis, blocks, level_color)
        if raster:
            _draw_binned(axis, subtraces, rank, colors, color_by, x_max, y_extent, raster_shape)
        else:
            size = marker_size or _marker_size(axis, x_max, y_extent, n_points)
            for sub in subtraces:
                axis.scatter(
                    sub.timestep,
                    _y_values(sub, rank),
                    s=size**2,
                    c=colors[_series_key(sub, color_by)],
                    marker=_WRITE_MARKER if sub.is_output else _READ_MARKER,
                    linewidths=0,
                    rasterized=n_points > 50_000,
                )
            if cache_options is not None:
                _draw_misses(axis, subtraces, misses, rank, size, miss_color, n_points)
        _style(axis, tensor, subtraces[0].tensor_shape, y_label, x_max, y_extent)
    handles = _legend(trace, names, colors, color_by)
    if cache_options is not None:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], linestyle="none", marker=_MISS_MARKER, markersize=5, color=miss_color,
                              label="cache miss"))
    _finish(fig, axes, ax, ncols, len(names), handles, memory_level, level_color, trace.truncated,
            trace.n_timesteps)
    return fig, axes


# ---- helpers ------------------------------------------------------------------------
def _cache_options(cache) -> dict:
    """cache= as cache()'s keyword options: a dict, or an object's attributes of those names."""
    if isinstance(cache, dict):
        unknown = sorted(set(cache) - set(_CACHE_OPTIONS))
        if unknown:
            raise TypeError(f"cache= takes one cache's options {list(_CACHE_OPTIONS)}, not {unknown} "
                            f"(hierarchies and transfer sources are looptrace.cache()'s).")
        return dict(cache)
    options = {k: getattr(cache, k) for k in _CACHE_OPTIONS if hasattr(cache, k)}
    if not options:
        raise TypeError(f"cache= takes a dict of cache options ({', '.join(_CACHE_OPTIONS)}) or an object with "
                        f"those attributes, not {type(cache).__name__}.")
    return options


def _miss_masks(handle, trace, names, trace_kwargs, options) -> dict:
    """Per plotted subtrace (by identity), a bool array: which of its accesses miss."""
    from . import _layout_source, _names as names_of

    layout_text, layout_file = _layout_source(options.get("layout"))
    subtraces = list(trace.traces)
    masks = _looptrace.cache_miss_masks(
        handle, names, names_of(trace_kwargs.get("einsums")), trace_kwargs.get("max_timesteps"),
        str(options.get("size", "1MiB")), str(options.get("ways", "16")), int(options.get("line_bytes", 64)),
        str(options.get("policy", "lru")), bool(options.get("write_through", False)),
        bool(options.get("write_allocate", True)), int(options.get("align", 4096)), layout_text, layout_file,
        [(s.einsum, s.tensor, s.timestep, s.element) for s in subtraces])
    return {id(s): m for s, m in zip(subtraces, masks)}


def _draw_misses(axis, subtraces, misses, rank, size, color, n_points):
    """The missing accesses of one axes' subtraces, as crosses over their points."""
    t = np.concatenate([s.timestep[misses[id(s)]] for s in subtraces])
    y = np.concatenate([np.asarray(_y_values(s, rank))[misses[id(s)]] for s in subtraces])
    axis.scatter(t, y, s=size**2, c=color, marker=_MISS_MARKER, linewidths=max(0.6, size / 5), zorder=3,
                 gid="cache-miss", rasterized=n_points > 50_000)


def _summary_kwargs(trace_kwargs: dict) -> dict:
    allowed = ("einsums", "max_timesteps", "from_", "to")
    return {k: v for k, v in trace_kwargs.items() if k in allowed}


def _color_assignment(einsums, color_by: str) -> dict:
    if color_by == "access":
        return {False: _COLORS[0], True: _COLORS[1]}
    return {e: (_COLORS[i] if i < len(_COLORS) else _OTHER) for i, e in enumerate(einsums)}


def _series_key(sub, color_by: str):
    return sub.is_output if color_by == "access" else sub.einsum


def _y_values(sub, rank):
    if rank is not None and rank in sub.ranks:
        return sub.coordinates[:, sub.ranks.index(rank)]
    return sub.element


def _y_axis(sub, rank):
    """The y label and extent: the rank's name and size with ``rank=``, else the element."""
    if rank is not None and rank in sub.ranks:
        i = sub.ranks.index(rank)
        return str(rank), int(sub.tensor_shape[i])
    label = str(sub.ranks[0]) if len(sub.ranks) == 1 else "Element"
    return label, int(sub.tensor_size)


def _tile_blocks(subtraces, windows, rank):
    """One (x0, y0, width, height) block per window in which the tensor is touched:
    the window's span in time, the lowest to the highest resident y."""
    if not windows or not subtraces:
        return []
    t = np.concatenate([s.timestep for s in subtraces])
    y = np.concatenate([_y_values(s, rank) for s in subtraces])
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    blocks = []
    for start, end in windows:
        lo, hi = np.searchsorted(t, (start, end))
        if hi <= lo:
            continue  # reserved, but nothing touches the tensor in this window
        y_lo, y_hi = int(y[lo:hi].min()), int(y[lo:hi].max())
        blocks.append((start - 0.5, y_lo - 0.5, end - start, y_hi - y_lo + 1))
    return blocks


def _add_blocks(axis, blocks, color):
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    patches = [Rectangle((x, y), w, h) for x, y, w, h in blocks]
    axis.add_collection(
        PatchCollection(patches, facecolor=color, edgecolor="none", linewidths=0.0, zorder=0,
                        rasterized=len(patches) > 2000)
    )


def _marker_size(axis, n_x, n_y, n_points) -> float:
    bbox = axis.get_window_extent()
    dpi = axis.get_figure().dpi or 100.0
    per_cell = min(max(bbox.width, 1) * 72 / dpi / max(n_x, 1), max(bbox.height, 1) * 72 / dpi / max(n_y, 1))
    return float(np.clip(per_cell * 0.9, 0.8, 6.0 if n_points < 20_000 else 3.0))


def _rgba(counts, series, colors, share=None):
    """A cell image: the colour of the series that touched the cell (grey for several),
    darker with more accesses (log scale), or with `share`, the share of the cell's
    elements touched at a timestep (0 to 1); empty cells transparent."""
    from matplotlib.colors import to_rgb

    palette = np.array([to_rgb(c) for c in colors] + [to_rgb(_MIXED)], dtype=float)
    index = np.where(series == _SEVERAL, len(colors), np.minimum(series, len(colors)))
    index = np.where(series == _EMPTY, 0, index)
    rgb = palette[index]
    c = counts.astype(float)
    shade = np.log1p(c) / max(np.log1p(c.max()), 1e-9) if share is None else np.clip(share, 0.0, 1.0)
    rgb = rgb * (1.0 - 0.45 * shade[..., None])
    alpha = np.where(series == _EMPTY, 0.0, 0.55 + 0.45 * shade)
    return np.concatenate([rgb, alpha[..., None]], axis=-1)


def _draw_binned(axis, subtraces, rank, colors, color_by, x_max, y_extent, raster_shape):
    """An in-memory trace too large to scatter: binned in C++, drawn as one image."""
    rows, columns = (int(raster_shape[0]), int(raster_shape[1]))
    rows, columns = max(1, min(rows, y_extent)), max(1, min(columns, x_max))
    keys = list(colors)
    series = [keys.index(_series_key(s, color_by)) for s in subtraces]
    counts, who = _looptrace.bin_points(
        [s.timestep for s in subtraces], [np.ascontiguousarray(_y_values(s, rank)) for s in subtraces], series,
        0, x_max, 0, y_extent, columns, rows)
    axis.imshow(_rgba(counts, who, [colors[k] for k in keys]), origin="lower", aspect="auto",
                interpolation="nearest", extent=(-0.5, x_max - 0.5, -0.5, y_extent - 0.5), zorder=1)


def _layout(n, ncols, ax, figsize):
    import matplotlib.pyplot as plt

    if ax is not None:
        if n != 1:
            raise ValueError(f"ax= draws a single tensor, but {n} were requested.")
        return ax.get_figure(), [ax]
    ncols = max(1, min(int(ncols), n))
    nrows = -(-n // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=figsize or (6.5 * ncols, 2.0 * nrows + 0.6), sharex=True,
                             squeeze=False)
    axes = list(grid.flat)
    for extra in axes[n:]:
        extra.set_visible(False)
    return fig, axes[:n]


def _style(axis, tensor, shape, y_label, x_max, y_extent, x_min=0):
    axis.set_ylabel(y_label)
    axis.set_title(f"{tensor}  [{'x'.join(str(d) for d in shape)}]", loc="left", fontsize="medium")
    axis.set_xlim(x_min - 0.5, x_max - 0.5)
    axis.set_ylim(-0.5, max(y_extent - 0.5, 0.5))
    axis.grid(True, lw=0.4, alpha=0.25)
    axis.set_axisbelow(True)
    for side in ("top", "right"):
        axis.spines[side].set_visible(False)


def _legend(trace, names, colors, color_by):
    from matplotlib.lines import Line2D

    seen, handles = [], []
    for tensor in names:
        for sub in trace.for_tensor(tensor):
            key = (_series_key(sub, color_by), sub.is_output)
            if key in seen:
                continue
            seen.append(key)
            access = "write" if sub.is_output else "read"
            label = access if color_by == "access" else f"{sub.einsum} ({access})"
            handles.append(Line2D([], [], linestyle="none", marker=_WRITE_MARKER if sub.is_output else _READ_MARKER,
                                  markersize=5, color=colors[_series_key(sub, color_by)], label=label))
    return handles


def _finish(fig, axes, ax, ncols, n, handles, memory_level, level_color, truncated, n_timesteps, note=None):
    from matplotlib.patches import Patch

    ncols = 1 if ax is not None else max(1, min(int(ncols), n))
    bottom = {0} if ax is not None else {max(i for i in range(n) if i % ncols == c) for c in range(ncols)}
    for i in bottom:
        axes[i].set_xlabel("Timestep")
        axes[i].tick_params(labelbottom=True)
    if memory_level is not None:
        handles.append(Patch(facecolor=level_color, label=f"tile in {memory_level}"))
    if len(handles) > 1:
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=min(len(handles), 4),
                   frameon=False, fontsize="small")
        fig.tight_layout(rect=(0, 0, 1, 0.99 - 0.03 * -(-len(handles) // 4)))
    elif ax is None:
        fig.tight_layout()
    text = note or (f"truncated to the first {n_timesteps} timesteps" if truncated else None)
    if text:
        fig.text(0.99, 0.005, text, ha="right", va="bottom", fontsize="x-small", alpha=0.7)


def _plot_streamed_raster(handle, names, color_by, rank, memory_level, level_color, ncols, ax, figsize,
                          raster_shape, trace_kwargs):
    """A Spec whose trace is too large to hold: build_plot streams it in C++ into one
    density raster per panel (cells of whole timesteps and elements)."""
    from matplotlib.lines import Line2D

    unknown = set(trace_kwargs) - {"einsums", "max_timesteps", "from_", "to", "max_points"}
    if unknown:
        raise TypeError(f"unexpected arguments {sorted(unknown)}")
    from . import _names as names_of

    rows, columns = int(raster_shape[0]), int(raster_shape[1])
    data = _looptrace.plot_raster(
        handle, names, names_of(trace_kwargs.get("einsums")), trace_kwargs.get("max_timesteps"),
        trace_kwargs.get("from_"), trace_kwargs.get("to"), color_by, rank or "", memory_level or "", columns, rows)
    series = data["series"]
    colors = [c for _label, c, _out in series]
    t0, t1 = data["window"]
    fig, axes = _layout(len(data["panels"]), ncols, ax, figsize)
    for axis, p in zip(axes, data["panels"]):
        counts, who, tiles = p["counts"], p["series"], p["tiles"]
        rows_, cols_ = counts.shape
        x_end = t0 + cols_ * p["timesteps_per_column"]
        y_end = p["y_first"] + rows_ * p["y_per_row"]
        extent = (t0 - 0.5, x_end - 0.5, p["y_first"] - 0.5, y_end - 0.5)
        if memory_level and tiles.any():
            from matplotlib.colors import to_rgba

            shade = np.zeros(tiles.shape + (4,))
            shade[tiles.astype(bool)] = to_rgba(level_color)
            axis.imshow(shade, origin="lower", aspect="auto", interpolation="nearest", extent=extent, zorder=0)
        axis.imshow(_rgba(counts, who, colors, share=p["share"]), origin="lower", aspect="auto",
                    interpolation="nearest", extent=extent, zorder=1)
        label = p["ranks"][p["rank"]] if p["rank"] >= 0 else (p["ranks"][0] if len(p["ranks"]) == 1 else "Element")
        _style(axis, p["tensor"], p["shape"], label, t1, p["y_first"] + p["y_size"], x_min=t0)
        axis.set_ylim(p["y_first"] - 0.5, p["y_first"] + p["y_size"] - 0.5)
    handles = [Line2D([], [], linestyle="none", marker="s", markersize=5, color=c, label=label)
               for label, c, _out in series]
    cell = (f"density raster: a cell is {data['panels'][0]['timesteps_per_column']} timesteps x "
            f"{data['panels'][0]['y_per_row']} elements" if data["panels"] else None)
    _finish(fig, axes, ax, ncols, len(axes), handles, memory_level, level_color, data["truncated"], t1, note=cell)
    return fig, axes

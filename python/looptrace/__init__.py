"""looptrace: which tensor elements an accelerator LoopTree mapping touches at each timestep.

A drop-in for ``accelforge.tracegen`` (``trace_accesses``, ``AccessTrace``,
``TensorAccessTrace``) on looptrace's C++ engine, plus what the reference cannot do:
``stream`` (numpy batches of schedules too large to hold), ``summary``, ``movement``, ``timeline``,
``describe`` and ``transfers`` (the CLI's numbers as Python objects), and
``plot_access_trace`` (matplotlib; density rasters computed in C++ for large traces).
"""

from __future__ import annotations

from collections.abc import Iterable

import os
import numpy as np

from . import _looptrace
from ._errors import SpecError
from ._types import (
    AccessTrace,
    Einsum,
    IterationTrace,
    Mapping,
    MappingNode,
    Spec,
    TensorAccess,
    TensorAccessTrace,
    TransferTrace,
    Workload,
)

__all__ = [
    "AccessTrace",
    "TensorAccessTrace",
    "Spec",
    "Workload",
    "Einsum",
    "TensorAccess",
    "Mapping",
    "MappingNode",
    "IterationTrace",
    "TransferTrace",
    "SpecError",
    "Stream",
    "RECORD_DTYPE",
    "DEFAULT_MAX_POINTS",
    "trace_accesses",
    "trace_iterations",
    "stream",
    "summary",
    "movement",
    "timeline",
    "describe",
    "cache",
    "cache_curve",
    "transfers",
    "plot_access_trace",
]

__version__ = "0.1.0"

DEFAULT_MAX_POINTS = 2_000_000

# One record of a streamed trace: the library's AccessRecord (24 bytes). `trace` indexes
# Stream.traces; `multiplicity` is how many iteration-space points touch the element at
# that timestep (in that leaf).
RECORD_DTYPE = np.dtype(
    [("timestep", "<i8"), ("element", "<i8"), ("trace", "<u4"), ("multiplicity", "<u4")]
)


def _names(values) -> list | None:
    if values is None:
        return None
    if isinstance(values, str):
        return [values]
    return [str(v) for v in values]


def _handle(spec_or_mapping, workload=None):
    """The engine's handle for what a call traces: a Spec, a Mapping (with a workload),
    or anything with a ``mapping()`` method returning one (a mapper result)."""
    target = spec_or_mapping
    if isinstance(target, Spec) and not target._handle.has_mapping():
        raise ValueError(
            "The spec has no mapping, so there is nothing to trace. Did you forget to load a "
            "mapping into the Spec?"
        )
    if isinstance(target, Spec):
        if workload is not None and workload._handle is not target._handle:
            return _looptrace.combine(target._handle, workload._handle)
        return target._handle
    if not isinstance(target, Mapping) and callable(getattr(target, "mapping", None)):
        target = target.mapping()
    if isinstance(target, Mapping):
        if workload is None:
            raise ValueError(
                "A workload is required when tracing a bare Mapping. Pass a Spec, or "
                "supply the workload= argument."
            )
        if not isinstance(workload, Workload):
            raise TypeError(f"workload must be a looptrace Workload, not {type(workload).__name__}")
        if workload._handle is target._handle:
            return target._handle
        return _looptrace.combine(target._handle, workload._handle)
    raise TypeError(f"Expected a Spec, Mappings, or Mapping. Got {type(spec_or_mapping)}.")


def trace_accesses(
    spec_or_mapping,
    workload: Workload | None = None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
    threads: int | None = None,
) -> AccessTrace:
    """Trace which tensor elements a LoopTree mapping accesses at each timestep.

    As ``accelforge.tracegen.trace_accesses``, with SEMANTICS.md's differences: shapes
    come from the full schedule, and ``max_timesteps`` is the exact prefix. Raises
    ``ValueError`` (a ``SpecError``) when one Einsum would enumerate more than
    ``max_points`` points; ``stream`` has no such bound. ``threads``: workers that fill
    pieces of the traced time in place (default: the CPUs this process may use, up to
    8); the arrays are the same for any number.
    """
    handle = _handle(spec_or_mapping, workload)
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be at least 1, not {threads!r}")
    raw = _looptrace.trace_accesses(handle, _names(tensors), _names(einsums), max_timesteps, int(max_points),
                                    0 if threads is None else int(threads))
    traces = [TensorAccessTrace(*t) for t in raw["traces"]]
    return AccessTrace(
        traces=traces,
        n_timesteps=raw["n_timesteps"],
        tensor_shapes=raw["tensor_shapes"],
        tensor_ranks=raw["tensor_ranks"],
        einsum_timespans=raw["einsum_timespans"],
        tile_windows=raw["tile_windows"],
        truncated=raw["truncated"],
    )


class Stream:
    """An iterator of numpy batches (``RECORD_DTYPE``: timestep, element, trace,
    multiplicity) in time order; ``traces`` is the table that ``trace`` indexes, as
    (einsum, tensor, is_output, ranks, tensor_shape) tuples. Each batch owns its memory."""

    def __init__(self, raw, table):
        self._raw = raw
        self.traces = table
        self.tensor_shapes = {}
        for _einsum, tensor, _out, _ranks, shape in table:
            self.tensor_shapes.setdefault(tensor, shape)

    def __iter__(self):
        return self

    def __next__(self) -> np.ndarray:
        return self._raw.__next__()

    def coordinates(self, batch: np.ndarray, trace: int) -> np.ndarray:
        """The per-rank coordinates of ``batch``'s records of one trace, (n, ranks)."""
        shape = self.traces[trace][4]
        elements = batch["element"][batch["trace"] == trace]
        return np.stack(np.unravel_index(elements, shape), axis=1) if shape else np.zeros((len(elements), 0), np.int64)


def _selection(max_timesteps, from_, to, shard, sample, seed):
    if shard is not None:
        if isinstance(shard, str):
            i, _, n = shard.partition("/")
            shard = (int(i), int(n))
        shard = (int(shard[0]), int(shard[1]))
    return (max_timesteps, from_, to, shard, sample, int(seed))


def stream(
    spec_or_mapping,
    workload: Workload | None = None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
    sample: int | None = None,
    seed: int = 0,
    batch: int = 1 << 16,
) -> Stream:
    """Stream the trace in numpy batches of about ``batch`` records, in constant memory:
    the exact prefix ``max_timesteps``, the window ``[from_, to)``, ``shard=(i, n)`` (or
    ``"i/n"``), or ``sample`` distinct timesteps chosen with ``seed`` (the CLI's
    ``--max-timesteps``, ``--from``/``--to``, ``--shard``, ``--sample-timesteps``)."""
    handle = _handle(spec_or_mapping, workload)
    sel = _selection(max_timesteps, from_, to, shard, sample, seed)
    raw = _looptrace.stream(handle, _names(tensors), _names(einsums), *sel, int(batch), RECORD_DTYPE)
    return Stream(raw, raw.trace_table())


def trace_iterations(
    spec_or_mapping,
    workload=None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
    sample: int | None = None,
    seed: int = 0,
) -> list:
    """Each computing leaf's iterations: where its tile starts along every rank variable
    at each timestep (one row per spatial iteration), as ``looptrace iterations``.

    The reference's spelling ``trace_iterations(mapping, spec)`` works too."""
    if isinstance(workload, Spec):
        workload = workload.workload
    handle = _handle(spec_or_mapping, workload)
    raw = _looptrace.trace_iterations(handle, _names(einsums), *_selection(max_timesteps, from_, to, shard, sample, seed))
    return [IterationTrace(*r) for r in raw]


def summary(
    spec_or_mapping,
    workload: Workload | None = None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
    sample: int | None = None,
    seed: int = 0,
    windows: str = "full",
    threads: int = 1,
) -> dict:
    """What ``looptrace summary`` prints, as a dict (counts in closed form: no trace is run)."""
    handle = _handle(spec_or_mapping, workload)
    sel = _selection(max_timesteps, from_, to, shard, sample, seed)
    return _looptrace.summary(handle, _names(tensors), _names(einsums), *sel, windows, int(threads))


def movement(
    spec_or_mapping,
    workload: Workload | None = None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
    threads: int = 1,
    method: str = "closed-form",
    partial_sums: bool = False,
    layout=None,
    line_bytes: int = 64,
    align: int = 4096,
    convention: str = "looptree",
) -> dict:
    """What ``looptrace movement`` prints, as a dict: per memory level and tensor the
    windows, largest tile, fills and drains; per level the peak footprint; below
    ``!Spatial`` loops also ``instances``, ``max_tile_per_instance`` and
    ``fills_per_instance``. ``convention="timeloop"`` counts as ``--convention
    timeloop`` does (Timeloop's per-instance fills, reads and updates). ``method``:
    "closed-form" (tiles as boxes) or "enumerate" (every access; ``threads`` workers);
    ``partial_sums``: outputs read back after an earlier window drained them. With
    ``layout`` (a path or a dict, as ``--layout``): each parent level's ``"layout"``, the
    lines its fills and drains take in ``line_bytes`` lines against the fewest, and
    bank cycles where the file gives banks."""
    if method not in ("closed-form", "enumerate"):
        raise ValueError(f"method is 'closed-form' or 'enumerate', not {method!r}")
    if convention not in ("looptree", "timeloop"):
        raise ValueError(f"convention is 'looptree' or 'timeloop', not {convention!r}")
    handle = _handle(spec_or_mapping, workload)
    sel = _selection(max_timesteps, from_, to, shard, None, 0)[:4]
    layout_text, layout_file = _layout_source(layout)
    return _looptrace.movement(handle, _names(tensors), _names(einsums), *sel, int(threads),
                               method == "enumerate", bool(partial_sums), layout_text, layout_file,
                               int(line_bytes), int(align), convention == "timeloop")


def timeline(
    spec_or_mapping,
    workload: Workload | None = None,
    output=None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
    max_events: int = 200_000,
    cycles_per_timestep: int | None = None,
) -> dict:
    """What ``looptrace timeline`` writes, as a dict: Chrome trace-event JSON (Perfetto,
    chrome://tracing) with one process per memory level (Einsum spans, tile windows per
    tensor as slices, footprint, fills and drains as counters), in closed form. With
    ``output`` (a path), the JSON is also written there. Past ``max_events``, runs of
    windows become one slice each (their args say so)."""
    import json

    if int(max_events) < 1:
        raise ValueError(f"max_events must be >= 1, not {max_events!r}")
    if cycles_per_timestep is not None and not 1 <= int(cycles_per_timestep) <= 1 << 20:
        raise ValueError(f"cycles_per_timestep must be in [1, 2^20], not {cycles_per_timestep!r}")
    handle = _handle(spec_or_mapping, workload)
    sel = _selection(max_timesteps, from_, to, shard, None, 0)[:4]
    text = _looptrace.timeline(handle, _names(tensors), _names(einsums), *sel, int(max_events),
                               int(cycles_per_timestep or 0))
    if output is not None:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    return json.loads(text)


def describe(spec: Spec) -> dict:
    """What ``looptrace describe`` prints, as a dict: Einsums, tensors, the compiled LoopTree."""
    return spec.describe()


def _layout_source(layout):
    """(text, name) of a layout given as a path or a dict; ("", "") for none."""
    if layout is None:
        return "", ""
    if isinstance(layout, dict):
        import json

        return json.dumps(layout), "<layout dict>"  # JSON is YAML
    path = os.fspath(layout)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except OSError as e:
        raise ValueError(f"cannot read the layout file {path}: {e.strerror}") from None


def transfers(
    spec_or_mapping,
    level: str,
    workload: Workload | None = None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
    line_bytes: int = 64,
    align: int = 4096,
    cycles_per_timestep: int = 1,
    issue_rate=None,
    layout=None,
    partial_sums: bool = False,
    convention: str = "looptree",
) -> TransferTrace:
    """The requests between ``level`` and its children, as ``looptrace transfers``; each
    with its issue ``cycle`` (``timestep * cycles_per_timestep``, or queued at
    ``issue_rate`` requests a cycle: ``4``, ``"1/8"``, ``0.25``, as ``--issue-rate``).
    ``layout``: a layout file's path, or its content as a dict (``{"layout": {...}}``), as
    ``--layout``. ``partial_sums``: also the reads of partial sums that a child window
    writes first after an earlier window drained them, as ``--partial-sums``.
    ``convention="timeloop"``: the requests Timeloop counts, as ``--convention timeloop``
    (the whole run; their counts are ``movement(convention="timeloop")``'s parent reads
    and updates)."""
    if convention not in ("looptree", "timeloop"):
        raise ValueError(f"convention is 'looptree' or 'timeloop', not {convention!r}")
    handle = _handle(spec_or_mapping, workload)
    layout_text, layout_file = _layout_source(layout)
    sel = _selection(max_timesteps, from_, to, shard, None, 0)[:4]
    rate = "" if issue_rate is None else str(issue_rate)
    if issue_rate is not None and rate == "":
        raise ValueError("issue_rate must not be empty")
    t, a, w, c, x, storages, names, cycle = _looptrace.transfers(
        handle, str(level), _names(tensors), _names(einsums), *sel, int(line_bytes), int(align),
        int(cycles_per_timestep), rate, layout_text, layout_file, bool(partial_sums), convention == "timeloop"
    )
    return TransferTrace(str(level), t, a, w.view(bool), c, x, storages, names, cycle, issue_rate is not None)


def _cache_call(spec_or_mapping, workload, tensors, einsums, max_timesteps, from_, to, shard, size, ways,
                line_bytes, policy, write_through, write_allocate, caches, source, align, curve, arrays, layout):
    handle = _handle(spec_or_mapping, workload)
    sel = _selection(max_timesteps, from_, to, shard, None, 0)[:4]
    layout_text, layout_file = _layout_source(layout)
    return _looptrace.cache(handle, _names(tensors), _names(einsums), *sel, str(size), str(ways), int(line_bytes),
                            str(policy), bool(write_through), bool(write_allocate), [str(c) for c in caches or []],
                            str(source), int(align), bool(curve), bool(arrays), layout_text, layout_file)


def cache(
    spec_or_mapping,
    workload: Workload | None = None,
    size="1MiB",
    ways="16",
    line_bytes: int = 64,
    policy: str = "lru",
    write_through: bool = False,
    write_allocate: bool = True,
    caches: Iterable[str] | None = None,
    source: str = "trace",
    align: int = 4096,
    curve: bool = False,
    layout=None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
) -> dict:
    """What ``looptrace cache`` prints, as a dict: per cache its shape, accesses, hits,
    misses split into cold / capacity / conflict, write-backs, per tensor and per Einsum.
    ``size`` in bytes or as "64KiB"; ``ways`` a number or "full"; ``caches`` a list of
    "NAME=SIZE/WAYS" (a hierarchy, innermost first); ``source`` "trace" or
    "transfers:LEVEL"; ``curve`` adds the miss-ratio curve. ``layout``: a layout file's
    path, or its content as a dict, as ``--layout`` (``source="transfers:L"`` takes its
    entries for L, the trace those for every level)."""
    return _cache_call(spec_or_mapping, workload, tensors, einsums, max_timesteps, from_, to, shard, size, ways,
                       line_bytes, policy, write_through, write_allocate, caches, source, align, curve, False, layout)


def cache_curve(
    spec_or_mapping,
    workload: Workload | None = None,
    line_bytes: int = 64,
    source: str = "trace",
    align: int = 4096,
    layout=None,
    tensors: Iterable[str] | None = None,
    einsums: Iterable[str] | None = None,
    max_timesteps: int | None = None,
    from_: int | None = None,
    to: int | None = None,
    shard=None,
) -> dict:
    """The miss-ratio curve of the stream a cache of ``line_bytes`` lines sees, as numpy
    arrays: ``lines`` (1, 2, 4, ...), ``misses`` of a fully associative LRU cache of that
    many lines, ``tensors`` {name: misses}, and the reuse-distance histogram as
    ``distances`` / ``counts`` (cold accesses: ``cold``). ``layout`` as for ``cache``."""
    return _cache_call(spec_or_mapping, workload, tensors, einsums, max_timesteps, from_, to, shard, "1MiB", "16",
                       line_bytes, "lru", False, True, None, source, align, True, True, layout)


from .plotting import plot_access_trace  # noqa: E402  (needs the names above)

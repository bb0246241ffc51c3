"""The reference's result types (accelforge.tracegen.AccessTrace, TensorAccessTrace) and
the spec objects (Spec, Workload, Einsum, Mapping) that looptrace's functions take."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _looptrace

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
]


# ---- traces -------------------------------------------------------------------------
class TensorAccessTrace:
    """The accesses that one Einsum makes to one tensor, as (timestep, element) pairs.

    Entry ``i`` of every array describes the same access; an element appears once per
    timestep. The arrays are int64 and view buffers that the C++ engine filled (no
    copy); ``coordinates`` is unravelled from ``element`` on first use, then kept.
    """

    __slots__ = ("tensor", "einsum", "is_output", "timestep", "element", "_coordinates", "ranks", "tensor_shape")

    def __init__(self, tensor, einsum, is_output, timestep, element, coordinates, ranks, tensor_shape):
        self.tensor = tensor
        self.einsum = einsum
        self.is_output = is_output
        self.timestep = timestep
        self.element = element
        self._coordinates = coordinates
        self.ranks = tuple(ranks)
        self.tensor_shape = tuple(tensor_shape)

    @property
    def coordinates(self) -> np.ndarray:
        """(n_accesses, n_ranks) int64 array of per-rank tensor coordinates."""
        if self._coordinates is None:
            self._coordinates = _looptrace.unravel(self.element, list(self.tensor_shape))
        return self._coordinates

    @coordinates.setter
    def coordinates(self, value) -> None:
        self._coordinates = value

    @property
    def n_accesses(self) -> int:
        """The number of distinct (timestep, element) accesses in this trace."""
        return int(self.timestep.size)

    @property
    def tensor_size(self) -> int:
        """The number of elements in the tensor."""
        return int(math.prod(self.tensor_shape)) if self.tensor_shape else 1

    def __eq__(self, other) -> bool:
        if not isinstance(other, TensorAccessTrace):
            return NotImplemented
        return (self.tensor, self.einsum, self.is_output, self.ranks, self.tensor_shape) == (
            other.tensor, other.einsum, other.is_output, other.ranks, other.tensor_shape
        ) and np.array_equal(self.timestep, other.timestep) and np.array_equal(self.element, other.element)

    def __repr__(self) -> str:
        kind = "writes" if self.is_output else "reads"
        shape = "x".join(map(str, self.tensor_shape))
        return f"TensorAccessTrace({self.einsum} {kind} {self.tensor}[{shape}], {self.n_accesses} accesses)"


@dataclass
class AccessTrace:
    """Which tensor elements a mapping accesses at each timestep (the reference's)."""

    traces: list = field(default_factory=list)
    n_timesteps: int = 0
    tensor_shapes: dict = field(default_factory=dict)
    tensor_ranks: dict = field(default_factory=dict)
    einsum_timespans: dict = field(default_factory=dict)
    tile_windows: dict = field(default_factory=dict)
    truncated: bool = False

    @property
    def tensors(self) -> list:
        """The traced tensors, in the order they are first accessed."""
        return list(dict.fromkeys(t.tensor for t in self.traces))

    @property
    def einsums(self) -> list:
        """The traced Einsums, in the order they are first executed."""
        return list(self.einsum_timespans)

    @property
    def memory_levels(self) -> list:
        """The storage components holding tensors, outermost first."""
        return list(self.tile_windows)

    def for_tensor(self, tensor: str) -> list:
        """Every TensorAccessTrace that touches ``tensor``."""
        return [t for t in self.traces if t.tensor == tensor]

    def tile_lifetime(self, memory_level: str, tensor: str) -> list:
        """The [start, end) spans over which one tile of ``tensor`` stays in ``memory_level``."""
        return list(self.tile_windows.get(str(memory_level), {}).get(str(tensor), []))

    def to_dataframe(self):
        """A tidy pandas.DataFrame, one row per access: einsum, tensor, is_output, timestep, element."""
        import pandas as pd

        columns = ["einsum", "tensor", "is_output", "timestep", "element"]
        if not self.traces:
            return pd.DataFrame(columns=columns)
        sizes = [t.n_accesses for t in self.traces]
        return pd.DataFrame(
            {
                "einsum": np.repeat(np.array([t.einsum for t in self.traces], dtype=object), sizes),
                "tensor": np.repeat(np.array([t.tensor for t in self.traces], dtype=object), sizes),
                "is_output": np.repeat(np.array([t.is_output for t in self.traces], dtype=bool), sizes),
                "timestep": np.concatenate([t.timestep for t in self.traces]),
                "element": np.concatenate([t.element for t in self.traces]),
            },
            columns=columns,
        )

    def __repr__(self) -> str:
        truncated = ", truncated" if self.truncated else ""
        return f"AccessTrace({len(self.traces)} tensor traces, {self.n_timesteps} timesteps{truncated})"


@dataclass
class IterationTrace:
    """One computing leaf's iterations: per row a timestep and each rank variable's tile
    origin (one row per spatial iteration), as ``looptrace iterations`` lists them."""

    einsum: str
    rank_variables: tuple
    timestep: np.ndarray
    origin: np.ndarray  # (n, len(rank_variables))

    def __repr__(self) -> str:
        return f"IterationTrace({self.einsum}, {len(self.timestep)} iterations over {', '.join(self.rank_variables)})"


@dataclass
class TransferTrace:
    """The requests between a memory level and its children, in time order."""

    level: str
    timestep: np.ndarray
    address: np.ndarray  # uint64, of the line
    write: np.ndarray  # bool: a drain written to the level (else a fill read from it)
    child: np.ndarray  # index into storage_levels: the child Storage node
    tensor: np.ndarray  # index into tensor_names
    storage_levels: list
    tensor_names: list
    cycle: np.ndarray = None  # int64: when each request issues (see transfers(issue_rate=))
    issue_rate_given: bool = False  # records() then carry "cycle", as the CLI's JSON Lines

    def __len__(self) -> int:
        return int(self.timestep.size)

    def records(self):
        """The requests as the CLI's JSON Lines objects (t, op, address, level, child, tensor)."""
        cycles = self.cycle.tolist() if self.cycle is not None else [None] * len(self)
        for t, a, w, c, x, k in zip(
            self.timestep.tolist(), self.address.tolist(), self.write.tolist(), self.child.tolist(), self.tensor.tolist(),
            cycles,
        ):
            r = {
                "t": t,
                "op": "write" if w else "read",
                "address": a,
                "level": self.level,
                "child": self.storage_levels[c],
                "tensor": self.tensor_names[x],
            }
            if self.issue_rate_given:
                r["cycle"] = k
            yield r

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame(
            {
                "timestep": self.timestep,
                "op": np.where(self.write, "write", "read"),
                "address": self.address,
                "child": np.array(self.storage_levels, dtype=object)[self.child] if len(self) else [],
                "tensor": np.array(self.tensor_names, dtype=object)[self.tensor] if len(self) else [],
            }
        )

    def __repr__(self) -> str:
        return f"TransferTrace({self.level}, {len(self)} requests)"


# ---- the spec -----------------------------------------------------------------------
@dataclass
class TensorAccess:
    name: str
    output: bool


@dataclass
class Einsum:
    """One Einsum of the workload: its rank variables with their extents, its tensors."""

    name: str
    rank_variables: dict  # {rank variable: extent}
    tensor_accesses: list  # [TensorAccess], in access order

    @property
    def tensor_names(self) -> list:
        return [a.name for a in self.tensor_accesses]

    @property
    def output_tensor_names(self) -> list:
        return [a.name for a in self.tensor_accesses if a.output]

    def n_computes(self) -> int:
        """The points of the Einsum's iteration space (the box of its rank variables)."""
        return int(math.prod(self.rank_variables.values()))


class Workload:
    """The workload of a Spec, as AccelForge reports it (``looptrace describe``)."""

    def __init__(self, handle, description: dict):
        self._handle = handle
        self.einsums = [
            Einsum(
                e["name"],
                dict(e["rank_variables"]),
                [TensorAccess(t["name"], bool(t["output"])) for t in e["tensors"]],
            )
            for e in description["einsums"]
        ]
        self._tensors = {name: (tuple(t["ranks"]), tuple(t["shape"])) for name, t in description["tensors"].items()}

    @property
    def einsum_names(self) -> list:
        return [e.name for e in self.einsums]

    @property
    def tensor_names(self) -> list:
        return list(self._tensors)

    def einsum(self, name: str) -> Einsum:
        for e in self.einsums:
            if e.name == name:
                return e
        raise KeyError(name)

    def get_tensor_shape(self, tensor: str) -> dict:
        """{rank: size}: the tensor's nominal shape (its writers' image, else its readers')."""
        ranks, shape = self._tensors[tensor]
        return dict(zip(ranks, shape))

    def n_computes(self) -> int:
        """The operations of every Einsum: the sum of their iteration spaces' points."""
        return sum(e.n_computes() for e in self.einsums)

    def __repr__(self) -> str:
        return f"Workload({len(self.einsums)} Einsums: {', '.join(self.einsum_names)})"


@dataclass
class MappingNode:
    """One node of the compiled LoopTree (``looptrace describe``'s mapping)."""

    kind: str
    attributes: dict
    nodes: list

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["attributes"][name]
        except KeyError:
            raise AttributeError(name) from None


def _node(d: dict) -> MappingNode:
    children = [_node(c) for c in d.get("children", d.get("nodes", []))]
    attributes = {k: v for k, v in d.items() if k not in ("children", "nodes")}
    return MappingNode(str(d.get("kind", d.get("tag", ""))), attributes, children)


class Mapping:
    """The LoopTree of a Spec. ``trace_accesses(mapping, workload=...)`` traces it
    against a workload (this spec's, or another's)."""

    def __init__(self, handle, description: dict | None):
        self._handle = handle
        self._description = description

    @property
    def root(self) -> MappingNode | None:
        return None if self._description is None else _node(self._description)

    @property
    def nodes(self) -> list:
        root = self.root
        return [] if root is None else root.nodes

    def n_timesteps(self) -> int:
        return int(self._handle.n_timesteps())

    def __repr__(self) -> str:
        return f"Mapping({len(self.nodes)} top-level nodes)"


class Spec:
    """A spec read from YAML files (Jinja templates), as AccelForge's Spec.from_yaml reads them."""

    def __init__(self, handle):
        self._handle = handle
        self._description = None

    @classmethod
    def from_yaml(cls, *files, jinja_parse_data: dict | None = None) -> "Spec":
        """Reads and merges the files by top-level key (the first file that gives a key
        wins); ``jinja_parse_data`` sets template variables. Raises SpecError."""
        paths = []
        for f in files:
            if isinstance(f, (list, tuple)):
                paths.extend(os.fspath(x) for x in f)
            else:
                paths.append(os.fspath(f))
        handle = _looptrace.load(paths, dict(jinja_parse_data or {}), False)
        return cls(handle)

    def describe(self) -> dict:
        """What ``looptrace describe --format json`` prints, as a dict."""
        if self._description is None:
            self._description = _looptrace.describe(self._handle)
        return self._description

    @property
    def workload(self) -> Workload:
        return Workload(self._handle, self.describe())

    @property
    def mapping(self) -> Mapping | None:
        if not self._handle.has_mapping():
            return None
        return Mapping(self._handle, self.describe().get("mapping"))

    @property
    def files(self) -> list:
        return list(self._handle.files())

    @property
    def warnings(self) -> list:
        return list(self._handle.warnings())

    def __repr__(self) -> str:
        return f"Spec({', '.join(self.files)})"

"""The Python arrays equal the CLI's `looptrace trace --format jsonl` on every case of
the conformance corpus (../shared/conformance), and the summary equals `looptrace
summary`."""

import json
import subprocess

import numpy as np
import pytest

from conftest import CLI, CONFORMANCE
import looptrace

CASES = json.loads((CONFORMANCE / "cases.json").read_text())


def _cli_args(case):
    args = [str(CONFORMANCE / "specs" / f) for f in case["files"]]
    for k, v in case.get("defines", {}).items():
        args += ["-D", f"{k}={v}"]
    if "max_timesteps" in case:
        args += ["--max-timesteps", str(case["max_timesteps"])]
    if "tensors" in case:
        args += ["--tensors", ",".join(case["tensors"])]
    if "einsums" in case:
        args += ["--einsums", ",".join(case["einsums"])]
    return args


def _cli(*args):
    return subprocess.run([str(CLI), *args], check=True, capture_output=True, text=True).stdout


def _python_trace(case):
    spec = looptrace.Spec.from_yaml(
        *[CONFORMANCE / "specs" / f for f in case["files"]], jinja_parse_data=case.get("defines", {})
    )
    return spec, looptrace.trace_accesses(
        spec, tensors=case.get("tensors"), einsums=case.get("einsums"), max_timesteps=case.get("max_timesteps")
    )


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_arrays_equal_cli_trace(case):
    lines = [json.loads(l) for l in _cli("trace", *_cli_args(case)).splitlines()]
    spec, trace = _python_trace(case)
    expected = {}
    for l in lines:
        expected.setdefault((l["einsum"], l["tensor"]), []).append(l)
    seen = set()
    for t in trace.traces:
        key = (t.einsum, t.tensor)
        assert key not in seen
        seen.add(key)
        rows = expected.get(key, [])
        assert t.timestep.dtype == np.int64 and t.element.dtype == np.int64 and t.coordinates.dtype == np.int64
        assert t.timestep.tolist() == [r["t"] for r in rows]
        assert t.element.tolist() == [r["element"] for r in rows]
        assert t.coordinates.shape == (len(rows), len(t.ranks))
        assert t.coordinates.tolist() == [r["coords"] for r in rows]
        assert all(r["write"] == t.is_output for r in rows)
    assert set(expected) <= seen


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_fields_equal_cli_summary(case):
    s = json.loads(_cli("summary", *_cli_args(case)))
    _, trace = _python_trace(case)
    assert trace.n_timesteps == s["n_timesteps"]
    assert trace.truncated == s["truncated"]
    assert trace.tensors == s["tensors"]
    assert trace.einsums == s["einsums"]
    assert trace.memory_levels == s["memory_levels"]
    assert {k: list(v) for k, v in trace.tensor_shapes.items()} == s["tensor_shapes"]
    assert {k: list(v) for k, v in trace.tensor_ranks.items()} == s["tensor_ranks"]
    assert {k: list(v) for k, v in trace.einsum_timespans.items()} == s["einsum_timespans"]
    assert {
        level: {t: [list(w) for w in ws] for t, ws in per.items()} for level, per in trace.tile_windows.items()
    } == s["tile_windows"]
    assert [(t.einsum, t.tensor, t.is_output, t.n_accesses) for t in trace.traces] == [
        (t["einsum"], t["tensor"], t["is_output"], t["n_accesses"]) for t in s["traces"]
    ]

"""looptrace's Python API beyond the reference's own tests: zero-copy arrays, the
DataFrame, streams, the CLI's reports as Python objects, errors, Ctrl-C and the GIL."""

import json
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import CLI, EXAMPLES_DIR, ROOT
import looptrace
from looptrace import Spec, SpecError

SPECS = ROOT / "examples" / "specs"
BENCH = ROOT / "bench" / "specs"
CONV = [SPECS / "conv1d.workload.yaml", SPECS / "conv1d.mapping.yaml", SPECS / "conv1d.arch.yaml"]
MATMULS = [SPECS / "matmuls.yaml", SPECS / "fused_matmuls_to_simple.mapping.yaml"]
DEFINES = {"N_EINSUMS": 2, "M": 8, "KN": 4}


def cli(*args):
    return subprocess.run([str(CLI), *map(str, args)], check=True, capture_output=True, text=True).stdout


def cli_defines(d):
    return [x for k, v in d.items() for x in ("-D", f"{k}={v}")]


@pytest.fixture(scope="module")
def conv():
    return Spec.from_yaml(*CONV)


@pytest.fixture(scope="module")
def fused():
    return Spec.from_yaml(*MATMULS, jinja_parse_data=DEFINES)


# ---- workers ---------------------------------------------------------------------------
def test_trace_accesses_workers_fill_the_same_arrays():
    # 128^3 GEMM, one MAC a timestep (6.3e6 accesses: past the million that workers need),
    # and the tiled mapping with a tensor filter and a prefix that cuts a tile: every
    # array equal, whatever the number of workers (3: pieces of uneven counts).
    gemm = ROOT / "bench" / "specs"
    for mapping, kw in [("huge_gemm", {}), ("gemm_tiled", dict(tensors=["A", "Z"], max_timesteps=1500))]:
        spec = Spec.from_yaml(gemm / "gemm.workload.yaml", gemm / f"{mapping}.mapping.yaml",
                              jinja_parse_data={"M": 128, "K": 128, "N": 128})
        one = looptrace.trace_accesses(spec, max_points=1 << 40, threads=1, **kw)
        for threads in (2, 3):
            many = looptrace.trace_accesses(spec, max_points=1 << 40, threads=threads, **kw)
            assert [t.tensor for t in many.traces] == [t.tensor for t in one.traces]
            for a, b in zip(one.traces, many.traces):
                assert np.array_equal(a.timestep, b.timestep) and np.array_equal(a.element, b.element)
            assert (many.n_timesteps, many.truncated) == (one.n_timesteps, one.truncated)
        assert all(np.all(np.diff(t.timestep) >= 0) for t in one.traces)  # each trace in time order
    with pytest.raises(ValueError, match="threads must be at least 1"):
        looptrace.trace_accesses(spec, threads=0)


# ---- zero copy ------------------------------------------------------------------------
def test_arrays_are_int64_views_of_engine_buffers(fused):
    trace = looptrace.trace_accesses(fused)
    for t in trace.traces:
        for name in ("timestep", "element", "coordinates"):
            a = getattr(t, name)
            assert a.dtype == np.int64
            assert a.base is not None and not a.flags.owndata, name  # owned by a capsule
            assert np.shares_memory(a, getattr(t, name)), name  # the same buffer each time
        assert t.coordinates.shape == (t.n_accesses, len(t.ranks))
        assert t.coordinates.flags.c_contiguous


def test_arrays_outlive_the_trace(conv):
    trace = looptrace.trace_accesses(conv)
    element = trace.for_tensor("I")[0].element
    del trace
    assert element.tolist() == [p + r for p in range(8) for r in range(3)]


# ---- the reference's fields, by hand ----------------------------------------------------
def test_fields_and_reprs_by_hand(conv):
    trace = looptrace.trace_accesses(conv)
    assert repr(trace) == "AccessTrace(3 tensor traces, 24 timesteps)"
    assert [repr(t) for t in trace.traces] == [
        "TensorAccessTrace(Conv reads I[10], 24 accesses)",
        "TensorAccessTrace(Conv reads W[3], 24 accesses)",
        "TensorAccessTrace(Conv writes O[8], 24 accesses)",
    ]
    assert trace.tensors == ["I", "W", "O"] and trace.einsums == ["Conv"]
    assert trace.memory_levels == ["MainMemory", "GlobalBuffer"]
    assert trace.tensor_shapes == {"I": (10,), "W": (3,), "O": (8,)}
    assert trace.tensor_ranks == {"I": ("P",), "W": ("R",), "O": ("P",)}
    assert trace.einsum_timespans == {"Conv": (0, 24)}
    assert trace.tile_lifetime("MainMemory", "W") == [(0, 24)]
    assert trace.tile_lifetime("GlobalBuffer", "O") == [(3 * p, 3 * p + 3) for p in range(8)]
    assert trace.tile_lifetime("Nowhere", "O") == []
    (w,) = trace.for_tensor("W")
    assert (w.tensor, w.einsum, w.is_output, w.ranks, w.tensor_shape) == ("W", "Conv", False, ("R",), (3,))
    assert w.tensor_size == 3 and w.n_accesses == 24
    assert w.element.tolist() == [r for _ in range(8) for r in range(3)]
    assert trace.truncated is False
    prefix = looptrace.trace_accesses(conv, max_timesteps=7)
    assert prefix.truncated and prefix.n_timesteps == 7
    assert prefix.tile_lifetime("GlobalBuffer", "I") == [(0, 3), (3, 6), (6, 7)]


def test_filters(fused):
    only = looptrace.trace_accesses(fused, tensors=["T1"], einsums=["Matmul1"])
    assert [(t.einsum, t.tensor) for t in only.traces] == [("Matmul1", "T1")]
    assert only.memory_levels == ["GlobalBuffer"]  # MainMemory holds no T1


def test_workload(fused):
    w = fused.workload
    assert w.einsum_names == ["Matmul0", "Matmul1"]
    assert w.einsums[0].rank_variables == {"m": 8, "n0": 4, "n1": 4}
    assert [(a.name, a.output) for a in w.einsums[1].tensor_accesses] == [("T1", False), ("W1", False), ("T2", True)]
    assert w.get_tensor_shape("W1") == {"N1": 4, "N2": 4}
    assert w.n_computes() == 2 * 8 * 4 * 4
    assert fused.mapping.n_timesteps() == 256
    assert [n.kind for n in fused.mapping.nodes][:3] == ["Storage", "Storage", "Temporal"]


def test_trace_a_mapping_against_another_workload():
    small = Spec.from_yaml(*MATMULS, jinja_parse_data=DEFINES)
    big = Spec.from_yaml(*MATMULS, jinja_parse_data={**DEFINES, "M": 16})
    trace = looptrace.trace_accesses(small.mapping, workload=big.workload)
    assert trace.n_timesteps == big.workload.n_computes()
    with pytest.raises(ValueError, match="workload is required"):
        looptrace.trace_accesses(small.mapping)


def test_a_spec_without_a_mapping_describes_but_does_not_trace():
    spec = Spec.from_yaml(SPECS / "conv1d.workload.yaml")
    assert spec.mapping is None and spec.workload.n_computes() == 24
    with pytest.raises(ValueError, match="no mapping"):
        looptrace.trace_accesses(spec)


def test_max_points_raises_value_error(fused):
    with pytest.raises(ValueError, match="more than max_points = 100") as e:
        looptrace.trace_accesses(fused, max_points=100)
    assert isinstance(e.value, SpecError)
    assert e.value.file.endswith("fused_matmuls_to_simple.mapping.yaml") and e.value.line > 0
    assert looptrace.trace_accesses(fused, max_points=128).n_timesteps == 256  # each leaf has 128 points


# ---- to_dataframe -----------------------------------------------------------------------
def test_to_dataframe(conv):
    trace = looptrace.trace_accesses(conv)
    df = trace.to_dataframe()
    assert list(df.columns) == ["einsum", "tensor", "is_output", "timestep", "element"]
    assert len(df) == 72
    assert df["timestep"].dtype == np.int64 and df["element"].dtype == np.int64
    assert df["is_output"].dtype == bool
    o = df[df.tensor == "O"]
    assert o.is_output.all() and o.element.tolist() == [p for p in range(8) for _ in range(3)]
    assert df.iloc[0].to_dict() == {"einsum": "Conv", "tensor": "I", "is_output": False, "timestep": 0, "element": 0}
    empty = looptrace.trace_accesses(conv, max_timesteps=0).to_dataframe()
    assert list(empty.columns) == list(df.columns) and len(empty) == 0


# ---- stream -----------------------------------------------------------------------------
def _concat(batches):
    return np.concatenate(list(batches)) if batches else np.zeros(0, looptrace.RECORD_DTYPE)


def test_stream_equals_trace_accesses(fused):
    s = looptrace.stream(fused, batch=50)
    batches = list(s)
    assert all(b.dtype == looptrace.RECORD_DTYPE for b in batches)
    assert all(len(b) <= 50 for b in batches) and len(batches) > 10
    records = _concat(batches)
    assert (np.diff(records["timestep"]) >= 0).all()
    trace = looptrace.trace_accesses(fused)
    for i, (einsum, tensor, is_output, ranks, shape) in enumerate(s.traces):
        (t,) = [x for x in trace.traces if (x.einsum, x.tensor) == (einsum, tensor)]
        mine = records[records["trace"] == i]
        assert mine["timestep"].tolist() == t.timestep.tolist()
        assert mine["element"].tolist() == t.element.tolist()
        assert (is_output, ranks, shape) == (t.is_output, t.ranks, t.tensor_shape)
        assert s.coordinates(records, i).tolist() == t.coordinates.tolist()
    assert s.tensor_shapes == trace.tensor_shapes


def test_stream_equals_cli_binary_records(fused):
    out = subprocess.run([str(CLI), "trace", *map(str, MATMULS), *cli_defines(DEFINES), "--format", "binary",
                          "--from", "17", "--to", "200"], check=True, capture_output=True).stdout
    records = _concat(list(looptrace.stream(fused, from_=17, to=200)))
    raw = np.frombuffer(out[len(out) - 24 * len(records):], dtype=looptrace.RECORD_DTYPE)
    assert np.array_equal(raw["timestep"], records["timestep"])
    assert np.array_equal(raw["element"], records["element"])
    assert np.array_equal(raw["trace"], records["trace"])


def test_stream_shards_concatenate_and_samples(fused):
    whole = _concat(list(looptrace.stream(fused)))
    parts = [_concat(list(looptrace.stream(fused, shard=(i, 3)))) for i in range(3)]
    assert np.array_equal(np.concatenate(parts), whole)
    assert np.array_equal(_concat(list(looptrace.stream(fused, shard="1/3"))), parts[1])
    sample = _concat(list(looptrace.stream(fused, sample=5, seed=3)))
    assert len(np.unique(sample["timestep"])) == 5
    again = _concat(list(looptrace.stream(fused, sample=5, seed=3)))
    assert np.array_equal(sample, again)


def test_stream_of_a_huge_schedule_is_lazy():
    spec = Spec.from_yaml(BENCH / "gemm.workload.yaml", BENCH / "huge_gemm.mapping.yaml",
                          jinja_parse_data={"M": 10240, "K": 10240, "N": 10240})
    s = looptrace.stream(spec, from_=10**12, batch=1000)  # seeks: no replay
    first = next(s)
    assert len(first) == 1000 and first["timestep"][0] == 10**12
    assert looptrace.summary(spec, windows="none")["n_timesteps"] == 10240**3


# ---- the CLI's reports ------------------------------------------------------------------
def test_summary_equals_cli(fused):
    for kwargs, flags in [({}, []), ({"max_timesteps": 40}, ["--max-timesteps", 40]),
                          ({"windows": "compact", "from_": 3, "to": 90}, ["--windows", "compact", "--from", 3, "--to", 90])]:
        expected = json.loads(cli("summary", *MATMULS, *cli_defines(DEFINES), *flags))
        assert looptrace.summary(fused, **kwargs) == expected


def test_movement_equals_cli(conv):
    assert looptrace.movement(conv) == json.loads(cli("movement", *CONV))
    assert looptrace.movement(conv, from_=4, to=10) == json.loads(cli("movement", *CONV, "--from", 4, "--to", 10))
    gb = looptrace.movement(conv)["levels"][1]
    assert gb["peak_footprint"]["elements"] == 7
    assert [(t["tensor"], t["fills"], t["drains"]) for t in gb["tensors"]] == [("I", 24, 0), ("W", 24, 0), ("O", 0, 8)]
    enumerated = looptrace.movement(conv, method="enumerate", threads=2)
    assert enumerated["method"] == "enumerate" and enumerated["levels"] == looptrace.movement(conv)["levels"]
    # conv1d's r loop is inside GlobalBuffer: no window reads O back
    assert looptrace.movement(conv, partial_sums=True)["levels"] == looptrace.movement(conv)["levels"]
    assert looptrace.movement(conv, partial_sums=True) == json.loads(cli("movement", *CONV, "--partial-sums"))
    with pytest.raises(ValueError, match="closed-form"):
        looptrace.movement(conv, method="boxes")


def test_timeline_equals_cli(conv, tmp_path):
    out = tmp_path / "layer.json"
    doc = looptrace.timeline(conv, output=out)
    assert doc == json.loads(cli("timeline", *CONV)) == json.loads(out.read_text())
    gb = next(e["pid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["args"].get("name") == "GlobalBuffer")
    footprint = [(e["ts"], e["args"]["value"]) for e in doc["traceEvents"]
                 if e["ph"] == "C" and e["pid"] == gb and e["name"] == "footprint (elements)"]
    assert footprint == [(0, 7), (24, 0)]  # movement's peak, held over the whole run
    cycles = looptrace.timeline(conv, cycles_per_timestep=4, from_=3, to=9)
    assert cycles == json.loads(cli("timeline", *CONV, "--cycles-per-timestep", 4, "--from", 3, "--to", 9))
    with pytest.raises(ValueError, match="max_events"):
        looptrace.timeline(conv, max_events=0)
    with pytest.raises(looptrace.SpecError, match="--max-events 3"):
        looptrace.timeline(conv, max_events=3)


def test_describe_equals_cli(fused):
    assert looptrace.describe(fused) == json.loads(cli("describe", *MATMULS, *cli_defines(DEFINES)))


def test_cache_equal_cli(conv, fused):
    # The same dict as `looptrace cache`, and the conv1d example's figures (README "Caches").
    for spec, files, d in [(conv, CONV, {}), (fused, MATMULS, DEFINES)]:
        for kw, args in [({}, []),
                         (dict(size=128, ways=1, align=64, curve=True), ["--size", "128", "--ways", "1", "--align", "64", "--curve"]),
                         (dict(size="64KiB", ways="full", policy="fifo", write_through=True, source="transfers:MainMemory"),
                          ["--size", "64KiB", "--ways", "full", "--policy", "fifo", "--write-through",
                           "--source", "transfers:MainMemory"]),
                         (dict(caches=["L1=128/2", "L2=1KiB/4"], line_bytes=16), ["--cache", "L1=128/2", "--cache", "L2=1KiB/4",
                                                                               "--line-bytes", "16"])]:
            assert looptrace.cache(spec, **kw) == json.loads(cli("cache", *files, *cli_defines(d), *args))
    c = looptrace.cache(conv, size=128, ways=1, align=64)["caches"][0]
    assert (c["accesses"], c["hits"], c["misses"], c["cold"], c["capacity"], c["conflict"], c["writebacks"]) == \
        (72, 23, 49, 3, 69, -23, 24)
    curve = looptrace.cache_curve(conv, align=64)
    assert list(curve["lines"]) == [1, 2, 4] and list(curve["misses"]) == [72, 72, 3]
    assert list(curve["distances"]) == [2] and list(curve["counts"]) == [69]
    assert list(curve["tensors"]["W"]) == [24, 24, 1]
    with pytest.raises(SpecError, match="not a whole number of 64 bytes lines"):
        looptrace.cache(conv, size=1000)


def test_transfers_equal_cli(conv, fused):
    for spec, files, d in [(conv, CONV, {}), (fused, MATMULS, DEFINES)]:
        expected = [json.loads(l) for l in cli("transfers", *files, *cli_defines(d), "--level", "MainMemory").splitlines()]
        got = looptrace.transfers(spec, "MainMemory")
        assert list(got.records()) == expected
        assert len(got) == len(expected) and got.write.dtype == bool
        assert len(got.to_dataframe()) == len(expected)
    assert [r["address"] for r in looptrace.transfers(conv, "MainMemory").records()][:3] == [0, 4096, 8192]
    # With an issue rate, each request's cycle, as --issue-rate gives it.
    for rate in (2, "1/3", 0.4):
        args = ["--level", "MainMemory", "--cycles-per-timestep", "10", "--issue-rate", str(rate)]
        expected = [json.loads(l) for l in cli("transfers", *CONV, *args).splitlines()]
        got = looptrace.transfers(conv, "MainMemory", cycles_per_timestep=10, issue_rate=rate)
        assert list(got.records()) == expected and got.cycle.dtype == np.int64
    assert looptrace.transfers(conv, "MainMemory", cycles_per_timestep=3).cycle.tolist()[:3] == [0, 0, 9]  # t 0, 0, 3
    with pytest.raises(ValueError, match="--issue-rate takes"):
        looptrace.transfers(conv, "MainMemory", issue_rate="0")


def test_transfers_partial_sums_equal_cli(tmp_path):
    # The 4 x 4 x 4 matmul with k outermost: GlobalBuffer's 4 windows each write all of Z
    # (16 bytes, one 64-byte line); with partial sums windows 1-3 read it back first.
    spec_file = tmp_path / "matmul_k_outer.yaml"
    spec_file.write_text(
        "workload:\n  iteration_space_shape: {m: 0 <= m < 4, k: 0 <= k < 4, n: 0 <= n < 4}\n"
        "  einsums: ['Z[m, n] = A[m, k] * B[k, n]']\n"
        "mapping:\n  nodes:\n  - !Storage {component: DRAM, tensors: [A, B, Z]}\n"
        "  - !Temporal {rank_variable: k, tile_shape: 1}\n"
        "  - !Storage {component: GlobalBuffer, tensors: [A, B, Z]}\n"
        "  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Temporal {rank_variable: n, tile_shape: 1}\n"
        "  - !Compute {einsum: Z}\n")
    spec = looptrace.Spec.from_yaml(str(spec_file))
    for extra, kw in [([], {}), (["--partial-sums"], dict(partial_sums=True))]:
        expected = [json.loads(l) for l in cli("transfers", spec_file, "--level", "DRAM", *extra).splitlines()]
        assert list(looptrace.transfers(spec, "DRAM", **kw).records()) == expected
        z_reads = [r["t"] for r in expected if r["tensor"] == "Z" and r["op"] == "read"]
        assert z_reads == ([16, 32, 48] if extra else [])


def test_layout_equal_cli(tmp_path):
    # README "Layouts": the conv1d with a channel rank, I in 2 x 4 blocks, 2 banks of 4 bytes.
    spec_file, layout_file = SPECS / "conv1d_channels.yaml", SPECS / "conv1d_channels.layout.yaml"
    spec = looptrace.Spec.from_yaml(str(spec_file))
    args = ["--level", "MainMemory", "--line-bytes", "4", "--layout", str(layout_file)]
    expected = [json.loads(l) for l in cli("transfers", str(spec_file), *args).splitlines()]
    got = looptrace.transfers(spec, "MainMemory", line_bytes=4, layout=layout_file)
    assert list(got.records()) == expected
    as_dict = {"layout": {"tensors": {"I": {"block": {"C": 2, "P": 4}}}}}
    assert list(looptrace.transfers(spec, "MainMemory", line_bytes=4, layout=as_dict).records()) == expected
    report = looptrace.movement(spec, layout=layout_file, line_bytes=4)
    cost = {t["tensor"]: t for t in report["levels"][0]["layout"]["tensors"]}
    assert (cost["I"]["fill_lines"], cost["I"]["min_fill_lines"], cost["I"]["bank_cycles"]) == (24, 16, 12)
    with pytest.raises(looptrace.SpecError, match="leaves out rank C"):
        looptrace.transfers(spec, "MainMemory", layout={"layout": {"tensors": {"I": {"order": ["P"]}}}})


def test_cache_layout_equal_cli(conv, tmp_path):
    # README "Caches": W blocked by 128 moves conv1d's conflict from W to I.
    lay = {"layout": {"tensors": {"W": {"block": {"R": 128}}}}}
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(lay))
    for kw, args in [(dict(size=128, ways=1, align=64), ["--size", "128", "--ways", "1", "--align", "64"]),
                     (dict(size=128, ways="full", source="transfers:MainMemory"),
                      ["--size", "128", "--ways", "full", "--source", "transfers:MainMemory"])]:
        expected = json.loads(cli("cache", *CONV, *args, "--layout", str(path)))
        assert looptrace.cache(conv, layout=path, **kw) == expected
        assert looptrace.cache(conv, layout=lay, **kw) == expected
    c = looptrace.cache(conv, size=128, ways=1, align=64, layout=lay)["caches"][0]
    assert {t["tensor"]: t["misses"] for t in c["tensors"]} == {"I": 1, "W": 24, "O": 24}
    curve = looptrace.cache_curve(conv, align=64, layout=lay)
    assert list(curve["misses"]) == list(looptrace.cache_curve(conv, align=64)["misses"])  # still 3 lines in turn
    with pytest.raises(looptrace.SpecError, match="Q"):
        looptrace.cache(conv, layout={"layout": {"tensors": {"Q": {"order": ["P"]}}}})


def test_trace_iterations_equal_cli(fused):
    expected = [json.loads(l) for l in cli("iterations", *MATMULS, *cli_defines(DEFINES)).splitlines()]
    leaves = looptrace.trace_iterations(fused)
    assert [l.einsum for l in leaves] == ["Matmul0", "Matmul1"]
    rows = sorted(
        (int(t), leaf.einsum, dict(zip(leaf.rank_variables, map(int, o))))
        for leaf in leaves for t, o in zip(leaf.timestep, leaf.origin)
    )
    assert rows == sorted((e["t"], e["einsum"], e["origin"]) for e in expected)
    # The reference's spelling: trace_iterations(mapping, spec).
    assert len(looptrace.trace_iterations(fused.mapping, fused)[0].timestep) == 128


# ---- errors -------------------------------------------------------------------------------
def test_spec_error_carries_file_line_and_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload:\n  einsums:\n  - name: E\n    tensor_accesses:\n    - {name: A, projection: [m], bogus: 1}\n")
    with pytest.raises(SpecError) as e:
        Spec.from_yaml(bad)
    assert isinstance(e.value, ValueError)
    assert e.value.file == str(bad) and e.value.line == 5
    assert "bogus" in e.value.message
    assert str(e.value).startswith(f"{bad}:5:")
    with pytest.raises(SpecError, match="undefined variable 'N_EINSUMS'") as e:
        Spec.from_yaml(EXAMPLES_DIR / "workloads" / "basic" / "matmuls.yaml")
    assert e.value.line > 0
    with pytest.raises(TypeError):
        Spec.from_yaml(*MATMULS, jinja_parse_data={"N_EINSUMS": object()})


# ---- the GIL and Ctrl-C ---------------------------------------------------------------------
def _long_spec():
    return Spec.from_yaml(BENCH / "gemm.workload.yaml", BENCH / "gemm_tiled.mapping.yaml")


def test_long_calls_release_the_gil():
    spec = _long_spec()
    ticks, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        start = time.perf_counter()
        counted = looptrace.summary(spec, sample=200_000, seed=1, windows="none")  # one long call
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        t.join()
    assert counted["n_timesteps"] == 1024**3 // 1024
    assert elapsed > 0.05 and ticks[0] >= 10  # the other thread ran while the engine did


def test_ctrl_c_stops_a_long_trace():
    spec = _long_spec()
    # Python's own handler, whatever the test was started under: a shell's background
    # job starts with SIGINT ignored, and Python then installs none.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.2, signal.raise_signal, (signal.SIGINT,))
        start = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            # 2e8 accesses (3.2 GB): seconds, if it were not stopped
            looptrace.trace_accesses(spec, tensors=["Z"], max_timesteps=200_000, max_points=1 << 40)
        assert time.perf_counter() - start < 10
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("sizes", [(128, 128, 128), (96, 40, 64), (33, 7, 5)])
def test_coordinates_unravel_element(sizes):
    m, k, n = sizes
    spec = Spec.from_yaml(BENCH / "gemm.workload.yaml", BENCH / "gemm_tiled.mapping.yaml",
                          jinja_parse_data={"M": m, "K": k, "N": n})
    for t in looptrace.trace_accesses(spec, max_points=1 << 40).traces:
        expected = np.stack(np.unravel_index(t.element, t.tensor_shape), axis=1)
        assert np.array_equal(t.coordinates, expected), t


def test_threads_trace_one_spec_at_once():
    from concurrent.futures import ThreadPoolExecutor

    spec = Spec.from_yaml(*MATMULS, jinja_parse_data=DEFINES)  # not compiled yet: both threads may compile
    with ThreadPoolExecutor(4) as pool:
        traces = list(pool.map(lambda _: looptrace.trace_accesses(spec), range(8)))
    for t in traces[1:]:
        assert t.traces == traces[0].traces and t.tile_windows == traces[0].tile_windows

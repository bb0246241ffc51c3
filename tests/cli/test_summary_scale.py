#!/usr/bin/env python3
"""Summaries and traces past one core and one machine: `summary --windows`, `--threads`
for summary and trace (byte-identical to one thread), `looptrace merge` of shard
summaries, and the GNU parallel and Slurm recipes of examples/distributed/.

usage: test_summary_scale.py PATH/TO/looptrace

Prints one line per failed check and 'N passed, M failed' last; exits 1 on any failure."""
import json
import os
import shutil
import subprocess
import sys

import harness

from harness import EXE, ROOT, TMP, check, run, write  # noqa: E402

PARALLEL_RECIPE = os.path.join(ROOT, "examples", "distributed", "parallel_shards.sh")
SLURM_RECIPE = os.path.join(ROOT, "examples", "distributed", "slurm_shards.sbatch")
ONE_OP = os.path.join(ROOT, "bench", "make_one_op_mapping.py")

CONV1D = write("conv1d.yaml", harness.CONV1D)

# Two fused matmuls (a Sequential under a loop, imperfect tiles, a spatial loop); N sets
# the size: N=6 is small, N=90 gives about a million accesses (several pieces per thread).
FUSED = write("fused.yaml", """\
workload:
  {% set N = N | default(6) %}
  iteration_space_shape:
    m: 0 <= m < {{N}}
    k: 0 <= k < {{N - 1}}
    n: 0 <= n < {{N + 1}}
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
      - !Storage {component: Buffer, tensors: [A]}
      - !Spatial {rank_variable: k, tile_shape: 2, name: X, component: PE}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Compute {einsum: Z, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: n, tile_shape: 1}
      - !Storage {component: Buffer, tensors: [C]}
      - !Temporal {rank_variable: j, tile_shape: 1}
      - !Compute {einsum: Y, component: MAC}
""")


def out(*args, binary=False):
    p = run(*args, text=not binary, timeout=120)
    if p.returncode != 0:
        raise AssertionError("looptrace %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr[-300:]))
    return p.stdout


def expand(runs):
    return [[r["start"] + i * r["period"], r["start"] + i * r["period"] + r["length"]]
            for r in runs for i in range(r["count"])]


def test_windows_forms():
    for extra in ([], ["--from", "5", "--to", "17"], ["--max-timesteps", "10"]):
        full = json.loads(out("summary", CONV1D, *extra))
        compact = json.loads(out("summary", CONV1D, "--windows", "compact", *extra))
        none = json.loads(out("summary", CONV1D, "--windows", "none", *extra))
        check("tile_windows" in full and "tile_window_runs" not in full, "full form: tile_windows")
        check("tile_window_runs" in compact and "tile_windows" not in compact, "compact form: tile_window_runs")
        check("tile_windows" not in none and "tile_window_runs" not in none, "none: no windows")
        for lvl, d in full["tile_windows"].items():
            for t, ws in d.items():
                check(expand(compact["tile_window_runs"][lvl][t]) == ws,
                      "compact runs of %s/%s %s expand to the full windows" % (lvl, t, extra))
        for key in ("traces", "n_points", "einsum_timespans", "memory_levels"):
            check(full[key] == compact[key] == none[key], "%s does not depend on --windows" % key)
    # By hand: GlobalBuffer's 8 windows [3p, 3p + 3) are one run; [5, 17) clips two.
    compact = json.loads(out("summary", CONV1D, "--windows", "compact"))
    check(compact["tile_window_runs"]["GlobalBuffer"]["I"] == [{"start": 0, "length": 3, "period": 3, "count": 8}],
          "conv1d GlobalBuffer: one run of 8")
    compact = json.loads(out("summary", CONV1D, "--windows", "compact", "--from", "5", "--to", "17"))
    check(compact["tile_window_runs"]["GlobalBuffer"]["W"] ==
          [{"start": 5, "length": 1, "period": 0, "count": 1}, {"start": 6, "length": 3, "period": 3, "count": 3},
           {"start": 15, "length": 2, "period": 0, "count": 1}], "conv1d [5, 17): clipped ends, one run between")
    check(compact["merge"]["cut_windows"]["GlobalBuffer"]["O"] == [{"window": [3, 6]}, {"window": [15, 18]}],
          "the unclipped windows behind the clipped ones")
    p = run("summary", CONV1D, "--windows", "some")
    check(p.returncode == 2 and "--windows" in p.stderr, "a bad --windows exits 2 naming the option")


def test_huge_schedule_in_closed_form():
    # 2^40 timesteps and 25,600 GlobalBuffer windows: counted, not visited.
    spec = write("gemm.yaml", """\
workload:
  iteration_space_shape: {m: 0 <= m < 10240, k: 0 <= k < 10240, n: 0 <= n < 10240}
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B, Z]}
  - !Temporal {rank_variable: m, tile_shape: 64}
  - !Temporal {rank_variable: n, tile_shape: 64}
  - !Storage {component: GlobalBuffer, tensors: [A, B, Z]}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Compute {einsum: Z, component: MAC}
""")
    n = 10240 ** 3
    s = json.loads(out("summary", spec, "--windows", "compact"))
    check([t["n_accesses"] for t in s["traces"]] == [n, n, n], "huge GEMM: 2^40 accesses per tensor")
    check(s["n_points"] == n and s["einsum_timespans"]["Z"] == [0, n], "huge GEMM: points and span")
    check(s["tile_window_runs"]["GlobalBuffer"]["A"] == [{"start": 0, "length": 10240 * 4096, "period": 10240 * 4096,
                                                          "count": 160 * 160}], "huge GEMM: one run of windows")
    check(s["enumerated"] == [], "huge GEMM: nothing enumerated")


def test_summary_threads():
    for spec, extra in ((CONV1D, []), (FUSED, []), (FUSED, ["--from", "17", "--to", "150"]),
                        (FUSED, ["--tensors", "Z,C", "--shard", "1/3"]),
                        (FUSED, ["--sample-timesteps", "40", "--seed", "3"])):
        for form in ("full", "compact"):
            one = out("summary", spec, "--windows", form, *extra)
            for threads in ("2", "5"):
                check(out("summary", spec, "--windows", form, "--threads", threads, *extra) == one,
                      "summary --threads %s equals one thread (%s %s)" % (threads, form, extra))


def test_trace_threads():
    # About a million accesses: the window is cut into many pieces.
    big = ["-D", "N=90"]
    for fmt in ("jsonl", "binary"):
        one = out("trace", FUSED, *big, "--format", fmt, binary=True)
        check(len(one) > 16 << 20, "the threaded trace test is large enough to cut (%s)" % fmt)
        check(out("trace", FUSED, *big, "--format", fmt, "--threads", "2", binary=True) == one,
              "trace --threads 2 is byte-identical (%s, %d bytes)" % (fmt, len(one)))
    for extra in ([], ["--from", "11", "--to", "77"], ["--shard", "2/3"], ["--max-timesteps", "50"],
                  ["--tensors", "Z", "--einsums", "Y"], ["--sample-timesteps", "25", "--seed", "9"]):
        for fmt in ("jsonl", "csv", "binary"):
            one = out("trace", FUSED, "--format", fmt, *extra, binary=True)
            check(out("trace", FUSED, "--format", fmt, "--threads", "3", *extra, binary=True) == one,
                  "trace --threads 3 equals one thread (%s %s)" % (fmt, extra))
    one = out("trace", FUSED, *big, "--sample-timesteps", "3000", "--seed", "1", binary=True)
    check(out("trace", FUSED, *big, "--sample-timesteps", "3000", "--seed", "1", "--threads", "2", binary=True) == one,
          "a large sample with --threads 2 equals one thread")
    # A reader that goes away: exit 0, as with one thread.
    p = subprocess.run("%s trace %s -D N=90 --threads 2 | head -c 100 > /dev/null; echo ${PIPESTATUS[0]}"
                       % (EXE, FUSED), shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=60)
    check(p.stdout.strip() == "0", "trace --threads 2 | head exits 0, not %r" % p.stdout.strip())


def shard_files(spec, n, extra, form):
    paths = []
    for i in range(n):
        paths.append(write("shard-%d.json" % i, out("summary", spec, "--windows", form, "--shard", "%d/%d" % (i, n), *extra)))
    return paths


def test_merge():
    for spec, extra in ((CONV1D, []), (FUSED, []), (FUSED, ["--from", "9", "--to", "140"]),
                        (FUSED, ["--einsums", "Y", "--tensors", "C,Y"])):
        for form in ("full", "compact", "none"):
            whole = out("summary", spec, "--windows", form, *extra)
            for n in (2, 5):
                paths = shard_files(spec, n, extra, form)
                check(out("merge", *reversed(paths)) == whole,
                      "merge of %d shards equals the whole (%s %s)" % (n, form, extra))
                joined = write("joined.jsonl", "".join(open(p).read() for p in paths))
                p = subprocess.run([EXE, "merge", "-"], input=open(joined).read(), capture_output=True, text=True)
                check(p.returncode == 0 and p.stdout == whole, "merge - reads several summaries from stdin")
    # Merged summaries merge again (a merge of merges).
    paths = shard_files(FUSED, 4, [], "compact")
    halves = [write("half-%d.json" % i, out("merge", *paths[2 * i:2 * i + 2])) for i in range(2)]
    check(out("merge", *halves) == out("summary", FUSED, "--windows", "compact"), "merges of merges")
    # What does not fit is refused with exit 2, naming the file.
    p = run("merge", paths[0], paths[2])
    check(p.returncode == 2 and paths[2] in p.stderr and "do not fit together" in p.stderr,
          "a missing shard: exit 2 naming the file (%s)" % p.stderr.strip())
    other = write("other.json", out("summary", CONV1D, "--windows", "compact", "--shard", "1/4"))
    p = run("merge", paths[0], other)
    check(p.returncode == 2 and other in p.stderr, "a shard of another run: exit 2 naming the file")
    full = write("full-form.json", out("summary", FUSED, "--shard", "1/4"))
    p = run("merge", paths[0], full)
    check(p.returncode == 2 and "--windows" in p.stderr, "shards in different window forms: exit 2")
    bad = write("bad.json", '{"n_timesteps": 3,\n  "truncated": tru}\n')
    p = run("merge", bad)
    check(p.returncode == 2 and bad + ":2:" in p.stderr, "bad JSON: exit 2 naming file:line (%s)" % p.stderr.strip())
    unknown = write("unknown.json", json.dumps(dict(json.loads(open(paths[0]).read()), extra=1)))
    p = run("merge", unknown)
    check(p.returncode == 2 and "unknown key 'extra'" in p.stderr, "an unknown key: exit 2 naming it")


def test_gnu_parallel_recipe():
    if shutil.which("parallel") is None:
        print("skipped: GNU parallel is not installed (apt-get install parallel)")
        return
    env = dict(os.environ, LOOPTRACE=EXE, LOOPTRACE_JOBS="2")
    for extra in ([], ["--windows", "compact", "--from", "20"]):
        p = subprocess.run(["bash", PARALLEL_RECIPE, "5", "summary", FUSED, *extra], capture_output=True,
                           text=True, env=env, timeout=120)
        check(p.returncode == 0 and p.stdout == out("summary", FUSED, *extra),
              "GNU parallel: 5 shard summaries merged equal the whole (%s) %s" % (extra, p.stderr[-200:]))
    p = subprocess.run(["bash", PARALLEL_RECIPE, "4", "trace", FUSED, "-D", "N=20"], capture_output=True,
                       text=True, env=env, timeout=120)
    check(p.returncode == 0 and p.stdout == out("trace", FUSED, "-D", "N=20"),
          "GNU parallel: 4 trace shards in order equal the whole trace")
    p = subprocess.run(["bash", PARALLEL_RECIPE, "3", "summary", FUSED, "--tensors", "Q"], capture_output=True,
                       text=True, env=env, timeout=120)
    check(p.returncode != 0 and "'Q'" in p.stderr, "GNU parallel: a failing shard fails the run")


def test_slurm_recipe():
    dest = os.path.join(TMP, "slurm")
    for first, count in ((0, 4), (1, 3)):  # --array=0-3 and --array=1-3
        shutil.rmtree(dest, ignore_errors=True)
        for task in range(first, first + count):
            env = dict(os.environ, LOOPTRACE=EXE, SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_COUNT=str(count),
                       SLURM_ARRAY_TASK_MIN=str(first), SLURM_CPUS_PER_TASK="2")
            p = subprocess.run(["bash", SLURM_RECIPE, dest, "summary", FUSED, "--windows", "compact"],
                               capture_output=True, text=True, env=env, timeout=60)
            check(p.returncode == 0, "Slurm task %d of %d: %s" % (task, count, p.stderr[-200:]))
        files = sorted(os.path.join(dest, f) for f in os.listdir(dest))
        check(len(files) == count and all(f.endswith(".json") for f in files), "one summary per task")
        check(out("merge", *files) == out("summary", FUSED, "--windows", "compact"),
              "Slurm array from %d: the merged shards equal the whole" % first)
    shutil.rmtree(dest, ignore_errors=True)
    for task in range(3):
        env = dict(os.environ, LOOPTRACE=EXE, SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_COUNT="3")
        subprocess.run(["bash", SLURM_RECIPE, dest, "trace", FUSED], env=env, check=True, timeout=60)
    joined = "".join(open(os.path.join(dest, f)).read() for f in sorted(os.listdir(dest)))
    check(joined == out("trace", FUSED), "Slurm trace shards concatenated equal the whole trace")
    p = subprocess.run(["bash", SLURM_RECIPE, dest, "summary", FUSED], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith("SLURM")}, timeout=60)
    check(p.returncode != 0 and "Slurm job array" in p.stderr, "outside a job array the script says so")


def test_one_op_mapping_generator():
    workload = write("chain.workload.yaml", """\
workload:
  iteration_space_shape: {m: 0 <= m < 3, k: 0 <= k < 2, j: 0 <= j < 4}
  einsums:
  - Z[m] = A[m, k]
  - Y[m, j] = Z[m] * B[j]
""")
    # `looptrace describe` output, written by hand (tensors as names or as objects).
    describe = write("describe.json", json.dumps({"einsums": [
        {"name": "Z", "rank_variables": {"m": 3, "k": 2}, "tensors": ["A", "Z"]},
        {"name": "Y", "rank_variables": {"m": 3, "j": 4}, "tensors": [{"name": "Z"}, {"name": "B"}, {"name": "Y"}]}]}))
    mapping = os.path.join(TMP, "one_op.mapping.yaml")
    for source in (["--workload", workload], [describe]):
        p = subprocess.run([sys.executable, ONE_OP, *source, "--storage", "DRAM", "-o", mapping],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "make_one_op_mapping.py %s: %s" % (source[0], p.stderr[-300:]))
        s = json.loads(out("summary", workload, mapping, "--windows", "compact"))
        # Z: 3 x 2 timesteps, then Y: 3 x 4; one point and one element per tensor each.
        check(s["n_timesteps"] == 18 and s["einsum_timespans"] == {"Z": [0, 6], "Y": [6, 18]},
              "one op per timestep: spans %s" % s["einsum_timespans"])
        check([t["n_accesses"] for t in s["traces"]] == [6, 6, 12, 12, 12] and s["n_points"] == 18,
              "one op per timestep: one access per tensor per timestep")
        check(s["tile_window_runs"]["DRAM"]["A"] == [{"start": 0, "length": 18, "period": 0, "count": 1}],
              "--storage DRAM holds every tensor for the whole run")
    p = subprocess.run([sys.executable, ONE_OP, "-"], input='{"not": 1}', capture_output=True, text=True)
    check(p.returncode != 0 and "einsums" in p.stderr, "input without einsums is refused")


if __name__ == "__main__":
    sys.exit(harness.main([test_windows_forms, test_huge_schedule_in_closed_form, test_summary_threads,
                           test_trace_threads, test_merge, test_gnu_parallel_recipe, test_slurm_recipe,
                           test_one_op_mapping_generator]))

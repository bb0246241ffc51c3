#!/usr/bin/env python3
"""Differential test: random specs, looptrace CLI vs. the brute-force model of SEMANTICS.md.

usage: run.py --looptrace build/src/looptrace [--count 300] [--seed 1] [--only CASESEED]...
              [--max-accesses 20000] [--jobs 2] [--keep DIR]

Each case is generated from `case seed` = seed * 100000 + index (reproduce one with
--only CASESEED).  For each case the CLI's summary and trace are run with no filter and
with random --max-timesteps / --tensors / --einsums, and compared with the model the
way shared/conformance/check.py compares with the reference (summary fields, sorted rows
per trace, t nondecreasing and inside [0, n_timesteps), element == row-major index of
coords), plus the order of `traces` and tensor_shapes under filters.  Prints one line
per mismatch, saves failing specs under /tmp/difffail/<caseseed>/, and ends with
'N passed, M failed' (exit 1 on failures).

Other options: --minimize CASESEED shrinks a failing case greedily and prints its YAML;
--spatial P sets how often a generated loop is spatial; --no-spatial-reuse never loops
again over a variable that an enclosing spatial loop covers (isolates the known
spatial bug); --clip-at-p switches the model to the reading that SEMANTICS.md's
"Settled questions" rejects (see model.OPTIONS)."""
import argparse
import concurrent.futures
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402
import model  # noqa: E402


def ravel(coords, shape):
    i = 0
    for c, s in zip(coords, shape):
        i = i * s + c
    return i


def small_case(case_seed, max_accesses, max_t):
    rng = random.Random(case_seed)
    for _ in range(200):
        g = generate.generate(rng)
        try:
            m = model.Model(g["spec"])
        except model.SpecError:
            continue
        if m.n_timesteps > max_t:
            continue
        if len(m.raw_accesses()) > max_accesses:
            continue
        return g, m, rng
    raise RuntimeError(f"could not generate a small case for seed {case_seed}")


def variants(m, rng):
    """[(label, kwargs)] of filter/prefix combinations to try."""
    s = m.summary()
    tensors = s["tensors"]
    names = [l["einsum"] for l in m.leaves]
    out = [("full", {})]
    out.append(("prefix", {"max_timesteps": rng.randint(1, m.n_timesteps + 1)}))
    if len(tensors) > 1:
        out.append(("tensors", {"tensors": rng.sample(tensors, rng.randint(1, len(tensors) - 1))}))
    if len(names) > 1:
        out.append(("einsums", {"einsums": rng.sample(names, rng.randint(1, len(names) - 1))}))
    if rng.random() < 0.5:
        kw = {"max_timesteps": rng.randint(1, m.n_timesteps)}
        if len(tensors) > 1:
            kw["tensors"] = rng.sample(tensors, rng.randint(1, len(tensors)))
        if len(names) > 1 and rng.random() < 0.5:
            kw["einsums"] = rng.sample(names, rng.randint(1, len(names)))
        out.append(("mixed", kw))
    return out


def cli_args(files, kw):
    args = list(files)
    if kw.get("max_timesteps") is not None:
        args += ["--max-timesteps", str(kw["max_timesteps"])]
    if kw.get("tensors") is not None:
        args += ["--tensors", ",".join(kw["tensors"])]
    if kw.get("einsums") is not None:
        args += ["--einsums", ",".join(kw["einsums"])]
    return args


def short(x, n=400):
    s = json.dumps(x)
    return s if len(s) <= n else s[:n] + "..."


def diff_rows(got, want):
    g, w = set(got), set(want)
    return (f"{len(got)} vs {len(want)} rows; extra {sorted(g - w)[:4]}, missing {sorted(w - g)[:4]}"
            + ("" if g != w else "; same set, different multiplicity"))


def compare(lt, files, m, kw):
    """List of mismatch strings for one invocation pair."""
    errs = []
    args = cli_args(files, kw)
    want = m.summary(**kw)
    p = subprocess.run([lt, "summary", *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return [f"summary exited {p.returncode}: {p.stderr.strip()[-300:]}"]
    got = json.loads(p.stdout)
    for key in ("n_timesteps", "truncated", "tensors", "einsums", "memory_levels", "tensor_ranks",
                "tensor_shapes"):
        if got.get(key) != want[key]:
            errs.append(f"{key}: got {short(got.get(key))}, want {short(want[key])}")
    gs = [[k, *v] for k, v in got.get("einsum_timespans", {}).items()]
    ws = [[k, *v] for k, v in want["einsum_timespans"].items()]
    if gs != ws:
        errs.append(f"einsum_timespans: got {short(gs)}, want {short(ws)}")
    gw = {lvl: {t: sorted(map(list, s)) for t, s in d.items()} for lvl, d in got.get("tile_windows", {}).items()}
    if gw != want["tile_windows"]:
        det = []
        for lvl in sorted(set(gw) | set(want["tile_windows"])):
            a, b = gw.get(lvl), want["tile_windows"].get(lvl)
            if a != b:
                if a is None or b is None:
                    det.append(f"{lvl}: got {short(a, 150)}, want {short(b, 150)}")
                    continue
                for t in sorted(set(a) | set(b)):
                    if a.get(t) != b.get(t):
                        det.append(f"{lvl}/{t}: got {short(a.get(t), 150)}, want {short(b.get(t), 150)}")
        errs.append("tile_windows: " + "; ".join(det[:4]))
    key = lambda t: (t["einsum"], t["tensor"], t["is_output"], t["n_accesses"])
    gt = [key(t) for t in got.get("traces", [])]
    wt = [key(t) for t in want["traces"]]
    if sorted(gt) != sorted(wt):
        errs.append(f"traces: got {short(sorted(set(gt) - set(wt)))}, want {short(sorted(set(wt) - set(gt)))}")
    elif gt != wt:
        errs.append(f"traces order: got {short([t[:2] for t in gt])}, want {short([t[:2] for t in wt])}")

    p = subprocess.run([lt, "trace", *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return errs + [f"trace exited {p.returncode}: {p.stderr.strip()[-300:]}"]
    shapes = got.get("tensor_shapes", {})
    rows, last = {}, -1
    stream_err = None
    for n, line in enumerate(p.stdout.splitlines(), 1):
        a = json.loads(line)
        t = a["t"]
        if stream_err is None:
            if t < last:
                stream_err = f"stream: line {n} t={t} after t={last}"
            elif not 0 <= t < want["n_timesteps"]:
                stream_err = f"stream: line {n} t={t} outside [0, {want['n_timesteps']})"
            elif a["tensor"] not in shapes or a["element"] != ravel(a["coords"], shapes[a["tensor"]]):
                stream_err = f"stream: line {n} element {a['element']} != ravel({a['coords']}, {shapes.get(a['tensor'])})"
        last = t
        rows.setdefault((a["einsum"], a["tensor"], a["write"]), []).append((t, *a["coords"]))
    if stream_err:
        errs.append(stream_err)
    wrows = {}
    for a in m.accesses(**kw):
        wrows.setdefault((a["einsum"], a["tensor"], a["write"]), []).append((a["t"], *a["coords"]))
    for k in sorted(set(rows) | set(wrows), key=str):
        g, w = sorted(rows.get(k, [])), sorted(wrows.get(k, []))
        if g != w:
            errs.append(f"rows {k[0]}/{k[1]}{'(w)' if k[2] else ''}: {diff_rows(g, w)}")
    return errs


def write_files(files, d):
    """Writes {name: text} into folder d; returns the paths, in order."""
    paths = []
    for name, text in files.items():
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        paths.append(path)
    return paths


def keep_if_failed(d, keep, case_seed, lines):
    """Copies a failed case's folder d (and its failures) to keep/<case seed>; removes d."""
    if lines:
        dest = os.path.join(keep, str(case_seed))
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(d, dest)
        with open(os.path.join(dest, "failures.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    shutil.rmtree(d, ignore_errors=True)


def run_seeds(case, seeds, jobs, failed=0, before_last=None):
    """Runs case(seed) -> failure lines over `jobs` threads, printing the lines in seed
    order, then what before_last() returns (if given), and 'N passed, M failed' last
    (`failed` counts failures found before the cases); returns the exit status."""
    passed = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for lines in ex.map(case, seeds):
            for line in lines:
                print(line, flush=True)
            failed += bool(lines)
            passed += not lines
    if before_last is not None:
        print(before_last())
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def add_lattice_arguments(ap):
    """--retile and --strided: how often the generator makes strided tiles (box lattices)."""
    ap.add_argument("--retile", type=float, default=generate.OPTIONS["retile"],
                    help="probability that a generated !Spatial loop is tiled again by a !Temporal loop "
                         "over its variable, with a Storage node inside (a strided tile)")
    ap.add_argument("--strided", type=float, default=generate.OPTIONS["strided"],
                    help="probability that a generated convolution reads its input at stride 2 "
                         "(default: the generator's rate of rarer features)")


def set_lattice_options(a):
    generate.OPTIONS["retile"] = a.retile
    generate.OPTIONS["strided"] = a.strided


def case_arguments(count, seed, keep):
    """The options every differential script takes (--looptrace, --count, --seed, --only,
    --jobs, --keep), with its defaults; a script adds its own to the parser returned."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--looptrace", required=True)
    ap.add_argument("--count", type=int, default=count)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--only", type=int, action="append")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", default=keep)
    return ap


def case_seeds(a):
    """The case seeds of parsed arguments: --only, else --count of them from --seed."""
    return a.only or [a.seed * 100000 + i for i in range(a.count)]


def failures_of(d, keep, case_seed, lines):
    """A case's failure lines, prefixed with its seed; its folder d kept if it failed."""
    lines = [f"FAIL seed={case_seed} {x}" for x in lines]
    keep_if_failed(d, keep, case_seed, lines)
    return lines


def run_case(lt, case_seed, max_accesses, max_t, keep):
    g, m, rng = small_case(case_seed, max_accesses, max_t)
    d = tempfile.mkdtemp(prefix=f"diff{case_seed}-")
    files = write_files(g["files"], d)
    lines = []
    for label, kw in variants(m, rng):
        try:
            errs = compare(lt, files, m, kw)
        except Exception as e:  # a crash in one comparison must not hide the others
            errs = [f"exception: {type(e).__name__}: {e}"]
        for e in errs:
            opts = " ".join(cli_args([], kw))
            lines.append(f"FAIL seed={case_seed} [{label}{(' ' + opts) if opts else ''}] {e}")
    keep_if_failed(d, keep, case_seed, lines)
    return lines


def _mutations(spec):
    """Smaller variants of spec (for --minimize): drop a node or branch, simplify a loop."""
    import copy

    def paths(nodes, pre):
        for i, n in enumerate(nodes):
            yield pre + (i,), n
            if isinstance(n, dict) and "nodes" in n:
                yield from paths(n["nodes"], pre + (i, "nodes"))

    def at(s, path):
        x = s["mapping"]["nodes"]
        for k in path[:-1]:
            x = x[k]
        return x, path[-1]

    for path, n in list(paths(spec["mapping"]["nodes"], ())):
        t = n.get("__tag__")
        if t in ("Storage", "Temporal", "Spatial", "Nested", "Sequential", "Pipeline", "Parallel", "Compute"):
            s = copy.deepcopy(spec)
            lst, i = at(s, path)
            del lst[i]
            yield s
        if t in ("Sequential", "Pipeline", "Parallel", "Nested"):
            s = copy.deepcopy(spec)
            lst, i = at(s, path)
            lst[i:i + 1] = lst[i]["nodes"]
            yield s
        if t in ("Temporal", "Spatial"):
            if "initial_tile_shape" in n:
                s = copy.deepcopy(spec); lst, i = at(s, path); del lst[i]["initial_tile_shape"]; yield s
            if n["tile_shape"] > 1:
                s = copy.deepcopy(spec); lst, i = at(s, path); lst[i]["tile_shape"] -= 1; yield s
            if n.get("initial_tile_shape", 1) > 1:
                s = copy.deepcopy(spec); lst, i = at(s, path); lst[i]["initial_tile_shape"] -= 1; yield s
            if t == "Spatial":
                s = copy.deepcopy(spec); lst, i = at(s, path)
                lst[i] = {"__tag__": "Temporal", "rank_variable": n["rank_variable"], "tile_shape": n["tile_shape"]}
                yield s
        if t == "Storage" and len(n.get("tensors", [])) > 1:
            for k in range(len(n["tensors"])):
                s = copy.deepcopy(spec); lst, i = at(s, path); del lst[i]["tensors"][k]; yield s
    # drop a whole einsum that is no longer mapped
    used = set()

    def leaves(nodes):
        for n in nodes:
            if n.get("__tag__") == "Compute":
                used.add(n["einsum"])
            leaves(n.get("nodes", []) or [])
    leaves(spec["mapping"]["nodes"])
    for k, e in enumerate(spec["workload"]["einsums"]):
        nm = e if isinstance(e, str) else e.get("name") or e.get("einsum")
        names = {model.parse_concise(nm)[0] if "=" in nm else nm}
        if not names & used:
            s = copy.deepcopy(spec)
            del s["workload"]["einsums"][k]
            yield s


def minimize(lt, case_seed, max_accesses, max_t):
    """Greedy shrink of a failing case (no-filter variant); prints the smallest YAML."""
    g, m, rng = small_case(case_seed, max_accesses, max_t)
    spec = g["spec"]
    d = tempfile.mkdtemp(prefix="min-")
    path = os.path.join(d, "spec.yaml")

    def fails(sp):
        try:
            mm = model.Model(sp)
        except Exception:
            return None
        open(path, "w").write(generate.to_yaml(sp, random.Random(0)))
        try:
            errs = compare(lt, [path], mm, {})
        except Exception as e:
            return None
        errs = [e for e in errs if "exited" not in e]
        return errs[0].split(":")[0] if errs else None

    want = fails(spec)
    if want is None:
        print("no failure in the full variant")
        return
    changed = True
    while changed:
        changed = False
        for s in _mutations(spec):
            if fails(s) == want:
                spec, changed = s, True
                break
    text = generate.to_yaml(spec, random.Random(0))
    open(path, "w").write(text)
    print(text)
    for e in compare(lt, [path], model.Model(spec), {}):
        print(e)
    print(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minimize", type=int, help="shrink this failing case seed and print it")
    ap.add_argument("--looptrace", required=True)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, action="append")
    ap.add_argument("--max-accesses", type=int, default=20000)
    ap.add_argument("--max-timesteps-total", type=int, default=4000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", default="/tmp/difffail")
    ap.add_argument("--spatial", type=float, default=generate.OPTIONS["spatial"],
                    help="probability that a generated loop is spatial")
    ap.add_argument("--clip-at-p", action="store_true",
                    help="model the rejected reading: a loop's last tile is also cut at the tile P it "
                         "is given (the default cuts only at each leaf's extent and enclosing tiles)")
    ap.add_argument("--no-spatial-reuse", action="store_true",
                    help="never loop again over a rank variable that a spatial loop encloses")
    a = ap.parse_args()
    lt = os.path.abspath(a.looptrace)
    generate.OPTIONS["spatial"] = a.spatial
    model.OPTIONS["CLIP_AT_P"] = a.clip_at_p
    generate.OPTIONS["spatial_reuse"] = not a.no_spatial_reuse
    if a.minimize is not None:
        minimize(lt, a.minimize, a.max_accesses, a.max_timesteps_total)
        return
    seeds = a.only or [a.seed * 100000 + i for i in range(a.count)]
    sys.exit(run_seeds(lambda s: run_case(lt, s, a.max_accesses, a.max_timesteps_total, a.keep), seeds, a.jobs))

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Differential test of `looptrace cache`: random LoopTrees (generate.py) and random
cache shapes (line sizes, sets, ways or full, lru / fifo / plru, write-back or
write-through, with or without write-allocate, one cache or two; elements of one or
several bytes), the CLI's JSON
against a brute-force simulator written here from SEMANTICS.md "Caches" alone, as
plainly as it can be: lists of ways, a list as the LRU stack, sets of lines.

The accesses come from the brute-force model (model.py), ordered as the contract says
(each timestep's reads, then its writes; traces in order; elements ascending); with
--source transfers:L the requests are those of `looptrace transfers --level L` (their
own differential test is movement.py). Half the variants take a random layout
(layouts.py's): the trace's addresses then come from the model's brute-force address
table (its entries for every level), the transfers' from `transfers --layout` (whose own
test is layouts.py), so the cache over transfers:L is checked against a cache fed exactly
what `transfers --level L --layout FILE` writes. Every figure is compared: per cache the totals,
per tensor and per Einsum; with --curve the misses at every power of two, per tensor,
and the histogram.

usage: cache.py --looptrace build/src/looptrace [--count 30] [--seed 5] [--only SEED]...
                [--jobs 2] [--keep DIR]
Ends with 'N passed, M failed'."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402
import layouts  # noqa: E402
import model  # noqa: E402
import movement  # noqa: E402
import run  # noqa: E402

FIELDS = ["accesses", "hits", "misses", "cold", "capacity", "conflict", "writebacks", "write_throughs"]


# ---------------------------------------------------------------- the simulator
class Cache:
    """One cache. A set is a list of ways; a way is None or [line, dirty, tensor, stamp]."""

    def __init__(self, size, ways, line, policy, write_back, write_allocate):
        self.lines = size // line
        self.ways = self.lines if ways == "full" else ways
        self.nsets = self.lines // self.ways
        self.sets = [[None] * self.ways for _ in range(self.nsets)]
        self.trees = [[0] * self.ways for _ in range(self.nsets)]  # plru node bits (ways - 1 used)
        self.policy, self.wb, self.wa = policy, write_back, write_allocate
        self.clock = 0
        self.seen = set()
        self.shadow = []  # fully associative LRU of self.lines lines, most recent last
        self.tensors, self.einsums = {}, {}

    def plru_touch(self, s, w):
        node, lo, hi = 0, 0, self.ways
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if w < mid:
                self.trees[s][node] = 1
                node, hi = 2 * node + 1, mid
            else:
                self.trees[s][node] = 0
                node, lo = 2 * node + 2, mid

    def victim(self, s):
        ways = self.sets[s]
        for w in range(self.ways):
            if ways[w] is None:
                return w
        if self.policy == "plru":
            node, lo, hi = 0, 0, self.ways
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.trees[s][node]:
                    node, lo = 2 * node + 2, mid
                else:
                    node, hi = 2 * node + 1, mid
            return lo
        return min(range(self.ways), key=lambda w: ways[w][3])  # lru: last use; fifo: fill

    def count(self, key, table, field):
        row = table.setdefault(key, dict.fromkeys(FIELDS, 0))
        row[field] += 1

    def access(self, line, write, tensor, einsum):
        """Returns what goes down: [(line, write, tensor)]."""
        self.clock += 1
        down = []
        allocate = not write or self.wa
        cold = line not in self.seen
        self.seen.add(line)
        shadow_miss = line not in self.shadow
        if not shadow_miss:
            self.shadow.remove(line)
            self.shadow.append(line)
        elif allocate:
            self.shadow.append(line)
            if len(self.shadow) > self.lines:
                self.shadow.pop(0)
        s = line % self.nsets
        ways = self.sets[s]
        hit = [w for w in range(self.ways) if ways[w] is not None and ways[w][0] == line]
        names = [(tensor, self.tensors)] + ([(einsum, self.einsums)] if einsum is not None else [])
        for key, table in names:
            self.count(key, table, "accesses")
            self.count(key, table, "hits" if hit else "misses")
            if cold:
                self.count(key, table, "cold")
            if shadow_miss and not cold:
                self.count(key, table, "capacity")
            if write and not self.wb:
                self.count(key, table, "write_throughs")
        if hit:
            w = hit[0]
            if self.policy == "lru":
                ways[w][3] = self.clock
            if self.policy == "plru":
                self.plru_touch(s, w)
            if write and self.wb:
                ways[w][1] = True
        elif allocate:
            w = self.victim(s)
            if ways[w] is not None and ways[w][1]:
                self.count(ways[w][2], self.tensors, "writebacks")
                down.append((ways[w][0], True, ways[w][2]))
            ways[w] = [line, write and self.wb, tensor, self.clock]
            if self.policy == "plru":
                self.plru_touch(s, w)
            down.append((line, False, tensor))
        if write and (not self.wb or not allocate):
            down.append((line, True, tensor))
        return down

    def finish(self):
        for ways in self.sets:
            for way in ways:
                if way is not None and way[1]:
                    self.count(way[2], self.tensors, "writebacks")


def curve(stream):
    """Misses of a fully associative LRU cache at 1, 2, 4, ... lines; per tensor; histogram."""
    stack, hist, cold, per = [], {}, {}, {}  # per tensor: list of distances (None: cold)
    for line, tensor in stream:
        if line in stack:
            d = len(stack) - 1 - stack.index(line)
            stack.remove(line)
            hist[d] = hist.get(d, 0) + 1
            per.setdefault(tensor, []).append(d)
        else:
            per.setdefault(tensor, []).append(None)
        stack.append(line)
    distinct = len(stack)
    sizes = [1]
    while sizes[-1] < distinct:
        sizes.append(2 * sizes[-1])

    def misses(ds):
        return [sum(1 for d in ds if d is None or d >= c) for c in sizes]

    every = [d for ds in per.values() for d in ds]
    return {"accesses": len(stream), "cold": sum(d is None for d in every), "distinct_lines": distinct,
            "lines": sizes, "misses": misses(every), "histogram": sorted([d, n] for d, n in hist.items()),
            "tensors": {t: misses(ds) for t, ds in per.items()}}


# ---------------------------------------------------------------- what the cache sees
def trace_lines(m, kw, line, align, layout=None):
    """(t, line, write, tensor, einsum) of the trace at the compute, in the contract's order.
    Addresses: row-major as `transfers` lays tensors out here; with `layout`, the model's
    brute-force table of its entries for every level (the compute is no one level)."""
    tensors, einsums = kw.get("tensors"), kw.get("einsums")
    N = kw.get("max_timesteps")
    order = m.summary(tensors=tensors, einsums=einsums)["tensors"]
    traces = [(li, tn) for li, _, tn, _ in m.traces_list(None if tensors is None else set(tensors),
                                                          None if einsums is None else set(einsums))]
    shapes = m.shapes()
    base, size, nxt = {}, {}, 0
    for x in order:  # the layout of `transfers`
        nxt = -(-nxt // align) * align
        base[x], size[x] = nxt, max(1, m.bytes_per_value(x) or 1)
        count = 1
        for d in shapes[x]:
            count *= d
        nxt += count * size[x]
    where = m.layout_addresses(order, align, True, layout, "") if layout is not None else None
    by_leaf = {}
    for t, li, tensor, o, c in m.raw_accesses():
        if tensor not in base:  # not selected
            continue
        e = run.ravel(c, shapes[tensor])
        a = base[tensor] + e * size[tensor] if where is None else where[tensor][0][tuple(c)]
        by_leaf.setdefault((t, li, tensor, o), {})[e] = a
    frm, to = kw.get("from", 0), kw.get("to")
    out = []
    for t in range(m.n_timesteps if N is None else min(N, m.n_timesteps)):
        if t < frm or (to is not None and t >= to):
            continue
        for write in (False, True):
            for k, (li, tn) in enumerate(traces):
                seen = set()
                elements = by_leaf.get((t, li, tn, write), {})
                for e in sorted(elements):
                    a = elements[e]
                    for ln in range(a // line, (a + size[tn] - 1) // line + 1):
                        if ln not in seen:
                            seen.add(ln)
                            out.append((t, ln, write, tn, m.leaves[li]["einsum"]))
    return out


def transfer_lines(lt, files, level, kw, line, align, layout_path=None):
    """What `transfers --level L [--layout FILE]` writes, as the cache's stream."""
    args = ["transfers", *cache_args(files, kw), "--level", level, "--line-bytes", str(line), "--align", str(align)]
    args += ["--layout", layout_path] if layout_path else []
    p = subprocess.run([lt, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"transfers exited {p.returncode}: {p.stderr[-300:]}")
    reqs = [json.loads(x) for x in p.stdout.splitlines()]
    return [(r["t"], r["address"] // line, r["op"] == "write", r["tensor"], None) for r in reqs]


def simulate(stream, shapes, line):
    """Runs the hierarchy; returns the caches and the curve of the first cache's stream."""
    caches = [Cache(size, ways, line, *rest) for size, ways, *rest in shapes]
    for t, ln, write, tn, en in stream:
        todo = [(ln, write, tn)]
        for k, c in enumerate(caches):
            nxt = []
            for x, w, y in todo:
                nxt += c.access(x, w, y, en if k == 0 else None)
            todo = nxt
    for c in caches:
        c.finish()
    return caches, curve([(ln, tn) for _, ln, _, tn, _ in stream])


# ---------------------------------------------------------------- comparison
def cache_args(files, kw):
    a = run.cli_args(files, kw)
    for k in ("from", "to"):
        if kw.get(k) is not None:
            a += [f"--{k}", str(kw[k])]
    return a


def compare(got, caches, want_curve, source, names):
    errs = []
    if len(got["caches"]) != len(caches):
        return [f"{len(got['caches'])} caches, want {len(caches)}"]
    for k, (g, c) in enumerate(zip(got["caches"], caches)):
        total = dict.fromkeys(FIELDS, 0)
        for row in c.tensors.values():
            for f in FIELDS:
                total[f] += row[f]
        total["conflict"] = total["misses"] - total["cold"] - total["capacity"]
        for f in FIELDS:
            if g[f] != total[f]:
                errs.append(f"cache {g['name']}: {f} {g[f]}, want {total[f]}")
        for kind, table, key in (("tensors", c.tensors, "tensor"), ("einsums", c.einsums, "einsum")):
            if kind == "einsums" and (source != "trace" or k > 0):
                continue
            rows = {r[key]: r for r in g[kind] if r["accesses"] or r.get("writebacks")}
            want = {n: r for n, r in table.items() if r["accesses"] or r["writebacks"]}
            if set(rows) != set(want):
                errs.append(f"cache {g['name']}: {kind} {sorted(rows)}, want {sorted(want)}")
                continue
            for n, r in want.items():
                r["conflict"] = r["misses"] - r["cold"] - r["capacity"]
                for f in FIELDS:
                    if f == "writebacks" and kind == "einsums":
                        continue
                    if rows[n][f] != r[f]:
                        errs.append(f"cache {g['name']} {key} {n}: {f} {rows[n][f]}, want {r[f]}")
    gc = got["curve"]
    if want_curve is None:  # a run without --curve
        return errs[:8]
    for f in ("accesses", "cold", "distinct_lines", "lines", "misses", "histogram"):
        if gc[f] != want_curve[f]:
            errs.append(f"curve {f}: {str(gc[f])[:200]}, want {str(want_curve[f])[:200]}")
    for row in gc["tensors"]:
        want = want_curve["tensors"].get(row["tensor"], [0] * len(want_curve["lines"]))
        if row["misses"] != want:
            errs.append(f"curve tensor {row['tensor']}: {row['misses']}, want {want}")
    return errs[:8]


def random_caches(rng):
    line = rng.choice([1, 2, 4, 8, 16, 64])
    policy = rng.choice(["lru", "fifo", "plru"])
    wb, wa = rng.random() < 0.7, rng.random() < 0.75
    shapes = []
    for _ in range(1 if rng.random() < 0.7 else 2):
        if rng.random() < 0.2:
            ways = "full"
            lines = rng.choice([1, 2, 4, 8, 16]) if policy == "plru" else rng.randint(1, 12)
        else:
            ways = rng.choice([1, 2, 4, 8] if policy == "plru" else [1, 2, 3, 4, 8])
            lines = ways * rng.choice([1, 2, 3, 4, 8])
        shapes.append((lines * line, ways, policy, wb, wa))
    return line, shapes


def cli_cache_args(line, shapes):
    size, ways, policy, wb, wa = shapes[0]
    a = ["--line-bytes", str(line), "--policy", policy]
    if len(shapes) == 1:
        a += ["--size", str(size), "--ways", str(ways)]
    else:
        for k, (size, ways, *_) in enumerate(shapes):
            a += ["--cache", f"C{k}={size}/{ways}"]
    return a + ([] if wb else ["--write-through"]) + ([] if wa else ["--no-write-allocate"])


def run_case(lt, case_seed, keep):
    g, m, rng = run.small_case(case_seed, 6000, 1500)
    d = tempfile.mkdtemp(prefix=f"cache{case_seed}-")
    spec = g["spec"]
    if rng.random() < 0.5:  # elements of several bytes: lines they straddle, tensors that share a line
        spec = movement.vary_bits(spec, rng)
        m = model.Model(spec)
    files = movement.case_files(g, spec, d, rng)
    lines = []
    try:
        variants = [("full", {})] + [(label, kw) for label, kw in run.variants(m, rng)[1:]]
        a, b = sorted(rng.randint(0, m.n_timesteps) for _ in range(2))
        variants.append(("window", {"from": a, "to": b}))
        levels = [lvl for lvl in m.levels]
        for label, kw in variants:
            line, shapes = random_caches(rng)
            align = rng.choice([1, 16, 4096])
            sources = ["trace"] + ([f"transfers:{rng.choice(levels)}"] if levels and rng.random() < 0.4 else [])
            lay, layout_path = None, None
            if rng.random() < 0.5:  # a random layout: for every level, or for the transfers' level
                level = sources[-1][10:] if len(sources) > 1 else (rng.choice(levels) if levels else None)
                lay = layouts.random_layout(m, rng, level)
                if level is None and "levels" in lay:  # no level to name: the same, for every level
                    lay["tensors"] = lay.pop("levels")[None]
                if lay.get("tensors") or any(lay.get("levels", {}).values()):  # (an empty map is a bad file)
                    layout_path = os.path.join(d, f"layout-{label}.yaml")
                    with open(layout_path, "w") as f:
                        f.write(layouts.to_yaml(lay))
                else:
                    lay = None
            for source in sources:
                args = ["cache", *cache_args(files, kw), *cli_cache_args(line, shapes), "--curve",
                        "--source", source, "--align", str(align)]
                args += ["--layout", layout_path] if layout_path else []
                p = subprocess.run([lt, *args], capture_output=True, text=True, timeout=120)
                if p.returncode != 0:
                    lines.append(f"[{label} {' '.join(args[len(files) + 1:])}] exited {p.returncode}: {p.stderr[-300:]}")
                    continue
                stream = (trace_lines(m, kw, line, align, lay) if source == "trace"
                          else transfer_lines(lt, files, source[10:], kw, line, align, layout_path))
                caches, want_curve = simulate(stream, shapes, line)
                for e in compare(json.loads(p.stdout), caches, want_curve, source, None):
                    lines.append(f"[{label} {' '.join(args[len(files) + 1:])}] {e}")
                if len(shapes) == 1:
                    # Without the curve the counts may come from warps (of the trace, or of
                    # the stream of transfers): the same figures.
                    args.remove("--curve")
                    p = subprocess.run([lt, *args], capture_output=True, text=True, timeout=120)
                    if p.returncode != 0:
                        lines.append(f"[{label} {' '.join(args[len(files) + 1:])}] exited {p.returncode}")
                        continue
                    for e in compare(json.loads(p.stdout), caches, None, source, None):
                        lines.append(f"[{label} (warps) {' '.join(args[len(files) + 1:])}] {e}")
    except Exception as e:  # one broken invocation must not hide the rest
        lines.append(f"exception: {type(e).__name__}: {e}")
    return run.failures_of(d, keep, case_seed, lines)


def main():
    ap = run.case_arguments(30, 5, "/tmp/cachefail")
    a = ap.parse_args()
    model.OPTIONS["CLIP_AT_P"] = False  # SEMANTICS.md's settled reading
    lt = os.path.abspath(a.looptrace)
    seeds = run.case_seeds(a)
    sys.exit(run.run_seeds(lambda s: run_case(lt, s, a.keep), seeds, a.jobs))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Brute-force reference model of shared/SEMANTICS.md, written from the text alone.

Input: a spec as the Python value a YAML loader gives (dicts, lists, scalars); a tagged
mapping node is a dict with the key "__tag__" ("Temporal", "Storage", ...).

    m = Model(spec)
    m.summary(max_timesteps=None, tensors=None, einsums=None)   -> dict like `looptrace summary`
    m.accesses(max_timesteps=None, tensors=None, einsums=None)  -> list of access dicts

Everything is enumerated: every loop iteration, every spatial instance, every point.
Standard library only.  `load_files()` (used for self-checks against the conformance
corpus and to re-run saved failures) needs PyYAML and jinja2 and imports them lazily.
"""
import bisect
import itertools
import json
import math
import re
import sys

INF = float("inf")
# CLIP_AT_P False is SEMANTICS.md's settled reading (and the reference's): a loop fused
# across Einsums has its last tile cut only at each leaf's own extent and at enclosing
# tiles.  True (run.py --clip-at-p) is the other reading, kept to compare: tiles are
# also cut at the tile P the loop is given, so a leaf whose Einsum has a larger extent
# of that variable than the Einsum that resolved the loop skips the points past P.
OPTIONS = {"CLIP_AT_P": False}
LOOPS = ("Temporal", "Spatial")
SPLITS = ("Sequential", "Pipeline", "Parallel")
BODY = ("Nested", "Compute") + SPLITS


class SpecError(Exception):
    pass


# ---------------------------------------------------------------- expressions
_TOK = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(//|[-+*()]))")


def _tokens(s):
    s = str(s)
    pos, out = 0, []
    while pos < len(s):
        if s[pos:].strip() == "":
            break
        m = _TOK.match(s, pos)
        if not m:
            raise SpecError(f"bad expression {s!r}")
        out.append(m.group(1) and ("int", int(m.group(1))) or m.group(2) and ("var", m.group(2))
                   or ("op", m.group(3)))
        pos = m.end()
    return out


def parse_affine(s):
    """Integer affine expression -> {var: coef, "": const}."""
    if isinstance(s, int):
        return {"": s}
    toks = _tokens(s)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def add(a, b, k=1):
        r = dict(a)
        for v, c in b.items():
            r[v] = r.get(v, 0) + k * c
        return {v: c for v, c in r.items() if c != 0 or v == ""}

    def const(a):
        return all(v == "" for v in a)

    def expr():
        a = term()
        while peek() in (("op", "+"), ("op", "-")):
            op = take()[1]
            a = add(a, term(), 1 if op == "+" else -1)
        return a

    def term():
        a = factor()
        while peek() in (("op", "*"), ("op", "//")):
            op = take()[1]
            b = factor()
            if op == "*":
                if const(a):
                    a, b = b, a
                if not const(b):
                    raise SpecError(f"non-affine {s!r}")
                k = b.get("", 0)
                a = {v: c * k for v, c in a.items()}
            else:
                if not (const(a) and const(b)):
                    raise SpecError(f"non-affine {s!r}")
                a = {"": a.get("", 0) // b.get("", 0)}
        return a

    def factor():
        t = take()
        if t[0] == "int":
            return {"": t[1]}
        if t[0] == "var":
            return {t[1]: 1}
        if t == ("op", "-"):
            return {v: -c for v, c in factor().items()}
        if t == ("op", "("):
            a = expr()
            if take() != ("op", ")"):
                raise SpecError(f"bad expression {s!r}")
            return a
        raise SpecError(f"bad expression {s!r}")

    a = expr()
    if pos[0] != len(toks):
        raise SpecError(f"bad expression {s!r}")
    a.setdefault("", 0)
    return a


def aff_vars(a):
    return [v for v in a if v != ""]


def aff_eval(a, env):
    return a.get("", 0) + sum(c * env[v] for v, c in a.items() if v != "")


def parse_constraints(s):
    """'0 <= p + r < 28 and m == 3' -> list of (affine, op) meaning affine op 0."""
    out = []
    for part in re.split(r"\band\b", str(s)):
        pieces = re.split(r"(<=|>=|==|<|>)", part)
        exprs, ops = pieces[0::2], pieces[1::2]
        for i, op in enumerate(ops):
            a, b = parse_affine(exprs[i]), parse_affine(exprs[i + 1])
            d = dict(a)
            for v, c in b.items():
                d[v] = d.get(v, 0) - c
            out.append((d, op))
    return out


def _le_forms(cons):
    """Each constraint as affine <= 0 forms (integer)."""
    forms = []
    for d, op in cons:
        neg = {v: -c for v, c in d.items()}
        if op == "<=":
            forms.append(d)
        elif op == "<":
            f = dict(d); f[""] = f.get("", 0) + 1; forms.append(f)
        elif op == ">=":
            forms.append(neg)
        elif op == ">":
            f = dict(neg); f[""] = f.get("", 0) + 1; forms.append(f)
        elif op == "==":
            forms.append(d); forms.append(neg)
    return forms


def box_hull(variables, cons):
    """Exact integer box hull (min, max) of each variable (brute force after propagation)."""
    forms = _le_forms(cons)
    lo = {v: -INF for v in variables}
    hi = {v: INF for v in variables}
    for _ in range(50):
        changed = False
        for f in forms:
            for v, c in f.items():
                if v == "" or c == 0:
                    continue
                rest = f.get("", 0)
                for u, cu in f.items():
                    if u in ("", v):
                        continue
                    rest += min(cu * lo[u], cu * hi[u]) if cu * lo[u] == cu * lo[u] else 0
                if rest != rest or rest == INF or rest == -INF:
                    continue
                if c > 0:  # c v <= -rest
                    b = math.floor(-rest / c)
                    if b < hi[v]:
                        hi[v] = b; changed = True
                else:
                    b = math.ceil(-rest / c)
                    if b > lo[v]:
                        lo[v] = b; changed = True
        if not changed:
            break
    for v in variables:
        if lo[v] == -INF or hi[v] == INF:
            raise SpecError(f"rank variable {v} is unbounded")
    size = 1
    for v in variables:
        size *= max(0, hi[v] - lo[v] + 1)
    if size <= 300000:
        mn = {v: INF for v in variables}
        mx = {v: -INF for v in variables}
        vs = list(variables)
        for pt in itertools.product(*[range(lo[v], hi[v] + 1) for v in vs]):
            env = dict(zip(vs, pt))
            if all(aff_eval(f, env) <= 0 for f in forms):
                for v in vs:
                    mn[v] = min(mn[v], env[v]); mx[v] = max(mx[v], env[v])
        if any(mn[v] == INF for v in vs):
            raise SpecError("empty iteration space")
        return {v: (mn[v], mx[v]) for v in vs}
    return {v: (lo[v], hi[v]) for v in variables}


# ---------------------------------------------------------------- workload
class Einsum:
    def __init__(self, name, accesses, iss, rank_sizes):
        self.name = name
        self.accesses = accesses  # [(tensor, [(rank, affine)], is_output)]
        self.vars = []
        for _, proj, _ in accesses:
            for _, a in proj:
                for v in aff_vars(a):
                    if v not in self.vars:
                        self.vars.append(v)
        self.iss = iss
        self.rank_sizes = rank_sizes or {}
        self.extent = {}


def _parse_projection(p):
    if isinstance(p, dict):
        return [(str(k), parse_affine(v)) for k, v in p.items()]
    out = []
    for item in p:
        if isinstance(item, dict):
            out += [(str(k), parse_affine(v)) for k, v in item.items()]
        else:
            out.append((str(item).upper(), parse_affine(item)))
    return out


def _split_top(s, sep):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur); cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _parse_concise_access(s):
    s = s.strip()
    m = re.fullmatch(r"([A-Za-z_]\w*)\s*\[(.*)\]", s, re.S)
    if not m:
        raise SpecError(f"bad concise access {s!r}")
    name, inner = m.group(1), m.group(2)
    proj = []
    if inner.strip():
        for item in _split_top(inner, ","):
            if ":" in item:
                r, e = item.split(":", 1)
                proj.append((r.strip(), parse_affine(e)))
            else:
                proj.append((item.strip().upper(), parse_affine(item.strip())))
    return name, proj


def parse_concise(s):
    lhs, rhs = s.split("=", 1)
    out_name, out_proj = _parse_concise_access(lhs)
    acc = []
    for term in _split_top(rhs, "*"):
        n, p = _parse_concise_access(term)
        acc.append((n, p, False))
    acc.append((out_name, out_proj, True))
    return out_name, acc


def load_workload(wl):
    einsums = []
    for e in wl.get("einsums", []):
        if isinstance(e, str):
            name, acc = parse_concise(e)
            einsums.append(Einsum(name, acc, [], {}))
            continue
        if "einsum" in e:
            name, acc = parse_concise(e["einsum"])
            name = e.get("name", name)
        else:
            name = e["name"]
            acc = [(a["name"], _parse_projection(a["projection"]), bool(a.get("output", False)))
                   for a in e["tensor_accesses"]]
        iss = e.get("iteration_space_shape", []) or []
        if isinstance(iss, str):
            iss = [iss]
        if isinstance(iss, dict):
            iss = list(iss.values())
        einsums.append(Einsum(name, acc, list(iss), e.get("rank_sizes")))
    wl_iss = wl.get("iteration_space_shape", {}) or {}
    wl_rs = wl.get("rank_sizes", {}) or {}
    for e in einsums:
        cons = []
        for v, c in wl_iss.items():
            if v in e.vars:
                cons += parse_constraints(c)
        for c in e.iss:
            cons += parse_constraints(c)
        for _, proj, _ in e.accesses:
            for rank, a in proj:
                size = e.rank_sizes.get(rank, wl_rs.get(rank))
                if size is not None:
                    cons.append((a, ">="))
                    d = dict(a); d[""] = d.get("", 0) - int(size)
                    cons.append((d, "<"))
        hull = box_hull(e.vars, cons)
        e.extent = {v: hull[v][1] - hull[v][0] + 1 for v in e.vars}
    return einsums


# ---------------------------------------------------------------- mapping
def tag(n):
    return n.get("__tag__") if isinstance(n, dict) else None


def children(n):
    return n.get("nodes", []) or []


def continuation(nested):
    for c in children(nested):
        if tag(c) in BODY:
            return c
    return None


def loops_of(nested):
    return [c for c in children(nested) if tag(c) in LOOPS]


def branches(split):
    return [c for c in children(split) if tag(c) in BODY]


class Model:
    def __init__(self, spec):
        self.einsums = load_workload(spec["workload"])
        self.by_name = {e.name: e for e in self.einsums}
        self.spec = spec
        self.root = {"__tag__": "Nested", "nodes": spec["mapping"]["nodes"]}
        self._dur = {}
        self.leaves = []
        self.levels = []
        self._collect(self.root)
        self._run()

    # structure
    def _collect(self, n):
        t = tag(n)
        if t == "Compute":
            if n["einsum"] not in self.by_name:
                raise SpecError(f"unknown einsum {n['einsum']}")
            self.leaves.append(n)
        elif t == "Storage":
            comp = n.get("component")
            if comp and comp not in self.levels:
                self.levels.append(comp)
        for c in children(n):
            self._collect(c)

    def first_leaf(self, n):
        t = tag(n)
        if t == "Compute":
            return n
        if t == "Nested":
            c = continuation(n)
            return self.first_leaf(c) if c is not None else None
        if t in SPLITS:
            for b in branches(n):
                f = self.first_leaf(b)
                if f is not None:
                    return f
        return None

    def loop_n(self, nested, loop, ctx):
        var = loop["rank_variable"]
        s = int(loop["tile_shape"])
        i = int(loop.get("initial_tile_shape", s) or s)
        if var in ctx:
            P = max(ctx[var])
        else:
            leaf = self.first_leaf(nested)
            e = self.by_name[leaf["einsum"]]
            if var not in e.extent:
                raise SpecError(f"loop over {var} not in {e.name}")
            P = e.extent[var]
        n = 1 if P <= i else 1 + -(-(P - i) // s)
        return n, P, i, s

    def duration(self, n, ctx):
        key = (id(n), tuple(sorted(ctx.items())))
        if key in self._dur:
            return self._dur[key]
        t = tag(n)
        if t == "Compute":
            d = 1
        elif t == "Nested":
            d = self.dur_nested(n, 0, ctx)
        elif t == "Sequential":
            d = sum(self.duration(b, ctx) for b in branches(n))
        elif t in ("Pipeline", "Parallel"):
            d = max([self.duration(b, ctx) for b in branches(n)] or [0])
        else:
            d = 0
        self._dur[key] = d
        return d

    def dur_nested(self, nested, k, ctx):
        loops = loops_of(nested)
        if k == len(loops):
            c = continuation(nested)
            return self.duration(c, ctx) if c is not None else 0
        loop = loops[k]
        n, P, i, s = self.loop_n(nested, loop, ctx)
        ctx2 = dict(ctx); ctx2[loop["rank_variable"]] = (i, s)
        inner = self.dur_nested(nested, k + 1, ctx2)
        return inner * (n if tag(loop) == "Temporal" else 1)

    # execution
    def _run(self):
        self.compute = [dict() for _ in self.leaves]  # leaf -> {t: set(points)}
        self.windows = {}  # level -> tensor -> set((s, e))
        self.node_windows = {}  # id(Storage node) -> [(s, e)], one per window, in walk order
        self.leaf_index = {id(l): k for k, l in enumerate(self.leaves)}
        self.n_timesteps = self.duration(self.root, {})
        self.walk(self.root, 0, {}, [dict()])

    def window(self, storage, s, e):
        comp = storage.get("component")
        if not comp:
            return
        self.node_windows.setdefault(id(storage), []).append((s, e))
        for t in storage.get("tensors", []) or []:
            self.windows.setdefault(comp, {}).setdefault(str(t), set()).add((s, e))

    def walk(self, n, t, ctx, alts):
        tg = tag(n)
        if tg == "Compute":
            e = self.by_name[n["einsum"]]
            pts = set()
            for alt in alts:
                ranges = []
                for v in e.vars:
                    ext = e.extent[v]
                    if v in alt:
                        lo, hi = alt[v]
                        ranges.append(range(max(lo, 0), min(hi, ext)))
                    else:
                        ranges.append(range(ext))
                pts.update(itertools.product(*ranges))
            if pts:
                d = self.compute[self.leaf_index[id(n)]]
                d.setdefault(t, set()).update(pts)
        elif tg == "Nested":
            self.walk_nested(n, 0, t, ctx, alts)
        elif tg in SPLITS:
            d = self.duration(n, ctx)
            for c in children(n):
                if tag(c) == "Storage":
                    self.window(c, t, t + d)
            tb = t
            for b in branches(n):
                self.walk(b, tb, ctx, alts)
                if tg == "Sequential":
                    tb += self.duration(b, ctx)

    def walk_nested(self, nested, k, t, ctx, alts):
        kids = children(nested)
        loops = loops_of(nested)
        # storages with exactly k loops before them
        nloops = 0
        for c in kids:
            if tag(c) in LOOPS:
                nloops += 1
            elif tag(c) == "Storage" and nloops == k:
                self.window(c, t, t + self.dur_nested(nested, k, ctx))
        if k == len(loops):
            c = continuation(nested)
            if c is not None:
                self.walk(c, t, ctx, alts)
            return
        loop = loops[k]
        var = loop["rank_variable"]
        n, P, i, s = self.loop_n(nested, loop, ctx)
        ctx2 = dict(ctx); ctx2[var] = (i, s)
        inner = self.dur_nested(nested, k + 1, ctx2)

        def tile(alt, j):
            o, enc_hi = alt.get(var, (0, INF))
            a = 0 if j == 0 else i + (j - 1) * s
            b = i if j == 0 else i + j * s
            new = dict(alt)
            new[var] = (o + a, min(o + b, o + P if OPTIONS["CLIP_AT_P"] else INF, enc_hi))
            return new

        if tag(loop) == "Spatial":
            self.walk_nested(nested, k + 1, t, ctx2, [tile(a, j) for a in alts for j in range(n)])
        else:
            for j in range(n):
                self.walk_nested(nested, k + 1, t + j * inner, ctx2, [tile(a, j) for a in alts])

    # results
    def raw_accesses(self):
        """[(t, leaf_idx, tensor, is_output, coords)] of the full schedule."""
        out = []
        for li, leaf in enumerate(self.leaves):
            e = self.by_name[leaf["einsum"]]
            for t, pts in self.compute[li].items():
                for tensor, proj, is_out in e.accesses:
                    seen = set()
                    for p in pts:
                        env = dict(zip(e.vars, p))
                        seen.add(tuple(aff_eval(a, env) for _, a in proj))
                    for c in seen:
                        out.append((t, li, tensor, is_out, c))
        return out

    def shapes(self):
        if hasattr(self, "_shapes"):
            return self._shapes
        ranks, nominal = {}, {}
        for e in self.einsums:
            for tensor, proj, _ in e.accesses:
                ranks.setdefault(tensor, [r for r, _ in proj])
        for tensor in ranks:
            writers = [e for e in self.einsums for (tn, _, o) in e.accesses if tn == tensor and o]
            users = writers or [e for e in self.einsums for (tn, _, o) in e.accesses if tn == tensor]
            box = None
            for e in users:
                for tn, proj, o in e.accesses:
                    if tn != tensor or (writers and not o):
                        continue
                    b = []
                    for _, a in proj:
                        lo = hi = a.get("", 0)
                        for v, c in a.items():
                            if v == "":
                                continue
                            x, y = c * 0, c * (e.extent[v] - 1)
                            lo += min(x, y); hi += max(x, y)
                        b.append((lo, hi))
                    box = b if box is None else [(max(p[0], q[0]), min(p[1], q[1])) for p, q in zip(box, b)]
            nominal[tensor] = [hi + 1 for lo, hi in box]
        maxc = {}
        for t, li, tensor, o, c in self.raw_accesses():
            m = maxc.setdefault(tensor, [-1] * len(c))
            for k, x in enumerate(c):
                if x > m[k]:
                    m[k] = x
        shapes = {}
        for tensor in ranks:
            shapes[tensor] = [max(a, b + 1) for a, b in zip(nominal[tensor], maxc.get(tensor, [-1] * len(nominal[tensor])))]
        self._shapes, self._ranks = shapes, ranks
        return shapes

    def _filters(self, max_timesteps, tensors, einsums):
        N = self.n_timesteps if max_timesteps is None else min(int(max_timesteps), self.n_timesteps)
        tset = None if tensors is None else set(tensors)
        eset = None if einsums is None else set(einsums)
        return N, tset, eset

    def traces_list(self, tset, eset):
        out = []
        for li, leaf in enumerate(self.leaves):
            e = self.by_name[leaf["einsum"]]
            if eset is not None and e.name not in eset:
                continue
            for tensor, proj, o in e.accesses:
                if tset is not None and tensor not in tset:
                    continue
                out.append((li, e.name, tensor, o))
        return out

    def accesses(self, max_timesteps=None, tensors=None, einsums=None):
        N, tset, eset = self._filters(max_timesteps, tensors, einsums)
        shapes = self.shapes()
        keep = {(li, tn) for li, _, tn, _ in self.traces_list(tset, eset)}
        out = []
        for t, li, tensor, o, c in self.raw_accesses():
            if t < N and (li, tensor) in keep:
                el = 0
                for x, s in zip(c, shapes[tensor]):
                    el = el * s + x
                out.append({"t": t, "einsum": self.leaves[li]["einsum"], "tensor": tensor,
                            "write": o, "element": el, "coords": list(c)})
        out.sort(key=lambda a: a["t"])
        return out

    def summary(self, max_timesteps=None, tensors=None, einsums=None):
        N, tset, eset = self._filters(max_timesteps, tensors, einsums)
        shapes = self.shapes()
        traces = self.traces_list(tset, eset)
        counts = {}
        for a in self.accesses(max_timesteps, tensors, einsums):
            counts[(a["einsum"], a["tensor"])] = counts.get((a["einsum"], a["tensor"]), 0) + 1
        tensor_order = []
        for _, _, tn, _ in traces:
            if tn not in tensor_order:
                tensor_order.append(tn)
        spans = []
        for li, leaf in enumerate(self.leaves):
            name = leaf["einsum"]
            if eset is not None and name not in eset:
                continue
            ts = [t for t in self.compute[li] if t < N]
            if ts:
                spans.append((min(ts), max(ts) + 1, li, name))
        spans.sort(key=lambda x: (x[0], x[1], x[2]))
        windows = {}
        for lvl in self.levels:
            d = {}
            for tn, ws in self.windows.get(lvl, {}).items():
                if tset is not None and tn not in tset:
                    continue
                d[tn] = [list(w) for w in sorted({(s, min(e, N)) for s, e in ws if s < N})]
            # A tensor filter drops a level none of whose tensors pass it; a prefix does not.
            if tset is None or d:
                windows[lvl] = d
        return {
            "n_timesteps": N,
            "truncated": N < self.n_timesteps,
            "tensors": tensor_order,
            "einsums": [s[3] for s in spans],
            "memory_levels": list(windows),
            "tensor_shapes": {tn: shapes[tn] for tn in tensor_order},
            "tensor_ranks": {tn: self._ranks[tn] for tn in tensor_order},
            "einsum_timespans": {s[3]: [s[0], s[1]] for s in spans},
            "tile_windows": windows,
            "traces": [{"einsum": en, "tensor": tn, "is_output": o, "n_accesses": counts.get((en, tn), 0)}
                       for _, en, tn, o in traces],
        }


    # ---------------------------------------------------------------- data movement
    def storage_nodes(self):
        """(nodes, chains): the Storage nodes with a component, in the order they are met
        (a Nested's own Storage children before its continuation, a split's in listed
        order between its branches), and per leaf index the nodes above it, outermost
        first (a split's Storage children above every one of its branches)."""
        if hasattr(self, "_storage_nodes"):
            return self._storage_nodes, self._chains
        nodes, chains = [], {}

        def visit(n, chain):
            t = tag(n)
            if t == "Compute":
                chains[self.leaf_index[id(n)]] = list(chain)
            elif t == "Nested":
                chain = list(chain)
                for c in children(n):
                    if tag(c) == "Storage" and c.get("component"):
                        nodes.append(c)
                        chain.append(len(nodes) - 1)
                c = continuation(n)
                if c is not None:
                    visit(c, chain)
            elif t in SPLITS:
                spanning, below = [], []
                for c in children(n):
                    if tag(c) == "Storage" and c.get("component"):
                        nodes.append(c)
                        spanning.append(len(nodes) - 1)
                    if tag(c) in BODY:
                        before = set(chains)
                        visit(c, chain)
                        below += [l for l in chains if l not in before]
                for l in below:
                    chains[l][len(chain):len(chain)] = spanning

        visit(self.root, [])
        self._storage_nodes, self._chains = nodes, chains
        return nodes, chains

    def parent(self, k, tensor):
        """The nearest Storage node above node k holding tensor (an index), or -1: home."""
        nodes, chains = self.storage_nodes()
        for li in sorted(chains):
            ch = chains[li]
            if k in ch:
                for p in reversed(ch[:ch.index(k)]):
                    if tensor in [str(x) for x in nodes[p].get("tensors", []) or []]:
                        return p
                return -1
        return -1

    def bytes_per_value(self, tensor):
        """bits_per_value rounded up to whole bytes (None when the workload gives none):
        a tensor access's own value wins, then the workload's dict by name, by 'A | B',
        then 'All', or the workload's single number."""
        wl = self.spec["workload"]
        bits = None
        for e in wl.get("einsums", []):
            if isinstance(e, dict):
                for a in e.get("tensor_accesses", []) or []:
                    if a.get("name") == tensor and a.get("bits_per_value") is not None:
                        bits = a["bits_per_value"]
        if bits is None:
            b = wl.get("bits_per_value")
            if isinstance(b, dict):
                named = [v for k, v in b.items() if tensor in [x.strip() for x in str(k).split("|")]]
                bits = b[tensor] if tensor in b else named[0] if named else b.get("All")
            else:
                bits = b
        return None if bits is None else -(-int(bits) // 8)

    def window_tiles(self, frm, to, tensors=None, einsums=None):
        """[(node index, tensor, [(start, end, tile, filled, drained)])] per (node, tensor)
        with the tensor traced: each window cut to [frm, to) (dropped if nothing is left);
        tile/filled/drained are sets of coords, from the accesses in the window of the
        leaves below the node (reads before writes within a timestep)."""
        tset = None if tensors is None else set(tensors)
        eset = None if einsums is None else set(einsums)
        nodes, chains = self.storage_nodes()
        by = {}  # (leaf, tensor) -> [(t, is_output, coords)]
        for t, li, tensor, o, c in self.raw_accesses():
            if frm <= t < to and (eset is None or self.leaves[li]["einsum"] in eset):
                by.setdefault((li, tensor), []).append((t, o, c))
        out = []
        for k, node in enumerate(nodes):
            below = [li for li, ch in chains.items() if k in ch]
            windows = sorted((max(s, frm), min(e, to)) for s, e in self.node_windows.get(id(node), [])
                             if max(s, frm) < min(e, to))
            for x in [str(x) for x in node.get("tensors", []) or []]:
                if tset is not None and x not in tset:
                    continue
                acc = sorted(a for li in below for a in by.get((li, x), []))  # False (read) first
                times = [a[0] for a in acc]
                per = []
                for s, e in windows:
                    first_read, written = {}, set()
                    for t, o, c in acc[bisect.bisect_left(times, s):bisect.bisect_left(times, e)]:
                        first_read.setdefault(c, not o)
                        if o:
                            written.add(c)
                    per.append((s, e, set(first_read), {c for c, r in first_read.items() if r}, written))
                out.append((k, x, per))
        return out

    @staticmethod
    def _peak(spans, frm, to):
        """(largest sum, first timestep) over the timesteps some span covers; (0, -1) if none."""
        if not spans:
            return 0, -1
        size = [0] * (to - frm + 1)
        cover = [0] * (to - frm + 1)
        for s, e, v in spans:
            size[s - frm] += v; size[e - frm] -= v
            cover[s - frm] += 1; cover[e - frm] -= 1
        best, at, cur, cov = 0, -1, 0, 0
        for t in range(frm, to):
            cur += size[t - frm]; cov += cover[t - frm]
            if cov > 0 and (at < 0 or cur > best):
                best, at = cur, t
        return best, at

    def read_backs(self, k, x, per):
        """--partial-sums (README "Data movement"): per window of node k for tensor x, the
        elements it writes first (written, first access not a read) that an earlier window
        of the node drained; none at the tensor's home. `per` as window_tiles gives it."""
        out, drained_before = [], set()
        for _s, _e, _tile, filled, drained in per:
            home = self.parent(k, x) < 0
            out.append(set() if home else {c for c in drained if c not in filled and c in drained_before})
            drained_before |= drained
        return out

    def movement(self, frm=0, to=None, tensors=None, einsums=None, with_bytes=True, partial_sums=False):
        """Like `looptrace movement` JSON over the traced window [frm, to) (with
        `--partial-sums` when partial_sums)."""
        n = self.n_timesteps
        to = n if to is None else min(to, n)
        frm = min(frm, to)
        nodes, _ = self.storage_nodes()
        levels = {}
        for k, x, per in self.window_tiles(frm, to, tensors, einsums):
            lvl = levels.setdefault(nodes[k]["component"], {"tensors": {}, "spans": []})
            m = lvl["tensors"].setdefault(x, {"tensor": x, "home": False, "windows": 0, "max_tile": 0,
                                              "fills": 0, "drains": 0})
            m["home"] = m["home"] or self.parent(k, x) < 0
            back = self.read_backs(k, x, per) if partial_sums else [set()] * len(per)
            for (s, e, tile, filled, drained), more in zip(per, back):
                m["windows"] += 1
                m["max_tile"] = max(m["max_tile"], len(tile))
                m["fills"] += len(filled) + len(more)
                m["drains"] += len(drained)
                lvl["spans"].append((s, e, x, len(tile)))
        out = []
        for name in self.levels:
            if name not in levels:
                continue
            lvl = levels[name]
            value, at = self._peak([(s, e, v) for s, e, _, v in lvl["spans"]], frm, to)
            entry = {"level": name, "peak_footprint": {"elements": value, "timestep": at}}
            bpv = {x: self.bytes_per_value(x) for x in lvl["tensors"]} if with_bytes else {}
            if with_bytes and all(b is not None for b in bpv.values()):
                value, at = self._peak([(s, e, v * bpv[x]) for s, e, x, v in lvl["spans"]], frm, to)
                entry["peak_footprint_bytes"] = {"bytes": value, "timestep": at}
            for x, m in lvl["tensors"].items():
                if bpv.get(x) is not None:
                    b = bpv[x]
                    m.update(bytes_per_value=b, max_tile_bytes=m["max_tile"] * b,
                             fill_bytes=m["fills"] * b, drain_bytes=m["drains"] * b)
            entry["tensors"] = list(lvl["tensors"].values())
            out.append(entry)
        return {"n_timesteps": to, "from": frm, "truncated": frm > 0 or to < n, "levels": out}

    def layout_addresses(self, order, align, with_bytes, layout, level):
        """{tensor: {coordinates: address}} as SEMANTICS "Layouts" says, by brute force:
        every point of the padded, blocked space is visited in address order and numbered
        (no strides). `layout`: {"align": A, "tensors": {X: spec}, "levels": {L: {X: spec}}}
        with spec keys order, block, block_order, pad, base, align."""
        shapes = self.shapes()
        ranks = self._ranks
        layout = layout or {}
        file_align = layout.get("align", align)
        out, nxt = {}, 0
        for x in order:
            size = max(1, (self.bytes_per_value(x) if with_bytes else None) or 1)
            spec = layout.get("levels", {}).get(level, {}).get(x, layout.get("tensors", {}).get(x))
            rk = ranks[x]
            spec = spec or {}
            a = spec.get("align", file_align if spec or layout else align)
            blk = {r: spec.get("block", {}).get(r, 1) for r in rk}
            padded = {}
            for r, d in zip(rk, shapes[x]):
                pd = spec.get("pad", {}).get(r, 1)
                d = -(-d // pd) * pd
                padded[r] = -(-d // blk[r]) * blk[r]
            order_r = spec.get("order", rk)
            inner_r = spec.get("block_order", order_r)
            digits = [(r, False, padded[r] // blk[r]) for r in order_r] + [(r, True, blk[r]) for r in inner_r]
            base = spec["base"] if "base" in spec else -(-nxt // a) * a
            table, n = {}, 0
            for point in itertools.product(*[range(e) for _, _, e in digits]):
                c = {r: 0 for r in rk}
                for (r, inner, _), v in zip(digits, point):
                    c[r] += v if inner else v * blk[r]
                coords = tuple(c[r] for r in rk)
                if all(v < d for v, d in zip(coords, shapes[x])):
                    table[coords] = base + n * size
                n += 1
            out[x] = (table, size)
            nxt = base + n * size
        return out

    def transfers(self, level, line_bytes=64, align=4096, max_timesteps=None, frm=None, to=None,
                  shard=None, tensors=None, einsums=None, with_bytes=True, layout=None, partial_sums=False):
        """Like `looptrace transfers --format jsonl`, as dicts. The trace is the prefix
        [0, N) (child windows cut at N only); --from/--to/--shard keep its requests whose
        t lies in the selected part, plus those at N when a non-empty part ends there (an
        empty part keeps nothing, so that shards still concatenate to the whole)."""
        n = self.n_timesteps
        N = n if max_timesteps is None else min(int(max_timesteps), n)
        a, b = (frm or 0), (N if to is None else min(to, N))
        a = min(a, b)
        if shard:
            i, k = shard
            length = b - a
            a, b = a + length * i // k, a + length * (i + 1) // k
        order = self.summary(tensors=tensors, einsums=einsums)["tensors"]
        where = self.layout_addresses(order, align, with_bytes, layout, level)

        def lines(x, elements):
            out = set()
            table, size = where.get(x, ({}, 1))  # a tensor filtered out moves nothing
            for c in elements:
                addr = table[tuple(c)]
                out.update(range(addr // line_bytes, (addr + size - 1) // line_bytes + 1))
            return sorted(out)

        nodes, _ = self.storage_nodes()
        reqs = []
        for k, x, per in self.window_tiles(0, N, tensors, einsums):
            p = self.parent(k, x)
            if p < 0 or nodes[p]["component"] != level:
                continue
            child = nodes[k]["component"]
            back = self.read_backs(k, x, per) if partial_sums else [set()] * len(per)
            for (s, e, _tile, filled, drained), more in zip(per, back):
                for ln in lines(x, drained):
                    reqs.append((e, 0, ln * line_bytes, child, x))
                for ln in lines(x, filled | more):
                    reqs.append((s, 1, ln * line_bytes, child, x))
        reqs.sort()
        return [{"t": t, "op": "read" if op else "write", "address": addr, "level": level, "child": child,
                 "tensor": x}
                for t, op, addr, child, x in reqs if a <= t < b or (t == b == N and a < b)]


# ---------------------------------------------------------------- YAML loading (optional)
def load_files(paths, defines=None):
    """Parse YAML/Jinja spec files (needs PyYAML + jinja2; only for self-checks)."""
    import yaml
    import jinja2

    class Loader(yaml.SafeLoader):
        pass

    def multi(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            d = loader.construct_mapping(node, deep=True)
        else:
            d = {}
        d = dict(d)
        d["__tag__"] = suffix
        return d

    Loader.add_multi_constructor("!", lambda l, s, n: multi(l, s, n))
    spec = {}
    env = jinja2.Environment()
    for p in paths:
        text = open(p).read()
        text = env.from_string(text).render(**(defines or {}))
        d = yaml.load(text, Loader=Loader) or {}
        for k, v in d.items():
            spec[k] = v
    return spec


def _selfcheck(corpus):
    """Compare the model with the conformance corpus's expected files."""
    import hashlib
    import os
    cases = json.load(open(os.path.join(corpus, "cases.json")))
    bad = 0
    for case in cases:
        spec = load_files([os.path.join(corpus, "specs", f) for f in case["files"]],
                          {k: v for k, v in case.get("defines", {}).items()})
        m = Model(spec)
        kw = dict(max_timesteps=case.get("max_timesteps"), tensors=case.get("tensors"),
                  einsums=case.get("einsums"))
        s = m.summary(**kw)
        exp = json.load(open(os.path.join(corpus, "expected", case["id"] + ".json")))
        errs = []
        for key in ("n_timesteps", "truncated", "tensors", "einsums", "memory_levels",
                    "tensor_ranks", "tensor_shapes"):
            if s[key] != exp[key]:
                errs.append(f"{key}: {s[key]} vs {exp[key]}")
        if [[k, *v] for k, v in s["einsum_timespans"].items()] != exp["einsum_timespans"]:
            errs.append(f"spans {s['einsum_timespans']} vs {exp['einsum_timespans']}")
        if s["tile_windows"] != exp["tile_windows"]:
            errs.append(f"windows {s['tile_windows']} vs {exp['tile_windows']}")
        key = lambda t: (t["einsum"], t["tensor"], t["is_output"], t["n_accesses"])
        if [key(t) for t in s["traces"]] != [key(t) for t in exp["traces"]]:
            errs.append(f"traces {[key(t) for t in s['traces']]} vs {[key(t) for t in exp['traces']]}")
        rows = {}
        for a in m.accesses(**kw):
            rows.setdefault((a["einsum"], a["tensor"]), []).append((a["t"], *a["coords"]))
        for t in exp["traces"]:
            got = sorted(rows.get((t["einsum"], t["tensor"]), []))
            h = hashlib.sha256()
            for r in got:
                h.update((",".join(map(str, r)) + "\n").encode())
            if h.hexdigest() != t["digest"]:
                errs.append(f"rows of {t['einsum']}/{t['tensor']} differ")
        print(("PASS " if not errs else "FAIL ") + case["id"] + ("" if not errs else ": " + "; ".join(errs)[:1500]))
        bad += bool(errs)
    print(f"{len(cases) - bad} passed, {bad} failed")
    return bad


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--selfcheck":
        sys.exit(1 if _selfcheck(sys.argv[2] if len(sys.argv) > 2 else "/work/shared/conformance") else 0)
    # model.py FILE... [--max-timesteps N] [--tensors A,B] [--einsums X,Y] [--trace] [-D K=V]
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("-D", action="append", default=[])
    ap.add_argument("--max-timesteps", type=int)
    ap.add_argument("--tensors")
    ap.add_argument("--einsums")
    ap.add_argument("--trace", action="store_true")
    a = ap.parse_args()
    defs = {}
    for kv in a.D:
        k, v = kv.split("=", 1)
        defs[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    m = Model(load_files(a.files, defs))
    kw = dict(max_timesteps=a.max_timesteps, tensors=a.tensors.split(",") if a.tensors else None,
              einsums=a.einsums.split(",") if a.einsums else None)
    if a.trace:
        for x in m.accesses(**kw):
            print(json.dumps(x))
    else:
        print(json.dumps(m.summary(**kw)))

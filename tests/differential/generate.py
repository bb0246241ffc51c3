#!/usr/bin/env python3
"""Random looptrace specs: chains of 1-4 Einsums and random LoopTrees over them.

    gen = generate(random.Random(seed))  -> {"spec": dict, "files": {name: yaml_text}}

`spec` is what a YAML loader gives for the files (tagged nodes are dicts with
"__tag__"), so the model never parses the YAML we write.  Standard library only.

usage: generate.py --seed N [--out DIR]   (writes the files, prints their paths)
"""
import argparse
import os
import random
import re

COMPONENTS = ["DRAM", "GlobalBuffer", "Register"]
# knobs run.py may change (e.g. to isolate one bug class)
OPTIONS = {"spatial": 0.2, "spatial_reuse": True,
           # rarer workload features: strided / offset projections, lower bounds other
           # than 0, per-Einsum extents of a shared variable, rank sizes that cut a box
           "exotic": 0.12,
           # a !Spatial loop tiled again by a !Temporal loop over its variable, a Storage
           # node inside (a strided tile per window); a conv read at stride 2 (None: exotic)
           "retile": 0.0, "strided": None}


# ---------------------------------------------------------------- workload
def gen_workload(rng):
    n = rng.choice([1, 2, 2, 3, 3, 4])
    two_d = rng.random() < 0.55
    ext = {}  # var -> extent
    einsums = []  # dict(name, acc=[(tensor, [(rank, expr, plain_var_or_None)], out)], vars, style)
    if two_d:
        ext["m"] = rng.randint(1, 5)
        cur = ("T0", [("M", "m"), ("N0", "n0")])
    else:
        cur = ("T0", [("N0", "n0")])
    ext["n0"] = rng.randint(2, 7)
    for k in range(n):
        tin, tranks = cur
        kind = rng.choice(["mm", "mm", "conv"])
        out_t = f"T{k + 1}"
        lead = [(r, v, v) for r, v in tranks[:-1]]  # shared leading ranks (m)
        last_rank, last_var = tranks[-1]
        if kind == "mm":
            nv = f"n{k + 1}"
            ext[nv] = rng.randint(2, 7)
            acc = [(tin, lead + [(last_rank, last_var, last_var)], False),
                   (f"W{k}", [(last_rank, last_var, last_var), (nv.upper(), nv, nv)], False),
                   (out_t, lead + [(nv.upper(), nv, nv)], True)]
            cur = (out_t, [(r, v) for r, v, _ in lead] + [(nv.upper(), nv)])
            if rng.random() < OPTIONS["exotic"]:  # offset read: a halo past the producer's box
                acc[0] = (tin, lead + [(last_rank, f"{last_var} + {rng.randint(1, 2)}", None)], False)
        else:
            p, r = f"p{k + 1}", f"r{k + 1}"
            e_in = ext[last_var]
            ext[r] = rng.randint(1, min(3, e_in))
            ext[p] = e_in - ext[r] + 1 if rng.random() < 0.6 else e_in  # valid or halo
            coef = ""
            expr = f"{p} + {r}"
            strided = OPTIONS["exotic"] if OPTIONS["strided"] is None else OPTIONS["strided"]
            if rng.random() < strided:  # strided
                ext[p] = max(1, (e_in - ext[r]) // 2 + 1)
                expr = f"2*{p} + {r}"
            acc = [(tin, lead + [(last_rank, expr, None)], False),
                   (f"W{k}", [(r.upper(), r, r)], False),
                   (out_t, lead + [(p.upper(), p, p)], True)]
            if rng.random() < 0.3:  # weights with an extra output-channel-like rank
                acc[1] = (f"W{k}", [(r.upper(), r, r), (p.upper(), p, p)], False)
            cur = (out_t, [(rr, v) for rr, v, _ in lead] + [(p.upper(), p)])
        if rng.random() < 0.3:  # output first in the list sometimes (verbose only)
            order = "outfirst"
        else:
            order = "normal"
        vars_ = []
        for _, proj, _ in acc:
            for _, e, _ in proj:
                for v in re.findall(r"[a-z]\w*", e):
                    if v not in vars_:
                        vars_.append(v)
        einsums.append({"acc": acc, "vars": vars_, "order": order, "out": out_t, "extra_rs": {}})
        if kind == "conv" and rng.random() < OPTIONS["exotic"]:  # a rank size that cuts the box
            einsums[-1]["extra_rs"][last_rank] = rng.randint(1, ext[last_var])

    # how each variable gets its extent
    wl_iss, wl_rs = {}, {}
    e_iss = [[] for _ in einsums]
    e_rs = [{} for _ in einsums]
    for v, e in ext.items():
        users = [i for i, es in enumerate(einsums) if v in es["vars"]]
        # ranks where v is the plain projection, in all its users
        plain_ok = all(any(pv == v and r == v.upper() for _, proj, _ in einsums[i]["acc"] for r, _, pv in proj)
                       for i in users)
        # a workload-level rank size applies to every access with that rank: only safe
        # when every such access is v itself or a conv read with a small enough kernel
        choice = rng.choice(["wl_iss", "wl_iss", "e_iss", "wl_rs", "e_rs"])
        if choice in ("wl_rs", "e_rs") and not plain_ok:
            choice = "wl_iss"
        lo = rng.randint(1, 3) if rng.random() < OPTIONS["exotic"] / 2 else 0
        if choice == "wl_iss":
            wl_iss[v] = (f"{lo} <= {v} < {e + lo}" if rng.random() < 0.8
                         else f"{v} >= {lo} and {v} <= {e - 1 + lo}")
        elif choice == "wl_rs":
            wl_rs[v.upper()] = e
        else:
            vary = len(users) > 1 and rng.random() < OPTIONS["exotic"] * 2
            for i in users:
                if vary:  # the same variable with different extents in different Einsums
                    e = max(1, ext[v] + rng.choice([-2, -1, 1, 2]))
                if choice == "e_iss":
                    e_iss[i].append(f"{lo} <= {v} < {e + lo}" if rng.random() < 0.7 else f"{e + lo} > {v} >= {lo}")
                else:
                    e_rs[i][v.upper()] = e
    names = []
    entries = []
    for i, es in enumerate(einsums):
        for r, k in es["extra_rs"].items():
            e_rs[i][r] = k
        concise_ok = not e_iss[i] and not e_rs[i]
        style = rng.choice(["verbose", "verbose", "concise", "concise_map"])
        if style == "concise" and not concise_ok:
            style = "concise_map"
        acc = es["acc"]
        if style == "verbose":
            name = rng.choice([f"E{i}", f"Layer{i}", es["out"] + "op"])
            tas = []
            order = list(acc)
            if es["order"] == "outfirst":
                order = [acc[-1]] + acc[:-1]
            for tn, proj, out in order:
                if all(pv is not None and r == pv.upper() for r, _, pv in proj) and rng.random() < 0.7:
                    pj = [pv for _, _, pv in proj]
                else:
                    pj = {r: e for r, e, _ in proj}
                d = {"name": tn, "projection": pj}
                if out:
                    d["output"] = True
                elif rng.random() < 0.2:
                    d["output"] = False
                tas.append(d)
            ent = {"name": name, "tensor_accesses": tas}
            es["acc_order"] = order
        else:
            def one(tn, proj):
                items = []
                for r, e, pv in proj:
                    if pv is not None and r == pv.upper():
                        items.append(pv)
                    else:
                        items.append(f"{r}: {e}")
                return f"{tn}[{', '.join(items)}]"
            ins = [one(tn, proj) for tn, proj, out in acc if not out]
            outs = [one(tn, proj) for tn, proj, out in acc if out]
            s = f"{outs[0]} = {' * '.join(ins)}"
            if rng.random() < 0.3:
                s = s.replace(" * ", "*")
            name = es["out"]
            es["acc_order"] = [a for a in acc if not a[2]] + [a for a in acc if a[2]]
            ent = s if style == "concise" else {"einsum": s}
        if not isinstance(ent, str):
            if e_iss[i]:
                ent["iteration_space_shape"] = e_iss[i]
            if e_rs[i]:
                ent["rank_sizes"] = e_rs[i]
            if rng.random() < 0.1:
                ent["is_copy_operation"] = False
        es["name"] = name
        names.append(name)
        entries.append(ent)
    wl = {}
    if wl_iss:
        wl["iteration_space_shape"] = wl_iss
    if wl_rs:
        wl["rank_sizes"] = wl_rs
    if rng.random() < 0.3:
        wl["bits_per_value"] = {"All": 8}
    wl["einsums"] = entries
    return wl, einsums, ext


# ---------------------------------------------------------------- mapping
def tensors_of(einsums, group):
    out = []
    for i in group:
        for tn, _, _ in einsums[i]["acc"]:
            if tn not in out:
                out.append(tn)
    return out


def gen_mapping(rng, einsums, ext):
    n = len(einsums)

    def tile_for(P):
        r = rng.random()
        if r < 0.45:
            return 1
        if r < 0.9:
            return rng.randint(1, max(1, P))
        return P + rng.randint(0, 2)

    def storage(group, k=None):
        ts = tensors_of(einsums, group)
        k = k or rng.randint(1, min(3, len(ts)))
        d = {"__tag__": "Storage", "component": rng.choice(COMPONENTS), "tensors": rng.sample(ts, k)}
        if rng.random() < 0.03:
            del d["component"]
        return d

    def nested_nodes(group, ctx, depth, max_loops):
        first = einsums[group[0]]
        nodes = []
        if rng.random() < 0.5:
            nodes.append(storage(group))
        nl = rng.randint(0, max_loops)
        ctx = dict(ctx)
        for _ in range(nl):
            spatial_vars = ctx.get("__spatial__", frozenset())
            choices = [v for v in first["vars"] if OPTIONS["spatial_reuse"] or v not in spatial_vars]
            if not choices:
                break
            v = rng.choice(choices)
            if v in ctx:
                P = max(ctx[v])
            else:
                P = ext[v]
            s = tile_for(P)
            node = {"__tag__": "Spatial" if rng.random() < OPTIONS["spatial"] else "Temporal", "rank_variable": v,
                    "tile_shape": s}
            i = s
            if rng.random() < 0.25:
                i = rng.randint(1, P + 1)
                node["initial_tile_shape"] = i
            if node["__tag__"] == "Spatial":
                node["name"] = rng.choice(["X", "Y"])
                node["component"] = "PE"
            ctx[v] = (i, s)
            if node["__tag__"] == "Spatial":
                ctx["__spatial__"] = spatial_vars | {v}
            nodes.append(node)
            if node["__tag__"] == "Spatial" and OPTIONS["retile"] and rng.random() < OPTIONS["retile"]:
                s2 = rng.randint(1, max(1, s))  # each instance walks its own chunk in time
                nodes.append({"__tag__": "Temporal", "rank_variable": v, "tile_shape": s2})
                ctx[v] = (s2, s2)
                nodes.append(storage(group))
                continue
            if rng.random() < 0.35:
                nodes.append(storage(group))
        if len(group) == 1 or depth > 2:
            if len(group) == 1:
                cont = {"__tag__": "Compute", "einsum": einsums[group[0]]["name"], "component": "MAC"}
                if rng.random() < 0.1:
                    cont = {"__tag__": "Nested", "nodes": nested_nodes(group, ctx, depth + 1, 1)}
                nodes.append(cont)
                return nodes
        # a split over contiguous parts of the group
        parts = []
        rest = list(group)
        while rest:
            k = rng.randint(1, len(rest)) if parts or len(rest) == 1 else rng.randint(1, len(rest) - 1)
            parts.append(rest[:k])
            rest = rest[k:]
        kind = rng.choice(["Sequential", "Sequential", "Pipeline", "Parallel"])
        kids = []
        if rng.random() < 0.15:
            kids.append(storage(group))
        for part in parts:
            if len(part) == 1 and rng.random() < 0.2:
                kids.append({"__tag__": "Compute", "einsum": einsums[part[0]]["name"], "component": "MAC"})
            else:
                kids.append({"__tag__": "Nested", "nodes": nested_nodes(part, ctx, depth + 1, 3)})
        nodes.append({"__tag__": kind, "nodes": kids})
        return nodes

    root = []
    alltens = tensors_of(einsums, range(n))
    if rng.random() < 0.85:
        root.append({"__tag__": "Storage", "component": "DRAM", "tensors": alltens})
    root += nested_nodes(list(range(n)), {}, 0, 3)
    return {"nodes": root}


# ---------------------------------------------------------------- YAML text
def _scalar(x, flow):
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, int):
        return str(x)
    s = str(x)
    if re.fullmatch(r"[A-Za-z_][\w]*", s) and s not in ("True", "False", "true", "false", "null", "yes", "no", "on", "off"):
        return s
    if not flow and re.fullmatch(r"[\w <>=+*-]+", s) and not s[0] in "-<>=":
        return s
    if re.fullmatch(r"[\w +*-]+", s) and not s[0] in "-":
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flow(x):
    if isinstance(x, dict):
        items = [(k, v) for k, v in x.items() if k != "__tag__"]
        body = "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in items) + "}"
        return (f"!{x['__tag__']} " + body) if "__tag__" in x else body
    if isinstance(x, list):
        return "[" + ", ".join(_flow(v) for v in x) + "]"
    return _scalar(x, True)


def _block(x, indent, rng):
    """Lines for value x at indentation `indent` (x a dict or list)."""
    pad = " " * indent
    lines = []
    if isinstance(x, list):
        for v in x:
            if isinstance(v, dict) and "__tag__" in v:
                simple = all(not isinstance(w, (dict, list)) or (isinstance(w, list) and all(not isinstance(u, (dict, list)) for u in w))
                             for k, w in v.items())
                if simple and rng.random() < 0.6:
                    lines.append(f"{pad}- {_flow(v)}")
                else:
                    lines.append(f"{pad}- !{v['__tag__']}")
                    lines += _block({k: w for k, w in v.items() if k != "__tag__"}, indent + 2, rng)
            elif isinstance(v, dict):
                if rng.random() < 0.5 or not v:
                    lines.append(f"{pad}- {_flow(v)}")
                else:
                    sub = _block(v, indent + 2, rng)
                    sub[0] = pad + "- " + sub[0][indent + 2:]
                    lines += sub
            elif isinstance(v, list):
                lines.append(f"{pad}- {_flow(v)}")
            else:
                lines.append(f"{pad}- {_scalar(v, False)}")
    else:
        for k, v in x.items():
            if isinstance(v, (dict, list)) and v and (rng.random() < 0.6 or any(isinstance(u, (dict, list)) for u in (v.values() if isinstance(v, dict) else v))):
                lines.append(f"{pad}{k}:")
                lines += _block(v, indent + (0 if isinstance(v, list) else 2), rng)
            elif isinstance(v, (dict, list)):
                lines.append(f"{pad}{k}: {_flow(v)}")
            else:
                lines.append(f"{pad}{k}: {_scalar(v, False)}")
    return lines


def to_yaml(d, rng):
    return "\n".join(_block(d, 0, rng)) + "\n"


def generate(rng):
    wl, einsums, ext = gen_workload(rng)
    mapping = gen_mapping(rng, einsums, ext)
    spec = {"workload": wl, "mapping": mapping}
    if rng.random() < 0.5:
        files = {"spec.yaml": to_yaml(spec, rng)}
    else:
        files = {"workload.yaml": to_yaml({"workload": wl}, rng),
                 "mapping.yaml": to_yaml({"mapping": mapping}, rng)}
    if rng.random() < 0.15:
        files["arch.yaml"] = "arch:\n  nodes:\n  - {name: DRAM, size: 100}\n"
    return {"spec": spec, "files": files, "einsums": einsums}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    g = generate(random.Random(a.seed))
    os.makedirs(a.out, exist_ok=True)
    for name, text in g["files"].items():
        p = os.path.join(a.out, name)
        open(p, "w").write(text)
        print(p)

#!/usr/bin/env python3
"""Differential test of layouts (SEMANTICS "Layouts"): random layouts x random LoopTrees
(generate.py). Per case and level with children, a random layout file (order, block,
block_order, pad, base, align; for every level or this one), then

- `transfers --layout` in closed form == `--method enumerate` byte for byte, and both ==
  the brute-force model (model.py: the padded, blocked space visited point by point in
  address order, no strides), at --line-bytes 1 and a larger line;
- `movement --layout` (with banks on the level): per tensor the fill and drain lines,
  the fewest (ceil(bytes / line) per window, from the model's tiles) and the bank
  cycles (per fill or drain, the most requests one bank gets), recomputed here from
  the model's requests;
- at --line-bytes 1 without byte sizes, every (t, op, child, tensor) group of the trace
  under the layout holds the same elements as the row-major trace, each once: mapped
  back through the model's table, the addresses are a permutation of the same elements'
  (nothing lost, nothing doubled).

usage: layouts.py --looptrace build/src/looptrace [--count 30] [--seed 29] [--only CASESEED]...
                  [--jobs 2] [--keep DIR]
Ends with 'N passed, M failed'."""
import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402
import model  # noqa: E402
import movement  # noqa: E402
import run  # noqa: E402


def random_spec(rng, ranks, shape):
    spec = {}
    if rng.random() < 0.7:
        order = list(ranks)
        rng.shuffle(order)
        spec["order"] = order
    if rng.random() < 0.6:
        spec["block"] = {r: rng.randint(1, max(1, d + 1)) for r, d in zip(ranks, shape) if rng.random() < 0.6}
        if spec["block"] and rng.random() < 0.5:
            inner = list(ranks)
            rng.shuffle(inner)
            spec["block_order"] = inner
    if rng.random() < 0.3:
        spec["pad"] = {r: rng.randint(1, 4) for r in ranks if rng.random() < 0.5}
    if rng.random() < 0.3:
        spec["align"] = rng.choice([1, 2, 16, 256])
    return {k: v for k, v in spec.items() if v != {}}


def random_layout(m, rng, level):
    tensors = m.summary()["tensors"]
    lay = {}
    if rng.random() < 0.4:
        lay["align"] = rng.choice([1, 8, 64, 4096])
    per = {}
    for x in tensors:
        if rng.random() < 0.75:
            per[x] = random_spec(rng, m._ranks[x], m.shapes()[x])
    named = [x for x in per]
    if named and rng.random() < 0.3:  # explicit bases, far apart: no overlap
        for k, x in enumerate(rng.sample(named, rng.randint(1, len(named)))):
            per[x]["base"] = (k + 1) << 24
    if rng.random() < 0.3:
        lay["levels"] = {level: per}
    else:
        lay["tensors"] = per
    return lay


def to_yaml(lay):
    """The file, flow style per tensor (JSON is YAML); bases in hex sometimes."""
    out = ["layout:"]
    if "align" in lay:
        out.append(f"  align: {lay['align']}")

    def tensors(per, indent):
        out.append(" " * indent + "tensors:")
        for x, spec in per.items():
            items = []
            for k, v in spec.items():
                items.append(f"{k}: {hex(v) if k == 'base' else json.dumps(v)}")
            out.append(" " * (indent + 2) + f"{x}: {{{', '.join(items)}}}")
    if "tensors" in lay:
        tensors(lay["tensors"], 2)
    for level, per in lay.get("levels", {}).items():
        out.append("  levels:")
        out.append(f"    {level}:")
        tensors(per, 6)
    return "\n".join(out) + "\n"


def permutation_check(got_rm, got_lay, where_rm, where_lay):
    """Each (t, op, child, tensor) group moves the same elements, each once."""
    back = {x: {a: c for c, a in table.items()} for x, (table, _) in where_lay.items()}
    back_rm = {x: {a: c for c, a in table.items()} for x, (table, _) in where_rm.items()}

    def groups(reqs, inv):
        g = collections.defaultdict(list)
        for r in reqs:
            g[(r["t"], r["op"], r["child"], r["tensor"])].append(inv[r["tensor"]].get(r["address"]))
        return g
    a, b = groups(got_rm, back_rm), groups(got_lay, back)
    errs = []
    for k in sorted(set(a) | set(b), key=str):
        if None in b.get(k, []):
            errs.append(f"{k}: an address no element has")
        elif sorted(a.get(k, [])) != sorted(b.get(k, [])):  # (two nodes of one component may share a group)
            errs.append(f"{k}: {len(b.get(k, []))} elements under the layout, {len(a.get(k, []))} row-major")
        if len(errs) > 2:
            break
    return errs


def model_costs(m, level, lb, lay, banks, bank_bytes):
    """{tensor: (fill_lines, min_fill, drain_lines, min_drain, bank_cycles)} from the model."""
    reqs = m.transfers(level, line_bytes=lb, with_bytes=True, layout=lay)
    groups = collections.defaultdict(lambda: collections.Counter())
    out = {}
    for r in reqs:
        groups[(r["t"], r["op"], r["child"], r["tensor"])][(r["address"] // bank_bytes) % banks] += 1
    nodes, _ = m.storage_nodes()
    for (t, op, child, x), per in groups.items():
        c = out.setdefault(x, [0, 0, 0, 0, 0])
        c[0 if op == "read" else 2] += sum(per.values())
        c[4] += max(per.values())
    for k, x, windows in m.window_tiles(0, m.n_timesteps):
        p = m.parent(k, x)
        if p < 0 or nodes[p]["component"] != level:
            continue
        size = max(1, m.bytes_per_value(x) or 1)
        c = out.setdefault(x, [0, 0, 0, 0, 0])
        for _s, _e, _tile, filled, drained in windows:
            c[1] += -(-len(filled) * size // lb)
            c[3] += -(-len(drained) * size // lb)
    return {x: tuple(v) for x, v in out.items()}


def check_costs(lt, files, m, level, lay, path, rng):
    lb = rng.choice([1, 4, 16])
    banks, bank_bytes = rng.randint(1, 4), rng.choice([lb, 2 * lb])
    lay = json.loads(json.dumps(lay))
    text = to_yaml(lay)
    if "levels" in lay:
        text = text.replace(f"    {level}:\n", f"    {level}:\n      banks: {banks}\n      bank_bytes: {bank_bytes}\n")
    else:
        text += f"  levels:\n    {level}: {{banks: {banks}, bank_bytes: {bank_bytes}}}\n"
    with open(path, "w") as f:
        f.write(text)
    report = json.loads(movement.lt_run(lt, ["movement", *files, "--layout", path, "--line-bytes", str(lb)]))
    level_report = next(l for l in report["levels"] if l["level"] == level)
    got = {t["tensor"]: (t["fill_lines"], t["min_fill_lines"], t["drain_lines"], t["min_drain_lines"],
                         t["bank_cycles"]) for t in level_report.get("layout", {}).get("tensors", [])}
    want = model_costs(m, level, lb, lay, banks, bank_bytes)
    missing = [x for x, v in want.items() if any(v) and x not in got]
    if missing:
        return [f"[movement --layout {level}] no costs for {missing}"]
    open_ = [x for x, v in got.items() if v[1] is None]  # tiles not boxes: the fewest are not known
    got = {x: v for x, v in got.items() if x not in open_}
    want = {x: v for x, v in want.items() if x in got or (x not in open_ and any(v))}
    if got != want:
        return [f"[movement --layout {level} --line-bytes {lb} banks {banks}x{bank_bytes}] costs {got}, want {want}"]
    return []


def run_case(lt, case_seed, keep):
    g, m, rng = run.small_case(case_seed, 20000, 4000)
    d = tempfile.mkdtemp(prefix=f"lay{case_seed}-")
    files = run.write_files(g["files"], d)
    lines = []
    try:
        for level in movement.parent_levels(m):
            lay = random_layout(m, rng, level)
            path = os.path.join(d, f"layout-{level}.yaml")
            with open(path, "w") as f:
                f.write(to_yaml(lay))
            lines += check_costs(lt, files, m, level, lay, os.path.join(d, f"banks-{level}.yaml"), rng)
            for lb in (1, rng.choice([2, 4, 16, 64])):
                args = [*files, "--level", level, "--line-bytes", str(lb), "--layout", path]
                out = movement.lt_run(lt, ["transfers", *args])
                enum = movement.lt_run(lt, ["transfers", "--method", "enumerate", *args])
                tag = f"[{level} --line-bytes {lb} layout {json.dumps(lay)}]"
                if out != enum:
                    a, b = out.splitlines(), enum.splitlines()
                    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                    lines.append(f"{tag} closed form and --method enumerate differ at line {i + 1}: "
                                 f"{a[i] if i < len(a) else None} vs {b[i] if i < len(b) else None}")
                got = [json.loads(l) for l in out.splitlines()]
                want = m.transfers(level, line_bytes=lb, with_bytes=True, layout=lay)
                lines += [f"{tag} {e}" for e in movement.diff_requests(got, want)]
                if lb == 1:
                    rm = [json.loads(l) for l in movement.lt_run(
                        lt, ["transfers", *files, "--level", level, "--line-bytes", "1"]).splitlines()]
                    order = m.summary()["tensors"]
                    where_rm = m.layout_addresses(order, 4096, True, None, level)
                    where_lay = m.layout_addresses(order, 4096, True, lay, level)
                    if all(s == 1 for _, s in where_lay.values()):
                        lines += [f"{tag} permutation: {e}" for e in permutation_check(rm, got, where_rm, where_lay)]
    except Exception as e:  # one broken invocation must not hide the rest
        lines.append(f"exception: {type(e).__name__}: {e}")
    return run.failures_of(d, keep, case_seed, lines)


def main():
    ap = run.case_arguments(30, 29, "/tmp/layoutfail")
    run.add_lattice_arguments(ap)
    a = ap.parse_args()
    run.set_lattice_options(a)
    model.OPTIONS["CLIP_AT_P"] = False
    lt = os.path.abspath(a.looptrace)
    seeds = run.case_seeds(a)
    sys.exit(run.run_seeds(lambda s: run_case(lt, s, a.keep), seeds, a.jobs))


if __name__ == "__main__":
    main()

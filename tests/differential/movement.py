#!/usr/bin/env python3
"""Differential test of data movement: random LoopTrees (generate.py), `looptrace
movement` and `looptrace transfers` against the brute-force model (model.py, which
follows SEMANTICS.md "Data movement" from its own accesses and tile windows).

usage: movement.py --looptrace build/src/looptrace [--count 40] [--seed 11] [--only CASESEED]...
                   [--jobs 2] [--keep DIR] [--spatial P] [--require-bytes]

Per case: `movement` JSON (the closed form, and `--method enumerate`, which must agree
with it) with no filter, --max-timesteps prefixes, --tensors (a level
whose tensors are all filtered out is absent), --einsums, --from/--to windows (windows
cut at the edges count as windows of their own) and --shard, and --partial-sums (the
read-backs, README "Data movement") on the whole run and two of those; then, for each
level with children, `transfers --format jsonl` with --line-bytes 1 and a larger line,
a prefix, a window and a tensor filter, --partial-sums (the read-backs with the fills)
on the whole trace and a window, and --shard I/N outputs that must concatenate to the
whole output byte for byte. Requests are compared in order by (t, op, address); requests
that tie on all three are compared as a multiset (their order is not specified).

Byte figures: the generated specs vary bits_per_value (a number, a dict by All / name /
'A | B', a per-access value) when looptrace reports byte fields at all (it is asked
once); otherwise the byte checks are skipped with a NOTE line, and --require-bytes makes
that a failure. Ends with 'N passed, M failed'."""
import collections
import copy
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import closed_form  # noqa: E402
import generate  # noqa: E402
import model  # noqa: E402
import run  # noqa: E402


def lt_run(lt, args, stderr=None):
    p = subprocess.run([lt, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"`looptrace {' '.join(args[:1])} ... {' '.join(a for a in args if a.startswith('-'))}` "
                           f"exited {p.returncode}: {p.stderr.strip()[-300:]}")
    if stderr is not None:
        stderr.append(p.stderr)
    return p.stdout


def reports_bytes(lt):
    """Whether looptrace gives byte figures for a workload with bits_per_value."""
    d = tempfile.mkdtemp(prefix="mvbytes-")
    try:
        path = os.path.join(d, "spec.yaml")
        with open(path, "w") as f:
            f.write("workload:\n  bits_per_value: 16\n  iteration_space_shape: {m: 0 <= m < 2}\n"
                    "  einsums: [\"B[m] = A[m]\"]\nmapping:\n  nodes:\n"
                    "  - !Storage {component: DRAM, tensors: [A, B]}\n  - !Compute {einsum: B}\n")
        return "bytes_per_value" in lt_run(lt, ["movement", path])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def vary_bits(spec, rng):
    """A copy of spec with another bits_per_value (None: keep it)."""
    tensors = []
    for e in spec["workload"]["einsums"]:
        s = e if isinstance(e, str) else e.get("einsum")
        names = [a[0] for a in model.parse_concise(s)[1]] if s else [a["name"] for a in e["tensor_accesses"]]
        tensors += [t for t in names if t not in tensors]
    spec = copy.deepcopy(spec)
    wl = spec["workload"]
    kind = rng.choice(["none", "number", "all", "named", "set", "access"])
    wl.pop("bits_per_value", None)
    bits = lambda: rng.choice([1, 4, 8, 12, 16, 32])  # noqa: E731
    if kind == "number":
        wl["bits_per_value"] = bits()
    elif kind == "all":
        wl["bits_per_value"] = {"All": bits()}
    elif kind == "named":  # some tensors named, the rest from All (or none: no bytes there)
        d = {t: bits() for t in rng.sample(tensors, rng.randint(1, len(tensors)))}
        if rng.random() < 0.7:
            d["All"] = bits()
        wl["bits_per_value"] = d
    elif kind == "set":
        group = rng.sample(tensors, min(len(tensors), 2))
        wl["bits_per_value"] = {" | ".join(group): bits(), "All": bits()}
    elif kind == "access":  # per-access values win over the workload's
        wl["bits_per_value"] = {"All": bits()}
        for e in wl["einsums"]:
            if isinstance(e, dict) and "tensor_accesses" in e:
                for a in e["tensor_accesses"]:
                    if rng.random() < 0.5:
                        # one value per tensor, whichever access gives it
                        a["bits_per_value"] = 8 * (1 + sum(map(ord, a["name"])) % 3)
    return spec


def case_files(g, spec, d, rng):
    """Writes the case's files (the spec re-rendered when it was changed)."""
    files = dict(g["files"])
    if spec is not g["spec"]:
        files = {"spec.yaml": generate.to_yaml(spec, rng)}
        if "arch.yaml" in g["files"]:
            files["arch.yaml"] = g["files"]["arch.yaml"]
    return run.write_files(files, d)


def args_of(files, kw):
    return closed_form.args_of(files, kw) + (["--partial-sums"] if kw.get("partial_sums") else [])


def strip_bytes(report):
    """The report without byte figures (when looptrace gives none)."""
    r = copy.deepcopy(report)
    for lvl in r["levels"]:
        lvl.pop("peak_footprint_bytes", None)
        for t in lvl["tensors"]:
            for k in ("bytes_per_value", "max_tile_bytes", "fill_bytes", "drain_bytes"):
                t.pop(k, None)
    return r


def diff_movement(got, want):
    errs = []
    for key in ("n_timesteps", "from", "truncated"):
        if got.get(key) != want[key]:
            errs.append(f"{key}: got {got.get(key)}, want {want[key]}")
    gl = [l["level"] for l in got.get("levels", [])]
    wl = [l["level"] for l in want["levels"]]
    if gl != wl:
        return errs + [f"levels: got {gl}, want {wl}"]
    for g, w in zip(got["levels"], want["levels"]):
        for key in ("peak_footprint", "peak_footprint_bytes"):
            if g.get(key) != w.get(key):
                errs.append(f"{w['level']} {key}: got {g.get(key)}, want {w.get(key)}")
        gt = [t["tensor"] for t in g["tensors"]]
        wt = [t["tensor"] for t in w["tensors"]]
        if gt != wt:
            errs.append(f"{w['level']} tensors: got {gt}, want {wt}")
            continue
        for a, b in zip(g["tensors"], w["tensors"]):
            # "capacity" and anything else looptrace adds is not the model's to check
            extra = {k: v for k, v in a.items() if k in b or k.endswith("_bytes") or k == "bytes_per_value"}
            if extra != b:
                keys = sorted(k for k in set(extra) | set(b) if extra.get(k) != b.get(k))
                errs.append(f"{w['level']}/{b['tensor']}: " +
                            ", ".join(f"{k} got {extra.get(k)} want {b.get(k)}" for k in keys))
    return errs


def movement_variants(m, rng):
    n = m.n_timesteps
    s = m.summary()
    tensors, names = s["tensors"], sorted({l["einsum"] for l in m.leaves})
    a, b = sorted(rng.randint(0, n) for _ in range(2))
    out = [("full", {}),
           ("prefix", {"max_timesteps": rng.randint(1, n + 1)}),
           ("window", {"from": a, "to": b}),
           ("from", {"from": rng.randint(1, max(1, n - 1))}),
           ("shard", {"shard": (rng.randint(0, 2), 3)})]
    if len(tensors) > 1:
        out.append(("tensors", {"tensors": rng.sample(tensors, rng.randint(1, len(tensors) - 1))}))
        # one tensor only: levels that do not hold it must be absent
        out.append(("one-tensor", {"tensors": [rng.choice(tensors)]}))
    if len(names) > 1:
        out.append(("einsums", {"einsums": rng.sample(names, 1)}))
    kw = {"from": rng.randint(0, n // 2), "max_timesteps": rng.randint(n // 2 + 1, n + 1)}
    if len(tensors) > 1:
        kw["tensors"] = rng.sample(tensors, rng.randint(1, len(tensors)))
    out.append(("mixed", kw))
    return out


# Per case, from its unfiltered movement report: (levels, the enumerated levels, the
# enumerated slots' reasons);
# per parent level's whole-run transfers, the reason they follow the accesses ("" if not).
ENUMERATED, ENUMERATED_PS, TRANSFERS = [], [], []


def enumerated_share():
    """A line: the share of levels enumerated over the cases (a level counts when any of
    its (node, tensor) slots is), the slots, and the commonest reasons."""
    def share(runs):
        levels = sum(n for n, _, _ in runs)
        n = sum(len(lv) for _, lv, _ in runs)
        reasons = collections.Counter(re.sub(r"'[^']*'", "'...'", r) for _, _, rs in runs for r in rs)
        top = "; ".join(f"{k} x{c}" for k, c in reasons.most_common(4))
        return (f"{n} of {levels} ({100.0 * n / max(levels, 1):.1f}%), {sum(reasons.values())} slots"
                + (f"; reasons: {top}" if top else ""))
    followed = collections.Counter(re.sub(r"'[^']*'", "'...'", r) for r in TRANSFERS if r)
    top_t = "; ".join(f"{k} x{c}" for k, c in followed.most_common(3))
    return (f"enumerated levels: {share(ENUMERATED)}"
            + f"\nenumerated levels with --partial-sums: {share(ENUMERATED_PS)}"
            + f"\ntransfers following the accesses: {sum(followed.values())} of {len(TRANSFERS)} levels"
            + (f"; reasons: {top_t}" if top_t else ""))


def check_movement(lt, files, m, kw, label, with_bytes):
    frm, to = closed_form.window_of(m.n_timesteps, kw)
    want = m.movement(frm, to, kw.get("tensors"), kw.get("einsums"), with_bytes=with_bytes,
                      partial_sums=bool(kw.get("partial_sums")))
    got = json.loads(lt_run(lt, ["movement", *args_of(files, kw)]))
    if label in ("full", "partial-sums full"):  # the share of levels the closed form hands to the enumeration
        (ENUMERATED if label == "full" else ENUMERATED_PS).append((len(got.get("levels", [])), {e["level"] for e in got.get("enumerated", [])},
                           [e["reason"] for e in got.get("enumerated", [])]))
    # The enumerating engine (the closed form's check) must give the same report.
    enumerated = json.loads(lt_run(lt, ["movement", "--method", "enumerate", *args_of(files, kw)]))
    errs = []
    if {k: v for k, v in got.items() if k not in ("method", "enumerated")} != \
            {k: v for k, v in enumerated.items() if k not in ("method", "enumerated")}:
        errs.append(f"[{label} {' '.join(args_of([], kw))}] the closed form and --method enumerate differ")
    if not with_bytes:
        got = strip_bytes(got)
    if kw.get("tensors"):  # the filter's own check: only levels holding a kept tensor
        held = {n["component"] for n in m.storage_nodes()[0]
                if set(map(str, n.get("tensors", []) or [])) & set(kw["tensors"])}
        if {l["level"] for l in got.get("levels", [])} != held:
            return [f"[{label} {' '.join(args_of([], kw))}] levels {[l['level'] for l in got['levels']]} "
                    f"but the kept tensors are held at {sorted(held)}"]
    return errs + [f"[{label} {' '.join(args_of([], kw))}] {e}" for e in diff_movement(got, want)]


def transfer_kw(kw):
    """The model's keyword arguments for a CLI variant."""
    out = {k: kw[k] for k in ("max_timesteps", "tensors", "einsums", "shard", "partial_sums") if kw.get(k) is not None}
    if kw.get("from") is not None:
        out["frm"] = kw["from"]
    if kw.get("to") is not None:
        out["to"] = kw["to"]
    for k in ("line_bytes", "align"):
        if kw.get(k) is not None:
            out[k] = kw[k]
    return out


def transfer_args(files, level, kw):
    a = args_of(files, kw) + ["--level", level]
    if kw.get("line_bytes") is not None:
        a += ["--line-bytes", str(kw["line_bytes"])]
    if kw.get("align") is not None:
        a += ["--align", str(kw["align"])]
    return a


def diff_requests(got, want):
    key = lambda r: (r["t"], r["op"], r["address"])  # noqa: E731
    full = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    gk, wk = [key(r) for r in got], [key(r) for r in want]
    if gk != wk:
        i = next((i for i, (a, b) in enumerate(zip(gk, wk)) if a != b), min(len(gk), len(wk)))
        return [f"{len(got)} requests, want {len(want)}; first difference at {i}: "
                f"got {got[i] if i < len(got) else None}, want {want[i] if i < len(want) else None}"]
    if collections.Counter(map(full, got)) != collections.Counter(map(full, want)):
        extra = collections.Counter(map(full, got)) - collections.Counter(map(full, want))
        missing = collections.Counter(map(full, want)) - collections.Counter(map(full, got))
        return [f"same (t, op, address) but got {list(extra)[:2]}, want {list(missing)[:2]}"]
    return []


def check_transfers(lt, files, m, level, kw, label, with_bytes):
    err = []
    out = lt_run(lt, ["transfers", *transfer_args(files, level, kw)], err)
    if label == "line1":
        note = re.search(r"follow every access \(slow on large layers\): (.*)", err[0])
        TRANSFERS.append(note.group(1) if note else "")
    got = [json.loads(l) for l in out.splitlines()]
    want = m.transfers(level, with_bytes=with_bytes, **transfer_kw(kw))
    tag = f"[transfers {level} {label} {' '.join(transfer_args([], level, kw)[:-2])}]"
    errs = [f"{tag} {e}" for e in diff_requests(got, want)]
    # The closed form (the default) and the enumeration write the same bytes.
    enumerated = lt_run(lt, ["transfers", "--method", "enumerate", *transfer_args(files, level, kw)])
    if enumerated != out:
        a, b = out.splitlines(), enumerated.splitlines()
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        errs.append(f"{tag} --method enumerate differs: {len(b)} lines against {len(a)}; first at line {i + 1}: "
                    f"{b[i] if i < len(b) else None} vs {a[i] if i < len(a) else None}")
    return errs, out


def check_shards(lt, files, level, kw, k, whole):
    """--shard i/k outputs, concatenated, equal the unsharded output byte for byte."""
    parts = [lt_run(lt, ["transfers", *transfer_args(files, level, dict(kw, shard=(i, k)))]) for i in range(k)]
    if "".join(parts) == whole:
        return []
    cat = "".join(parts).splitlines()
    lines = whole.splitlines()
    i = next((i for i, (a, b) in enumerate(zip(cat, lines)) if a != b), min(len(cat), len(lines)))
    return [f"[transfers {level} shards {' '.join(transfer_args([], level, kw)[:-2])} --shard */{k}] "
            f"{k} shards give {len(cat)} lines, the whole {len(lines)}; first difference at line {i + 1}: "
            f"{cat[i] if i < len(cat) else None} vs {lines[i] if i < len(lines) else None}"]


def parent_levels(m):
    """Levels that are some node's parent for some tensor, in tree order."""
    nodes, _ = m.storage_nodes()
    out = set()
    for k, node in enumerate(nodes):
        for x in map(str, node.get("tensors", []) or []):
            p = m.parent(k, x)
            if p >= 0:
                out.add(nodes[p]["component"])
    return [l for l in m.levels if l in out]


def run_case(lt, case_seed, keep, with_bytes):
    g, m, rng = run.small_case(case_seed, 20000, 4000)
    spec = g["spec"]
    if with_bytes:
        spec = vary_bits(spec, rng)
        m = model.Model(spec)
    d = tempfile.mkdtemp(prefix=f"mv{case_seed}-")
    files = case_files(g, spec, d, rng)
    lines = []
    try:
        variants = movement_variants(m, rng)
        for label, kw in variants:
            lines += check_movement(lt, files, m, kw, label, with_bytes)
        # --partial-sums (README "Data movement"): the whole run and two of the variants
        for label, kw in [("full", {})] + rng.sample(variants[1:], 2):
            lines += check_movement(lt, files, m, dict(kw, partial_sums=True), "partial-sums " + label, with_bytes)
        n = m.n_timesteps
        tensors = m.summary()["tensors"]
        for level in parent_levels(m):
            errs, whole = check_transfers(lt, files, m, level, {"line_bytes": 1}, "line1", with_bytes)
            lines += errs
            lines += check_shards(lt, files, level, {"line_bytes": 1}, rng.randint(2, 5), whole)
            kw = {"line_bytes": rng.choice([2, 4, 16, 64])}
            errs, whole = check_transfers(lt, files, m, level, kw, "line", with_bytes)
            lines += errs
            a, b = sorted(rng.randint(0, n) for _ in range(2))
            variants = [("prefix", {"max_timesteps": rng.randint(1, n), "line_bytes": 1}),
                        ("window", {"from": a, "to": b, "line_bytes": rng.choice([1, 8])})]
            if len(tensors) > 1:
                variants.append(("tensors", {"tensors": rng.sample(tensors, rng.randint(1, len(tensors) - 1)),
                                             "line_bytes": 1}))
            names = sorted({l["einsum"] for l in m.leaves})
            if len(names) > 1 and rng.random() < 0.5:
                variants.append(("einsums", {"einsums": rng.sample(names, 1), "line_bytes": 1}))
            if rng.random() < 0.3:
                variants.append(("align", {"align": rng.choice([1, 2, 64]), "line_bytes": rng.choice([1, 4])}))
            for label, kw in variants:
                errs, whole = check_transfers(lt, files, m, level, kw, label, with_bytes)
                lines += errs
            # shards of the last variant (a window, prefix or filter)
            lines += check_shards(lt, files, level, kw, rng.randint(2, 4), whole)
            # --partial-sums: read-backs with the fills, the whole trace, a window and shards
            kw = {"line_bytes": rng.choice([1, 4]), "partial_sums": True}
            errs, whole = check_transfers(lt, files, m, level, kw, "partial-sums", with_bytes)
            lines += errs + check_shards(lt, files, level, kw, rng.randint(2, 4), whole)
            a, b = sorted(rng.randint(0, n) for _ in range(2))
            lines += check_transfers(lt, files, m, level, dict(kw, **{"from": a, "to": b}), "partial-sums-window",
                                     with_bytes)[0]
        # a level without children has no requests
        lonely = [l for l in m.levels if l not in parent_levels(m)]
        if lonely:
            lines += check_transfers(lt, files, m, rng.choice(lonely), {}, "no-children", with_bytes)[0]
    except Exception as e:  # one broken invocation must not hide the rest
        lines.append(f"exception: {type(e).__name__}: {e}")
    return run.failures_of(d, keep, case_seed, lines)


def main():
    ap = run.case_arguments(40, 11, "/tmp/movementfail")
    ap.add_argument("--spatial", type=float, default=generate.OPTIONS["spatial"],
                    help="probability that a generated loop is spatial")
    ap.add_argument("--require-bytes", action="store_true",
                    help="fail when looptrace reports no byte figures for bits_per_value")
    run.add_lattice_arguments(ap)
    a = ap.parse_args()
    generate.OPTIONS["spatial"] = a.spatial
    run.set_lattice_options(a)
    model.OPTIONS["CLIP_AT_P"] = False  # SEMANTICS.md's settled reading
    lt = os.path.abspath(a.looptrace)
    with_bytes = reports_bytes(lt)
    failed = 0
    if not with_bytes:
        print("NOTE: looptrace gives no byte figures for bits_per_value: byte checks skipped"
              + (" (a failure with --require-bytes)" if a.require_bytes else ""))
        failed += a.require_bytes
    seeds = run.case_seeds(a)
    sys.exit(run.run_seeds(lambda s: run_case(lt, s, a.keep, with_bytes), seeds, a.jobs, failed,
                           before_last=enumerated_share))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Differential test of the closed-form summary: random LoopTrees (generate.py), the
brute-force model (model.py) and looptrace's own enumeration, over time selections.

usage: closed_form.py --looptrace build/src/looptrace [--count 60] [--seed 7] [--only CASESEED]...
                      [--spatial P]

`looptrace summary` counts in closed form; each case checks, for random --from/--to,
--max-timesteps, --shard I/N and filters, against the model that visits every timestep
and point: n_accesses per trace, n_points, einsum_timespans, and tile windows in both
--windows forms (compact runs expanded). With --sample-timesteps the model cannot know
the sample, so the counts and spans are checked against `looptrace trace` with the same
options (the enumerating engine). Then the summaries of N shards merged with
`looptrace merge` and `--threads 3` must equal the unsharded summary byte for byte.
Ends with 'N passed, M failed'."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model  # noqa: E402
import run  # noqa: E402


def window_of(n, kw):
    """The selection window, as TimeSelection computes it."""
    frm = kw.get("from", 0)
    to = kw.get("to", n)
    if kw.get("max_timesteps") is not None:
        to = min(to, kw["max_timesteps"])
    to = min(to, n)
    frm = min(frm, to)
    if kw.get("shard"):
        i, k = kw["shard"]
        length = to - frm
        frm, to = frm + length * i // k, frm + length * (i + 1) // k
    return frm, to


def args_of(files, kw):
    a = run.cli_args(files, kw)
    if kw.get("from") is not None:
        a += ["--from", str(kw["from"])]
    if kw.get("to") is not None:
        a += ["--to", str(kw["to"])]
    if kw.get("shard"):
        a += ["--shard", f"{kw['shard'][0]}/{kw['shard'][1]}"]
    if kw.get("sample") is not None:
        a += ["--sample-timesteps", str(kw["sample"]), "--seed", str(kw.get("seed", 0))]
    return a


def expected(m, kw):
    """The model's summary over the selection window (no sample)."""
    n = m.n_timesteps
    frm, to = window_of(n, kw)
    tset = set(kw["tensors"]) if kw.get("tensors") else None
    eset = set(kw["einsums"]) if kw.get("einsums") else None
    traces = m.traces_list(tset, eset)
    keep = {(li, tn) for li, _, tn, _ in traces}
    counts = {}
    for t, li, tensor, _o, _c in m.raw_accesses():
        if frm <= t < to and (li, tensor) in keep:
            key = (m.leaves[li]["einsum"], tensor)
            counts[key] = counts.get(key, 0) + 1
    points, spans = 0, {}
    for li, leaf in enumerate(m.leaves):
        name = leaf["einsum"]
        if eset is not None and name not in eset:
            continue
        ts = [t for t in m.compute[li] if frm <= t < to]
        points += sum(len(m.compute[li][t]) for t in ts)
        if ts:
            a, b = spans.get(name, (min(ts), max(ts) + 1))
            spans[name] = (min(a, min(ts)), max(b, max(ts) + 1))
    windows = {}
    for lvl in m.levels:
        d = {}
        for tn, ws in m.windows.get(lvl, {}).items():
            if tset is not None and tn not in tset:
                continue
            d[tn] = sorted({(max(s, frm), min(e, to)) for s, e in ws if max(s, frm) < min(e, to)})
        # A level none of whose tensors pass the tensor filter is dropped (SEMANTICS).
        if d or tset is None:
            windows[lvl] = d
    return {
        "n_timesteps": to,
        "truncated": frm > 0 or to < n,
        "traces": [(en, tn, counts.get((en, tn), 0)) for _, en, tn, _ in traces],
        "n_points": points,
        "spans": sorted((a, b, name) for name, (a, b) in spans.items()),
        "windows": windows,
    }


def runs_to_windows(runs):
    return [(r["start"] + i * r["period"], r["start"] + i * r["period"] + r["length"])
            for r in runs for i in range(r["count"])]


def got_windows(summary):
    if "tile_windows" in summary:
        return {lvl: {tn: [tuple(w) for w in ws] for tn, ws in d.items()}
                for lvl, d in summary["tile_windows"].items()}
    return {lvl: {tn: runs_to_windows(rs) for tn, rs in d.items()}
            for lvl, d in summary["tile_window_runs"].items()}


def lt_run(lt, args):
    p = subprocess.run([lt, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"`looptrace {' '.join(args[:1])}` exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return p.stdout


def check_variant(lt, files, m, kw, label):
    errs = []
    base = args_of(files, kw)
    for form in ("full", "compact"):
        s = json.loads(lt_run(lt, ["summary", *base, "--windows", form]))
        got_traces = [(t["einsum"], t["tensor"], t["n_accesses"]) for t in s["traces"]]
        got_spans = sorted((v[0], v[1], k) for k, v in s["einsum_timespans"].items())
        if kw.get("sample") is None:
            want = expected(m, kw)
            for key in ("n_timesteps", "truncated", "n_points"):
                if s[key] != want[key]:
                    errs.append(f"{form}: {key}: got {s[key]}, want {want[key]}")
            if got_traces != want["traces"]:
                errs.append(f"{form}: traces: got {got_traces}, want {want['traces']}")
            if got_spans != want["spans"]:
                errs.append(f"{form}: spans: got {got_spans}, want {want['spans']}")
            gw = got_windows(s)
            if sorted(gw) != sorted(want["windows"]):
                errs.append(f"{form}: memory levels: got {sorted(gw)}, want {sorted(want['windows'])}")
            for lvl in want["windows"]:
                if gw.get(lvl) != want["windows"][lvl]:
                    errs.append(f"{form}: windows {lvl}: got {run.short(gw.get(lvl), 200)}, "
                                f"want {run.short(want['windows'][lvl], 200)}")
        else:
            # The enumerating engine over the same sample.
            counts, spans = {}, {}
            for line in lt_run(lt, ["trace", *base]).splitlines():
                a = json.loads(line)
                counts[(a["einsum"], a["tensor"])] = counts.get((a["einsum"], a["tensor"]), 0) + 1
                lo, hi = spans.get(a["einsum"], (a["t"], a["t"] + 1))
                spans[a["einsum"]] = (min(lo, a["t"]), max(hi, a["t"] + 1))
            want_traces = [(e, t, counts.get((e, t), 0)) for e, t, _ in got_traces]
            if got_traces != want_traces:
                errs.append(f"{form}: traces: got {got_traces}, trace gives {want_traces}")
            if not kw.get("tensors"):
                want_spans = sorted((a, b, k) for k, (a, b) in spans.items())
                if got_spans != want_spans:
                    errs.append(f"{form}: spans: got {got_spans}, trace gives {want_spans}")
    return [f"[{label} {' '.join(args_of([], kw))}] {e}" for e in errs]


def check_merge(lt, files, kw, n, form, tmp):
    """Shard summaries merged, and --threads, equal the unsharded summary byte for byte."""
    base = args_of(files, kw)
    whole = lt_run(lt, ["summary", *base, "--windows", form])
    paths = []
    for i in range(n):
        p = os.path.join(tmp, f"shard{i}.json")
        with open(p, "w") as f:
            f.write(lt_run(lt, ["summary", *base, "--windows", form, "--shard", f"{i}/{n}"]))
        paths.append(p)
    errs = []
    if lt_run(lt, ["merge", *reversed(paths)]) != whole:
        errs.append(f"merge of {n} shards ({form}) differs from the whole")
    if lt_run(lt, ["summary", *base, "--windows", form, "--threads", "3"]) != whole:
        errs.append(f"--threads 3 ({form}) differs from one thread")
    return [f"[merge {' '.join(args_of([], kw))}] {e}" for e in errs]


def variants(m, rng):
    n = m.n_timesteps
    s = m.summary()
    tensors, names = s["tensors"], [l["einsum"] for l in m.leaves]
    a, b = sorted(rng.randint(0, n) for _ in range(2))
    out = [("window", {"from": a, "to": b}),
           ("from", {"from": rng.randint(0, n)}),
           ("prefix", {"max_timesteps": rng.randint(1, n)}),
           ("shard", {"shard": (rng.randint(0, 2), 3)}),
           ("shard-of-window", {"from": a, "to": b, "shard": (1, 2)}),
           ("sample", {"sample": rng.randint(1, 12), "seed": rng.randint(0, 99)})]
    kw = {"from": rng.randint(0, n // 2)}
    if len(tensors) > 1:
        kw["tensors"] = rng.sample(tensors, rng.randint(1, len(tensors) - 1))
    if len(set(names)) > 1 and rng.random() < 0.5:
        kw["einsums"] = rng.sample(sorted(set(names)), 1)
    out.append(("filtered", kw))
    return out


def run_case(lt, case_seed, keep):
    g, m, rng = run.small_case(case_seed, 20000, 4000)
    d = tempfile.mkdtemp(prefix=f"cf{case_seed}-")
    files = run.write_files(g["files"], d)
    lines = []
    try:
        for label, kw in variants(m, rng):
            lines += check_variant(lt, files, m, kw, label)
        lines += check_merge(lt, files, {}, rng.randint(2, 5), rng.choice(["full", "compact"]), d)
        a = rng.randint(0, m.n_timesteps)
        lines += check_merge(lt, files, {"from": a // 2, "to": a}, rng.randint(2, 4), "compact", d)
    except Exception as e:  # one broken invocation must not hide the rest
        lines.append(f"exception: {type(e).__name__}: {e}")
    return run.failures_of(d, keep, case_seed, lines)


def main():
    ap = run.case_arguments(60, 7, "/tmp/closedformfail")
    ap.add_argument("--spatial", type=float, default=run.generate.OPTIONS["spatial"],
                    help="probability that a generated loop is spatial")
    run.add_lattice_arguments(ap)
    a = ap.parse_args()
    run.generate.OPTIONS["spatial"] = a.spatial
    run.set_lattice_options(a)
    model.OPTIONS["CLIP_AT_P"] = False  # SEMANTICS.md's settled reading
    lt = os.path.abspath(a.looptrace)
    seeds = run.case_seeds(a)
    sys.exit(run.run_seeds(lambda s: run_case(lt, s, a.keep), seeds, a.jobs))


if __name__ == "__main__":
    main()

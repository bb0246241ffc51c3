#!/usr/bin/env python3
"""Drives `looptrace plot` and `looptrace iterations`: the SVG of the bundled example
(panels, exit codes, errors that name what exists), rendered by headless Chromium into a
screenshot that is not blank, and iteration traces as JSON Lines.

usage: test_plot.py PATH/TO/looptrace

Installs Debian's chromium with apt-get when it is missing and that is possible; skips
the rendering check, saying why, when it is not. Prints one line per failed check and
'N passed, M failed' last; exits 1 on any failure."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

from harness import EXE, ROOT, TMP, check, finish, guarded, run  # noqa: E402

SPECS = [os.path.join(ROOT, "examples", "specs", f)
         for f in ("matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml")]
EXAMPLE = SPECS + ["-D", "N_EINSUMS=2", "-D", "M=8", "-D", "KN=4"]
SVG_NS = "{http://www.w3.org/2000/svg}"


def classes(root, name):
    return [e for e in root.iter() if e.get("class") == name]


def test_svg_file():
    out = os.path.join(TMP, "example.svg")
    r = run("plot", *EXAMPLE, "--memory-level", "GlobalBuffer", "-o", out)
    check(r.returncode == 0, "plot exits 0 (stderr: %s)" % r.stderr.strip())
    root = ET.parse(out).getroot()  # well-formed XML
    check(root.tag == SVG_NS + "svg", "the root element is <svg>")
    panels = [p.get("data-tensor") for p in classes(root, "panel")]
    check(panels == ["T0", "W0", "T1", "W1", "T2"], "five panels in order of first trace: %s" % panels)
    check([e.text for e in classes(root, "xlabel")] == ["Timestep"], "one shared Timestep axis")
    tiles = {p.get("data-tensor"): len(classes(p, "tile")) for p in classes(root, "panel")}
    check(tiles == {"T0": 8, "W0": 1, "T1": 8, "W1": 1, "T2": 8}, "GlobalBuffer tiles per panel: %s" % tiles)
    t0 = [(int(t.get("data-from")), int(t.get("data-to"))) for t in classes(classes(root, "panel")[0], "tile")]
    check(t0[:2] == [(0, 16), (32, 48)], "T0's tiles end with the first branch: %s" % t0[:2])

    r = run("plot", *EXAMPLE, "--tensors", "T2,T0", "--color-by", "access")
    check(r.returncode == 0 and r.stdout.startswith("<svg"), "plot writes to stdout by default")
    root = ET.fromstring(r.stdout)
    check([p.get("data-tensor") for p in classes(root, "panel")] == ["T2", "T0"], "--tensors orders the panels")
    legend = ["".join(e.itertext()) for e in classes(root, "legend-entry")]
    check(legend == ["read", "write"], "--color-by access: legend %s" % legend)
    return out


def test_errors():
    cases = [
        (["--memory-level", "L9"], "MainMemory (T0, T2, W0, W1)"),
        (["--tensors", "T1", "--memory-level", "MainMemory"], "holds none of the plotted tensors (T1)"),
        (["--tensors", "T0", "--einsums", "Matmul1"], "'T0', which has no accesses"),
        (["--rank", "K"], "none of the plotted tensors has that rank"),
        (["--color-by", "tensor"], "--color-by"),
    ]
    for extra, message in cases:
        r = run("plot", *EXAMPLE, *extra)
        check(r.returncode == 2 and message in r.stderr,
              "plot %s exits 2 naming %r (got %d: %s)" % (" ".join(extra), message, r.returncode, r.stderr.strip()))


def test_zoom():
    # T0[m, n0] is element 4m + n0, read at t = 32m + 4n0 + n1: elements [4, 12) are m = 1, 2.
    r = run("plot", *EXAMPLE, "--tensors", "T0", "--elements", "4:12")
    check(r.returncode == 0, "--elements 4:12 exits 0 (%s)" % r.stderr.strip())
    root = ET.fromstring(r.stdout)
    check([e.text for e in classes(root, "title")] == ["T0 (M=8, N0=4), element [4, 12)"],
          "the title names the zoom: %s" % [e.text for e in classes(root, "title")])
    yticks = [int(e.text) for e in classes(root, "ytick")]
    check(yticks and all(4 <= y < 12 for y in yticks), "y ticks inside [4, 12): %s" % yticks)
    r = run("plot", *EXAMPLE, "--tensors", "T0", "--timesteps", "32:96")
    root = ET.fromstring(r.stdout)
    xticks = [int(e.text) for e in classes(root, "xtick")]
    check(r.returncode == 0 and xticks and xticks[0] >= 32 and xticks[-1] < 96, "x ticks inside [32, 96): %s" % xticks)
    r = run("plot", *EXAMPLE, "--tensors", "T0", "--timesteps", "100:")
    check(r.returncode == 0 and ">timesteps [100, 256) of 256<" in r.stdout and "truncated" not in r.stdout,
          "--timesteps 100: runs to the end, a zoom (not called truncated)")
    for extra, message in ((["--elements", "12:4"], "B must be larger than A"),
                           (["--elements", "4"], "no ':'"),
                           (["--elements", "a:9"], "'a' is not a whole number"),
                           (["--elements", "100:"], "holds no y of the plotted tensors"),
                           (["--timesteps", "0:10", "--from", "3"], "not both")):
        r = run("plot", *EXAMPLE, *extra)
        check(r.returncode == 2 and message in r.stderr,
              "plot %s exits 2 saying %r (got %d: %s)" % (" ".join(extra), message, r.returncode, r.stderr.strip()))


def points_d(svg_text):
    """The points paths' d attributes, per series."""
    root = ET.fromstring(svg_text)
    return {e.get("data-series"): e.get("d") for e in classes(root, "points")}


def test_layout():
    # T0 transposed: element [m, n0] (row-major 4m + n0) at address 8 * n0 + m. Zoomed on
    # one address, the layout's picture has the points the row-major one has zoomed on
    # that element (the same timesteps, one y each).
    lay = os.path.join(TMP, "t0_transposed.yaml")
    with open(lay, "w") as f:
        f.write("layout:\n  tensors:\n    T0: {order: [N0, M]}\n  levels:\n    GlobalBuffer: {banks: 2, bank_bytes: 4}\n")
    r = run("plot", *EXAMPLE, "--tensors", "T0", "--layout", lay)
    root = ET.fromstring(r.stdout) if r.returncode == 0 else None
    check(root is not None and [e.text for e in classes(root, "title")] == ["T0 (M=8, N0=4), address [0, 32)"]
          and [e.text for e in classes(root, "ylabel")] == ["address"], "plot --layout: y as address (%s)" % r.stderr)
    for a in (1, 9, 14, 31):
        n0, m = divmod(a, 8)
        got = run("plot", *EXAMPLE, "--tensors", "T0", "--layout", lay, "--elements", "%d:%d" % (a, a + 1))
        want = run("plot", *EXAMPLE, "--tensors", "T0", "--elements", "%d:%d" % (4 * m + n0, 4 * m + n0 + 1))
        check(got.returncode == 0 and points_d(got.stdout) == points_d(want.stdout) and points_d(want.stdout),
              "address %d is T0[%d, %d]: %s vs %s" % (a, m, n0, points_d(got.stdout), points_d(want.stdout)))
    # Per bank at GlobalBuffer (2 banks of 4 bytes): bank 0 holds addresses 0-3, 8-11, ...:
    # m < 4. Its markers are the timesteps that read some T0[m < 4, n0].
    trace = [json.loads(x) for x in run("trace", *EXAMPLE, "--tensors", "T0").stdout.splitlines()]
    want = len({x["t"] for x in trace if x["coords"][0] < 4})
    r = run("plot", *EXAMPLE, "--tensors", "T0", "--layout", lay, "--memory-level", "GlobalBuffer",
            "--elements", "0:1")
    root = ET.fromstring(r.stdout) if r.returncode == 0 else None
    d = points_d(r.stdout).get("Matmul0 read", "") if root is not None else ""
    check(root is not None and [e.text for e in classes(root, "ylabel")] == ["bank"] and d.count("h") == want,
          "plot --layout --memory-level GlobalBuffer: per bank, bank 0 at %d timesteps (want %d; %s)" %
          (d.count("h"), want, r.stderr.strip()))
    for extra, message in ((["--rank", "M"], "not both"), (["--elements", "40:"], "holds no y")):
        r = run("plot", *EXAMPLE, "--tensors", "T0", "--layout", lay, *extra)
        check(r.returncode == 2 and message in r.stderr, "plot --layout %s: exit 2 (%s)" % (extra, r.stderr.strip()))
    bad = os.path.join(TMP, "bad.yaml")
    with open(bad, "w") as f:
        f.write("layout:\n  tensors:\n    T0: {order: [M]}\n")
    r = run("plot", *EXAMPLE, "--layout", bad)
    check(r.returncode == 2 and "bad.yaml" in r.stderr, "a bad layout file: exit 2 naming it (%s)" % r.stderr.strip())


def test_large_trace_is_small():
    out = os.path.join(TMP, "large.svg")
    r = run("plot", *SPECS, "-D", "N_EINSUMS=2", "-D", "M=64", "-D", "KN=64",
            "--memory-level", "GlobalBuffer", "-o", out, timeout=120)
    check(r.returncode == 0, "plot of 1.6e6 accesses exits 0")
    size = os.path.getsize(out) if os.path.exists(out) else 1 << 30
    check(size < 3 << 20, "the density picture of 1.6e6 accesses is under 3 MiB (%d bytes)" % size)
    root = ET.parse(out).getroot()
    check(len(classes(root, "density")) > 0 and not classes(root, "points"), "past max points: density cells, no markers")


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    if shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, timeout=900)
    return shutil.which("chromium")


def png_pixels(path):
    """The rows of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, "unexpected PNG format"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return rows


def test_chromium_renders(svg):
    chromium = find_chromium()
    if not chromium:
        print("SKIP rendering check: Debian's chromium is not installed and could not be installed "
              "(apt-get install chromium)")
        return
    shot = os.path.join(TMP, "shot.png")
    profile = tempfile.mkdtemp(prefix="looptrace-chromium-")
    try:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--user-data-dir=" + profile, "--screenshot=" + shot,
                        "--window-size=960,1200", "file://" + svg],
                       capture_output=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    check(os.path.exists(shot), "headless chromium wrote a screenshot of the SVG")
    if not os.path.exists(shot):
        return
    rows = png_pixels(shot)
    colours = {}
    for row in rows:
        for px in row:
            colours[px] = colours.get(px, 0) + 1
    background, count = max(colours.items(), key=lambda kv: kv[1])
    total = sum(colours.values())
    check(len(colours) > 1, "the screenshot is not a single colour")
    check(total - count > total // 50, "more than 2%% of the screenshot is drawn (%d of %d pixels)" % (total - count, total))
    blue = sum(n for (r, g, b), n in colours.items() if b > r + 60)  # Matmul0's markers
    orange = sum(n for (r, g, b), n in colours.items() if r > b + 60)  # Matmul1's, the tiles
    check(blue > 50 and orange > 50, "both Einsums' colours are visible (%d blue, %d orange pixels)" % (blue, orange))


def test_iterations():
    r = run("iterations", *EXAMPLE)
    check(r.returncode == 0, "iterations exits 0")
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    check(len(lines) == 256, "one iteration per timestep of the fused example (%d)" % len(lines))
    check(lines[0] == {"t": 0, "einsum": "Matmul0", "origin": {"m": 0, "n0": 0, "n1": 0}}, "first line %s" % lines[:1])
    check(lines[17] == {"t": 17, "einsum": "Matmul1", "origin": {"m": 0, "n1": 0, "n2": 1}}, "t = 17 is Matmul1's second")
    check(all(a["t"] <= b["t"] for a, b in zip(lines, lines[1:])), "iterations come in time order")

    spatial = [os.path.join(ROOT, "..", "shared", "conformance", "specs", f)
               for f in ("matmuls.yaml", "matmul_spatial.mapping.yaml")]
    if os.path.exists(spatial[1]):
        r = run("iterations", *spatial, "-D", "N_EINSUMS=1", "-D", "M=8", "-D", "KN=4", "--to", "1")
        got = [json.loads(l)["origin"]["n1"] for l in r.stdout.splitlines()]
        check(got == [0, 1, 2, 3], "four processing elements at t = 0: n1 origins %s" % got)

    r = run("iterations", *EXAMPLE, "--einsums", "Matmul1", "--from", "40", "--to", "60")
    ts = [json.loads(l)["t"] for l in r.stdout.splitlines()]
    check(ts == list(range(48, 60)), "--einsums Matmul1 in [40, 60): Matmul1 of m = 1 from 48 (%s)" % ts[:3])


def main():
    svg = None
    try:
        for test in (test_svg_file, test_errors, test_zoom, test_layout, test_large_trace_is_small,
                     test_iterations):
            svg = guarded(test) or svg
        if svg:
            guarded(test_chromium_renders, svg)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compiles and runs every ```cpp block of README.md against the built library.

usage: run_snippets.py --source SOURCE_ROOT --build BUILD_DIR [--readme README.md] [--keep DIR]

The blocks are read from the README at test time, so whatever it says is what is
tested. A block that defines `main` is a whole program; otherwise its #include lines
go first and the rest becomes the body of `main`, where `use(...)` takes anything (it
stands for the reader's code, and counts its calls). Each program runs in the source
root (so `examples/specs/...` names the bundled specs) and must exit 0 within a minute;
a block whose code calls `use` must call it at least once. An HTML comment
`<!-- readme-test: compile-only -->` or `<!-- readme-test: skip -->` on the line
before a block says what to do with it.

The compiler is $CXX (default c++) with -std=c++20, the project's include/ and the
library in BUILD_DIR/src; nlohmann_json's flags come from pkg-config when it has them.
Prints one line per failure and 'N passed, M failed' last (one count per block)."""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sanitizer import sanitizer_flags  # noqa: E402

PRELUDE = """\
#include <cstdio>
// `use(...)` in a README snippet stands for the reader's code: it takes anything.
static long looptrace_readme_uses = 0;
template <class... Args>
void use(const Args&...) { ++looptrace_readme_uses; }
"""

EPILOGUE = """\
  std::printf("readme-test: use() called %ld times\\n", looptrace_readme_uses);
  return 0;
}
"""


def blocks(text):
    """[(line number, directive, code)] of every ```cpp block."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if re.match(r"^\s*```(cpp|c\+\+)\s*$", lines[i]):
            start = i + 1
            prev = lines[i - 1].strip() if i > 0 else ""
            m = re.match(r"<!--\s*readme-test:\s*([\w-]+)\s*-->", prev)
            j = start
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            out.append((start, m.group(1) if m else "run", "\n".join(lines[start:j]) + "\n"))
            i = j + 1
        else:
            i += 1
    return out


def program(code):
    """The block as a translation unit, and whether it counts `use` calls."""
    if re.search(r"\bint\s+main\s*\(", code):
        return code, False
    includes = [l for l in code.splitlines() if l.lstrip().startswith("#include")]
    body = [l for l in code.splitlines() if not l.lstrip().startswith("#include")]
    text = "\n".join(includes) + "\n" + PRELUDE + "\nint main() {\n" + \
        "\n".join("  " + l if l else l for l in body) + "\n" + EPILOGUE
    return text, re.search(r"\buse\s*\(", code) is not None


def dependency_flags():
    try:
        p = subprocess.run(["pkg-config", "--cflags", "nlohmann_json"], capture_output=True, text=True)
        return shlex.split(p.stdout) if p.returncode == 0 else []
    except OSError:
        return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--readme")
    ap.add_argument("--keep", help="write the generated programs here")
    a = ap.parse_args()
    source, build = os.path.abspath(a.source), os.path.abspath(a.build)
    readme = a.readme or os.path.join(source, "README.md")
    work = a.keep or tempfile.mkdtemp(prefix="looptrace-readme-")
    os.makedirs(work, exist_ok=True)
    cxx = shlex.split(os.environ.get("CXX", "c++"))
    libdir = os.path.join(build, "src")
    # The build tree has liblooptrace.so.X.Y (the unversioned link may come only with
    # an install): link the file itself.
    libs = sorted((f for f in os.listdir(libdir) if re.fullmatch(r"liblooptrace\.(so(\.[\d.]+)?|a|dylib)", f)),
                  key=len)
    if not libs:
        print("FAIL no liblooptrace in %s: build first" % libdir)
        print("0 passed, 1 failed")
        return 1
    library = os.path.join(libdir, libs[0])
    passed = failed = 0
    found = blocks(open(readme, encoding="utf-8").read())
    if not found:
        print("FAIL %s has no ```cpp block" % readme)
        failed += 1
    for line, directive, code in found:
        where = "%s:%d" % (os.path.basename(readme), line)
        if directive == "skip":
            print("skipped %s (readme-test: skip)" % where)
            continue
        text, counts_uses = program(code)
        src = os.path.join(work, "snippet_%d.cpp" % line)
        exe = os.path.join(work, "snippet_%d" % line)
        with open(src, "w") as f:
            f.write(text)
        cmd = [*cxx, "-std=c++20", "-O1", *sanitizer_flags(build), "-I" + os.path.join(source, "include"),
               *dependency_flags(),
               src, "-o", exe, library, "-Wl,-rpath," + libdir]
        c = subprocess.run(cmd, capture_output=True, text=True)
        if c.returncode != 0:
            print("FAIL %s does not compile (%s):\n%s" % (where, src, c.stderr[-3000:]))
            failed += 1
            continue
        if directive == "compile-only":
            print("ok %s (compiled)" % where)
            passed += 1
            continue
        try:
            r = subprocess.run([exe], cwd=source, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            print("FAIL %s runs past a minute" % where)
            failed += 1
            continue
        uses = re.search(r"readme-test: use\(\) called (\d+) times", r.stdout)
        if r.returncode != 0:
            print("FAIL %s exits %d: %s" % (where, r.returncode, (r.stderr or r.stdout)[-2000:]))
            failed += 1
        elif counts_uses and (not uses or int(uses.group(1)) == 0):
            print("FAIL %s never reaches use(...): %r" % (where, r.stdout[-500:]))
            failed += 1
        else:
            print("ok %s%s" % (where, " (use() called %s times)" % uses.group(1) if uses else ""))
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

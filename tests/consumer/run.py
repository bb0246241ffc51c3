#!/usr/bin/env python3
"""Two consumers of the library, built the ways a user would:

1. against a `meson install --destdir` copy of BUILD, through pkg-config: the flags come
   from looptrace.pc alone (C++20 included), the program links the versioned library;
2. as a Meson subproject (subproject/subprojects/looptrace links to the source tree):
   only looptrace's library is built, and the program runs.

usage: run.py --source SOURCE_ROOT --build BUILD_DIR [--keep DIR]

Each consumer runs subproject/consumer.cpp on the bundled example. Prints one line per
failed check and 'N passed, M failed' last."""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sanitizer import sanitizer_flags  # noqa: E402

tally = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    """Counts a check; a failure is printed with its detail."""
    tally["passed" if ok else "failed"] += 1
    if not ok:
        print("FAIL " + what + (": " + detail.strip()[-2000:] if detail.strip() else ""))
    return ok


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def soname(path):
    p = sh(["readelf", "-d", path])
    m = re.search(r"Library soname: \[([^\]]+)\]", p.stdout)
    return m.group(1) if m else None


def needed(path):
    return re.findall(r"Shared library: \[([^\]]+)\]", sh(["readelf", "-d", path]).stdout)


def pkg_config_consumer(source, build, work, example):
    stage = os.path.join(work, "stage")
    p = sh(["meson", "install", "-C", build, "--destdir", stage, "--no-rebuild", "--quiet"])
    if not check(p.returncode == 0, "meson install --destdir", p.stderr):
        return
    pcs = [os.path.join(d, f) for d, _, fs in os.walk(stage) for f in fs if f == "looptrace.pc"]
    if not check(len(pcs) == 1, "one looptrace.pc installed", str(pcs)):
        return
    pc_dir = os.path.dirname(pcs[0])
    prefix = re.search(r"^prefix=(.*)$", open(pcs[0]).read(), re.M).group(1)
    env = dict(os.environ, PKG_CONFIG_PATH=pc_dir)
    # The copy lives under the stage: point the .pc's prefix there.
    pc = ["pkg-config", "--define-variable=prefix=" + stage + prefix]
    cflags = sh([*pc, "--cflags", "looptrace"], env=env)
    libs = sh([*pc, "--libs", "looptrace"], env=env)
    libdir = sh([*pc, "--variable=libdir", "looptrace"], env=env).stdout.strip()
    if not check(cflags.returncode == 0 and libs.returncode == 0, "pkg-config --cflags --libs looptrace",
                 cflags.stderr + libs.stderr):
        return
    check("-std=c++20" in cflags.stdout.split(), "looptrace.pc gives -std=c++20", cflags.stdout)
    requires = sh([*pc, "--print-requires", "looptrace"], env=env).stdout.split()
    check("nlohmann_json" in requires, "looptrace.pc requires nlohmann_json", str(requires))
    lib = os.path.join(libdir, "liblooptrace.so")
    check(soname(lib) == "liblooptrace.so.0.1", "the installed library's SONAME is versioned", str(soname(lib)))

    cxx = shlex.split(os.environ.get("CXX", "c++"))
    app = os.path.join(work, "pkgconfig-consumer")
    src = os.path.join(source, "tests", "consumer", "subproject", "consumer.cpp")
    compile_cmd = [*cxx, *sanitizer_flags(build), src, *shlex.split(cflags.stdout), "-o", app, *shlex.split(libs.stdout),
                   "-Wl,-rpath," + libdir]
    p = sh(compile_cmd)
    if not check(p.returncode == 0, "g++ consumer.cpp $(pkg-config --cflags --libs looptrace)", p.stderr):
        return
    # The control: without the .pc's -std=c++20, GCC's default (C++17) cannot read the headers.
    p = sh([*cxx, "-fsyntax-only", src, *[f for f in shlex.split(cflags.stdout) if f != "-std=c++20"]])
    check(p.returncode != 0, "without looptrace.pc's -std=c++20 the headers do not compile")
    check("liblooptrace.so.0.1" in needed(app), "the consumer needs liblooptrace.so.0.1", str(needed(app)))
    r = sh([app, *example], cwd=source, timeout=60)
    check(r.returncode == 0, "the pkg-config consumer runs", r.stdout + r.stderr)


def subproject_consumer(source, work, example):
    build = os.path.join(work, "subproject-build")
    project = os.path.join(source, "tests", "consumer", "subproject")
    p = sh(["meson", "setup", build, project, "--force-fallback-for=looptrace", "--wrap-mode=nodownload",
            "-Dbuildtype=plain"])
    if not check(p.returncode == 0, "meson setup of a project with looptrace as a subproject", p.stdout + p.stderr):
        return
    p = sh(["ninja", "-C", build, "-j2"])
    if not check(p.returncode == 0, "the project and looptrace's library build", p.stdout + p.stderr):
        return
    sub = os.path.join(build, "subprojects", "looptrace")
    # What ninja built there: executables and libraries (not objects or symlinks).
    built = sorted(os.path.relpath(os.path.join(d, f), sub) for d, _, fs in os.walk(sub) for f in fs
                   if os.access(os.path.join(d, f), os.X_OK) and not os.path.islink(os.path.join(d, f)))
    check(built == ["src/liblooptrace.so.0.1.0"], "only the library is built in the subproject", str(built))
    check(soname(os.path.join(sub, "src", "liblooptrace.so.0.1.0")) == "liblooptrace.so.0.1",
          "the subproject's library has the versioned SONAME")
    r = sh([os.path.join(build, "consumer"), *example], cwd=source, timeout=60)
    check(r.returncode == 0, "the subproject consumer runs", r.stdout + r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--keep", help="build here and keep it")
    a = ap.parse_args()
    source, build = os.path.abspath(a.source), os.path.abspath(a.build)
    work = a.keep or tempfile.mkdtemp(prefix="looptrace-consumer-")
    example = [os.path.join("examples", "specs", f) for f in ("matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml")]
    try:
        for test in (lambda: pkg_config_consumer(source, build, work, example),
                     lambda: subproject_consumer(source, work, example)):
            try:
                test()
            except Exception as e:  # noqa: BLE001 - one failure, not the end of the run
                check(False, "a consumer check raised", repr(e))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (tally["passed"], tally["failed"]))
    return 1 if tally["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

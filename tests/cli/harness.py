"""What the CLI test scripts share: the executable under test (argv[1]), a scratch
folder, a tally of checks, and a main that runs test functions one by one (a crash in
one is one failure, not the end) and prints 'N passed, M failed' last."""
import os
import shutil
import subprocess
import sys
import tempfile

EXE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "looptrace"
TMP = tempfile.mkdtemp(prefix="looptrace-cli-")
tally = {"passed": 0, "failed": 0}


def check(ok, what):
    tally["passed" if ok else "failed"] += 1
    if not ok:
        print("FAIL " + what)


def write(name, text, mode="w"):
    path = os.path.join(TMP, name)
    with open(path, mode) as f:
        f.write(text)
    return path


def run(*args, text=True, timeout=60):
    """Runs the executable with args; text output decoded with replacement."""
    if text:
        return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout,
                              errors="replace")
    return subprocess.run([EXE, *args], capture_output=True, timeout=timeout)


def guarded(test, *args):
    """Calls test(*args); an exception counts as one failed check. Returns its result."""
    try:
        return test(*args)
    except Exception as e:
        check(False, "%s raised %r" % (test.__name__, e))
        return None


def main(tests):
    try:
        for test in tests:
            guarded(test)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


def finish():
    print("%d passed, %d failed" % (tally["passed"], tally["failed"]))
    return 1 if tally["failed"] else 0

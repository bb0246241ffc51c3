"""Shared paths for the Python tests. Run from the source root with
PYTHONPATH=build/python (what .ci/test does); LOOPTRACE_CLI names the CLI to compare
with (default build/src/looptrace)."""

import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[2]
if not any(Path(p).resolve() == ROOT / "build" / "python" for p in sys.path if p):
    sys.path.insert(0, str(ROOT / "build" / "python"))

SHARED = ROOT.parent / "shared"
EXAMPLES_DIR = SHARED / "accelforge-examples"  # AccelForge's own example files
CONFORMANCE = SHARED / "conformance"
SPECS = Path(__file__).resolve().parent / "specs"
CLI = Path(os.environ.get("LOOPTRACE_CLI", ROOT / "build" / "src" / "looptrace"))

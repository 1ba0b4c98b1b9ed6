"""Wall time, CPU time and peak RSS of a command, for the benchmark scripts.

The command runs under bench/measure.c (built here with the C compiler on
first use, into the target directory): see there why not from Python.
"""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
SRC = os.path.join(ROOT, "bench", "measure.c")


def helper():
    """The path of the built helper (built if missing or older than its source)."""
    exe = os.path.join(TARGET, "bench-measure")
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(SRC):
        return exe
    os.makedirs(TARGET, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-O2", "-Wall", "-o", exe, SRC])
    if r.returncode != 0:
        raise RuntimeError(f"building {SRC} with {cc} failed")
    return exe


def start(cmd, result_file, **popen):
    """Starts `cmd` under the helper, which writes its figures to result_file."""
    return subprocess.Popen([helper(), result_file] + list(cmd), **popen)


def read(result_file):
    """(wall s, cpu s, peak RSS KiB, exit code) of a finished run."""
    wall, cpu, rss, code = open(result_file).read().split()
    return float(wall), float(cpu), int(rss), int(code)

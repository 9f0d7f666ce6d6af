#!/usr/bin/env python3
"""What lrt costs to compile: CPU seconds and peak memory per translation unit, and optionally the
wall time of a cold build.

Each named file is compiled alone, one after another, with the exact command of a configured
build (its compile_commands.json: the build's own flags), ccache off, the object written to a
temporary file; the compiler's user + system seconds and its peak resident memory come from
wait4(2). With --cold, a fresh build folder of the default preset is configured and the same
targets are built from nothing with ccache off: the wall time, the CPU time of the whole build
(user + system of every compiler and linker), the steps ninja ran and `ctest -N`'s count, then the
link time alone (the programs removed and linked again).

  python3 bench/compile_cost.py                          # the default files, build/ as configured
  python3 bench/compile_cost.py --build build-release examples/tools/train.cpp
  python3 bench/compile_cost.py --opt 2 examples/quickstart.cpp   # at -O2 instead of the build's -O3
  python3 bench/compile_cost.py --cold lrt-train lrt-eval lrt-generate --jobs 2
  python3 bench/compile_cost.py --cold --jobs 2 -D LRT_VARIANTS_FILE=$PWD/tests/tools/variants.cmake  # CI's

Run it on a quiet machine: the numbers are the compiler's own, but a busy machine still slows a
compile by sharing its caches. Python 3 from Debian, nothing else.
"""

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

DEFAULT_FILES = [
    "examples/quickstart.cpp",
    "examples/tools/server.cpp",
    "examples/tools/train.cpp",
    "examples/tools/generate.cpp",
    "examples/tools/eval.cpp",
    "examples/tools/quantize.cpp",
    "examples/tools/programs.cpp",
    "examples/tools/capi/lrt_c.cpp",
    "include/lrt/runtime/runtime.cpp",
    "examples/CMakeFiles/lrt_runtime.dir/Unity/unity_0_cxx.cxx",
    "examples/runtime_quickstart.cpp",
]


def compile_one(entry, obj, opt=None):
    """Runs one compile command with its output sent to `obj`: (CPU seconds, peak bytes). `opt`
    (e.g. "2") replaces the command's optimisation level."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    if opt is not None:
        args = [f"-O{opt}" if (a.startswith("-O") and len(a) <= 3) else a for a in args]
    out = []
    skip = False
    for a in args:  # the object goes to the temporary file; dependency files are left out
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            out += ["-o", obj] if a == "-o" else []
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        out.append(a)
    env = dict(os.environ, CCACHE_DISABLE="1")
    pid = os.fork()
    if pid == 0:  # the child: the compiler, in the build's folder
        try:
            os.chdir(entry["directory"])
            os.execvpe(out[0], out, env)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"compile_cost: the compile of {entry['file']} failed: {' '.join(out)}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def per_file(build, files, opt=None):
    db_path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db_path):
        raise SystemExit(f"compile_cost: no {db_path}: configure the build first (cmake --preset default)")
    with open(db_path) as f:
        db = json.load(f)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in files:
            matches = [e for e in db if os.path.normpath(e["file"]).endswith(os.path.normpath(name))]
            if not matches:
                raise SystemExit(f"compile_cost: {name} is not a file of {db_path}")
            cpu, peak = compile_one(matches[0], os.path.join(tmp, "unit.o"), opt)
            rows.append((name, cpu, peak))
            print(f"  {name}: {cpu:.1f} s CPU, {peak / 1e9:.2f} GB", file=sys.stderr, flush=True)
    return rows


def cold_build(source, targets, jobs, defines):
    with tempfile.TemporaryDirectory(prefix="lrt-cold-") as tmp:
        env = dict(os.environ, CCACHE_DISABLE="1")
        subprocess.run(["cmake", "--preset", "default", "-B", tmp] + [f"-D{d}" for d in defines], cwd=source,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        cmd = ["cmake", "--build", tmp, "-j", str(jobs)] + (["--target"] + targets if targets else [])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        steps = 0  # ninja's log: one line per step run
        try:
            with open(os.path.join(tmp, ".ninja_log")) as f:
                steps = sum(1 for line in f if not line.startswith("#"))
        except OSError:
            pass
        removed = 0  # the link step alone: the programs removed and linked again
        for t in targets:
            p = os.path.join(tmp, "bin", t)
            if os.path.exists(p):
                os.remove(p)
                removed += 1
        t0 = time.monotonic()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        link = time.monotonic() - t0
        tests = subprocess.run(["ctest", "-N"], cwd=tmp, capture_output=True, text=True).stdout.strip().splitlines()
        return wall, cpu, steps, link, removed, (tests[-1] if tests else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="files of compile_commands.json, by path suffix")
    ap.add_argument("--build", default="build", help="a configured build folder (default: build)")
    ap.add_argument("--cold", nargs="*", metavar="TARGET",
                    help="also time a cold default-preset build of these targets (none named: all)")
    ap.add_argument("--opt", metavar="LEVEL", help="compile the files at -OLEVEL instead of the build's own level")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="parallel jobs of the cold build")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="VAR=VALUE",
                    help="a cache entry for the cold build's configure (as CI: "
                         "-D LRT_VARIANTS_FILE=$PWD/tests/tools/variants.cmake)")
    a = ap.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = a.build if os.path.isabs(a.build) else os.path.join(source, a.build)
    files = a.files or DEFAULT_FILES
    tree = source  # the source tree the build was configured from (its CMakeCache.txt)
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    tree = line.split("=", 1)[1].strip()
    except OSError:
        pass
    git = subprocess.run(["git", "-C", tree, "describe", "--always", "--dirty"], capture_output=True, text=True)
    level = f", -O{a.opt}" if a.opt else ""
    print(f"lrt {git.stdout.strip()} ({tree}): {os.cpu_count()} CPUs, build {build}{level}, ccache off")
    print()
    print("| file | CPU s | peak GB |")
    print("|---|---:|---:|")
    for name, cpu, peak in per_file(build, files, a.opt):
        print(f"| {name} | {cpu:.1f} | {peak / 1e9:.2f} |")
    if a.cold is not None:
        if shutil.which("cmake") is None:
            raise SystemExit("compile_cost: --cold needs cmake")
        wall, cpu, steps, link, n, tests = cold_build(source, a.cold, a.jobs, a.defines)
        what = ", ".join(a.cold) if a.cold else "all targets"
        print()
        print(f"cold default-preset build of {what}, -j {a.jobs}: {wall:.0f} s wall, {cpu:.0f} s CPU, {steps} steps"
              f" ({tests}); linking {n} programs again: {link:.1f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark `python -m diagnose` against `grep -cE` on large generated vLLM logs.

    python bench/run.py [--sizes 1,10] [--workdir /tmp/diagnose-bench] [--keep]
                        [--gzip] [--stdin] [--repeat N] [--seed 1] [--no-small]

For each size (GB = 10^9 bytes of uncompressed log text) it generates a vLLM v0.11 log
with bench/generate_log.py (or reuses one already in the workdir), reads it once to warm
the page cache, then times in the same run:

  (a) grep -cE '<keywords>' FILE   the keyword set the tool's scanner pre-filters on
                                  (diagnose.sources.readers.scanner.GREP_KEYWORDS, or a built-in
                                  copy of it while that module does not exist);
  (b) python -m diagnose --format json FILE   wall time and peak RSS of that process
                                  (os.wait4 rusage: the child and whatever it waited for);
  (c) the ratio (b)/(a);
  (d) with --gzip: `zcat FILE.gz | grep -cE ...` against diagnose reading FILE.gz;
      with --stdin: `grep -cE ... < FILE` against `diagnose - < FILE` (stdin is the file), and
      `cat FILE | grep -cE ...` against `cat FILE | diagnose -` (a pipe, as from kubectl logs);
  (e) a ~10 KB log end to end, interpreter start included, and the bundled seed-003 log
      (64 KB with engine stats lines, which a real small log has: signals, rules, report);
  (f) with --cold: each case again with the input dropped from the page cache before every
      run of either tool (posix_fadvise DONTNEED), as a log downloaded earlier or written by
      another machine is read from disk.

grep runs with LC_ALL=C (its fastest mode: the hardest baseline). diagnose runs with
cwd = the repository root and PYTHONPATH = the repository root, so it works uninstalled, with
its bytecode compiled first and PYTHONDONTWRITEBYTECODE dropped, as an installed copy runs.
Goal: ratio <= 2 and peak RSS <= 256 MB.

`--table` runs instead every case of the speed goals (bench/table.py: a stats-heavy log, 4 and
16 GB, 1-100 MB, a folder of 200 real logs, .gz against pigz, many launches, a small log end to
end, --follow), each beside its reference; `--update-readme` writes that table into README.md. Prints a plain table and a markdown table, and
writes results.json to the workdir. Standard library only.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.generate_log import GENERATOR_VERSION, generate  # noqa: E402

GOAL_RATIO = 2.0        # plain file and stdin, against grep -cE
GOAL_GZ_RATIO = 1.5     # .gz, against zcat | grep -cE
GOAL_SMALL_S = 0.6      # a ~10 KB log end to end, interpreter start included
GOAL_RSS_MB = 256.0
SMALL_BYTES = 10_000

# Copy of the scanner's keyword list, used only when diagnose.sources.readers.scanner cannot be
# imported (e.g. before the package exists).
FALLBACK_KEYWORDS = [
    "throughput:", "with config:", "non-default args", "KV cache", "Maximum concurrency",
    "blocks:", "took", "Cudagraph", "CUDA graph", "allreduce", "NCCL", "preempted", "Error",
    "out of memory", "HTTP/1", "request", "eager",
]


# ------------------------------------------------------------------------------ helpers

def load_keywords() -> tuple[list[str], str]:
    try:
        from diagnose.sources.readers.scanner import GREP_KEYWORDS  # type: ignore
        kws = [str(k) for k in GREP_KEYWORDS]
        if not kws:
            raise ValueError("GREP_KEYWORDS is empty")
        return kws, "diagnose.sources.readers.scanner.GREP_KEYWORDS"
    except Exception as exc:  # ImportError before the package exists, or anything odd
        return list(FALLBACK_KEYWORDS), "built-in fallback list (%s: %s)" % (
            type(exc).__name__, exc)


def ere_pattern(keywords: list[str]) -> str:
    """Alternation of plain strings, escaped for grep -E."""
    return "|".join(re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", k) for k in keywords)


def diagnose_available() -> tuple[bool, str]:
    try:
        spec = importlib.util.find_spec("diagnose")
        if spec is None:
            return False, "package `diagnose` not found under %s" % REPO
        if importlib.util.find_spec("diagnose.__main__") is None:
            return False, "package `diagnose` has no __main__ module (python -m diagnose)"
    except Exception as exc:
        return False, "importing `diagnose` failed: %s: %s" % (type(exc).__name__, exc)
    return True, ""


class Timed:
    def __init__(self, rc: int, wall: float, cpu: float, maxrss_mb: float, out: bytes, err: bytes):
        self.rc, self.wall, self.cpu, self.maxrss_mb, self.out, self.err = rc, wall, cpu, maxrss_mb, out, err


# ru_maxrss is a process's high-water mark and survives exec: a command started from this process
# (tens of MB once it has generated inputs) reported at least this process's RSS (a 64 KB log run
# showed 44 MB, not its 27). So each command starts from a small launcher (its own ~10 MB is the
# floor), which times it and hands back the command's exit status, wall time and rusage on a pipe.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[2:])
_, status, ru = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
os.write(int(sys.argv[1]), json.dumps([os.waitstatus_to_exitcode(status), wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss]).encode())
"""


def run_timed(cmd, *, cwd=None, env=None, timeout=None, stdin_path=None, before=None) -> Timed:
    """Run cmd; return wall time and the rusage of that command (incl. what it waited for), as
    the launcher above measured them. `before` runs first, untimed (the cold cases drop the input
    from the page cache there)."""
    if before is not None:
        before()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            open(stdin_path or os.devnull, "rb") as stdin:
        rd, wr = os.pipe()
        try:
            proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(wr), *map(str, cmd)], stdout=out,
                                    stderr=err, stdin=stdin, cwd=cwd, env=env, pass_fds=(wr,),
                                    start_new_session=True)
        finally:
            os.close(wr)
        timer = None
        if timeout:
            # the launcher and the command: one session, one process group
            timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
            timer.daemon = True
            timer.start()
        try:
            with os.fdopen(rd, "rb") as f:
                got = f.read()
            proc.wait()
        finally:
            if timer is not None:
                timer.cancel()
        out.seek(0)
        err.seek(0)
        if got:
            rc, wall, cpu, maxrss = json.loads(got)
        else:       # killed (timeout) before it could say
            rc, wall, cpu, maxrss = proc.returncode if proc.returncode else -9, float(timeout or 0), 0.0, 0
        # ru_maxrss is in KiB on Linux (bytes on macOS)
        scale = 1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0
        return Timed(rc, wall, cpu, maxrss / scale, out.read(), err.read())


def best_of(n: int, fn):
    results = [fn() for _ in range(max(1, n))]
    return min(results, key=lambda r: r.wall)


def warm_cache(path: Path) -> float:
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(8 << 20):
            pass
    return time.perf_counter() - t0


def fmt_size(n: float) -> str:
    if n >= 1e9:
        return "%.2f GB" % (n / 1e9)
    if n >= 1e6:
        return "%.1f MB" % (n / 1e6)
    return "%.1f KB" % (n / 1e3)


def size_label(gb: float) -> str:
    return ("%g" % gb).replace(".", "p") + "gb"


def ensure_log(workdir: Path, name: str, size_bytes: int, seed: int, gz: bool) -> tuple[Path, bool, dict]:
    """Return (path, generated_now, meta); reuse a file of the right size if present."""
    path = workdir / name
    meta_path = workdir / (name + ".meta.json")
    if path.exists():
        actual = path.stat().st_size
        meta = None
        if meta_path.exists():
            try:
                meta = json.loads(meta_path.read_text())
            except ValueError:
                meta = None
        if meta is not None:
            if (meta.get("size_request") == size_bytes and meta.get("seed") == seed
                    and meta.get("generator_version") == GENERATOR_VERSION
                    and meta.get("file_bytes") == actual):
                print("  reusing %s (%s)" % (path, fmt_size(meta.get("bytes", actual))))
                return path, False, meta
        elif not gz and size_bytes <= actual < size_bytes + 1_000_000:
            print("  reusing %s (%s, no .meta.json)" % (path, fmt_size(actual)))
            return path, False, {"bytes": actual, "file_bytes": actual}
    need = size_bytes * (0.3 if gz else 1.0) + 64e6
    free = shutil.disk_usage(workdir).free
    if free < need:
        raise RuntimeError("not enough disk in %s: %s free, ~%s needed"
                           % (workdir, fmt_size(free), fmt_size(need)))
    print("  generating %s (%s%s) ..." % (path, fmt_size(size_bytes), ", gzip" if gz else ""),
          end="", flush=True)
    tmp = workdir / (name + ".part")
    info = generate(tmp, size_bytes, seed=seed, gzip=gz)
    os.replace(tmp, path)
    meta = dict(info, path=str(path), size_request=size_bytes, file_bytes=path.stat().st_size)
    meta_path.write_text(json.dumps(meta, indent=1))
    print(" %.1f s (%.0f MB/s)" % (info["seconds"], info["bytes"] / 1e6 / max(info["seconds"], 1e-9)))
    return path, True, meta


def tail(b: bytes, n: int = 600) -> str:
    s = b.decode("utf-8", "replace").strip()
    return s[-n:]


# ------------------------------------------------------------------------------ measuring

def evict(path: Path) -> None:
    """Drop the file's pages from the page cache (no root needed: clean pages of a file we can
    open); the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_share(path: Path) -> float | None:
    """The share of the file in the page cache, from util-linux fincore where it is installed."""
    if not shutil.which("fincore"):
        return None
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                       capture_output=True, text=True)
    try:
        return int(r.stdout.split()[0]) / max(1, path.stat().st_size)
    except (ValueError, IndexError):
        return None


def measure_grep(path: Path, pattern: str, gz: bool, repeat: int, stdin: bool | str = False,
                 cold: bool = False) -> dict:
    env = dict(os.environ, LC_ALL="C")
    if stdin:
        cmd = ["grep", "-cE", "--", pattern]
    elif gz:
        cmd = ["bash", "-c", 'set -o pipefail; zcat -- "$1" | grep -cE -- "$2"', "grep",
               str(path), pattern]
    else:
        cmd = ["grep", "-cE", "--", pattern, str(path)]
    if stdin == "pipe":
        cmd, stdin = piped(cmd, path), False
    r = best_of(repeat, lambda: run_timed(cmd, env=env, stdin_path=path if stdin else None,
                                          before=(lambda: evict(path)) if cold else None))
    res = {"seconds": r.wall, "rc": r.rc, "maxrss_mb": r.maxrss_mb}
    if r.rc in (0, 1):  # 1 = no match
        try:
            res["count"] = int(r.out.split()[-1]) if r.out.strip() else 0
        except ValueError:
            res["error"] = "unexpected grep output: %r" % tail(r.out, 200)
    else:
        res["error"] = "grep rc=%d: %s" % (r.rc, tail(r.err, 300))
    return res


_compiled = False


def compile_package() -> None:
    """The checkout's bytecode, written once as `pip install` writes it (see measure_diagnose)."""
    global _compiled
    if not _compiled:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "diagnose")], check=False,
                       capture_output=True)
        _compiled = True


def measure_diagnose(path: Path, repeat: int, timeout: float, stdin: bool | str = False,
                     cold: bool = False) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # As installed: pip compiles the bytecode at install. With PYTHONDONTWRITEBYTECODE set (some
    # sandboxes and containers do), every run would compile ~100 modules first: 0.2-0.3 s that
    # no installed copy pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    compile_package()
    cmd = [sys.executable, "-m", "diagnose", "--format", "json", "-" if stdin else str(path)]
    if stdin == "pipe":
        cmd, stdin = piped(cmd, path), False
    r = best_of(repeat, lambda: run_timed(cmd, cwd=str(REPO), env=env, timeout=timeout,
                                          stdin_path=path if stdin else None,
                                          before=(lambda: evict(path)) if cold else None))
    res = {"seconds": r.wall, "cpu_seconds": r.cpu, "rc": r.rc, "maxrss_mb": r.maxrss_mb,
           "stdout_bytes": len(r.out)}
    if r.rc in (0, 1):
        try:
            doc = json.loads(r.out)
            res["json_ok"] = True
            if isinstance(doc, dict) and isinstance(doc.get("analyses"), list):     # schema_version 2
                res["n_findings"] = sum(len(a.get("findings") or []) for a in doc["analyses"])
        except ValueError as exc:
            res["json_ok"] = False
            res["error"] = "stdout is not JSON (%s): %r" % (exc, tail(r.out, 200))
    elif r.rc == 2:
        res["error"] = "diagnose reported an input error (rc=2): %s" % tail(r.err)
    elif r.rc < 0 or r.rc in (124, 137, -9):
        res["error"] = "diagnose killed (rc=%d, timeout %ss?)" % (r.rc, timeout)
    else:
        res["error"] = "diagnose failed (rc=%d): %s" % (r.rc, tail(r.err))
    return res


def measure_interpreter(repeat: int) -> float:
    r = best_of(repeat, lambda: run_timed([sys.executable, "-c", "pass"]))
    return r.wall


def piped(cmd: list[str], path: Path) -> list[str]:
    """`cat FILE | cmd`: the input comes through a pipe, as from `kubectl logs`."""
    return ["bash", "-c", 'set -o pipefail; f="$1"; shift; cat -- "$f" | "$@"', "pipe", str(path), *cmd]


# ------------------------------------------------------------------------------ report

def status_of(row: dict) -> str:
    d = row.get("diagnose")
    if d is None:
        return "skipped"
    if "error" in d:
        return "ERROR"
    ok = True
    goal = GOAL_GZ_RATIO if row.get("gzip") else GOAL_RATIO
    if not row.get("end_to_end") and row.get("ratio") is not None and row["ratio"] > goal:
        ok = False
    if row.get("end_to_end") and d.get("seconds", 0) > GOAL_SMALL_S:
        ok = False
    if d.get("maxrss_mb", 0) > GOAL_RSS_MB:
        ok = False
    return "ok" if ok else "MISS"


def fmt_s(sec: float) -> str:
    return "%.3f" % sec if sec < 1 else "%.2f" % sec


def render(rows: list[dict]) -> tuple[str, str]:
    head = ["case", "size", "grep s", "diagnose s", "ratio", "peak RSS MB", "goal"]
    table = []
    for row in rows:
        g, d = row.get("grep"), row.get("diagnose")
        table.append([
            row["case"],
            fmt_size(row["bytes"]),
            fmt_s(g["seconds"]) if g and "error" not in g else ("-" if not g else "err"),
            fmt_s(d["seconds"]) if d and "error" not in d else ("-" if not d else "err"),
            "n/a" if row.get("end_to_end") else (
                "%.2f" % row["ratio"] if row.get("ratio") is not None else "-"),
            "%.0f" % d["maxrss_mb"] if d and "error" not in d else "-",
            status_of(row),
        ])
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in table:
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    plain = "\n".join(lines)
    md = ["| " + " | ".join(head) + " |",
          "|" + "|".join(["---", "---:", "---:", "---:", "---:", "---:", "---"]) + "|"]
    for r in table:
        md.append("| " + " | ".join(r) + " |")
    return plain, "\n".join(md)


def where_time_goes(rows: list[dict]) -> tuple[list[str], dict]:
    """Split diagnose's time into what every run pays and what the bytes cost.

    The seed-003 log end to end is the fixed cost of a run with engine stats (interpreter,
    imports, rules, signals, report): its size adds next to nothing. What a big
    log adds beyond it is the scanning, to set against grep's time for the same bytes."""
    fixed = next((r["diagnose"]["seconds"] for r in rows
                  if r["case"].startswith("seed003") and "error" not in (r.get("diagnose") or {})), None)
    if fixed is None:
        return [], {}
    out = ["  fixed cost of a run with engine stats (seed-003 log end to end): %s s" % fmt_s(fixed)]
    info: dict = {"seconds": fixed, "cases": {}}
    for r in rows:
        g, d = r.get("grep") or {}, r.get("diagnose") or {}
        if r.get("end_to_end") or r.get("cold") or "seconds" not in g or "seconds" not in d or g["seconds"] <= 0:
            continue
        goal = (GOAL_GZ_RATIO if r.get("gzip") else GOAL_RATIO) * g["seconds"]
        scan = max(0.0, d["seconds"] - fixed)
        info["cases"][r["case"]] = {"scan_seconds": scan, "scan_ratio": scan / g["seconds"],
                                    "fixed_share_of_goal": fixed / goal}
        out.append("  %-14s scanning %s s = %.2f x grep; the fixed cost alone is %3.0f %% of the goal's %s s"
                   % (r["case"], fmt_s(scan), scan / g["seconds"], 100 * fixed / goal, fmt_s(goal)))
    return out, info


# ------------------------------------------------------------------------------ main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Benchmark diagnose against grep on big vLLM logs.")
    ap.add_argument("--sizes", default="1,10",
                    help="comma-separated sizes in GB (10^9 bytes), e.g. 0.1,1,10 (default 1,10)")
    ap.add_argument("--workdir", default="/tmp/diagnose-bench", type=Path)
    ap.add_argument("--keep", action="store_true",
                    help="keep the logs generated by this run (reused next time)")
    ap.add_argument("--gzip", action="store_true",
                    help="also time zcat|grep against diagnose on a .gz of the same log")
    ap.add_argument("--stdin", action="store_true",
                    help="also time `diagnose -` with the log on stdin, redirected and through a pipe "
                         "(against grep reading the same)")
    ap.add_argument("--cold", action="store_true",
                    help="also time every case with the input dropped from the page cache before "
                         "each run of either tool")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement; best is kept")
    ap.add_argument("--no-small", action="store_true", help="skip the ~10 KB end-to-end case")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds before one diagnose run is killed (default 3600)")
    ap.add_argument("--no-diagnose", action="store_true",
                    help="only generate logs and time grep (baseline numbers)")
    ap.add_argument("--table", action="store_true",
                    help="run every case of the speed goals instead (bench/table.py): each beside its "
                         "reference, with ratio, peak RSS and whether the goal is met")
    ap.add_argument("--huge", action="store_true", help="--table: also the 16 GB case (16 GB of disk, minutes)")
    ap.add_argument("--update-readme", action="store_true",
                    help="--table: write the table into README.md's performance section")
    args = ap.parse_args(argv)
    if args.table:
        from bench import table
        kws, _ = load_keywords()
        rows = table.run_table(args.workdir, ere_pattern(kws), args.repeat, args.huge, args.keep)
        print("\n" + table.markdown(rows))
        print("\nwrote %s" % table.save(rows, args.workdir))
        if args.update_readme:
            table.update_readme(rows, time.strftime("%Y-%m-%d"))
        return 0

    try:
        sizes = [float(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error("--sizes must be comma-separated numbers (GB)")
    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)

    keywords, kw_source = load_keywords()
    pattern = ere_pattern(keywords)
    have_diag, why_not = diagnose_available()
    if args.no_diagnose:
        have_diag, why_not = False, "--no-diagnose given"
    print("repo:      %s" % REPO)
    print("python:    %s (%s)" % (sys.executable, sys.version.split()[0]))
    print("keywords:  %d from %s" % (len(keywords), kw_source))
    print("grep -E:   %s" % pattern)
    print("workdir:   %s" % workdir)
    if not have_diag:
        print("\n*** diagnose step will be SKIPPED: %s.\n*** grep timings are still measured."
              % why_not)

    generated: list[Path] = []
    rows: list[dict] = []
    temps = (False, True) if args.cold else (False,)

    def bench_file(case: str, path: Path, nbytes: int, gz: bool, repeat: int, stdin: bool | str = False,
                   cold: bool = False) -> None:
        row = {"case": case + (" cold" if cold else ""), "path": str(path), "bytes": nbytes,
               "gzip": gz, "stdin": stdin, "cold": cold}
        if cold:
            evict(path)
            share = cached_share(path)
            print("  cold: dropped from the page cache before every run%s"
                  % ("" if share is None else " (%.0f %% left cached after a drop)" % (100 * share)))
        else:
            print("  warming page cache ... %.1f s" % warm_cache(path))
        row["grep"] = measure_grep(path, pattern, gz, repeat, stdin, cold)
        g = row["grep"]
        if "error" in g:
            print("  grep: %s" % g["error"])
        else:
            print("  grep:     %7.2f s  (%d matching lines)" % (g["seconds"], g.get("count", -1)))
        if have_diag:
            d = measure_diagnose(path, repeat, args.timeout, stdin, cold)
            row["diagnose"] = d
            if "error" in d:
                print("  diagnose: %s" % d["error"])
            else:
                print("  diagnose: %7.2f s  (cpu %.2f s, peak RSS %.0f MB, rc=%d, %d B of JSON)"
                      % (d["seconds"], d["cpu_seconds"], d["maxrss_mb"], d["rc"],
                         d["stdout_bytes"]))
                if "error" not in g and g["seconds"] > 0:
                    row["ratio"] = d["seconds"] / g["seconds"]
        else:
            print("  diagnose: skipped (%s)" % why_not)
        rows.append(row)

    try:
        for gb in sizes:
            size_bytes = int(gb * 1e9)
            label = size_label(gb)
            print("\n== %s GB" % ("%g" % gb))
            try:
                path, new, meta = ensure_log(workdir, "vllm-%s-s%d.log" % (label, args.seed),
                                             size_bytes, args.seed, False)
            except RuntimeError as exc:
                print("  SKIP: %s" % exc)
                continue
            if new:
                generated.append(path)
            for cold in temps:
                bench_file("%g GB" % gb, path, meta.get("bytes", path.stat().st_size), False,
                           args.repeat, cold=cold)
            if args.stdin:
                print("  -- on stdin (a redirect: `diagnose - < FILE`)")
                for cold in temps:
                    bench_file("%g GB stdin" % gb, path, meta.get("bytes", path.stat().st_size), False,
                               args.repeat, stdin=True, cold=cold)
                print("  -- through a pipe (`cat FILE | diagnose -`)")
                for cold in temps:
                    bench_file("%g GB pipe" % gb, path, meta.get("bytes", path.stat().st_size), False,
                               args.repeat, stdin="pipe", cold=cold)
            if args.gzip:
                try:
                    gpath, new, gmeta = ensure_log(workdir, "vllm-%s-s%d.log.gz" % (label, args.seed),
                                                   size_bytes, args.seed, True)
                except RuntimeError as exc:
                    print("  SKIP gzip: %s" % exc)
                    continue
                if new:
                    generated.append(gpath)
                print("  -- gzip (%s on disk)" % fmt_size(gpath.stat().st_size))
                for cold in temps:
                    bench_file("%g GB .gz" % gb, gpath, gmeta.get("bytes", 0), True, args.repeat,
                               cold=cold)

        if not args.no_small:
            print("\n== small log, end to end (interpreter start included, best of %d)"
                  % max(5, args.repeat))
            path, new, meta = ensure_log(workdir, "vllm-small-s%d.log" % args.seed, SMALL_BYTES,
                                         args.seed, False)
            if new:
                generated.append(path)
            bench_file("small (e2e)", path, meta.get("bytes", path.stat().st_size), False,
                       max(5, args.repeat))
            rows[-1]["end_to_end"] = True
            rows[-1].pop("ratio", None)
            seed = REPO / "fixtures" / "seed003" / "realtime.log"
            if seed.exists():
                print("\n== the bundled seed-003 log, end to end (with engine stats lines)")
                bench_file("seed003 (e2e)", seed, seed.stat().st_size, False, max(5, args.repeat))
                rows[-1]["end_to_end"] = True
                rows[-1].pop("ratio", None)
            py = measure_interpreter(max(5, args.repeat))
            rows[-1]["python_startup_seconds"] = py
            print("  bare `python -c pass`: %.3f s" % py)
    finally:
        if not args.keep:
            for p in generated:
                for q in (p, p.with_name(p.name + ".meta.json")):
                    try:
                        q.unlink()
                    except FileNotFoundError:
                        pass

    if not rows:
        print("\nnothing measured")
        return 1
    plain, md = render(rows)
    print("\nResults (goal: ratio <= %g, .gz <= %g, small end to end <= %g s, peak RSS <= %g MB;"
          " grep with LC_ALL=C):\n" % (GOAL_RATIO, GOAL_GZ_RATIO, GOAL_SMALL_S, GOAL_RSS_MB))
    print(plain)
    if rows and rows[-1].get("end_to_end"):
        print("\n(small (e2e): diagnose s is the end-to-end latency incl. interpreter start "
              "(bare python: %.3f s); no ratio is computed for it.)"
              % rows[-1].get("python_startup_seconds", 0.0))
    floor_lines, floor = where_time_goes(rows)
    if floor_lines:
        print("\nWhere the time goes:")
        print("\n".join(floor_lines))
    print("\nMarkdown:\n")
    print(md)
    if not have_diag:
        print("\ndiagnose was not measured: %s." % why_not)
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "keywords": keywords,
        "keywords_source": kw_source,
        "goal": {"ratio": GOAL_RATIO, "gzip_ratio": GOAL_GZ_RATIO, "small_seconds": GOAL_SMALL_S,
                 "rss_mb": GOAL_RSS_MB},
        "rows": rows,
        "fixed_cost": floor,
    }
    out = workdir / "results.json"
    out.write_text(json.dumps(result, indent=1))
    print("\nwrote %s" % out)
    if any("error" in (r.get("diagnose") or {}) for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

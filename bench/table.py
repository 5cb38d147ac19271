"""The speed goals, every case beside its reference, measured in one run (`python bench/run.py --table`).

Each row: the case, its input's size, the reference it is judged against (another tool or another
diagnose run, measured in the same call), both times, the ratio, diagnose's peak RSS, the goal
and whether it is met. Cases:

- a stats-heavy 1 GB vLLM log (a quiet server: an engine stats line every ~8 requests, ~80,000
  per GB) against `LC_ALL=C grep -cE` with the scanner's keywords; the same without the C reader
  against the C reader; the busy 1 GB log (request lines, few stats) against grep;
- the stats-heavy log 4 and 16 times over (`--huge` for 16) against `wc -l`: memory flat in size;
- 1, 10 and 100 MB logs against what the 1 GB log costs per byte plus a run's fixed cost (no slow band);
- 200 small real logs in a folder (fixtures/real and ../shared/samples, repeated) against one process;
- the busy 1 GB log gzipped against `pigz -dc | grep -cE` (`zcat` where pigz is not installed: said so);
- 21,000 short launches in one file against a single-server log of the same size; 9,800 copies of
  the seed-003 log (each a launch with stats lines) likewise;
- seed 003's 64 KB log end to end against `python -c pass`;
- `--follow` on the 1 GB log when 10 MB are appended: the CPU of the pass that follows against
  diagnosing those 10 MB alone (10 MB appended three times, a pass after each: the least of them).

Inputs are generated in the work folder and deleted afterwards unless --keep. Standard library only.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "fixtures" / "real"
SAMPLES = REPO.parent / "shared" / "samples"
SEED = REPO / "fixtures" / "seed003" / "realtime.log"
GOAL_RSS_MB = 256.0
GB = 1_000_000_000


class Row(dict):
    pass


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def diag(args, repeat: int, **env):
    from bench.run import best_of, compile_package, run_timed
    compile_package()
    cmd = [sys.executable, "-m", "diagnose", "--format", "json", "-o", os.devnull, *map(str, args)]
    r = best_of(repeat, lambda: run_timed(cmd, cwd=str(REPO), env=_env(**env)))
    if r.rc not in (0, 1):
        raise RuntimeError("diagnose %s exited %d: %s" % (" ".join(map(str, args)), r.rc, r.err.decode()[-400:]))
    return r


def shell(cmd: str, repeat: int, *args):
    from bench.run import best_of, run_timed
    return best_of(repeat, lambda: run_timed(["bash", "-c", "set -o pipefail; " + cmd, "sh", *map(str, args)],
                                             env=dict(os.environ, LC_ALL="C")))


def row(case, nbytes, ref_name, ref_s, d, goal, ok, note="") -> Row:
    r = Row(case=case, bytes=nbytes, reference=ref_name, reference_s=ref_s, diagnose_s=d.wall,
            cpu_s=d.cpu, rss_mb=d.maxrss_mb, ratio=(d.wall / ref_s) if ref_s else None, goal=goal,
            met=bool(ok) and d.maxrss_mb <= GOAL_RSS_MB, note=note)
    print("  %-44s %8.2f s  ref %-28s %8.3f s  ratio %6s  RSS %4.0f MB  %s" % (
        case, d.wall, ref_name, ref_s or 0, "%.2f" % r["ratio"] if r["ratio"] else "n/a", d.maxrss_mb,
        "ok" if r["met"] else "MISS"), flush=True)
    return r


def _repeat_file(src: Path, dst: Path, times: int) -> None:
    with open(dst, "wb") as out:
        for _ in range(times):
            with open(src, "rb") as f:
                shutil.copyfileobj(f, out, 8 << 20)


def _folder(work: Path, n: int = 200) -> Path:
    d = work / "folder"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    logs = sorted(REAL.glob("*.log")) + sorted(p for p in SAMPLES.glob("*") if p.is_file())
    for i in range(n):
        src = logs[i % len(logs)]
        shutil.copy(src, d / ("%03d-%s" % (i, src.name)))
    return d


def _cpu_of(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def _lines_in(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            n += block.count(b"\n")
    return n


def _report_of(p, lines: int) -> dict:
    """The next report line of the --follow process `p` that has read `lines` lines of its log."""
    while True:
        out = p.stdout.readline()
        if not out:
            raise RuntimeError("diagnose --follow ended before reading %d lines" % lines)
        doc = json.loads(out)
        if sum(i.get("lines") or 0 for i in doc.get("inputs") or ()) >= lines:
            return doc


def follow_case(big: Path, extra: Path, work: Path, passes: int = 1) -> tuple[float, float]:
    """CPU seconds of the --follow pass after `extra` is appended to a copy of `big` (of the passes,
    when one began before the append was all written: until a report has read every line), and
    its wall time (from the append to that report line); with `passes`, `extra` is
    appended that many times, a pass after each, and the pass that cost the least CPU is given
    (as the other rows give the best of their runs: the CPU time of one pass is counted in 10 ms
    ticks, on a machine whose speed drifts)."""
    log = work / "followed.log"
    shutil.copy(big, log)
    lines = _lines_in(big)
    data = extra.read_bytes()
    extra_lines = data.count(b"\n")
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", "--interval", "1s", "--format", "json", str(log)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO), env=_env())
    from diagnose.live import CPU_SHARE
    try:
        _report_of(p, lines)                    # the first pass: the whole log
        got = []
        for _ in range(passes):
            # past the wait --follow keeps after a pass, slowed to stay under its share of a core
            # (live.pace; not after the first pass): each append is read by a pass of its own
            time.sleep(max(1.5, got[-1][0] / CPU_SHARE + 0.5) if got else 1.5)
            cpu0 = _cpu_of(p.pid)
            t0 = time.monotonic()
            with open(log, "ab") as out:
                out.write(data)             # one write: a pass seldom begins in the middle of it
            lines += extra_lines
            # A pass may start while the append is still being written: its report covers part
            # of it, and the pass after it the rest. Both are the cost of reading the append.
            _report_of(p, lines)
            wall = time.monotonic() - t0
            got.append((_cpu_of(p.pid) - cpu0, wall))
        return min(got)
    finally:
        p.terminate()
        p.wait(30)
        log.unlink(missing_ok=True)


def run_table(work: Path, keywords_pattern: str, repeat: int = 1, huge: bool = False, keep: bool = False) -> list[Row]:
    from bench.generate_log import generate
    from bench.launches import write_case
    work.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    rows: list[Row] = []

    def gen(name, size, **kw) -> Path:
        p = work / name
        if not p.exists():
            print("  generating %s ..." % p, flush=True)
            generate(p, size, **kw)
        made.append(p)
        return p

    grep = 'grep -cE -- "$1" "$2"'
    try:
        print("\n== the speed table (%d run(s) each, best kept)" % repeat)
        quiet = gen("stats-heavy-1gb.log", GB, rate_scale=0.05)
        busy = gen("busy-1gb.log", GB)
        g = shell(grep, repeat, keywords_pattern, quiet)
        d = diag([quiet], repeat)
        rows.append(row("1 GB stats-heavy log, C reader", GB, "grep -cE keywords", g.wall, d, "≤ 1×",
                        d.wall <= g.wall))
        one_gb = d
        d = diag([quiet], 1, DIAGNOSE_NATIVE=0)
        rows.append(row("1 GB stats-heavy log, no C reader", GB, "the C reader", one_gb.wall, d, "≤ 3×",
                        d.wall <= 3 * one_gb.wall))
        g = shell(grep, repeat, keywords_pattern, busy)
        d = diag([busy], repeat)
        rows.append(row("1 GB busy log (request lines)", GB, "grep -cE keywords", g.wall, d, "≤ 1×",
                        d.wall <= g.wall))
        per_byte = d.wall / GB      # the smaller logs below are cut from the same generator

        seed = diag([SEED], max(5, repeat))
        py = shell('"$1" -c pass', max(5, repeat), sys.executable)
        rows.append(row("seed-003 log (64 KB), end to end", SEED.stat().st_size, "python -c pass", py.wall, seed,
                        "≤ 0.15 s", seed.wall <= 0.15))
        fixed = seed.wall

        for mb in (1, 10, 100):
            p = gen("busy-%dmb.log" % mb, mb * 1_000_000)
            d = diag([p], repeat)
            ref = fixed + per_byte * mb * 1_000_000
            rows.append(row("%d MB log (no slow band)" % mb, mb * 1_000_000, "fixed cost + 1 GB per byte", ref, d,
                            "≤ 1×", d.wall <= ref))

        for times in ((4, 16) if huge else (4,)):
            p = work / ("stats-heavy-%dgb.log" % times)
            _repeat_file(quiet, p, times)
            made.append(p)
            w = shell('wc -l -- "$1"', 1, p)
            d = diag([p], 1)
            rows.append(row("%d GB (the 1 GB log %d times)" % (times, times), times * GB, "wc -l", w.wall, d,
                            "RSS ≤ 256 MB", True))
            p.unlink()

        folder = _folder(work)
        made.append(folder)
        size = sum(f.stat().st_size for f in folder.iterdir())
        one = diag([folder], 1, DIAGNOSE_JOBS=1)
        d = diag([folder], repeat)
        rows.append(row("200 small real logs in a folder", size, "one process", one.wall, d, "≤ 3 s",
                        d.wall <= 3.0, note="%.0f ms per file" % (1000 * d.wall / 200)))

        gz = work / "busy-1gb.log.gz"
        if not gz.exists():
            print("  compressing %s ..." % gz, flush=True)
            subprocess.run("gzip -c -1 %s > %s" % (busy, gz), shell=True, check=True)
        made.append(gz)
        tool = "pigz" if shutil.which("pigz") else "zcat"
        g = shell('%s -dc -- "$2" | grep -cE -- "$1"' % tool, repeat, keywords_pattern, gz)
        d = diag([gz], repeat)
        rows.append(row("1 GB .gz (busy log)", GB, "%s -dc | grep -cE" % tool, g.wall, d, "≤ 1.2×",
                        d.wall <= 1.2 * g.wall, note="" if tool == "pigz" else "pigz not installed: zcat"))

        many = work / "launches-21000.log"
        write_case(many, 21_000, 0)
        made.append(many)
        single = gen("busy-launch-size.log", many.stat().st_size)
        ref = diag([single], max(3, repeat))     # ~1 s each: best of several, as the write just before may still be flushing
        d = diag([many], 1)
        rows.append(row("21,000 launches in one file", many.stat().st_size, "one launch, same size", ref.wall, d,
                        "≤ 3×", d.wall <= 3 * ref.wall))
        many.unlink()

        copies = work / "seed003-9800.log"
        _repeat_file(SEED, copies, 9_800)
        made.append(copies)
        single = gen("busy-copies-size.log", copies.stat().st_size)
        ref = diag([single], max(3, repeat))     # ~1 s each: best of several, as the write just before may still be flushing
        d = diag([copies], 1)
        rows.append(row("9,800 copies of a small log in one file", copies.stat().st_size, "one launch, same size",
                        ref.wall, d, "≤ 3×", d.wall <= 3 * ref.wall))
        copies.unlink()

        extra = gen("busy-10mb-body.log", 10_000_000)
        alone = diag([extra], max(3, repeat))      # a ~0.2 s run: best of several, as the other references
        cpu, wall = follow_case(quiet, extra, work, passes=max(3, repeat))
        f = SimpleNamespace(wall=cpu, cpu=cpu, maxrss_mb=0.0)   # its memory: bench/follow.py
        rows.append(row("--follow 1 GB, 10 MB appended (CPU s)", 10_000_000, "the 10 MB alone", alone.cpu, f,
                        "≤ 2×", cpu <= 2 * alone.cpu, note="report %.1f s after the append" % wall))
    finally:
        if not keep:
            for p in made:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
    return rows


def markdown(rows: list[Row]) -> str:
    from bench.run import fmt_size
    out = ["| case | size | reference | reference s | diagnose s | ratio | peak RSS MB | goal | met |",
           "|---|---:|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        r = {k: v.replace("|", "\\|") if isinstance(v, str) else v for k, v in r.items()}   # a cell's own pipe
        out.append("| %s | %s | %s | %.3f | %.3f | %s | %s | %s | %s |" % (
            r["case"], fmt_size(r["bytes"]), r["reference"], r["reference_s"] or 0, r["diagnose_s"],
            "%.2f" % r["ratio"] if r["ratio"] else "n/a", "%.0f" % r["rss_mb"] if r["rss_mb"] else "-",
            r["goal"], ("yes" if r["met"] else "**no**") + (" (%s)" % r["note"] if r["note"] else "")))
    return "\n".join(out)


BEGIN, END = "<!-- bench/run.py --table: begin -->", "<!-- bench/run.py --table: end -->"


def update_readme(rows: list[Row], when: str) -> bool:
    readme = REPO / "README.md"
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        print("README.md has no %s … %s markers: not updated" % (BEGIN, END))
        return False
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = ("\nMeasured on this project's 2-core machine by `python bench/run.py --table` (%s; figures "
            "from this machine, best of the runs said in bench/table.py):\n\n%s\n\n" % (when, markdown(rows)))
    readme.write_text(head + BEGIN + body + END + tail)
    print("README.md: speed table updated")
    return True


def save(rows: list[Row], work: Path) -> Path:
    p = work / "table.json"
    p.write_text(json.dumps(rows, indent=1))
    return p

"""Standalone fuzzer for every input parser: `python bench/fuzz.py --inputs 100000 [--seed N]`.

Each input is a mutation of one seed file (the fixtures, fixtures/samples included):
a slice of it, truncated, with random bytes spliced in, bytes flipped, NUL bytes and invalid
UTF-8, lines shuffled or interleaved with another seed (mixed engines, several processes),
numbers replaced by `nan` / `inf` / `1e309` / negatives, month-day stamps moved across a year
boundary, a long line, CR line ends, ANSI colour, gzip (whole or truncated), or random lines
built from the parsers' own keywords. Inputs stay small (a few KiB to a few dozen KiB) so a run
is dominated by the parsers, not by I/O.

Every input is written to a temporary file and loaded in-process exactly as the CLI does
(`sources.load(sources.resolve([path]))`); every `--analyze-every`-th one also goes through the
whole pipeline and all five report formats. The only exception allowed out is `InputError`
(the one-line, exit-2 error a user sees). Also checked: the line counts add up, and the JSON,
SARIF and JUnit reports parse back.

A failing input is saved under --save-dir (default /tmp/diagnose-fuzz) with its traceback;
`--seed N --only I` replays input I of seed N. Exit status: 0 clean, 1 any failure.
Work is split over --jobs processes (default: all cores).
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEED_DIRS = [ROOT / "fixtures"]     # fixtures/samples included
SLICE_BYTES = 24 * 1024          # seeds larger than this are cut to a slice of at most this
HANG_SECONDS = 20                # one input taking longer than this counts as a failure (a hang)

WEIRD_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-1e309", "1e-400", "-5", "-0.0",
                 "-100.0", "100000000000000000000000", "0", "0.0", "999.9", "-1", "1e308", "4.2e+", "1..2",
                 "0x1F", "٣", "1_000"]
BAD_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80\x80"]
NUMBER = re.compile(rb"(?<![\w.])-?\d{1,20}(?:\.\d{1,12})?(?:[eE][-+]?\d{1,3})?")
STAMP = re.compile(rb"\b(\d\d)-(\d\d) (\d\d:\d\d:\d\d)")


def seed_files() -> list[Path]:
    out = []
    for d in SEED_DIRS:
        if d.is_dir():
            out += sorted(p for p in d.rglob("*") if p.is_file() and p.suffix != ".md" and not p.name.startswith("."))
    return out


def keywords() -> list[str]:
    from diagnose.sources.readers.scanner import GREP_KEYWORDS
    return GREP_KEYWORDS


# -- mutations ---------------------------------------------------------------------------------

def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def m_truncate(rng, data, ctx):
    return data[: rng.randrange(len(data) + 1)]


def m_drop_head(rng, data, ctx):
    return data[rng.randrange(len(data) + 1):]


def m_splice(rng, data, ctx):
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.randbytes(rng.choice([1, 2, 8, 64, 512])) + data[at:]


def m_flip(rng, data, ctx):
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 4, 32])):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def m_nul(rng, data, ctx):
    at = rng.randrange(len(data) + 1)
    return data[:at] + b"\x00" * rng.choice([1, 1, 3, 100]) + data[at:]


def m_bad_utf8(rng, data, ctx):
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(BAD_UTF8) + data[at:]


def m_shuffle_lines(rng, data, ctx):
    ls = _lines(data)
    if len(ls) > 1:
        i = rng.randrange(len(ls))
        j = min(len(ls), i + rng.randrange(2, 50))
        part = ls[i:j]
        rng.shuffle(part)
        ls[i:j] = part
    return b"".join(ls)


def m_dup_delete_lines(rng, data, ctx):
    ls = _lines(data)
    for _ in range(rng.randrange(1, 6)):
        if not ls:
            break
        i = rng.randrange(len(ls))
        if rng.random() < 0.5:
            del ls[i]
        else:
            ls.insert(rng.randrange(len(ls) + 1), ls[i])
    return b"".join(ls)


def m_interleave(rng, data, ctx):
    """Lines of another seed (possibly another engine) mixed in, order kept within each."""
    other = _lines(ctx.slice_of(rng, rng.choice(ctx.seeds)))
    a, out = _lines(data), []
    i = j = 0
    while i < len(a) or j < len(other):
        if j >= len(other) or (i < len(a) and rng.random() < 0.5):
            out.append(a[i]); i += 1
        else:
            out.append(other[j]); j += 1
    return b"".join(x if x.endswith(b"\n") else x + b"\n" for x in out)


def m_numbers(rng, data, ctx):
    hits = list(NUMBER.finditer(data))
    if not hits:
        return data
    b = bytearray(data)
    for m in sorted(rng.sample(hits, min(len(hits), rng.randrange(1, 12))), key=lambda m: -m.start()):
        b[m.start():m.end()] = rng.choice(WEIRD_NUMBERS).encode()
    return bytes(b)


def m_percent(rng, data, ctx):
    # bounded and anchored: an unbounded `\d+` here is quadratic on a long line of digits
    return re.sub(rb"(?<![\d.])(\d{1,12}(?:\.\d{1,6})?)%", lambda m: rng.choice([b"-", b"", b"1e3", b"nan"]) + m.group(0), data)


def m_year_boundary(rng, data, ctx):
    """Month-day stamps moved around the turn of a year, and out of order."""
    stamps = list(STAMP.finditer(data))
    if not stamps:
        return data
    cut = rng.randrange(len(stamps) + 1)
    b = bytearray(data)
    for k, m in sorted(enumerate(stamps), key=lambda km: -km[1].start()):
        mon, day = (b"12", b"31") if k < cut else (b"01", b"01")
        if rng.random() < 0.1:
            mon, day = rng.choice([(b"02", b"30"), (b"13", b"01"), (b"00", b"00"), (b"06", b"15")])
        b[m.start():m.end()] = mon + b"-" + day + b" " + m.group(3)
    return bytes(b)


def m_long_line(rng, data, ctx):
    n = rng.choice([4096, 65536, 300_000]) if rng.random() < 0.97 else 2_000_000
    kw = rng.choice(ctx.keywords).encode()
    filler = rng.choice([b"a", b"(", b"[", b"'", b"0", b" ", b"=", b"1,", kw + b" ", b"prompt: '"])
    line = kw + b" " + (filler * (n // len(filler) + 1))[:n] + b"\n"
    at = rng.choice([0, len(data)]) if rng.random() < 0.5 else data.find(b"\n", rng.randrange(len(data) + 1)) + 1
    return data[:at] + line + data[at:]


def m_deep_nesting(rng, data, ctx):
    """A dump, dict or JSON value nested far deeper than any engine writes."""
    n = rng.choice([100, 1000, 50_000])
    opener, closer = rng.choice([("{'a': ", "}"), ('{"a":', "}"), ("[", "]"), ("(", ")"), ("x=(", ")")])
    body = opener * n + "1" + (closer * n if rng.random() < 0.7 else "")
    head = rng.choice(["INFO 01-02 03:04:05 [arg_utils.py:1] non-default args: {'model': 'm', 'x': ",
                       "INFO 01-02 03:04:05 [core.py:1] Initializing a V1 LLM engine (v0.10.2) with config: model='m', compilation_config=",
                       "[2025-01-02 03:04:05] server_args=ServerArgs(model_path='m', tp_size=",
                       '[TensorRT-LLM][INFO] {"iter": 1, "kvCacheStats": ', "args: Namespace(x="])
    line = (head + body + "\n").encode()
    at = data.find(b"\n", rng.randrange(len(data) + 1)) + 1
    return data[:at] + line + data[at:]


def m_crlf(rng, data, ctx):
    return data.replace(b"\n", rng.choice([b"\r\n", b"\r", b"\n\n"]))


def m_ansi(rng, data, ctx):
    return re.sub(rb"(?m)^", lambda m: rng.choice([b"", b"\x1b[32m", b"\x1b[0m> ", b"\x1b[", b"\x1b"]), data, count=50)


def m_random_lines(rng, data, ctx):
    """Lines built from the scanner keywords, a real line's prefix, and random numbers."""
    out = []
    for _ in range(rng.randrange(1, 20)):
        words = [rng.choice(ctx.keywords) for _ in range(rng.randrange(1, 5))]
        parts = []
        for w in words:
            parts += [w, rng.choice([":", "=", ": ", " ", ", "]), rng.choice(WEIRD_NUMBERS + ["12.5", "3", "7%", "80.0%"])]
        prefix = ""
        donor = _lines(ctx.slice_of(rng, rng.choice(ctx.seeds))[:2048])
        if donor and rng.random() < 0.7:
            d = rng.choice(donor).decode("utf-8", "replace")
            prefix = d[: rng.randrange(len(d) + 1)]
        out.append((prefix + " ".join(parts)).replace("\n", " ") + "\n")
    at = data.find(b"\n", rng.randrange(len(data) + 1)) + 1
    return data[:at] + "".join(out).encode("utf-8", "replace") + data[at:]


def m_gzip(rng, data, ctx):
    z = gzip.compress(data)
    return z[: rng.randrange(len(z) + 1)] if rng.random() < 0.4 else z


def m_empty_or_blank(rng, data, ctx):
    return rng.choice([b"", b"\n", b"\n\n\n", b" ", b"\x00", b"\xef\xbb\xbf", b"\xef\xbb\xbf" + data])


MUTATIONS = {f.__name__[2:]: f for f in (
    m_truncate, m_drop_head, m_splice, m_flip, m_nul, m_bad_utf8, m_shuffle_lines, m_dup_delete_lines,
    m_interleave, m_numbers, m_percent, m_year_boundary, m_long_line, m_deep_nesting, m_crlf, m_ansi, m_random_lines,
    m_gzip, m_empty_or_blank)}
# Relative weights: the cheap, most telling mutations most often; big or degenerate ones rarely.
WEIGHTS = {"truncate": 10, "drop_head": 3, "splice": 10, "flip": 8, "nul": 5, "bad_utf8": 5,
           "shuffle_lines": 5, "dup_delete_lines": 5, "interleave": 6, "numbers": 12, "percent": 3,
           "year_boundary": 4, "long_line": 1, "deep_nesting": 1, "crlf": 2, "ansi": 2, "random_lines": 8, "gzip": 1,
           "empty_or_blank": 0.3}
# gzip and empty end a chain: mutating compressed bytes further is just random bytes.
FINAL = {"gzip", "empty_or_blank"}


class Ctx:
    def __init__(self, seeds: list[Path]):
        self.seeds = seeds
        self.keywords = keywords()
        self._cache: dict[Path, bytes] = {}

    def data(self, p: Path) -> bytes:
        if p not in self._cache:
            self._cache[p] = p.read_bytes()
        return self._cache[p]

    def slice_of(self, rng, p: Path) -> bytes:
        """A small piece of a seed: its head most often (sniffing looks at the head), else a window."""
        d = self.data(p)
        if len(d) <= SLICE_BYTES:
            return d
        n = rng.randrange(512, SLICE_BYTES)
        if rng.random() < 0.75:
            return d[:d.rfind(b"\n", 0, n) + 1] or d[:n]
        start = d.find(b"\n", rng.randrange(len(d) - n)) + 1
        return d[start:start + n]


def make_input(seed: int, i: int, ctx: Ctx) -> tuple[Path, list[str], bytes]:
    rng = random.Random(f"{seed}:{i}")
    src = ctx.seeds[i % len(ctx.seeds)] if rng.random() < 0.5 else rng.choice(ctx.seeds)
    data = ctx.slice_of(rng, src)
    names, weights = list(WEIGHTS), list(WEIGHTS.values())
    ops = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3, 5])):
        op = rng.choices(names, weights)[0]
        ops.append(op)
        data = MUTATIONS[op](rng, data, ctx)
        if op in FINAL:
            break
    return src, ops, data


# -- running -----------------------------------------------------------------------------------

class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang(f"input took more than {HANG_SECONDS} s")


class Checker:
    def __init__(self):
        from diagnose.ruleset.rules import load_rules
        self.rules = load_rules()

    def load(self, path: str):
        from diagnose.sources import load, resolve
        ev = load(resolve([path]))
        for info in ev.inputs:
            if info.kind == "log":
                assert info.unrecognised_lines >= 0, f"line counts do not add up: {info.to_json()}"
                assert info.unreadable_lines <= info.lines, f"more unreadable lines than lines: {info.to_json()}"
        return ev

    def analyze(self, path: str, render_all: bool):
        """What analyze_all does for files, with the rules loaded once; then every report format."""
        from diagnose.pipeline import analyze_evidence, analyze_fleet, combined_json, split_instances
        from diagnose.sources import load_groups, resolve
        analyses = []
        for ev in load_groups(resolve([path])):
            replicas = split_instances(ev)
            analyses += analyze_fleet(replicas, self.rules) if len(replicas) > 1 else [analyze_evidence(ev, self.rules)]
        from diagnose.reports.json_report import render as rjson
        text = rjson(combined_json(analyses))
        json.loads(text, parse_constant=_no_constant)    # NaN / Infinity are not JSON
        if not render_all:
            return
        from diagnose.reports.sarif import render as rsarif
        from diagnose.reports.junit import render as rjunit
        from diagnose.reports.markdown import render as rmd
        json.loads(rsarif(analyses, self.rules), parse_constant=_no_constant)
        import xml.etree.ElementTree as ET
        ET.fromstring(rjunit(analyses, self.rules, {}).encode("utf-8"))
        for a in analyses:
            d = a.to_json()
            rmd(d, a.signals.timeline)
            from rich.console import Console
            from diagnose.reports.terminal import render as rterm
            term = Console(record=True, width=120, file=io.StringIO(), color_system=None, emoji=False)
            rterm(d, term, a.signals.timeline, True)


def _no_constant(name):
    raise ValueError(f"report holds {name}, which is not JSON")


def run_range(seed: int, indices: list[int], analyze_every: int, save_dir: str, quiet: bool) -> dict:
    from diagnose.sources import InputError
    ctx = Ctx(seed_files())
    chk = Checker()
    tmpdir = tempfile.mkdtemp(prefix="diagnose-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path = os.path.join(tmpdir, "input.log")
    counts: dict[str, Counter] = defaultdict(Counter)
    failures = []
    signal.signal(signal.SIGALRM, _on_alarm)
    slow = []
    for i in indices:
        signal.alarm(HANG_SECONDS)
        try:
            src, ops, data = make_input(seed, i, ctx)
        finally:
            signal.alarm(0)
        name = str(src.relative_to(src.parents[1])) if len(src.parents) > 1 else src.name
        with open(path, "wb") as fh:
            fh.write(data)
        full = analyze_every > 0 and i % analyze_every == 0
        t0 = time.perf_counter()
        signal.alarm(HANG_SECONDS)
        try:
            if full:
                chk.analyze(path, render_all=(i // analyze_every) % 5 == 0)
            else:
                chk.load(path)
            counts[name]["ok"] += 1
        except InputError:
            counts[name]["input_error"] += 1
        except Exception as e:   # noqa: BLE001 — that is what we are looking for
            signal.alarm(0)
            counts[name]["FAIL"] += 1
            os.makedirs(save_dir, exist_ok=True)
            out = os.path.join(save_dir, f"fail-s{seed}-i{i}.bin")
            with open(out, "wb") as fh:
                fh.write(data)
            tb = traceback.format_exc()
            with open(out + ".txt", "w") as fh:
                fh.write(f"seed file: {src}\nmutations: {ops}\nreplay: python bench/fuzz.py --seed {seed} --only {i}\n\n{tb}")
            failures.append({"index": i, "seed_file": str(src), "ops": ops, "saved": out,
                             "error": f"{type(e).__name__}: {str(e)[:300]}", "where": _where(e)})
            if not quiet:
                sys.stderr.write(f"FAIL input {i} ({name}, {ops}): {type(e).__name__}: {str(e)[:200]}\n  saved {out}\n")
        finally:
            signal.alarm(0)
        dt = time.perf_counter() - t0
        if dt > 2:
            slow.append((round(dt, 2), i, name, ops))
    try:
        os.unlink(path)
        os.rmdir(tmpdir)
    except OSError:
        pass
    return {"counts": {k: dict(v) for k, v in counts.items()}, "failures": failures, "slow": slow}


def _where(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    own = [f for f in tb if "/diagnose/" in f.filename] or tb
    f = own[-1]
    return f"{os.path.relpath(f.filename, ROOT)}:{f.lineno} ({f.name})"


def _worker(args):
    return run_range(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=10_000, help="how many mutated inputs to run")
    ap.add_argument("--seed", type=int, default=0, help="seed of the run (inputs are reproducible per seed and index)")
    ap.add_argument("--only", type=int, default=None, help="replay this one input index and show its traceback")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    ap.add_argument("--analyze-every", type=int, default=20,
                    help="every Nth input also runs the whole pipeline and (every 5th of those) every report format")
    ap.add_argument("--save-dir", default="/tmp/diagnose-fuzz", help="where failing inputs are saved")
    ap.add_argument("--dump", default=None, help="with --only: write the input to this file and stop")
    a = ap.parse_args(argv)

    seeds = seed_files()
    if not seeds:
        print("no seed files found (fixtures/ missing?)", file=sys.stderr)
        return 2
    if a.only is not None:
        src, ops, data = make_input(a.seed, a.only, Ctx(seeds))
        print(f"input {a.only}: seed file {src}, mutations {ops}, {len(data)} bytes")
        if a.dump:
            Path(a.dump).write_bytes(data)
            return 0
        r = run_range(a.seed, [a.only], 1, a.save_dir, quiet=True)
        for f in r["failures"]:
            print(Path(f["saved"] + ".txt").read_text())
        print("ok" if not r["failures"] else "FAILED")
        return 1 if r["failures"] else 0

    jobs = max(1, min(a.jobs, a.inputs))
    chunks = [list(range(k, a.inputs, jobs)) for k in range(jobs)]
    t0 = time.perf_counter()
    print(f"fuzzing {a.inputs} inputs from {len(seeds)} seed files, seed {a.seed}, {jobs} job(s), "
          f"full pipeline + reports every {a.analyze_every}th", flush=True)
    if jobs == 1:
        results = [run_range(a.seed, chunks[0], a.analyze_every, a.save_dir, False)]
    else:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(jobs) as pool:
            results = pool.map(_worker, [(a.seed, c, a.analyze_every, a.save_dir, False) for c in chunks])
    wall = time.perf_counter() - t0

    total: dict[str, Counter] = defaultdict(Counter)
    failures, slow = [], []
    for r in results:
        for k, v in r["counts"].items():
            total[k].update(v)
        failures += r["failures"]
        slow += r["slow"]
    width = max(len(k) for k in total) if total else 10
    print(f"\n{'seed file':<{width}}  {'inputs':>7} {'ok':>7} {'InputError':>10} {'FAIL':>5}")
    for k in sorted(total):
        c = total[k]
        print(f"{k:<{width}}  {sum(c.values()):>7} {c['ok']:>7} {c['input_error']:>10} {c['FAIL']:>5}")
    allc = Counter()
    for c in total.values():
        allc.update(c)
    print(f"{'total':<{width}}  {sum(allc.values()):>7} {allc['ok']:>7} {allc['input_error']:>10} {allc['FAIL']:>5}")
    print(f"\n{a.inputs} inputs in {wall:.1f} s with {jobs} job(s): {a.inputs / wall:.0f} inputs/s "
          f"({wall / a.inputs * 1000 * jobs:.1f} ms per input per core)")
    if slow:
        print(f"{len(slow)} input(s) took over 2 s; slowest: {sorted(slow, reverse=True)[:5]}")
    if failures:
        by_where = Counter(f["where"] for f in failures)
        print(f"\n{len(failures)} FAILURE(S) in {len(by_where)} place(s):")
        for where, n in by_where.most_common():
            f = next(x for x in failures if x["where"] == where)
            print(f"  {n}x {where}: {f['error']}\n     e.g. input {f['index']} ({f['seed_file']}, {f['ops']}) "
                  f"saved {f['saved']} — replay: python bench/fuzz.py --seed {a.seed} --only {f['index']}")
        return 1
    print("no failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())

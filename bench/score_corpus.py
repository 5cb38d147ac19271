"""Score diagnose against the labelled corpus of complete real logs (fixtures/real/corpus.toml).

    python bench/score_corpus.py                 # per-rule and per-engine tables, then failures
    python bench/score_corpus.py --cases         # one line per case as well
    python bench/score_corpus.py --markdown      # the tables as markdown (the README's accuracy section)
    python bench/score_corpus.py --only NAME     # cases whose file name contains NAME

Recall is over `must` labels (found / labelled); a `must_not` that fires is a false alarm;
precision per rule is found / (found + false alarms on labelled `must_not`); `verdict` lists the
acceptable bottleneck verdicts; `ending` how the server's last launch ended (`stopped`, `crashed`,
`running`, `cut`: a stop is not a crash, and a log that just ends is neither); facts compare the report's `deployment` with the label (numbers
within 1 %). tests/test_real_corpus.py holds the thresholds.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:          # Python 3.10: the backport (a dependency there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "fixtures" / "real"
MANIFEST = REAL / "corpus.toml"

# Facts that are derived from others for comparison: a label of enforce_eager=true means CUDA
# graphs are off, whichever way the engine phrases it.
_BOOL_ALIASES = {"enforce_eager": ("cuda_graphs", lambda v: not v)}


@dataclass
class CaseResult:
    file: str
    engine: str
    must: list[str]
    must_not: list[str]
    fired: list[str]
    verdict: str
    verdicts_ok: list[str] | None
    facts_right: list[str] = field(default_factory=list)
    facts_wrong: list[tuple[str, object, object]] = field(default_factory=list)
    error: str | None = None
    share: float | None = None          # of the file's lines, read (coverage)
    server_share: float | None = None   # of the lines between the engine's first and last, read
    unread: int = 0                     # lines that look like an engine's, not read
    deployments: int = 0
    ending: str | None = None           # the label: stopped · crashed · running · cut
    ended: str = "running"              # what the tool said: crashed, stopped, or neither

    @property
    def ending_ok(self) -> bool:
        """A stop is not a crash, a crash not a stop; a log that just ends (running, cut) is neither."""
        if not self.ending:
            return True
        return self.ended == {"cut": "running"}.get(self.ending, self.ending)

    @property
    def engine_read(self) -> bool:
        """The engine's own lines were read: some were (or, in a file with none — a bare traceback —,
        nearly every line was), and none that look like an engine's went unread."""
        return (self.server_share is not None or (self.share or 0) >= 0.95) and not self.unread

    @property
    def found(self) -> list[str]:
        return [r for r in self.must if r in self.fired]

    @property
    def missed(self) -> list[str]:
        return [r for r in self.must if r not in self.fired]

    @property
    def false_alarms(self) -> list[str]:
        return [r for r in self.must_not if r in self.fired]

    @property
    def verdict_ok(self) -> bool:
        return not self.verdicts_ok or self.verdict in self.verdicts_ok


def load_cases(manifest: Path = MANIFEST) -> list[dict]:
    with open(manifest, "rb") as f:
        return tomllib.load(f)["case"]


def case_paths(case: dict) -> list[Path]:
    names = case.get("files") or [case["file"]]
    return [REAL / n for n in names]


def _same(label, got, key: str = "") -> bool:
    if key == "model" and isinstance(label, str) and isinstance(got, str):
        # a served path and the model it names are the same model: `…/models--Qwen--Qwen3-0.6B/snapshots/…`
        from diagnose.values import model_id
        return model_id(label).lower() == model_id(got).lower() or label.rstrip("/").lower() == got.rstrip("/").lower()
    if isinstance(label, bool) or isinstance(got, bool):
        return label == got
    if isinstance(label, (int, float)) and isinstance(got, (int, float)):
        return abs(label - got) <= max(abs(label) * 0.01, 0.011)
    if isinstance(label, str) and isinstance(got, str):
        return label.lower() == got.lower()
    return label == got


def compare_facts(labelled: dict, deployment: dict, engine_version: str | None) -> tuple[list, list]:
    right, wrong = [], []
    want = dict(labelled)
    if engine_version:
        want["engine_version"] = engine_version
    for key, value in want.items():
        got = deployment.get(key)
        if got is None and key in _BOOL_ALIASES:
            other, conv = _BOOL_ALIASES[key]
            if deployment.get(other) is not None:
                got = conv(deployment[other])
        if _same(value, got, key):
            right.append(key)
        else:
            wrong.append((key, value, got))
    return right, wrong


def run_case(case: dict, rules=None) -> CaseResult:
    from diagnose.pipeline import analyze_all
    res = CaseResult(file=case.get("file") or case["files"][0], engine=case["engine"],
                     must=list(case.get("must", [])), must_not=list(case.get("must_not", [])),
                     fired=[], verdict="", verdicts_ok=case.get("verdict"), ending=case.get("ending"))
    try:
        analyses = analyze_all([str(p) for p in case_paths(case)])
    except Exception as e:       # a crash on a real log is a result to report, not a stop
        res.error = f"{type(e).__name__}: {e}"
        return res
    # The deployment the labels describe: of the case's engine (a file may hold a client's lines
    # too), and where a file holds several servers, the one whose facts the labels give.
    engine = {"tensorrt-llm": "trtllm"}.get(case["engine"], case["engine"])
    mine = [a for a in analyses if a.evidence.fact("engine") == engine] or analyses[:1]
    main = max(mine, key=lambda a: len(compare_facts(case.get("facts", {}), a.deployment(), case.get("engine_version"))[0]))
    res.fired = sorted({f.id for a in analyses for f in a.result.findings})
    res.verdict = main.result.verdict.get("bottleneck", "")
    res.ended = ("crashed" if res.verdict == "crashed" else "stopped" if main.result.verdict.get("stopped")
                 else "running")
    res.facts_right, res.facts_wrong = compare_facts(case.get("facts", {}), main.deployment(),
                                                     case.get("engine_version"))
    res.deployments = len(analyses)
    infos = {id(i): i for a in analyses for i in a.evidence.inputs}.values()
    covs = [i.coverage for i in infos if getattr(i, "coverage", None) is not None]
    if covs:
        c = covs[0]
        res.share, res.server_share, res.unread = c.share, c.server_share, c.unread
    return res


def run_all(only: str | None = None, jobs: int = 1) -> list[CaseResult]:
    """Every case (or those whose file name holds `only`), in order; `jobs` > 1 diagnoses them in
    that many forked processes (the script does; a test worker, which runs threads, does not fork)."""
    cases = [c for c in load_cases() if not only or only in (c.get("file") or c["files"][0])]
    if jobs < 2 or len(cases) < 8:
        return [run_case(c) for c in cases]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(run_case, cases, chunksize=4))


def totals(results: list[CaseResult]) -> dict:
    must = sum(len(r.must) for r in results)
    found = sum(len(r.found) for r in results)
    facts = sum(len(r.facts_right) + len(r.facts_wrong) for r in results)
    right = sum(len(r.facts_right) for r in results)
    with_verdict = [r for r in results if r.verdicts_ok]
    with_ending = [r for r in results if r.ending]
    return {"cases": len(results), "must": must, "found": found,
            "recall": found / must if must else 1.0,
            "false_alarms": sum(len(r.false_alarms) for r in results),
            "verdicts": len(with_verdict), "verdicts_met": sum(r.verdict_ok for r in with_verdict),
            "endings": len(with_ending), "endings_met": sum(r.ending_ok for r in with_ending),
            "facts": facts, "facts_right": right, "facts_share": right / facts if facts else 1.0,
            "errors": sum(r.error is not None for r in results),
            "engine_read": sum(r.engine_read for r in results),
            "findings_per_log": sum(len(r.fired) for r in results) / max(len(results), 1)}


def per_rule(results: list[CaseResult]) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for r in results:
        for rid in set(r.must) | set(r.must_not) | set(r.fired):
            row = table.setdefault(rid, {"must": 0, "found": 0, "missed": 0, "must_not": 0,
                                         "false": 0, "unlabelled": 0})
            if rid in r.must:
                row["must"] += 1
                row["found" if rid in r.fired else "missed"] += 1
            elif rid in r.must_not:
                row["must_not"] += 1
                row["false"] += rid in r.fired
            elif rid in r.fired:
                row["unlabelled"] += 1
    return dict(sorted(table.items()))


def _pct(a, b):
    return f"{a / b:.0%}" if b else "–"


README_START = "<!-- corpus-score:start (python bench/score_corpus.py --update-readme) -->"
README_END = "<!-- corpus-score:end -->"


def readme_block(results: list[CaseResult]) -> str:
    """The README's accuracy tables: per engine, then per rule."""
    return render(results, markdown=True, readme=True)


def update_readme(results: list[CaseResult], path: Path | None = None) -> None:
    path = path or ROOT / "README.md"
    text = path.read_text()
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(head + README_START + "\n" + readme_block(results) + "\n" + README_END + tail)


def render(results: list[CaseResult], markdown: bool = False, cases: bool = False, readme: bool = False) -> str:
    out = []
    sep = " | "
    rows = [("rule", "must", "found", "missed", "recall", "must_not", "false alarms", "precision", "unlabelled")]
    for rid, row in per_rule(results).items():
        rows.append((rid, row["must"], row["found"], row["missed"], _pct(row["found"], row["must"]),
                     row["must_not"], row["false"], _pct(row["found"], row["found"] + row["false"]),
                     row["unlabelled"]))
    eng_rows = [("engine", "logs", "must", "found", "recall", "false alarms", "verdicts met", "facts right")]
    for eng in sorted({r.engine for r in results}):
        sub = [r for r in results if r.engine == eng]
        t = totals(sub)
        eng_rows.append((eng, t["cases"], t["must"], t["found"], _pct(t["found"], t["must"]),
                         t["false_alarms"], f"{t['verdicts_met']}/{t['verdicts']}",
                         _pct(t["facts_right"], t["facts"])))
    t = totals(results)
    eng_rows.append(("all", t["cases"], t["must"], t["found"], _pct(t["found"], t["must"]),
                     t["false_alarms"], f"{t['verdicts_met']}/{t['verdicts']}",
                     _pct(t["facts_right"], t["facts"])))

    def table(rs):
        if markdown:
            lines = ["| " + sep.join(map(str, rs[0])) + " |", "|" + "---|" * len(rs[0])]
            lines += ["| " + sep.join(map(str, r)) + " |" for r in rs[1:]]
            return "\n".join(lines)
        widths = [max(len(str(r[i])) for r in rs) for i in range(len(rs[0]))]
        return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rs)

    if readme:
        return table(eng_rows) + "\n\n" + table(rows)
    out += [table(eng_rows), "", table(rows), ""]
    out.append(f"findings per log: {t['findings_per_log']:.2f}; errors: {t['errors']}")
    out.append(f"engine lines read: {t['engine_read']}/{t['cases']} logs (engine lines found, none that looks like an "
               "engine's left unread; --cases gives each log's share of lines read)")
    if cases:
        out.append("")
        for r in results:
            flag = "ok " if not (r.missed or r.false_alarms or not r.verdict_ok or not r.ending_ok or r.facts_wrong
                                 or r.error) else "!! "
            cov = (f"read {r.share:.0%}" if r.share is not None else "read ?") + (
                f", engine span {r.server_share:.0%}" if r.server_share is not None else "") + (
                f", {r.unread} unread engine lines" if r.unread else "")
            out.append(f"{flag}{r.file}: {cov}; {r.deployments} deployment(s); verdict {r.verdict}; fired {', '.join(r.fired) or '-'}")
    problems = [r for r in results if r.missed or r.false_alarms or not r.verdict_ok or not r.ending_ok
                or r.facts_wrong or r.error or not r.engine_read]
    if problems and not markdown:
        out += ["", "Problems:"]
        for r in problems:
            bits = []
            if r.error:
                bits.append(f"error {r.error}")
            if r.missed:
                bits.append("missed " + ", ".join(r.missed))
            if r.false_alarms:
                bits.append("false " + ", ".join(r.false_alarms))
            if not r.verdict_ok:
                bits.append(f"verdict {r.verdict} not in {r.verdicts_ok}")
            if not r.ending_ok:
                bits.append(f"ending {r.ended}, label {r.ending}")
            if r.facts_wrong:
                bits.append("facts " + ", ".join(f"{k}={g!r} (label {v!r})" for k, v, g in r.facts_wrong))
            if not r.engine_read:
                bits.append(f"engine lines not all read (engine span {r.server_share}, {r.unread} unread engine lines)")
            out.append(f"  {r.file}: " + "; ".join(bits))
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", action="store_true", help="one line per case")
    ap.add_argument("--markdown", action="store_true", help="tables as markdown")
    ap.add_argument("--only", help="cases whose file name contains this")
    ap.add_argument("--update-readme", action="store_true", help="write the tables into README.md's accuracy section")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import os
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    results = run_all(a.only, jobs=min(cores, 4))
    if a.update_readme:
        update_readme(results)
    print(render(results, markdown=a.markdown, cases=a.cases))
    t = totals(results)
    print(f"\nrecall {t['recall']:.3f} ({t['found']}/{t['must']}), false alarms {t['false_alarms']}, "
          f"verdicts {t['verdicts_met']}/{t['verdicts']}, endings {t['endings_met']}/{t['endings']}, facts {t['facts_share']:.3f} "
          f"({t['facts_right']}/{t['facts']}), cases {t['cases']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

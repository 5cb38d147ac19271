"""Loading rule files: one TOML file per rule under rules/<domain>/<id>.toml.

A rule file is data: its expressions are compiled by ruleset.expr (whitelisted grammar) and a
bad file is rejected with an error naming the file and line.
"""
from __future__ import annotations

import re
import zlib
from diagnose import _compat
from dataclasses import dataclass, field
from pathlib import Path

from ..cachedir import cache_dir, read_back, write_whole
from ..lazyre import lazy
from ..tomlcache import parsed as _parsed
from ..sources.engines import NAMES
from .expr import ExprError, compile_expr

from ..values import SEVERITIES  # noqa: E402,F401  (rule files name them)
CONFIDENCES = ("high", "medium", "low")
ENGINES = NAMES       # the engine registry: sources/engines/
# What a rule looks at: one deployment (a log, a scrape, one replica of a fleet), or the fleet's
# replicas side by side (fleet signals only).
SCOPES = ("replica", "fleet", "disaggregated")
# A disaggregated node's half of the work (the `node_role` fact); a rule's `roles` says which
# nodes its advice is for (absent: every node). A node of no known role (not disaggregated) is "both".
ROLES = ("prefill", "decode", "both")
# Ids that no longer produce findings but stay valid for --ignore and configs (ids are public API).
RETIRED_IDS = {"warmup-in-window": "start-up exclusion is stated on the verdict's steady-window line"}
DOC_SECTIONS = ("what", "why", "evidence", "fix", "fix_risk", "false_positives", "references")
# `{expr}` in texts is evaluated; `{{` and `}}` are literal braces.
TEMPLATE = re.compile(r"(?<!\{)\{([^{}]+)\}(?!\})")
ID_RX = lazy(r"^[a-z][a-z0-9-]*$")      # lazy: for rules loaded anew, not from the cache


# Every key a rule file may hold, at the top and inside its tables: a misspelt one is an error
# at load time, not a rule that silently never fires.
TOP_KEYS = ("id", "title", "fix_title", "severity", "confidence", "engines", "roles", "scope", "requires", "params", "let",
            "condition", "all", "any", "sustained",
            "severity_if", "confidence_if", "evidence", "impact", "impact_score", "fix_risk", "defers_to",
            "folds_into", "fix", "docs", "cases")
SUB_KEYS = {"sustained": ("when", "for", "share", "peak"), "docs": ("summary",) + DOC_SECTIONS, "fix": ("set", "remove", "note"), "cases": ("input", "expect", "set", "remove"),
            "severity_if": ("when", "severity"), "confidence_if": ("when", "confidence")}
# What an expression may name besides signals and the rule's params.
EXPR_BUILTINS = frozenset({"known", "known_or", "True", "False", "None"})


def signal_catalogue() -> dict[str, dict]:
    """diagnose/data/signals.toml: every signal with its unit and source (`diagnose rules --signals`).
    Read once a run: every rule's names are checked against it (45 reads were half of loading the rules)."""
    global _catalogue
    if _catalogue is None:
        path = Path(__file__).resolve().parent.parent / "data" / "signals.toml"
        _catalogue = _parsed.loads(path.read_text(encoding="utf-8")).get("signals", {})
    return _catalogue


_catalogue: dict | None = None     # read-only once loaded: callers copy before adding names


def _nearest(name: str, choices) -> str:
    import difflib
    near = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.75)
    return f" (did you mean `{near[0]}`?)" if near else ""


class RuleError(ValueError):
    """A rule file that cannot be used; message is `file:line: what`."""


@dataclass
class Rule:
    id: str
    path: Path
    domain: str
    title: str
    fix_title: str
    severity: str
    confidence: str
    engines: tuple
    requires: tuple
    condition: object                 # compiled expression (`condition`, `all` and `any` joined)
    condition_text: str
    lets: list = field(default_factory=list)           # [(name, compiled, text)]: named sub-expressions, in order
    sustained: dict | None = None                      # {"when", "for_samples", "for_seconds", "share", "peak", "text"}
    evidence: tuple = ()
    impact: str = ""
    impact_score: object = None
    fix_risk: str = ""
    defers_to: tuple = ()
    folds_into: tuple = ()            # ids that say the same thing: when one fires, this finding goes
    severity_if: list = field(default_factory=list)    # [(compiled, severity)]
    confidence_if: list = field(default_factory=list)  # [(compiled, confidence)]
    fixes: dict = field(default_factory=dict)          # engine → {"remove", "set", "note"}
    docs: dict = field(default_factory=dict)
    cases: list = field(default_factory=list)
    templates: dict = field(default_factory=dict)      # template text → compiled parts
    params: dict = field(default_factory=dict)         # named thresholds; a config file may override them
    scope: str = "replica"                             # SCOPES
    roles: tuple = ROLES                               # the disaggregated nodes its advice is for


def builtin_rules_dir() -> Path:
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_rules"          # installed wheel: rules ship inside the package
    if packaged.is_dir():
        return packaged
    return here.parent / "rules"        # source checkout


def load_rules(extra_dirs: list[str] | None = None) -> list[Rule]:
    dirs = [builtin_rules_dir()] + [Path(d) for d in (extra_dirs or [])]
    rules: dict[str, Rule] = {}
    try:
        for d in dirs:
            if not d.is_dir():
                raise RuleError(f"{d}: rules directory not found")
            for p, r in _LOADED.rules_of(d):
                if r.id in rules and d == dirs[0]:
                    raise RuleError(f"{p}:1: duplicate rule id `{r.id}` (also {rules[r.id].path})")
                rules[r.id] = r   # a user rule with a built-in id replaces it
    finally:
        _parsed.save()
        _LOADED.save()
    return list(rules.values())


def _load_dir(d: Path, paths: list[Path], raws: list | None = None):
    for i, p in enumerate(paths):
        yield p, load_rule(p, domain=p.parent.name if p.parent != d else "user", raw=raws[i] if raws else None)


class LoadedRules:
    """The rules of a directory as loaded, kept between runs in the cache directory (cachedir.py):
    compiling and checking the ~380 expressions of the built-in rules is most of loading them (~40
    ms of every run); reading them back takes ~15. An entry is keyed by the Python version, the
    sources loading depends on (this module, the expression compiler, the catalogues names are
    checked against: CODE), the engines' names, and each rule file's path and text: an edit to any
    of them loads the directory anew. Only a directory that loaded without an error is kept, only
    this user's own file is read back (cachedir.private_file), and a run that loaded nothing anew
    writes nothing. Every load gives new objects (a config may change a rule's params)."""

    KEEP = 8        # directories: the built-in rules of a few versions, and the user's own
    CODE = ("ruleset/rules.py", "ruleset/expr.py", "ruleset/sustained.py", "values.py", "evidence/facts.py",
            "evidence/model.py", "sources/engines/__init__.py", "data/signals.toml", "data/facts.toml")

    def __init__(self) -> None:
        self.entries: dict[str, bytes] | None = None     # key -> the pickled [(path, Rule)]
        self.new = False
        self._code: bytes | None = None
        # key -> [(path, Rule)] as this process loaded them: a --follow pass, and a --watch one,
        # take the same rules again, their expressions parsed at the first pass's use (the rules
        # are not changed once loaded: a run's deployments share them too)
        self.held: dict = {}

    @staticmethod
    def path() -> Path:
        return cache_dir() / "loaded-rules-v1.pickle"

    def _key(self, d: Path, paths: list[Path], raws: list[str]) -> str:
        if self._code is None:
            import sys
            here = Path(__file__).resolve().parent.parent
            self._code = "\0".join([sys.version, repr(NAMES)]).encode() + b"".join(
                (here / f).read_bytes() for f in self.CODE)
        b = b"\0".join([self._code, str(d).encode("utf-8", "surrogateescape")] + [
            f"{p}\0{t}".encode("utf-8", "surrogatepass") for p, t in zip(paths, raws)])
        return f"{zlib.crc32(b):08x}{zlib.adler32(b):08x}{len(b):x}"

    def rules_of(self, d: Path):
        """(path, Rule) of each rule file under `d`, in order; errors as load_rule raises them, in
        their turn (the caller's duplicate check between two files comes before a later file's)."""
        import pickle
        paths = sorted(d.rglob("*.toml"))
        try:
            raws = [p.read_text(encoding="utf-8") for p in paths]
            key = self._key(d, paths, raws)
        except (OSError, UnicodeDecodeError):
            yield from _load_dir(d, paths)      # load_rule says which file cannot be read, in its turn
            return
        held = self.held.get(key)
        if held is not None:
            yield from held
            return
        if self.entries is None:
            try:
                raw = read_back(self.path(), binary=True)
                got = pickle.loads(raw) if raw else {}
                self.entries = got if isinstance(got, dict) else {}
            except Exception:       # truncated, or from another version: loaded anew
                self.entries = {}
        hit = self.entries.pop(key, None)
        if isinstance(hit, bytes):
            try:
                got = pickle.loads(hit)
            except Exception:
                got = None
            if isinstance(got, list):
                self.entries[key] = hit         # last used: to the end
                self._hold(key, got)
                yield from got
                return
        got = []
        for pair in _load_dir(d, paths, raws):
            got.append(pair)
            yield pair
        try:
            self.entries[key] = pickle.dumps(got, pickle.HIGHEST_PROTOCOL)
            self.new = True
        except Exception:       # something a rule holds does not pickle: loaded every run
            pass
        self._hold(key, got)

    def _hold(self, key, got: list) -> None:
        if len(self.held) >= 8:         # directories edited between passes: the oldest go
            self.held.pop(next(iter(self.held)))
        self.held[key] = got

    def save(self) -> None:
        if not self.new or self.entries is None:
            return
        self.new = False
        import pickle
        keep = dict(list(self.entries.items())[-self.KEEP:])
        write_whole(self.path(), lambda fh: pickle.dump(keep, fh, pickle.HIGHEST_PROTOCOL), binary=True)


_LOADED = LoadedRules()




def _line_of(text: str, key: str) -> int:
    m = re.search(rf"(?m)^[ \t]*\"?{re.escape(key)}\"?[ \t]*=", text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


class _At:
    """`file:line` of a key, for an expression's error message: the line is looked for (a regex
    per key) only when a message is written, not for each of the ~380 expressions that load fine."""
    __slots__ = ("path", "raw", "key")

    def __init__(self, path: Path, raw: str, key: str) -> None:
        self.path, self.raw, self.key = path, raw, key

    def __str__(self) -> str:
        return f"{self.path}:{_line_of(self.raw, self.key)}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def load_rule(path: Path, domain: str = "user", raw: str | None = None) -> Rule:
    """One rule file (`raw`: its text, when already read)."""
    try:
        if raw is None:
            raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RuleError(f"{path}:1: cannot read rule file ({e})") from None
    try:
        d = _parsed.loads(raw)
    except _compat.tomllib.TOMLDecodeError as e:
        line = getattr(e, "lineno", None) or _toml_err_line(str(e))
        raise RuleError(f"{path}:{line}: invalid TOML: {str(e).split(' (at')[0]}") from None

    def need(key, typ=str):
        if key not in d:
            raise RuleError(f"{path}:1: missing required key `{key}`")
        if not isinstance(d[key], typ):
            raise RuleError(f"{path}:{_line_of(raw, key)}: `{key}` must be {typ.__name__}")
        return d[key]

    def expr(key_text, where_key):
        try:
            return compile_expr(key_text, _At(path, raw, where_key))
        except ExprError as e:
            raise RuleError(str(e)) from None

    for key in d:
        if key not in TOP_KEYS:
            raise RuleError(f"{path}:{_line_of(raw, key)}: unknown key `{key}`{_nearest(key, TOP_KEYS)}")
    for key, allowed in SUB_KEYS.items():
        tables = d.get(key)
        tables = (list(tables.values()) if key == "fix" else [tables]) if isinstance(tables, dict) else (tables or [])
        for t in tables:
            for sub in (t if isinstance(t, dict) else {}):
                if sub not in allowed:
                    raise RuleError(f"{path}:{_line_of(raw, sub)}: unknown key `{sub}` in `{key}`{_nearest(sub, allowed)}")
    rid = need("id")
    if not ID_RX.match(rid):
        raise RuleError(f"{path}:{_line_of(raw, 'id')}: rule id `{rid}` must be lower-case words joined by '-'")
    sev = need("severity")
    if sev not in SEVERITIES:
        raise RuleError(f"{path}:{_line_of(raw, 'severity')}: severity must be one of {', '.join(SEVERITIES)}")
    conf = d.get("confidence", "medium")
    if conf not in CONFIDENCES:
        raise RuleError(f"{path}:{_line_of(raw, 'confidence')}: confidence must be one of {', '.join(CONFIDENCES)}")
    engines = tuple(d.get("engines", ENGINES))
    if any(e not in ENGINES for e in engines):
        raise RuleError(f"{path}:{_line_of(raw, 'engines')}: engines must be among {', '.join(ENGINES)}")
    roles = tuple(d.get("roles", ROLES))
    if not roles or any(r not in ROLES for r in roles):
        raise RuleError(f"{path}:{_line_of(raw, 'roles')}: roles must be among {', '.join(ROLES)}")
    scope = d.get("scope", "replica")
    if scope not in SCOPES:
        raise RuleError(f"{path}:{_line_of(raw, 'scope')}: scope must be one of {', '.join(SCOPES)}{_nearest(str(scope), SCOPES)}")
    cond_text = _condition_text(d, path, raw)
    rule = Rule(
        id=rid, scope=scope, roles=roles, path=path, domain=domain, title=need("title"), fix_title=need("fix_title"),
        severity=sev, confidence=conf, engines=engines, requires=tuple(d.get("requires", ())),
        condition=expr(cond_text, "condition" if "condition" in d else ("all" if "all" in d else "any")),
        condition_text=cond_text,
        evidence=tuple(d.get("evidence", ())), impact=d.get("impact", ""),
        impact_score=expr(d["impact_score"], "impact_score") if "impact_score" in d else None,
        fix_risk=d.get("fix_risk", ""), defers_to=tuple(d.get("defers_to", ())),
        folds_into=tuple(d.get("folds_into", ())),
        docs=d.get("docs", {}), cases=d.get("cases", []), params=dict(d.get("params", {})),
    )
    for k, v in rule.params.items():
        if not k.isidentifier() or not isinstance(v, (int, float)) or isinstance(v, bool):
            raise RuleError(f"{path}:{_line_of(raw, k)}: param `{k}` must be a number")
    lets = d.get("let", {})
    if not isinstance(lets, dict):
        raise RuleError(f"{path}:{_line_of(raw, 'let')}: `let` must be a table of name = \"expression\"")
    for name, text in lets.items():
        if not name.isidentifier() or not isinstance(text, str):
            raise RuleError(f"{path}:{_line_of(raw, name)}: `let.{name}` must name an expression in a string")
        if name in rule.params:
            raise RuleError(f"{path}:{_line_of(raw, name)}: `let.{name}` is also a param")
        rule.lets.append((name, compile_expr(text, _At(path, raw, name)), text))
    if "sustained" in d:
        rule.sustained = _sustained(d["sustained"], path, raw, expr)
    for item in d.get("severity_if", []):
        if item.get("severity") not in SEVERITIES:
            raise RuleError(f"{path}:{_line_of(raw, 'severity_if')}: severity_if needs a valid `severity`")
        rule.severity_if.append((expr(item.get("when", ""), "when"), item["severity"]))
    for item in d.get("confidence_if", []):
        if item.get("confidence") not in CONFIDENCES:
            raise RuleError(f"{path}:{_line_of(raw, 'confidence_if')}: confidence_if needs a valid `confidence`")
        rule.confidence_if.append((expr(item.get("when", ""), "when"), item["confidence"]))
    for eng, fx in d.get("fix", {}).items():
        if eng not in ENGINES and eng not in ("any", "facts"):
            raise RuleError(f"{path}:{_line_of(raw, 'fix')}: fix for unknown engine `{eng}`")
        if eng == "facts":          # fixes by fact: each engine's folder spells the flags
            from ..evidence.model import EXTRA_FACTS, FACT_NAMES
            for k in list(fx.get("set", {})) + list(fx.get("remove", [])):
                if k not in FACT_NAMES and k not in EXTRA_FACTS:
                    raise RuleError(f"{path}:{_line_of(raw, k)}: `[fix.facts]` names a fact: `{k}` is none"
                                    f"{_nearest(k, FACT_NAMES + EXTRA_FACTS)}")
        rule.fixes[eng] = {"remove": list(fx.get("remove", [])), "set": dict(fx.get("set", {})),
                           "note": fx.get("note", "")}
    # Compile every `{…}` template once, so a bad one fails at load time, not mid-report.
    texts = [rule.title, rule.fix_title, rule.impact] + [
        t for fx in rule.fixes.values() for t in [fx["note"], *map(str, fx["set"].values()), *fx["remove"]]]
    for t in texts:
        for m in TEMPLATE.finditer(t or ""):
            try:
                rule.templates[m.group(1)] = compile_expr(m.group(1), f"{path}:{_line_of_text(raw, m.group(0))}")
            except ExprError as e:
                raise RuleError(str(e)) from None
    _check_names(rule, raw)
    return rule


def _check_names(rule: Rule, raw: str) -> None:
    """Every name an expression or `requires` uses is a catalogued signal, a param of the rule or
    a built-in: `tensor_paralel_size` is an error naming the line, not a rule that is never applicable."""
    from .expr import FUNCS, names_of
    known = signal_catalogue()
    for name, _, _ in rule.lets:
        if name in known:
            raise RuleError(f"{rule.path}:{_line_of(raw, name)}: `let.{name}` would hide the signal of that name")
    known = {**known, **{name: None for name, _, _ in rule.lets}}
    if rule.sustained is not None:
        from .sustained import COLUMNS, NAMES
        known = {**known, **dict.fromkeys(NAMES)}
        per_sample = {**known, **dict.fromkeys(COLUMNS)}
        for n in names_of(rule.sustained["when"]):
            if n not in per_sample and n not in rule.params and n not in FUNCS and n not in EXPR_BUILTINS:
                raise RuleError(f"{rule.path}:{_line_of(raw, 'when')}: unknown sample column or signal `{n}`"
                                f"{_nearest(n, list(COLUMNS) + list(known))}")
    trees = [rule.condition, *(t for _, t, _ in rule.lets), *rule.templates.values(), *(t for t, _ in rule.severity_if),
             *(t for t, _ in rule.confidence_if)]
    if rule.impact_score is not None:
        trees.append(rule.impact_score)
    used = [n for t in trees for n in names_of(t)] + list(rule.requires)
    for name in used:
        if name in known or name in rule.params or name in FUNCS or name in EXPR_BUILTINS:
            continue
        line = _line_of_text(raw, name)
        raise RuleError(f"{rule.path}:{line}: unknown signal `{name}`{_nearest(name, list(known) + list(rule.params))}"
                        " (`diagnose rules --signals` lists them)")


def _sustained(t, path: Path, raw: str, expr) -> dict:
    from .sustained import COLUMNS, parse_for
    if not isinstance(t, dict) or not isinstance(t.get("when"), str):
        raise RuleError(f"{path}:{_line_of(raw, 'sustained')}: `sustained` needs `when`, an expression per stats sample")
    if "for" not in t and "share" not in t:
        raise RuleError(f"{path}:{_line_of(raw, 'when')}: `sustained` needs `for` (samples or a duration) or `share`")
    spec = {"when": expr(t["when"], "when"), "text": t["when"], "for_samples": None, "for_seconds": None,
            "share": None, "peak": t.get("peak")}
    if "for" in t:
        try:
            spec["for_samples"], spec["for_seconds"] = parse_for(t["for"])
        except ValueError as e:
            raise RuleError(f"{path}:{_line_of(raw, 'for')}: {e}") from None
    if "share" in t:
        if not isinstance(t["share"], (int, float)) or isinstance(t["share"], bool) or not 0 < t["share"] <= 1:
            raise RuleError(f"{path}:{_line_of(raw, 'share')}: `share` is a fraction of the window's samples, 0 < share <= 1")
        spec["share"] = float(t["share"])
    if spec["peak"] is not None and spec["peak"] not in COLUMNS:
        raise RuleError(f"{path}:{_line_of(raw, 'peak')}: `peak` names a sample column{_nearest(str(spec['peak']), COLUMNS)}")
    return spec


def _condition_text(d: dict, path: Path, raw: str) -> str:
    """`condition`, `all = [...]` (every one holds) and `any = [...]` (at least one): one expression,
    each part in parentheses, so unknowns propagate exactly as when written inline."""
    parts = []
    if "condition" in d:
        if not isinstance(d["condition"], str):
            raise RuleError(f"{path}:{_line_of(raw, 'condition')}: `condition` must be str")
        parts.append(d["condition"])
    for key, op in (("all", " and "), ("any", " or ")):
        if key in d:
            xs = d[key]
            if not isinstance(xs, list) or not xs or not all(isinstance(x, str) for x in xs):
                raise RuleError(f"{path}:{_line_of(raw, key)}: `{key}` must be a list of expressions in strings")
            parts.append(op.join(f"({x})" for x in xs) if len(xs) > 1 else xs[0])
    if not parts:
        raise RuleError(f"{path}:1: missing required key `condition` (or `all` / `any`)")
    return parts[0] if len(parts) == 1 else " and ".join(f"({x})" for x in parts)


def _line_of_text(raw: str, snippet: str) -> int:
    i = raw.find(snippet)
    return raw.count("\n", 0, i) + 1 if i >= 0 else 1


def _toml_err_line(msg: str) -> int:
    m = re.search(r"line (\d+)", msg)
    return int(m.group(1)) if m else 1

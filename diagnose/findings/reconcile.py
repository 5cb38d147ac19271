"""Ranking and reconciling findings: one recommendation per flag, never two that contradict.

Walk findings in rank order; the first to decide a flag owns it. A later finding that wants
the same flag at another value, or wants to remove a flag an earlier one sets, loses that
flag and says which finding owns it. `defers_to` folds a finding's fix into another's;
`folds_into` drops a finding that says the same as one that fired (one problem, one finding).
"""
from __future__ import annotations

from ..ruleset.rules import Rule
from .command import apply_fix, base_command
from ..ruleset.result import Fix, Result


def reconcile(result: Result, rules: dict[str, Rule], settings: dict, facts: dict) -> Result:
    result.findings.sort(key=lambda f: f.rank_key())
    fired = {f.id: f for f in result.findings}
    for f in list(result.findings):
        rule = rules.get(f.id)
        into = next((o for o in (rule.folds_into if rule else ()) if o in fired), None)
        if into:
            result.findings.remove(f)
            fired[into].related.append(f.id)
            del fired[f.id]
    for f in result.findings:
        rule = rules.get(f.id)
        for other in (rule.defers_to if rule else ()):
            if other in fired:
                if not f.fix.empty():
                    f.fix.note = (f.fix.note + " " if f.fix.note else "") + f"The fix for `{other}` covers this."
                f.fix.remove, f.fix.set = [], {}
                fired[other].related.append(f.id)
                break
    owner: dict[str, tuple[str, str | None]] = {}   # flag → (finding id, value or None = removed)
    combined = None
    for f in result.findings:
        if combined is None:
            combined = Fix(engine=f.fix.engine)
        kept_set, kept_remove, notes = {}, [], []
        for flag, val in f.fix.set.items():
            prev = owner.get(flag)
            if prev is None:
                owner[flag] = (f.id, val)
                kept_set[flag] = val
            elif prev[1] == val:
                notes.append(f"`{flag} {val}` is already advised by `{prev[0]}`.")
                if f.id not in fired[prev[0]].related:
                    fired[prev[0]].related.append(f.id)
            else:
                notes.append(f"`{flag}` is left as `{prev[0]}` advises ({prev[1] if prev[1] is not None else 'removed'}).")
        for flag in f.fix.remove:
            prev = owner.get(flag)
            if prev is None:
                owner[flag] = (f.id, None)
                kept_remove.append(flag)
            elif prev[1] is not None:
                notes.append(f"`{flag}` is left as `{prev[0]}` advises ({prev[1]}).")
        f.fix.set, f.fix.remove = kept_set, kept_remove
        if notes:
            f.fix.note = " ".join(x for x in [f.fix.note, *notes] if x)
        combined.set.update(kept_set)
        combined.remove.extend(kept_remove)
    base = base_command(settings, facts, facts.get("engine") or "vllm")
    for f in result.findings:
        if base and not f.fix.empty():
            f.fix.command = apply_fix(base, f.fix)
    if combined is not None and base:
        combined.command = apply_fix(base, combined)
    result.combined_fix = combined
    return result

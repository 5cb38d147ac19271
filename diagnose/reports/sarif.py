"""`--format sarif`: SARIF 2.1.0 for code-scanning UIs — findings as results, the log file and
line as locations, every rule described in the driver."""
from __future__ import annotations

import json

from .. import __version__
from .common import input_warnings, skipped_lines

LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "note", "info": "note"}


def render(analyses: list, rules: list, skipped: list | None = None) -> str:
    driver_rules, index = [], {}
    for r in sorted(rules, key=lambda r: r.id):
        index[r.id] = len(driver_rules)
        docs = r.docs
        help_md = "\n\n".join(f"**{t}**: {docs[k]}" for k, t in (
            ("what", "What it detects"), ("why", "Why it hurts"), ("fix", "Fix"), ("fix_risk", "Fix risk"))
            if docs.get(k))
        driver_rules.append({
            "id": r.id, "name": r.id.replace("-", " ").title().replace(" ", ""),
            "shortDescription": {"text": docs.get("summary") or r.fix_title},
            "fullDescription": {"text": str(docs.get("what") or r.fix_title)},
            "help": {"text": help_md.replace("**", ""), "markdown": help_md},
            "defaultConfiguration": {"level": LEVEL[r.severity]},
            "properties": {"tags": [r.domain, *r.engines], "severity": r.severity},
        })
    runs = []
    for a in analyses:
        data = a.to_json()
        first_input = data["inputs"][0]["path"] if data["inputs"] else "input"
        results = []
        for f in data["findings"]:
            locs = [{"physicalLocation": {"artifactLocation": {"uri": e["source"]},
                                          "region": {"startLine": max(1, int(e["line"])), "snippet": {"text": e["text"][:2000]}}}}
                    for e in f["evidence"] if "source" in e and e.get("line")]
            if not locs:
                locs = [{"physicalLocation": {"artifactLocation": {"uri": first_input}, "region": {"startLine": 1}}}]
            fix = "; ".join([f"remove {x}" for x in f["fix"]["flags"]["remove"]]
                            + [f"{k} {v}" for k, v in f["fix"]["flags"]["set"].items()]) or (f["fix"].get("note") or "")
            res = {"ruleId": f["id"], "level": LEVEL[f["severity"]],
                   "message": {"text": f"{f['title']}. Fix: {f['fix_title']}" + (f" ({fix})" if fix else "")},
                   "locations": locs[:10],
                   "properties": {"severity": f["severity"], "confidence": f["confidence"], "impact": f["impact"],
                                  "fix_risk": f["fix_risk"], "metrics": [e for e in f["evidence"] if "metric" in e]}}
            if f["id"] in index:
                res["ruleIndex"] = index[f["id"]]
            results.append(res)
        notes = [{"level": "error", "message": {"text": f"rule {e['id']} failed: {e['error']}"}} for e in data["errors"]]
        notes += [{"level": "warning", "message": {"text": f"{i['path']}: {e}"}}      # e.g. partial data (--partial)
                  for i in data["inputs"] for e in i.get("errors") or []]
        notes += [{"level": "warning", "message": {"text": w}} for w in input_warnings(data["inputs"])]
        if not runs:                # the run's inputs left out, said once
            notes += [{"level": "note", "message": {"text": x}} for x in skipped_lines(skipped or [])]
        runs.append({
            "tool": {"driver": {"name": "diagnose", "version": __version__, "semanticVersion": __version__,
                                "informationUri": "https://github.com/diagnose/diagnose", "rules": driver_rules}},
            "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notes}],
            "artifacts": [{"location": {"uri": i["path"]}} for i in data["inputs"]],
            "results": results,
            "properties": {"verdict": data["verdict"], "deployment_engine": data["deployment"].get("engine")},
        })
    doc = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": runs}
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"

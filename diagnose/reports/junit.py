"""`--format junit`: JUnit XML for CI dashboards — one test case per rule: passed, failed (the
finding), skipped (not applicable or suppressed), or error (the rule itself failed)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .common import deployment_label, evidence_line, fix_lines, input_warnings, skipped_lines


def render(analyses: list, rules: list, suppressed: dict | None = None, skipped: list | None = None) -> str:
    suppressed = suppressed or {}
    suites = ET.Element("testsuites", name="diagnose")
    totals = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
    for n, a in enumerate(analyses):
        data = a.to_json()
        name = f"diagnose: {deployment_label(data)}"
        suite = ET.SubElement(suites, "testsuite", name=name)
        input_notes = [f"{i['path']}: {e}" for i in data["inputs"] for e in i.get("errors") or []]
        input_notes += input_warnings(data["inputs"])
        if n == 0:                  # the run's inputs left out, said once
            input_notes += skipped_lines(skipped or [])
        if input_notes:             # e.g. `partial data (--partial): …`; <properties> come first in a suite
            props = ET.SubElement(suite, "properties")
            for note in input_notes:
                ET.SubElement(props, "property", name="input-note", value=note)
        fired = {f["id"]: f for f in data["findings"]}
        na = {x["id"]: x["reason"] for x in data["not_applicable"]}
        err = {x["id"]: x["error"] for x in data["errors"]}
        counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
        for r in sorted(rules, key=lambda r: (r.domain, r.id)):
            case = ET.SubElement(suite, "testcase", classname=f"diagnose.{r.domain}", name=r.id)
            counts["tests"] += 1
            if r.id in fired:
                f = fired[r.id]
                body = [f"{f['title']}", "", "Evidence:"] + [f"  {evidence_line(e)}" for e in f["evidence"]]
                body += ["", f"Fix: {f['fix_title']}"] + [f"  {x}" for x in fix_lines(f["fix"])]
                fail = ET.SubElement(case, "failure", message=f["title"], type=f["severity"])
                fail.text = "\n".join(body)
                counts["failures"] += 1
            elif r.id in err:
                ET.SubElement(case, "error", message=err[r.id], type="rule-error")
                counts["errors"] += 1
            elif r.id in suppressed:
                ET.SubElement(case, "skipped", message=f"suppressed: {suppressed[r.id] or 'in the project config'}")
                counts["skipped"] += 1
            elif r.id in na:
                ET.SubElement(case, "skipped", message=f"not applicable: {na[r.id]}")
                counts["skipped"] += 1
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        suites.set(k, str(v))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"

"""The JSON report's one shape (schema_version 2): the schema shipped in the package is the one
`diagnose schema` prints, it rejects what breaks the shape, the README's example follows it, and a
saved version-1 report still works as a --baseline."""
from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest

from conftest import FIXTURES, REPORT_SCHEMA, ROOT, report, run_cli, run_json

SEED = FIXTURES / "seed003" / "realtime.log"


def test_diagnose_schema_prints_the_schema_every_report_is_checked_against():
    p = run_cli("schema")
    assert p.returncode == 0, p.stderr.decode()
    printed = json.loads(p.stdout)
    assert printed == REPORT_SCHEMA
    jsonschema.Draft202012Validator.check_schema(printed)
    assert printed["properties"]["schema_version"] == {"const": 2}


@pytest.mark.parametrize("inputs,views", [
    ([SEED], set()),
    ([FIXTURES / "rules" / "replica-imbalance" / "fires.prom"], {"fleet"}),
    ([FIXTURES / "bench" / "aiperf-akamaslabs-g7-4500-conc-sweep"], {"sweep"}),
    ([FIXTURES / "real" / "sglang-amd-agi-glm52-mxfp4-pd-prefill-dp8.log",
      FIXTURES / "real" / "sglang-amd-agi-glm52-mxfp4-pd-decode-dp8-busy.log"], {"disaggregated"}),
    ([FIXTURES / "mixed"], set()),
], ids=["one", "fleet", "sweep", "disaggregated", "several"])
def test_every_run_has_one_shape_analyses_with_the_views_beside(inputs, views):
    doc = run_json(*inputs)                               # validated against the schema
    assert doc["analyses"] and all("findings" in a and "deployment" in a for a in doc["analyses"])
    assert "findings" not in doc and "deployment" not in doc
    assert views == {k for k in ("fleet", "fleets", "sweep", "sweeps", "disaggregated", "disaggregated_systems") if k in doc}
    paths = {i["path"] for a in doc["analyses"] for i in a["inputs"]}
    assert paths <= {i["path"] for i in doc["inputs"]}
    if "sweep" in doc:
        assert doc["sweep"]["analysis"] == 0 and doc["sweep"]["points"]
        assert not any("sweep" in a for a in doc["analyses"])


def test_the_schema_rejects_a_report_that_breaks_the_shape():
    doc = report(run_cli("--format", "json", SEED).stdout)
    broken = []
    for change in (lambda d: d.update(schema_version=1),
                   lambda d: d.update(findings=d["analyses"][0]["findings"]),     # the old single shape
                   lambda d: d.pop("analyses"),
                   lambda d: d["analyses"][0]["findings"][0].update(severity="urgent"),
                   lambda d: d["analyses"][0].pop("verdict"),
                   lambda d: d["analyses"][0].update(sweep={})):
        bad = copy.deepcopy(doc)
        change(bad)
        broken.append(not jsonschema.Draft202012Validator(REPORT_SCHEMA).is_valid(bad))
    assert all(broken), broken


def test_the_readmes_example_follows_the_schema():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## JSON schema (version 2)", 1)[1]
    example = json.loads(re.search(r"```json\n(.*?)\n```", section, re.S).group(1))
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(example)


def test_a_saved_version_1_report_is_still_a_baseline(tmp_path):
    """A report saved before version 2 (one deployment at the top) compares as it did."""
    after = FIXTURES / "rules" / "cuda-graphs-disabled" / "quiet.log"
    before = FIXTURES / "rules" / "cuda-graphs-disabled" / "fires.log"
    now = run_json(after, "--baseline", before)["comparison"]
    v2 = tmp_path / "before-v2.json"
    assert run_cli("--format", "json", "-o", v2, before).returncode == 0
    d = report(v2.read_text())
    old = {**d["analyses"][0], "schema_version": 1, "tool": d["tool"], "skipped": d["skipped"]}
    v1 = tmp_path / "before-v1.json"
    v1.write_text(json.dumps(old))
    for saved in (v1, v2):
        c = run_json(after, "--baseline", saved)["comparison"]
        assert (c["fixed"], c["new"], c["config_changes"]) == (now["fixed"], now["new"], now["config_changes"]), saved.name
        assert "cuda-graphs-disabled" in c["fixed"]

"""A disaggregated SGLang deployment seen through Prometheus: its prefill and decode replicas carry
SGLang's `engine_type` label. Backfilled into a real Prometheus started here, and given as a saved
scrape: one deployment with two roles both ways (not a fleet whose "imbalance" compares a prefill
node's load with a decode node's)."""
from __future__ import annotations

import os
from datetime import timedelta

import pytest

from conftest import run_json
from prom_harness import PromServer, backfill, default_start, missing_tools

MODEL = "zai-org/GLM-4.6-FP8"
NODES = {"pd-prefill-0:30000": "prefill", "pd-decode-0:30001": "decode"}


def _series(ts: int, inst: str, role: str, i: int) -> dict:
    """One scrape of one node, as SGLang 0.5 exports it: the prefill node queues and runs nothing
    (it hands each request on), the decode node runs 40-ish sequences."""
    prefill = role == "prefill"
    return {"sglang:num_running_reqs": 0 if prefill else 40 + i % 5,
            "sglang:num_queue_reqs": 3 + i % 4 if prefill else 0,
            "sglang:token_usage": 0.02 if prefill else 0.31,
            "sglang:prompt_tokens_total": 1000.0 + i * 9000 * (1 if prefill else 0),
            "sglang:generation_tokens_total": 500.0 + i * (30 if prefill else 6000)}


def _openmetrics(start, minutes: int = 30, step: int = 15) -> tuple[str, str]:
    """(OpenMetrics for promtool, the last scrape of each node as /metrics text)."""
    t0 = int(start.timestamp()) // step * step
    times = [t0 + k * step for k in range(minutes * 60 // step)]
    fams: dict[str, list] = {}
    last = []
    for inst, role in NODES.items():
        for i, ts in enumerate(times):
            for name, v in _series(ts, inst, role, i).items():
                lab = f'engine_type="{role}",instance="{inst}",job="sglang",model_name="{MODEL}"'
                fams.setdefault(name, []).append(f"{name}{{{lab}}} {v} {ts}")
                if i == len(times) - 1:
                    last.append(f"{name}{{{lab}}} {v}")
    om = []
    for name, lines in fams.items():
        fam = name[:-len("_total")] if name.endswith("_total") else name
        om.append(f"# TYPE {fam} {'counter' if name.endswith('_total') else 'gauge'}")
        om += lines
    return "\n".join(om) + "\n# EOF\n", "\n".join(last) + "\n"


@pytest.fixture(scope="module")
def pd_prom(tmp_path_factory):
    missing = missing_tools()
    if missing:
        pytest.fail(f"{' and '.join(missing)} not on PATH: these tests need the Prometheus server and promtool "
                    "(Debian/Ubuntu: apt-get install prometheus)", pytrace=False)
    base = tmp_path_factory.mktemp("pd-prom")
    om, _ = _openmetrics(default_start())
    (base / "pd.om").write_text(om)
    backfill(base / "pd.om", base / "tsdb")
    with PromServer(base / "tsdb", workdir=base / "server") as server:
        yield server


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch):
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(x for x in ("127.0.0.1", "localhost", os.environ.get(var)) if x))


def _check(doc: dict) -> None:
    system = doc["disaggregated"]
    assert system["verdict"]["roles"] == ["prefill", "decode"], system["verdict"]
    assert "1 prefill + 1 decode node(s) (P:D 1:1)" in system["verdict"]["signals"]
    nodes = {a["instance"]: a for a in doc["analyses"]}
    assert set(nodes) == {"prefill node pd-prefill-0:30000", "decode node pd-decode-0:30001"}
    assert nodes["prefill node pd-prefill-0:30000"]["deployment"]["node_role"] == "prefill"
    assert nodes["decode node pd-decode-0:30001"]["deployment"]["node_role"] == "decode"
    assert "fleet" not in doc and not any(f["id"] == "replica-imbalance" for a in doc["analyses"] for f in a["findings"])
    # a decode node's advice is not given to the prefill node
    na = {x["id"]: x["reason"] for x in nodes["prefill node pd-prefill-0:30000"]["not_applicable"]}
    assert "this is a prefill node" in na["decode-bound"]


def test_a_live_prometheus_fleet_of_prefill_and_decode_replicas_is_one_deployment(pd_prom):
    _check(run_json("--prometheus", pd_prom.url, "--since", "40m"))


def test_the_same_nodes_in_saved_scrapes_are_one_deployment(tmp_path):
    start = default_start()
    for k, mins in enumerate((5, 10, 15)):      # three saved scrapes, a few minutes apart
        _, text = _openmetrics(start, minutes=mins)
        (tmp_path / f"scrape-{k}.prom").write_text(text)
    _check(run_json(tmp_path))

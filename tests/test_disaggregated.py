"""Disaggregated serving: a node's role is a fact read in every engine's words, advice that does not
fit the role is not applicable (with the reason), and the prefill and decode nodes of one
deployment are reported as one system, on real logs."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, analyze, run_cli, run_json

REAL = FIXTURES / "real"
SGLANG_PREFILL = REAL / "sglang-amd-agi-glm52-mxfp4-pd-prefill-dp8.log"
SGLANG_DECODE = REAL / "sglang-amd-agi-glm52-mxfp4-pd-decode-dp8-busy.log"
VLLM_P = REAL / "vllm-synechism-qwen3-4b-tpu-pd-fixed-delay6-producer.log"
VLLM_D = REAL / "vllm-synechism-qwen3-4b-tpu-pd-fixed-delay6-consumer.log"


@pytest.mark.parametrize("path,role", [
    (SGLANG_PREFILL, "prefill"), (SGLANG_DECODE, "decode"),               # --disaggregation-mode
    (VLLM_P, "prefill"), (VLLM_D, "decode"),                              # kv_role kv_producer / kv_consumer
    (REAL / "trtllm-nvidia-srtslurm-glm52-dynamo-decode-tp8-2node-starthang.log", "decode"),   # Dynamo worker
    (REAL / "vllm-intellistream-qwen25-14b-ascend-npu-kvoffload-pressure.log", None),        # kv_both offload: no role
], ids=lambda x: getattr(x, "name", x))
def test_a_nodes_role_is_read_in_each_engines_words(path, role):
    assert analyze(path)["deployment"].get("node_role") == role


def test_a_healthy_prefill_node_with_graphs_off_gets_no_graph_advice():
    """SGLang disables CUDA graphs on a prefill server itself: no `cuda-graphs-disabled`, no
    `misconfigured` verdict, and the reason is said among the rules not applicable."""
    r = analyze(SGLANG_PREFILL)
    assert r["deployment"]["cuda_graphs"] is False
    assert "cuda-graphs-disabled" not in [f["id"] for f in r["findings"]]
    assert r["verdict"]["bottleneck"] != "misconfigured" and "misconfigured" not in r["verdict"].get("also", [])
    na = {x["id"]: x["reason"] for x in r["not_applicable"]}
    assert "this is a prefill node" in na["cuda-graphs-disabled"] and "decode" in na["cuda-graphs-disabled"]
    # ...and prefill advice is not given to a decode node
    d = analyze(VLLM_D)
    assert "this is a decode node" in {x["id"]: x["reason"] for x in d["not_applicable"]}["prefill-bound"]


@pytest.fixture()
def pd_folder(tmp_path):
    """A folder as an operator hands it over: both nodes' logs of one SGLang PD deployment, a
    README and an empty file."""
    d = tmp_path / "glm-pd"
    d.mkdir()
    shutil.copy(SGLANG_PREFILL, d / "pd_prefill_30000.log")
    shutil.copy(SGLANG_DECODE, d / "pd_decode_dpaonly.log")
    (d / "README.md").write_text("# PD run\n\nprefill on node A, decode on node B\n")
    (d / "empty.log").write_text("")
    return d


def test_a_folder_of_prefill_and_decode_nodes_is_one_deployment_with_two_roles(pd_folder):
    doc = run_json(pd_folder)
    system = doc["disaggregated"]
    assert system["verdict"]["nodes"] == ["prefill node 1", "decode node 1"]
    assert [a["instance"] for a in doc["analyses"]] == ["prefill node 1", "decode node 1"]
    assert [a["deployment"]["node_role"] for a in doc["analyses"]] == ["prefill", "decode"]
    assert "1 prefill + 1 decode node(s) (P:D 1:1)" in system["verdict"]["signals"]
    # the system's pools, and the rule that judges them together was evaluated (not skipped)
    assert "pd-ratio-imbalance" in system["passed"]
    assert any(s.startswith("decode pool: running 50.7") for s in system["verdict"]["signals"])
    assert len(doc["skipped"]) == 2          # the README and the empty file, each with its note
    for fmt, head in (("terminal", "1 disaggregated deployment: 1 prefill + 1 decode node(s)"),
                      ("markdown", "# diagnose: 1 disaggregated deployment: 1 prefill + 1 decode node(s)")):
        p = run_cli(pd_folder, "--format", fmt)
        out = " ".join(p.stdout.decode().split())
        assert p.returncode in (0, 1) and head in out, out[:1500]
        assert "sglang · prefill node 1 · GLM-5.2-MXFP4" in out and "sglang · decode node 1 · GLM-5.2-MXFP4" in out


def test_a_failed_kv_hand_off_is_found_on_both_nodes_and_said_for_the_system(tmp_path):
    """Real vLLM TPU PD pair of one run: the producer's `KV transfer timeout`, the consumer's
    `KV pull failed` and `Failing 1 request(s) due to KV load failure` (a 500 to the client)."""
    for p in (VLLM_P, VLLM_D):
        shutil.copy(p, tmp_path / p.name)
    doc = run_json(tmp_path)
    for node in doc["analyses"]:
        f = {x["id"]: x for x in node["findings"]}["kv-transfer-failures"]
        assert "over TPUConnector" in f["title"]
        assert "engine-crash" not in [x["id"] for x in node["findings"]]     # both kept serving
    consumer = next(a for a in doc["analyses"] if a["deployment"]["node_role"] == "decode")
    f = {x["id"]: x for x in consumer["findings"]}["kv-transfer-failures"]
    assert f["severity"] == "critical" and "1 request(s) failed" in f["title"]
    assert any("KV pull failed" in e.get("text", "") for e in f["evidence"])
    assert any("KV transfer failure line(s) across the nodes" in s for s in doc["disaggregated"]["verdict"]["signals"])


def test_the_corrected_command_keeps_the_connector_as_json_the_flag_accepts():
    """vLLM logs --kv-transfer-config as a Python repr; the corrected command gives JSON back,
    the node's role kept and the per-process engine_id left out."""
    r = analyze(VLLM_D)
    cmd = r["fix"]["command"]
    arg = cmd.split("--kv-transfer-config ", 1)[1].split(" \\\n", 1)[0].strip("'")
    cfg = json.loads(arg)
    assert cfg["kv_connector"] == "TPUConnector" and cfg["kv_role"] == "kv_consumer" and "engine_id" not in cfg


def test_nodes_of_different_models_are_not_one_system(tmp_path):
    shutil.copy(SGLANG_PREFILL, tmp_path / "a.log")
    shutil.copy(VLLM_D, tmp_path / "b.log")
    doc = run_json(tmp_path)
    assert "disaggregated" not in doc and len(doc["analyses"]) == 2

"""SGLang and TensorRT-LLM: the engine is recognised by content, the facts its files hold reach
the JSON deployment under the shared names, and fixes use the engine's own flags."""
from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES, SAMPLES_DIR, run_cli, run_json, one, report

OTHER = SAMPLES_DIR / "other"
ENGINE_SAMPLES = sorted(p for p in OTHER.glob("*") if p.suffix in (".log", ".json")
                        and re.match(r"(sglang|sgl-kernel|llama-benchy|trtllm|tensorrtllm|triton)", p.name))


def expected_engine(name: str) -> str:
    return "sglang" if name.startswith(("sglang", "sgl-kernel", "llama-benchy")) else "trtllm"


@pytest.mark.parametrize("path", ENGINE_SAMPLES, ids=[p.name for p in ENGINE_SAMPLES])
def test_engine_is_recognised_and_facts_reach_the_deployment(path):
    p = run_cli("--format", "json", path)
    assert p.returncode == 0, p.stderr.decode()
    d = one(p.stdout)
    assert d["inputs"][0]["engine"] == expected_engine(path.name)
    dep = d["deployment"]
    text = path.read_text(errors="replace").replace("\n", "")   # pastes wrap dumps mid-token
    checks = [
        (r"\btp_size=(\d+)", "tensor_parallel_size", int),
        (r"\bmem_fraction_static=([\d.]+)", "gpu_memory_utilization", float),
        (r"max_total_num_tokens=(\d+)", "kv_cache_tokens", int),
        (r"TRTGptModel maxNumSequences: (\d+)", "max_num_seqs", int),
        (r"TRTGptModel maxSequenceLen: (\d+)", "max_model_len", int),
        (r"Engine version ([\w.]+) found", "engine_version", str),
        (r"max_running_requests=(\d+)", "max_num_seqs", int),
    ]
    for rx, key, cast in checks:
        m = re.findall(rx, text)
        if m:
            assert dep[key] == cast(m[-1]), (key, dep[key], m[-1])


def test_sglang_healthy_log_has_no_finding_above_low():
    d = one(run_cli("--format", "json", FIXTURES / "sglang" / "healthy.log").stdout)
    assert d["deployment"]["engine"] == "sglang" and d["deployment"]["cuda_graphs"] is True
    assert all(f["severity"] in ("low", "info") for f in d["findings"]), [(f["id"], f["severity"]) for f in d["findings"]]


def test_mixed_directory_is_diagnosed_per_engine():
    p = run_cli("--format", "json", FIXTURES / "mixed")
    assert p.returncode == 0, p.stderr.decode()
    d = report(p.stdout)
    engines = sorted(a["deployment"]["engine"] for a in d["analyses"])
    assert engines == ["sglang", "trtllm", "vllm"]
    for a in d["analyses"]:
        assert all(i["engine"] in (a["deployment"]["engine"], None) for i in a["inputs"])
    md = run_cli("--format", "markdown", FIXTURES / "mixed").stdout.decode()
    assert md.count("# diagnose:") == 4 and "# diagnose: 3 deployments" in md     # the overview, then each


def test_seed000_sglang_long_context_no_queue_but_slow():
    d = one(run_cli("--format", "json", FIXTURES / "seed000" / "sglang.log").stdout)
    by = {f["id"]: f for f in d["findings"]}
    assert d["deployment"]["engine"] == "sglang"
    assert {"prefill-bound", "long-context-overconcurrency"} <= set(by)
    assert d["verdict"]["bottleneck"] == "prefill-bound"
    ev = {e.get("metric"): e.get("value") for e in by["long-context-overconcurrency"]["evidence"]}
    assert float(ev["kv_gib_per_sequence"]) > 0 and float(ev["max_sequences_by_memory"]) > 1
    assert by["long-context-overconcurrency"]["fix"]["flags"]["set"] == {"--max-running-requests": "4"}
    for f in d["findings"]:     # SGLang's own flag names only
        for flag in list(f["fix"]["flags"]["set"]) + f["fix"]["flags"]["remove"]:
            assert flag in ("--max-running-requests", "--chunked-prefill-size", "--kv-cache-dtype",
                            "--mem-fraction-static", "--schedule-conservativeness", "--tp-size", "--dp-size",
                            "--pp-size", "--cuda-graph-max-bs", "--disable-cuda-graph", "--disable-radix-cache"), flag
    md = run_cli("--format", "markdown", FIXTURES / "seed000" / "sglang.log").stdout.decode()
    cmd = md.split("```bash\n", 1)[1].split("```", 1)[0]
    assert cmd.startswith("python -m sglang.launch_server") and "--max-running-requests 4" in cmd


def test_seed001_trtllm_wide_kv_no_chunking_and_limits():
    p = run_cli("--format", "json", FIXTURES / "seed001")
    assert p.returncode == 0, p.stderr.decode()
    d = one(p.stdout)
    assert d["deployment"]["engine"] == "trtllm"
    by = {f["id"]: f for f in d["findings"]}
    assert {"kv-cache-dtype-wide", "chunked-prefill-off"} <= set(by), list(by)
    assert {"queue-full-rejections", "session-limit", "scheduler-evicting"} & set(by), list(by)
    assert by["kv-cache-dtype-wide"]["fix"]["flags"]["set"] == {"kv_cache_config.dtype": "fp8"}
    md = run_cli("--format", "markdown", FIXTURES / "seed001").stdout.decode()
    cmd = md.split("```bash\n", 1)[1].split("```", 1)[0]
    assert cmd.startswith("trtllm-serve") and "kv_cache_config:" in cmd and "dtype: fp8" in cmd


def test_a_tensorrt_llm_options_file_beside_a_vllm_log_is_a_second_deployment():
    """A YAML file is an engine's when its bytes carry that engine's file markers (declared in
    sources/engines/<name>/): here `kv_cache_config`, so it is not folded into the vLLM run."""
    out = run_json(FIXTURES / "seed003" / "realtime.log", FIXTURES / "rules" / "cuda-graphs-disabled" / "fires-trtllm.yaml")
    runs = {a["deployment"]["engine"]: [i["path"] for i in a["inputs"]] for a in out["analyses"]}
    assert set(runs) == {"vllm", "trtllm"}
    assert runs["trtllm"] == [str(FIXTURES / "rules" / "cuda-graphs-disabled" / "fires-trtllm.yaml")]


@pytest.mark.parametrize("tail, rate", [
    ("Accepted: 440 tokens, Drafted: 1495 tokens", 100 * 440 / 1495),                         # counts alone
    ("Accepted: 440 tokens, Drafted: 1495 tokens, Avg Draft acceptance rate: 29.4%", 29.4),
])
def test_a_speculative_decoding_line_gives_its_acceptance_whichever_wording(tmp_path, tail, rate):
    """vLLM's SpecDecoding metrics line with the counts alone (no rate) is read: the acceptance from
    the counts (its patterns are lazy: the line's pattern is told by its text, not identity)."""
    from diagnose.sources import load, resolve
    log = tmp_path / "spec.log"
    log.write_text("(APIServer pid=7) INFO 07-09 20:32:01 [metrics.py:120] SpecDecoding metrics: Mean acceptance "
                   "length: 2.47, Accepted throughput: 25.68 tokens/s, Drafted throughput: 87.25 tokens/s, " + tail + "\n")
    ev = load(resolve([str(log)]))
    got = [e.data["acceptance"] for e in ev.events.get("spec_decode", [])]
    assert got == [pytest.approx(rate)] and ev.fact("speculative") is True

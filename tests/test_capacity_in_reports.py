"""Issue 6 inside a diagnosis: the roofline says whether a run is at the hardware's limit."""
from __future__ import annotations

import json

from conftest import FIXTURES, SAMPLES_DIR, run_cli, one, report


def test_seed004_is_at_the_hardware_limit_with_numbers():
    d = one(run_cli("--format", "json", FIXTURES / "seed004").stdout)
    dep = d["deployment"]
    assert dep["gpu_board"].startswith("GB10")
    assert 3.17 / 2 <= dep["decode_bound_tps"] <= 3.17 * 2           # within a factor of 2 of the measured
    assert any("working as well as the hardware allows" in s for s in d["verdict"]["signals"])


def test_seed003_runs_far_below_its_bound_and_names_the_levers():
    d = one(run_cli("--format", "json", FIXTURES / "seed003" / "realtime.log", FIXTURES / "seed003" / "dmon.txt").stdout)
    assert d["deployment"]["decode_vs_bound"] < 0.5
    line = next(s for s in d["verdict"]["signals"] if "expected bound" in s)
    assert "below the hardware's limit" in line and "tp-for-small-model" in line and "cuda-graphs-disabled" in line


def test_capacity_command_from_the_main_cli():
    p = run_cli("capacity", "--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "GB10", "--tp", "2",
                "--context", "1024", "--link", "ib", "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    r = json.loads(p.stdout)
    for k in ("weights_bytes_per_gpu", "kv_bytes_per_token_per_layer", "kv_bytes_per_token_per_gpu",
              "kv_bytes_per_sequence_per_gpu", "max_sequences", "optimal_concurrency",
              "decode_tokens_per_s_per_sequence_bound", "prefill_tokens_per_s_bound"):
        assert k in r
    bad = run_cli("capacity", "--model", "no-such-model-xyz", "--gpu", "H100", "--tp", "1", "--context", "1000")
    assert bad.returncode == 2 and len(bad.stderr.decode().strip().splitlines()) == 1


def test_saved_metrics_files_name_engine_and_model():
    other = SAMPLES_DIR / "other"
    for name, engine in (("sglang-pr-7944-metrics.prom", "sglang"), ("sglang-pr-1853-metrics.prom", "sglang"),
                         ("aibrix-issue-1614-sglang-dp-metrics.prom", "sglang"),
                         ("tensorrtllm-backend-readme-v0.18.0-metrics.prom", "trtllm")):
        d = report(run_cli("--format", "json", other / name).stdout)
        a = d["analyses"][0]
        assert a["deployment"]["engine"] == engine, name
        assert a["deployment"]["model"], name
        assert any("single scrape" in e for i in a["inputs"] for e in i["errors"]), name
    d = one(run_cli("--format", "json", other / "dcgm-exporter-issue-250-v100.prom").stdout)
    assert d["deployment"]["gpu_name"]                       # DCGM: the GPU model is what it names


def test_log_kv_capacity_is_cross_checked_against_the_model_shape(tmp_path):
    d = one(run_cli("--format", "json", FIXTURES / "seed003" / "realtime.log").stdout)["deployment"]
    assert abs(d["kv_tokens_log_vs_estimate"] - 1) <= 0.10 and d["kv_estimate_note"] == "agrees within 10 %"
    # A log whose KV figure disagrees with the model shape gets the difference explained.
    text = (FIXTURES / "seed003" / "realtime.log").read_text().replace("GPU KV cache size: 656,944 tokens",
                                                                        "GPU KV cache size: 456,944 tokens")
    f = tmp_path / "odd.log"
    f.write_text(text)
    d = one(run_cli("--format", "json", f).stdout)["deployment"]
    assert d["kv_tokens_log_vs_estimate"] < 0.9 and d["kv_estimate_note"].startswith("differs:")

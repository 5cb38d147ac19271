"""Capacity engine (issue 6): KV cache, weights, concurrency and roofline bounds.

Every number asserted here is one a user can redo by hand: seed 000's 40k-token example, seed
001's 20k-token dtype table, seed 004's Llama-3.3-70B on two GB10s, and a vLLM sample's own KV line."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from diagnose.capacity import GIB, JSON_KEYS, capacity, from_config_json, judge, lookup
from diagnose.capacity.cli import capacity_app

runner = CliRunner()


def cap(*args: str) -> dict:
    r = runner.invoke(capacity_app, [*args, "--format", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def write_config(tmp_path, name="config.json", **cfg) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return str(p)


# ---------------------------------------------------------------- seed 000

@pytest.fixture
def seed000(tmp_path):
    # "685B scale example": L=80, H=16384, 128 heads, r = 16/128 = 1/8
    return write_config(tmp_path, num_hidden_layers=80, hidden_size=16384, num_attention_heads=128,
                        num_key_value_heads=16)


def test_seed000_kv_per_token_per_sequence_and_max_sequences(seed000):
    r = cap("--model-config", seed000, "--gpu", "H100", "--pp", "8", "--context", "40000",
            "--kv-dtype", "fp16", "--kv-memory", "40")
    # 2 x (16384 x 1/8) x 2 B = 8192 B = 8 KiB per token per layer
    assert r["kv_bytes_per_token_per_layer"] == 8192
    # 80 layers / PP 8 = 10 layers per GPU
    assert r["kv_bytes_per_token_per_gpu"] == 81920
    # 40,000 x 10 x 8192 B = 3,276,800,000 B: seed's "3.2 GB" (3.28 GB decimal, 3.05 GiB)
    assert r["kv_bytes_per_sequence_per_gpu"] == 3_276_800_000
    assert round(r["kv_bytes_per_sequence_per_gpu"] / 1e9, 2) == 3.28
    # --kv-memory is GiB: 40 GiB / 3.2768 GB = 13.11; the seed's "~12" is 40 GB / 3.2 GB in mixed units
    assert r["max_sequences"] == pytest.approx(13.11, abs=0.01)
    assert 12 <= r["max_sequences"] < 13.2
    # one replica, long context: 2R stable, 4R exploratory (seed 000: "most likely 2~4, not 20")
    assert r["optimal_concurrency"] == [2, 4]
    assert r["fits"] is True
    # the config has no intermediate_size: weights and bounds are unknown, and the output says so
    assert r["weights_bytes_per_gpu"] is None and r["decode_tokens_per_s_per_sequence_bound"] is None
    assert any("weights per GPU unknown" in w for w in r["warnings"])


def test_seed000_in_decimal_gigabytes_gives_the_seeds_12(seed000):
    f = from_config_json(seed000)
    r = capacity(f, "H100", pp=8, context=40000, kv_dtype="fp16", kv_memory_gib=40e9 / GIB)
    assert int(r["max_sequences"]) == 12          # 40 GB / 3.2768 GB = 12.2


def test_seed000_terminal_table_shows_the_numbers_and_assumptions(seed000):
    r = runner.invoke(capacity_app, ["--model-config", seed000, "--gpu", "H100", "--pp", "8",
                                     "--context", "40000", "--kv-dtype", "fp16", "--kv-memory", "40"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "8,192 B (8 KiB)" in out
    assert "3.28 GB (3.05 GiB)" in out
    assert "13.11" in out
    assert "2 - 4" in out
    assert "assumptions:" in out and "40 GiB (--kv-memory)" in out


# ---------------------------------------------------------------- seed 001

def test_seed001_20k_context_fp32_is_2x_fp16_is_4x_fp8(tmp_path):
    # A shape that needs seed 001's "~22 GB" at fp16 for 20k tokens: 72 layers, 32 KV heads x 128 (MHA).
    path = write_config(tmp_path, num_hidden_layers=72, hidden_size=4096, num_attention_heads=32,
                        num_key_value_heads=32, intermediate_size=11008, vocab_size=32000)
    per_seq = {}
    for dt in ("fp32", "fp16", "bf16", "fp8"):
        r = cap("--model-config", path, "--gpu", "Thor", "--context", "20000", "--kv-dtype", dt,
                "--kv-memory", "50")
        per_seq[dt] = r["kv_bytes_per_sequence_per_gpu"]
    gib = {k: v / GIB for k, v in per_seq.items()}
    # the seed's table: FP32 ~45 GB, FP16 ~22 GB, FP8 ~11 GB
    assert gib["fp32"] == pytest.approx(43.9, abs=0.05) and abs(gib["fp32"] - 45) / 45 < 0.05
    assert gib["fp16"] == pytest.approx(22.0, abs=0.05)
    assert gib["fp8"] == pytest.approx(11.0, abs=0.05)
    assert per_seq["fp32"] == 2 * per_seq["fp16"] == 4 * per_seq["fp8"]
    assert per_seq["bf16"] == per_seq["fp16"]
    # "Frees 34GB": fp32 -> fp8 frees 32.9 GiB (35.4 GB) per 20k sequence
    assert (per_seq["fp32"] - per_seq["fp8"]) / GIB == pytest.approx(32.96, abs=0.05)


def test_seed001_fp8_kv_quadruples_the_sequences_that_fit(tmp_path):
    path = write_config(tmp_path, num_hidden_layers=72, hidden_size=4096, num_attention_heads=32,
                        num_key_value_heads=32)
    f = from_config_json(path)
    n = {dt: capacity(f, "Thor", context=20000, kv_dtype=dt, kv_memory_gib=50)["max_sequences"]
         for dt in ("fp32", "fp16", "fp8")}
    assert n["fp32"] == pytest.approx(1.14, abs=0.01)     # 50 GiB / 43.9 GiB
    assert n["fp16"] == pytest.approx(2.27, abs=0.01)
    assert n["fp8"] == pytest.approx(4.55, abs=0.01)


# ---------------------------------------------------------------- seed 004

def test_seed004_llama70b_tp2_two_gb10_over_ib_decode_near_measured():
    r = cap("--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "GB10", "--tp", "2", "--context", "1024",
            "--link", "ib")
    # 70.55B x 2 B / TP 2 = 70.55 GB (65.7 GiB) per GB10
    assert r["weights_bytes_per_gpu"] == 70_550_000_000
    assert r["fits"] is True
    # 70.55 GB / (273 GB/s x 0.8) = 323 ms + 160 all-reduces x ~40.7 µs = 6.5 ms  ->  ~3.0 tok/s
    est = r["decode_tokens_per_s_per_sequence_bound"]
    assert est == pytest.approx(3.03, abs=0.03)
    measured = 3.17
    assert measured / 2 <= est <= measured * 2
    ratio, verdict = judge(measured, est)
    assert 0.9 < ratio < 1.2 and verdict == "at the hardware's limit"
    # the peak-bandwidth roofline is stated too, and the measured speed is below it
    peak = next(a for a in r["assumptions"] if "peak (100 %) bandwidth would give" in a)
    assert "3.77 tok/s" in peak and measured < 3.77
    # KV: 80 layers x 2 x (8 KV heads / TP 2) x 128 x 2 B = 160 KiB per token per GPU
    assert r["kv_bytes_per_token_per_layer"] == 4096
    assert r["kv_bytes_per_token_per_gpu"] == 163840


def test_seed004_levers_nvlink_h100_is_an_order_of_magnitude_faster():
    ib = cap("--model", "Llama-3.3-70B", "--gpu", "GB10", "--tp", "2", "--context", "1024", "--link", "ib")
    nv = cap("--model", "Llama-3.3-70B", "--gpu", "H100 SXM", "--tp", "2", "--context", "1024")
    # 70.55 GB / (3350 GB/s x 0.8) = 26.3 ms + 160 x ~10 µs = 1.6 ms  ->  ~36 tok/s
    assert nv["decode_tokens_per_s_per_sequence_bound"] == pytest.approx(35.8, abs=0.5)
    assert nv["decode_tokens_per_s_per_sequence_bound"] > 10 * ib["decode_tokens_per_s_per_sequence_bound"]
    tcp = cap("--model", "Llama-3.3-70B", "--gpu", "GB10", "--tp", "2", "--context", "1024", "--link", "tcp")
    assert tcp["decode_tokens_per_s_per_sequence_bound"] < ib["decode_tokens_per_s_per_sequence_bound"]


# ---------------------------------------------------------------- MLA and sliding windows

def test_mla_deepseek_latent_is_far_smaller_than_the_plain_formula(tmp_path):
    path = write_config(tmp_path, num_hidden_layers=61, hidden_size=7168, num_attention_heads=128,
                        num_key_value_heads=128, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                        v_head_dim=128, q_lora_rank=1536, intermediate_size=18432, moe_intermediate_size=2048,
                        n_routed_experts=256, num_experts_per_tok=8, n_shared_experts=1, first_k_dense_replace=3,
                        vocab_size=129280, tie_word_embeddings=False, torch_dtype="bfloat16",
                        quantization_config={"quant_method": "fp8"})
    f = from_config_json(path)
    assert f.is_mla and f.dtype == "fp8"
    assert f.params_b == pytest.approx(671, rel=0.01) and f.active_params_b == pytest.approx(37, rel=0.03)
    r = capacity(f, "H200", tp=8, context=40000, kv_dtype="bf16")
    # (512 + 64) x 2 B = 1152 B per token per layer; the plain formula would be 2 x 128 x 128 x 2 = 65,536 B
    assert r["kv_bytes_per_token_per_layer"] == 1152
    plain = 2 * 128 * 128 * 2
    assert r["kv_bytes_per_token_per_layer"] * 56 < plain
    # the latent is replicated on every TP rank: 61 x 1152 B per token per GPU, not divided by 8
    assert r["kv_bytes_per_token_per_gpu"] == 61 * 1152
    assert r["kv_bytes_per_sequence_per_gpu"] == 40000 * 61 * 1152     # 2.81 GB
    # 671 GB of fp8 weights / 8 = 83.9 GB per H200 (141 GiB)
    assert r["weights_bytes_per_gpu"] == pytest.approx(671e9 / 8, rel=0.001)
    assert r["fits"] is True
    # the built-in table agrees with the config
    t = capacity(lookup("deepseek-ai/DeepSeek-R1"), "H200", tp=8, context=40000, kv_dtype="bf16")
    assert t["kv_bytes_per_sequence_per_gpu"] == r["kv_bytes_per_sequence_per_gpu"]


def test_sliding_window_gpt_oss_alternating_layers_hold_only_the_window(tmp_path):
    path = write_config(tmp_path, num_hidden_layers=36, hidden_size=2880, num_attention_heads=64,
                        num_key_value_heads=8, head_dim=64, intermediate_size=2880, num_local_experts=128,
                        num_experts_per_tok=4, vocab_size=201088, tie_word_embeddings=False, sliding_window=128,
                        layer_types=["sliding_attention", "full_attention"] * 18,
                        quantization_config={"quant_method": "mxfp4"}, torch_dtype="bfloat16")
    f = from_config_json(path)
    assert (f.sliding_window, f.sliding_window_layers) == (128, 18)
    assert f.checkpoint_gb == pytest.approx(65.3, rel=0.01)        # MXFP4 experts + BF16 rest
    r = capacity(f, "H100", context=40000, kv_dtype="bf16")
    per_layer = 2 * 8 * 64 * 2                                      # 2048 B
    assert r["kv_bytes_per_token_per_layer"] == per_layer
    assert r["kv_bytes_per_sequence_per_gpu"] == per_layer * (18 * 40000 + 18 * 128)
    plain = per_layer * 36 * 40000
    assert r["kv_bytes_per_sequence_per_gpu"] / plain == pytest.approx(0.5016, abs=0.0005)
    assert r["weights_bytes_per_gpu"] == pytest.approx(65.17e9, rel=0.01)


def test_sliding_window_gemma3_nested_text_config_five_local_one_global(tmp_path):
    path = write_config(tmp_path, model_type="gemma3", text_config={
        "model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376, "num_attention_heads": 32,
        "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504, "vocab_size": 262208,
        "sliding_window": 1024, "sliding_window_pattern": 6, "max_position_embeddings": 131072},
        vision_config={"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                       "hidden_act": "gelu_pytorch_tanh"}, torch_dtype="bfloat16")
    f = from_config_json(path)
    assert (f.layers, f.sliding_window_layers, f.full_attention_layers) == (62, 52, 10)
    assert f.params_b == pytest.approx(27.4, rel=0.01)              # 27.0B text + 0.4B SigLIP
    r = capacity(f, "H100", context=32768, kv_dtype="bf16")
    per_layer = 2 * 16 * 128 * 2
    assert r["kv_bytes_per_sequence_per_gpu"] == per_layer * (10 * 32768 + 52 * 1024)
    assert r["kv_bytes_per_sequence_per_gpu"] < per_layer * 62 * 32768 / 5
    assert r["kv_bytes_per_sequence_per_gpu"] == capacity(
        lookup("google/gemma-3-27b-it"), "H100", context=32768)["kv_bytes_per_sequence_per_gpu"]


# ---------------------------------------------------------------- fit, TP split, warnings

def test_model_that_does_not_fit_warns_with_the_sizes():
    r = cap("--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "H100", "--context", "8192")
    assert r["fits"] is False
    # 405.9B x 2 B = 811.8 GB = 756.0 GiB on one 80 GiB H100
    assert r["weights_bytes_per_gpu"] == 811_800_000_000
    assert any(w.startswith("the model does not fit: weights need 756.0 GiB per GPU") and "80 GiB" in w
               for w in r["warnings"])
    assert r["optimal_concurrency"] == [0, 0]
    assert r["decode_tokens_per_s_per_sequence_bound"] is None and r["prefill_tokens_per_s_bound"] is None
    # the FP8 checkpoint on TP=8 fits: 405.9 GB / 8 = 50.7 GB per GPU
    ok = cap("--model", "meta-llama/Llama-3.1-405B-Instruct-FP8", "--gpu", "H100", "--tp", "8", "--context", "8192")
    assert ok["fits"] is True and ok["weights_bytes_per_gpu"] == pytest.approx(405.9e9 / 8, rel=1e-6)


def test_context_that_does_not_fit_one_sequence_warns():
    r = cap("--model", "Llama-3.1-8B", "--gpu", "L4", "--context", "131072")
    # 8.03B x 2 = 14.96 GiB weights; 24 x 0.9 - 14.96 - 1.5 = 5.14 GiB KV; one 128k sequence needs 16 GiB
    assert r["kv_bytes_per_sequence_per_gpu"] == 131072 * 32 * 4096
    assert r["max_sequences"] == pytest.approx(0.32, abs=0.01)
    assert r["fits"] is False
    assert any("not even one full-length sequence fits" in w for w in r["warnings"])


def test_kv_heads_split_across_tp_then_replicated():
    l8 = cap("--model", "Llama-3.3-70B", "--gpu", "H100", "--tp", "8", "--context", "8192")
    assert l8["kv_bytes_per_token_per_gpu"] == 80 * 2 * 1 * 128 * 2         # 8 KV heads / 8 ranks = 1
    q = cap("--model", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--tp", "8", "--context", "8192")
    assert q["kv_bytes_per_token_per_gpu"] == 48 * 2 * 1 * 128 * 2          # 4 KV heads < TP 8: one each
    assert any("only 4 KV heads for TP=8" in w for w in q["warnings"])


def test_vllm_sample_llama31_8b_kv_line_reproduced():
    # vllm-issue-10517: kv_cache_size=2.89GiB, "Maximum concurrency for 29000 tokens per request: 0.82x",
    # "maximum number of tokens that can be stored in KV cache (23648)"
    r = cap("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "RTX 4090", "--context", "29000",
            "--kv-memory", "2.89")
    assert r["kv_bytes_per_token_per_gpu"] == 131072                        # 128 KiB
    assert r["max_sequences"] == pytest.approx(0.82, abs=0.005)
    tokens = 2.89 * GIB / r["kv_bytes_per_token_per_gpu"]
    assert abs(tokens - 23648) / 23648 < 0.01                               # 23,675 vs 23,648 (16-token blocks)


def test_moe_decode_reads_only_active_weights():
    dense = cap("--model", "Qwen/Qwen3-32B", "--gpu", "H100", "--context", "4096")
    moe = cap("--model", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--context", "4096")
    # similar total weights, but 3.3B active against 32.8B: decode bound roughly 6x higher
    assert moe["weights_bytes_per_gpu"] == pytest.approx(61e9, rel=0.01)
    assert moe["decode_tokens_per_s_per_sequence_bound"] > 5 * dense["decode_tokens_per_s_per_sequence_bound"]
    # prefill: H100 989 TFLOP/s x 0.6 / (2 x 32.8e9 linear + 2 x 64 heads x 256 x 64 layers x 4096/2
    # = 4.3e9 attention FLOP per token) = 593.4e12 / 69.9e9 ~ 8,490 tok/s for the dense model
    assert dense["prefill_tokens_per_s_bound"] == pytest.approx(8490, rel=0.01)


def test_derived_kv_budget_uses_the_stated_reserve():
    r = capacity(lookup("Llama-3.1-8B"), "H100 SXM", context=8192)
    # 80 GiB x 0.9 - 14.96 GiB weights - max(4 GiB, 1.5 GiB) reserve = 53.04 GiB
    budget = r["max_sequences"] * r["kv_bytes_per_sequence_per_gpu"] / GIB
    assert budget == pytest.approx(53.04, abs=0.02)
    assert any("reserve 4.00 GiB" in a and "5% of GPU memory" in a for a in r["assumptions"])


# ---------------------------------------------------------------- JSON contract and errors

def test_json_keys_exactly():
    r = cap("--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "A100 80GB", "--context", "16000")
    assert list(r) == list(JSON_KEYS)
    assert list(JSON_KEYS) == [
        "weights_bytes_per_gpu", "kv_bytes_per_token_per_layer", "kv_bytes_per_token_per_gpu",
        "kv_bytes_per_sequence_per_gpu", "max_sequences", "optimal_concurrency",
        "decode_tokens_per_s_per_sequence_bound", "prefill_tokens_per_s_bound", "fits", "warnings", "assumptions"]
    assert isinstance(r["optimal_concurrency"], list) and len(r["optimal_concurrency"]) == 2
    # 28 layers x 2 x 4 KV heads x 128 x 2 B = 57,344 B per token
    assert r["kv_bytes_per_token_per_gpu"] == 57344


@pytest.mark.parametrize("args, message", [
    (["--model", "no-such-model-1b", "--gpu", "H100", "--context", "1000"], "unknown model 'no-such-model-1b'"),
    (["--model", "Llama-3.1-8B", "--gpu", "Voodoo 5", "--context", "1000"], "unknown GPU 'Voodoo 5'"),
    (["--model", "Llama-3.1-8B", "--gpu", "H100"], "give --context"),
    (["--gpu", "H100", "--context", "1000"], "give --model NAME or --model-config"),
    (["--model", "Llama-3.1-8B", "--gpu", "H100", "--context", "1000", "--kv-dtype", "fp12"], "unknown KV dtype"),
    (["--model", "Llama-3.1-8B", "--gpu", "H100", "--context", "1000", "--tp", "0"], "--tp must be a positive"),
])
def test_errors_are_one_line_and_exit_2(args, message):
    r = runner.invoke(capacity_app, args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("diagnose: ") and message in lines[0]
    assert r.stdout == ""


def test_bad_config_json_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    r = runner.invoke(capacity_app, ["--model-config", str(bad), "--gpu", "H100", "--context", "1000"])
    assert r.exit_code == 2 and r.stderr.startswith("diagnose: ") and "not valid JSON" in r.stderr
    bad.write_text(json.dumps({"vocab_size": 1000}))
    r = runner.invoke(capacity_app, ["--model-config", str(bad), "--gpu", "H100", "--context", "1000"])
    assert r.exit_code == 2 and "missing num_hidden_layers, hidden_size, num_attention_heads" in r.stderr
    r = runner.invoke(capacity_app, ["--model-config", str(tmp_path / "nope.json"), "--gpu", "H100",
                                     "--context", "1000"])
    assert r.exit_code == 2 and "cannot read" in r.stderr
    # no parameter count and no --kv-memory: nothing to size the KV budget from
    path = write_config(tmp_path, name="shape.json", num_hidden_layers=4, hidden_size=256, num_attention_heads=4)
    r = runner.invoke(capacity_app, ["--model-config", path, "--gpu", "H100", "--context", "1000"])
    assert r.exit_code == 2 and "pass --kv-memory" in r.stderr


def test_subprocess_json_like_a_user(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    p = subprocess.run([sys.executable, "-c", "from diagnose.capacity.cli import capacity_app; capacity_app()",
                        "--model", "openai/gpt-oss-120b", "--gpu", "H100", "--context", "40000",
                        "--kv-dtype", "fp8", "--format", "json"],
                       capture_output=True, env=env, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr.decode()
    r = json.loads(p.stdout)
    # 65.3 GB checkpoint on one 80 GiB H100; 18 full layers x 40,000 + 18 sliding x 128 tokens, 1 KiB each
    assert r["weights_bytes_per_gpu"] == 65_300_000_000 and r["fits"] is True
    assert r["kv_bytes_per_sequence_per_gpu"] == 1024 * (18 * 40000 + 18 * 128)


# ---------------------------------------------------------------- the table

def test_table_entries_are_consistent_and_match_their_names():
    from diagnose.capacity.models import table
    rows = table()
    assert len(rows) >= 40
    for row in rows:
        f = lookup(row["name"]) if row["name"] != "DeepSeek-V3 / R1" else lookup("DeepSeek-V3")
        assert f is not None, row["name"]
        assert row["sources"] and all(s.startswith("https://huggingface.co/") for s in row["sources"])
        assert row["num_attention_heads"] % row["num_kv_heads"] == 0, row["name"]
        assert row["active_params_b"] <= row["params_b"]
    expected = {
        "meta-llama/Llama-3.3-70B-Instruct": "Llama-3.3-70B / 3.1-70B",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": "Llama-3.3-70B / 3.1-70B",
        "Qwen/Qwen3-VL-8B-Instruct": "Qwen3-VL-8B",
        "Qwen/Qwen3-8B": "Qwen3-8B",
        "qwen3:30b-a3b": "Qwen3-30B-A3B",
        "Qwen/Qwen2.5-VL-72B-Instruct": "Qwen2.5-VL-72B",
        "Qwen/Qwen2.5-0.5B-Instruct": "Qwen2.5-0.5B",
        "mistralai/Mixtral-8x7B-Instruct-v0.1": "Mixtral-8x7B",
        "mistralai/Mistral-7B-Instruct-v0.1": "Mistral-7B-v0.1",
        "openai/gpt-oss-20b": "gpt-oss-20b",
        "google/gemma-2-9b-it": "Gemma-2-9B",
    }
    for name, entry in expected.items():
        assert lookup(name).name == entry, name
    assert lookup("google/gemma-3n-E4B-it") is None and lookup("some/unknown-model") is None
    assert lookup("Qwen/Qwen2.5-72B-Instruct-AWQ").dtype == "int4"


def test_table_params_agree_with_the_shapes():
    """The table's published totals agree with a count from its own shape (text models, within 1.5 %)."""
    from diagnose.capacity.models import estimate_params, table
    tied = {"Llama-3.2-3B", "Llama-3.2-1B", "Qwen2.5-3B", "Qwen2.5-1.5B", "Qwen2.5-0.5B", "Qwen3-4B",
            "Qwen3-1.7B", "Qwen3-0.6B", "Gemma-3-1B", "Gemma-2-27B", "Gemma-2-9B", "Gemma-2-2B"}
    for row in table():
        if "VL" in row["name"] or row["name"].startswith("Gemma-3") and row["name"] != "Gemma-3-1B":
            continue                                               # vision encoders are in the published total
        f = lookup(row["name"] if "DeepSeek" not in row["name"] else "DeepSeek-V3")
        total, _ = estimate_params(f, tied=row["name"] in tied,
                                   shared_experts=1 if f.is_mla else 0, dense_layers=3 if f.is_mla else 0,
                                   q_lora_rank=1536 if f.is_mla else None)
        assert total == pytest.approx(row["params_b"], rel=0.015), row["name"]


def test_partial_facts_from_a_log_override_the_table():
    from diagnose.capacity import from_partial
    f = from_partial({"dtype": "fp8", "num_hidden_layers": 80}, name="meta-llama/Llama-3.3-70B-Instruct")
    assert f.dtype == "fp8" and f.layers == 80 and "log" in f.source
    r = capacity(f, "H100", tp=2, context=8192)
    assert r["weights_bytes_per_gpu"] == pytest.approx(70.55e9 / 2, rel=1e-6)
    assert from_partial({"dtype": "bf16"}, name=None) is None


def test_kv_arithmetic_without_a_gpu_name():
    """With --kv-memory the KV arithmetic needs no board: Llama-3.1-8B, 32k context, 20 GiB of KV:
    2 x 8 KV heads x 128 x 2 B = 4 KiB per token per layer, 32 layers -> 128 KiB per token, 4 GiB
    per sequence, 5 sequences. Whether the weights fit and the speed bounds need the board: unknown,
    and the output says --gpu adds them."""
    r = cap("--model", "meta-llama/Llama-3.1-8B-Instruct", "--kv-memory", "20", "--context", "32768")
    assert r["kv_bytes_per_token_per_layer"] == 4096 and r["kv_bytes_per_token_per_gpu"] == 131072
    assert r["max_sequences"] == 5 and r["fits"] is None
    assert r["decode_tokens_per_s_per_sequence_bound"] is None and r["prefill_tokens_per_s_bound"] is None
    assert any("--gpu NAME adds them" in a for a in r["assumptions"])
    text = runner.invoke(capacity_app, ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--kv-memory", "20",
                                        "--context", "32768"]).stdout
    assert "GPU (not named)" in text and "decode bound" not in text and "unknown" in text
    bad = runner.invoke(capacity_app, ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--context", "32768"])
    assert bad.exit_code == 2 and "--kv-memory" in bad.output

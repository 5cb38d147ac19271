"""Sources: the scanner's line numbers, prefix peeling across versions, year-less timestamps."""
from __future__ import annotations

import json
from datetime import datetime

from conftest import FIXTURES, run_cli, one
from diagnose.evidence.model import Evidence
from diagnose.sources import load
from diagnose.sources.readers.lineprefix import Clock, peel
from diagnose.sources.readers.files import Input
from diagnose.sources.readers.scanner import ScanCounts, segments
from diagnose.sources.readers.segments import read


def test_scanner_line_numbers_match_a_plain_enumeration(tmp_path):
    lines = []
    for i in range(3000):
        lines.append(f"noise line {i}" if i % 7 else f"INFO 01-01 00:00:00 [x.py:1] Avg prompt throughput: {i}")
    data = ("\n".join(lines)).encode()
    # tiny blocks force lines to straddle block boundaries
    blocks = [data[i:i + 97] for i in range(0, len(data), 97)]
    counts = ScanCounts()
    got = [(n, t) for n, t, _ in read(segments(blocks, tally=False), "f", Evidence(), counts)]
    want = [(i + 1, l) for i, l in enumerate(lines) if "throughput" in l]
    assert got == want
    assert counts.lines == 3000


def test_peel_handles_prefix_shapes_across_versions():
    l = peel("f", 1, "\x1b[1;36m(VllmWorkerProcess pid=13105)\x1b[0;0m INFO 08-19 07:51:03 model_runner.py:732] Loading model weights took 2.3463 GB\r")
    assert (l.proc, l.level, l.stamp, l.msg) == ("VllmWorkerProcess", "INFO", (8, 19, "07:51:03"), "Loading model weights took 2.3463 GB")
    l = peel("f", 1, "2026-05-12T08:01:39.331095044Z (EngineCore pid=120) (RayWorkerProc pid=8272, ip=10.0.0.2) INFO 06-01 09:22:30 [kv_cache_utils.py:1733] GPU KV cache size: 620,944 tokens [repeated 3x across cluster]")
    assert l.ip == "10.0.0.2" and l.repeat == 3 and l.msg == "GPU KV cache size: 620,944 tokens" and l.iso.startswith("2026")
    l = peel("f", 1, "RayWorkerWrapper pid=1861983) INFO 03-27 10:29:03 [model_runner.py:1442] Capturing cudagraphs for decoding.")
    assert l.msg.startswith("Capturing cudagraphs")


def test_timestamps_without_a_year_order_across_new_year():
    c = Clock(2025)
    a = c.at(peel("f", 1, "INFO 12-31 23:59:50 [x.py:1] a"))
    b = c.at(peel("f", 2, "INFO 01-01 00:00:00 [x.py:1] b"))
    assert a == datetime(2025, 12, 31, 23, 59, 50) and b == datetime(2026, 1, 1, 0, 0, 0) and b > a


def test_unrecognised_lines_are_counted(tmp_path):
    f = tmp_path / "x.log"
    f.write_text("hello\nworld\nINFO 01-01 00:00:00 [x.py:1] Using max model len 4096\n")
    ev = load([Input(str(f), str(f))])
    info = ev.inputs[0]
    assert (info.lines, info.recognised_lines, info.unrecognised_lines) == (3, 1, 2)
    assert ev.fact("max_model_len") == 4096


def test_v0_and_v1_stats_lines_parse_into_the_same_series(tmp_path):
    f = tmp_path / "x.log"
    f.write_text(
        "INFO 08-22 20:52:46 metrics.py:406] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 5.5%, CPU KV cache usage: 0.0%.\n"
        "(APIServer pid=7) INFO 03-02 11:00:10 [loggers.py:248] Engine 000: Avg prompt throughput: 8120.4 tokens/s, Avg generation throughput: 310.2 tokens/s, Running: 64 reqs, Waiting: 117 reqs, Preemptions: 12, GPU KV cache usage: 99.1%, Prefix cache hit rate: 41.3%\n")
    ev = load([Input(str(f), str(f))])
    rows = ev.stats_rows
    assert rows[0]["waiting"] == 2 and rows[0]["kv_usage"] == 5.5
    assert rows[1]["waiting"] == 117 and rows[1]["preemptions"] == 12 and rows[1]["prefix_hit"] == 41.3
    cols = ev.stats_columns()
    assert cols["waiting"] == [2.0, 117.0] and cols["preemptions"] == [None, 12.0]


def test_request_prompts_are_hashed_never_stored(tmp_path):
    f = tmp_path / "x.log"
    secret = "my secret customer prompt about invoices"
    f.write_text(f"INFO 10-11 06:51:31 logger.py:37] Received request chat-1: prompt: '{secret}', params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3], lora_request: None.\n")
    ev = load([Input(str(f), str(f))])
    assert sum(ev.prompt_prefixes.values()) == 1
    assert all(secret not in e.text for evs in ev.events.values() for e in evs)


def test_a_prompt_quoting_a_traceback_or_an_oom_is_no_crash(tmp_path):
    """The prompt is the user's text: someone asking about their own stack trace is not the
    server failing (the line-by-line reader once read it as the server's traceback; the bulk
    readers tally request lines without parsing them)."""
    f = tmp_path / "x.log"
    asks = ("Why does this fail? Traceback (most recent call last): File \"x.py\" "
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    f.write_text("INFO 04-20 18:42:20 [api_server.py:1] vLLM API server version 0.8.4\n"
                 f"INFO 04-20 18:42:25 [logger.py:39] Received request chatcmpl-1: prompt: '{asks}', "
                 "params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None.\n"
                 'INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    ev = load([Input(str(f), str(f))])
    assert sum(ev.prompt_prefixes.values()) == 1
    assert not {"traceback", "oom", "engine_crash"} & set(ev.events), sorted(ev.events)
    out = one(run_cli("--format", "json", f).stdout)
    assert not {x["id"] for x in out["findings"]} & {"engine-crash", "cuda-oom"}


def test_wrapped_vllm_args_take_tp_from_worker_names_not_defaults():
    """A paste that hard-wrapped `non-default args: {…}` (and lost the engine-config line): real
    lines of a TP-4 vLLM 0.19 start-up. TP comes from the `Worker_TPn` process names, version and
    model from the banner, and no default is taken from a dict that never closed."""
    p = run_cli("--format", "json", FIXTURES / "engines" / "vllm-wrapped-args-tp4.log")
    assert p.returncode == 0, p.stderr.decode()
    dep = one(p.stdout)["deployment"]
    assert dep["tensor_parallel_size"] == 4
    assert dep["engine_version"] == "0.19.0"
    assert dep["model"] == "/workspace/lambo/models/Qwen3.5-9B"
    assert dep.get("gpu_memory_utilization") is None      # unknown, not vLLM's default 0.9


def test_a_log_that_opens_with_access_lines_is_a_log_not_yaml(tmp_path):
    """`INFO:     10.0.0.1:5000 - "POST …" 200 OK` has YAML's key: value shape; a pasted tail that
    opens with forty of them is still a vLLM log (it was refused as broken YAML)."""
    access = "".join(f'INFO:     10.9.1.21:{50000 + i} - "POST /v1/completions HTTP/1.1" 200 OK\n' for i in range(40))
    stats = ("INFO 09-18 22:42:00 metrics.py:351] Avg prompt throughput: 5061.5 tokens/s, Avg generation throughput: "
             "895.1 tokens/s, Running: 30 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 41.0%, CPU KV "
             "cache usage: 0.0%.\n")
    f = tmp_path / "tail.log"
    f.write_text(access + stats)
    d = one(run_cli("--format", "json", f).stdout)
    assert d["inputs"][0]["kind"] == "log" and d["deployment"]["engine"] == "vllm", d["inputs"]
    assert d["inputs"][0]["lines"] == 41 and d["inputs"][0]["recognised_lines"] == 41, d["inputs"]


def test_per_worker_kv_capacity_lines_give_the_smallest(tmp_path):
    """A TP-4 V1 start-up logs the KV cache size once per worker (real lines, vLLM 0.9): the
    capacity is one worker's (not four times it), and where one worker has less room (its line
    edited here to 301,056 tokens) the smallest is what a request can count on, wherever it comes."""
    real = (FIXTURES / "real" / "vllm-jyngjeon-qwen3-14b-tp4-pcie-client.log").read_text(encoding="utf-8").split("\n")
    d = one(run_cli("--format", "json", FIXTURES / "real" / "vllm-jyngjeon-qwen3-14b-tp4-pcie-client.log").stdout)
    assert (d["deployment"]["kv_cache_tokens"], d["deployment"]["max_concurrency"]) == (335344, 40.94)
    kv_lines = [i for i, x in enumerate(real) if "GPU KV cache size: 335,344 tokens" in x]
    assert len(kv_lines) == 4
    real[kv_lines[1]] = real[kv_lines[1]].replace("335,344", "301,056")     # the second of four, not the last
    real[kv_lines[1] + 1] = real[kv_lines[1] + 1].replace("40.94x", "36.75x")
    f = tmp_path / "tp4-uneven.log"
    f.write_text("\n".join(real), encoding="utf-8")
    dep = one(run_cli("--format", "json", f).stdout)["deployment"]
    assert (dep["kv_cache_tokens"], dep["max_concurrency"]) == (301056, 36.75)


def test_fp8_weights_are_one_byte_a_parameter_whatever_the_method_is_called():
    """A real DeepSeek-R1-Distill-Qwen-32B-FP8 run (vLLM reports quantization 'compressed-tensors',
    dtype half): 32 B parameters at one byte each (about the 32 GiB the log measured), not two —
    which would double the bytes a decode step reads in the roofline."""
    import sys
    sys.path.insert(0, str(FIXTURES.parent))
    from diagnose.pipeline import analyze
    v = analyze([str(FIXTURES / "real" / "vllm-dawnboy-r1-32b-fp8-conc101.log")]).signals.values
    assert (v["model_params_b"], v["bytes_per_param"]) == (32.0, 1.0)
    assert 28 <= v["weights_gib_replica"] <= 34


def test_v0_worker_pids_give_the_ranks_when_the_args_are_missing():
    """An excerpt of a V0 start-up (vllm-project/vllm#7593, Gemma-2-9B on 8×L4): only per-worker
    `(VllmWorkerProcess pid=…)` lines, each loading 2.35 GB. Six worker pids and the driver are at
    least 7 ranks, 8 as TP sizes go: the model is ~18.8 GB of weights (a 9-10 B model), not a 1.3 B
    one read from one rank's share, and it is a V0 engine (no --data-parallel-size to advise)."""
    d = one(run_cli("--format", "json", FIXTURES / "samples" / "vllm" / "vllm-issue-7593.log").stdout)
    dep = d["deployment"]
    assert dep["tensor_parallel_size"] == 8 and 8 <= dep["model_params_b"] <= 11, dep
    f = next(f for f in d["findings"] if f["id"] == "over-parallelized-replicas")
    assert "--data-parallel-size" not in f["fix"]["flags"]["set"] and "load balancer" in f["fix"]["note"]


def test_dump_values_read_as_python_literals_would():
    """kv.value reads plain numbers and quoted strings without literal_eval (a megabyte dict line
    took 6 s): what it gives must be what literal_eval gives, or the text where that fails."""
    import ast
    from diagnose.sources.engines import kv
    for text in ["1", "-1", "0", "-0", "007", "1.5", "01.5", "1.", "-2.5e3", "1e5", "1_000", "'abc'", '"x y"',
                 "'a\\\\b'", "'it''s'", "''", "'", "x", "9" * 5000, "3.0", "[1, 2]", "(1,)"]:
        try:
            want = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            want = text
        got = kv.value(text)
        assert (got, type(got)) == (want, type(want)), text[:20]

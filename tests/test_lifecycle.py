"""What a log says of the server's life beyond its stats: a start-up that stalled until the
server was stopped (the verdict says so, with the last line before the silence), and the shapes
that are not one."""
from __future__ import annotations

import pytest
from conftest import FIXTURES, analyze

STALLED = FIXTURES / "real" / "trtllm-nvidia-srtslurm-glm52-dynamo-decode-tp8-2node-starthang.log"


def _verdict_text(path) -> str:
    return " ".join(analyze(path)["verdict"]["signals"])


def test_a_start_up_that_stalls_until_it_is_stopped_is_said_in_the_verdict(tmp_path):
    """A real log: eight TensorRT-LLM ranks start bootstrapping NCCL at 08:02:17, then nothing
    until Slurm cancels the job at 08:47:26. The verdict says the server never said it was ready,
    how long nothing was logged, and the last line before the silence (file line 1687)."""
    got = _verdict_text(STALLED)
    assert "never said it was ready: nothing was logged for 45 min before it was stopped" in got
    assert "line 1687:" in got and "bootstrapping NCCL WORLD group" in got
    lines = STALLED.read_text(encoding="utf-8").splitlines(keepends=True)
    stop = lines[1687:]
    variants = {
        # the same stop after five minutes: an operator giving up on a slow start-up, no stall
        "five minutes": lines[:1687] + [ln.replace("T08:47:", "T08:07:").replace("08:47:26", "08:07:26") for ln in stop],
        # the server said it was ready, then sat idle until stopped
        "ready, then idle": lines[:1687] + ["INFO:     Application startup complete.\n"] + stop,
        # the log goes on after the silence for longer than the stop's tail
        "log goes on": lines[:1687] + ["[10/07/2026-08:47:20] [TRT-LLM] [I] [_torch][RANK 0] rendezvous done\n",
                                       "[10/07/2026-08:55:00] [TRT-LLM] [I] [_torch][RANK 0] loading weights\n"]
                       + [ln.replace("T08:47:", "T08:55:").replace("08:47:26", "08:55:26") for ln in stop],
        # no stop at the end: a log copied while the server was still starting
        "no stop": lines[:1687],
    }
    for name, body in variants.items():
        p = tmp_path / f"{name.replace(' ', '-').replace(',', '')}.log"
        p.write_text("".join(body), encoding="utf-8")
        assert "never said it was ready" not in _verdict_text(p), name


# -- a stop is not a crash -------------------------------------------------------------------
REAL = FIXTURES / "real"
# Real logs ending in each engine's (and vLLM generation's) stop wording, with the line where the
# stop begins, read from the log.
STOPS = {
    # vLLM V0 (0.10.2, MQLLMEngine): the executor's farewell, then `KeyboardInterrupt: MQLLMEngine terminated`
    "vllm-hmxhpro-minicpmv45-tp2-nop2p-maxseqs1-sigterm.log": (135, "Terminating local vLLM worker processes"),
    # vLLM V1 0.11: FastAPI's shutdown line, nothing after
    "vllm-abi2024-r1-distill-qwen7b-v011-ctrlc-stop.log": (361, "Shutting down FastAPI HTTP server."),
    # vLLM V1 0.2x: `[shutdown]` lines, then the API server's EngineDeadError traceback
    "vllm-vllmhust-qwen25-14b-ascend-sigterm-enginedead.log": (136, "[shutdown] EngineCore: trigger received signal=SIGTERM"),
    "vllm-devpramod-gptoss-20b-cpu-tp1-sweep-sigterm.log": (230, "[shutdown] EngineCore: trigger received signal=SIGTERM"),
    # SGLang's SIGTERM handler
    "sglang-hwaminjung00-qwen3-4b-reasoning-kv-retract-sigterm.log": (669, "SIGTERM received."),
    # Dynamo's TensorRT-LLM worker
    "trtllm-aidynamo-r1-distill-llama8b-a6000-dynamo-sigterm.log": (85, "Received signal 15, initiating graceful shutdown"),
}


def _run(path) -> dict:
    return analyze(path)


@pytest.mark.parametrize("name", sorted(STOPS))
def test_a_stop_in_each_engines_wording_is_said_and_is_no_crash(name):
    line, words = STOPS[name]
    r = _run(REAL / name)
    assert "engine-crash" not in [f["id"] for f in r["findings"]]
    assert r["verdict"]["bottleneck"] != "crashed"
    stopped = r["verdict"]["stopped"]
    assert stopped["line"] == line and words in stopped["text"]
    assert any(s.startswith("the server was stopped") and f"line {line}:" in s for s in r["verdict"]["signals"])


def test_errors_the_stop_prints_are_counted_and_listed_for_verbose():
    """vLLM 0.2x: after `[shutdown] … signal=SIGTERM` the API server logs `AsyncLLM output_handler
    failed` and an EngineDeadError traceback (lines 150-157): the stop's, counted, kept, no crash."""
    r = _run(REAL / "vllm-vllmhust-qwen25-14b-ascend-sigterm-enginedead.log")
    st = r["verdict"]["stopped"]
    assert st["errors_after"] >= 1 and any("EngineDeadError" in x for x in st["errors_after_examples"])
    assert "error(s) after it were the stop's, not a crash" in " ".join(r["verdict"]["signals"])


def test_a_crash_before_the_stop_stays_a_crash():
    """A real log: `ValueError: No available memory for the cache blocks`, the worker dies, then
    vLLM's `[shutdown] Executor: waiting for worker exit`: the failure came first."""
    r = _run(REAL / "vllm-er0080-opt125m-eager-nokv.log")
    assert "engine-crash" in [f["id"] for f in r["findings"]]
    assert r["verdict"]["bottleneck"] == "crashed" and "stopped" not in r["verdict"]


def _tail_variant(tmp_path, name: str, cut: int, extra: list[str]) -> dict:
    # (bytes, split at "\n" only: the real logs keep tqdm's and vLLM's carriage returns)
    lines = (REAL / name).read_bytes().split(b"\n")[:cut]
    p = tmp_path / "variant.log"
    p.write_bytes(b"\n".join(lines) + b"\n" + "".join(x + "\n" for x in extra).encode())
    return _run(p)


# An interpreter's finaliser failing during exit after an offline run's `[shutdown]` lines.
FINALISER = [
    "Exception ignored in: <function LLM.__del__ at 0x7f1c2a3b4c10>",
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 412, in __del__',
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe4 in position 0: unexpected end of data",
]


@pytest.mark.parametrize("status,crash", [("exit_code=0", False), ("exit code 143", False), ("Exit code: -15", False), ("exit_code=1", True),
                                          ("Exited with status 2", True)])
def test_a_wrapper_exit_status_decides_what_the_stops_errors_were(tmp_path, status, crash):
    """The stop's lines of a real vLLM 0.2x log (up to `exiting busy loop`), a finaliser's
    UnicodeDecodeError at exit, then the wrapper's status: 0 or a signal's (143) is an orderly
    end; 1 or 2 says the process failed, and the error is then the crash."""
    r = _tail_variant(tmp_path, "vllm-huxinjing-mineru-diffusion-2.5b-iteration-details.log", 3550, FINALISER + [status])
    ids = [f["id"] for f in r["findings"]]
    assert ("engine-crash" in ids) is crash, ids
    if crash:
        assert "UnicodeDecodeError" in next(f for f in r["findings"] if f["id"] == "engine-crash")["title"]
    else:
        assert r["verdict"]["stopped"]["errors_after"] >= 1


def test_without_a_stop_the_same_error_is_a_crash(tmp_path):
    """The control: the same traceback where the log has no stop line is an uncaught exception."""
    r = _tail_variant(tmp_path, "vllm-huxinjing-mineru-diffusion-2.5b-iteration-details.log", 3541, FINALISER)
    assert "engine-crash" in [f["id"] for f in r["findings"]]


def test_sglang_sigquit_from_a_failed_child_is_a_crash_not_a_stop(tmp_path):
    """SGLang's running-phase SIGQUIT handler: a child failed (the wording since 0.4.x's
    tokenizer manager), unlike its SIGTERM handler's drain."""
    name = "sglang-hwaminjung00-qwen3-4b-reasoning-kv-retract-sigterm.log"
    r = _tail_variant(tmp_path, name, 668, [
        "[2026-09-13 16:10:13] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "[2026-09-13 16:10:18] kill_process_tree called: parent_pid=30489, include_parent=True, pid=30489"])
    assert "engine-crash" in [f["id"] for f in r["findings"]]


def test_tritons_signal_line_is_a_stop(tmp_path):
    """tritonserver on SIGTERM: `Signal (15) received.`; errors of models unloading after it are
    the stop's (the Dynamo TensorRT-LLM log with Triton's lines in place of its own stop)."""
    name = "trtllm-aidynamo-r1-distill-llama8b-a6000-dynamo-sigterm.log"
    r = _tail_variant(tmp_path, name, 84, [
        "Signal (15) received.",
        "I0708 00:55:41.012345 1 server.cc:305] Waiting for in-flight requests to complete.",
        "E0708 00:55:41.512345 1 model_lifecycle.cc:654] failed to unload model 'tensorrt_llm': RuntimeError: NCCL error: unhandled system error"])
    assert "engine-crash" not in [f["id"] for f in r["findings"]]
    assert r["verdict"]["stopped"]["text"].startswith("Signal (15) received")


def test_the_report_says_when_the_server_was_stopped():
    """Terminal and Markdown: the verdict line and the timeline's end mark."""
    from conftest import run_cli
    path = REAL / "vllm-intellistream-qwen25-14b-ascend-npu-kvoffload-pressure.log"
    for fmt, verbose in (("terminal", True), ("markdown", False)):
        p = run_cli(path, "--format", fmt, *(["--verbose"] if verbose else []))
        out = " ".join(p.stdout.decode().split())     # the terminal wraps at 120 columns
        assert p.returncode == 0, p.stderr.decode()
        assert "the server was stopped at 08-02 19:39:45 (line 200:" in out, out[:3000]
        assert "end stopped 08-02 19:39:45 (line 200)" in out
        assert "EngineDeadError" in out     # the stop's errors: --verbose on a terminal, a details block in Markdown


def test_an_engine_failure_line_after_the_stop_and_a_failing_exit_is_that_failure(tmp_path):
    """The real vLLM 0.2x stop of intellistream's log (its EngineDeadError lines after SIGTERM),
    then a wrapper's `exit code 1`: the engine-failure line is cited as itself."""
    r = _tail_variant(tmp_path, "vllm-intellistream-qwen25-14b-ascend-npu-kvoffload-pressure.log", 218, ["exit code 1"])
    crash = next(f for f in r["findings"] if f["id"] == "engine-crash")
    assert "uncaught engine_dead" not in crash["title"]
    assert r["verdict"]["bottleneck"] == "crashed"

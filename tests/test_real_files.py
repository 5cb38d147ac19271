"""Real files as users hand them over: a server's log inside a job's output (a Slurm banner, an
`nvidia-smi` table, a `--query-gpu` CSV, a scheduler's last words), several servers in one file or
folder, captures and results inside a log, and folders holding what is no input at all. Every log
here is a real one from fixtures/real or fixtures/samples; what is put around it is real too."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import FIXTURES, run_cli, report as report_doc

REAL = FIXTURES / "real"
OTHER = FIXTURES / "samples" / "other"
# A Slurm job's vLLM server (a job banner before it), one that served requests: stats, findings.
SLURM_JOB = REAL / "vllm-zzsf11-qwen3vl-30b-conc146.log"
# Another server, of another engine and model: SGLang, Qwen3-14B on TP 2.
SGLANG = REAL / "sglang-tianyangchen357-qwen3-14b-tp2-capture-stall.log"
# A benchmark job's head: its banner, an `nvidia-smi` table, a PyTorch check, a run banner.
JOB_HEAD = REAL / "sglang-dannywillowliu-wan22-t2v-a14b-diffusion-4xh100pcie-cudaoom.log"
VLLM_LINE = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d")


def lines(path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)


def bare_server(path) -> str:
    """The server's own part of a job's output: from its first log line on."""
    ls = lines(path)
    return "".join(ls[next(i for i, x in enumerate(ls) if VLLM_LINE.search(x)):])


def job_head() -> list[str]:
    ls = lines(JOB_HEAD)
    end = next(i for i, x in enumerate(ls) if "server_args" in x)     # up to the server's first line
    return ls[:end]


def report(*paths) -> dict:
    p = run_cli("--format", "json", *paths)
    assert p.returncode in (0, 1), p.stderr.decode()
    return report_doc(p.stdout)


def analyses(d: dict) -> list[dict]:
    return d["analyses"]


def single(*paths) -> dict:
    """The analysis of inputs that make one deployment."""
    (a,) = analyses(report(*paths))
    return a


def summary(a: dict) -> tuple:
    return (sorted(f["id"] for f in a["findings"]), a["verdict"]["bottleneck"])


# -- a server inside a job's output reads as the server alone ------------------------------------
def test_a_slurm_job_output_gives_what_its_server_part_gives(tmp_path):
    bare = tmp_path / "server.log"
    bare.write_text(bare_server(SLURM_JOB))
    job, alone = single(SLURM_JOB), single(bare)
    assert job["deployment"] == alone["deployment"]
    assert summary(job) == summary(alone)
    assert summary(alone)[0], "the server's part must say something for the comparison to mean anything"


def test_a_real_job_preamble_and_gpu_csv_before_a_real_log_change_nothing_it_says(tmp_path):
    """A banner, an `nvidia-smi` table and a `--query-gpu` CSV taken before the server started, and
    Slurm's cancel line after it: the server's facts and findings stay; the table adds the board."""
    bare = tmp_path / "server.log"
    bare.write_text(bare_server(SLURM_JOB))
    head = job_head()
    csv = lines(OTHER / "query-gpu-xuesongtap-csv.txt")[1:7]          # its header and 5 samples
    wrapped = tmp_path / "slurm-3932.out"
    wrapped.write_text("".join(head[:9] + csv + head[9:]) + bare.read_text()
                       + "slurmstepd: error: *** JOB 3932 ON gpuh13 CANCELLED AT 2026-02-16T01:00:00 DUE TO TIME LIMIT ***\n")
    alone, job = single(bare), single(wrapped)
    assert summary(job) == summary(alone)
    for k, v in alone["deployment"].items():
        if v is not None:
            assert job["deployment"].get(k) == v, k
    # what the table adds is the board and what follows from it, nothing of the server's settings
    added = {k for k, v in job["deployment"].items() if v is not None and alone["deployment"].get(k) is None}
    assert "gpu_name" in added
    assert not added & {"tensor_parallel_size", "max_num_seqs", "model", "gpu_memory_utilization"}
    # the CSV's rows were taken before the launch: they name boards, they are not the run's samples
    regions = {r["kind"] for r in job["inputs"][0]["coverage"]["regions"]}
    assert {"vllm", "gpu-query"} <= regions
    assert job["inputs"][0]["coverage"]["server_share"] >= 0.8


# -- several servers in one input, one folder ---------------------------------------------------
def folder_of_two_servers(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "run-a.log").write_text(bare_server(SLURM_JOB))
    (d / "run-b.log").write_text(SGLANG.read_text())
    (d / "README.md").write_text("# Runs\n\n- run a: vLLM, Qwen3-VL\n- run b: SGLang, Qwen3-14B\n\n"
                                 "| run | engine |\n|---|---|\n| a | vLLM |\n")
    (d / "config.json").write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B-Instruct", "tensor_parallel_size": 8}))
    (d / "empty.log").write_text("")
    (d / "core.bin").write_bytes(bytes(range(256)) * 40)
    return d


def _two_deployments_four_notes(fmt: str, out: str):
    notes = ("README.md", "config.json", "empty.log", "core.bin")
    if fmt == "json":
        d = report_doc(out)
        assert len(d["analyses"]) == 2
        assert sorted(s["path"].rsplit("/", 1)[-1] for s in d["skipped"]) == sorted(notes)
        assert {a["deployment"]["engine"] for a in d["analyses"]} == {"vllm", "sglang"}
    elif fmt == "sarif":
        d = json.loads(out)
        assert len(d["runs"]) == 2
        said = [n["message"]["text"] for r in d["runs"] for inv in r.get("invocations", [])
                for n in inv.get("toolExecutionNotifications", [])]
        assert sorted(n for n in notes if any(n in s and s.startswith("skipped") for s in said)) == sorted(notes)
    elif fmt == "junit":
        root = ET.fromstring(out)
        suites = root.findall("testsuite")
        assert len(suites) == 2
        said = {p.get("value") for p in root.iter("property") if p.get("name") == "input-note"}
        assert sorted(n for n in notes if any(n in s and s.startswith("skipped") for s in said)) == sorted(notes)
    else:
        text = re.sub(r"<[^>]+>", "", out) if fmt == "html" else out
        skipped = re.findall(r"skipped \S+/(README\.md|config\.json|empty\.log|core\.bin):", text)
        assert len(skipped) == 4, skipped
        if fmt == "html":
            assert len(re.findall(r'<a id="a-\d+">', out)) == 2
        elif fmt == "markdown":
            assert out.startswith("# diagnose: 2 deployments")
        else:
            assert "2 deployments" in out


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json", "html", "sarif", "junit"])
def test_a_folder_of_two_servers_and_four_non_inputs_in_every_format(tmp_path, fmt):
    d = folder_of_two_servers(tmp_path)
    p = run_cli("--format", fmt, d)
    assert p.returncode in (0, 1), p.stderr.decode()
    _two_deployments_four_notes(fmt, p.stdout.decode())


def test_two_servers_pasted_into_one_file_are_two_deployments_whose_facts_do_not_mix(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(bare_server(SLURM_JOB))
    b.write_text(SGLANG.read_text())
    both = tmp_path / "both.log"
    both.write_text(a.read_text() + b.read_text())
    d = report(both)
    got = {x["deployment"]["engine"]: x for x in analyses(d)}
    assert sorted(got) == ["sglang", "vllm"]
    for engine, alone in (("vllm", single(a)), ("sglang", single(b))):
        assert got[engine]["deployment"]["tensor_parallel_size"] == alone["deployment"]["tensor_parallel_size"]
        assert got[engine]["deployment"]["model"] == alone["deployment"]["model"]
        assert summary(got[engine]) == summary(alone)


def test_a_compose_log_of_two_services_is_two_deployments(tmp_path):
    """`docker compose logs`: each line behind its service's name, the services' lines interleaved."""
    va = bare_server(SLURM_JOB).splitlines(keepends=True)
    sg = lines(SGLANG)
    out = []
    for i in range(max(len(va), len(sg))):
        if i < len(va):
            out.append("vllm-1    | " + va[i])
        if i < len(sg):
            out.append("sglang-1  | " + sg[i])
    f = tmp_path / "compose.log"
    f.write_text("".join(out))
    d = report(f)
    deps = {x["deployment"]["engine"]: x["deployment"] for x in analyses(d)}
    assert sorted(deps) == ["sglang", "vllm"]
    assert deps["sglang"]["tensor_parallel_size"] == 2 and deps["vllm"]["tensor_parallel_size"] == 1


def test_one_server_restarted_in_one_file_is_one_deployment_with_its_launches():
    """A RAG job that built its vLLM engine four times with the same settings, then once more with
    another gpu_memory_utilization: two deployments, the first with its four launches."""
    d = report(REAL / "vllm-baodangtrandev-v0-qwen14b-conc155.log")
    first, second = analyses(d)
    assert len(first["launches"]) == 4
    assert [x["first_line"] for x in first["launches"]] == sorted(x["first_line"] for x in first["launches"])
    assert first["deployment"]["gpu_memory_utilization"] == 0.8
    assert second["deployment"]["gpu_memory_utilization"] == 0.9
    assert second["launches"][0]["first_line"] > first["launches"][-1]["last_line"]


def test_a_restart_loop_of_hundreds_is_one_deployment_read_as_its_first_launches_are(tmp_path):
    """The same two servers' launches alternating 120 times (a crash-and-restart loop of a job that
    starts them in turn): past loading.FOLD_AFTER launches each one that ends joins the earlier
    launch of its server as it is read, so memory stays per line; what the report says is what it
    says of the first few launches: two deployments, their facts unmixed, every launch listed."""
    from diagnose.sources.loading import FOLD_AFTER, read_input
    from diagnose.sources.readers.files import Input
    a = "".join(lines(REAL / "vllm-baodangtrandev-v0-qwen14b-conc155.log"))
    few, many = tmp_path / "few.log", tmp_path / "many.log"
    few.write_text(a * 2)
    many.write_text(a * 60)
    d_few, d_many = report(few), report(many)
    assert len(analyses(d_many)) == len(analyses(d_few)) == 2
    for x, y in zip(analyses(d_few), analyses(d_many)):
        assert summary(x) == summary(y)
        for k in ("model", "gpu_memory_utilization", "max_num_seqs", "kv_cache_tokens"):
            assert x["deployment"].get(k) == y["deployment"].get(k), k
        launched = [p for p in y["launches"] if p["launch_line"]]
        assert len(launched) == len([p for p in x["launches"] if p["launch_line"]]) * 30
        firsts = [p["first_line"] for p in y["launches"]]
        assert firsts == sorted(firsts)
    r = read_input(Input(str(many), str(many)))
    assert len(r.pieces) <= FOLD_AFTER + 2          # not one per launch
    assert r.info.launches == 300


def test_a_loop_of_copies_of_one_log_keeps_its_samples_and_evidence_within_bounds(tmp_path, monkeypatch):
    """A file that holds one log many times over (a job re-running the same server): every copy's
    stats rows are equal to the others', and the launches' shared bound on samples must still hold
    (it once let the wrong launch go when one left it, and kept every row); a folded launch's
    evidence is freed as it is read, with the cycle collector off as a run keeps it."""
    import gc
    from diagnose.evidence.model import Rows, _stats_series
    from diagnose.sources.loading import read_input
    from diagnose.sources.readers.files import Input
    a, b, c = (Rows(4, _stats_series) for _ in range(3))
    a.share(b)
    a.share(c)
    for r in (a, b, c):
        r.append({"source": "x", "v": 1})
    c.leave()
    assert [x is a or x is b for x in a.shared] == [True, True] and c.shared is None
    b.leave()
    assert a.shared is b.shared is None         # alone again: no list holding the Rows itself

    import diagnose.evidence.model as model
    monkeypatch.setattr(model, "MAX_STATS_ROWS", 2000)      # the bound, reached by a small file
    seed = (FIXTURES / "seed003" / "realtime.log").read_text()
    stats = seed.count("Avg prompt throughput")
    def read(copies):
        f = tmp_path / f"copies-{copies}.log"
        f.write_text(seed * copies)
        was = gc.isenabled()
        gc.disable()
        try:
            r = read_input(Input(str(f), str(f)))
            return r, len(gc.get_objects())
        finally:
            if was:
                gc.enable()

    (_, some), (r, more) = read(100), read(300)
    assert r.info.launches == 300
    rows = sum(len(p.ev.stats_rows) for p in r.pieces)
    assert 300 * stats > 2 * 2000 and 2000 // 2 <= rows <= 2000, rows
    # 200 launches more: not their objects too (a launch's evidence is ~100 objects, its closures)
    assert more - some < 10_000, (some, more)
    # and no launch's samples left in a reference cycle (which the run, without the collector,
    # never frees: the rows a fold thinned out stayed with them, ~3 KB a launch)
    was = gc.isenabled()
    gc.disable()
    gc.collect()
    try:
        del r
        gc.collect()            # the earlier reads' objects freed
        gc.set_debug(gc.DEBUG_SAVEALL)
        held = read(300)        # what it read kept: only what the reading let go is garbage
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (Rows, dict)) and (isinstance(o, Rows) or "prompt_tps" in o)]
        del held
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert left == [], len(left)


# -- captures and results inside a log -----------------------------------------------------------
def test_captures_inside_a_log_are_read_as_their_own_regions(tmp_path):
    """A job that prints `nvidia-smi dmon`, `topo -m` and a Prometheus scrape after its server's log."""
    server = bare_server(SLURM_JOB)
    f = tmp_path / "job.out"
    f.write_text(server + "".join(lines(OTHER / "dmon-xuesongtap-s-m-8gpu.txt"))
                 + "$ nvidia-smi topo -m\n" + "".join(lines(OTHER / "topo-xuesongtap-4xa10-sys.txt"))
                 + "$ curl -s localhost:30000/metrics\n" + "".join(lines(OTHER / "sglang-pr-7944-metrics.prom")))
    d = single(f)
    cov = d["inputs"][0]["coverage"]
    kinds = [r["kind"] for r in cov["regions"]]
    assert {"vllm", "gpu-dmon", "gpu-topo", "prometheus-scrape"} <= set(kinds), kinds
    assert cov["share"] >= 0.9
    bare = tmp_path / "server.log"
    bare.write_text(server)
    alone = single(bare)
    for k in ("model", "tensor_parallel_size", "max_num_seqs", "kv_cache_tokens"):
        assert d["deployment"].get(k) == alone["deployment"].get(k), k


# -- saying what was not read ----------------------------------------------------------------------
def test_a_log_mostly_in_no_known_format_says_so_first_and_beside_no_findings(tmp_path):
    """A real server's first lines, then a job's package install (real pip output of a job log)
    running on with the server's lines after it: most of the server's span is not read."""
    job = lines(REAL / "vllm-semianalysisai-kimik27-mxfp4-mi355x-tp4-lmcache-hf429-crash.log")
    pip = [x for x in job[436:755] if not VLLM_LINE.search(x)]
    server = SGLANG.read_text().splitlines(keepends=True)
    f = tmp_path / "job.log"
    f.write_text("".join(server[:5] + pip + server[5:]))
    p = run_cli(f)
    out = p.stdout.decode()
    first = " ".join(out.split("\n\n")[0].split("Bottleneck:")[0].split())
    assert "only" in first and "% of its" in first and "lines are in a format diagnose reads" in first
    md = run_cli("--format", "markdown", f).stdout.decode()
    assert "only" in md.split("\n## ", 1)[0]
    d = report(f)
    assert d["inputs"][0]["coverage"]["share"] < 0.5


def test_stop_wordings_are_no_crash_and_a_dead_engine_leads_the_verdict():
    stopped = single(REAL / "vllm-intellistream-qwen25-14b-ascend-npu-kvoffload-pressure.log")
    assert "engine-crash" not in summary(stopped)[0]
    assert stopped["launches"][-1]["ending"] == "stopped"
    crashed = single(REAL / "vllm-safetyresearch-gptoss-20b-tp8-slurm-triton-import-crash.log")
    assert crashed["verdict"]["bottleneck"] == "crashed"
    assert summary(crashed)[0][0] == "engine-crash"


# -- a TensorRT-LLM server behind a setup script -----------------------------------------------------
TRT_SPARK = REAL / "trtllm-jeansblog-gptoss-120b-dgx-spark-startup.log"
TRT_AUTODEPLOY = REAL / "trtllm-jeansblog-nemotron3-nano-autodeploy-dgx-spark-startup.log"


def test_a_library_logging_in_sglangs_shape_before_a_trtllm_server_is_not_called_sglang():
    """`[2025-12-20 04:19:59] INFO config.py:54: PyTorch version … available.` is SGLang's line shape,
    written here by another library inside a trtllm-serve start-up: no SGLang region is reported."""
    d = single(TRT_SPARK)
    kinds = {r["kind"] for r in d["inputs"][0]["coverage"]["regions"]}
    assert "sglang" not in kinds and "trtllm" in kinds, kinds
    dep = d["deployment"]
    # no argument names the model: the Hugging Face cache path of its checkpoint does
    assert dep["model"] == "openai/gpt-oss-120b"
    # `PyTorchConfig(… use_cuda_graph=True …)`, `AttentionRuntimeFeatures(chunked_prefill=False …)`
    assert dep["enforce_eager"] is False and dep["chunked_prefill"] is False
    assert {"kv-capacity-low", "chunked-prefill-off"} <= {f["id"] for f in d["findings"]}
    # 63.32 GiB of MXFP4 weights measured: the size is not re-estimated from the name at 2 bytes a parameter
    assert dep["weights_gib_replica"] < 70


def test_autodeploy_lines_are_read_and_its_stand_in_kv_pool_is_no_capacity():
    """`[TRT-LLM AUTO-DEPLOY] [RANK 0] [I] [SequenceInfo:] …` gives the limits; the pool sized after
    `Using fake cache manager` (an SSM model) is not reported as KV capacity."""
    d = single(TRT_AUTODEPLOY)
    dep = d["deployment"]
    assert (dep["max_num_seqs"], dep["max_model_len"], dep["max_num_batched_tokens"]) == (64, 16384, 8192)
    assert dep["tensor_parallel_size"] == 1          # world_size=1
    assert dep.get("kv_cache_tokens") is None
    assert not {"kv-capacity-low", "engine-crash"} & {f["id"] for f in d["findings"]}


def test_a_harness_relaying_its_workers_lines_under_its_own_header_is_read_as_the_workers():
    """A test harness re-logs two SGLang workers' output behind its own `[ts] [logger] [INFO]
    [worker_N] ` header: the servers' own lines behind it (stats, launch) are read, each worker
    its own stream."""
    d = report(REAL / "sglang-luoxiaogan-llama2-7b-2workers-router-test.log")
    (a,) = analyses(d)
    assert a["verdict"]["bottleneck"] == "client-bound", a["verdict"]
    assert {x.get("stream") for x in a["launches"]} >= {"worker_0", "worker_1"}, a["launches"]
    assert d["inputs"][0]["coverage"]["unread_engine_lines"] == 0      # 843 Decode/Prefill lines before


def test_a_windows_hugging_face_cache_path_names_the_model_and_the_startup_check_its_memory_share():
    (a,) = analyses(report(REAL / "vllm-sebastianmechno-sys-qwen35-4b-awq-rx6750xt-windows-offline.log"))
    assert a["deployment"]["model"] == "cyankiwi/Qwen3.5-4B-AWQ-4bit"
    (b,) = analyses(report(REAL / "vllm-josephwoodall-qwen36-35b-a3b-startup-free-memory-crash.log"))
    assert b["deployment"]["gpu_memory_utilization"] == 0.92       # `… less than desired GPU memory utilization (0.92, …)`

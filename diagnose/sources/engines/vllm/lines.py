"""vLLM log lines (v0.4 … v0.33, V0 and V1) → evidence. Formats: docs/reference/vllm.md.

Keys on message text, never on the `[file.py:NN]` part, which moves every release.
"""
from __future__ import annotations

import re

from ....evidence.model import Evidence
from ....lazyre import lazy
from ....redact import redact
from .. import kv
from ..kv import excerpt
from ..common import ROUTE_BUDGET, ROUTE_ENTRIES, ROUTE_LONGEST, dispatch, note_alive, note_failure, note_launch, note_prompt
from ....memo import MISS, Memo
from ...readers.lineprefix import Line, visible
from .header import HEADER

STATS = lazy(
    r"^(?:Engine (?P<eng>\d+): |(?P<agg>\d+) Engines Aggregated: )?"
    r"Avg prompt throughput: (?P<ptps>[\d.]+) tokens/s, Avg generation throughput: (?P<gtps>[\d.]+) tokens/s, "
    r"Running: (?P<run>\d+) reqs?, (?:Swapped: (?P<swap>\d+) reqs?, Pending: (?P<pend>\d+) reqs?|Waiting: (?P<wait>\d+) reqs?)"
    r"(?P<rest>.*)$"
)
# Key length bounded: `[\w ]*?` unbounded made a long stats-line tail without `: ` quadratic.
REST_ITEM = lazy(r"(?<!\w)(?P<k>[A-Za-z][\w ]{0,80}?): (?P<v>[\d.]+)\s*(?:%|reqs?)?")
# What comes before a stats message in its plainest shape (loading's fast path: a busy server
# writes a stats line every 10 s per engine): at most one `(Name pid=N[, ip=A]) ` prefix, then
# vLLM's own header. Of such a line the prefix peeler gives what these groups give, and of a
# stats message with only STATS_ITEMS after the queue the shared lines' checks make nothing, so
# both are skipped; tests/test_fast_paths.py holds the two paths equal over every stats line of
# the corpus. Any other shape (a collector's stamp, a stream, two prefixes, another item) takes
# the plain path.
STATS_HEAD = r"(?:\((?P<proc>[A-Za-z_][\w.\-]*) pid=\d+(?:, ip=(?P<ip>[\d.:a-f]+))?\) )?" + HEADER.pattern[1:]
# the head and STATS (its groups, for VllmParser._stats) as one match of the whole line
STATS_LINE = re.compile(STATS_HEAD + "(?P<msg>" + STATS.pattern.removeprefix("^").removesuffix("$") + ")")
STATS_ITEMS = frozenset(("GPU KV cache usage", "CPU KV cache usage", "Prefix cache hit rate", "External prefix cache hit rate",
                         "MM cache hit rate", "Preemptions", "Deferred"))
# the items of most V1 lines, in their order: read without the general walk
STATS_REST_V1 = re.compile(r", GPU KV cache usage: ([\d.]+)%, Prefix cache hit rate: ([\d.]+)%")
STATS_ITEM = re.compile(r", ([A-Za-z][A-Za-z ]*): ([\d.]+)(%| reqs?)?")
# A stats item's column: any `… KV cache usage` but the CPU's is kv_usage (these are the usual ones).
ITEM_COLUMNS = {"GPU KV cache usage": "kv_usage", "Prefix cache hit rate": "prefix_hit", "Preemptions": "preemptions"}
V0_PREFIX_HIT = lazy(r"^Prefix cache hit rate: GPU: (?P<gpu>[\d.]+)%")
CONFIG = re.compile(r"Initializing (?:a (?P<v>V[01]) |an )LLM engine \(v(?P<ver>[^)]+)\) with config: (?P<body>.*)$")
NON_DEFAULT = re.compile(r"non-default args: (?P<d>\{.*)$")
NAMESPACE = re.compile(r"^args: Namespace\((?P<body>.*?)\)?$")
VERSION = re.compile(r"vLLM (?:API )?server version (?P<ver>[\w.+\-]+)(?:, serving model (?P<model>\S+))?")
# The start-up banner (v0.11+): block letters, then "version 0.19.0" and "model <name>" beside them.
BANNER = lazy(r"[█▀▄]\s+(?:version (?P<ver>\d[\w.+\-]*)|model\s+(?P<model>\S+))\s*$")
CMDLINE = re.compile(r"(?:^|\s)(?:vllm serve|-m vllm\.entrypoints\.openai\.api_server|vllm\.entrypoints\.openai\.api_server)\b(?P<args>.*)$")
MAX_LEN = lazy(r"Using max model len (?P<n>\d+)")
CHUNKED = lazy(r"Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)")
BLOCKS = lazy(r"(?:# )?(?:GPU|CUDA|cuda|rocm|cpu|xpu|tpu) blocks: (?P<n>\d+), # CPU blocks: (?P<c>\d+)")
MAX_CONC = lazy(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x?")
# `GPU KV cache size: 131,200 tokens` (the CPU backend says `CPU KV cache size`); newer builds put
# the maximum concurrency on the same line.
KV_SIZE = lazy(r"(?:GPU|CPU|NPU|XPU|TPU) KV cache size: (?P<n>[\d,]+) tokens")
KV_MEM = lazy(r"Available KV cache memory: (?P<g>[\d.]+) GiB")
KV_RESERVED = lazy(r"model weights take (?P<w>[\d.]+)GiB;.*reserved for KV Cache is (?P<kv>[\d.]+)GiB")
TOTAL_MEM = lazy(r"total_gpu_memory \((?P<t>[\d.]+)GiB\) x gpu_memory_utilization \((?P<u>[\d.]+)\)")
PROFILE_1L = lazy(r"Memory profiling results: total_gpu_memory=(?P<t>[\d.]+)GiB.*kv_cache_size=(?P<kv>[\d.]+)GiB gpu_memory_utilization=(?P<u>[\d.]+)")
# The fraction in use, said by the engine itself (V1 0.21+), whatever the default of the version.
# The start-up memory check in both wordings: `Desired GPU memory utilization is (0.9, 72 GiB)` and
# (later versions) `… on startup is less than desired GPU memory utilization (0.92, 10.57 GiB)`.
GMU_STATED = lazy(r"current --gpu-memory-utilization=(?P<u>[\d.]+) is equivalent"
                  r"|[Dd]esired GPU memory utilization(?: is)? \((?P<v>[\d.]+), ")
# `--kv-cache-memory-bytes` given: the KV cache is that size whatever memory is free (0.12+).
KV_PINNED = lazy(r"Initial free memory (?P<free>[\d.]+) GiB, reserved (?P<kv>[\d.]+) GiB for KV Cache as specified by kv_cache_memory_bytes")
WEIGHTS = lazy(r"(?:Loading model weights took|Model loading took) (?P<g>[\d.]+) (?:GiB|GB)(?: memory)?(?: and (?P<s>[\d.]+) seconds)?")
CAPTURE_ON = lazy(r"Capturing (?:the model for CUDA graphs|cudagraphs for decoding)|Capturing CUDA graphs")
CAPTURE_DONE = lazy(r"Graph capturing finished in (?P<s>\d+) secs?(?:, took (?P<g>[\d.]+) GiB)?")
EAGER = lazy(r"Cudagraph is disabled under eager mode|Enforce eager set")
COMPILE = lazy(r"torch\.compile (?:takes|took) (?P<s>[\d.]+) s in total")
INIT = lazy(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s")
AR_PCIE = lazy(r"Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs")
AR_NODES = lazy(r"Custom allreduce is disabled because this process group spans across nodes")
RAY_SPREAD = lazy(r"tensor_parallel_size=(?P<tp>\d+) is bigger than a reserved number of GPUs \((?P<g>\d+) GPUs?\) in a node")
AR_P2P = lazy(r"Custom allreduce is disabled because your platform lacks GPU P2P capability")
PREEMPT = lazy(r"is preempted by PreemptionMode\.(?P<mode>\w+)\b.*?total_num_cumulative_preemption=(?P<n>\d+)")   # \b: no backtracking into the mode
KV_ERR = lazy(r"larger than the maximum number of tokens that can be stored in KV cache|KV cache is needed, which is larger than the available KV cache memory|(?P<none>No available memory for the cache blocks)")
DEAD = lazy(
    r"AsyncEngineDeadError|EngineDeadError|Engine core proc \S+ died|(?:EngineCore|WorkerProc) failed to start|"
    r"EngineCore encountered (?:a fatal error|an issue)|Engine iteration timed out|Worker proc \S+ died|"
    r"engine core exited unexpectedly|RPC call to execute_model timed out|Engine core initialization failed|"
    r"Background loop has errored|died unexpectedly|Writing input of failed execution|"
    # Ray never found the GPUs the placement asked for (multi-node TP/PP): the engine never starts.
    r"Cannot provide a placement group"
)
# A launch flag alone on a line: multi-line shell commands (`\` continuations), docker-compose
# `command: >` blocks.
ARG_LINE = lazy(r"^\s*(?P<flag>--[a-z][\w-]*)(?:[= ]+(?P<val>\"[^\"]*\"|'[^']*'|[^\s\\]+))?\s*\\?\s*$")
SPEC_V1 = lazy(r"SpecDecoding metrics: .*?(?:Avg )?Draft acceptance rate: (?P<r>[\d.]+)%")
SPEC_V0 = lazy(r"Speculative metrics: Draft acceptance rate: (?P<r>[\d.]+)")
# Later V1 builds give counts, not a rate: "Mean acceptance length: 2.47, …, Accepted: 440 tokens, Drafted: 1495 tokens".
SPEC_COUNTS = lazy(r"SpecDecoding metrics: .*?Accepted: (?P<a>\d+) tokens, Drafted: (?P<d>\d+) tokens")
# The start-up memory check names the GPU's total memory even when it fails.
FREE_MEM = lazy(r"Free memory on device (?:\S+ )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup")
PLATFORM = lazy(r"Automatically detected platform (?P<p>\w+)")
REQUEST = re.compile(r"^(?:Received|Added|Finished|Aborted) request")
V0_WORKER_PID = lazy(r"\(VllmWorkerProcess pid=(\d+)\)")
WORKER_TP = re.compile(r"^Worker(?:_\w+?)?_TP(\d+)\b")
WORKER_PP = re.compile(r"^Worker_PP(\d+)")

# Config-dump / CLI names → normalized fact names.
FACT_KEYS = {
    "model": "model", "max_seq_len": "max_model_len", "max_model_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size", "enforce_eager": "enforce_eager",
    "max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "gpu_memory_utilization", "kv_cache_dtype": "kv_cache_dtype",
    "enable_prefix_caching": "prefix_caching", "chunked_prefill_enabled": "chunked_prefill",
    "enable_chunked_prefill": "chunked_prefill", "quantization": "quantization", "dtype": "dtype",
    "block_size": "block_size", "distributed_executor_backend": "distributed_executor_backend",
}
# What vLLM uses when a flag is not given; only applied when a `non-default args` line proves
# the flag was not given.
DEFAULTS = {"gpu_memory_utilization": 0.9, "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
            "data_parallel_size": 1, "enforce_eager": False, "kv_cache_dtype": "auto"}


# Defaults of the flags worth echoing from an old full `args: Namespace(…)` dump.
NAMESPACE_DEFAULTS = {
    "model": None, "host": None, "port": 8000, "served_model_name": None, "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1, "data_parallel_size": 1, "max_model_len": None, "max_num_seqs": 256,
    "max_num_batched_tokens": None, "gpu_memory_utilization": 0.9, "enforce_eager": False,
    "kv_cache_dtype": "auto", "quantization": None, "enable_prefix_caching": False,
    "enable_chunked_prefill": None, "block_size": 16, "swap_space": 4, "dtype": "auto",
    "distributed_executor_backend": None, "speculative_model": None, "num_speculative_tokens": None,
}


class VllmParser:

    def __init__(self) -> None:
        self.seen_non_default = False
        self.version: str | None = None
        # A file may hold several launches: KV capacity is the first launch's (the corpus
        # convention), and within it the smallest any worker reported (the cache is sized by it).
        self.later_launch = False
        self.procs_seen: set = set()
        self.v0_pids: set = set()

    def _worker_name(self, line: Line, ev: Evidence) -> None:
        """`(Worker_TP3 pid=…)`, `(Worker_PP1_TP0 …)`: the process names give TP and PP when the
        arguments are missing or never closed (a wrapped dump) — never over what the log states."""
        self.procs_seen.add(line.proc)
        for key, m in (("tensor_parallel_size", WORKER_TP.search(line.proc)), ("pipeline_parallel_size", WORKER_PP.search(line.proc))):
            if not m:
                continue
            size = int(m.group(1)) + 1
            f = ev.facts.get(key)
            if f is None or (f.text or "").startswith(("(vLLM default", "(from the worker")) and (f.value or 1) < size:
                ev.set_fact(key, size, line.source, line.lineno, f"(from the worker process name {line.proc})")

    def _v0_worker(self, line: Line, ev: Evidence) -> None:
        """V0's multiprocessing workers carry only their pid: the driver plus one process per other
        rank, so N distinct worker pids mean N + 1 ranks (TP x PP: TP unless PP is stated). Used
        only where the log states no TP itself."""
        m = V0_WORKER_PID.match(line.raw.lstrip("\x1b[0123456789;m"))
        if not m or m.group(1) in self.v0_pids or self.later_launch:
            return
        self.v0_pids.add(m.group(1))
        ev.set_fact("v1_engine", False, line.source, line.lineno, "(VllmWorkerProcess: V0's multiprocessing workers)",
                    override=False)
        seen = len(self.v0_pids) + 1
        # An excerpt may miss a worker: TP sizes are powers of two, so at least 7 ranks seen is 8.
        ranks = 1 << (seen - 1).bit_length()
        f = ev.facts.get("tensor_parallel_size")
        mine = (f.text or "").startswith(("(vLLM default", "(from ")) if f is not None else True
        if f is None or mine and ((f.value or 1) < ranks or (f.text or "").startswith("(from ") and f.value == ranks):
            pp = ev.fact("pipeline_parallel_size") or 1
            ev.set_fact("tensor_parallel_size", max(1, ranks // pp), line.source, line.lineno,
                        f"(from {seen - 1} VllmWorkerProcess pids and the driver: at least {seen} ranks, "
                        f"{ranks} as TP sizes go)")

    def feed(self, line: Line, ev: Evidence, when) -> bool:
        msg = line.msg
        src, n = line.source, line.lineno
        if line.proc and line.proc not in self.procs_seen:
            self._worker_name(line, ev)
        if line.proc == "VllmWorkerProcess":
            self._v0_worker(line, ev)
        c = msg[:1]
        if "throughput:" in msg:
            m = STATS.match(msg)
            if m:
                self._stats(m, line, ev, when)
                return True
        if c == "P" and msg.startswith("Prefix cache hit rate: GPU"):
            m = V0_PREFIX_HIT.match(msg)
            if m and ev.stats_rows:
                ev.stats_rows[-1]["prefix_hit"] = float(m.group("gpu"))
            return bool(m)
        if REQUEST.match(msg):
            self.request(line, ev, when)
            return True
        got = head(msg)
        if got is None:
            return dispatch(self, self._simple, msg, line, ev, when)
        kind, m = got
        if kind == "config":
            self._config(m, line, ev)
        elif kind == "non_default":
            # A dict a paste wrapped never closes on its line: take what it says, but no defaults
            # for what it may say further on (a wrapped TP-2 run is not TP 1).
            self._non_default(kv.parse_dict(m.group("d")), line, ev, closed=m.group("d").rstrip().endswith("}"))
        elif kind == "namespace":
            self._non_default(kv.parse_pairs(m.group("body")), line, ev, namespace=True)
        elif kind == "version":
            self._version(m.group("ver"), line, ev)
            ev.set_fact("model", m.group("model"), src, n, line.raw, override=False)
        elif kind == "banner":
            if m.group("ver"):
                self._version(m.group("ver"), line, ev)
            else:
                ev.set_fact("model", m.group("model"), src, n, line.raw, override=False)
        elif kind == "cmdline":
            self._cmdline(m.group("args"), line, ev)
        else:           # "arg_line"
            self._cmdline(m.group(0).strip().rstrip("\\"), line, ev)
        return True

    def request(self, line: Line, ev: Evidence, when) -> None:
        """A request line (REQUEST): counted, the server alive; a received one's prompt head (as a
        hash) and the line as an example (redacted when shown). loading's fast path calls it too."""
        ev.count("request_lines")
        note_alive(ev, line.source)
        if line.msg.startswith("Received"):
            note_prompt(line.msg, ev)
            ev.add_event("request", line.source, line.lineno, lambda: redact(line.raw), when)

    def feed_stats(self, m, items, line: Line, ev: Evidence, when) -> None:
        """A stats line stats_line() read (loading's fast path): what feed() does with it."""
        if line.proc and line.proc not in self.procs_seen:
            self._worker_name(line, ev)
        if line.proc == "VllmWorkerProcess":
            self._v0_worker(line, ev)
        self._stats(m, line, ev, when, items)

    # -- handlers ------------------------------------------------------------------
    def _stats(self, m, line: Line, ev: Evidence, when, items=None) -> None:
        """`items`: the (name, value) pairs after the queue, where stats_line read them already."""
        eng, ptps, gtps, run, wait, pend, swap, rest = m.group("eng", "ptps", "gtps", "run", "wait", "pend", "swap", "rest")
        row = {
            "time": when, "source": line.source, "line": line.lineno,
            "engine_idx": int(eng) if eng else 0,
            "prompt_tps": float(ptps), "gen_tps": float(gtps),
            "running": float(run),
            "waiting": float(wait if wait is not None else pend),
            "swapped": float(swap) if swap is not None else None,
        }
        if items is None:
            items = ((it.group("k").strip(), float(it.group("v"))) for it in REST_ITEM.finditer(rest))
        self._stats_row(row, items, swap is not None, line, ev, when)

    def feed_values(self, v, line: Line, ev: Evidence, when) -> None:
        """A stats line the C reader read (native: dg_stats_line; STATS_WIDTH values, a V1 queue,
        no swap): what feed_stats does with it."""
        if line.proc and line.proc not in self.procs_seen:
            self._worker_name(line, ev)
        if line.proc == "VllmWorkerProcess":
            self._v0_worker(line, ev)
        self._stats_row(values_row(v, line.source, line.lineno, when), (), False, line, ev, when)

    def _stats_row(self, row: dict, items, swapped: bool, line: Line, ev: Evidence, when) -> None:
        for k, v in items:
            col = ITEM_COLUMNS.get(k)       # the usual names at once; any other by the rule below
            if col is not None:
                row[col] = v
            elif k.endswith("KV cache usage") and not k.startswith("CPU"):
                row["kv_usage"] = v
        if "v1_engine" in ev.facts:
            pass                # set_fact(..., override=False) would keep it: one call less a line
        elif swapped:
            ev.set_fact("v1_engine", False, line.source, line.lineno, line.raw, override=False)
        else:
            ev.set_fact("v1_engine", True, line.source, line.lineno, line.raw, override=False)
        ev.add_stats(row)
        if row.get("preemptions"):
            ev.add_event("preemption", line.source, line.lineno, line.raw, when, n=row["preemptions"])

    def _version(self, ver: str, line: Line, ev: Evidence) -> None:
        note_launch(ev, line.source)
        self.version = ver
        ev.set_fact("engine_version", ver, line.source, line.lineno, line.raw)

    def _config(self, m, line: Line, ev: Evidence) -> None:
        src, n, raw = line.source, line.lineno, line.raw
        if "kv_cache_tokens" in ev.facts or "max_concurrency" in ev.facts:
            self.later_launch = True
        self._version(m.group("ver"), line, ev)
        if m.group("v"):
            ev.set_fact("v1_engine", m.group("v") == "V1", src, n, raw)
        elif "v1/engine" in raw or "core.py" in raw:
            ev.set_fact("v1_engine", True, src, n, raw)
        if ev.fact("v1_engine") is False or (not m.group("v") and "llm_engine.py" in raw):
            # V0 serves one replica per engine: no data parallelism
            ev.set_fact("data_parallel_size", 1, src, n, "(V0 engine: no data parallelism)", override=False)
        text = m.group("body").rstrip()
        if text.endswith(")") and text.count(")") > text.count("("):
            text = text[:-1]    # v0.4–v0.6.3 close the dump with `)`
        body = kv.parse_pairs(text)
        ev.add_event("config_dump", src, n, raw[:400] + ("…" if len(raw) > 400 else ""))
        for k, v in body.items():
            ev.settings.setdefault(k, v)
        self._facts(body, line, ev, from_dump=True)
        cc = body.get("compilation_config")
        if isinstance(cc, dict):
            sizes = cc.get("cudagraph_capture_sizes")
            mx = cc.get("max_cudagraph_capture_size", cc.get("max_capture_size"))
            if isinstance(sizes, list) and sizes:
                mx = max(mx or 0, max(s for s in sizes if isinstance(s, (int, float))))
            if mx:
                ev.set_fact("cuda_graph_max_size", int(mx), src, n, excerpt(raw, "cudagraph_capture_sizes"))
            mode = cc.get("cudagraph_mode")
            if (isinstance(sizes, list) and not sizes) or mode == 0 or mode == "NONE":
                ev.set_fact("cuda_graphs", False, src, n, excerpt(raw, '"cudagraph_mode"'))
        spec = body.get("speculative_config")
        if spec not in (None, "None"):
            ev.set_fact("speculative", True, src, n, excerpt(raw, "speculative_config"))
        if isinstance(body.get("device_config"), str) and body["device_config"] in ("cpu", "cuda", "xpu", "tpu", "hpu"):
            ev.set_fact("device", body["device_config"], src, n, excerpt(raw, "device_config"), override=False)

    def _facts(self, d: dict, line: Line, ev: Evidence, from_dump: bool = False) -> None:
        src, n, raw = line.source, line.lineno, line.raw
        for k, v in d.items():
            name = FACT_KEYS.get(k)
            if name is None or v is None or v == "None":
                continue
            if name == "model" and isinstance(v, str):
                v = v.rstrip("/")
            ev.set_fact(name, v, src, n, excerpt(raw, k))
        if "enforce_eager" in d and d["enforce_eager"] is not None:
            ev.set_fact("cuda_graphs", not bool(d["enforce_eager"]), src, n, excerpt(raw, "enforce_eager"))
        if from_dump and "enable_prefix_caching" in d and d["enable_prefix_caching"] is None:
            # V0 printed None for "not set": prefix caching is off by default there.
            ev.set_fact("prefix_caching", False, src, n, raw, override=False)

    def _non_default(self, d: dict, line: Line, ev: Evidence, namespace: bool = False, closed: bool = True) -> None:
        self.seen_non_default = not namespace
        d = {k: v for k, v in d.items() if k not in ("api_key",)}
        if namespace:
            # `args: Namespace(…)` lists every argument, defaults included: keep it verbatim,
            # and take as launch arguments only what differs from the usual defaults.
            ev.settings["namespace"] = d
            ev.settings.setdefault("launch_args", {}).update(
                {k: v for k, v in d.items() if k in NAMESPACE_DEFAULTS and v != NAMESPACE_DEFAULTS[k]})
            self._facts(d, line, ev)
            return
        ev.settings.setdefault("launch_args", {}).update(d)
        self._facts(d, line, ev)
        if not closed:
            return
        for k, v in DEFAULTS.items():
            if k not in d:
                ev.set_fact(FACT_KEYS[k], v, line.source, line.lineno, "(vLLM default: not in non-default args)", override=False)
        if "enforce_eager" not in d:
            ev.set_fact("cuda_graphs", True, line.source, line.lineno, "(vLLM default: enforce_eager not set)", override=False)

    def _cmdline(self, args: str, line: Line, ev: Evidence) -> None:
        d = kv.parse_cmdline(args, positional_model=True)
        ev.settings.setdefault("launch_args", {}).update(d)
        self._facts(d, line, ev)

    # simple one-regex lines ----------------------------------------------------------
    def _max_len(self, m, line, ev, when):
        ev.set_fact("max_model_len", int(m.group("n")), line.source, line.lineno, line.raw)

    def _chunked(self, m, line, ev, when):
        ev.set_fact("max_num_batched_tokens", int(m.group("n")), line.source, line.lineno, line.raw)
        ev.set_fact("chunked_prefill", True, line.source, line.lineno, line.raw)

    def _capacity(self, name, value, line, ev) -> None:
        if self.later_launch:
            return
        old = ev.fact(name)
        if old is None or value < old:
            ev.set_fact(name, value, line.source, line.lineno, line.raw)

    def _blocks(self, m, line, ev, when):
        self._capacity("num_gpu_blocks", int(m.group("n")), line, ev)

    def _max_conc(self, m, line, ev, when):
        self._capacity("max_concurrency", float(m.group("x")), line, ev)
        ev.set_fact("max_model_len", int(m.group("len").replace(",", "")), line.source, line.lineno, line.raw, override=False)

    def _kv_size(self, m, line, ev, when):
        self._capacity("kv_cache_tokens", int(m.group("n").replace(",", "")), line, ev)
        c = MAX_CONC.search(line.msg, m.end())
        if c:
            self._max_conc(c, line, ev, when)

    def _kv_mem(self, m, line, ev, when):
        ev.set_fact("kv_cache_memory_gib", float(m.group("g")), line.source, line.lineno, line.raw)

    def _kv_reserved(self, m, line, ev, when):
        ev.set_fact("weights_gib_per_gpu", float(m.group("w")), line.source, line.lineno, line.raw)
        ev.set_fact("kv_cache_memory_gib", float(m.group("kv")), line.source, line.lineno, line.raw)

    def _total_mem(self, m, line, ev, when):
        ev.set_fact("gpu_memory_gib", float(m.group("t")), line.source, line.lineno, line.raw)
        ev.set_fact("gpu_memory_utilization", float(m.group("u")), line.source, line.lineno, line.raw)

    def _profile(self, m, line, ev, when):
        self._total_mem(m, line, ev, when)
        ev.set_fact("kv_cache_memory_gib", float(m.group("kv")), line.source, line.lineno, line.raw)

    def _kv_pinned(self, m, line, ev, when):
        src, n, raw = line.source, line.lineno, line.raw
        ev.set_fact("kv_cache_memory_gib", float(m.group("kv")), src, n, raw)
        ev.set_fact("kv_cache_memory_pinned", True, src, n, raw)
        free, w = float(m.group("free")), ev.fact("weights_gib_per_gpu")
        if isinstance(w, (int, float)):
            # what the pinned cache leaves unused on the GPU (activations and graphs aside)
            ev.set_fact("available_gpu_mem_gib", round(free - w - float(m.group("kv")), 1), src, n,
                        f"{raw} (free {free} GiB − weights {w} GiB − KV {m.group('kv')} GiB)", override=False)

    def _gmu_stated(self, m, line, ev, when):
        ev.set_fact("gpu_memory_utilization", float(m.group("u") or m.group("v")), line.source, line.lineno, line.raw)
        if m.group("v"):        # the start-up memory check: also says the GPU's free and total memory
            self._free_mem_line(line, ev, when)

    def _free_mem_line(self, line, ev, when):
        m = FREE_MEM.search(line.msg)
        if m:
            self._free_mem(m, line, ev, when)

    def _weights(self, m, line, ev, when):
        ev.set_fact("weights_gib_per_gpu", float(m.group("g")), line.source, line.lineno, line.raw)
        if m.group("s"):
            ev.set_fact("load_seconds", float(m.group("s")), line.source, line.lineno, line.raw)
        ev.add_event("startup_load", line.source, line.lineno, line.raw, when)

    def _capture_on(self, m, line, ev, when):
        ev.set_fact("cuda_graphs", True, line.source, line.lineno, line.raw)
        ev.add_event("cuda_graph_capture", line.source, line.lineno, line.raw, when)

    def _capture_done(self, m, line, ev, when):
        ev.set_fact("cuda_graphs", True, line.source, line.lineno, line.raw)
        ev.set_fact("capture_seconds", float(m.group("s")), line.source, line.lineno, line.raw)
        ev.add_event("cuda_graph_capture", line.source, line.lineno, line.raw, when)

    def _eager(self, m, line, ev, when):
        ev.set_fact("cuda_graphs", False, line.source, line.lineno, line.raw)
        ev.set_fact("enforce_eager", True, line.source, line.lineno, line.raw)
        ev.add_event("eager_mode", line.source, line.lineno, line.raw, when)

    def _compile(self, m, line, ev, when):
        ev.set_fact("compile_seconds", float(m.group("s")), line.source, line.lineno, line.raw)
        ev.add_event("startup_compile", line.source, line.lineno, line.raw, when)

    def _init(self, m, line, ev, when):
        ev.set_fact("startup_seconds", float(m.group("s")), line.source, line.lineno, line.raw)
        ev.add_event("startup_init", line.source, line.lineno, line.raw, when)

    def _ar_pcie(self, m, line, ev, when):
        ev.add_event("allreduce_pcie", line.source, line.lineno, line.raw, when)

    def _ar_nodes(self, m, line, ev, when):
        ev.add_event("tp_across_nodes", line.source, line.lineno, line.raw, when)

    def _ray_spread(self, m, line, ev, when):
        ev.add_event("tp_across_nodes", line.source, line.lineno, line.raw, when)
        ev.set_fact("gpus_per_node", int(m.group("g")), line.source, line.lineno, line.raw)

    def _ar_p2p(self, m, line, ev, when):
        ev.add_event("allreduce_no_p2p", line.source, line.lineno, line.raw, when)

    def _preempt(self, m, line, ev, when):
        ev.add_event("preemption", line.source, line.lineno, lambda: redact(line.raw), when, total=int(m.group("n")))
        ev.counters["preemptions_total"] = max(ev.counters.get("preemptions_total", 0), int(m.group("n")))

    def _kv_err(self, m, line, ev, when):
        # No memory for any block is a memory-headroom failure (nothing left after weights and
        # activations), not a cache too small for the model length.
        ev.add_event("kv_no_memory" if m.group("none") else "kv_capacity_error", line.source, line.lineno, line.raw, when)

    def _dead(self, m, line, ev, when):
        note_failure(ev, "engine_dead", line, when)

    def _spec(self, m, line, ev, when):
        # by the pattern's text: these are lazy patterns (lazyre), not the compiled ones m.re is
        if m.re.pattern == SPEC_COUNTS.pattern:
            drafted = int(m.group("d"))
            if not drafted:         # an interval without drafts says nothing about acceptance
                ev.set_fact("speculative", True, line.source, line.lineno, line.raw)
                return
            r = 100.0 * int(m.group("a")) / drafted
        else:
            r = float(m.group("r"))
        if m.re.pattern == SPEC_V0.pattern:
            r *= 100.0
        ev.set_fact("speculative", True, line.source, line.lineno, line.raw)
        ev.add_event("spec_decode", line.source, line.lineno, line.raw, when, acceptance=r)

    def _free_mem(self, m, line, ev, when):
        ev.set_fact("gpu_memory_gib", float(m.group("total")), line.source, line.lineno, line.raw, override=False)
        ev.set_fact("gpu_free_at_start_gib", float(m.group("free")), line.source, line.lineno, line.raw, override=False)
        ev.add_event("startup_memory_short", line.source, line.lineno, line.raw, when)

    def _platform(self, m, line, ev, when):
        ev.set_fact("platform", m.group("p"), line.source, line.lineno, line.raw)

    # The table's patterns are lazy (lazyre.py), as are the rarer lines' above: a message is
    # searched with one only where its literal text is (common.route), and a log that has none
    # of a pattern's lines never compiles it.
    _simple = [
        (MAX_LEN, _max_len), (CHUNKED, _chunked), (BLOCKS, _blocks), (KV_SIZE, _kv_size), (MAX_CONC, _max_conc), (KV_MEM, _kv_mem), (KV_RESERVED, _kv_reserved), (TOTAL_MEM, _total_mem),
        (PROFILE_1L, _profile), (WEIGHTS, _weights), (CAPTURE_DONE, _capture_done),
        (CAPTURE_ON, _capture_on), (EAGER, _eager), (COMPILE, _compile), (INIT, _init),
        (AR_PCIE, _ar_pcie), (AR_P2P, _ar_p2p), (AR_NODES, _ar_nodes), (RAY_SPREAD, _ray_spread), (PREEMPT, _preempt), (KV_ERR, _kv_err),
        (DEAD, _dead), (SPEC_V1, _spec), (SPEC_COUNTS, _spec), (SPEC_V0, _spec), (PLATFORM, _platform),
        (GMU_STATED, _gmu_stated), (KV_PINNED, _kv_pinned), (FREE_MEM, _free_mem),
    ]


_KV_COL, _HIT_COL = ITEM_COLUMNS["GPU KV cache usage"], ITEM_COLUMNS["Prefix cache hit rate"]


def values_row(v, source: str, n: int, when) -> dict:
    """The stats row of a line the C reader read (STATS_WIDTH values, -1 where absent), as
    _stats makes it of the same line: its two items, when it has them, the KV usage and prefix hit."""
    row = {"time": when, "source": source, "line": n, "engine_idx": int(v[8]) if v[8] > 0 else 0,
           "prompt_tps": v[9], "gen_tps": v[10], "running": v[11], "waiting": v[12], "swapped": None}
    if v[13] >= 0:
        row[_KV_COL] = v[13]
        row[_HIT_COL] = v[14]
    return row


# A request line in its plainest shape: STATS_HEAD (at most one process prefix, vLLM's header),
# then the wording REQUEST opens with.
REQUEST_HEAD = re.compile(STATS_HEAD + r"(?=(?:Received|Added|Finished|Aborted) request)")


def request_line(source: str, n: int, text: str) -> Line | None:
    """The Line peel() makes of a request line in REQUEST_HEAD's shape; None for any other line.
    (A line ending in Ray's `[repeated Nx across cluster]` is peeled otherwise: the caller's to
    leave.)"""
    text = visible(text)
    m = REQUEST_HEAD.match(text)
    if m is None:
        return None
    proc, ip, level, mon, day, hms = m.group("proc", "ip", "level", "mon", "day", "hms")
    return Line(source, n, text, text[m.end():], proc, ip, level, (int(mon), int(day), hms), fmt="vllm")


def stats_line(source: str, n: int, text: str):
    """(Line, STATS_LINE match, items) of a stats line in its plainest shape (STATS_HEAD), as
    peel() and the parser read it: `items` the (name, value) pairs REST_ITEM finds after the
    queue; None for any other line."""
    text = visible(text)
    m = STATS_LINE.fullmatch(text)
    if m is None:
        return None
    proc, ip, level, mon, day, hms, msg, rest = m.group("proc", "ip", "level", "mon", "day", "hms", "msg", "rest")
    items = _items(rest) if rest else ()
    if items is None:
        return None
    return Line(source, n, text, msg, proc, ip, level, (int(mon), int(day), hms), fmt="vllm"), m, items


def _items(rest: str):
    """The (name, value) pairs REST_ITEM finds in `, Name: 1.5%, Name: 3 reqs.` where every name
    is one of STATS_ITEMS: STATS_ITEM's matches laid end to end over the whole rest (a last `.`
    aside) find what REST_ITEM finds. None for a rest of any other shape, or a value float()
    refuses (the plain path counts that line malformed)."""
    m = STATS_REST_V1.fullmatch(rest)
    if m is not None:
        kv, hit = m.groups()
        try:
            return [("GPU KV cache usage", float(kv)), ("Prefix cache hit rate", float(hit))]
        except ValueError:
            return None
    found = STATS_ITEM.findall(rest)
    size = 4 * len(found)
    for k, v, unit in found:
        if k not in STATS_ITEMS:
            return None
        size += len(k) + len(v) + len(unit)
    if size != len(rest) and not (size == len(rest) - 1 and rest[-1] == "."):
        return None
    try:
        return [(k, float(v)) for k, v, _ in found]
    except ValueError:
        return None


def head(msg: str):
    """(kind, match) of the start-up lines the parser reads before its table (a config dump, the
    arguments, the version, the launch command), in the order it tries them; None for none."""
    got = _HEADS.get(msg)
    if got is MISS:
        got = head_plain(msg)
        _HEADS.put(msg, got)
    return got


# The start-up lines head() tells first, in the order tried: (kind, how its pattern is applied).
_HEAD_FIRST = (("config", CONFIG.search), ("non_default", NON_DEFAULT.search), ("namespace", NAMESPACE.match),
               ("version", VERSION.search))


def head_plain(msg: str):
    # Each of these lines' patterns needs words of its own (the order below): a message with none
    # of them (most messages) is none of these lines, told without a search of each pattern.
    if not ("Initializing" in msg or "non-default args: " in msg or msg.startswith("args: Namespace(")
            or "server version" in msg or "vllm serve" in msg or "vllm.entrypoints" in msg or msg[:1] in "█▀▄ "
            or msg.lstrip().startswith("--")):
        return None
    return _head_searched(msg)


def _head_searched(msg: str):
    """head_plain's patterns tried one after the other on any message."""
    for kind, find in _HEAD_FIRST:
        m = find(msg)
        if m:
            return kind, m
    if msg[:1] in "█▀▄ " and ("█" in msg or "▀" in msg):
        m = BANNER.search(msg)
        if m:
            return "banner", m
    m = CMDLINE.search(msg)
    if m and "--" in m.group("args"):
        return "cmdline", m
    if msg.lstrip().startswith("--"):
        m = ARG_LINE.match(msg)
        if m:
            return "arg_line", m
    return None


# Start-up lines repeat verbatim at each launch of a restart loop: `head` depends on the message
# alone and is kept by message, bounded as common.route is (memo.py).
_HEADS = Memo(ROUTE_ENTRIES, ROUTE_LONGEST, ROUTE_BUDGET)


def looks_like(line: Line) -> bool:
    """Does this line prove the log is vLLM's? (Engine detection; SGLang/TRT-LLM add theirs.)"""
    return line.stamp is not None and line.level is not None


Parser = VllmParser

"""SGLang log lines (0.1 … 0.5.x and 2026 builds) → evidence. Formats: docs/reference/sglang.md.

Batch lines are parsed by key, not position: field order changed between builds.
"""
from __future__ import annotations

import re

from ....evidence.model import Evidence
from ....lazyre import lazy
from .. import kv
from ..kv import excerpt
from ....redact import redact
from ..common import dispatch, note_alive, note_failure, note_launch, note_prompt_field, plain_access
from ...literals import search
from ...readers.lineprefix import ANSI, Line, _dt, peel, visible
from .header import HEADER

SERVER_ARGS = lazy(r"(?:server_args=)?`?ServerArgs\((?P<body>.*)$|server_args(?:=|: )(?P<dict>\{.*)$")
BATCH = re.compile(r"^(?:(?P<kind>Prefill|Decode) batch(?:\(mixed[^)]*\))?(?: ?\[\d+\])?[.,] |(?P<old>new fill batch\. )|(?=#running-req: ))")
# Key lengths bounded ({0,80}): unbounded, a long batch line without `: ` took quadratic time
# (a 300 KB damaged line: minutes).
ITEM = re.compile(r"(?<![\w#-])(?P<k>#?[a-zA-Z][\w\- ]{0,80}?(?: \(token/s\)| \(GB/s per GPU\)| \(per GPU\))?): (?P<v>[-\w.%=]+)")
OLD_ITEM = re.compile(r"#(?P<k>\w+): (?P<v>[\d.]+)%?")
# Three lazy `.*?` around optional groups backtracked cubically when `avail mem=` was missing (a
# 2 KB line: 16 s, 8 KB: 12 min); the lookahead fails such a line at once. The optional groups,
# each tried before skipped, now also capture type= and dtype= (lazily skipped, they never did).
LOAD_QUANT = lazy(r"\bquant=(\w+)")
LOAD_END = lazy(r"Load weight end\.(?=.*?avail mem=[\d.]+ GB)(?:.*?\btype=(?P<type>\w+))?(?:.*?dtype=torch\.(?P<dtype>\w+))?"
                r".*?avail mem=(?P<avail>[\d.]+) GB(?:, mem usage=(?P<usage>[\d.]+) GB)?")
LOAD_BEGIN = lazy(r"Load weight begin\. avail mem=(?P<avail>[\d.]+) GB")
KV_ALLOC = lazy(r"KV Cache is allocated\..*?#tokens: (?P<n>\d+)(?:, K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|, KV size: (?P<kv>[\d.]+) GB)?")
KV_DTYPE = lazy(r"Using KV cache dtype: (?:torch\.)?(?P<d>\w+)")
MAX_TOTAL = lazy(r"max_total_num_tokens=(?P<n>\d+)(?P<rest>.*)")
GRAPH_BS = lazy(r"Capture cuda graph bs \[(?P<bs>[\d, ]+)\]")
GRAPH_END = lazy(r"Capture cuda graph end\. Time elapsed: (?P<s>[\d.]+) s")
READY = lazy(r"The server is fired up and ready to roll")
RETRACT = lazy(r"(?:[Dd]ecode out of memory happened|KV cache pool is full\. Retract requests)[.,] #retracted_reqs: (?P<n>\d+)")
# The KV token pool ran out (not a CUDA allocation failure): SGLang asks for a smaller batch.
POOL_OOM = lazy(r"(?:(?:Prefill|Decode) o|^O|: O)ut of memory\. Try to lower your batch size")
# Fewer decode lines than this in a file: its prefill lines count as samples too.
PREFILL_AS_SAMPLES_BELOW = 6
# SGLang turns graphs off itself for some backends ("… because of using torch native attention backend").
# Greedy, stripped in the parser: a lazy `.+?` before `\.?\s*$` retried the tail at every
# character, quadratic on a long line of spaces.
GRAPH_OFF = lazy(r"Cuda graph is disabled because of using (?P<why>.*\S)")
NOT_ENOUGH = lazy(r"Not enough memory\. Please try to increase --mem-fraction-static")
# The HTTP server's watchdog: the scheduler or detokenizer stopped answering (a hang). Once is a
# stall; twice or more with no batch after the first, and the engine is gone (parser's finish).
HEALTH_FAIL = lazy(r"Health check failed\. Server couldn't get a response from (?P<who>\w+)")
# The version as a container banner (NGC's SGLang image) or `python -m sglang.version` prints it.
VERSION = lazy(r"^SGLang [Vv]ersion:? v?(?P<v>\d+\.\d[\w.+\-]*)")
CRASH = lazy(r"Scheduler hit an exception|Received sigquit from a child process|SIGQUIT received\. .*child failed|TpModelWorkerClient hit an exception|Exception in run_scheduler_process|detokenizer.*hit an exception")
CMDLINE = lazy(r"sglang\.launch_server\b(?P<args>.*)$")
NCCL_VER = lazy(r"sglang is using nccl==(?P<v>[\d.]+)")
MID_HEADER = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z][A-Z_]*\d+)*\] ")

# A batch line in its plainest shape, read whole (loading's fast path: a busy server writes one
# every few decode steps): SGLang's header, BATCH, then only the items below, each a number or
# True/False. Of such a line the prefix peeler gives what the header's groups give and the shared
# lines' checks make nothing; tests/test_fast_paths.py holds the two paths equal over every batch
# line of the corpus. Any other shape (a relay's tags, a tqdm bar, another item) takes the plain path.
BATCH_ITEMS = frozenset((
    "#running-req", "#token", "token usage", "cuda graph", "cpu graph", "npu graph", "gen throughput (token/s)",
    "#queue-req", "pre-allocated usage", "#prealloc-req", "#transfer-req", "#retracted-req", "#new-seq", "#new-token",
    "#cached-token", "#pending-token", "#bootstrap-req", "#inflight-req", "input throughput (token/s)",
    "full token usage", "swa token usage", "#full token", "#swa token", "accept len", "accept rate"))
# one item whole (anchored: a search on a long line without one fails at once, no restart per character)
BATCH_ITEM = re.compile(r"\A(#?[a-z][a-z\- ]*(?: \(token/s\))?): ([\d.]+%?|True|False)\Z")


def _args_step(text: str, state: tuple) -> tuple:
    """A wrapped `ServerArgs(` closes when its brackets do, outside quotes."""
    state = kv.balance(text, state)
    return state, state[0] <= 0 and state[1] is None


# ServerArgs / CLI names → normalized facts. SGLang's own names are kept under settings.
FACT_KEYS = {
    "model_path": "model", "tp_size": "tensor_parallel_size", "tp": "tensor_parallel_size",
    "dp_size": "data_parallel_size", "dp": "data_parallel_size", "pp_size": "pipeline_parallel_size",
    "mem_fraction_static": "gpu_memory_utilization", "max_running_requests": "max_num_seqs",
    "kv_cache_dtype": "kv_cache_dtype", "quantization": "quantization", "context_length": "max_model_len",
    "dtype": "dtype", "cuda_graph_max_bs": "cuda_graph_max_size",
    "schedule_conservativeness": "schedule_conservativeness", "schedule_policy": "schedule_policy", "device": "device",
    "speculative_algorithm": "speculative_algorithm", "enable_dp_attention": "enable_dp_attention",
    "ep_size": "expert_parallel_size",
    "attention_backend": "attention_backend", "max_queued_requests": "max_queue_depth",
}


class SglangParser:

    def __init__(self) -> None:
        self.version: str | None = None
        self._dump = kv.WrappedDump(_args_step, 200, type(self)._server_args)   # a ServerArgs dump wrapped over lines
        self._prefill_tokens = 0.0
        self._prefill_cached = 0.0
        self._prefill_seqs = 0.0
        self._last_decode = None
        self._decode_seen = False
        self._decode_rows = 0
        self.loads: dict = {}           # ("main"/"draft", rank tags) → weights GB it loaded
        self._health_fail: list = []    # (line, time) of each failed health check
        self._last_batch = 0            # line number of the last batch line
        self._prefill_rows: list = []     # prefill lines as samples of the gauges, kept aside

    # -- continuation of a wrapped dump ------------------------------------------------
    def wants_more(self) -> bool:
        return self._dump.wants_more()

    def more(self, text: str, ev: Evidence) -> None:
        self._dump.more(self, text, ev)

    def finish(self, ev: Evidence) -> None:
        self._dump.finish(self, ev)
        hung = self._health_fail
        if len(hung) >= 2 and self._last_batch < hung[0][0].lineno:
            line, when = hung[0]
            note_failure(ev, "engine_dead", line, when)
            ev.add_event("engine_hang", line.source, line.lineno, line.raw, when, checks=len(hung))
        # Decode lines come every N decode steps: a run that is mostly prefill (a burst of long
        # prompts) may leave one or two. Then the prefill lines are the samples of running,
        # queue and KV usage, beside those decode lines.
        if self._decode_seen and self._decode_rows < PREFILL_AS_SAMPLES_BELOW and len(self._prefill_rows) > self._decode_rows:
            ev.stats_rows.extend(self._prefill_rows)
            ev.stats_rows.sort(key=lambda r: (r.get("source") or "", r.get("line") or 0))
        self._prefill_rows = []

    # -- lines ------------------------------------------------------------------------
    def feed(self, line: Line, ev: Evidence, when) -> bool:
        msg = line.msg
        if line.fmt is None and "] " in msg:
            m = MID_HEADER.search(msg)
            if m and m.start() > 0:   # a tqdm bar stuck to the start of a log line
                line = peel(line.source, line.lineno, msg[m.start():])
                when = line.dt or when
                msg = line.msg
        if msg.startswith("Receive: obj="):      # --log-requests: the prompt's head, as a hash only
            ev.count("request_lines")
            note_prompt_field(msg, ev)
            ev.add_event("request", line.source, line.lineno, lambda: redact(line.raw), when)
            return True
        if "batch" in msg[:30] or msg.startswith("#running-req"):
            m = BATCH.match(msg)
            if m:
                self._last_batch = line.lineno
                self._batch(m, msg, line, ev, when)
                return True
        m = search(SERVER_ARGS, msg)     # gated by its phrase: the pattern starts with none
        if m:
            note_launch(ev, line.source)
            if m.group("dict"):
                self._apply(kv.parse_dict(m.group("dict")), line, ev)
                return True
            body = m.group("body")
            if kv.balanced("(" + body):
                self._server_args(body, line, ev)
            else:
                self._dump.open(body, line, kv.balance(body))
            return True
        return dispatch(self, self._simple, msg, line, ev, when)

    def feed_stats(self, m, items, line: Line, ev: Evidence, when) -> None:
        """A batch line batch_line() read (loading's fast path): what feed() does with it."""
        self._last_batch = line.lineno
        self._batch(m, line.msg, line, ev, when, items)

    def _server_args(self, body: str, line: Line, ev: Evidence) -> None:
        body = body.rstrip().rstrip("`").rstrip()
        if body.endswith(")"):
            body = body[:-1]
        d = kv.parse_pairs(body)
        ev.add_event("config_dump", line.source, line.lineno, line.raw[:300])
        self._apply(d, line, ev)

    def _apply(self, d: dict, line: Line, ev: Evidence) -> None:
        src, n, raw = line.source, line.lineno, line.raw
        for k, v in d.items():
            ev.settings.setdefault(k, v)
            name = FACT_KEYS.get(k)
            if name and v is not None:
                if name == "kv_cache_dtype" and v == "auto":
                    v = "auto"
                ev.set_fact(name, v, src, n, excerpt(raw, k + "="))
        if "disable_cuda_graph" in d:
            ev.set_fact("cuda_graphs", not d["disable_cuda_graph"], src, n, excerpt(raw, "disable_cuda_graph"))
            ev.set_fact("enforce_eager", bool(d["disable_cuda_graph"]), src, n, excerpt(raw, "disable_cuda_graph"))
        if "disable_radix_cache" in d:
            ev.set_fact("prefix_caching", not d["disable_radix_cache"], src, n, excerpt(raw, "disable_radix_cache"))
        if "chunked_prefill_size" in d:
            c = d["chunked_prefill_size"]
            # -1 disables chunked prefill; None means "auto" (on) from 0.4.9, off in 0.2.x.
            ev.set_fact("chunked_prefill", c is not None and c != -1 and c > 0 if isinstance(c, int) else None,
                        src, n, excerpt(raw, "chunked_prefill_size"))
            if isinstance(c, int) and c > 0:
                ev.set_fact("max_num_batched_tokens", c, src, n, excerpt(raw, "chunked_prefill_size"))
        if d.get("speculative_algorithm"):
            ev.set_fact("speculative", True, src, n, excerpt(raw, "speculative_algorithm"))
        if d.get("disaggregation_mode") in ("prefill", "decode"):
            # a prefill/decode disaggregated node: which half of the work it does
            ev.set_fact("node_role", d["disaggregation_mode"], src, n, excerpt(raw, "disaggregation_mode"))
        for k, default in (("tp_size", 1), ("dp_size", 1), ("pp_size", 1)):
            if k not in d and "model_path" in d:
                ev.set_fact(FACT_KEYS[k], default, src, n, "(SGLang default)", override=False)
        ev.settings.setdefault("launch_args", {})

    def _batch(self, m, msg: str, line: Line, ev: Evidence, when, pairs=None) -> None:
        """`pairs`: the (name, value) pairs ITEM finds after BATCH, where batch_line read them already."""
        if m.group("old"):
            items = {k: float(v) for k, v in OLD_ITEM.findall(msg)}
            self._prefill_tokens += items.get("new_token", 0)
            self._prefill_cached += items.get("cached_token", 0)
            self._prefill_seqs += items.get("seq", 0)
            return
        if pairs is None:
            pairs = ((it.group("k").strip(), it.group("v")) for it in ITEM.finditer(msg[m.end():]))
        items = {k: v.rstrip(",%") for k, v in pairs}
        kind = m.group("kind") or "Decode"
        num = _num
        graph = items.get("cuda graph") or items.get("npu graph") or items.get("cpu graph")
        if graph is not None:
            ev.count(f"sglang_{kind.lower()}_graph_{graph.lower()}")
        if kind == "Prefill":
            self._prefill_tokens += num(items.get("#new-token")) or 0
            self._prefill_cached += num(items.get("#cached-token")) or 0
            self._prefill_seqs += num(items.get("#new-seq")) or 0
            ev.count("sglang_prefill_lines")
            ev.add_event("prefill_batch", line.source, line.lineno, line.raw, when)
            # Logs with no Decode line (prefill-heavy excerpts) still show load and queue.
            usage = num(items.get("token usage", items.get("full token usage")))
            row = {"time": when, "source": line.source, "line": line.lineno,
                   "engine_idx": _dp_rank(line.tags), "running": num(items.get("#running-req")),
                   "waiting": num(items.get("#queue-req")),
                   "kv_usage": usage * 100 if usage is not None else None,
                   "prompt_tps": num(items.get("input throughput (token/s)")), "kind": "prefill"}
            if not self._decode_seen:
                ev.add_stats(row)
            elif len(self._prefill_rows) < PREFILL_AS_SAMPLES_BELOW * 100:
                self._prefill_rows.append(row)
            return
        if not self._decode_seen:
            self._decode_seen = True
            self._prefill_rows = [r for r in ev.stats_rows if r.get("kind") == "prefill" and r["source"] == line.source]
            ev.stats_rows[:] = [r for r in ev.stats_rows if r.get("kind") != "prefill" or r["source"] != line.source]
        self._decode_rows += 1
        usage = num(items.get("token usage", items.get("full token usage")))
        running = num(items.get("#running-req"))
        tokens = num(items.get("#token", items.get("#full token")))
        gen = num(items.get("gen throughput (token/s)"))
        row = {"time": when, "source": line.source, "line": line.lineno,
               "engine_idx": _dp_rank(line.tags), "running": running,
               "waiting": num(items.get("#queue-req")), "gen_tps": gen,
               "kv_usage": usage * 100 if usage is not None else None,
               "kv_tokens_used": tokens}
        # Prompt tokens prefilled since the previous Decode line, as a rate.
        if self._last_decode is not None and when is not None and self._last_decode < when:
            secs = (when - self._last_decode).total_seconds()
            row["prompt_tps"] = round(self._prefill_tokens / secs, 1)
        elif self._last_decode is None:
            row["prompt_tps"] = None
        tot = self._prefill_tokens + self._prefill_cached
        if tot:
            row["prefix_hit"] = round(100 * self._prefill_cached / tot, 1)
        if self._prefill_seqs:
            row["prompt_len"] = round(tot / self._prefill_seqs, 1)
        self._prefill_tokens = self._prefill_cached = self._prefill_seqs = 0.0
        self._last_decode = when
        acc = num(items.get("accept rate"))
        if acc is not None:
            ev.add_event("spec_decode", line.source, line.lineno, line.raw, when, acceptance=acc * 100)
        elif items.get("accept len") is not None:
            ev.add_event("spec_accept_len", line.source, line.lineno, line.raw, when, accept_len=num(items["accept len"]))
        if graph is not None:
            row["graph"] = graph == "True"
        ev.add_stats(row)

    # -- one-regex lines -------------------------------------------------------------
    def _load_end(self, m, line, ev, when):
        # One line per rank, and with speculative decoding one more per rank for the draft model
        # (`type=…NextN`, `…Eagle…`): the target's weights are the first type's; a draft's add to them.
        arch = ev.fact("architecture")
        draft = m.group("type") and arch is not None and m.group("type") != arch
        if m.group("usage"):
            key = ("draft", line.tags or "") if draft else ("main", line.tags or "")
            if key not in self.loads:
                self.loads[key] = float(m.group("usage"))
                mains = [x for (k, _), x in self.loads.items() if k == "main"]
                drafts = [x for (k, _), x in self.loads.items() if k == "draft"]
                w = max(mains) if mains else 0.0
                ev.set_fact("weights_gib_per_gpu", round(w + (max(drafts) if drafts else 0.0), 2), line.source, line.lineno, line.raw)
        if m.group("dtype"):
            ev.set_fact("dtype", m.group("dtype"), line.source, line.lineno, line.raw, override=False)
        if m.group("type") and not draft:
            ev.set_fact("architecture", m.group("type"), line.source, line.lineno, line.raw)
        q = LOAD_QUANT.search(line.msg)     # newer builds: "quant=fp8, fmt=e4m3" (the checkpoint's own)
        if q and ev.fact("quantization") in (None, "None", ""):
            ev.set_fact("quantization", q.group(1), line.source, line.lineno, line.raw)
        ev.add_event("startup_load", line.source, line.lineno, line.raw, when)

    def _load_begin(self, m, line, ev, when):
        # Free memory before the weights: close to the card's size on a dedicated GPU.
        ev.set_fact("gpu_avail_at_start_gib", float(m.group("avail")), line.source, line.lineno, line.raw, override=False)

    def _kv_alloc(self, m, line, ev, when):
        ev.set_fact("kv_cache_tokens", int(m.group("n")), line.source, line.lineno, line.raw)
        if m.group("k"):
            ev.set_fact("kv_cache_memory_gib", float(m.group("k")) + float(m.group("v")), line.source, line.lineno, line.raw)
        elif m.group("kv"):
            ev.set_fact("kv_cache_memory_gib", float(m.group("kv")), line.source, line.lineno, line.raw)

    def _kv_dtype(self, m, line, ev, when):
        d = m.group("d")
        ev.set_fact("kv_cache_dtype_effective", d, line.source, line.lineno, line.raw)

    def _max_total(self, m, line, ev, when):
        src, n, raw = line.source, line.lineno, line.raw
        ev.set_fact("kv_cache_tokens", int(m.group("n")), src, n, raw)
        rest = dict(re.findall(r"(\w+)=([\d.]+)", m.group("rest")))
        if "max_running_requests" in rest:
            # One scheduler's share: with DP attention `--max-running-requests` is split over the DP
            # ranks (2048 → 256 each). The flag's value stays the fact; each rank's cap is its own.
            # (Left to SGLang, each rank sizes its own: the log's number is the cap.)
            per = int(float(rest["max_running_requests"]))
            if ev.fact("max_num_seqs") is None:
                ev.set_fact("max_num_seqs", per, src, n, raw)
            if per != ev.fact("max_num_seqs"):
                ev.set_fact("max_num_seqs_per_engine", per, src, n, raw)
        if "context_len" in rest:
            ev.set_fact("max_model_len", int(float(rest["context_len"])), src, n, raw)
        if "chunked_prefill_size" in rest:
            c = int(float(rest["chunked_prefill_size"]))
            ev.set_fact("chunked_prefill", c > 0, src, n, raw)
            if c > 0:
                ev.set_fact("max_num_batched_tokens", c, src, n, raw)
        if "available_gpu_mem" in rest:
            ev.set_fact("available_gpu_mem_gib", float(rest["available_gpu_mem"]), src, n, raw)

    def _graph_bs(self, m, line, ev, when):
        sizes = [int(x) for x in m.group("bs").replace(" ", "").split(",") if x]
        ev.set_fact("cuda_graph_max_size", max(sizes), line.source, line.lineno, line.raw[:200])
        ev.set_fact("cuda_graphs", True, line.source, line.lineno, line.raw[:200])
        ev.add_event("cuda_graph_capture", line.source, line.lineno, line.raw[:200], when)

    def _graph_end(self, m, line, ev, when):
        ev.set_fact("cuda_graphs", True, line.source, line.lineno, line.raw)
        ev.set_fact("capture_seconds", float(m.group("s")), line.source, line.lineno, line.raw)
        ev.add_event("cuda_graph_capture", line.source, line.lineno, line.raw, when)

    def _ready(self, m, line, ev, when):
        ev.add_event("server_ready", line.source, line.lineno, line.raw, when)
        note_alive(ev, line.source)

    def _retract(self, m, line, ev, when):
        # Every TP rank prints the same retraction: count it once (rank 0 or untagged lines).
        if not line.tags or re.search(r"\bTP0\b", line.tags) or "TP" not in line.tags:
            ev.add_event("preemption", line.source, line.lineno, line.raw, when, n=int(m.group("n")))
            ev.counters["retracted_total"] = ev.counters.get("retracted_total", 0) + int(m.group("n"))

    def _pool_oom(self, m, line, ev, when):
        # The token pool ran dry while serving: the KV cache was full at run time, not too small
        # to start (that is NOT_ENOUGH). One exhaustion prints the line twice (log + exception).
        ev.add_event("kv_pool_exhausted", line.source, line.lineno, line.raw, when)

    def _graph_off(self, m, line, ev, when):
        ev.set_fact("cuda_graphs", False, line.source, line.lineno, line.raw)
        ev.set_fact("cuda_graphs_off_reason", m.group("why").rstrip("."), line.source, line.lineno, line.raw)

    def _not_enough(self, m, line, ev, when):
        ev.add_event("kv_capacity_error", line.source, line.lineno, line.raw, when)

    def _version(self, m, line, ev, when):
        self.version = m.group("v")
        ev.set_fact("engine_version", m.group("v"), line.source, line.lineno, line.raw, override=False)

    def _health(self, m, line, ev, when):
        self._health_fail.append((line, when))

    def _crash(self, m, line, ev, when):
        note_failure(ev, "engine_dead", line, when)

    def _cmdline(self, m, line, ev, when):
        d = kv.parse_cmdline(m.group("args"))
        ev.settings.setdefault("launch_args", {}).update(d)
        self._apply(d, line, ev)

    def _nccl(self, m, line, ev, when):
        ev.set_fact("nccl_version", m.group("v"), line.source, line.lineno, line.raw)

    # Lazy patterns, as vLLM's table (vllm/lines.py): compiled only where a log has their lines.
    _simple = [
        (LOAD_END, _load_end), (LOAD_BEGIN, _load_begin), (KV_ALLOC, _kv_alloc), (KV_DTYPE, _kv_dtype),
        (MAX_TOTAL, _max_total), (GRAPH_BS, _graph_bs), (GRAPH_END, _graph_end), (READY, _ready),
        (RETRACT, _retract), (POOL_OOM, _pool_oom), (GRAPH_OFF, _graph_off), (NOT_ENOUGH, _not_enough), (HEALTH_FAIL, _health), (VERSION, _version), (CRASH, _crash),
        (CMDLINE, _cmdline), (NCCL_VER, _nccl),
    ]


def batch_line(source: str, n: int, text: str):
    """(Line, BATCH match, items) of a Decode or Prefill batch line in its plainest shape, as
    peel() and the parser read it: `items` the (name, value) pairs ITEM finds after BATCH
    (BATCH_ITEM matching each of the rest's comma-parted items finds the same); None for any
    other line."""
    text = visible(text)
    h = HEADER.match(text)
    if h is None:
        return None
    msg = text[h.end():]
    m = BATCH.match(msg)
    if m is None or m.group("old"):
        return None
    tail = msg[m.end():]
    if tail[-1:] == ",":
        tail = tail[:-1]
    # item by item between the ", " that part them (names and values hold no comma): one anchored
    # match each, never a search that restarts at every character of a long hostile tail
    found = []
    for part in tail.split(", "):
        i = BATCH_ITEM.match(part)
        if i is None or i.group(1) not in BATCH_ITEMS:
            return None
        found.append(i.groups())
    if not found:
        return None
    date, mon, day, hms, tags = h.group("date", "mon", "day", "hms", "tags")
    stamp = (int(mon), int(day), hms) if mon else None
    return Line(source, n, text, msg, stamp=stamp, dt=_dt(date, hms) if date else None, fmt="sglang", tags=tags.strip()), m, found


def access_line(source: str, n: int, text: str, fmt_kw):
    """(Line, ACCESS match) of a uvicorn access line under SGLang's logger header (its server's
    access lines: `[2025-12-08 15:23:06] INFO:     10.0.0.1:4902 - "POST /generate HTTP/1.1" 200 OK`)
    that peel() and feed_common read as nothing but one: the header, then what plain_access takes
    with no process prefix. None for any other line (the caller's to check: a launch marker)."""
    raw = ANSI.sub("", text) if "\x1b" in text else text
    h = HEADER.match(raw)
    if h is None or not raw.startswith("INFO: ", h.end()):
        return None
    got = plain_access(raw[h.end():], fmt_kw)
    if got is None:
        return None
    msg, m = got[1], got[2]
    date, mon, day, hms, tags = h.group("date", "mon", "day", "hms", "tags")
    stamp = (int(mon), int(day), hms) if mon else None
    return Line(source, n, raw, msg, stamp=stamp, dt=_dt(date, hms) if date else None, fmt="sglang", tags=tags.strip()), m


def _num(x):
    if x is None:
        return None
    try:
        return float(str(x).split("=")[-1])
    except ValueError:
        return None


def _dp_rank(tags: str) -> int:
    m = re.search(r"\bDP(\d+)", tags or "")
    return int(m.group(1)) if m else 0


Parser = SglangParser

"""Lines that are not any one engine's own: NCCL, uvicorn access, Ray, PyTorch/CUDA errors.

They interleave with every engine's log, so every log parser consults this module.
"""
from __future__ import annotations

import re
import zlib

from ...evidence.model import Evidence
from ...lazyre import lazy
from ...redact import redact
from ..literals import needles
from ...memo import MISS, Memo
from ..readers.lineprefix import ANSI, Line
from . import ENGINES

NCCL = re.compile(r"^(?P<host>[\w.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<lvl>INFO|WARN) (?P<text>.*)")
# The line shapes the readers count rather than parse on a big log (segments.py): declared once
# here; the Python reader searches them anywhere in a raw line (`*_BYTES`), as native/scan.c does.
ACCESS_SHAPE = r'INFO: +(?P<ip>[\w.:\[\]-]+):(?P<port>\d+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})'
ACCESS = re.compile("^" + ACCESS_SHAPE)
ACCESS_BYTES = re.compile(ACCESS_SHAPE.encode())
REQUEST_SHAPE = r"\] (?:Received|Added|Finished|Aborted) request"
REQUEST_BYTES = re.compile(REQUEST_SHAPE.encode())
# Every wording an allocation failure on the GPU takes: PyTorch (CUDA and HIP), the CUDA runtime
# (`CUDA Error: out of memory at …` from vLLM's cumem allocator, sleep-mode wake-up), TensorRT
# and TensorRT-LLM. Each alternative holds "emory" or "EMORY" (the cheap pre-check below).
OOM = lazy(r"OutOfMemoryError|(?:CUDA|HIP) out of memory|(?i:CUDA error): out of memory|out of memory\. Tried to allocate"
           r"|CUDA runtime error in \S*cudaMalloc\S*.*out of memory|hipErrorOutOfMemory|cudaErrorMemoryAllocation"
           r"|Requested amount of GPU memory \(\d+ bytes\) could not be allocated|CUBLAS_STATUS_ALLOC_FAILED|Error Code \d+: OutOfMemory"
           r"|\[TensorRT-LLM\]\[ERROR\].*(?:[Oo]ut of memory|OUT_OF_MEMORY)")
CAPACITY = lazy(r"total capacity of (?P<gib>[\d.]+) GiB")
NCCL_ERR = lazy(r"NCCL error|DistBackendError|Watchdog caught collective operation timeout|NCCL WARN .*(?:timeout|failed)")
# A request refused because prompt + max_tokens exceed the context limit: vLLM (every wording
# since v0.4), SGLang, TensorRT-LLM's LLM API. The engine keeps serving; the client gets a 400.
CTX_REJECT = lazy(
    r"maximum context length is (?P<max>\d+) tokens|"
    r"is longer than the maximum model length of (?P<max2>\d+)|"
    r"is longer than the model's context length \((?P<max3>\d+) tokens\)|"
    r"exceeds the model's maximum context length of (?P<max4>\d+) tokens|"
    r"should not exceed max_seq_len \((?P<max5>\d+)\)")
CTX_ASKED = lazy(r"total of at least (?P<a>\d+)|you requested (?P<b>\d+) tokens|request has (?P<c>\d+) input tokens"
                 r"|\(length (?P<d>\d+)\)|The input \((?P<e>\d+) tokens\)|requested a total of (?P<f>\d+) tokens"
                 r"|prompt length \((?P<g>\d+)\)")
CTX_EXTRA = lazy(r"too large: (?P<t>\d+)|max_tokens \((?P<u>\d+)\)|query length \((?P<q>\d+)\)")
RAY_CLUSTER = lazy(r"Connecting to existing Ray cluster|Started a local Ray instance")
# The last line of an uncaught exception (`ValueError: …`, `torch.AcceleratorError: …`,
# `KeyboardInterrupt`), after a traceback; DDP prefixes `[rankN]: ` to each line of it.
EXC_LINE = lazy(r"^(?:\[rank\d+\]:\s*)?(?:[A-Za-z_]\w*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Interrupt|Exit))(?::|\s*$)")
# The operator (or the orchestrator) stopping the server: what fails after it is not a crash. The
# wordings every process writes (Ctrl-C, a signal, uvicorn's shutdown, Slurm cancelling the job or
# its time limit, a wrapper's `exit code 0`), then each engine's own (engines/<name>: `stopping`).
STOP = lazy("|".join([
    r"^(?:\[rank\d+\]:\s*)?KeyboardInterrupt\s*$|[Rr]eceived (?:signal )?SIG(?:INT|TERM)\b|Caught SIG(?:INT|TERM)",
    r"signal (?:SIGINT|SIGTERM|2|15)\b|^Shutting down\b|^Aborted!?\s*$|^Terminated\s*$|Stopping (?:the )?server",
    r"\*\*\* (?:JOB|STEP) [\d.]+ ON \S+ CANCELLED AT\b",
] + [f"(?:{e.stopping})" for e in ENGINES.values() if e.stopping]))
# A wrapper's account of how the process ended (`exit code 0`, `exit_code=143`, `Exited with
# status 1`, `Return code: 143`, Slurm's `ExitCode 0:0`): 0 is an orderly end; 130 / 143 (-2 / -15
# from Python's subprocess) are SIGINT / SIGTERM, a stop; SIGKILL (137, -9) says nothing either way
# (an operator's `kill -9`, or the kernel's OOM killer); anything else says the process failed.
EXIT_STATUS = lazy(r"\b(?:[Ee]xit(?:ed)?[ _]?(?:with )?(?:[Cc]ode|[Ss]tatus)|[Rr]eturn[ _]?code)['\"]?[ =:]+(?P<code>-?\d+)\b")
EXIT_BY_SIGNAL = frozenset({130, 143, -2, -15})
EXIT_KILLED = frozenset({137, -9})
# Literal text one of the STOP or EXIT_STATUS wordings holds: the regexes run only where one is.
STOP_HINTS = ("Interrupt", "SIG", "ignal", "Shutting", "Abort", "Termin", "Stopping", "shutdown", "CANCELLED", "xit", "eturn",
              *(h for e in ENGINES.values() for h in e.stop_hints))
# the hints as one search (every line passes here: one C-level scan, not a Python loop)
STOP_HINTS_RE = re.compile("|".join(map(re.escape, STOP_HINTS)))
# An error answered to one request: the server goes on serving.
REQUEST_ERROR = lazy(r"Exception in ASGI application|Error in preprocessing prompt inputs|Error in (?:chat )?completion"
                     r"|Error in request|Error with model|Error in serving|Failed to (?:process|handle) request")
# Exceptions that are how a stop unwinds, not a fault.
BENIGN_EXC = frozenset({"KeyboardInterrupt", "SystemExit", "CancelledError", "GeneratorExit"})
# Lines that name the GPU board: `nvidia-smi -L`, a row of the `nvidia-smi` table pasted into the
# log, PyTorch's capability warning. Power and bandwidth are judged against the board's limits.
GPU_NAMED = lazy(r"^GPU \d+: (?P<a>NVIDIA [^(]+?) \(UUID: GPU-|^\|\s+\d+\s+(?P<b>NVIDIA [\w .-]+?)\s{2,}(?:On|Off)\s+\|"
                 r"|(?P<c>NVIDIA [\w .-]+?) with CUDA capability sm_\d+")
# `comm 0x… rank 1 nRanks 8 nNodes 1 localRanks 8 …`: the communicator's size and the nodes it spans.
NCCL_COMM = lazy(r"\bnRanks (\d+) nNodes (\d+)\b")
REQUEST_LINE = re.compile(REQUEST_SHAPE)
# A disaggregated node's half of the work, in every engine's words: `--disaggregation-mode decode`
# (SGLang, Dynamo's workers), `disaggregation_mode=<DisaggregationMode.DECODE: 'decode'>` (Dynamo's
# config dump), vLLM's `kv_role='kv_producer'` / `"kv_role": "kv_consumer"` (a P2P/TPU connector's
# prefill and decode sides; `kv_both`, NIXL's, says nothing of the role), `--is-prefill-worker`.
NODE_ROLE = lazy(r"disaggregation[_-]mode['\"]?(?:[ =:]+|=<DisaggregationMode\.)['\"]?(?P<mode>prefill|decode|PREFILL|DECODE)\b"
                 r"|kv_role['\"]?\s*[:=]\s*['\"]kv_(?P<kv>producer|consumer)['\"]|(?P<pw>--is-prefill-worker\b)")
# How the KV cache travels between them: vLLM's `kv_connector='NixlConnector'`, SGLang's
# `disaggregation_transfer_backend='mooncake'`.
KV_CONNECTOR = lazy(r"kv_connector['\"]?\s*[:=]\s*['\"](?P<c>\w+)|disaggregation[_-]transfer[_-]backend['\"]?[ =:]+['\"]?(?P<b>\w+)")
# A KV transfer between a prefill and a decode node that failed, timed out or was given up on, in
# each connector's words: vLLM's scheduler (`Failing 1 request(s) due to KV load failure`), its TPU
# connector (`KV transfer timeout`, `KV pull failed`), NIXL's producer (`Releasing expired KV
# blocks`: nobody pulled them in time), SGLang (`KVTransferError`, `Failed to get kvcache from
# prefill`, Mooncake's `Transfer Return Error`), TensorRT-LLM's `Error in kv cache transfer`.
KV_XFER_FAIL = lazy(
    r"KV transfer timeout|KV pull failed|due to KV load failure|KVTransferError|Failed to get kvcache|"
    r"(?:Prefill|Decode|KV) transfer failed|Transfer Return Error|Failed to complete transfers?|"
    r"NIXL\w* (?:transfer|xfer)\w* (?:failed|error)|Releasing expired KV blocks|"
    r"KV ?cache (?:transfer|transmission) (?:failed|timed out|error)|Error in kv ?cache transfer")
# Literal text those lines hold, as one search each (every line passes here: a C-level scan, not a
# Python loop over the hints).
KV_XFER_HINTS_RE = re.compile("ransfer|KV pull|KV load|kvcache|expired KV|ransmission")
DISAGG_HINTS_RE = re.compile("isaggregation|kv_role|prefill-worker|kv_connector")
KV_FAILED_REQS = lazy(r"Failing (?P<n>\d+) request\(s\) due to KV load failure")
# A Hugging Face hub cache path names the checkpoint (`models--openai--gpt-oss-120b/snapshots/…`):
# the model where no argument says it (trtllm-serve prints none). Used only when nothing else names it.
# (a Windows path writes it with backslashes)
HF_SNAPSHOT = lazy(r"models--(?P<org>[\w.]+(?:-[\w.]+)*)--(?P<name>[\w.\-]{1,200})[/\\]snapshots[/\\]")
MAX_PREFIXES = 100_000
# The memos of what a message alone decides (its route through a table, whether feed_common can
# act on it): this many messages of up to this many characters each, and this many characters in
# all, per memo (memo.py): a few MB at most each, whatever the input.
ROUTE_ENTRIES = 4096
ROUTE_LONGEST = 1024
ROUTE_BUDGET = 512 * 1024
PROBE_PATHS = ("/metrics", "/health", "/ping", "/v1/models", "/version", "/load")


def feed_common(line: Line, ev: Evidence, when) -> bool:
    """Record what a shared line says; True when it was understood."""
    msg = line.msg
    src, n = line.source, line.lineno
    life = ev.lifecycle.get(src)
    # A request line is the engine's, and its prompt is the user's text: a prompt quoting a
    # traceback or an OOM is not the server's (the bulk readers tally such lines, unparsed).
    if "request" in msg and REQUEST_LINE.search(line.raw):
        return False
    if life is not None and life.tb and ("Error" in msg or "Exception" in msg or "Interrupt" in msg or "Exit" in msg):
        _exception_line(msg, line, ev, life, when)     # not consumed: OOM and KV wordings below read it too
    if line.ip:
        ev.ray_ips.add(line.ip)
    if "INFO:" not in msg:      # uvicorn's lines (an access line each request) go on at once
        quiet = _QUIET.get(msg)
        if quiet is MISS:
            quiet = quiet_plain(msg)
            _QUIET.put(msg, quiet)
        if quiet:
            return False        # no branch of _shared can take it (most lines)
    return _shared(msg, line, ev, when, life)


def _shared(msg: str, line: Line, ev: Evidence, when, life) -> bool:
    """feed_common's branches, each opened by what the message holds (quiet_plain)."""
    src, n = line.source, line.lineno
    if ("/snapshots/" in msg or "\\snapshots\\" in msg) and "model" not in ev.facts and "hf_snapshot" not in ev.events:
        m = HF_SNAPSHOT.search(msg)
        if m:
            ev.add_event("hf_snapshot", src, n, line.raw[:300], when, model=f"{m.group('org')}/{m.group('name')}")
            if msg.strip().startswith("/") and " " not in msg.strip():
                return True      # the bare path a script echoes: nothing else in it
    if DISAGG_HINTS_RE.search(msg):
        m = NODE_ROLE.search(msg) if "node_role" not in ev.facts else None
        if m:
            role = (m.group("mode") or "").lower() or {"producer": "prefill", "consumer": "decode"}.get(m.group("kv") or "", "prefill")
            ev.set_fact("node_role", role, src, n, line.raw[:300])
        m = KV_CONNECTOR.search(msg) if "kv_connector" not in ev.facts else None
        if m:
            ev.set_fact("kv_connector", m.group("c") or m.group("b"), src, n, line.raw[:300])
    if KV_XFER_HINTS_RE.search(msg) and KV_XFER_FAIL.search(msg):
        m = KV_FAILED_REQS.search(msg)
        ev.add_event("kv_transfer_failure", src, n, lambda: redact(line.raw), when,
                     requests=int(m.group("n")) if m else None)
        return True
    # uvicorn access (after residue a progress bar left on the line, as the bulk paths read it)
    # A request line whose prompt quotes an access line stays a request line.
    if not msg.startswith("INFO:") and "INFO:  " in msg and not REQUEST_LINE.search(line.raw) and ACCESS.match(msg[msg.find("INFO:  "):]):
        msg = msg[msg.find("INFO:  "):]
    if msg.startswith("INFO:"):
        m = ACCESS.match(msg)
        if m:
            access(m, src, n, line.raw, ev, when, life)
            return True
        if "Application startup complete" in msg or "Uvicorn running on" in msg:
            ev.add_event("server_ready", src, n, line.raw, when)
            note_alive(ev, src)
            return True
        if "Shutting down" in msg or "Finished server process" in msg:
            life = lifecycle(ev, src)
            if not life.stopping:
                ev.add_event("stop_requested", src, n, line.raw, when, msg=msg)
            life.stopping = True
        return False
    m = NCCL.match(msg)
    if m:
        ev.hosts.add(m.group("host"))
        _nccl(m.group("text"), line, ev, when)
        return True
    if msg.startswith("NCCL version"):
        ev.add_event("nccl_version", src, n, line.raw, when)
        return True
    # Each regex below runs only where its literal text is (every alternative of OOM holds
    # "emory"): most lines that reach here hold none of them.
    if ("emory" in msg or "EMORY" in msg or "ALLOC_FAILED" in msg) and OOM.search(msg):
        ev.add_event("oom", src, n, line.raw, when)
        m = CAPACITY.search(msg)
        if m:
            ev.set_fact("gpu_memory_gib", float(m.group("gib")), src, n, line.raw, override=False)
        return True
    if ("NCCL" in msg or "DistBackendError" in msg or "Watchdog" in msg) and NCCL_ERR.search(msg):
        note_failure(ev, "nccl_error", line, when)
        return True
    if ("context length" in msg or "max_seq_len" in msg or "maximum model length" in msg) and CTX_REJECT.search(msg):
        _context_rejection(msg, line, ev, when)
        return True
    if "Ray" in msg and RAY_CLUSTER.search(msg):
        ev.add_event("ray", src, n, line.raw, when)
        return True
    if "Not collecting DCP metrics" in msg or "metric not enabled" in msg:
        ev.add_event("dcgm_no_profiling", src, n, line.raw, when)
        return True
    if "NVIDIA" in msg and ("UUID" in msg or "capability" in msg or "|" in msg):
        m = GPU_NAMED.search(msg)
        if m:
            ev.set_fact("gpu_name", (m.group("a") or m.group("b") or m.group("c")).strip(), src, n, line.raw, override=False)
            return "capability" not in msg     # the warning line may be a traceback's too
    if "Traceback (most recent call last)" in msg:
        ev.add_event("traceback", src, n, line.raw, when)
        life = lifecycle(ev, src)
        life.tb = "request" if n - life.request_error <= 3 else "open"
        # "Scheduler hit an exception: Traceback …": the engine's own words come first; its parser reads them too.
        return msg.lstrip().startswith("Traceback")
    if ("Error" in msg or "Exception" in msg) and REQUEST_ERROR.search(msg):
        lifecycle(ev, src).request_error = n
        ev.add_event("request_error", src, n, lambda: redact(line.raw), when)
        return True
    if STOP_HINTS_RE.search(msg):
        if STOP.search(msg):
            life = lifecycle(ev, src)
            if not life.stopping:
                ev.add_event("stop_requested", src, n, line.raw, when, msg=msg)
            life.stopping = True
            return msg.lstrip().startswith(("KeyboardInterrupt", "[rank"))
        m = EXIT_STATUS.search(msg)
        if m:
            _exit_status(int(m.group("code")), line, ev, when)
            return True
    return False


def access(m: re.Match, src: str, n: int, raw: str, ev: Evidence, when, life) -> None:
    """An access line (ACCESS's match `m` of its message): counted by status, its errors,
    refusals and probes kept as examples; an answered request shows the server alive."""
    path = m.group("path").split("?", 1)[0]
    status = m.group("status")
    ev.count("access_lines")
    ev.count(f"status_{status}")
    if status[0] == "5" or status == "429":
        ev.add_event(f"http_{status}", src, n, lambda: redact(raw), when)
        # A refusal is the admission limit only for a real request: a health probe
        # answered 503 while the model loads or warms up is not load shed. (The readers
        # of big logs count the same: scanner.py, native/scan.c.)
        if status in ("503", "429") and not path.startswith(PROBE_PATHS):
            ev.count("requests_refused")
            ev.add_event("request_refused", src, n, lambda: redact(raw), when)
    if path.startswith(PROBE_PATHS):
        ev.count("access_probe_lines")
        ev.add_event("access_probe", src, n, lambda: redact(raw), when)
    elif life is not None and status[0] != "5":
        note_alive(ev, src)     # it answered a request (a 500 after a crash says nothing of that)


# uvicorn's access line as it most often comes (a busy server's small log is mostly these): no
# collector or stream prefix, at most a process prefix without an address, then `INFO:`.
PLAIN_ACCESS = re.compile(r"(?:\((?:[^()]*? )?pid=\d+\) )?(?=INFO: )")
# What else in such a line would make peel or feed_common do more than read it as an access line:
# a request line's words, a model snapshot's path, a tqdm bar before it, the disaggregation and KV
# transfer hints (searched in the whole line: more lines go the plain way, never fewer).
ACCESS_BUSY = re.compile("|".join([re.escape(x) for x in ("request", "snapshots", "it/s]", "s/it]")]
                                  + [DISAGG_HINTS_RE.pattern, KV_XFER_HINTS_RE.pattern]))


def plain_access(text: str, fmt_kw):
    """(the line as evidence shows it, its message, ACCESS's match) of an access line that
    lineprefix.peel and feed_common would read as nothing but one (the loop's fast path: its
    other checks then have nothing to find); None for any other line, which takes the plain path.
    `fmt_kw`: the formats' opening words, looked for in the line as the loop does first."""
    raw = ANSI.sub("", text) if "\x1b" in text else text
    p = PLAIN_ACCESS.match(raw)
    if p is None:
        return None
    msg = raw[p.end():]
    m = ACCESS.match(msg)
    # (no engine's logger header opens with `INFO:`, so peel finds none in the message: checked in
    # tests/test_fast_paths.py rather than line by line)
    if (m is None or raw[-1:] in " \r\n" or "\r" in raw or raw.endswith("cluster]") or "pid=" in msg
            or ACCESS_BUSY.search(raw) or fmt_kw.search(text, 0, 160)):
        return None
    return raw, msg, m


def quiet_plain(msg: str) -> bool:
    """True when no branch of _shared can act on the message: the condition each branch opens
    with, or one that holds whenever it does, is false for all of them. A branch added to _shared
    adds its condition here."""
    return not (
        "INFO:" in msg                      # uvicorn: access lines, ready, shutting down
        or "/snapshots/" in msg or "\\snapshots\\" in msg
        or DISAGG_HINTS_RE.search(msg) or KV_XFER_HINTS_RE.search(msg)
        or NCCL.match(msg) or msg.startswith("NCCL version")
        or ("emory" in msg or "EMORY" in msg or "ALLOC_FAILED" in msg) and OOM.search(msg)
        or ("NCCL" in msg or "DistBackendError" in msg or "Watchdog" in msg) and NCCL_ERR.search(msg)
        or ("context length" in msg or "max_seq_len" in msg or "maximum model length" in msg) and CTX_REJECT.search(msg)
        or "Ray" in msg and RAY_CLUSTER.search(msg)
        or "Not collecting DCP metrics" in msg or "metric not enabled" in msg
        or "NVIDIA" in msg and ("UUID" in msg or "capability" in msg or "|" in msg) and GPU_NAMED.search(msg)
        or "Traceback (most recent call last)" in msg
        or ("Error" in msg or "Exception" in msg) and REQUEST_ERROR.search(msg)
        or STOP_HINTS_RE.search(msg))


# Whether a message is quiet depends on it alone: kept per message, bounded as routes are.
_QUIET = Memo(ROUTE_ENTRIES, ROUTE_LONGEST, ROUTE_BUDGET)


def _exit_status(code: int, line: Line, ev: Evidence, when) -> None:
    if code in EXIT_KILLED:
        return
    life = lifecycle(ev, line.source)
    if code == 0 or code in EXIT_BY_SIGNAL:
        if not life.stopping:
            ev.add_event("stop_requested", line.source, line.lineno, line.raw, when, msg=line.msg)
        life.stopping = True
        return
    # The process says it failed: what was taken for the stop's noise was the failure.
    ev.add_event("exit_failure", line.source, line.lineno, line.raw, when, code=code)
    life.exit_failed = True


# -- the server's life, per file: launched, serving, stopped, died ------------------------------
class Life:
    """Where one file's server stands. A crash needs the server not to have been asked to stop
    (errors while it unwinds from Ctrl-C or SIGTERM are the stop's, not a fault), and an uncaught
    exception is only fatal if nothing shows the server alive after it."""
    __slots__ = ("stopping", "tb", "request_error", "pending", "noise", "noise_line", "exit_failed")

    def __init__(self) -> None:
        self.stopping = False
        self.noise = None           # (line, raw, type, time) of the first exception after the stop began
        self.noise_line = 0         # the last line counted as stop noise
        self.exit_failed = False    # a wrapper printed a failing exit status
        self.tb = None              # "open" after a traceback start until its exception line; "request" for a request's
        self.request_error = -10    # line of the last request-level error
        self.pending = None         # (line, raw, type, time) of an uncaught exception not yet known fatal


def lifecycle(ev: Evidence, src: str) -> Life:
    life = ev.lifecycle.get(src)
    if life is None:
        life = ev.lifecycle[src] = Life()
    return life


def _exception_line(msg: str, line: Line, ev: Evidence, life: Life, when) -> None:
    m = EXC_LINE.match(msg)
    if not m:
        return
    kind, life.tb = life.tb, None
    etype = m.group("type")
    if etype in BENIGN_EXC:
        if etype == "KeyboardInterrupt" and not life.stopping:
            ev.add_event("stop_requested", line.source, line.lineno, line.raw, when, msg=msg)
            life.stopping = True
        return
    if kind == "request" or life.pending:
        return
    if life.stopping:
        # The stop's noise (an EngineDeadError from the output handler, a finaliser failing at
        # exit): counted, shown under --verbose, a crash only if the process then says it failed.
        _stop_noise(ev, life, line, etype, when)
        return
    life.pending = (line.lineno, line.raw, etype, when)


def _stop_noise(ev: Evidence, life: Life, line: Line, kind: str, when) -> None:
    """A failure line after the stop began, once per line (the engine's parser and the traceback
    reader may both see an `EngineDeadError`)."""
    if life.noise_line == line.lineno:
        return
    life.noise_line = line.lineno
    ev.add_event("failure_after_stop", line.source, line.lineno, line.raw, when, exception=kind)
    if life.noise is None:
        life.noise = (line.lineno, line.raw, kind, when)


def note_launch(ev: Evidence, src: str) -> None:
    """A server starts (again) in this file: what killed the one before was fatal to it."""
    life = ev.lifecycle.get(src)
    if life is None:
        return
    _settle(ev, src, life)
    life.stopping = False
    life.noise = None
    life.exit_failed = False


def dispatch(parser, table, msg: str, line: Line, ev: Evidence, when) -> bool:
    """An engine parser's table of (pattern, handler): the first pattern found in the message
    hands the line to its handler. True when one did."""
    got = route(table, msg)
    if got is None:
        return False
    i, m = got
    table[i][1](parser, m, line, ev, when)
    return True


# Which pattern of a table a message matches depends on the message alone: kept per table for
# the bodies that repeat (memo.py). A match kept is handed again for an equal message: its groups
# and positions are the same. Messages past ROUTE_LONGEST are searched each time. The tables are
# constants (a parser class's `_simple`): a table changed in place would keep its old routes.
_ROUTES: dict = {}      # id(table) -> (table, its Memo, its plan); the table is held: its id stays its own


def route(table, msg: str):
    """(index, match) of the first pattern of `table` found in `msg`, or None."""
    held = _ROUTES.get(id(table))
    if held is None or held[0] is not table:
        plan = tuple((i, rx, needles(rx)) for i, (rx, _fn) in enumerate(table))
        # Every phrase of the table, when each of its patterns has some: a message that holds none
        # (most of them: another library's chatter, a line of another kind) is no pattern's, told
        # in one pass in C rather than a Python step for each phrase.
        gate = None if any(n is None for _i, _rx, n in plan) else tuple(x for _i, _rx, n in plan for x in n)
        held = _ROUTES[id(table)] = (table, Memo(ROUTE_ENTRIES, ROUTE_LONGEST, ROUTE_BUDGET), plan, gate)
    memo = held[1]
    got = memo.get(msg)
    if got is MISS:
        gate = held[3]
        got = None if gate is not None and not any(map(msg.__contains__, gate)) else _planned(held[2], msg)
        memo.put(msg, got)
    return got


def _planned(plan, msg: str):
    """route_plain with each pattern's phrases looked up once per table, not once per line."""
    for i, rx, n in plan:
        if n is not None:
            for x in n:
                if x in msg:
                    break
            else:
                continue            # the phrase is not there: no search
        m = rx.search(msg)
        if m:
            return i, m
    return None


def route_plain(table, msg: str):
    for i, (rx, _fn) in enumerate(table):
        n = needles(rx)
        if n is not None and not any(x in msg for x in n):     # the phrase is not there: no search
            continue
        m = rx.search(msg)
        if m:
            return i, m
    return None


def note_alive(ev: Evidence, src: str) -> None:
    """The server is serving: an exception before this was survived."""
    life = ev.lifecycle.get(src)
    if life is not None:
        life.pending = None


def note_failure(ev: Evidence, kind: str, line: Line, when) -> None:
    """An engine-failure line (engine_dead, nccl_error): a crash, unless the server was being stopped."""
    life = ev.lifecycle.get(line.source)
    if life is not None and life.stopping:
        _stop_noise(ev, life, line, kind, when)
        return
    ev.add_event(kind, line.source, line.lineno, line.raw, when)


def finish_lifecycle(ev: Evidence, src: str) -> None:
    life = ev.lifecycle.get(src)
    if life is not None:
        _settle(ev, src, life)


def _settle(ev: Evidence, src: str, life: Life) -> None:
    if life.exit_failed and life.noise and not life.pending:
        # The stop's "noise" was how it failed: an engine-failure line as itself, an exception as one.
        n, raw, kind, when = life.noise
        life.noise = None
        if kind in ("engine_dead", "nccl_error"):
            ev.add_event(kind, src, n, raw, when)
            return
        life.pending = (n, raw, kind, when)
    if not life.pending:
        return
    n, raw, etype, when = life.pending
    life.pending = None
    # Engine stats after it (read by any path, the bulk scanners included) mean it was survived.
    if any(r.get("line", 0) > n and r.get("source") == src for r in ev.stats_rows[-2000:]):
        return
    ev.add_event("uncaught_exception", src, n, raw, when, exception=etype)


def _context_rejection(msg: str, line: Line, ev: Evidence, when) -> None:
    m = CTX_REJECT.search(msg)
    limit = int(next(g for g in m.groups() if g))
    asked = None
    a = CTX_ASKED.search(msg, m.start() - 200 if m.start() > 200 else 0)
    if a:
        asked = int(next(g for g in a.groups() if g))
        # "your request has N input tokens" with "'max_tokens' … is too large: M": N + M asked.
        for x in CTX_EXTRA.finditer(msg):
            asked += int(next(g for g in x.groups() if g))
    ev.add_event("context_rejection", line.source, line.lineno, lambda: redact(line.raw), when,
                 limit=limit, asked=asked)
    if asked is not None:
        ev.add_value("context_asked", asked)
    ev.set_fact("context_limit_seen", limit, line.source, line.lineno, line.raw, override=False)


def _nccl(text: str, line: Line, ev: Evidence, when) -> None:
    src, n, raw = line.source, line.lineno, line.raw
    if " via " in text:
        via = text.split(" via ", 1)[1]
        if via.startswith("NET/Socket"):
            ev.add_event("nccl_socket", src, n, raw, when)
        elif via.startswith("NET/"):     # NET/IB, NET/IBext_v10, … : RDMA between nodes
            ev.add_event("nccl_net_ib", src, n, raw, when)
        elif via.startswith("SHM"):
            ev.add_event("nccl_shm", src, n, raw, when)
        elif via.startswith("P2P"):
            ev.add_event("nccl_p2p", src, n, raw, when)
    elif text.startswith("Using network "):
        net = text[len("Using network "):].strip()
        ev.set_fact("nccl_network", net, src, n, raw)
        ev.add_event("nccl_network_socket" if net == "Socket" else "nccl_network_ib", src, n, raw, when)
    elif " nNodes " in text and (m := NCCL_COMM.search(text)):
        ranks, nodes = int(m.group(1)), int(m.group(2))
        ev.nccl_comms[ranks] = max(nodes, ev.nccl_comms.get(ranks, 0))
    elif "NET/IB : No device found" in text:
        ev.add_event("nccl_ib_missing", src, n, raw, when)
    else:
        ev.count("nccl_other")


def head_key(head: bytes) -> int:
    """A prompt head's key: 64 bits from zlib's CRC-32 and Adler-32, which the C scanner computes
    for the same bytes (Python's hash() is salted per process and cannot be)."""
    return zlib.crc32(head) << 32 | zlib.adler32(head)


def note_prompt_field(msg: str, ev: Evidence, field: bytes = b"text=", ends=(b", input_ids", b", sampling_params", b", image_data")) -> None:
    """Like note_prompt for request dumps that carry the prompt as a field (SGLang --log-requests:
    `Receive: obj=GenerateReqInput(text='…', …)`)."""
    raw = msg.encode("utf-8", "replace")
    i = raw.find(field)
    k = i + len(field)
    if i < 0 or len(raw) <= k or raw[k] not in b"'\"":
        return
    q = raw[k: k + 1]
    start = k + 1
    end = start + 256
    for t in ends:
        p = raw.find(q + t, start)
        if 0 <= p < end:
            end = p
    count_head(ev, head_key(raw[start:end]))


def note_prompt(msg: str, ev: Evidence) -> None:
    """Remember how often a prompt's head repeats, as a hash only (never the text)."""
    head = prompt_head(msg.encode("utf-8", "replace"))
    if head is not None:
        count_head(ev, head_key(head))


def prompt_head(raw: bytes) -> bytes | None:
    """A request line's prompt head, in bytes (native/scan.c cuts the same): after the first
    `prompt: ` and its quote, up to the closing `', params` (V1) or `', sampling_params` (V0) when
    that starts within 256 bytes, else the first 256 bytes."""
    i = raw.find(b"prompt: ")
    if i < 0 or len(raw) < i + 9 or raw[i + 8] not in b"'\"":
        return None
    q = raw[i + 8: i + 9]
    start = i + 9
    end = start + 256
    for t in (b", params", b", sampling_params"):
        p = raw.find(q + t, start)
        if 0 <= p < end:
            end = p
    return raw[start:end]


def count_head(ev: Evidence, key: int, n: int = 1) -> None:
    """The bounded table of prompt heads, shared by every path (the C scanner's dg_heads_add does
    the same): the first MAX_PREFIXES distinct heads are counted, later new ones only in one
    overflow count, so memory stays bounded on huge logs."""
    seen = ev.prompt_prefixes
    if key in seen:
        seen[key] += n
    elif len(seen) < MAX_PREFIXES:
        seen[key] = n
    else:
        ev.count("prompt_prefixes_overflow", n)

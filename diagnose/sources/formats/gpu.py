"""GPU samples → evidence: `nvidia-smi dmon`, `--query-gpu` CSV, `topo -m`, `nvlink --status`,
DCGM exporter scrapes, and files saved by `diagnose gpu --live`. Recognised by content, never
by file name. Formats: docs/reference/nvidia-smi-dcgm.md.

Columns are always mapped by header name (dmon orders groups as `-s` lists them, query CSV as
`--query-gpu` lists them). Units differ by tool; rows are normalized to W, MHz, MiB, %.
"""
from __future__ import annotations

import re
from datetime import datetime

from ...evidence.model import Evidence, InputInfo
from ..readers.files import Input, InputError

DMON_HEADER = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\b")
DMON_UNITS = re.compile(r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b")
QUERY_CMD = re.compile(r"--query-gpu[= ](?P<fields>[\w.,]+)")
QUERY_FIELD = re.compile(r"^(timestamp|index|name|uuid|pci\.bus_id|utilization\.\w+|memory\.\w+|power\.[\w.]+|enforced\.power\.limit|clocks[._]\S*|temperature\.\w+|pstate|fan\.speed|pcie\.[\w.]+|driver_version|gpu_name|gpu_bus_id)(?: \[[^\]]*\])?$")
TOPO_ROW = re.compile(r"^\s*(?P<name>GPU\d+|NIC\d+|mlx\d+_\d+)\s")
TOPO_CELL = re.compile(r"NV\d+|SYS|NODE|PHB|PXB|PIX|X")
NVLINK_GPU = re.compile(r"^GPU (?P<i>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)")
NVLINK_LINK = re.compile(r"^\s+Link (?P<k>\d+): (?P<v><inactive>|<not supported>|[\d.]+ GB/s)")
WRAPPED_RESULT = re.compile(r"query result: (\[\[.*\]\])")
DCGM_LINE = re.compile(r"^(?:dcgm_fi|DCGM_FI)_\w+\{")
# dmon column → normalized key (scale applied to turn the tool's unit into ours)
DMON_COLS = {"pwr": ("power_w", 1), "gtemp": ("temp_c", 1), "temp": ("temp_c", 1), "sm": ("util", 1),
             "mem": ("mem_util", 1), "mclk": ("mem_clock_mhz", 1), "pclk": ("sm_clock_mhz", 1),
             "fb": ("mem_used_mib", 1e6 / 2**20), "rxpci": ("pcie_rx_mbs", 1), "txpci": ("pcie_tx_mbs", 1),
             "pviol": ("power_violation_pct", 1), "tviol": ("thermal_violation", 1)}
QUERY_COLS = {"index": "gpu", "utilization.gpu": "util", "utilization.memory": "mem_util",
              "memory.used": "mem_used_mib", "memory.total": "mem_total_mib", "power.draw": "power_w",
              "power.draw.average": "power_w", "power.draw.instant": "power_w",
              "power.limit": "power_limit_w", "enforced.power.limit": "power_limit_w",
              "clocks.current.sm": "sm_clock_mhz", "clocks.sm": "sm_clock_mhz",
              "clocks.current.graphics": "gr_clock_mhz", "clocks.gr": "gr_clock_mhz",
              "clocks.current.memory": "mem_clock_mhz", "clocks.mem": "mem_clock_mhz",
              "clocks.max.sm": "sm_clock_max_mhz", "clocks.max.graphics": "sm_clock_max_mhz",
              "temperature.gpu": "temp_c", "name": "name", "gpu_name": "name", "timestamp": "timestamp"}
DCGM_METRICS = {"DCGM_FI_DEV_GPU_UTIL": ("util", 1), "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1),
                "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1), "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1),
                "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1), "DCGM_FI_DEV_FB_FREE": ("mem_free_mib", 1),
                "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1), "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 1),
                "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_active", 100), "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 100),
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", 100), "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 100)}
REASON_FIELDS = {"sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown",
                 "hw_power_brake_slowdown"}


def sniff_gpu(head: bytes) -> str | None:
    text = head[:65536].decode("utf-8", "replace")
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("{") and '"diagnose-nvml"' in lines[0]:
        return "nvml"
    if any(DMON_HEADER.match(l) for l in lines) and any(DMON_UNITS.match(l) for l in lines):
        return "dmon"
    if sum(bool(DCGM_LINE.match(l)) for l in lines) >= 1 and not re.search(r"^(?:vllm|sglang|nv_|trtllm)[:_]", text, re.M):
        return "dcgm"
    if any(re.search(r"\bGPU0\b.*\bGPU1\b|\bGPU0\s+(?:NIC|CPU|mlx)", l) for l in lines) and \
            sum(bool(TOPO_ROW.match(l)) for l in lines) >= 1:
        return "topo"
    if any(NVLINK_GPU.match(l) for l in lines) and any(NVLINK_LINK.match(l) for l in lines):
        return "nvlink"
    for l in lines:
        fields = [f.strip() for f in l.split(",")]
        if len(fields) >= 2 and sum(bool(QUERY_FIELD.match(f)) for f in fields) >= max(2, len(fields) - 1):
            return "query"
    if any(QUERY_CMD.search(l) for l in lines):
        return "query"
    return None


def load_gpu(kind: str, inp: Input, ev: Evidence) -> InputInfo:
    data = b"".join(inp.blocks())
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    info = InputInfo(path=inp.display, kind=f"gpu-{kind}", lines=len(lines))
    parse = {"dmon": _dmon, "query": _query, "topo": _topo, "nvlink": _nvlink, "dcgm": _dcgm, "nvml": _nvml}[kind]
    try:
        info.recognised_lines = parse(lines, inp.display, ev, info)
    except (ValueError, ArithmeticError, TypeError, AttributeError, KeyError) as e:
        # What the parsers cannot take apart (a GPU index of 5000 digits, a `diagnose gpu --live`
        # file whose JSON has the wrong shapes) is a damaged file: one line naming it, exit 2.
        raise InputError(f"{inp.display}: damaged {kind} output ({type(e).__name__}: {str(e)[:80]})") from None
    info.unrecognised_lines = max(0, info.lines - info.recognised_lines)
    if info.recognised_lines == 0:
        raise InputError(f"{inp.display}: looks like {kind} output but no line could be read")
    return info


def _num(tok: str):
    tok = tok.strip()
    if tok in ("-", "", "N/A") or tok.startswith("["):
        return None
    m = re.match(r"^-?[\d.]+", tok)
    if not m:
        return None
    try:
        x = float(m.group())
    except ValueError:
        return None
    return x if -1e15 < x < 1e15 else None     # 400 digits read as inf: no sample (int() of it raised)


def _row(ev: Evidence, **kw) -> None:
    ev.gpu_rows.append(kw)


def _gpu_info(ev: Evidence, idx: int, **kw) -> None:
    d = ev.gpu_info.setdefault(idx, {})
    for k, v in kw.items():
        if v is not None:
            d[k] = v


# -- nvidia-smi dmon ---------------------------------------------------------------------------
def _dmon(lines, src, ev, info) -> int:
    cols: list[str] | None = None
    n = 0
    cycles: dict[int, int] = {}
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if DMON_HEADER.match(s):
            cols = s.lstrip("#").split()
            n += 1
            continue
        if DMON_UNITS.match(s):
            n += 1
            continue
        m = NVLINK_GPU.match(s)     # `nvidia-smi -L` printed before the capture names the GPUs
        if m:
            _gpu_info(ev, int(m.group("i")), name=m.group("name"))
            n += 1
            continue
        if cols is None or s.startswith(("#", "$")):
            continue
        toks = s.split()
        if len(toks) != len(cols):
            continue
        row = dict(zip(cols, toks))
        try:
            gpu = int(row["gpu"])
        except (KeyError, ValueError):
            continue
        when = None
        if "Date" in row and "Time" in row:
            try:
                when = datetime.strptime(row["Date"] + " " + row["Time"], "%Y%m%d %H:%M:%S")
            except ValueError:
                pass
        elif "Time" in row:
            ev.counters["gpu_time_only"] = 1
            try:
                t = datetime.strptime(row["Time"], "%H:%M:%S")
                when = t
            except ValueError:
                pass
        cycles[gpu] = cycles.get(gpu, 0) + 1
        out = {"time": when, "gpu": gpu, "cycle": cycles[gpu], "source": src, "line": i}
        for c, (key, scale) in DMON_COLS.items():
            if c in row:
                v = _num(row[c])
                out[key] = v * scale if v is not None else None
        ev.gpu_rows.append(out)
        n += 1
    if n:
        ev.add_event("gpu_samples", src, 1, f"nvidia-smi dmon: {sum(cycles.values())} rows for {len(cycles)} GPU(s)")
    return n


# -- nvidia-smi --query-gpu ------------------------------------------------------------------
def _query(lines, src, ev, info) -> int:
    fields: list[str] | None = None
    n = 0
    cycles: dict[int, int] = {}
    for i, line in enumerate(lines, 1):
        m = QUERY_CMD.search(line)
        if m:   # a `--format=csv,noheader` capture: the command names the columns
            fields = [f.strip() for f in m.group("fields").split(",") if f.strip()]
            n += 1
            continue
        m = WRAPPED_RESULT.search(line)
        if m and fields:
            # A tool logging nvidia-smi's answer (gpu-utils): `NV query result: [['1980', '']]`
            line = ", ".join(x for x in re.findall(r"'([^']*)'", m.group(1)) if x != "") or line
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and sum(bool(QUERY_FIELD.match(p)) for p in parts) >= max(2, len(parts) - 1):
            fields = [re.sub(r" \[[^\]]*\]$", "", p) for p in parts]
            n += 1
            continue
        if fields is None or len(parts) != len(fields):
            continue
        row = dict(zip(fields, parts))
        out = {"source": src, "line": i}
        for f, v in row.items():
            key = QUERY_COLS.get(f)
            if f.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")):
                reason = f.split(".", 1)[1]
                if reason in REASON_FIELDS and v.strip() == "Active":
                    out.setdefault("reasons", []).append(reason)
                continue
            if key is None:
                continue
            if key in ("name", "timestamp"):
                out[key] = v
            else:
                out[key] = _num(v)
        if all(out.get(k) is None for k in ("util", "power_w", "sm_clock_mhz", "mem_used_mib", "temp_c", "gr_clock_mhz")):
            continue
        gpu = int(out["gpu"]) if out.get("gpu") is not None else 0
        out["gpu"] = gpu
        ts = out.pop("timestamp", None)
        out["time"] = None
        if ts:
            for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
                try:
                    out["time"] = datetime.strptime(ts, fmt)
                    break
                except ValueError:
                    pass
        if out.get("sm_clock_mhz") is None and out.get("gr_clock_mhz") is not None:
            out["sm_clock_mhz"] = out["gr_clock_mhz"]
        _gpu_info(ev, gpu, name=out.pop("name", None), power_limit_w=out.pop("power_limit_w", None),
                  sm_clock_max_mhz=out.pop("sm_clock_max_mhz", None), memory_total_mib=out.pop("mem_total_mib", None))
        cycles[gpu] = cycles.get(gpu, 0) + 1
        out["cycle"] = cycles[gpu]
        ev.gpu_rows.append(out)
        n += 1
    if cycles:
        ev.add_event("gpu_samples", src, 1, f"nvidia-smi --query-gpu: {sum(cycles.values())} rows for {len(cycles)} GPU(s)")
    return n


# -- nvidia-smi topo -m -------------------------------------------------------------------------
def _topo(lines, src, ev, info) -> int:
    header: list[str] = []
    n = 0
    topo = ev.topology
    for i, line in enumerate(lines, 1):
        toks = line.split()
        # The header names devices in its first two tokens; a row names one device, then cells.
        if not header and len(toks) > 1 and toks[0] == "GPU0" and re.match(r"GPU\d|NIC\d|mlx", toks[1]):
            header = re.findall(r"GPU\d+|NIC\d+|mlx\d+_\d+", line)
            n += 1
            continue
        m = TOPO_ROW.match(line)
        if not (header and m):
            if re.match(r"^\s*(Legend|NIC Legend|X\s+=|SYS\s+=|NODE\s+=|PHB\s+=|PXB\s+=|PIX\s+=|NV#\s+=|NIC\d+: )", line.strip()):
                n += 1
            continue
        name = m.group("name")
        cells = TOPO_CELL.findall(line[m.end():])[: len(header)]
        if len(cells) < len(header):
            continue
        for other, cell in zip(header, cells):
            if other != name:
                topo.setdefault("links", {})[(name, other)] = cell
        topo.setdefault("lines", {})[name] = (src, i, line.rstrip())
        rest = line[m.end():]
        aff = re.search(r"(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)\s+(\d+|N/A)\s*(?:\S+)?\s*$", rest)
        if name.startswith("GPU") and aff:
            topo.setdefault("numa", {})[name] = aff.group(2)
        n += 1
    gpus = sorted({a for a, _ in topo.get("links", {}) if a.startswith("GPU")}, key=lambda g: int(g[3:]))
    if gpus:
        topo["gpus"] = gpus
        ev.add_event("topology", src, 1, f"nvidia-smi topo -m: {len(gpus)} GPU(s)")
    return n


# -- nvidia-smi nvlink --status ----------------------------------------------------------------
def _nvlink(lines, src, ev, info) -> int:
    n, cur = 0, None
    for i, line in enumerate(lines, 1):
        m = NVLINK_GPU.match(line)
        if m:
            cur = int(m.group("i"))
            _gpu_info(ev, cur, name=m.group("name"))
            ev.gpu_info[cur].setdefault("nvlink_active_links", 0)
            n += 1
            continue
        m = NVLINK_LINK.match(line)
        if m and cur is not None:
            if m.group("v") == "<inactive>":
                ev.add_event("nvlink_inactive", src, i, f"GPU {cur}: {line.strip()}")
            elif m.group("v").endswith("GB/s"):
                ev.gpu_info[cur]["nvlink_active_links"] += 1
            n += 1
    return n


# -- DCGM exporter scrape ------------------------------------------------------------------------
def _dcgm(lines, src, ev, info) -> int:
    from prometheus_client.parser import text_string_to_metric_families
    # Copies from the Prometheus UI separate labels with ", ": normalize before parsing.
    keep = [(i, re.sub(r'",\s+', '",', l)) for i, l in enumerate(lines, 1)
            if l.startswith(("# HELP", "# TYPE")) or DCGM_LINE.match(l)]
    rows: dict[int, dict] = {}
    n = 0
    for i, l in keep:
        try:
            fams = list(text_string_to_metric_families(l + "\n"))
        except (ValueError, TypeError):
            # A series listing without a value (copied from a query UI): the labels still name the GPU.
            labels = dict(re.findall(r'(\w+)="([^"]*)"', l))
            if "gpu" in labels and labels["gpu"].isdigit() and len(labels["gpu"]) < 7:   # int() refuses 5000 digits
                _gpu_info(ev, int(labels["gpu"]), name=labels.get("modelName") or labels.get("model_name"))
                n += 1
                ev.counters["dcgm_series_without_value"] = ev.counters.get("dcgm_series_without_value", 0) + 1
            else:
                info.errors.append(f"line {i}: unreadable exposition line")
            continue
        n += 1
        for fam in fams:
            for s in fam.samples:
                name = s.name.upper()
                labels = {k.lower(): v for k, v in s.labels.items()}
                if "gpu" not in labels:
                    continue
                try:
                    gpu = int(labels["gpu"])
                except ValueError:
                    continue
                if labels.get("gpu_i_id") not in (None, "", "<<<NULL>>>"):
                    ev.counters["gpu_mig"] = 1     # MIG slices: utilisation is per instance
                row = rows.setdefault(gpu, {"time": None, "gpu": gpu, "cycle": 1, "source": src, "line": i})
                _gpu_info(ev, gpu, name=labels.get("modelname"))
                if name in DCGM_METRICS:
                    key, scale = DCGM_METRICS[name]
                    if s.value is not None and s.value == s.value and abs(s.value) < 1e15:
                        row[key] = s.value * scale
    for gpu, row in sorted(rows.items()):
        if row.get("mem_used_mib") is not None and row.get("mem_free_mib") is not None:
            _gpu_info(ev, gpu, memory_total_mib=row["mem_used_mib"] + row["mem_free_mib"])
        if row.get("power_limit_w") is not None:
            _gpu_info(ev, gpu, power_limit_w=row.pop("power_limit_w"))
        ev.gpu_rows.append(row)
    if rows:
        ev.add_event("gpu_samples", src, 1, f"DCGM exporter scrape: {len(rows)} GPU(s), one sample each")
        ev.counters["gpu_single_scrape"] = 1
    return n


# -- diagnose gpu --live file ---------------------------------------------------------------------
def _nvml(lines, src, ev, info) -> int:
    from ..nvml_live import read
    try:
        data = read("\n".join(lines))
    except ValueError as e:
        raise InputError(f"{src}: {e}") from None
    for g in data["header"].get("gpus", []):
        _gpu_info(ev, int(g["index"]), name=g.get("name"), power_limit_w=g.get("power_limit_w"),
                  sm_clock_max_mhz=g.get("sm_clock_max_mhz"), memory_total_mib=g.get("memory_total_mib"),
                  nvlink_active_links=g.get("nvlink_active_links"))
    for pair, cell in (data["header"].get("topology") or {}).items():
        a, b = pair.split("-")
        ev.topology.setdefault("links", {})[(f"GPU{a}", f"GPU{b}")] = cell
        ev.topology["links"][(f"GPU{b}", f"GPU{a}")] = cell
        ev.topology.setdefault("lines", {}).setdefault(f"GPU{a}", (src, 1, f"NVML topology GPU{a}-GPU{b}: {cell}"))
    if ev.topology.get("links"):
        ev.topology["gpus"] = sorted({a for a, _ in ev.topology["links"]}, key=lambda g: int(g[3:]))
    cycles: dict[int, int] = {}
    for j, s in enumerate(data["samples"], 2):
        gpu = int(s.get("gpu", 0))
        cycles[gpu] = cycles.get(gpu, 0) + 1
        try:
            when = datetime.fromisoformat(s["t"]) if s.get("t") else None
        except ValueError:
            when = None
        ev.gpu_rows.append({"time": when, "gpu": gpu, "cycle": cycles[gpu], "source": src, "line": j,
                            "util": s.get("util"), "mem_util": s.get("mem_util"), "power_w": s.get("power_w"),
                            "sm_clock_mhz": s.get("sm_clock_mhz"), "mem_clock_mhz": s.get("mem_clock_mhz"),
                            "temp_c": s.get("temp_c"), "mem_used_mib": s.get("mem_used_mib"),
                            "reasons": s.get("clock_reasons") or []})
    ev.add_event("gpu_samples", src, 1, f"diagnose gpu --live: {len(data['samples'])} samples")
    return len(lines)

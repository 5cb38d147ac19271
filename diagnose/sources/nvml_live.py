"""Live GPU sampling through NVML (`nvidia-ml-py`, import name `pynvml`) for `diagnose gpu --live`.

sample() opens NVML, reads what does not change (names, limits, max clocks, PCIe link, NVLink,
topology) once, then samples every GPU every `interval` seconds for `seconds` seconds. write()
saves the result as a "diagnose-nvml" file, read() loads one back, is_nvml_file() recognises one
by content. Units follow docs/reference/nvidia-smi-dcgm.md §6: NVML gives mW, bytes and
KB/s; the file holds W, MiB and KB/s, the same units as nvidia-smi and DCGM.

File format "diagnose-nvml" v1, JSON lines:
  line 1   {"format": "diagnose-nvml", "version": 1, "started": ..., "interval_s": ...,
            "driver_version": ..., "nvml_version": ..., "gpus": [...], "topology": {"0-1": "NV18", ...}}
  line 2+  one object per GPU per cycle: {"t": ..., "gpu": 0, "util": ..., ..., "clock_reasons": [...]}
A value NVML cannot give (NotSupported, no permission, ...) is null; sampling never fails on one field.

Every NVML function, constant and exception class is looked up by name on the `nvml` object, so
tests can pass a fake module.
"""
from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from datetime import datetime

FORMAT = "diagnose-nvml"
VERSION = 1
MIB = 1024 * 1024

# NVML clocks event (throttle) reason bits → names used in the file and by the gpu rules.
CLOCK_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),       # throttle variant only
    (0x400, "reliability"),       # throttle variant only
)

# nvmlDeviceGetTopologyCommonAncestor → `nvidia-smi topo -m` cell. INTERNAL (0: same board, e.g.
# a dual-GPU card) has no cell of its own in topo -m; it is at least as close as PIX.
TOPOLOGY_CELLS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
TOPOLOGY_CONSTANTS = (("NVML_TOPOLOGY_INTERNAL", "PIX"), ("NVML_TOPOLOGY_SINGLE", "PIX"),
                      ("NVML_TOPOLOGY_MULTIPLE", "PXB"), ("NVML_TOPOLOGY_HOSTBRIDGE", "PHB"),
                      ("NVML_TOPOLOGY_NODE", "NODE"), ("NVML_TOPOLOGY_SYSTEM", "SYS"))


class NoGPU(Exception):
    """No NVIDIA driver or no GPU: message is one line for the user."""


# -- sampling -------------------------------------------------------------------------------------
def sample(seconds: float, interval: float, nvml=None, on_tick=None, clock=time.monotonic,
           sleep=time.sleep, now=datetime.now) -> dict:
    """Sample every GPU every `interval` s for `seconds` s; returns {"header": ..., "samples": [...]}.

    The cycles are planned on a fixed grid (start + k·interval, k < ceil(seconds/interval), at
    least one), so slow NVML calls do not stretch the run: after a cycle that overruns, grid
    points more than half an interval in the past are skipped. on_tick(fraction) is called after every cycle; the last call passes 1.0.
    Raises NoGPU when there is no driver or no GPU. NVML is always shut down again."""
    if not (seconds > 0 and interval > 0) or math.isinf(seconds) or math.isinf(interval):
        raise ValueError("seconds and interval must be positive numbers")
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as e:  # a broken install: nvidia-ml-py is a dependency
            raise NoGPU(f"cannot use NVML: the Python package nvidia-ml-py is missing ({_one_line(e)})") from None

    error = nvml.NVMLError
    try:
        nvml.nvmlInit()
    except error as e:
        raise NoGPU(f"no NVIDIA driver found (NVML: {_reason(e)})") from None
    except OSError as e:  # the shared library exists but cannot be loaded
        raise NoGPU(f"no NVIDIA driver found (NVML: {_one_line(e)})") from None
    try:
        return _run(nvml, seconds, interval, on_tick, clock, sleep, now)
    finally:
        try:
            nvml.nvmlShutdown()
        except error:
            pass


def _run(nvml, seconds, interval, on_tick, clock, sleep, now) -> dict:
    error = nvml.NVMLError
    try:
        count = nvml.nvmlDeviceGetCount()
    except error as e:
        raise NoGPU(f"no NVIDIA GPU found (NVML: {_reason(e)})") from None
    if not count:
        raise NoGPU("no NVIDIA GPU found")
    handles: dict[int, object] = {}
    for i in range(count):
        h = _get(nvml, "nvmlDeviceGetHandleByIndex", i)
        if h is not None:  # a GPU NVML cannot open (lost, no permission) is left out
            handles[i] = h
    if not handles:
        raise NoGPU(f"no NVIDIA GPU could be opened ({count} found by NVML)")

    started = now()
    gpus = [_static(nvml, i, h) for i, h in handles.items()]
    header = {
        "format": FORMAT,
        "version": VERSION,
        "started": started.isoformat(timespec="seconds"),
        "interval_s": float(interval),
        "driver_version": _text(_get(nvml, "nvmlSystemGetDriverVersion")),
        "nvml_version": _text(_get(nvml, "nvmlSystemGetNVMLVersion")),
        "gpus": [{k: v for k, v in g.items() if not k.startswith("_")} for g in gpus],
        "topology": _topology(nvml, handles, gpus),
    }

    cycles = max(1, math.ceil(seconds / interval - 1e-9))
    samples: list[dict] = []
    start = clock()
    k = 0
    while k < cycles:
        t = now().isoformat(timespec="milliseconds")
        for i, h in handles.items():
            samples.append(_sample_one(nvml, i, h, t))
        # the next grid point; after an overrun, the nearest one (grid points more than half an
        # interval in the past are skipped, a nearer one is sampled at once)
        k = max(k + 1, round((clock() - start) / interval))
        if on_tick is not None:
            on_tick(1.0 if k >= cycles else k / cycles)
        if k < cycles:
            wait = start + k * interval - clock()
            if wait > 0:
                sleep(wait)
    return {"header": header, "samples": samples}


def _static(nvml, index: int, h) -> dict:
    mem = _get(nvml, "nvmlDeviceGetMemoryInfo", h)
    limit = _get(nvml, "nvmlDeviceGetEnforcedPowerLimit", h)
    links, remote = _nvlinks(nvml, h)
    pci = _get(nvml, "nvmlDeviceGetPciInfo", h)
    return {
        "index": index,
        "name": _text(_get(nvml, "nvmlDeviceGetName", h)),
        "uuid": _text(_get(nvml, "nvmlDeviceGetUUID", h)),
        "memory_total_mib": _mib(getattr(mem, "total", None)),
        "power_limit_w": _watts(limit),
        "sm_clock_max_mhz": _get(nvml, "nvmlDeviceGetMaxClockInfo", h, _const(nvml, "NVML_CLOCK_SM", 1)),
        "mem_clock_max_mhz": _get(nvml, "nvmlDeviceGetMaxClockInfo", h, _const(nvml, "NVML_CLOCK_MEM", 2)),
        "pcie_link_gen": _get(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", h),
        "pcie_link_width": _get(nvml, "nvmlDeviceGetCurrPcieLinkWidth", h),
        "nvlink_active_links": links,
        # kept out of the file: used for the topology
        "_bus": _bus_id(pci),
        "_remote": remote,
    }


def _nvlinks(nvml, h):
    """(number of enabled links or None when NVLink is not supported, remote bus ids or None).

    Links are asked for in order until NVML says NotSupported / InvalidArgument (past the last
    link); the remote end of each enabled link is asked too, where the driver can tell."""
    enabled_value = _const(nvml, "NVML_FEATURE_ENABLED", 1)
    max_links = _const(nvml, "NVML_NVLINK_MAX_LINKS", 36)
    active = 0
    asked = 0
    remote: list | None = []
    for link in range(max_links):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except (nvml.NVMLError, AttributeError):
            break
        asked += 1
        if state != enabled_value:
            continue
        active += 1
        if remote is not None:
            info = _get(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            bus = _bus_id(info)
            if bus is None:
                remote = None  # the driver cannot tell: fall back to link counts
            else:
                remote.append(bus)
    if asked == 0:
        return None, None
    return active, remote


def _topology(nvml, handles: dict, gpus: list[dict]) -> dict:
    """"i-j" → NV<n> when NVLink joins the two GPUs, else the PCIe cell of `nvidia-smi topo -m`.

    NV<n>: the links from i whose remote end is j's PCI bus id. Links whose remote end is no GPU
    here (an NVSwitch) join every GPU that has such links: n is the smaller count, as for GPUs
    where the driver does not tell the remote end at all but both GPUs have active links."""
    bus_to_index = {g["_bus"]: g["index"] for g in gpus if g["_bus"] is not None}
    direct: dict[tuple[int, int], int] = {}   # (from, to) → links, as the "from" GPU reports them
    fabric: dict[int, int] = {}   # links into a switch (or of unknown remote): reach any such GPU
    for g in gpus:
        i = g["index"]
        if not g["nvlink_active_links"]:
            continue
        if g["_remote"] is None:
            fabric[i] = g["nvlink_active_links"]
            continue
        for bus in g["_remote"]:
            j = bus_to_index.get(bus)
            if j is None:
                fabric[i] = fabric.get(i, 0) + 1
            elif j != i:
                direct[(i, j)] = direct.get((i, j), 0) + 1

    cells: dict[str, str] = {}
    idx = list(handles)
    for a in range(len(idx)):
        for b in range(a + 1, len(idx)):
            i, j = idx[a], idx[b]
            n = max(direct.get((i, j), 0), direct.get((j, i), 0))
            if not n and i in fabric and j in fabric:
                n = min(fabric[i], fabric[j])
            if n:
                cells[f"{i}-{j}"] = f"NV{n}"
                continue
            level = _get(nvml, "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            cell = _topology_cell(nvml, level)
            if cell is not None:   # unknown: the pair is left out rather than guessed
                cells[f"{i}-{j}"] = cell
    return cells


def _topology_cell(nvml, level) -> str | None:
    if level is None:
        return None
    level = getattr(level, "value", level)
    for name, cell in TOPOLOGY_CONSTANTS:
        if hasattr(nvml, name) and getattr(nvml, name) == level:
            return cell
    return TOPOLOGY_CELLS.get(level)


def _sample_one(nvml, index: int, h, t: str) -> dict:
    util = _get(nvml, "nvmlDeviceGetUtilizationRates", h)
    mem = _get(nvml, "nvmlDeviceGetMemoryInfo", h)
    return {
        "t": t,
        "gpu": index,
        "util": getattr(util, "gpu", None),
        "mem_util": getattr(util, "memory", None),
        "power_w": _watts(_get(nvml, "nvmlDeviceGetPowerUsage", h)),
        "sm_clock_mhz": _get(nvml, "nvmlDeviceGetClockInfo", h, _const(nvml, "NVML_CLOCK_SM", 1)),
        "mem_clock_mhz": _get(nvml, "nvmlDeviceGetClockInfo", h, _const(nvml, "NVML_CLOCK_MEM", 2)),
        "temp_c": _get(nvml, "nvmlDeviceGetTemperature", h, _const(nvml, "NVML_TEMPERATURE_GPU", 0)),
        "mem_used_mib": _mib(getattr(mem, "used", None)),
        "pcie_rx_kbs": _get(nvml, "nvmlDeviceGetPcieThroughput", h, _const(nvml, "NVML_PCIE_UTIL_RX_BYTES", 1)),
        "pcie_tx_kbs": _get(nvml, "nvmlDeviceGetPcieThroughput", h, _const(nvml, "NVML_PCIE_UTIL_TX_BYTES", 0)),
        "clock_reasons": decode_clock_reasons(_clock_reason_mask(nvml, h)),
    }


def _clock_reason_mask(nvml, h):
    """Clocks event reasons (driver 535+); the deprecated throttle call where that is missing."""
    mask = _get(nvml, "nvmlDeviceGetCurrentClocksEventReasons", h)
    if mask is None:
        mask = _get(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    return mask


def decode_clock_reasons(mask) -> list[str] | None:
    """NVML reason bitmask → names, lowest bit first; None when NVML gave none. Unknown bits are
    kept as "unknown_0x…" so nothing is silently dropped."""
    if mask is None:
        return None
    mask = int(mask)
    names = [name for bit, name in CLOCK_REASONS if mask & bit]
    rest = mask & ~sum(bit for bit, _ in CLOCK_REASONS)
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


# -- small helpers ----------------------------------------------------------------------------------
def _get(nvml, fname: str, *args):
    """One NVML call; None when NVML raises (NotSupported, NoPermission, ...) or lacks the call."""
    fn = getattr(nvml, fname, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except nvml.NVMLError:
        return None


def _const(nvml, name: str, default):
    return getattr(nvml, name, default)


def _mib(n):
    return None if n is None else round(n / MIB, 1)


def _watts(mw):
    return None if mw is None else round(mw / 1000.0, 3)


def _text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def _bus_id(pci) -> tuple | None:
    """A PCI bus id as (domain, bus, device, function), whichever way the driver spelled it
    ("00000000:07:00.0" or the legacy "0000:07:00.0")."""
    if pci is None:
        return None
    bus = getattr(pci, "busId", None)
    if bus is None and isinstance(pci, (str, bytes)):
        bus = pci
    bus = _text(bus)
    if not bus:
        return None
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*", bus)
    if not m:
        return None
    return tuple(int(x, 16) if x else 0 for x in m.groups())


def _reason(e) -> str:
    try:
        text = str(e)
    except Exception:  # pynvml's __str__ may call into a library that is not there
        text = ""
    return _one_line(text or type(e).__name__)


def _one_line(v) -> str:
    return " ".join(str(v).split())


# -- file -----------------------------------------------------------------------------------------
def write(result: dict, path: str) -> None:
    """Save as JSON lines (header first, one sample per line), atomically: a temporary file in
    the same folder, then os.replace, so a reader never sees half a file."""
    lines = [json.dumps(result["header"])]
    lines += [json.dumps(s) for s in result.get("samples", [])]
    text = "\n".join(lines) + "\n"
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_FORMAT_KEY = re.compile(r'^\s*\{\s*"format"\s*:\s*"diagnose-nvml"')


def is_nvml_file(head: bytes) -> bool:
    """True when the first line is a diagnose-nvml header. `head` may be cut anywhere: a header
    too long for it is recognised by its opening (write() puts "format" first)."""
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    first, newline, _ = text.partition("\n")
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):   # RecursionError: a first line of `[[[[…]]]]` 100 000 deep
        return not newline and bool(_FORMAT_KEY.match(first))
    return isinstance(obj, dict) and obj.get("format") == FORMAT


def read(text: str) -> dict:
    """Inverse of write(): {"header": ..., "samples": [...]}. Blank lines are skipped.
    Raises ValueError("line N: ...") naming the first damaged line."""
    lines = text.lstrip("\ufeff").split("\n")
    header = None
    samples: list[dict] = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            if n == 1:
                raise ValueError("line 1: empty, expected a diagnose-nvml header")
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ValueError(f"line {n}: not valid JSON ({e.msg} at column {e.colno})") from None
        except RecursionError:   # nesting no writer produces: damage, reported like any bad line
            raise ValueError(f"line {n}: not valid JSON (nested too deeply)") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {n}: expected a JSON object, got {type(obj).__name__}")
        if header is None:
            if obj.get("format") != FORMAT:
                raise ValueError(f'line {n}: not a diagnose-nvml header (no "format": "{FORMAT}")')
            version = obj.get("version")
            if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
                raise ValueError(f"line {n}: unsupported diagnose-nvml version {version!r} (this diagnose reads {VERSION})")
            if not isinstance(obj.get("gpus", []), list) or not isinstance(obj.get("topology", {}), dict):
                raise ValueError(f'line {n}: damaged header ("gpus" must be a list, "topology" an object)')
            header = obj
            continue
        gpu = obj.get("gpu")
        if not isinstance(gpu, int) or isinstance(gpu, bool):
            raise ValueError(f'line {n}: sample without a GPU index ("gpu")')
        if not isinstance(obj.get("t"), str):
            raise ValueError(f'line {n}: sample without a time ("t")')
        samples.append(obj)
    if header is None:
        raise ValueError("line 1: empty, expected a diagnose-nvml header")
    return {"header": header, "samples": samples}

"""`nvidia-smi --query-gpu=… --format=csv`: a header of field names (with units in brackets),
then one row per GPU per sample; `noheader` captures are named by the command line before them
(`--query-gpu=index,utilization.gpu,…`); gpu-utils logs its answer as `query result: [['…']]`.
Once a header was seen, a line with as many fields is a row again (a capture interrupted by
other lines)."""
from __future__ import annotations

import re
from datetime import datetime

from .base import FormatReader, LineFormat
from .gpu_common import Rows, gpu_index, gpu_info, num
from ...lazyre import lazy

CMD = lazy(r"--query-gpu[= ](?P<fields>[\w.,]+)")
FIELD = lazy(r"^(timestamp|index|name|uuid|pci\.bus_id|utilization\.\w+|memory\.\w+|power\.[\w.]+|enforced\.power\.limit|clocks[._]\S*|temperature\.\w+|pstate|fan\.speed|pcie\.[\w.]+|driver_version|gpu_name|gpu_bus_id|clocks_(?:event|throttle)_reasons\.\w+)(?: \[[^\]]*\])?$")
WRAPPED_RESULT = lazy(r"query result: (\[\[.*\]\])")
COLS = {"index": "gpu", "utilization.gpu": "util", "utilization.memory": "mem_util",
        "memory.used": "mem_used_mib", "memory.total": "mem_total_mib", "power.draw": "power_w",
        "power.draw.average": "power_w", "power.draw.instant": "power_w",
        "power.limit": "power_limit_w", "enforced.power.limit": "power_limit_w",
        "clocks.current.sm": "sm_clock_mhz", "clocks.sm": "sm_clock_mhz",
        "clocks.current.graphics": "gr_clock_mhz", "clocks.gr": "gr_clock_mhz",
        "clocks.current.memory": "mem_clock_mhz", "clocks.mem": "mem_clock_mhz",
        "clocks.max.sm": "sm_clock_max_mhz", "clocks.max.graphics": "sm_clock_max_mhz",
        "temperature.gpu": "temp_c", "name": "name", "gpu_name": "name", "timestamp": "timestamp"}
REASON_FIELDS = {"sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown",
                 "hw_power_brake_slowdown"}


def header_fields(line: str) -> list[str] | None:
    """The field names when `line` is a query CSV header (all fields but one known), else None."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) >= 2 and sum(bool(FIELD.match(p)) for p in parts) >= max(2, len(parts) - 1):
        return [re.sub(r" \[[^\]]*\]$", "", p) for p in parts]
    return None


class Query(LineFormat):
    kind = "gpu-query"
    keywords = ("--query-gpu", "query result: [[", "memory.total", "memory.used", "memory.free", "utilization.gpu",
                "utilization.memory", "power.draw", "temperature.gpu", "clocks.sm", "clocks.gr", "clocks.current",
                "clocks.mem", "pci.bus_id")

    def reader(self, src, info):
        return _Reader(src)


class _Reader(FormatReader):
    kind = Query.kind

    def __init__(self, src: str) -> None:
        self.src = src
        self.fields: list[str] | None = None
        self.rows: Rows | None = None
        self.first = None

    @property
    def armed(self) -> bool:
        return self.fields is not None

    def open(self, n, text, ev, before=False):
        m = CMD.search(text)
        if m:
            fields = [f.strip() for f in m.group("fields").split(",") if f.strip()]
            if len(fields) < 1:
                return False
        elif header_fields(text) is None:
            if self.fields is None or not (self._fits(text) or (WRAPPED_RESULT.search(text))):
                return False
        if self.rows is None or self.rows.ev is not ev or self.rows.before != before:
            self._note()
            self.rows = Rows(ev, before)
        self.first = self.first or n
        return self.more(n, text)

    def _fits(self, text: str) -> bool:
        return text.count(",") + 1 == len(self.fields) and self._values([p.strip() for p in text.split(",")]) is not None

    def _values(self, parts: list[str]) -> dict | None:
        """The row when every numeric field holds a number (or N/A): a log line with as many commas
        is no sample."""
        if len(parts) != len(self.fields):
            return None
        row = dict(zip(self.fields, parts))
        numeric = 0
        for f, v in row.items():
            if COLS.get(f) in (None, "name", "timestamp"):
                continue
            if num(v) is None and v not in ("N/A", "[N/A]", "[Not Supported]", "[Unknown Error]"):
                return None
            numeric += 1
        if "index" in row and gpu_index(row["index"]) is None:
            return None
        return row if numeric or set(row) <= {"name", "gpu_name", "index", "uuid", "pci.bus_id", "driver_version"} else None

    def more(self, n, text):
        m = CMD.search(text)
        if m:       # a `--format=csv,noheader` capture: the command names the columns
            self.fields = [f.strip() for f in m.group("fields").split(",") if f.strip()]
            return True
        if self.fields is not None:
            m = WRAPPED_RESULT.search(text)
            if m:   # a tool logging nvidia-smi's answer (gpu-utils): `NV query result: [['1980', '']]`
                text = ", ".join(x for x in re.findall(r"'([^']*)'", m.group(1)) if x != "") or text
        fields = header_fields(text)
        if fields is not None:
            self.fields = fields
            return True
        if self.fields is None or not text.strip():
            return False
        row = self._values([p.strip() for p in text.split(",")])
        if row is None:
            return False
        self._row(n, row)
        return True

    def _row(self, n: int, row: dict) -> None:
        ev = self.rows.ev
        out = {"source": self.src, "line": n}
        for f, v in row.items():
            key = COLS.get(f)
            if f.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")):
                reason = f.split(".", 1)[1]
                if reason in REASON_FIELDS and v.strip() == "Active":
                    out.setdefault("reasons", []).append(reason)
                continue
            if key is None:
                continue
            out[key] = v if key in ("name", "timestamp") else num(v)
        gpu = gpu_index(int(out["gpu"])) if out.get("gpu") is not None else 0
        if gpu is None:
            return
        out["gpu"] = gpu
        gpu_info(ev, gpu, name=out.pop("name", None), power_limit_w=out.pop("power_limit_w", None),
                 sm_clock_max_mhz=out.pop("sm_clock_max_mhz", None), memory_total_mib=out.pop("mem_total_mib", None))
        if all(out.get(k) is None for k in ("util", "power_w", "sm_clock_mhz", "mem_used_mib", "temp_c", "gr_clock_mhz")):
            return      # names and sizes only: no sample
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
        self.rows.add(out)

    def _note(self) -> None:
        if self.rows is not None:
            self.rows.note(self.src, self.first or 1, "nvidia-smi --query-gpu")

    def finish(self) -> None:
        self._note()
        self.rows = None


FORMAT = Query()

"""Prometheus exposition text (`/metrics` saved with curl, several scrapes one after another,
`promtool tsdb dump-openmetrics` output, or a scrape a script printed into its log): engine
metrics become stats rows (sources/prometheus.py does the arithmetic, as for a live server), DCGM
exporter series become one GPU sample per GPU. Without timestamps a new scrape starts when a
series repeats; counters become rates only where the scrapes carry times."""
from __future__ import annotations

import re

from ...evidence.model import Evidence
from .base import FormatReader, LineFormat
from .gpu_common import gpu_index, gpu_info
from ...lazyre import lazy

METRIC_LINE = lazy(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+(?:\.\d+)?))?\s*$")
DCGM_LINE = lazy(r"^(?:dcgm_fi|DCGM_FI)_\w+\{")
DCGM_METRICS = {"DCGM_FI_DEV_GPU_UTIL": ("util", 1), "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1),
                "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1), "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1),
                "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1), "DCGM_FI_DEV_FB_FREE": ("mem_free_mib", 1),
                "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1), "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 1),
                "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_active", 100), "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 100),
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", 100), "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 100)}
# Samples kept per input: a scrape has a few hundred to a few thousand; a saved hour of 15 s
# scrapes of one server ~120,000. What is past this is counted and said, never held or parsed
# (memory: ~150 bytes a sample, a series' labels shared by its samples).
MAX_SAMPLES = 150_000
# Distinct series kept: one engine exports a few hundred (histogram buckets included), a saved
# fleet scrape some thousands. A series past this is counted and said (each costs ~1 KB).
MAX_SERIES = 20_000
MAX_ERRORS = 20


def _prefixes() -> tuple[str, ...]:
    from ..prometheus import ENGINE_OF, SHARED_PREFIXES
    return tuple(p for p, _ in ENGINE_OF) + SHARED_PREFIXES


class MetricsText(LineFormat):
    kind = "prometheus-scrape"
    keywords = ("# HELP", "# TYPE", "# EOF", "vllm:", "sglang:", "sglang_", "trtllm_", "nv_trt_llm_", "nv_inference_",
                "forge_", "dynamo_frontend_", "DCGM_FI_", "dcgm_fi_")

    def reader(self, src, info):
        return _Reader(src, info)


class _Reader(FormatReader):
    kind = MetricsText.kind

    def __init__(self, src: str, info) -> None:
        self.src, self.info = src, info
        self.ev: Evidence | None = None
        self.prefixes = _prefixes()
        self.samples: list = []      # (scrape, ts, name, labels, value, line)
        self.series: dict = {}       # (name, sorted labels) -> (name, labels): one copy per series
        self.scrape = 0
        self.seen: set = set()
        self.dropped = 0
        self.dropped_series = 0
        self.raw_series: set = set()
        self.eof = False
        self.dcgm: dict[int, dict] = {}
        self.dcgm_lines = 0
        self.engine_lines = 0

    def open(self, n, text, ev, before=False):
        s = text.strip()
        if s.startswith(("# HELP ", "# TYPE ")) or DCGM_LINE.match(s):
            pass
        elif not s.startswith(self.prefixes) or not METRIC_LINE.match(_tidy(s)):
            return False
        if self.ev is None:
            self.ev = ev
        return self.more(n, text)

    def more(self, n, text):
        line = text.strip()
        if not line:
            return False
        if line.startswith("#"):
            if line == "# EOF":
                self.eof = True
            return line.startswith(("# HELP", "# TYPE", "# UNIT", "# EOF"))
        tidy = _tidy(line)
        if DCGM_LINE.match(line):
            self._dcgm(n, tidy)
            return True
        m = METRIC_LINE.match(tidy)
        if not m:
            return False
        name = m.group("name")
        if not name.startswith(self.prefixes):
            return True         # process_*, python_gc_*: exposition text, of no use here
        self.engine_lines += 1
        if len(self.samples) >= MAX_SAMPLES:
            self.dropped += 1
            return True
        raw = (name, m.group("labels"))     # a series' line reads the same in every scrape
        if raw not in self.raw_series:
            if len(self.raw_series) >= MAX_SERIES:
                self.dropped_series += 1    # not parsed: a scrape of millions of series stays fast
                return True
            self.raw_series.add(raw)
        from prometheus_client.parser import text_string_to_metric_families
        try:
            fams = list(text_string_to_metric_families(m.group(0) + "\n"))
        except (ValueError, TypeError):
            if len(self.info.errors) < MAX_ERRORS:
                self.info.errors.append(f"line {n}: unreadable sample")
            return True
        for fam in fams:
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                known = self.series.get(key)
                if known is None:
                    if len(self.series) >= MAX_SERIES:
                        self.dropped_series += 1
                        continue
                    known = self.series[key] = (s.name, dict(s.labels))
                if key in self.seen and m.group("ts") is None:
                    self.scrape += 1
                    self.seen = set()
                self.seen.add(key)
                if len(self.samples) >= MAX_SAMPLES:
                    self.dropped += 1
                    continue
                name, labels = known
                self.samples.append((self.scrape, s.timestamp, name, labels, s.value, n))
        return True

    def _dcgm(self, n: int, line: str) -> None:
        from prometheus_client.parser import text_string_to_metric_families
        ev = self.ev
        self.dcgm_lines += 1
        try:
            fams = list(text_string_to_metric_families(line + "\n"))
        except (ValueError, TypeError):
            # A series listing without a value (copied from a query UI): the labels still name the GPU.
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            gpu = gpu_index(labels.get("gpu")) if (labels.get("gpu") or "").isdigit() and len(labels["gpu"]) < 7 else None
            if gpu is not None:
                gpu_info(ev, gpu, name=labels.get("modelName") or labels.get("model_name"))
                ev.counters["dcgm_series_without_value"] = ev.counters.get("dcgm_series_without_value", 0) + 1
            elif len(self.info.errors) < MAX_ERRORS:
                self.info.errors.append(f"line {n}: unreadable exposition line")
            return
        for fam in fams:
            for s in fam.samples:
                name = s.name.upper()
                labels = {k.lower(): v for k, v in s.labels.items()}
                gpu = gpu_index(labels.get("gpu"))
                if gpu is None:
                    continue
                if labels.get("gpu_i_id") not in (None, "", "<<<NULL>>>"):
                    ev.counters["gpu_mig"] = 1     # MIG slices: utilisation is per instance
                row = self.dcgm.setdefault(gpu, {"time": None, "gpu": gpu, "cycle": 1, "source": self.src, "line": n})
                gpu_info(ev, gpu, name=labels.get("modelname"))
                if name in DCGM_METRICS:
                    key, scale = DCGM_METRICS[name]
                    if s.value is not None and s.value == s.value and abs(s.value) < 1e15:
                        row[key] = s.value * scale

    @property
    def gpu_only(self) -> bool:
        """A DCGM exporter's scrape: GPU samples, no engine's metrics."""
        return bool(self.dcgm_lines) and not self.engine_lines

    def finish(self) -> None:
        ev = self.ev
        if ev is None:
            return
        if self.dcgm:
            for gpu, row in sorted(self.dcgm.items()):
                if row.get("mem_used_mib") is not None and row.get("mem_free_mib") is not None:
                    gpu_info(ev, gpu, memory_total_mib=row["mem_used_mib"] + row["mem_free_mib"])
                if row.get("power_limit_w") is not None:
                    gpu_info(ev, gpu, power_limit_w=row.pop("power_limit_w"))
                ev.gpu_rows.append(row)
            ev.add_event("gpu_samples", self.src, 1, f"DCGM exporter scrape: {len(self.dcgm)} GPU(s), one sample each")
            ev.counters["gpu_single_scrape"] = 1
        if self.dropped_series:
            self.info.errors.append(f"{self.dropped_series} samples of series past the first {MAX_SERIES:,} were not read")
        if self.dropped:
            self.info.errors.append(f"{self.dropped} metric sample line(s) past the first {MAX_SAMPLES:,} samples were not read")
        if self.samples:
            # OpenMetrics (`# EOF` last; what `promtool tsdb dump-openmetrics` writes) stamps
            # samples in seconds, the Prometheus text format in milliseconds; the parser reads the latter.
            if self.eof:
                self.samples = [(sc, ts * 1000.0 if ts else ts, *rest) for sc, ts, *rest in self.samples]
            from ..prometheus import from_samples
            from_samples(self.samples, self.src, ev, self.info)
        self.samples, self.series, self.seen, self.raw_series = [], {}, set(), set()


def _tidy(line: str) -> str:
    # Copies from the Prometheus UI separate labels with ", ".
    return re.sub(r'",\s+', '",', line) if '", ' in line else line


FORMAT = MetricsText()

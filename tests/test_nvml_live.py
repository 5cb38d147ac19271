"""diagnose.sources.nvml_live: the live NVML sampler and its "diagnose-nvml" file.

NVML is faked at the module boundary (FakeNVML has pynvml's function names, constants and
exception classes), with a fake clock and sleep so nothing really waits. Two tests use the real
pynvml: one samples when a GPU is there, one checks NoGPU when there is none.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from diagnose.sources import nvml_live
from diagnose.sources.nvml_live import NoGPU, decode_clock_reasons, is_nvml_file, read, sample, write

MIB = 1024 * 1024


# -- the fake NVML ----------------------------------------------------------------------------------
class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    def __str__(self):
        return "Not Supported"


class NVMLError_InvalidArgument(NVMLError):
    def __str__(self):
        return "Invalid Argument"


class NVMLError_LibraryNotFound(NVMLError):
    def __str__(self):
        return "NVML Shared Library Not Found"


class NVMLError_DriverNotLoaded(NVMLError):
    def __str__(self):
        return "Driver Not Loaded"


class NVMLError_NoPermission(NVMLError):
    def __str__(self):
        return "Insufficient Permissions"


class NVMLError_FunctionNotFound(NVMLError):
    def __str__(self):
        return "Function Not Found"


def h100(i: int, **kw) -> dict:
    """One fake GPU, in NVML's own units (bytes, mW, KB/s)."""
    g = {
        "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd",
        "bus": f"00000000:{0x18 + 0x20 * i:02X}:00.0",
        "mem_total": 85520809984, "mem_used": 73400320000,       # 81559.0 / 70000.0 MiB
        "power_limit": 700000, "power": 612345,                  # 700.0 / 612.345 W
        "max_clocks": {1: 1980, 2: 2619}, "clocks": {1: 1755, 2: 2619},
        "link_gen": 5, "link_width": 16, "temp": 61, "util": (93, 40),
        "pcie": {0: 567, 1: 1234},                               # TX, RX in KB/s
        "reasons": 0x4 | 0x40,
        "links": [],          # per link: True (enabled) / False; past the end → InvalidArgument
        "remote": None,       # per enabled link: remote bus id; None → NotSupported
    }
    g.update(kw)
    return g


def nvlinked_pair(links: int = 18) -> list[dict]:
    a, b = h100(0), h100(1)
    a["links"], b["links"] = [True] * links, [True] * links
    a["remote"], b["remote"] = [b["bus"]] * links, [a["bus"]] * links
    return [a, b]


class FakeNVML:
    """Module-like stand-in for pynvml: same function names, constants and exception classes."""
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_FEATURE_DISABLED, NVML_FEATURE_ENABLED = 0, 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_TOPOLOGY_INTERNAL, NVML_TOPOLOGY_SINGLE, NVML_TOPOLOGY_MULTIPLE = 0, 10, 20
    NVML_TOPOLOGY_HOSTBRIDGE, NVML_TOPOLOGY_NODE, NVML_TOPOLOGY_SYSTEM = 30, 40, 50

    def __init__(self, gpus=None, init_error=None, fail=None, topology=None, clock=None, cost=0.0):
        self.gpus = nvlinked_pair() if gpus is None else gpus
        self.init_error = init_error
        self.fail = dict(fail or {})          # function name → exception instance to raise
        self.topology = topology or {}        # (i, j) → level; default SYSTEM
        self.clock, self.cost = clock, cost   # each utilisation read costs `cost` fake seconds
        self.calls: list[str] = []
        self.inited = 0
        self.shutdowns = 0

    def __getattribute__(self, name):
        if name.startswith("nvml") and not name.startswith("nvmlInit") and name != "nvmlShutdown":
            if name in object.__getattribute__(self, "fail"):
                err = object.__getattribute__(self, "fail")[name]

                def raiser(*a, **k):
                    object.__getattribute__(self, "calls").append(name)
                    raise err
                return raiser
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    # init / system
    def nvmlInit(self):
        if self.init_error is not None:
            raise self.init_error
        self.inited += 1

    def nvmlShutdown(self):
        assert self.inited, "nvmlShutdown without a successful nvmlInit"
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetNVMLVersion(self):
        return "12.550.54.15"

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < len(self.gpus):
            raise NVMLError_InvalidArgument()
        return ("handle", i)

    def _g(self, h):
        return self.gpus[h[1]]

    # static
    def nvmlDeviceGetName(self, h):
        return self._g(h)["name"]

    def nvmlDeviceGetUUID(self, h):
        return self._g(h)["uuid"]

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self._g(h)["bus"].encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        g = self._g(h)
        return SimpleNamespace(total=g["mem_total"], used=g["mem_used"], free=g["mem_total"] - g["mem_used"])

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._g(h)["power_limit"]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return self._g(h)["max_clocks"][kind]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._g(h)["link_gen"]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._g(h)["link_width"]

    def nvmlDeviceGetNvLinkState(self, h, link):
        links = self._g(h)["links"]
        if links is None:
            raise NVMLError_NotSupported()
        if link >= len(links):
            raise NVMLError_InvalidArgument()
        return self.NVML_FEATURE_ENABLED if links[link] else self.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        g = self._g(h)
        if g["remote"] is None:
            raise NVMLError_NotSupported()
        enabled = [k for k, on in enumerate(g["links"]) if on]
        return SimpleNamespace(busId=g["remote"][enabled.index(link)].encode())

    def nvmlDeviceGetTopologyCommonAncestor(self, h1, h2):
        return self.topology.get((h1[1], h2[1]), self.NVML_TOPOLOGY_SYSTEM)

    # per sample
    def nvmlDeviceGetUtilizationRates(self, h):
        if self.clock is not None:
            self.clock.t += self.cost
        gpu, mem = self._g(h)["util"]
        return SimpleNamespace(gpu=gpu, memory=mem)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._g(h)["power"]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self._g(h)["clocks"][kind]

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._g(h)["temp"]

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return self._g(h)["pcie"][counter]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._g(h)["reasons"]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self._g(h)["reasons"]


class FakeTime:
    """clock / sleep / now that only move when told: sleep() advances the clock, never waits."""

    def __init__(self):
        self.t = 0.0
        self.sleeps: list[float] = []
        self.base = datetime(2024, 5, 1, 12, 0, 0)

    def clock(self) -> float:
        return self.t

    def sleep(self, d: float) -> None:
        assert d > 0
        self.sleeps.append(d)
        self.t += d

    def now(self) -> datetime:
        return self.base + timedelta(seconds=self.t)


def run(nvml=None, seconds=3.0, interval=1.0, ft=None, **kw):
    ft = ft or FakeTime()
    nvml = nvml if nvml is not None else FakeNVML()
    return sample(seconds, interval, nvml=nvml, clock=ft.clock, sleep=ft.sleep, now=ft.now, **kw)


# -- header: 2 GPUs with NVLink -------------------------------------------------------------------
def test_two_gpus_with_nvlink_header():
    nv = FakeNVML()
    res = run(nv)
    h = res["header"]
    assert h["format"] == "diagnose-nvml" and h["version"] == 1
    assert h["started"] == "2024-05-01T12:00:00"
    assert h["interval_s"] == 1.0
    assert h["driver_version"] == "550.54.15" and h["nvml_version"] == "12.550.54.15"
    assert [g["index"] for g in h["gpus"]] == [0, 1]
    g0 = h["gpus"][0]
    assert g0 == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",
                  "memory_total_mib": 81559.0, "power_limit_w": 700.0, "sm_clock_max_mhz": 1980,
                  "mem_clock_max_mhz": 2619, "pcie_link_gen": 5, "pcie_link_width": 16,
                  "nvlink_active_links": 18}
    assert h["topology"] == {"0-1": "NV18"}
    assert "nvmlDeviceGetTopologyCommonAncestor" not in nv.calls   # NVLink wins, PCIe not asked


def test_nvlink_count_skips_disabled_links_and_stops_past_the_last():
    a, b = nvlinked_pair(4)
    a["links"] = [True, False, True, True]
    a["remote"] = [b["bus"]] * 3
    nv = FakeNVML(gpus=[a, b])
    h = run(nv)["header"]
    assert [g["nvlink_active_links"] for g in h["gpus"]] == [3, 4]
    assert h["topology"] == {"0-1": "NV4"}     # GPU1 sees 4 links to GPU0
    # 4 links + the one that says InvalidArgument, per GPU; never all 36
    assert nv.calls.count("nvmlDeviceGetNvLinkState") == 10


def test_nvlink_through_nvswitch_reports_links_for_every_pair():
    gpus = [h100(i, links=[True] * 18, remote=["00000000:C5:00.0"] * 18) for i in range(3)]
    h = run(FakeNVML(gpus=gpus))["header"]
    assert h["topology"] == {"0-1": "NV18", "0-2": "NV18", "1-2": "NV18"}


def test_nvlink_without_remote_info_uses_the_smaller_link_count():
    a, b = h100(0, links=[True] * 12), h100(1, links=[True] * 8 + [False] * 4)
    h = run(FakeNVML(gpus=[a, b]))["header"]
    assert h["topology"] == {"0-1": "NV8"}


def test_nvlink_pairs_only_join_gpus_they_reach():
    # GPU0<->GPU1 and GPU2<->GPU3 bridged; the pairs meet over PCIe
    g = [h100(i) for i in range(4)]
    for x, y in ((0, 1), (2, 3)):
        for s, d in ((x, y), (y, x)):
            g[s]["links"], g[s]["remote"] = [True] * 4, [g[d]["bus"]] * 4
    topo = {(0, 2): 40, (0, 3): 40, (1, 2): 50, (1, 3): 30}
    h = run(FakeNVML(gpus=g, topology=topo))["header"]
    assert h["topology"] == {"0-1": "NV4", "2-3": "NV4", "0-2": "NODE", "0-3": "NODE",
                             "1-2": "SYS", "1-3": "PHB"}


def test_pcie_topology_cells_without_nvlink():
    g = [h100(i, links=None) for i in range(4)]   # NvLinkState: NotSupported
    topo = {(0, 1): 0, (0, 2): 10, (0, 3): 20, (1, 2): 30, (1, 3): 40, (2, 3): 50}
    h = run(FakeNVML(gpus=g, topology=topo))["header"]
    assert [x["nvlink_active_links"] for x in h["gpus"]] == [None] * 4
    assert h["topology"] == {"0-1": "PIX", "0-2": "PIX", "0-3": "PXB", "1-2": "PHB", "1-3": "NODE", "2-3": "SYS"}


def test_unknown_topology_is_left_out_not_guessed():
    g = [h100(i, links=None) for i in range(3)]
    h = run(FakeNVML(gpus=g, topology={(0, 1): 99, (1, 2): 10}))["header"]
    assert h["topology"] == {"0-2": "SYS", "1-2": "PIX"}
    nv = FakeNVML(gpus=[h100(0, links=None), h100(1, links=None)],
                  fail={"nvmlDeviceGetTopologyCommonAncestor": NVMLError_NotSupported()})
    assert run(nv)["header"]["topology"] == {}


# -- sampling -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seconds, interval, cycles", [
    (10, 1, 10), (3, 1, 3), (2.5, 1, 3), (1, 1, 1), (0.2, 1, 1), (5, 0.5, 10), (1, 0.1, 10), (0.3, 0.1, 3)])
def test_number_of_cycles(seconds, interval, cycles):
    ft = FakeTime()
    ticks = []
    res = run(seconds=seconds, interval=interval, ft=ft, on_tick=ticks.append)
    assert len(res["samples"]) == 2 * cycles
    assert [s["gpu"] for s in res["samples"]] == [0, 1] * cycles
    assert len(ft.sleeps) == cycles - 1
    assert ft.t == pytest.approx((cycles - 1) * interval)
    assert len(ticks) == cycles and ticks[-1] == 1.0
    assert ticks == sorted(ticks) and ticks == pytest.approx([(k + 1) / cycles for k in range(cycles)])


def test_samples_are_on_the_interval_grid_with_ms_timestamps():
    res = run(seconds=3, interval=0.5)
    ts = [s["t"] for s in res["samples"]]
    assert ts == ["2024-05-01T12:00:00.000"] * 2 + ["2024-05-01T12:00:00.500"] * 2 + \
                 ["2024-05-01T12:00:01.000"] * 2 + ["2024-05-01T12:00:01.500"] * 2 + \
                 ["2024-05-01T12:00:02.000"] * 2 + ["2024-05-01T12:00:02.500"] * 2
    assert all(datetime.fromisoformat(t) for t in ts)


def test_slow_cycles_do_not_stretch_the_run():
    ft = FakeTime()
    nv = FakeNVML(clock=ft, cost=0.8)        # 2 GPUs: every cycle takes 1.6 s, interval 1 s
    ticks = []
    res = run(nv, seconds=10, interval=1, ft=ft, on_tick=ticks.append)
    starts = sorted({s["t"] for s in res["samples"]})
    assert starts == [f"2024-05-01T12:00:0{k}.000" for k in (0, 2, 4, 6, 8)]
    assert ft.t <= 10
    assert ticks[-1] == 1.0 and ticks == sorted(ticks)


def test_a_cycle_just_late_is_not_skipped():
    ft = FakeTime()
    nv = FakeNVML(clock=ft, cost=0.6)        # 1.2 s per cycle: slot 1 is 0.2 s late, sampled at once
    res = run(nv, seconds=3, interval=1, ft=ft)
    assert len({s["t"] for s in res["samples"]}) == 3


@pytest.mark.parametrize("seconds, interval", [(0, 1), (1, 0), (-1, 1), (1, -0.5), (float("nan"), 1), (float("inf"), 1)])
def test_bad_durations_are_refused(seconds, interval):
    with pytest.raises(ValueError):
        run(seconds=seconds, interval=interval)


def test_unit_conversions():
    res = run(seconds=1)
    s = res["samples"][0]
    assert s == {"t": "2024-05-01T12:00:00.000", "gpu": 0, "util": 93, "mem_util": 40, "power_w": 612.345,
                 "sm_clock_mhz": 1755, "mem_clock_mhz": 2619, "temp_c": 61, "mem_used_mib": 70000.0,
                 "pcie_rx_kbs": 1234, "pcie_tx_kbs": 567, "clock_reasons": ["sw_power_cap", "hw_thermal_slowdown"]}
    g = res["header"]["gpus"][0]
    assert g["memory_total_mib"] == 81559.0 and g["power_limit_w"] == 700.0
    odd = run(FakeNVML(gpus=[h100(0, power=250, power_limit=349999, mem_used=3 * MIB // 2)]), seconds=1)
    assert odd["samples"][0]["power_w"] == 0.25
    assert odd["samples"][0]["mem_used_mib"] == 1.5
    assert odd["header"]["gpus"][0]["power_limit_w"] == 349.999


@pytest.mark.parametrize("mask, names", [
    (0, []),
    (0x1, ["gpu_idle"]),
    (0x4, ["sw_power_cap"]),
    (0x8 | 0x80, ["hw_slowdown", "hw_power_brake_slowdown"]),
    (0x20 | 0x40, ["sw_thermal_slowdown", "hw_thermal_slowdown"]),
    (0xFF, ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
            "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]),
    (0x100 | 0x200 | 0x400, ["display_clock_setting", "board_limit", "reliability"]),
    (0x4 | 0x10000, ["sw_power_cap", "unknown_0x10000"]),
    (None, None),
])
def test_clock_reason_decoding(mask, names):
    assert decode_clock_reasons(mask) == names


def test_clock_reasons_from_the_sampler():
    res = run(FakeNVML(gpus=[h100(0, reasons=0x1), h100(1, reasons=0x8 | 0x4)]), seconds=1)
    assert [s["clock_reasons"] for s in res["samples"]] == [["gpu_idle"], ["sw_power_cap", "hw_slowdown"]]


def test_clock_reasons_fall_back_to_the_throttle_call():
    nv = FakeNVML(fail={"nvmlDeviceGetCurrentClocksEventReasons": NVMLError_FunctionNotFound()})
    res = run(nv, seconds=1)
    assert res["samples"][0]["clock_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in nv.calls

    class OldPynvml(FakeNVML):   # a pynvml from before the "event" rename
        def __getattribute__(self, name):
            if name == "nvmlDeviceGetCurrentClocksEventReasons":
                raise AttributeError(name)
            return super().__getattribute__(name)
    res = run(OldPynvml(), seconds=1)
    assert res["samples"][1]["clock_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]


SAMPLE_CALLS = ["nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo",
                "nvmlDeviceGetTemperature", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPcieThroughput",
                "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"]
STATIC_CALLS = ["nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetEnforcedPowerLimit",
                "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetCurrPcieLinkGeneration",
                "nvmlDeviceGetCurrPcieLinkWidth", "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion"]


@pytest.mark.parametrize("err", [NVMLError_NotSupported(), NVMLError_NoPermission(), NVMLError()])
def test_unsupported_fields_become_none(err):
    nv = FakeNVML(fail={name: err for name in SAMPLE_CALLS + STATIC_CALLS})
    res = run(nv, seconds=2)
    assert len(res["samples"]) == 4
    for s in res["samples"]:
        assert set(s) == {"t", "gpu", "util", "mem_util", "power_w", "sm_clock_mhz", "mem_clock_mhz", "temp_c",
                          "mem_used_mib", "pcie_rx_kbs", "pcie_tx_kbs", "clock_reasons"}
        assert all(s[k] is None for k in s if k not in ("t", "gpu")), s
    h = res["header"]
    assert h["driver_version"] is None and h["nvml_version"] is None
    for g in h["gpus"]:
        assert g["memory_total_mib"] is None and g["power_limit_w"] is None and g["name"] is None
        assert g["sm_clock_max_mhz"] is None and g["pcie_link_gen"] is None and g["pcie_link_width"] is None
        assert g["nvlink_active_links"] == 18        # not asked to fail: still read
    assert nv.shutdowns == 1


def test_one_unsupported_field_leaves_the_others():
    nv = FakeNVML(fail={"nvmlDeviceGetPowerUsage": NVMLError_NotSupported(),
                        "nvmlDeviceGetPcieThroughput": NVMLError_NotSupported()})
    s = run(nv, seconds=1)["samples"][0]
    assert s["power_w"] is None and s["pcie_rx_kbs"] is None and s["pcie_tx_kbs"] is None
    assert s["util"] == 93 and s["temp_c"] == 61 and s["mem_used_mib"] == 70000.0


def test_a_gpu_that_cannot_be_opened_is_left_out():
    class Lost(FakeNVML):
        def nvmlDeviceGetHandleByIndex(self, i):
            if i == 0:
                raise NVMLError()
            return super().nvmlDeviceGetHandleByIndex(i)
    res = run(Lost(gpus=[h100(0), h100(1)]), seconds=2)
    assert [g["index"] for g in res["header"]["gpus"]] == [1]
    assert [s["gpu"] for s in res["samples"]] == [1, 1]


# -- no driver / no GPU / shutdown ----------------------------------------------------------------------
@pytest.mark.parametrize("err, reason", [
    (NVMLError_LibraryNotFound(), "NVML Shared Library Not Found"),
    (NVMLError_DriverNotLoaded(), "Driver Not Loaded"),
    (NVMLError_NoPermission(), "Insufficient Permissions"),
    (OSError("libnvidia-ml.so.1: cannot open shared object file:\nNo such file"), "libnvidia-ml.so.1"),
])
def test_init_failure_is_no_gpu_with_one_line(err, reason):
    nv = FakeNVML(init_error=err)
    with pytest.raises(NoGPU) as e:
        run(nv)
    msg = str(e.value)
    assert msg.startswith("no NVIDIA driver found (NVML: ") and msg.endswith(")")
    assert reason in msg
    assert "\n" not in msg
    assert nv.shutdowns == 0                 # init failed: nothing to shut down
    assert nv.calls == []


def test_device_count_zero_is_no_gpu_and_shuts_down():
    nv = FakeNVML(gpus=[])
    with pytest.raises(NoGPU, match=r"^no NVIDIA GPU found$"):
        run(nv)
    assert nv.shutdowns == 1


def test_device_count_failure_is_no_gpu_and_shuts_down():
    nv = FakeNVML(fail={"nvmlDeviceGetCount": NVMLError_DriverNotLoaded()})
    with pytest.raises(NoGPU, match=r"^no NVIDIA GPU found \(NVML: Driver Not Loaded\)$"):
        run(nv)
    assert nv.shutdowns == 1


def test_shutdown_after_success():
    nv = FakeNVML()
    run(nv)
    assert nv.inited == 1 and nv.shutdowns == 1


def test_shutdown_when_interrupted():
    nv = FakeNVML()

    def tick(frac):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(nv, on_tick=tick)
    assert nv.shutdowns == 1


def test_shutdown_error_does_not_hide_the_result():
    class BadShutdown(FakeNVML):
        def nvmlShutdown(self):
            super().nvmlShutdown()
            raise NVMLError_NotSupported()
    res = run(BadShutdown(), seconds=1)
    assert len(res["samples"]) == 2


# -- the file -----------------------------------------------------------------------------------
def test_write_read_round_trip(tmp_path):
    res = run(seconds=3)
    path = tmp_path / "gpu.nvml.jsonl"
    write(res, str(path))
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == 1 + 6 and text.endswith("\n")
    assert json.loads(lines[0]) == res["header"]
    assert list(json.loads(lines[0]))[:2] == ["format", "version"]
    assert json.loads(lines[1]) == res["samples"][0]
    assert read(text) == res
    assert os.listdir(tmp_path) == ["gpu.nvml.jsonl"]       # no temporary file left


def test_round_trip_with_none_fields(tmp_path):
    nv = FakeNVML(fail={"nvmlDeviceGetPowerUsage": NVMLError_NotSupported()}, gpus=[h100(0, links=None)])
    res = run(nv, seconds=1)
    path = tmp_path / "x"
    write(res, str(path))
    assert read(path.read_text()) == res


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "out.jsonl"
    path.write_text("old contents\n")
    good = run(seconds=1)
    bad = {"header": good["header"], "samples": [{"t": "x", "gpu": 0, "oops": object()}]}
    with pytest.raises(TypeError):
        write(bad, str(path))
    assert path.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]

    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(nvml_live.os, "replace", lambda a, b: (replaced.append((a, b)), real_replace(a, b)))
    write(good, str(path))
    assert len(replaced) == 1 and replaced[0][1] == str(path)
    assert os.path.dirname(replaced[0][0]) == str(tmp_path)      # same folder: a rename, not a copy
    assert read(path.read_text()) == good
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_is_nvml_file(tmp_path):
    res = run(FakeNVML(gpus=[h100(i, links=[True] * 18, remote=["00000000:C5:00.0"] * 18) for i in range(8)]),
              seconds=2)
    path = tmp_path / "g"
    write(res, str(path))
    data = path.read_bytes()
    assert is_nvml_file(data)
    assert is_nvml_file(data[:4096])
    assert len(data.split(b"\n")[0]) > 200 and is_nvml_file(data[:100])     # header cut short
    assert is_nvml_file(b"\xef\xbb\xbf" + data[:300])                       # BOM
    assert is_nvml_file(data.replace(b"\n", b"\r\n")[:5000])
    assert not is_nvml_file(b"")
    assert not is_nvml_file(b"# gpu    pwr  gtemp  mtemp     sm    mem\n# Idx      W      C      C      %      %\n")
    assert not is_nvml_file(b'{"format": "something-else", "version": 1}\n')
    assert not is_nvml_file(b'{"level": "info", "msg": "diagnose-nvml"}\n')
    assert not is_nvml_file(b'[1, 2, 3]\n')
    assert not is_nvml_file(b"\x00\x01\x02\xff\xfe binary")
    assert not is_nvml_file(b'INFO 05-01 12:00:00 {"format": "diagnose-nvml"}\n')
    # the format on line 2 does not make it one
    assert not is_nvml_file(b'{"a": 1}\n' + data)


def _file_text(**kw) -> str:
    res = run(seconds=2, **kw)
    return "\n".join([json.dumps(res["header"])] + [json.dumps(s) for s in res["samples"]]) + "\n"


def test_read_names_the_damaged_line():
    lines = _file_text().splitlines()
    damaged = lines[:3] + ['{"t": "2024-05-01T12:00:01.000", "gpu": 0, "util": 9'] + lines[4:]
    with pytest.raises(ValueError, match=r"^line 4: not valid JSON"):
        read("\n".join(damaged))
    no_gpu = lines[:2] + ['{"t": "2024-05-01T12:00:01.000", "util": 9}'] + lines[3:]
    with pytest.raises(ValueError, match=r"^line 3: .*\"gpu\""):
        read("\n".join(no_gpu))
    not_object = lines[:4] + ["[1, 2]"]
    with pytest.raises(ValueError, match=r"^line 5: expected a JSON object"):
        read("\n".join(not_object))
    with pytest.raises(ValueError, match=r"^line 1: not a diagnose-nvml header"):
        read('{"format": "other", "version": 1}\n' + "\n".join(lines[1:]))
    with pytest.raises(ValueError, match=r"^line 1: not valid JSON"):
        read(lines[0][:50] + "\n" + "\n".join(lines[1:]))
    with pytest.raises(ValueError, match=r"^line 1: unsupported diagnose-nvml version 2"):
        read(lines[0].replace('"version": 1', '"version": 2'))
    with pytest.raises(ValueError, match=r"^line 1: empty"):
        read("")
    with pytest.raises(ValueError, match=r"^line 1: empty"):
        read("\n" + "\n".join(lines))


def test_read_tolerates_blank_lines_crlf_and_bom():
    text = _file_text()
    want = read(text)
    assert len(want["samples"]) == 4
    assert read(text.replace("\n", "\r\n")) == want
    assert read("\ufeff" + text + "\n\n") == want
    lines = text.splitlines()
    assert read("\n".join(lines[:2] + [""] + lines[2:])) == want
    assert read(lines[0]) == {"header": want["header"], "samples": []}     # header only: no samples


# -- the real pynvml --------------------------------------------------------------------------------
def _real_gpu_count() -> int:
    """GPUs the real NVML sees; 0 when there is no driver, no library or no GPU."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


REAL_GPUS = _real_gpu_count()


@pytest.mark.skipif(REAL_GPUS == 0, reason="no NVIDIA driver or GPU here (pynvml.nvmlInit fails)")
def test_real_nvml_samples_one_second():
    ticks = []
    res = sample(1.0, 0.5, on_tick=ticks.append)
    h = res["header"]
    assert h["format"] == "diagnose-nvml" and h["version"] == 1
    assert h["interval_s"] == 0.5 and datetime.fromisoformat(h["started"])
    assert isinstance(h["driver_version"], str) and h["driver_version"]
    assert len(h["gpus"]) == REAL_GPUS
    for g in h["gpus"]:
        assert isinstance(g["name"], str) and g["name"]
        assert isinstance(g["uuid"], str) and g["uuid"].startswith(("GPU-", "MIG-"))
        assert g["memory_total_mib"] is None or g["memory_total_mib"] > 0
    assert isinstance(h["topology"], dict)
    assert len(res["samples"]) == 2 * REAL_GPUS
    assert ticks[-1] == 1.0
    assert read("\n".join(json.dumps(x) for x in [h] + res["samples"])) == res


@pytest.mark.skipif(REAL_GPUS > 0, reason="an NVIDIA GPU is present")
def test_real_nvml_without_driver_is_no_gpu():
    with pytest.raises(NoGPU) as e:
        sample(1.0, 1.0, sleep=lambda s: pytest.fail("must not sample without a GPU"))
    msg = str(e.value)
    assert msg.startswith(("no NVIDIA driver found (NVML: ", "no NVIDIA GPU found")), msg
    assert "\n" not in msg

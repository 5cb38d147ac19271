"""TensorRT-LLM's logger headers, and Triton's (glog) for its TensorRT-LLM backend."""
from __future__ import annotations

import re

from .. import Header

# `[TensorRT-LLM][INFO] `, `[TensorRT-LLM][INFO][3] `, `[08/07/2025-02:28:51] [TRT-LLM] [I] `,
# `[..] [TRT-LLM] [RANK 1] [I] `, `[..] [TRT] [I] `, `04-28-2025 09:56:44.123456 [TRT-LLM] [I] [batchmgr] [RANK 0] `,
# and a sub-logger's tag: `[..] [TRT-LLM AUTO-DEPLOY] [RANK 0] [I] ` (the AutoDeploy backend)
HEADER = re.compile(
    r"^(?:\[TensorRT-LLM\]\[(?P<lvl1>[A-Z]+)\](?:\[\d+\])? "
    r"|(?:\[(?P<d1>\d\d/\d\d/\d{4})-(?P<t1>\d\d:\d\d:\d\d)\] |(?P<d2>\d\d-\d\d-\d{4}) (?P<t2>\d\d:\d\d:\d\d)(?:\.\d+)? )"
    r"\[(?:TRT-LLM(?: [A-Z][A-Z\-]*)?|TRT)\](?: \[(?:MPI_Rank|RANK) \d+\])? \[(?P<lvl2>[A-Z])\](?: \[[\w ]+\])?(?: \[RANK \d+\])? )")
# Triton (glog): `I1218 03:35:37.688135 20559 libtensorrtllm.cc:1205] `
GLOG = re.compile(r"^(?P<lvl>[IWEF])(?P<mon>\d\d)(?P<day>\d\d) (?P<hms>\d\d:\d\d:\d\d)\.\d+ +\d+ [\w.]+:\d+\] ")


def match(text: str) -> Header | None:
    c = text[:1]
    if c == "[":
        m = HEADER.match(text)
        if not m:
            return None
        date = None
        if m.group("d1"):
            mo, d, y = m.group("d1").split("/")
            date = f"{y}-{mo}-{d}"
        return Header("trtllm", m.end(), level=m.group("lvl1") or m.group("lvl2"), date=date, hms=m.group("t1"))
    if c.isdigit():
        m = HEADER.match(text)
        if not m:
            return None
        mo, d, y = m.group("d2").split("-")
        return Header("trtllm", m.end(), level=m.group("lvl2"), date=f"{y}-{mo}-{d}", hms=m.group("t2"))
    if c in "IWEF" and c:
        m = GLOG.match(text)
        if m:
            return Header("triton", m.end(), level=m.group("lvl"), stamp=(int(m.group("mon")), int(m.group("day")), m.group("hms")))
    return None

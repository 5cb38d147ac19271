"""The memos of work that depends only on a message's text (diagnose/memo.py) give what the plain
work gives: over every real line, a table's route (which pattern, its groups) and a dump's parsed
pairs, taken from the memo and computed afresh, agree; and the memos stay bounded."""
from __future__ import annotations

import functools
import importlib

from conftest import FIXTURES

from diagnose import memo
from diagnose.sources.engines import NAMES, common, kv
from diagnose.sources.readers.lineprefix import peel


@functools.lru_cache(maxsize=1)
def _lines() -> dict:
    """Every line of the real logs peeled, the first of each distinct message (an equal message
    gives an equal result: that is what the memos rest on), by message."""
    out = {}
    for path in sorted((FIXTURES / "real").glob("*.log")):
        for i, text in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n")):
            line = peel(path.name, i + 1, text)
            out.setdefault(line.msg, line)
    return out


def _messages() -> tuple:
    return tuple(_lines())


def _same_match(a, b) -> bool:
    if a is None or b is None:
        return a is b
    (i, m), (j, n) = a, b
    return i == j and m.re is n.re and m.span() == n.span() and m.groups() == n.groups() \
        and m.groupdict() == n.groupdict() and m.string == n.string


def test_a_tables_route_from_the_memo_is_the_plain_search_over_every_real_line():
    msgs = _messages()
    assert len(msgs) > 50_000
    tables = [importlib.import_module(f"diagnose.sources.engines.{e}.lines").Parser._simple for e in NAMES]
    routed = 0
    for table in tables:
        common._ROUTES.pop(id(table), None)
        for msg in msgs:
            want = common.route_plain(table, msg)
            for got in (common.route(table, msg), common.route(table, msg)):    # new to the memo, then from it
                assert _same_match(got, want), msg
            routed += want is not None
    assert routed > 1000


def test_vllms_start_up_route_from_the_memo_is_the_plain_one_over_every_real_line():
    from diagnose.sources.engines.vllm import lines as vllm
    found = 0
    vllm._HEADS.data.clear()
    for msg in _messages():
        want = vllm.head_plain(msg)
        for got in (vllm.head(msg), vllm.head(msg)):    # new to the memo, then from it
            assert (want is None) == (got is None), msg
            assert want is None or want[0] == got[0] and _same_match((0, want[1]), (0, got[1])), msg
        found += want is not None
    assert found > 200


def test_vllms_start_up_route_skips_only_messages_none_of_its_patterns_match():
    """head_plain tells most messages none of its lines by their words alone: over every real
    message, what it says is what trying each pattern says."""
    from diagnose.sources.engines.vllm import lines as vllm
    found = 0
    for msg in _messages():
        want = vllm._head_searched(msg)
        got = vllm.head_plain(msg)
        assert (want is None) == (got is None), msg
        assert want is None or want[0] == got[0] and _same_match((0, want[1]), (0, got[1])), msg
        found += want is not None
    assert found > 200


def test_a_dumps_parse_from_the_memo_is_the_plain_parse_and_its_own():
    msgs = _messages()
    pairs = [m.split(" with config: ", 1)[1] for m in msgs if " with config: " in m]
    pairs += [m.split("ServerArgs(", 1)[1] for m in msgs if "ServerArgs(" in m]
    dicts = [m[m.index("{"):] for m in msgs if "non-default args: {" in m or "server_args: {" in m]
    assert len(pairs) > 20 and len(dicts) > 20
    for parse, plain, texts in ((kv.parse_pairs, kv.parse_pairs_plain, pairs), (kv.parse_dict, kv.parse_dict_plain, dicts)):
        for text in texts:
            want = plain(text)
            first = parse(text)
            assert first == want and repr(first) == repr(want), text[:200]
            # what a caller does with its dict never reaches the next caller's
            for v in first.values():
                if isinstance(v, dict):
                    v["changed"] = 1
                elif isinstance(v, list):
                    v.append("changed")
            first["changed"] = 1
            again = parse(text)
            assert again == want and repr(again) == repr(want), text[:200]


def test_the_memos_stay_bounded():
    m = memo.Memo(entries=8, longest=10, budget=40)
    for i in range(100):
        m.put(f"line {i}", i)
        assert len(m.data) <= 8 and m.size <= 40 and m.size == sum(map(len, m.data))
    m.put("x" * 11, 1)
    assert m.get("x" * 11) is memo.MISS
    # each memo holds a few MB of text at most (4 bytes a character at worst)
    assert common.ROUTE_BUDGET * 4 <= 2 << 20 and kv.DUMP_BUDGET * 4 <= 1 << 20
    # a deeply nested value too deep to copy is parsed again, not lost
    deep = "{" + '"a": [' * 400 + "1" + "]" * 400 + "}"
    assert kv.parse_dict(deep) == kv.parse_dict_plain(deep)


def _state(ev, src) -> tuple:
    v = ev.lifecycle.get(src)
    life = (len(ev.lifecycle), v and tuple(getattr(v, a) for a in v.__slots__))
    events = {k: [(e.line, e.data) for e in v] for k, v in ev.events.items()}
    return (repr(ev.facts), events, dict(ev.event_counts), dict(ev.counters), set(ev.hosts), set(ev.ray_ips),
            dict(ev.nccl_comms), life, list(ev.values.items()))


def test_shared_lines_skipped_as_quiet_are_what_the_whole_reading_gives():
    """feed_common skips every branch (_shared) for a message quiet_plain says none can act on:
    over every real line it says so of, the branches would have read nothing and changed nothing,
    on fresh evidence and on evidence with a traceback open and a stop under way."""
    from diagnose.evidence.model import Evidence
    quiet = [line for msg, line in _lines().items() if common.quiet_plain(msg)]
    assert len(quiet) > 30_000
    for prepare in (None, "traceback", "stopping"):
        ev = Evidence()
        for line in quiet:
            if prepare:
                life = common.lifecycle(ev, line.source)
                life.tb = "open" if prepare == "traceback" else None
                life.stopping = prepare == "stopping"
            before = _state(ev, line.source)
            assert common._shared(line.msg, line, ev, None, ev.lifecycle.get(line.source)) is False, line.raw
            assert _state(ev, line.source) == before, line.raw


def test_a_clock_reading_one_seconds_stamp_once_gives_what_reading_each_gives():
    """Clock.at returns the time it made for the same stamp just before without making it again:
    over every real log's lines in order, the times are those of a clock that makes each. And
    Clock.at_hms (the stamp as the numbers C read) gives what at() gives of the line, in any mix."""
    from diagnose.sources.readers.lineprefix import Clock
    stamped = numbers_read = 0
    # and a new year, with lines from just before it arriving late, twice over; a time no clock has
    new_year = "\n".join(f"INFO {s} [a.py:1] x" for s in ("12-31 23:59:59", "12-31 23:59:59", "01-01 00:00:01",
                          "12-31 23:59:58", "12-31 23:59:58", "01-01 00:00:01", "01-01 00:00:02", "bad",
                          "01-01 24:00:00", "01-01 24:00:00", "02-30 00:00:00", "01-02 00:00:00"))
    texts = [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in sorted((FIXTURES / "real").glob("*.log"))]
    for name, body in texts + [("new-year", new_year)]:
        fast, plain, numbers = Clock(2026), Clock(2026), Clock(2026)
        for i, text in enumerate(body.split("\n")):
            line = peel(name, i + 1, text)
            plain._stamp = None             # no shortcut: every stamp made again
            got, want = fast.at(line), plain.at(line)
            assert got == want and (fast.year, fast._last, fast._last_dt) == (plain.year, plain._last, plain._last_dt), text
            stamped += want is not None
            if line.stamp is not None and line.dt is None and line.iso is None and i % 3:
                mon, day, hms = line.stamp
                got = numbers.at_hms(mon, day, *map(int, hms.split(":")))
                numbers_read += 1
            else:
                got = numbers.at(line)
            assert got == want and (numbers.year, numbers._last, numbers._last_dt) == (plain.year, plain._last,
                                                                                         plain._last_dt), text
    assert stamped > 50_000 and numbers_read > 20_000

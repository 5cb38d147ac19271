"""The rule-condition evaluator: three-valued logic for unknowns, and nothing outside its grammar."""
from __future__ import annotations

import pytest

from diagnose.ruleset.expr import UNKNOWN, ExprError, compile_expr, evaluate
from diagnose.values import is_unknown
from diagnose.ruleset.rules import RuleError, load_rule


def ev(text, **names):
    return evaluate(compile_expr(text), names)


def test_unknown_is_never_zero():
    assert is_unknown(ev("kv_usage_mean < 20", kv_usage_mean=None))
    assert is_unknown(ev("x > 0", ))
    assert ev("x > 0 or y > 0", x=None, y=1) is True      # a known True decides an `or`
    assert ev("x > 0 and y > 0", x=None, y=0) is False    # a known False decides an `and`
    assert is_unknown(ev("x > 0 and y > 0", x=None, y=1))
    assert ev("known(x)", x=None) is False and ev("known(x)", x=0) is True
    assert ev("a if known(a) else 7", a=None) == 7


def test_known_or_is_the_value_or_its_fallback():
    assert ev("known_or(a, 7)", a=None) == 7 and ev("known_or(a, 7)", a=0) == 0
    assert ev("tensor_parallel_size * known_or(data_parallel_size, 1)", tensor_parallel_size=4) == 4
    assert ev("known_or(a, b)", a=None, b=3) == 3 and is_unknown(ev("known_or(a, b)", a=None))
    with pytest.raises(ExprError, match="two arguments"):
        compile_expr("known_or(a)")


def test_arithmetic_comparisons_and_functions():
    assert ev("tensor_parallel_size * (data_parallel_size if known(data_parallel_size) else 1)", tensor_parallel_size=4) == 4
    assert ev("1 < x <= 3", x=3) is True
    assert ev("min(85 / max(k, 1), 4)", k=10) == 4
    assert ev("pow2(100)") == 128
    assert is_unknown(ev("a / b", a=1, b=0))


@pytest.mark.parametrize("text,needle", [
    ("__import__('os').system('id')", "not allowed"),
    ("x.__class__", "Attribute"),
    ("().__class__.__bases__", "Attribute"),
    ("[c for c in x]", "ListComp"),
    ("lambda: 1", "Lambda"),
    ("open('/etc/passwd')", "function `open`"),
    ("x[0]", "Subscript"),
    ("__builtins__", "not allowed"),
    ("max(" * 40 + "1" + ")" * 40, "deeper"),
    ("1 + " * 400 + "1", "longer than"),
])
def test_rejects_what_is_outside_the_grammar(text, needle):
    with pytest.raises(ExprError) as e:
        compile_expr(text, "rule.toml:3")
    if needle:
        assert needle in str(e.value)
    assert "rule.toml:3" in str(e.value)


def test_deep_nesting_is_rejected():
    with pytest.raises(ExprError, match="deeper"):
        compile_expr("not " * 60 + "x", "r.toml:1")


def test_huge_exponent_is_refused_at_run_time():
    with pytest.raises(ExprError, match="exponent"):
        ev("9 ** 999999")


BAD_RULE = '''id = "evil"
title = "t"
fix_title = "f"
severity = "high"

condition = "{cond}"
[fix.vllm]
note = "n"
'''


@pytest.mark.parametrize("cond", ["x.__dict__", "__import__('os')", "eval('1')", "[x for x in y]"])
def test_a_malicious_rule_file_is_rejected_naming_file_and_line(tmp_path, cond):
    p = tmp_path / "evil.toml"
    p.write_text(BAD_RULE.format(cond=cond))
    with pytest.raises(RuleError) as e:
        load_rule(p)
    assert f"{p}:6:" in str(e.value)


# -- every value an expression makes is bounded (issue 34) --------------------------------------------

CHAIN = " * ".join(["9**64"] * 21)      # 9**64 is 203 bits: 21 factors pass 4096 bits


@pytest.mark.parametrize("text,what", [
    ("str(9**64) * 9**8 * 2 == 1", "a string of 2668896702 characters"),   # asked for 7.8 GB, took 25 s
    ('"a" * 10**6', "a string of 1000000"),
    ('10**6 * "a"', "a string of 1000000"),
    ("(1,) * 10**6", "a sequence of 1000000"),
    ("((1,) * 1000,) * 1000", "a sequence of 1001"),       # nested items count: comparing two was 10**9 steps
    ('str(("x" * 1000,) * 100)', "characters when written out"),
    ('(("x" * 1000,) * 10,) * 1000', "characters when written out"),
    ("x * x * x", "an integer of 6002 bits"),                # x: a 2001-bit number (bits before: an upper bound)
    (CHAIN, "an integer of 4261 bits"),
    ('int("9" * 4000)', "an integer of 13288 bits"),
    ('"x" * 5000 + "x" * 5000 + "x"', "a string of 10001"),
    ("(1,) * 600 + (1,) * 401", "a sequence of 1001"),
    ("round(1.5, 10**9)", "round to"),
    ("round(1, -10**9)", "round to"),                       # computes 10**(10**9)
    ("x * 1.5", "does not fit a float"),
    ("1e6 ** 64", "does not fit a float"),
])
def test_values_past_their_bound_are_refused_before_they_are_made(text, what):
    import time
    t0 = time.monotonic()
    with pytest.raises(ExprError) as e:
        ev(text, x=2**2000)
    assert "value too large" in str(e.value) and what in str(e.value)
    assert len(str(e.value)) < 200 and time.monotonic() - t0 < 2


def test_string_formatting_with_percent_is_refused():
    with pytest.raises(ExprError, match="formatting"):    # a 1 GB string from 16 characters
        ev('"%0999999999d" % 1')
    assert ev("7 % 4") == 3 and ev("7.5 % 2") == 1.5


def test_an_exponent_error_does_not_quote_a_huge_number():
    with pytest.raises(ExprError, match="exponent too large") as e:
        ev("x ** 2", x=2**4000)
    assert len(str(e.value)) < 120


def test_other_errors_still_propagate_to_the_runner():
    with pytest.raises(TypeError):             # a broken rule is an error finding, not unknown
        ev('"x" + 1')
    assert is_unknown(ev("float(x)", x=2**4000)) and is_unknown(ev("int('x')"))


@pytest.mark.parametrize("text,want", [
    ("max_num_seqs * 2", 512), ('"x" * 3', "xxx"), ("pow2(300)", 512), ("(1, 2, 3, 4)", (1, 2, 3, 4)),
    ("known_or(a, 0) + 1", 1), ("9**64 > 0", True), ('str(max_num_seqs) + " seqs"', "256 seqs"),
    ('True * "x"', "x"), ('"x" * False', ""), ('"x" * 5000 + "x" * 5000 == "x" * 10000', True),
    ("(1,) * 1000 == (1,) * 1000", True), ("2 ** 64", 2**64), (" * ".join(["9**64"] * 20) + " > 0", True),
    ('str((1, "a"))', "(1, 'a')"), ("round(2.567, 2)", 2.57), ('lower("AbC") in ("abc", "x")', True),
    ("x * 1.0", float(2**1000)), ("x * x", 2**2000),
])
def test_ordinary_values_are_untouched_by_the_bounds(text, want):
    assert ev(text, max_num_seqs=256, x=2**1000) == want


BOMB = "str(9**64) * 9**8 * 2"


def test_a_rule_whose_expression_explodes_is_an_error_not_a_crashed_run(tmp_path):
    """User rules with the bomb in a condition, a title and a fix note, next to one that works: each
    broken rule is reported as a rule error and the run goes on (exit 0 on a healthy log, the good
    rule's finding still there), quickly, never `internal error` (exit 3) or MemoryError."""
    import os
    import subprocess
    import sys
    from conftest import FIXTURES, ROOT
    d = tmp_path / "rules" / "custom"
    d.mkdir(parents=True)
    rules = {"bomb-condition": (f"{BOMB} == 1", "t", "n"), "bomb-title": ("True", "{%s}" % BOMB, "n"),
             "bomb-note": ("True", "t", "{%s}" % BOMB), "still-fine": ("True", "the custom rule still fires", "n")}
    for rid, (cond, title, note) in rules.items():
        (d / f"{rid}.toml").write_text(f'id = "{rid}"\nseverity = "low"\nfix_title = "f"\n'
                                       f'condition = "{cond}"\ntitle = "{title}"\n[fix.any]\nnote = "{note}"\n')
    p = subprocess.run([sys.executable, "-m", "diagnose", str(FIXTURES / "scenarios" / "healthy.log"),
                        "--rules", str(tmp_path / "rules")], capture_output=True, cwd=ROOT, timeout=30,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"})
    out = (p.stdout + p.stderr).decode()
    assert p.returncode == 0, out
    assert "internal error" not in out and "MemoryError" not in out
    for rid in ("bomb-condition", "bomb-title", "bomb-note"):
        assert f"rule error {rid}: ExprError: value too large: a string of" in out, out
    assert "the custom rule still fires" in out

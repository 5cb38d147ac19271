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

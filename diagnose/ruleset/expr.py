"""A small, safe evaluator for rule conditions and fix values.

Rule files are data written by other people: this parses them with `ast` and walks only a
whitelist of node types (comparisons, arithmetic, boolean logic, names, literals, a few
functions). Nothing is ever passed to eval/exec. Unknown signals (None) propagate as UNKNOWN
with three-valued logic, so a missing metric can never read as zero.
"""
from __future__ import annotations

import ast
import math
import operator

from ..values import UNKNOWN

MAX_LEN = 600
MAX_DEPTH = 24
MAX_POW = 64


class ExprError(ValueError):
    """A rule expression outside the grammar; the message says what and where."""




def _known(x):
    return x is not UNKNOWN and x is not None


# Evaluated by _ev itself, not through FUNCS: they look at unknown arguments instead of
# propagating them. known_or(x, d) is `x if known(x) else d`, the tail of many conditions.
SPECIAL = ("known", "known_or")
FUNCS = {
    "min": min, "max": max, "abs": abs, "round": round, "int": int, "float": float, "str": str,
    "lower": lambda x: str(x).lower(),
    "ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt, "log2": math.log2,
    # next power of two at or above x: for capture sizes and batch caps
    "pow2": lambda x: 1 << max(0, math.ceil(math.log2(max(1, x)))),
    "clamp": lambda x, lo, hi: max(lo, min(hi, x)),
}
BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
          ast.Pow: operator.pow}
CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
          ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
          ast.NotIn: lambda a, b: a not in b}
ALLOWED = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Load,
           ast.Constant, ast.Call, ast.IfExp, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
           ast.Tuple, ast.List) + tuple(BINOPS) + tuple(CMPOPS)


def compile_expr(text: str, where: str = "") -> ast.Expression:
    """Parse and check once, at load time; raises ExprError naming `where`."""
    if not isinstance(text, str):
        raise ExprError(f"{where}: expression must be a string")
    if len(text) > MAX_LEN:
        raise ExprError(f"{where}: expression longer than {MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"{where}: syntax error in expression: {e.msg}") from None
    _check(tree, where, 0)
    return tree


def _check(node, where, depth):
    if depth > MAX_DEPTH:
        raise ExprError(f"{where}: expression nested deeper than {MAX_DEPTH}")
    if not isinstance(node, ALLOWED):
        raise ExprError(f"{where}: `{type(node).__name__}` is not allowed in rule expressions")
    if isinstance(node, ast.Name) and (node.id.startswith("_") or "__" in node.id):
        raise ExprError(f"{where}: name `{node.id}` is not allowed")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or (node.func.id not in FUNCS and node.func.id not in SPECIAL):
            fn = getattr(node.func, "id", type(node.func).__name__)
            raise ExprError(f"{where}: function `{fn}` is not allowed (allowed: {', '.join(SPECIAL)}, {', '.join(sorted(FUNCS))})")
        if node.keywords:
            raise ExprError(f"{where}: keyword arguments are not allowed")
        if node.func.id == "known_or" and len(node.args) != 2:
            raise ExprError(f"{where}: known_or takes two arguments: a value and what to use when it is unknown")
        for a in node.args:
            _check(a, where, depth + 1)
        return
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
        raise ExprError(f"{where}: constant of type {type(node.value).__name__} is not allowed")
    for child in ast.iter_child_nodes(node):
        _check(child, where, depth + 1)


def evaluate(tree: ast.Expression, names: dict):
    return _ev(tree.body, names)


def _ev(n, names):
    t = type(n)
    if t is ast.Constant:
        return n.value
    if t is ast.Name:
        v = names.get(n.id)
        return UNKNOWN if v is None else v
    if t is ast.BoolOp:
        vals = [_ev(x, names) for x in n.values]
        if isinstance(n.op, ast.And):
            if any(_known(x) and not x for x in vals):
                return False
            return UNKNOWN if any(not _known(x) for x in vals) else vals[-1]
        for x in vals:
            if _known(x) and x:
                return x
        return UNKNOWN if any(not _known(x) for x in vals) else vals[-1]
    if t is ast.UnaryOp:
        x = _ev(n.operand, names)
        if not _known(x):
            return UNKNOWN
        if isinstance(n.op, ast.Not):
            return not x
        return -x if isinstance(n.op, ast.USub) else +x
    if t is ast.BinOp:
        a, b = _ev(n.left, names), _ev(n.right, names)
        if not (_known(a) and _known(b)):
            return UNKNOWN
        if isinstance(n.op, ast.Pow) and (abs(b) > MAX_POW or abs(a) > 1e6):
            raise ExprError(f"exponent too large: {a} ** {b}")
        try:
            return BINOPS[type(n.op)](a, b)
        except ZeroDivisionError:
            return UNKNOWN
    if t is ast.Compare:
        left = _ev(n.left, names)
        result = True
        for op, right_node in zip(n.ops, n.comparators):
            right = _ev(right_node, names)
            if not (_known(left) and _known(right)):
                result = UNKNOWN if result is not False else False
            elif result is not False and not CMPOPS[type(op)](left, right):
                result = False
            left = right
        return result
    if t is ast.IfExp:
        c = _ev(n.test, names)
        if not _known(c):
            return UNKNOWN
        return _ev(n.body, names) if c else _ev(n.orelse, names)
    if t is ast.Call:
        if n.func.id == "known":
            return all(_known(_ev(a, names)) for a in n.args)
        if n.func.id == "known_or":         # the fallback is evaluated only when needed
            x = _ev(n.args[0], names)
            return x if _known(x) else _ev(n.args[1], names)
        args = [_ev(a, names) for a in n.args]
        if not all(_known(a) for a in args):
            return UNKNOWN
        try:
            return FUNCS[n.func.id](*args)
        except (ValueError, TypeError, OverflowError):
            return UNKNOWN
    if t in (ast.Tuple, ast.List):
        return tuple(_ev(x, names) for x in n.elts)
    raise ExprError(f"`{t.__name__}` is not allowed")  # unreachable after _check


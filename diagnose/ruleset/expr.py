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
# Every value an expression makes is bounded, and an operation that would pass a bound is refused
# (ExprError "value too large: …") before it allocates: rule files come from users, and
# `str(9**64) * 9**8 * 2` asked for 7.8 GB. Floats are bounded by themselves (an overflow is
# refused too). Values read from signals are not measured until an operation uses them.
MAX_STR = 10_000          # characters of a string
MAX_ITEMS = 1_000         # items of a tuple or list, nested ones included; also at most MAX_STR
                          # characters when written out (str() of it, a title)
MAX_INT_BITS = 4_096      # |x| < 2**4096, about 1233 decimal digits (for products: the operands'
                          # bits added, an upper bound of the result's)
MAX_ROUND = 64            # round(x, n): |n| at most this


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
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
          ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
          ast.NotIn: lambda a, b: a not in b}
ALLOWED = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Load,
           ast.Constant, ast.Call, ast.IfExp, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
           ast.Tuple, ast.List) + tuple(BINOPS) + tuple(CMPOPS)


class Checked(ast.Expression):
    """An expression compile_expr parsed and checked, with `text` and the `names` it reads (for the
    loader's name check: no second walk). Pickled as those two alone (the loaded-rules cache,
    rules.LoadedRules, keyed by this module's source among others): a run evaluates about a fifth
    of the built-in rules' expressions, and unpickling every tree took ~7 ms of each run. A tree
    read back is parsed again, unchecked, at its first use."""

    def __init__(self, text: str, names: tuple, body=None) -> None:
        super().__init__()
        if body is not None:
            self.body = body
        self.text, self.names = text, names

    def __getattr__(self, name: str):
        if name != "body":
            raise AttributeError(name)
        self.body = ast.parse(self.text, mode="eval").body
        return self.body

    def __reduce__(self):
        return (Checked, (self.text, self.names))


def compile_expr(text: str, where: str = "") -> Checked:
    """Parse and check once, at load time; raises ExprError naming `where`."""
    if not isinstance(text, str):
        raise ExprError(f"{where}: expression must be a string")
    if len(text) > MAX_LEN:
        raise ExprError(f"{where}: expression longer than {MAX_LEN} characters")
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ExprError(f"{where}: syntax error in expression: {e.msg}") from None
    names: list[str] = []
    _check(tree, where, 0, names)
    return Checked(text, tuple(names), tree.body)


def names_of(tree) -> tuple:
    """The variable names an expression compiled here reads (not the functions it calls)."""
    return tree.names


def _check(node, where, depth, names):
    if depth > MAX_DEPTH:
        raise ExprError(f"{where}: expression nested deeper than {MAX_DEPTH}")
    if not isinstance(node, ALLOWED):
        raise ExprError(f"{where}: `{type(node).__name__}` is not allowed in rule expressions")
    if isinstance(node, ast.Name):
        if node.id.startswith("_") or "__" in node.id:
            raise ExprError(f"{where}: name `{node.id}` is not allowed")
        names.append(node.id)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or (node.func.id not in FUNCS and node.func.id not in SPECIAL):
            fn = getattr(node.func, "id", type(node.func).__name__)
            raise ExprError(f"{where}: function `{fn}` is not allowed (allowed: {', '.join(SPECIAL)}, {', '.join(sorted(FUNCS))})")
        if node.keywords:
            raise ExprError(f"{where}: keyword arguments are not allowed")
        if node.func.id == "known_or" and len(node.args) != 2:
            raise ExprError(f"{where}: known_or takes two arguments: a value and what to use when it is unknown")
        for a in node.args:
            _check(a, where, depth + 1, names)
        return
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
        raise ExprError(f"{where}: constant of type {type(node.value).__name__} is not allowed")
    # ast.iter_child_nodes, inline: the same children in the same order, without two generators
    # per node (the 379 expressions of the built-in rules are checked on every run)
    for field in node._fields:
        child = getattr(node, field, None)
        if isinstance(child, ast.AST):
            _check(child, where, depth + 1, names)
        elif isinstance(child, list):
            for item in child:
                if isinstance(item, ast.AST):
                    _check(item, where, depth + 1, names)


def evaluate(tree: ast.Expression, names: dict):
    return _ev(tree.body, names)


def _short(x) -> str:
    """A value for an error message: never the 1,000-digit number itself."""
    r = repr(x)
    return r if len(r) <= 40 else r[:30] + f"… ({len(r)} characters)"


def _text_len(x) -> int:
    """About how many characters str() writes for x (a string's repr inside a tuple: escapes
    aside); computed from sizes, without writing the text."""
    if isinstance(x, str):
        return len(x) + 2
    if isinstance(x, bool) or x is None:
        return 5
    if isinstance(x, int):
        return x.bit_length() * 30103 // 100000 + 2
    if isinstance(x, (tuple, list)):
        return 2 + sum(_text_len(i) + 2 for i in x)
    return len(repr(x))      # a float, UNKNOWN: short


def _items(x) -> int:
    """A sequence's items, nested ones counted too: ((1,) * 1000,) * 1000 is 1,001,000 items,
    however little memory the shared inner tuple takes (comparing two of them is 10**6 steps)."""
    return len(x) + sum(_items(i) for i in x if isinstance(i, (tuple, list)))


def _refuse(what: str, n: int, limit: int):
    raise ExprError(f"value too large: {what.format(n)} (the limit is {limit})")


STRING, SEQUENCE, SEQ_TEXT, INTEGER = ("a string of {} characters", "a sequence of {} items",
                                       "a sequence of about {} characters when written out",
                                       "an integer of {} bits")


def _bounded(x):
    """x, if within its bound; else ExprError. Cheap: a bounded value is small to measure."""
    if isinstance(x, str):
        if len(x) > MAX_STR:
            _refuse(STRING, len(x), MAX_STR)
    elif isinstance(x, (tuple, list)):
        _bounded_seq(_items(x), _text_len(x))
    elif isinstance(x, int) and not isinstance(x, bool):
        if x.bit_length() > MAX_INT_BITS:
            _refuse(INTEGER, x.bit_length(), MAX_INT_BITS)
    return x


def _bounded_seq(items: int, chars: int) -> None:
    if items > MAX_ITEMS:
        _refuse(SEQUENCE, items, MAX_ITEMS)
    if chars > MAX_STR:
        _refuse(SEQ_TEXT, chars, MAX_STR)


def _check_binop(op, a, b) -> None:
    """Refuse an operation whose result would be too large, before it is computed: from the
    operands' sizes (upper bounds for integers), never by making the result and measuring it."""
    if isinstance(op, ast.Mult):        # bool is an int: True * "x" is checked the same
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, (str, tuple, list)) and isinstance(n, int):
                n = max(0, n)
                if isinstance(seq, str):
                    if len(seq) * n > MAX_STR:
                        _refuse(STRING, len(seq) * n, MAX_STR)
                else:
                    _bounded_seq(_items(seq) * n, 2 + (_text_len(seq) - 2) * n)
                return
        if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
            _refuse(INTEGER, a.bit_length() + b.bit_length(), MAX_INT_BITS)
    elif isinstance(op, ast.Add):
        if isinstance(a, str) and isinstance(b, str) and len(a) + len(b) > MAX_STR:
            _refuse(STRING, len(a) + len(b), MAX_STR)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            _bounded_seq(_items(a) + _items(b), _text_len(a) + _text_len(b))
    elif isinstance(op, ast.Mod) and isinstance(a, str):
        # printf formatting: "%0999999999d" % 1 is a 1 GB string, and its width can come from a value
        raise ExprError("`%` formatting of strings is not allowed in rule expressions (use + and str())")
    elif isinstance(op, ast.Pow):
        if abs(b) > MAX_POW or abs(a) > 1e6:
            raise ExprError(f"exponent too large: {_short(a)} ** {_short(b)}")
        if isinstance(a, int) and isinstance(b, int) and b > 0 and a.bit_length() * b > MAX_INT_BITS:
            _refuse(INTEGER, a.bit_length() * b, MAX_INT_BITS)


def _check_call(fn: str, args: list) -> None:
    """Refuse a call whose result would be too large, before it is made."""
    if fn in ("str", "lower") and len(args) == 1 and isinstance(args[0], (tuple, list)):
        # str() of a (bounded) tuple of long strings: the text is made whole, then measured
        if _text_len(args[0]) > MAX_STR:
            _refuse(STRING, _text_len(args[0]), MAX_STR)
    if fn == "round" and len(args) > 1 and isinstance(args[1], int) and abs(args[1]) > MAX_ROUND:
        # round(1, -10**9) computes 10**(10**9)
        raise ExprError(f"value too large: round to {_short(args[1])} digits (the limit is {MAX_ROUND})")


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
        _check_binop(n.op, a, b)
        try:
            r = BINOPS[type(n.op)](a, b)
        except ZeroDivisionError:
            return UNKNOWN
        except OverflowError:           # 2**4000 / 3, 1e6 ** 64: past what a float holds
            raise ExprError(f"value too large: {_short(a)} {SYMBOLS[type(n.op)]} {_short(b)} "
                            "does not fit a float") from None
        return _bounded(r)
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
        _check_call(n.func.id, args)
        try:
            r = FUNCS[n.func.id](*args)
        except (ValueError, TypeError, OverflowError):
            return UNKNOWN
        return _bounded(r)          # outside the try: ExprError is a ValueError
    if t in (ast.Tuple, ast.List):
        return _bounded(tuple(_ev(x, names) for x in n.elts))
    raise ExprError(f"`{t.__name__}` is not allowed")  # unreachable after _check


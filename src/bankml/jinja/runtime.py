"""Statements, expressions and their evaluation, as llama.cpp b11192's common/jinja/runtime.cpp does them.

Semantics worth knowing (all the reference's, all different from Jinja2):
- scopes are copies: a for loop, a macro call and a call block each copy every variable of the scope they start
  from (values are shared, so `ns.x = ...` on a namespace is seen outside); macros see the *caller's* variables;
- output: strings, numbers and booleans print (True/False), lists print their items one after the other,
  none / undefined / objects / functions print nothing;
- `a + b` on two numbers is computed in double precision; `+` and `~` join strings (a none or undefined side
  counts as ""); `<`, `>`... only compare numbers; `x in undefined` is false;
- a `continue` or `break` loses the output of the statement it was thrown from; when no iteration ran to its
  end the for-else block runs;
- an error is reported by the innermost statement with its line, column and an excerpt of the source.
"""

from __future__ import annotations

import sys
import time as _time

from . import values as V
from .errors import (BreakSignal, ContinueSignal, TemplateCrash, TemplateNotImplemented, TemplateRuntimeError,
                     line_col, peak_source)
from .values import (Args, JStr, VArray, VBool, VFloat, VFunc, VInt, VKwarg, VNone, VObject, VStr, VTuple,
                     VUndefined, fail)


# Each template nesting level costs a few Python frames: allow templates a few hundred levels (recursive macros)
# before refusing them, as llama.cpp's C++ stack would. Raised once, never lowered.
if sys.getrecursionlimit() < 4000:
    sys.setrecursionlimit(4000)


class Context:
    """A scope: every variable by name, plus what the reference's context carries along."""

    __slots__ = ("env", "src", "current_time", "get_stats", "localtime")

    def __init__(self, src: bytes = b"", parent: "Context | None" = None):
        self.env = {b"true": VBool(True), b"True": VBool(True), b"false": VBool(False), b"False": VBool(False),
                    b"none": VNone(), b"None": VNone()}
        if parent is None:
            self.src = src
            self.current_time = int(_time.time())
            self.get_stats = False
            self.localtime = _time.localtime
        else:
            self.env.update(parent.env)
            self.src = parent.src
            self.current_time = parent.current_time
            self.get_stats = parent.get_stats
            self.localtime = parent.localtime

    def child(self) -> "Context":
        return Context(parent=self)

    def get(self, name: bytes) -> V.Value:
        v = self.env.get(name)
        return v if v is not None else VUndefined(name)

    def set(self, name: bytes, val: V.Value) -> None:
        self.env[name] = val


def _frame(node: "Node", ctx: Context, msg: bytes) -> TemplateRuntimeError:
    src = ctx.src
    if not src:
        text = b"\nError executing " + node.TYPE + b" at position %d: " % node.pos + msg
    else:
        text = (b"\n------------\nWhile executing " + node.TYPE + b" at " + line_col(src, node.pos)
                + b" in source:\n" + peak_source(src, node.pos) + b"\nError: " + msg)
    return TemplateRuntimeError(text, wrapped=True)


class Node:
    __slots__ = ("pos",)
    TYPE = b"Statement"

    def execute(self, ctx: Context) -> V.Value:
        try:
            return self.impl(ctx)
        except TemplateRuntimeError as e:
            if e.wrapped:
                raise
            raise _frame(self, ctx, e.message) from None

    def impl(self, ctx: Context) -> V.Value:
        raise fail(b"cannot exec " + self.TYPE)


def gather(val: V.Value, parts: list) -> None:
    """gather_string_parts_recursive: what a value prints as."""
    if isinstance(val, VStr):
        parts.extend(val.s.parts)
    elif isinstance(val, (VInt, VFloat, VBool)):
        parts.append(val.as_string().str())
    elif isinstance(val, VArray):
        for item in val.items:
            gather(item, parts)


def gather_all(vals: list) -> VStr:
    """A block's output. Values are gathered only once the whole block has run, as the reference does: a list
    printed by `{{ l }}` shows what it holds at the end of the block, not when it was printed."""
    parts: list = []
    for v in vals:
        gather(v, parts)
    return VStr(JStr(parts))


def exec_statements(stmts: list, ctx: Context) -> VStr:
    return gather_all([stmt.execute(ctx) for stmt in stmts])


# ---------------------------------------------------------------------------------------------------------------
# literals and names

class Comment(Node):
    __slots__ = ("val",)
    TYPE = b"Comment"

    def __init__(self, val: bytes):
        self.val = val

    def impl(self, ctx):
        return VUndefined()


class Noop(Node):
    __slots__ = ()
    TYPE = b"Noop"

    def impl(self, ctx):
        return VUndefined()


class StringLiteral(Node):
    __slots__ = ("val",)
    TYPE = b"StringLiteral"

    def __init__(self, val: bytes):
        self.val = val

    def impl(self, ctx):
        return VStr(self.val)


class IntegerLiteral(Node):
    __slots__ = ("val",)
    TYPE = b"IntegerLiteral"

    def __init__(self, val: int):
        self.val = val

    def impl(self, ctx):
        return VInt(self.val)


class FloatLiteral(Node):
    __slots__ = ("val",)
    TYPE = b"FloatLiteral"

    def __init__(self, val: float):
        self.val = val

    def impl(self, ctx):
        return VFloat(self.val)


class Identifier(Node):
    __slots__ = ("val",)
    TYPE = b"Identifier"

    def __init__(self, val: bytes):
        self.val = val

    def impl(self, ctx):
        v = ctx.env.get(self.val)
        if v is not None and not v.is_undefined():
            if ctx.get_stats:
                v.used = True
            return v
        fn = V.GLOBALS.get(self.val)
        if fn is not None:
            return VFunc(self.val, fn)
        return VUndefined(self.val)


class ArrayLiteral(Node):
    __slots__ = ("val",)
    TYPE = b"ArrayLiteral"

    def __init__(self, val: list):
        self.val = val

    def impl(self, ctx):
        return VArray([e.execute(ctx) for e in self.val])


class TupleLiteral(Node):
    __slots__ = ("val",)
    TYPE = b"TupleLiteral"

    def __init__(self, val: list):
        self.val = val

    def impl(self, ctx):
        return VTuple([e.execute(ctx) for e in self.val])


class ObjectLiteral(Node):
    __slots__ = ("val",)
    TYPE = b"ObjectLiteral"

    def __init__(self, val: list):
        self.val = val

    def impl(self, ctx):
        obj = VObject()
        for k, v in self.val:
            key = k.execute(ctx)
            val = v.execute(ctx)
            obj.insert(key, val)
        return obj


class Blank(Node):
    __slots__ = ()
    TYPE = b"BlankExpression"

    def impl(self, ctx):
        return VUndefined()


class Slice(Node):
    __slots__ = ("start", "stop", "step")
    TYPE = b"SliceExpression"

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def impl(self, ctx):
        raise fail(b"must be handled by MemberExpression")


class KeywordArgument(Node):
    __slots__ = ("key", "val")
    TYPE = b"KeywordArgumentExpression"

    def __init__(self, key, val):
        self.key, self.val = key, val

    def impl(self, ctx):
        if not isinstance(self.key, Identifier):
            raise fail(b"Keyword argument key must be identifiers")
        return VKwarg(self.key.val, self.val.execute(ctx))


class Spread(Node):
    __slots__ = ("argument",)
    TYPE = b"SpreadExpression"

    def __init__(self, argument):
        self.argument = argument


# ---------------------------------------------------------------------------------------------------------------
# operators

def _numeric(v) -> bool:
    return isinstance(v, (VInt, VFloat))


def test_in(ctx: Context, needle: V.Value, haystack: V.Value) -> bool:
    a = Args(ctx, [needle, haystack])
    return V.GLOBALS[b"test_is_in"](a).as_bool()


class Binary(Node):
    __slots__ = ("op", "left", "right")
    TYPE = b"BinaryExpression"

    def __init__(self, op: bytes, left, right):
        self.op, self.left, self.right = op, left, right

    def impl(self, ctx):
        op = self.op
        lv = self.left.execute(ctx)
        if op == b"and":
            return self.right.execute(ctx) if lv.as_bool() else lv
        if op == b"or":
            return lv if lv.as_bool() else self.right.execute(ctx)
        rv = self.right.execute(ctx)
        if op == b"==":
            return VBool(lv.equivalent(rv))
        if op == b"!=":
            return VBool(not lv.equivalent(rv))

        def concat_null():
            lnull = lv.is_none() or lv.is_undefined()
            rnull = rv.is_none() or rv.is_undefined()
            if (lnull and isinstance(rv, VStr)) or (rnull and isinstance(lv, VStr)):
                ls = JStr() if lnull else lv.as_string()
                rs = JStr() if rnull else rv.as_string()
                return VStr(ls.append(rs))
            return None

        if lv.is_undefined() or rv.is_undefined():
            if rv.is_undefined() and op in (b"in", b"not in"):
                return VBool(op == b"not in")
            if op in (b"+", b"~"):
                r = concat_null()
                if r is not None:
                    return r
            raise fail(b"Cannot perform operation " + op + b" on undefined values")
        if lv.is_none() or rv.is_none():
            if not rv.is_none() and op in (b"in", b"not in"):
                member = test_in(ctx, lv, rv)
                return VBool(member if op == b"in" else not member)
            if op in (b"+", b"~"):
                r = concat_null()
                if r is not None:
                    return r
            raise fail(b"Cannot perform operation on null values")

        if _numeric(lv) and _numeric(rv):
            a, b = lv.as_float(), rv.as_float()
            is_float = isinstance(lv, VFloat) or isinstance(rv, VFloat)
            if op in (b"+", b"-", b"*"):
                res = a + b if op == b"+" else (a - b if op == b"-" else a * b)
                return VFloat(res) if is_float else VInt(V.to_i64(res))
            if op == b"/":
                return VFloat(_div(a, b))
            if op == b"%":
                rem = _fmod(a, b)
                return VFloat(rem) if is_float else VInt(V.to_i64(rem))
            if op == b"<":
                return VBool(a < b)
            if op == b">":
                return VBool(a > b)
            if op == b">=":
                return VBool(a >= b)
            if op == b"<=":
                return VBool(a <= b)

        if isinstance(lv, VArray) and isinstance(rv, VArray):
            if op == b"+":
                return VArray(lv.items + rv.items)
        elif isinstance(rv, VArray):
            member = test_in(ctx, lv, rv)
            if op == b"in":
                return VBool(member)
            if op == b"not in":
                return VBool(not member)

        if (isinstance(lv, VStr) or isinstance(rv, VStr)) and op in (b"~", b"+"):
            return VStr(lv.as_string().append(rv.as_string()))

        if op == b"*" and ((isinstance(lv, VStr) and isinstance(rv, VInt)) or
                           (isinstance(lv, VInt) and isinstance(rv, VStr))):
            s = lv.as_string() if isinstance(lv, VStr) else rv.as_string()
            n = rv.as_int() if isinstance(rv, VInt) else lv.as_int()
            if n <= 0:
                return VStr()
            return VStr(JStr(s.parts * n))

        if isinstance(lv, VStr) and isinstance(rv, VStr):
            member = test_in(ctx, lv, rv)
            if op == b"in":
                return VBool(member)
            if op == b"not in":
                return VBool(not member)

        if isinstance(rv, VObject):
            member = test_in(ctx, lv, rv)
            if op == b"in":
                return VBool(member)
            if op == b"not in":
                return VBool(not member)

        raise fail(b'Unknown operator "' + op + b'" between ' + lv.type() + b" and " + rv.type())


def _div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return float("nan")
        neg = (a < 0) != (str(b).startswith("-"))
        return float("-inf") if neg else float("inf")


def _fmod(a: float, b: float) -> float:
    import math
    if b == 0 or a != a or b != b or math.isinf(a):
        return float("nan")
    return math.fmod(a, b)


class Unary(Node):
    __slots__ = ("op", "argument")
    TYPE = b"UnaryExpression"

    def __init__(self, op: bytes, argument):
        self.op, self.argument = op, argument

    def impl(self, ctx):
        v = self.argument.execute(ctx)
        if self.op == b"not":
            return VBool(not v.as_bool())
        if self.op == b"-":
            if isinstance(v, VInt):
                return VInt(V.wrap_i64(-v.v))
            if isinstance(v, VFloat):
                return VFloat(-v.f)
            raise fail(b"Unary - operator requires numeric operand")
        if self.op == b"+":
            if _numeric(v):
                return v
            raise fail(b"Unary + operator requires numeric operand")
        raise fail(b"Unknown unary operator '" + self.op + b"'")


class Ternary(Node):
    __slots__ = ("condition", "true_expr", "false_expr")
    TYPE = b"Ternary"

    def __init__(self, condition, true_expr, false_expr):
        self.condition, self.true_expr, self.false_expr = condition, true_expr, false_expr

    def impl(self, ctx):
        if self.condition.execute(ctx).as_bool():
            return self.true_expr.execute(ctx)
        return self.false_expr.execute(ctx)


class Select(Node):
    """`x if cond` without else: undefined when cond is false (and the filter of a for loop)."""

    __slots__ = ("lhs", "test")
    TYPE = b"SelectExpression"

    def __init__(self, lhs, test):
        self.lhs, self.test = lhs, test

    def impl(self, ctx):
        if not self.test.impl(ctx).as_bool():
            return VUndefined()
        return self.lhs.impl(ctx)


# ---------------------------------------------------------------------------------------------------------------
# builtins: filters, tests, member access, calls

_FILTER_ALIASES = {b"count": b"length", b"d": b"default", b"e": b"escape", b"trim": b"strip"}
_STRING_COERCED = frozenset((b"capitalize", b"lower", b"replace", b"strip", b"title", b"upper", b"wordcount"))


def try_builtin(ctx: Context, name: bytes, value: V.Value, undef_on_missing: bool = False) -> V.Value:
    if ctx.get_stats:
        value.used = True
        value.add_op(name.decode("latin-1"))
    fn = value.builtins().get(name)
    if fn is not None:
        return VFunc(name, fn, value)
    if undef_on_missing:
        return VUndefined(name)
    raise fail(b"Unknown (built-in) filter '" + name + b"' for type " + value.type())


def apply_filter(ctx: Context, flt, value: V.Value) -> V.Value:
    if isinstance(flt, Identifier):
        name = _FILTER_ALIASES.get(flt.val, flt.val)
        if not value.is_undefined() and not isinstance(value, VStr) and name in _STRING_COERCED:
            value = VStr(value.as_string())
        return try_builtin(ctx, name, value).invoke(Args(ctx))
    if isinstance(flt, Call):
        if not isinstance(flt.callee, Identifier):
            raise fail(b"Filter callee must be an identifier")
        name = _FILTER_ALIASES.get(flt.callee.val, flt.callee.val)
        args = Args(ctx, [a.execute(ctx) for a in flt.args])
        return try_builtin(ctx, name, value).invoke(args)
    raise fail(b"Invalid filter expression")


class Filter(Node):
    __slots__ = ("operand", "filter")
    TYPE = b"FilterExpression"

    def __init__(self, operand, flt):
        self.operand, self.filter = operand, flt

    def impl(self, ctx):
        return apply_filter(ctx, self.filter, self.operand.execute(ctx))


class FilterBlock(Node):
    __slots__ = ("filter", "body")
    TYPE = b"FilterStatement"

    def __init__(self, flt, body):
        self.filter, self.body = flt, body

    def impl(self, ctx):
        body = exec_statements(self.body, ctx)
        return apply_filter(ctx, self.filter, VStr(body.s))


class Test(Node):
    __slots__ = ("operand", "negate", "test")
    TYPE = b"TestExpression"

    def __init__(self, operand, negate: bool, test):
        self.operand, self.negate, self.test = operand, negate, test

    def impl(self, ctx):
        value = self.operand.execute(ctx)
        args = Args(ctx, [value])
        if isinstance(self.test, Identifier):
            test_id = self.test.val
        elif isinstance(self.test, Call):
            if not isinstance(self.test.callee, Identifier):
                raise fail(b"Test callee must be an identifier")
            test_id = self.test.callee.val
            for a in self.test.args:
                args.args.append(a.execute(ctx))
        else:
            raise fail(b"Invalid test expression")
        name = b"test_is_" + test_id
        fn = V.GLOBALS.get(name)
        if fn is None:
            raise fail(b"Unknown test '" + test_id + b"'")
        if ctx.get_stats:
            value.used = True
            value.add_op(name.decode("latin-1"))
        res = fn(args)
        return VBool(not res.as_bool()) if self.negate else res


class Member(Node):
    __slots__ = ("object", "property", "computed")
    TYPE = b"MemberExpression"

    def __init__(self, obj, prop, computed: bool):
        self.object, self.property, self.computed = obj, prop, computed

    def impl(self, ctx):
        obj = self.object.execute(ctx)
        if self.computed:
            if isinstance(obj, VArray):
                size = len(obj.items)
            elif isinstance(obj, VStr):
                size = obj.s.length()
            else:
                size = 0
            if isinstance(self.property, Slice):
                s = self.property
                step = s.step.execute(ctx) if s.step is not None else VInt(1)
                start = s.start.execute(ctx) if s.start is not None else \
                    (VInt(size - 1) if step.as_int() < 0 else VInt(0))
                stop = s.stop.execute(ctx) if s.stop is not None else \
                    (VInt(-1) if step.as_int() < 0 else VInt(size))
                fn = try_builtin(ctx, b"slice", obj)
                return fn.invoke(Args(ctx, [start, stop, step]))
            prop = self.property.execute(ctx)
        elif isinstance(self.property, IntegerLiteral):
            prop = VInt(self.property.val)
            if prop.v < 0:
                raise fail(b"Static member property cannot be negative")
        else:
            if not isinstance(self.property, Identifier):
                raise fail(b"Static member property must be an identifier")
            prop = VStr(self.property.val)
            val = try_builtin(ctx, self.property.val, obj, True)
            if not isinstance(val, VUndefined):
                return val

        val: V.Value = VUndefined(b"object_property")
        if prop.is_undefined():
            return val
        if not prop.is_hashable():
            raise fail(b"Type: " + prop.type() + b" is not allowed as object key")

        if isinstance(obj, VUndefined):
            return val
        if isinstance(obj, VObject):
            key = prop.as_string().str()
            val = obj.at(prop, val)
            if isinstance(val, VUndefined):
                val = try_builtin(ctx, key, obj, True)
        elif isinstance(obj, (VArray, VStr)):
            if isinstance(prop, VInt):
                index = prop.v
                if isinstance(obj, VArray):
                    n = len(obj.items)
                    if index < 0:
                        index += n
                    if 0 <= index < n:
                        val = obj.items[index]
                else:
                    s = obj.s.str()
                    if 0 <= index < len(s):
                        val = VStr(s[index:index + 1])
            elif isinstance(prop, VStr):
                val = try_builtin(ctx, prop.s.str(), obj, True)
            else:
                raise fail(b"Cannot access property with non-string/non-number: got " + prop.type())
        else:
            if not isinstance(prop, VStr):
                raise fail(b"Cannot access property with non-string: got " + prop.type())
            val = try_builtin(ctx, prop.s.str(), obj, True)

        if ctx.get_stats:
            val.used = True
            obj.used = True
            prop.used = True
            if isinstance(prop, VInt):
                obj.add_op("array_access")
            elif isinstance(prop, VStr):
                obj.add_op("object_access")
        return val


class Call(Node):
    __slots__ = ("callee", "args")
    TYPE = b"CallExpression"

    def __init__(self, callee, args: list):
        self.callee, self.args = callee, args

    def impl(self, ctx):
        args = Args(ctx, [a.execute(ctx) for a in self.args])
        fn = self.callee.execute(ctx)
        if not isinstance(fn, VFunc):
            raise fail(b"Callee is not a function: got " + fn.type())
        return fn.invoke(args)


# ---------------------------------------------------------------------------------------------------------------
# statements

class If(Node):
    __slots__ = ("test", "body", "alternate")
    TYPE = b"If"

    def __init__(self, test, body, alternate):
        self.test, self.body, self.alternate = test, body, alternate

    def impl(self, ctx):
        branch = self.body if self.test.execute(ctx).as_bool() else self.alternate
        return gather_all([stmt.execute(ctx) for stmt in branch])


class For(Node):
    __slots__ = ("loopvar", "iterable", "body", "default_block")
    TYPE = b"For"

    def __init__(self, loopvar, iterable, body, default_block):
        self.loopvar, self.iterable, self.body, self.default_block = loopvar, iterable, body, default_block

    def impl(self, ctx):
        scope = ctx.child()
        select = self.iterable if isinstance(self.iterable, Select) else None
        iter_expr = select.lhs if select else self.iterable
        test_expr = select.test if select else None

        it = iter_expr.execute(scope)
        if ctx.get_stats:
            it.used = True
            it.add_op("array_access")
        if it.is_undefined():
            it = VArray()
        if not isinstance(it, (VArray, VObject)):
            raise fail(b"Expected iterable or object type in for loop: got " + it.type())

        is_object = isinstance(it, VObject)
        if is_object:
            items = [VTuple([k, v]) for k, v in it.d.values()]
            if ctx.get_stats:
                it.used = True
                it.add_op("object_access")
        else:
            items = list(it.items)
            if ctx.get_stats:
                it.used = True
                it.add_op("array_access")

        lv = self.loopvar
        kept = []                                            # (item, binder)
        for item in items:
            current = item
            if isinstance(lv, Identifier):
                if is_object:
                    current = item.items[0]
                binder = _bind_one(lv.val, current)
            elif isinstance(lv, TupleLiteral):
                if not isinstance(current, VArray):
                    raise fail(b"Cannot unpack non-iterable type: " + current.type())
                if len(lv.val) != len(current.items):
                    raise fail(b"Too " + (b"few" if len(lv.val) > len(current.items) else b"many")
                               + b" items to unpack")
                binder = _bind_tuple(lv, current)
            else:
                raise fail(b"Invalid loop variable(s): " + lv.TYPE)
            if select is not None and test_expr is not None:
                loop_scope = scope.child()
                binder(loop_scope)
                if not test_expr.execute(loop_scope).as_bool():
                    continue
            kept.append((current, binder))

        results: list = []
        no_iteration = True
        n = len(kept)
        for i, (current, binder) in enumerate(kept):
            loop = VObject(has_builtins=False)
            loop.d = {k: [key, v] for (k, key), v in zip(_LOOP_KEYS, (
                VInt(i + 1), VInt(i), VInt(n - i), VInt(n - i - 1), VBool(i == 0), VBool(i == n - 1), VInt(n),
                kept[i - 1][0] if i > 0 else VUndefined(b"previtem"),
                kept[i + 1][0] if i < n - 1 else VUndefined(b"nextitem")))}
            scope.set(b"loop", loop)
            binder(scope)
            try:
                for stmt in self.body:
                    results.append(stmt.execute(scope))
            except ContinueSignal:
                continue
            except BreakSignal:
                break
            no_iteration = False

        if no_iteration:
            for stmt in self.default_block:
                results.append(stmt.execute(ctx))
        return gather_all(results)


_LOOP_KEYS = [(("s", name), VStr(name)) for name in (b"index", b"index0", b"revindex", b"revindex0", b"first",
                                                    b"last", b"length", b"previtem", b"nextitem")]


def _bind_one(name: bytes, value):
    def bind(scope: Context) -> None:
        scope.set(name, value)
    return bind


def _bind_tuple(lv: TupleLiteral, current: VArray):
    def bind(scope: Context) -> None:
        for node, v in zip(lv.val, current.items):
            if not isinstance(node, Identifier):
                raise fail(b"Cannot unpack non-identifier type: " + node.TYPE)
            scope.set(node.val, v)
    return bind


class Break(Node):
    __slots__ = ()
    TYPE = b"Break"

    def execute(self, ctx):
        raise BreakSignal()


class Continue(Node):
    __slots__ = ()
    TYPE = b"Continue"

    def execute(self, ctx):
        raise ContinueSignal()


class Set(Node):
    __slots__ = ("assignee", "val", "body")
    TYPE = b"Set"

    def __init__(self, assignee, val, body):
        self.assignee, self.val, self.body = assignee, val, body

    def impl(self, ctx):
        rhs = self.val.execute(ctx) if self.val is not None else exec_statements(self.body, ctx)
        a = self.assignee
        if isinstance(a, Identifier):
            ctx.set(a.val, rhs)
        elif isinstance(a, TupleLiteral):
            if not isinstance(rhs, VArray):
                raise fail(b"Cannot unpack non-iterable type in set: " + rhs.type())
            if len(rhs.items) != len(a.val):
                raise fail(b"Too " + (b"few" if len(a.val) > len(rhs.items) else b"many")
                           + b" items to unpack in set")
            for node, v in zip(a.val, rhs.items):
                if not isinstance(node, Identifier):
                    raise fail(b"Cannot unpack to non-identifier in set: " + node.TYPE)
                ctx.set(node.val, v)
        elif isinstance(a, Member):
            if a.computed:
                raise fail(b"Cannot assign to computed member")
            if not isinstance(a.property, Identifier):
                raise fail(b"Cannot assign to member with non-identifier property")
            obj = a.object.execute(ctx)
            if not isinstance(obj, VObject):
                raise fail(b"Cannot assign to member of non-object")
            obj.set(a.property.val, rhs)
        else:
            raise fail(b"Invalid LHS inside assignment expression: " + a.TYPE)
        return VUndefined()


def bind_parameters(name: bytes, params: list, args: Args, ctx: Context) -> None:
    n_in = args.count()
    for i, p in enumerate(params):
        if i < n_in:
            if isinstance(p, Identifier):
                ctx.set(p.val, args.kwarg_or_pos(p.val, i))
            elif isinstance(p, KeywordArgument):
                if not isinstance(p.key, Identifier):
                    raise fail(b"Keyword argument key must be an identifier in '" + name + b"'")
                ctx.set(p.key.val, args.kwarg_or_pos(p.key.val, i))
            else:
                raise fail(b"Invalid parameter type in '" + name + b"'")
        else:
            if isinstance(p, KeywordArgument):
                if not isinstance(p.key, Identifier):
                    raise fail(b"Keyword argument key must be an identifier in '" + name + b"'")
                ctx.set(p.key.val, p.val.execute(args.ctx))
            else:
                raise fail(b"Not enough arguments provided to '" + name + b"'")


class Macro(Node):
    __slots__ = ("name", "args", "body")
    TYPE = b"Macro"

    def __init__(self, name, args, body):
        self.name, self.args, self.body = name, args, body

    def impl(self, ctx):
        if not isinstance(self.name, Identifier):
            raise fail(b"Macro name must be an identifier")
        name = self.name.val

        def run(args: Args) -> V.Value:
            macro_ctx = args.ctx.child()
            bind_parameters(name, self.args, args, macro_ctx)
            return exec_statements(self.body, macro_ctx)

        ctx.set(name, VFunc(name, run))
        return VUndefined()


class CallBlock(Node):
    __slots__ = ("call", "caller_args", "body")
    TYPE = b"CallStatement"

    def __init__(self, call, caller_args, body):
        self.call, self.caller_args, self.body = call, caller_args, body

    def impl(self, ctx):
        call = self.call
        fn = call.callee.execute(ctx)
        if not isinstance(fn, VFunc):
            raise fail(b"Callee is not a function: got " + fn.type())
        caller_ctx = ctx.child()

        def caller(args: Args) -> V.Value:
            block_ctx = caller_ctx.child()
            bind_parameters(b"caller", self.caller_args, args, block_ctx)
            return exec_statements(self.body, block_ctx)

        call_ctx = ctx.child()
        call_ctx.set(b"caller", VFunc(b"caller", caller))
        args = Args(call_ctx, [a.execute(ctx) for a in call.args])
        return fn.invoke(args)


# ---------------------------------------------------------------------------------------------------------------

def execute_program(program: list, ctx: Context) -> bytes:
    """Run a parsed template; the output as bytes. Raises the engine's exceptions (JinjaError subclasses)."""
    results: list = []
    try:
        for stmt in program:
            results.append(stmt.execute(ctx))
    except BreakSignal:
        # the reference lets these escape the runtime; the caller reports them as a failed render
        raise TemplateRuntimeError(b"Break statement executed", wrapped=True) from None
    except ContinueSignal:
        raise TemplateRuntimeError(b"Continue statement executed", wrapped=True) from None
    except RecursionError:
        raise TemplateCrash(b"template recursion deeper than bankml follows (llama-server would overflow its "
                            b"stack)") from None
    return gather_all(results).s.str()


__all__ = ["Context", "execute_program", "TemplateNotImplemented"]

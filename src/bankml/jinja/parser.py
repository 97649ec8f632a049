"""Parser of llama.cpp b11192's Jinja dialect (common/jinja/parser.cpp), re-derived.

The grammar differs from Jinja2's in ways that change results, so it is reproduced rather than delegated:
`~` has the precedence of `+`, comparisons and `in` are one left-associative level (no chaining), filters bind
tighter than tests, which bind tighter than `*`; commas between call arguments and list items are optional;
only set/if/for/macro/call/filter/break/continue (and the ignored generation/endgeneration) are statements.
Every node keeps the byte position of the token the reference records, for error messages.
"""

from __future__ import annotations

from . import lexer as L
from . import runtime as R
from .errors import TemplateSyntaxError, peak_source


class _Parser:
    def __init__(self, tokens: list[L.Token], source: bytes):
        self.tokens = tokens
        self.source = source
        self.cur = 0

    # -- helpers
    def mk(self, cls, start: int, *args):
        node = cls(*args)
        node.pos = self.tokens[start].pos
        return node

    def peek(self, k: int = 0) -> L.Token:
        if self.cur + k >= len(self.tokens):
            return L.Token(L.EOF, b"", 0)
        return self.tokens[self.cur + k]

    def next(self) -> L.Token:
        if self.cur >= len(self.tokens):
            pos = self.tokens[-1].pos if self.tokens else 0
            raise self.error(b"Parser Error: Unexpected EOF", pos)
        t = self.tokens[self.cur]
        self.cur += 1
        return t

    def error(self, msg: bytes, pos: int) -> TemplateSyntaxError:
        return TemplateSyntaxError(b"parser: " + msg + b"\n" + peak_source(self.source, pos))

    def expect(self, typ: str, what: bytes) -> L.Token:
        t = self.peek()
        if t.type != typ:
            raise self.error(b"Parser Error: " + what + b" (Got " + t.value + b")", t.pos)
        self.cur += 1
        return t

    def expect_ident(self, name: bytes) -> None:
        t = self.peek()
        if t.type != L.IDENT or t.value != name:
            raise self.error(b"Expected identifier: " + name, t.pos)
        self.cur += 1

    def is_(self, typ: str) -> bool:
        return self.peek().type == typ

    def is_ident(self, name: bytes) -> bool:
        t = self.peek()
        return t.type == L.IDENT and t.value == name

    def is_statement(self, names) -> bool:
        return self.peek(0).type == L.OPEN_STMT and self.peek(1).type == L.IDENT and self.peek(1).value in names

    # -- statements
    def parse(self) -> list:
        body = []
        while self.cur < len(self.tokens):
            body.append(self.parse_any())
        return body

    def parse_any(self):
        start = self.cur
        t = self.peek()
        if t.type == L.COMMENT:
            return self.mk(R.Comment, start, self.next().value)
        if t.type == L.TEXT:
            return self.mk(R.StringLiteral, start, self.next().value)
        if t.type == L.OPEN_STMT:
            return self.parse_statement()
        if t.type == L.OPEN_EXPR:
            self.expect(L.OPEN_EXPR, b"Expected {{")
            result = self.parse_expression()
            self.expect(L.CLOSE_EXPR, b"Expected }}")
            return result
        raise TemplateSyntaxError(b"Unexpected token type")

    def body_until(self, names) -> list:
        out = []
        while not self.is_statement(names):
            out.append(self.parse_any())
        return out

    def close_block(self, name: bytes) -> None:
        self.expect(L.OPEN_STMT, b"Expected {%")
        self.expect_ident(name)
        self.expect(L.CLOSE_STMT, b"Expected %}")

    def parse_statement(self):
        self.expect(L.OPEN_STMT, b"Expected {%")
        if self.peek().type != L.IDENT:
            raise TemplateSyntaxError(b"Unknown statement")
        start = self.cur
        name = self.next().value
        if name == b"set":
            return self.parse_set(start)
        if name == b"if":
            result = self.parse_if(start)
            self.close_block(b"endif")
            return result
        if name == b"macro":
            macro_name = self.parse_primary()
            args = self.parse_args()
            self.expect(L.CLOSE_STMT, b"Expected %}")
            body = self.body_until((b"endmacro",))
            result = self.mk(R.Macro, start, macro_name, args, body)
            self.close_block(b"endmacro")
            return result
        if name == b"for":
            result = self.parse_for(start)
            self.close_block(b"endfor")
            return result
        if name == b"break":
            self.expect(L.CLOSE_STMT, b"Expected %}")
            return self.mk(R.Break, start)
        if name == b"continue":
            self.expect(L.CLOSE_STMT, b"Expected %}")
            return self.mk(R.Continue, start)
        if name == b"call":
            caller_args = self.parse_args() if self.is_(L.OPEN_PAREN) else []
            callee = self.parse_primary()
            if not isinstance(callee, R.Identifier):
                raise TemplateSyntaxError(b"Expected identifier")
            call_args = self.parse_args()
            self.expect(L.CLOSE_STMT, b"Expected %}")
            body = self.body_until((b"endcall",))
            self.close_block(b"endcall")
            call = self.mk(R.Call, start, callee, call_args)
            return self.mk(R.CallBlock, start, call, caller_args, body)
        if name == b"filter":
            flt = self.parse_primary()
            if isinstance(flt, R.Identifier) and self.is_(L.OPEN_PAREN):
                flt = self.parse_call(flt)
            self.expect(L.CLOSE_STMT, b"Expected %}")
            body = self.body_until((b"endfilter",))
            self.close_block(b"endfilter")
            return self.mk(R.FilterBlock, start, flt, body)
        if name in (b"generation", b"endgeneration"):
            result = self.mk(R.Noop, start)
            self.cur += 1                                   # the reference skips one token, the %}
            return result
        raise TemplateSyntaxError(b"Unknown statement: " + name)

    def parse_set(self, start: int):
        left = self.parse_sequence()
        value = None
        body = []
        if self.is_(L.EQUALS):
            self.cur += 1
            value = self.parse_sequence()
        else:
            self.expect(L.CLOSE_STMT, b"Expected %}")
            body = self.body_until((b"endset",))
            self.expect(L.OPEN_STMT, b"Expected {%")
            self.expect_ident(b"endset")
        self.expect(L.CLOSE_STMT, b"Expected %}")
        return self.mk(R.Set, start, left, value, body)

    def parse_if(self, start: int):
        test = self.parse_expression()
        self.expect(L.CLOSE_STMT, b"Expected %}")
        body = self.body_until((b"elif", b"else", b"endif"))
        alternate = []
        if self.is_statement((b"elif",)):
            pos0 = self.cur
            self.cur += 2
            alternate.append(self.parse_if(pos0))
        elif self.is_statement((b"else",)):
            self.cur += 2
            self.expect(L.CLOSE_STMT, b"Expected %}")
            alternate = self.body_until((b"endif",))
        return self.mk(R.If, start, test, body, alternate)

    def parse_for(self, start: int):
        loopvar = self.parse_sequence(primary=True)
        if not self.is_ident(b"in"):
            raise TemplateSyntaxError(b"Expected 'in'")
        self.cur += 1
        iterable = self.parse_expression()
        self.expect(L.CLOSE_STMT, b"Expected %}")
        body = self.body_until((b"endfor", b"else"))
        alternate = []
        if self.is_statement((b"else",)):
            self.cur += 2
            self.expect(L.CLOSE_STMT, b"Expected %}")
            alternate = self.body_until((b"endfor",))
        return self.mk(R.For, start, loopvar, iterable, body, alternate)

    # -- expressions
    def parse_sequence(self, primary: bool = False):
        start = self.cur
        parse = self.parse_primary if primary else self.parse_expression
        exprs = [parse()]
        is_tuple = self.is_(L.COMMA)
        while self.is_(L.COMMA):
            self.cur += 1
            exprs.append(parse())
        return self.mk(R.TupleLiteral, start, exprs) if is_tuple else exprs[0]

    def parse_expression(self):
        a = self.parse_or()
        if self.is_ident(b"if"):
            start = self.cur
            self.cur += 1
            test = self.parse_or()
            if self.is_ident(b"else"):
                pos0 = self.cur
                self.cur += 1
                false_expr = self.parse_expression()
                return self.mk(R.Ternary, pos0, test, a, false_expr)
            return self.mk(R.Select, start, a, test)
        return a

    def parse_or(self):
        left = self.parse_and()
        while self.is_ident(b"or"):
            start = self.cur
            op = self.next().value
            left = self.mk(R.Binary, start, op, left, self.parse_and())
        return left

    def parse_and(self):
        left = self.parse_not()
        while self.is_ident(b"and"):
            start = self.cur
            op = self.next().value
            left = self.mk(R.Binary, start, op, left, self.parse_not())
        return left

    def parse_not(self):
        if self.is_ident(b"not"):
            start = self.cur
            op = self.next().value
            return self.mk(R.Unary, start, op, self.parse_not())
        return self.parse_comparison()

    def parse_comparison(self):
        left = self.parse_additive()
        while True:
            start = self.cur
            if self.is_ident(b"not") and self.peek(1).type == L.IDENT and self.peek(1).value == b"in":
                op = b"not in"
                self.cur += 2
            elif self.is_ident(b"in") or self.is_(L.COMPARISON):
                op = self.next().value
            else:
                break
            left = self.mk(R.Binary, start, op, left, self.parse_additive())
        return left

    def parse_additive(self):
        left = self.parse_multiplicative()
        while self.is_(L.ADDITIVE):
            start = self.cur
            op = self.next().value
            left = self.mk(R.Binary, start, op, left, self.parse_multiplicative())
        return left

    def parse_multiplicative(self):
        left = self.parse_test()
        while self.is_(L.MULTIPLICATIVE):
            start = self.cur
            op = self.next().value
            left = self.mk(R.Binary, start, op, left, self.parse_test())
        return left

    def parse_test(self):
        operand = self.parse_filter()
        while self.is_ident(b"is"):
            start = self.cur
            self.cur += 1
            negate = False
            if self.is_ident(b"not"):
                self.cur += 1
                negate = True
            test = self.parse_primary()
            if self.is_(L.OPEN_PAREN):
                test = self.parse_call(test)
            operand = self.mk(R.Test, start, operand, negate, test)
        return operand

    def parse_filter(self):
        operand = self.parse_unary()
        while self.is_(L.PIPE):
            start = self.cur
            self.cur += 1
            flt = self.parse_primary()
            if self.is_(L.OPEN_PAREN):
                flt = self.parse_call(flt)
            operand = self.mk(R.Filter, start, operand, flt)
        return operand

    def parse_unary(self):
        if self.is_(L.UNARY):
            start = self.cur
            op = self.next().value
            return self.mk(R.Unary, start, op, self.parse_unary())
        member = self.parse_member(self.parse_primary())
        return self.parse_call(member) if self.is_(L.OPEN_PAREN) else member

    def parse_call(self, callee):
        start = self.cur
        expr = self.mk(R.Call, start, callee, self.parse_args())
        member = self.parse_member(expr)
        return self.parse_call(member) if self.is_(L.OPEN_PAREN) else member

    def parse_args(self) -> list:
        self.expect(L.OPEN_PAREN, b"Expected (")
        args = []
        while not self.is_(L.CLOSE_PAREN):
            if self.peek().type == L.MULTIPLICATIVE and self.peek().value == b"*":
                start = self.cur
                self.cur += 1
                arg = self.mk(R.Spread, start, self.parse_expression())
            else:
                arg = self.parse_expression()
                if self.is_(L.EQUALS):
                    start = self.cur
                    self.cur += 1
                    arg = self.mk(R.KeywordArgument, start, arg, self.parse_expression())
            args.append(arg)
            if self.is_(L.COMMA):
                self.cur += 1
        self.expect(L.CLOSE_PAREN, b"Expected )")
        return args

    def parse_member(self, obj):
        start = self.cur
        while self.is_(L.DOT) or self.is_(L.OPEN_SQUARE):
            op = self.next()
            computed = op.type == L.OPEN_SQUARE
            if computed:
                prop = self.parse_member_arguments()
                self.expect(L.CLOSE_SQUARE, b"Expected ]")
            else:
                prop = self.parse_primary()
            obj = self.mk(R.Member, start, obj, prop, computed)
        return obj

    def parse_member_arguments(self):
        slices = []
        is_slice = False
        start = self.cur
        while not self.is_(L.CLOSE_SQUARE):
            if self.is_(L.COLON):
                slices.append(None)
                self.cur += 1
                is_slice = True
            else:
                slices.append(self.parse_expression())
                if self.is_(L.COLON):
                    self.cur += 1
                    is_slice = True
        if is_slice:
            parts = (slices + [None, None, None])[:3]
            return self.mk(R.Slice, start, *parts)
        if not slices:
            return self.mk(R.Blank, start)
        return slices[0]

    def parse_primary(self):
        start = self.cur
        t = self.next()
        if t.type == L.NUMERIC:
            if b"." in t.value:
                return self.mk(R.FloatLiteral, start, _stod(t.value))
            return self.mk(R.IntegerLiteral, start, _stoll(t.value))
        if t.type == L.STRING:
            val = t.value
            while self.is_(L.STRING):
                val += self.next().value
            return self.mk(R.StringLiteral, start, val)
        if t.type == L.IDENT:
            return self.mk(R.Identifier, start, t.value)
        if t.type == L.OPEN_PAREN:
            expr = self.parse_sequence()
            self.expect(L.CLOSE_PAREN, b"Expected )")
            return expr
        if t.type == L.OPEN_SQUARE:
            vals = []
            while not self.is_(L.CLOSE_SQUARE):
                vals.append(self.parse_expression())
                if self.is_(L.COMMA):
                    self.cur += 1
            self.cur += 1
            return self.mk(R.ArrayLiteral, start, vals)
        if t.type == L.OPEN_CURLY:
            pairs = []
            while not self.is_(L.CLOSE_CURLY):
                key = self.parse_expression()
                self.expect(L.COLON, b"Expected :")
                pairs.append((key, self.parse_expression()))
                if self.is_(L.COMMA):
                    self.cur += 1
            self.cur += 1
            return self.mk(R.ObjectLiteral, start, pairs)
        raise TemplateSyntaxError(b"Unexpected token: " + t.value + b" of type %d" % L.TYPE_NUMBER[t.type])


def _stoll(text: bytes) -> int:
    v = int(text)
    if not -(1 << 63) <= v < (1 << 63):
        raise TemplateSyntaxError(b"stoll")
    return v


def _stod(text: bytes) -> float:
    v = float(text)
    if v == float("inf"):
        raise TemplateSyntaxError(b"stod")
    return v


def parse(source: bytes) -> tuple[list, bytes]:
    """The program (a list of statements) and the normalised source its positions refer to."""
    tokens, src = L.tokenize(source)
    return _Parser(tokens, src).parse(), src

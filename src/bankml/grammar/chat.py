"""JSON answers on /v1/chat/completions: the grammar llama-server b11192 builds for a response format, and the
content it returns.

With `--jinja`, a chat request carrying a JSON schema (`response_format` json_object / json_schema, or the
top-level `json_schema`) does not use json_schema_to_grammar directly: common/chat.cpp's differential
autoparser builds a PEG parser for the template's answer and derives the grammar from it
(common/chat-auto-parser-generator.cpp, common/peg-parser.cpp). For a template without reasoning or tool
markers (SmolLM2's ChatML, and the ChatML fallback llama.cpp uses for a GGUF without a template) the parser is

    <generation prompt> space [reasoning: nothing] space
        ( "```json" space RESPONSE space "```"  |  space RESPONSE space )  end
    RESPONSE = rule "response-format" = content-tag( schema "response-format-schema" over a JSON value )

The grammar is that parser printed as GBNF (the PEG json-* rules included, as the oracle emits every rule
reachable from the root) plus the schema converted under the name "response-format-schema". Its type is the
"tool calls" kind, so the sampler first feeds it the generation prompt's tokens (`prefill`).

The answer's `content` is what the parser's content tag covers: the JSON text without the surrounding
whitespace or the ```json fence. The parse is lenient (an answer cut by the token limit still yields the JSON
so far); when it yields nothing (empty content), llama-server returns the raw generated text instead.

Errors: a schema the document builder refuses gives "Unable to generate parser for this template. Automatic
parser generation failed: JSON schema error at ..."; a converter error the same prefix + "JSON schema
conversion failed:\\n...". Both are 400 on chat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bankml.errors import SchemaError
from bankml.grammar import json_schema as js

CHAT_PARSER_ERROR = "Unable to generate parser for this template. Automatic parser generation failed: "

# -- PEG parsers (the subset the response-format parser uses) -------------------------------------------------


@dataclass(eq=False)
class Peg:
    kind: str                    # eps literal seq choice rep chars string space end not peek rule ref tag
    #                              schema until atomic
    text: str = ""               # literal text; chars pattern; rule / ref / tag / schema name
    children: list = field(default_factory=list)
    lo: int = 0                  # repetition / chars counts (-1: unbounded)
    hi: int = -1
    ranges: tuple = ()           # chars: ((lo, hi), ...)
    negated: bool = False
    node: object = None          # schema: the schema document node
    delims: tuple = ()           # until: the delimiters
    trigger: bool = False        # rule: a trigger rule (a lazy grammar's root is the choice of them)
    uid: int = 0                 # until: the number in its GBNF rules' names


class Arena:
    """The parsers and the named rules of one PEG grammar (common_peg_arena)."""

    def __init__(self):
        self.rules: dict[str, Peg] = {}
        self.root: Peg | None = None
        self.n_until = 0

    # builders (common_peg_parser_builder)
    @staticmethod
    def eps() -> Peg:
        return Peg("eps")

    @staticmethod
    def literal(s: str) -> Peg:
        return Peg("literal", s)

    @staticmethod
    def seq(*parts: Peg) -> Peg:
        flat = []
        for p in parts:
            flat.extend(p.children if p.kind == "seq" else [p])
        return Peg("seq", children=flat)

    @staticmethod
    def choice(*parts: Peg) -> Peg:
        return Peg("choice", children=list(parts))

    @staticmethod
    def rep(p: Peg, lo: int, hi: int) -> Peg:
        return Peg("rep", children=[p], lo=lo, hi=hi)

    @staticmethod
    def chars(pattern: str, ranges, lo: int = 1, hi: int = -1, negated: bool = False) -> Peg:
        return Peg("chars", pattern, lo=lo, hi=hi, ranges=tuple(ranges), negated=negated)

    def rule(self, name: str, build, trigger: bool = False) -> Peg:
        name = js._INVALID_RULE_CHARS.sub("-", name)     # rule_name
        if name not in self.rules:
            self.rules[name] = Peg("rule", name, children=[Peg("eps")], trigger=trigger)  # for recursion
            self.rules[name] = Peg("rule", name, children=[build()], trigger=trigger)
        return Peg("ref", name)

    def until(self, *delims: str) -> Peg:
        """Everything up to the first of `delims` (or the end); printed as the automaton that excludes them."""
        self.n_until += 1
        return Peg("until", delims=tuple(delims), uid=self.n_until)

    @staticmethod
    def atomic(p: Peg) -> Peg:
        """`p`, whose AST nodes are dropped while it is incomplete (NEED_MORE)."""
        return Peg("atomic", children=[p])

    @staticmethod
    def peek(p: Peg) -> Peg:
        return Peg("peek", children=[p])

    @staticmethod
    def tag(name: str, p: Peg) -> Peg:
        return Peg("tag", name, children=[p])

    # JSON value parsers
    def json_number(self) -> Peg:
        def build():
            digit1_9 = self.chars("[1-9]", [(0x31, 0x39)], 1, 1)
            digits = self.chars("[0-9]", [(0x30, 0x39)])
            int_part = self.choice(self.literal("0"), self.seq(digit1_9, self.chars("[0-9]", [(0x30, 0x39)], 0, -1)))
            frac = self.seq(self.literal("."), digits)
            exp = self.seq(self.choice(self.literal("e"), self.literal("E")),
                           self.rep(self.chars("[+-]", [(0x2B, 0x2B), (0x2D, 0x2D)], 1, 1), 0, 1), digits)
            stop = Peg("not", children=[self.chars("[0-9.eE+-]", [(0x30, 0x39), (0x2E, 0x2E), (0x65, 0x65),
                                                                  (0x45, 0x45), (0x2B, 0x2B), (0x2D, 0x2D)], 1, 1)])
            return self.seq(self.rep(self.literal("-"), 0, 1), int_part, self.rep(frac, 0, 1),
                            self.rep(exp, 0, 1), stop)
        return self.rule("json-number", build)

    def json_string(self) -> Peg:
        return self.rule("json-string", lambda: self.seq(self.literal('"'), Peg("string", '"'), self.literal('"')))

    def json_object(self) -> Peg:
        def build():
            ws = Peg("space")
            member = self.seq(self.json_string(), ws, self.literal(":"), ws, self.json())
            members = self.seq(member, self.rep(self.seq(ws, self.literal(","), ws, member), 0, -1))
            return self.seq(self.literal("{"), ws, self.choice(self.literal("}"),
                                                               self.seq(members, ws, self.literal("}"))))
        return self.rule("json-object", build)

    def json_array(self) -> Peg:
        def build():
            ws = Peg("space")
            elements = self.seq(self.json(), self.rep(self.seq(ws, self.literal(","), ws, self.json()), 0, -1))
            return self.seq(self.literal("["), ws, self.choice(self.literal("]"),
                                                               self.seq(elements, ws, self.literal("]"))))
        return self.rule("json-array", build)

    def json(self) -> Peg:
        return self.rule("json-value", lambda: self.choice(
            self.json_object(), self.json_array(), self.json_string(), self.json_number(),
            self.rule("json-bool", lambda: self.choice(self.literal("true"), self.literal("false"))),
            self.rule("json-null", lambda: self.literal("null"))))

    def resolve(self, p: Peg) -> Peg:
        return self.rules[p.text] if p.kind == "ref" else p


def response_format_arena(schema_node: js.Node, generation_prompt: str, reasoning_start: str = "") -> Arena:
    """The autoparser's parser for a response format on a template without reasoning or tool markers."""
    a = Arena()
    schema = Peg("schema", "response-format-schema", children=[a.json()], node=schema_node)
    response = a.rule("response-format", lambda: Peg("tag", "content", children=[schema]))
    ws = Peg("space")
    body = a.seq(a.eps(), ws, a.choice(a.seq(a.literal("```json"), ws, response, ws, a.literal("```")),
                                       a.seq(ws, response, ws)), Peg("end"))
    if not generation_prompt:
        prefix = a.eps()
    elif not reasoning_start:
        prefix = a.literal(generation_prompt)
    else:
        cut = generation_prompt.find(reasoning_start)
        prefix = a.literal(generation_prompt if cut < 0 else generation_prompt[:cut])
    a.root = a.seq(prefix, ws, body)
    return a


# -- PEG -> GBNF (common_peg_arena::build_grammar) --------------------------------------------------------------


def _effective(a: Arena, p: Peg) -> Peg:
    while True:
        if p.kind in ("tag", "atomic"):
            p = p.children[0]
        elif p.kind == "schema" and p.node is None:
            p = p.children[0]
        else:
            return p


def _to_gbnf(a: Arena, p: Peg, builder: js.GrammarBuilder) -> str:
    k = p.kind
    if k in ("eps", "end", "not", "peek"):
        return ""
    if k == "literal":
        return js.format_literal(p.text)
    if k == "seq":
        out = ""
        for c in p.children:
            g = _to_gbnf(a, c, builder)
            if not g:
                continue
            if out:
                out += " "
            eff = _effective(a, c)
            out += "(" + g + ")" if eff.kind in ("choice", "seq") else g
        return out
    if k == "choice":
        parts = []
        for c in p.children:
            g = _to_gbnf(a, c, builder)
            parts.append("(" + g + ")" if _effective(a, c).kind == "choice" else g)
        return " | ".join(parts)
    if k in ("rep", "chars"):
        if k == "rep":
            g = _to_gbnf(a, p.children[0], builder)
            if _effective(a, p.children[0]).kind in ("choice", "seq"):
                g = "(" + g + ")"
        else:
            g = p.text
        lo, hi = p.lo, p.hi
        if lo == 0 and hi == 1:
            return g + "?"
        if lo == 0 and hi == -1:
            return g + "*"
        if lo == 1 and hi == -1:
            return g + "+"
        if hi == -1:
            return g + "{" + str(lo) + ",}"
        if lo == hi:
            return g if lo == 1 else g + "{" + str(lo) + "}"
        return g + "{" + str(lo) + "," + str(hi) + "}"
    if k == "space":
        return "space"
    if k == "string":
        d = p.text
        return '( [^' + d + '\\\\] | "\\\\" ( [' + d + '\\\\/ bfnrt] | "u" [0-9a-fA-F]{4} ) )*'
    if k == "schema":
        if p.node is None:
            return _to_gbnf(a, p.children[0], builder)
        return builder.add_schema(p.text, p.node)
    if k in ("rule", "ref"):
        return p.text
    if k in ("tag", "atomic"):
        return _to_gbnf(a, p.children[0], builder)
    if k == "until":
        return _excluding(builder, f"until-{p.uid}", p.delims) if p.delims else ".*"
    raise ValueError(f"no GBNF for parser {k}")


def _reachable(a: Arena, roots: list | None = None) -> list[str]:
    seen: set[str] = set()
    order: list[str] = []

    def visit(p: Peg) -> None:
        if p.kind == "ref":
            visit(a.rules[p.text])
            return
        if p.kind == "rule":
            if p.text in seen:
                return
            seen.add(p.text)
            order.append(p.text)
        for c in p.children:
            visit(c)

    for r in roots or [a.root]:
        visit(r)
    return order


def _class_char(c: int) -> str:
    """gbnf_escape_char_class"""
    ch = chr(c)
    if ch in "-][\\":
        return "\\" + ch
    if ch in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch]
    if 0x20 <= c <= 0x7E:
        return ch
    if c <= 0xFF:
        return f"\\x{c:02X}"
    if c <= 0xFFFF:
        return f"\\u{c:04X}"
    return f"\\U{c:08X}"


def _class(chars, negate: bool) -> str:
    return ("[^" if negate else "[") + "".join(_class_char(c) for c in chars) + "]"


def _excluding(builder, prefix: str, delims) -> str:
    """gbnf_excluding_grammar: the rules of the Aho-Corasick automaton over `delims` (states numbered in
    trie insertion order, every state accepting, no transition into a complete match), named prefix,
    prefix-01, prefix-02, ...; returns the start state's name."""
    children: list[dict[int, int]] = [{}]
    terminal = [False]
    for d in delims:
        u = 0
        for c in (ord(x) for x in d):
            if c not in children[u]:
                children.append({})
                terminal.append(False)
                children[u][c] = len(children) - 1
            u = children[u][c]
        terminal[u] = True
    fail = [0] * len(children)
    order = [0]
    for u in order:                          # breadth first
        for c, v in sorted(children[u].items()):
            if u:
                f = fail[u]
                while f and c not in children[f]:
                    f = fail[f]
                w = children[f].get(c, 0)
                fail[v] = w if w != v else 0
            order.append(v)
    done = list(terminal)                    # a state whose fail chain holds a complete match
    for u in order:
        done[u] = terminal[u] or (u != 0 and done[fail[u]])
    alphabet = sorted({c for ch in children for c in ch})

    def step(q: int, c: int) -> int:
        while q and c not in children[q]:
            q = fail[q]
        return children[q].get(c, 0)

    def name(q: int) -> str:
        return prefix if q == 0 else f"{prefix}-{q:02d}"

    for q in range(len(children)):
        if done[q]:
            continue
        buckets: dict[int, list[int]] = {}
        specific = []
        for c in alphabet:
            d = step(q, c)
            if done[d]:
                specific.append(c)
            elif d:
                buckets.setdefault(d, []).append(c)
                specific.append(c)
        rhs = "|"
        for d in sorted(buckets):
            rhs += " " + _class(buckets[d], False) + " " + name(d) + " |"
        builder.add_rule(name(q), rhs + " " + _class(specific, True) + " " + name(0))
    if done[0]:
        builder.add_rule(prefix, "|")
    return name(0)


def arena_grammar(a: Arena, lazy: bool = False) -> str:
    """build_grammar(... arena.build_grammar(builder, lazy)): every rule reachable from the root (lazy: from
    the trigger rules), then root (lazy: the trigger rules' names, sorted, as alternatives)."""
    def fn(builder: js.GrammarBuilder) -> None:
        triggers = sorted(n for n, r in a.rules.items() if r.trigger) if lazy else []
        names = _reachable(a, [Peg("ref", n) for n in triggers] if lazy else [a.root])
        for name in names:
            builder.add_rule(name, _to_gbnf(a, a.rules[name].children[0], builder))
        builder.add_rule("root", " | ".join(triggers) if lazy else _to_gbnf(a, a.root, builder))
    return js.build_grammar(fn)


# -- lenient parse (common_peg_arena::parse with COMMON_PEG_PARSE_FLAG_LENIENT) ----------------------------------

FAIL, SUCCESS, NEED_MORE = 0, 1, 2
_SPACE = b" \t\n\v\f\r"


def _utf8(s: bytes, i: int):
    """common_parse_utf8_codepoint: (status, code point, bytes); status 0 ok, 1 incomplete, 2 invalid"""
    n = len(s)
    if i >= n:
        return 1, 0, 0
    b0 = s[i]
    if not b0 & 0x80:
        return 0, b0, 1
    if not b0 & 0x40:
        return 2, 0, 1
    if not b0 & 0x20:
        if i + 1 >= n:
            return 1, 0, 1
        if s[i + 1] & 0xC0 != 0x80:
            return 2, 0, 1
        return 0, ((b0 & 0x1F) << 6) | (s[i + 1] & 0x3F), 2
    width = 3 if not b0 & 0x10 else 4 if not b0 & 0x08 else 0
    if not width:
        return 2, 0, 1
    for j in range(1, width):
        if i + j >= n:
            return 1, 0, j
        if s[i + j] & 0xC0 != 0x80:
            return 2, 0, j
    if width == 3:
        return 0, ((b0 & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F), 3
    return 0, ((b0 & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F), 4


def _delimiter_at(s: bytes, pos: int, delims: list[bytes]) -> bool:
    """common_trie::check_at: a delimiter complete at `pos`, or one begun there when the decodable text ends
    (the end of the input, or bytes that do not decode) inside it."""
    matched = b""
    while pos < len(s):
        st, _, nb = _utf8(s, pos)
        if st != 0:
            break
        cand = matched + s[pos:pos + nb]
        if not any(d.startswith(cand) for d in delims):
            return False
        matched, pos = cand, pos + nb
        if cand in delims:
            return True
    return bool(matched)


class _Parse:
    """Each result is (type, end, nodes); nodes are (tag, start, end, children) tuples."""

    def __init__(self, a: Arena, s: bytes):
        self.a = a
        self.s = s

    def run(self, p: Peg, pos: int):
        return getattr(self, "p_" + p.kind)(p, pos)

    def p_eps(self, p, pos):
        return SUCCESS, pos, []

    def p_end(self, p, pos):
        return (SUCCESS if pos >= len(self.s) else FAIL), pos, []

    def p_literal(self, p, pos):
        lit = p.text.encode("utf-8", "surrogateescape")
        s = self.s
        for i, c in enumerate(lit):
            if pos + i >= len(s):
                return NEED_MORE, pos + i, []
            if s[pos + i] != c:
                return FAIL, pos, []
        return SUCCESS, pos + len(lit), []

    def p_seq(self, p, pos):
        nodes = []
        for c in p.children:
            t, end, n = self.run(c, pos)
            if t == FAIL:
                return FAIL, end, []
            nodes += n
            if t == NEED_MORE:
                return NEED_MORE, end, nodes
            pos = end
        return SUCCESS, pos, nodes

    def p_choice(self, p, pos):
        for c in p.children:
            r = self.run(c, pos)
            if r[0] != FAIL:
                return r
        return FAIL, pos, []

    def p_rep(self, p, pos):
        nodes, count = [], 0
        while p.hi == -1 or count < p.hi:
            if pos >= len(self.s):
                break
            t, end, n = self.run(p.children[0], pos)
            if t == SUCCESS:
                if end == pos:
                    break
                nodes += n
                pos = end
                count += 1
                continue
            if t == NEED_MORE:
                return NEED_MORE, end, nodes + n
            break
        if p.lo > 0 and count < p.lo:
            if pos >= len(self.s):
                return NEED_MORE, pos, nodes
            return FAIL, pos, []
        return SUCCESS, pos, nodes

    def p_not(self, p, pos):
        t, _, _ = self.run(p.children[0], pos)
        if t == SUCCESS:
            return FAIL, pos, []
        if t == NEED_MORE:
            return NEED_MORE, pos, []
        return SUCCESS, pos, []

    def p_peek(self, p, pos):
        """A lookahead: the child's result, nothing consumed, no nodes."""
        t, _, _ = self.run(p.children[0], pos)
        return t, pos, []

    def p_space(self, p, pos):
        s = self.s
        while pos < len(s) and s[pos] in _SPACE:
            pos += 1
        return SUCCESS, pos, []

    def p_chars(self, p, pos):
        start, count = pos, 0
        while p.hi == -1 or count < p.hi:
            st, cp, nb = _utf8(self.s, pos)
            if st == 1:
                if count >= p.lo:
                    return SUCCESS, pos, []
                return NEED_MORE, pos, []
            if st == 2:
                if count >= p.lo:
                    return SUCCESS, pos, []
                return FAIL, start, []
            hit = any(lo <= cp <= hi for lo, hi in p.ranges)
            if p.negated:
                hit = not hit
            if not hit:
                break
            pos += nb
            count += 1
        if count < p.lo:
            if pos >= len(self.s):
                return NEED_MORE, pos, []
            return FAIL, pos, []
        return SUCCESS, pos, []

    def p_string(self, p, pos):
        s, d = self.s, ord(p.text)
        while pos < len(s):
            c = s[pos]
            if c == d:
                return SUCCESS, pos, []
            if c == 0x5C:
                save = pos
                pos += 1
                if pos >= len(s):
                    return NEED_MORE, save, []
                e = s[pos]
                if e in (d, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74):
                    pos += 1
                    continue
                if e == 0x75:
                    pos += 1
                    for _ in range(4):
                        if pos >= len(s):
                            return NEED_MORE, save, []
                        if chr(s[pos]) not in "0123456789abcdefABCDEF":
                            return FAIL, pos, []
                        pos += 1
                    continue
                return FAIL, pos, []
            st, _, nb = _utf8(s, pos)
            if st == 1:
                return NEED_MORE, pos, []
            if st == 2:
                return FAIL, pos, []
            pos += nb
        return NEED_MORE, pos, []

    def p_ref(self, p, pos):
        return self.run(self.a.rules[p.text], pos)

    def p_rule(self, p, pos):
        t, end, n = self.run(p.children[0], pos)
        if t == FAIL:
            return t, end, n
        return t, end, [("", pos, end, n)]

    def p_tag(self, p, pos):
        t, end, n = self.run(p.children[0], pos)
        if t == FAIL:
            return t, end, n
        return t, end, [(p.text, pos, end, n)]

    def p_schema(self, p, pos):
        return self.run(p.children[0], pos)

    def p_atomic(self, p, pos):
        t, end, n = self.run(p.children[0], pos)
        return t, end, ([] if t == NEED_MORE else n)

    def p_until(self, p, pos):
        """Lenient: up to a delimiter, or to one begun at the end of the input (success there); the end of the
        input, or a multi-byte sequence cut there, is NEED_MORE; bytes that do not decode are skipped."""
        s = self.s
        delims = [d.encode("utf-8", "surrogateescape") for d in p.delims]
        last = pos
        while pos < len(s):
            st, _, nb = _utf8(s, pos)
            if st == 1:
                return NEED_MORE, last, []
            if st == 2:
                pos += nb
                last = pos
                continue
            if _delimiter_at(s, pos, delims):
                return SUCCESS, pos, []
            pos += nb
            last = pos
        return NEED_MORE, last, []


def _content(nodes, s: bytes) -> bytes:
    out = b""
    for tag, start, end, children in nodes:
        if tag == "content":
            out += s[start:end] if start < len(s) else b""
        out += _content(children, s)
    return out


# -- the public face ----------------------------------------------------------------------------------------------


@dataclass
class ChatResponseFormat:
    """What a chat request with a JSON schema resolves to: the grammar text (llama-server's
    `grammar_type: tool_calls`, fed the generation prompt first) and the parser of the answer."""

    grammar: str
    generation_prompt: str
    arena: Arena

    def content(self, generated: str | bytes) -> str | None:
        """The message content the parser extracts from the generated text, or None where the parsed message
        is empty (llama-server then returns the raw generated text)."""
        raw = generated.encode("utf-8", "surrogateescape") if isinstance(generated, str) else bytes(generated)
        text = self.generation_prompt.encode("utf-8", "surrogateescape") + raw
        t, _, nodes = _Parse(self.arena, text).run(self.arena.root, 0)
        if t == FAIL:
            raise SchemaError("The model produced output that does not match the expected peg-native format")
        content = _content(nodes, text)
        if not content:
            return None
        return content.decode("utf-8", "surrogateescape")


def response_format(schema, generation_prompt: str, reasoning_start: str = "") -> ChatResponseFormat:
    """The response-format grammar and parser for `schema` (a JSON object; an empty one means
    {"type": "object"}, as llama-server's request parsing makes it). Raises SchemaError carrying llama-server's
    chat message."""
    try:
        node = js.build_document(schema)
    except SchemaError as e:
        raise SchemaError(CHAT_PARSER_ERROR + e.message) from None
    arena = response_format_arena(node, generation_prompt, reasoning_start)
    try:
        grammar = arena_grammar(arena)
    except SchemaError as e:
        raise SchemaError(CHAT_PARSER_ERROR + e.message) from None
    return ChatResponseFormat(grammar, generation_prompt, arena)


def content_delta(last: str, current: str) -> str:
    """The content a stream chunk carries (common/chat.cpp string_diff): what `current` adds to `last`; ""
    when `current` is a prefix of `last` (a stop word erased); SchemaError when neither extends the other
    (llama-server throws "Invalid diff"). In a stream, llama-server parses the text generated so far after
    every token (`ChatResponseFormat.content`), keeps the previous message when a parse yields nothing, and
    sends the delta between the previous content and the new one when they differ."""
    if not last:
        return current
    if not current.startswith(last):
        if last.startswith(current):
            return ""
        raise SchemaError(f"Invalid diff: '{last}' not found at start of '{current}'")
    return current[len(last):]


def schema_error(schema) -> str | None:
    """The error common/chat.cpp's template step raises for a response-format schema, as the generic
    autoparser raises it (a document error as "JSON schema error at ...", a converter error as "JSON schema
    conversion failed:\\n..."), without the "Unable to generate parser ..." prefix; None when it converts."""
    try:
        response_format(schema, "")
    except SchemaError as e:
        return e.message[len(CHAT_PARSER_ERROR):] if e.message.startswith(CHAT_PARSER_ERROR) else e.message
    return None

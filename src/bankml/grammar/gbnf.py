"""GBNF text -> rules, as llama.cpp b11192's grammar parser (src/llama-grammar.cpp) builds them.

A grammar is a list of rules; a rule is a list of elements `(type, value)` holding its alternates one after
the other, each alternate closed by ALT and the rule by END. Rule ids are symbol ids: a name gets the next id
the first time it is seen (defined or referenced); groups and repetitions synthesise rules named
`<rule>_<id>`. The repetition operators are rewritten into helper rules exactly as llama.cpp rewrites them:

    S*      ->  S'            with  S'   ::= S S' |
    S+      ->  S S'          with  S'   ::= S S' |
    S?      ->  S'            with  S'   ::= S |
    S{m,}   ->  S (m times) S'            S' ::= S S' |
    S{m,n}  ->  S (m times) S'(n-m)       S'(k) ::= S S'(k-1) |   ...   S'(1) ::= S |

so the ids, and hence the engine's states, are those of the oracle. Limits kept: a count above 2000 in
`{m,...}` is refused, an upper bound above 2000 means "no upper bound", and the number of rules a repetition
would copy (the rules inside the repeated item times the count) may not exceed 2000. Groups nest to any depth
(the parser keeps its own stack; llama.cpp's recursion overflows past some 16,000 levels).

The text is read as bytes up to its first NUL (the oracle reads a C string). Everything the oracle refuses
raises `GrammarError`; a few inputs on which the oracle itself loops or runs out of memory (an upper bound
below the lower one, `S{3,1}`) are refused with a reason instead.

Owns: the GBNF syntax. Knows nothing of tokens beyond an optional `tokenize` callable for `<name>` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from bankml.errors import GrammarError

# element types (llama_gretype)
END, ALT, RULE_REF, CHAR, CHAR_NOT, CHAR_RNG_UPPER, CHAR_ALT, CHAR_ANY, TOKEN, TOKEN_NOT = range(10)

MAX_REPETITION = 2000
_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1

_NIBBLE_LEN = (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)


def _is_digit(c: int) -> bool:
    return 0x30 <= c <= 0x39


def _is_word(c: int) -> bool:
    return 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or c == 0x2D or _is_digit(c)


@dataclass
class ParsedGrammar:
    rules: list[list[tuple[int, int]]]
    symbol_ids: dict[str, int]


class _Parser:
    def __init__(self, text: bytes, tokenize: Callable[[str], Sequence[int]] | None):
        nul = text.find(b"\0")
        if nul >= 0:
            text = text[:nul]
        # NUL padding: every look-ahead the C parser makes stops at the terminator
        self.s = text + b"\0\0\0\0"
        self.n = len(text)
        self.tokenize = tokenize
        self.symbol_ids: dict[str, int] = {}
        self.rules: list[list[tuple[int, int]]] = []

    def at(self, i: int) -> str:
        return self.s[i:i + 40].split(b"\0")[0].decode("utf-8", "replace")

    def fail(self, msg: str, pos: int | None = None) -> GrammarError:
        where = f" at {self.at(pos)!r}" if pos is not None else ""
        return GrammarError(msg + where)

    # -- lexical helpers ------------------------------------------------------------------------------------

    def space(self, pos: int, newline_ok: bool) -> int:
        s = self.s
        while True:
            c = s[pos]
            if c in (0x20, 0x09) or (newline_ok and c in (0x0D, 0x0A)):
                pos += 1
            elif c == 0x23:  # comment to the end of the line
                while s[pos] not in (0, 0x0D, 0x0A):
                    pos += 1
            else:
                return pos

    def name(self, pos: int) -> int:
        end = pos
        while _is_word(self.s[end]):
            end += 1
        if end == pos:
            raise self.fail("a name was expected", pos)
        return end

    def integer(self, pos: int) -> int:
        end = pos
        while _is_digit(self.s[end]):
            end += 1
        if end == pos:
            raise self.fail("an integer was expected", pos)
        return end

    def hex(self, pos: int, size: int) -> tuple[int, int]:
        s, end, value, p = self.s, pos + size, 0, pos
        while p < end and s[p]:
            c = s[p]
            if 0x61 <= c <= 0x66:
                d = c - 0x61 + 10
            elif 0x41 <= c <= 0x46:
                d = c - 0x41 + 10
            elif _is_digit(c):
                d = c - 0x30
            else:
                break
            value = (value << 4) + d
            p += 1
        if p != end:
            raise self.fail(f"{size} hex digits were expected", pos)
        return value, p

    def utf8(self, pos: int) -> tuple[int, int]:
        # one code point the way the oracle's parser decodes it: no validation, stops at the terminator
        s = self.s
        first = s[pos]
        length = _NIBBLE_LEN[first >> 4]
        value = first & ((1 << (8 - length)) - 1)
        end, p = pos + length, pos + 1
        while p < end and s[p]:
            value = (value << 6) + (s[p] & 0x3F)
            p += 1
        return value, p

    def char(self, pos: int) -> tuple[int, int]:
        s = self.s
        if s[pos] == 0x5C:  # backslash
            e = s[pos + 1]
            if e == 0x78:
                return self.hex(pos + 2, 2)
            if e == 0x75:
                return self.hex(pos + 2, 4)
            if e == 0x55:
                return self.hex(pos + 2, 8)
            if e == 0x74:
                return 0x09, pos + 2
            if e == 0x72:
                return 0x0D, pos + 2
            if e == 0x6E:
                return 0x0A, pos + 2
            if e in (0x5C, 0x22, 0x5B, 0x5D, 0x2D):
                return e, pos + 2
            raise self.fail("unknown escape", pos)
        if s[pos]:
            return self.utf8(pos)
        raise self.fail("the grammar ends too early")

    def token(self, pos: int) -> tuple[int, int]:
        s, start = self.s, pos
        if s[pos] != 0x3C:
            raise self.fail("'<' was expected", pos)
        pos += 1
        if s[pos] == 0x5B:  # <[id]>
            pos += 1
            end = self.integer(pos)
            value = int(s[pos:end])
            if value > _U32_MAX:
                raise self.fail("token id too large", pos)
            pos = end
            if s[pos] != 0x5D:
                raise self.fail("']' was expected", pos)
            pos += 1
            if s[pos] != 0x3E:
                raise self.fail("'>' was expected", pos)
            return value, pos + 1
        if self.tokenize is None:
            raise self.fail("a token given by its text needs a vocabulary", start)
        while s[pos] and s[pos] != 0x3E:
            pos += 1
        if s[pos] != 0x3E:
            raise self.fail("'>' was expected", pos)
        pos += 1
        ids = list(self.tokenize(s[start:pos].decode("utf-8", "surrogateescape")))
        if len(ids) != 1:
            raise self.fail(f"token {s[start:pos]!r} is not exactly one token")
        return int(ids[0]), pos

    # -- symbols and rules -----------------------------------------------------------------------------------

    def symbol(self, name: bytes) -> int:
        key = name.decode("utf-8", "surrogateescape")
        return self.symbol_ids.setdefault(key, len(self.symbol_ids))

    def new_symbol(self, base: str) -> int:
        next_id = len(self.symbol_ids)
        self.symbol_ids[f"{base}_{next_id}"] = next_id
        return next_id

    def add_rule(self, rule_id: int, rule: list[tuple[int, int]]) -> None:
        if len(self.rules) <= rule_id:
            self.rules.extend([] for _ in range(rule_id + 1 - len(self.rules)))
        self.rules[rule_id] = rule

    # -- grammar ---------------------------------------------------------------------------------------------

    # parse_alternates and parse_sequence call each other for every group, so nesting is as deep as the text
    # says: both are generators that yield the sub-parse they need (and receive its end position), run by
    # `_run` on an explicit stack. Any nesting depth parses; nothing is bounded by Python's recursion limit.

    def alternates(self, pos: int, rule_name: str, rule_id: int, nested: bool):
        rule: list[tuple[int, int]] = []
        pos = yield self.sequence(pos, rule_name, rule, nested)
        while self.s[pos] == 0x7C:  # '|'
            rule.append((ALT, 0))
            pos = self.space(pos + 1, True)
            pos = yield self.sequence(pos, rule_name, rule, nested)
        rule.append((END, 0))
        self.add_rule(rule_id, rule)
        return pos

    @staticmethod
    def _run(gen) -> int:
        stack, value = [gen], None
        while stack:
            try:
                sub = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                value = done.value
                continue
            stack.append(sub)
            value = None
        return value

    def sequence(self, pos: int, rule_name: str, rule: list, nested: bool):
        s = self.s
        last_sym_start = len(rule)
        n_prev_rules = 1

        def repeat(min_times: int, max_times: int, at: int) -> None:
            nonlocal n_prev_rules
            no_max = max_times == _U64_MAX
            if last_sym_start == len(rule):
                raise self.fail("a repetition needs an item before it", at)
            item = rule[last_sym_start:]
            total = max_times if (not no_max and max_times > 0) else (min_times if min_times > 0 else 1)
            if n_prev_rules * total > MAX_REPETITION:
                raise GrammarError(f"a repetition would copy {n_prev_rules * total} rules (at most "
                                   f"{MAX_REPETITION})")
            if min_times == 0:
                del rule[last_sym_start:]
            else:
                for _ in range(1, min_times):
                    rule.extend(item)
            if not no_max and max_times < min_times:
                raise GrammarError(f"repetition {{{min_times},{max_times}}}: the upper bound is below the lower "
                                   "one (llama.cpp does not stop on this)")
            n_opt = 1 if no_max else max_times - min_times
            last_rec = 0
            for i in range(n_opt):
                rec_id = self.new_symbol(rule_name)
                rec = list(item)
                if i > 0 or no_max:
                    rec.append((RULE_REF, rec_id if no_max else last_rec))
                rec += [(ALT, 0), (END, 0)]
                self.add_rule(rec_id, rec)
                last_rec = rec_id
            if n_opt > 0:
                rule.append((RULE_REF, last_rec))
            n_prev_rules *= total

        while s[pos]:
            c = s[pos]
            if c == 0x22:  # literal string
                pos += 1
                last_sym_start = len(rule)
                n_prev_rules = 1
                while s[pos] != 0x22:
                    if not s[pos]:
                        raise self.fail("the grammar ends inside a string")
                    value, pos = self.char(pos)
                    rule.append((CHAR, value))
                pos = self.space(pos + 1, nested)
            elif c == 0x5B:  # character class
                pos += 1
                start_type = CHAR
                if s[pos] == 0x5E:
                    pos += 1
                    start_type = CHAR_NOT
                last_sym_start = len(rule)
                n_prev_rules = 1
                while s[pos] != 0x5D:
                    if not s[pos]:
                        raise self.fail("the grammar ends inside a character class")
                    value, pos = self.char(pos)
                    rule.append((CHAR_ALT if last_sym_start < len(rule) else start_type, value))
                    if s[pos] == 0x2D and s[pos + 1] != 0x5D:
                        if not s[pos + 1]:
                            raise self.fail("the grammar ends inside a character class")
                        upper, pos = self.char(pos + 1)
                        rule.append((CHAR_RNG_UPPER, upper))
                pos = self.space(pos + 1, nested)
            elif c in (0x3C, 0x21):  # token, or inverse token
                kind = TOKEN
                if c == 0x21:
                    kind = TOKEN_NOT
                    pos += 1
                value, end = self.token(pos)
                last_sym_start = len(rule)
                n_prev_rules = 1
                rule.append((kind, value))
                pos = self.space(end, nested)
            elif _is_word(c):  # rule reference
                end = self.name(pos)
                ref = self.symbol(s[pos:end])
                pos = self.space(end, nested)
                last_sym_start = len(rule)
                n_prev_rules = 1
                rule.append((RULE_REF, ref))
            elif c == 0x28:  # group
                pos = self.space(pos + 1, True)
                before = len(self.symbol_ids)
                sub_id = self.new_symbol(rule_name)
                pos = yield self.alternates(pos, rule_name, sub_id, True)
                n_prev_rules = max(1, (len(self.symbol_ids) - before) & _U32_MAX)
                last_sym_start = len(rule)
                rule.append((RULE_REF, sub_id))
                if s[pos] != 0x29:
                    raise self.fail("')' was expected", pos)
                pos = self.space(pos + 1, nested)
            elif c == 0x2E:  # any character
                last_sym_start = len(rule)
                n_prev_rules = 1
                rule.append((CHAR_ANY, 0))
                pos = self.space(pos + 1, nested)
            elif c == 0x2A:
                pos = self.space(pos + 1, nested)
                repeat(0, _U64_MAX, pos)
            elif c == 0x2B:
                pos = self.space(pos + 1, nested)
                repeat(1, _U64_MAX, pos)
            elif c == 0x3F:
                pos = self.space(pos + 1, nested)
                repeat(0, 1, pos)
            elif c == 0x7B:
                pos = self.space(pos + 1, nested)
                if not _is_digit(s[pos]):
                    raise self.fail("an integer was expected", pos)
                end = self.integer(pos)
                min_times = int(s[pos:end])
                if min_times > _U64_MAX:
                    raise self.fail("repetition count out of range", pos)
                pos = self.space(end, nested)
                max_times = _U64_MAX
                if s[pos] == 0x7D:
                    max_times = min_times
                    pos = self.space(pos + 1, nested)
                elif s[pos] == 0x2C:
                    pos = self.space(pos + 1, nested)
                    if _is_digit(s[pos]):
                        end = self.integer(pos)
                        max_times = int(s[pos:end])
                        if max_times > _U64_MAX:
                            raise self.fail("repetition count out of range", pos)
                        pos = self.space(end, nested)
                    if s[pos] != 0x7D:
                        raise self.fail("'}' was expected", pos)
                    pos = self.space(pos + 1, nested)
                else:
                    raise self.fail("',' was expected", pos)
                if min_times > MAX_REPETITION:
                    raise GrammarError(f"repetition count {min_times} is above {MAX_REPETITION}")
                if max_times != _U64_MAX and max_times > MAX_REPETITION:
                    max_times = _U64_MAX
                repeat(min_times, max_times, pos)
            else:
                break
        return pos

    def rule(self, pos: int) -> int:
        s = self.s
        end = self.name(pos)
        name = s[pos:end]
        rule_id = self.symbol(name)
        pos = self.space(end, False)
        if not (s[pos] == 0x3A and s[pos + 1] == 0x3A and s[pos + 2] == 0x3D):
            raise self.fail("'::=' was expected", pos)
        pos = self.space(pos + 3, True)
        pos = self._run(self.alternates(pos, name.decode("utf-8", "surrogateescape"), rule_id, False))
        if s[pos] == 0x0D:
            pos += 2 if s[pos + 1] == 0x0A else 1
        elif s[pos] == 0x0A:
            pos += 1
        elif s[pos]:
            raise self.fail("a newline or the end was expected", pos)
        return self.space(pos, True)

    def parse(self) -> ParsedGrammar:
        pos = self.space(0, True)
        while self.s[pos]:
            pos = self.rule(pos)
        names = {v: k for k, v in sorted(self.symbol_ids.items(), reverse=True)}
        for rule in self.rules:
            if not rule:
                raise GrammarError("a rule is referenced but never defined")
            for kind, value in rule:
                if kind == RULE_REF and (value >= len(self.rules) or not self.rules[value]):
                    raise GrammarError(f"undefined rule {names.get(value, value)!r}")
        return ParsedGrammar(self.rules, self.symbol_ids)


def parse(text: str | bytes, tokenize: Callable[[str], Sequence[int]] | None = None) -> ParsedGrammar:
    """Parse GBNF text into rules (llama_grammar_parser::parse). Raises GrammarError."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    return _Parser(raw, tokenize).parse()


def _is_end_of_alternate(kind: int) -> bool:
    return kind == END or kind == ALT


def left_recursive_rule(rules: list[list[tuple[int, int]]]) -> int | None:
    """The index at which llama.cpp's left-recursion check fires, or None.

    The check walks each rule's leftmost references (and the next ones while the previous rule has an empty
    alternate of its own: only a directly empty alternate counts as "may be empty", as in the oracle)."""
    n = len(rules)
    visited = [False] * n
    in_progress = [False] * n
    may_be_empty = [False] * n
    for start in range(n):
        if visited[start]:
            continue
        # explicit stack of frames (rule index, element index, recurse flag), same order as the recursion
        if in_progress[start]:
            return start
        frames = [[start, 0, True]]
        in_progress[start] = True
        _mark_empty(rules, start, may_be_empty)
        while frames:
            frame = frames[-1]
            r, i, recurse = frame
            rule = rules[r]
            if i >= len(rule):
                in_progress[r] = False
                visited[r] = True
                frames.pop()
                if frames:
                    parent = frames[-1]
                    ref = rules[parent[0]][parent[1]][1]
                    if not may_be_empty[ref]:
                        parent[2] = False
                    parent[1] += 1
                continue
            kind, value = rule[i]
            if kind == RULE_REF and recurse:
                if in_progress[value]:
                    return start
                in_progress[value] = True
                _mark_empty(rules, value, may_be_empty)
                frames.append([value, 0, True])
                continue
            frame[2] = True if _is_end_of_alternate(kind) else False
            frame[1] += 1
    return None


def _mark_empty(rules, r: int, may_be_empty: list[bool]) -> None:
    at_start = True
    for kind, _ in rules[r]:
        if _is_end_of_alternate(kind):
            if at_start:
                may_be_empty[r] = True
                return
            at_start = True
        else:
            at_start = False

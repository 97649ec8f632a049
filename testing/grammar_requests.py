"""The requests the server recorder sends to llama-server b11192 (inputs only; the answers are recorded).

`grammar_text_schemas()`: schemas whose converted grammar text is read back from /completion's
`generation_settings.grammar` and from chat's `__verbose.generation_settings.grammar`.
`error_requests()`: requests llama-server refuses while resolving a grammar or schema.
`e2e_requests()`: constrained generations (GBNF grammars, JSON mode, JSON schemas; greedy and seeded).
"""

from __future__ import annotations

from testing.grammar_corpus import sdist_grammars
from testing.schema_corpus import HAND, random_schema

import random

CHAT_USER = [{"role": "user", "content": "Give me a JSON object describing a fictional person."}]


def grammar_text_schemas() -> list:
    picks = [0, 1, 10, 12, 13, 16, 17, 18, 22, 25, 27, 29, 31, 36, 37, 41, 43, 46, 47, 48, 49, 53, 55, 57, 59,
             85, 90, 95, 97, 100, 104, 111, 116, 122, 124, 126, 129, 131, 132, 135, 136, 137, 139]
    out = [HAND[i] for i in picks if i < len(HAND) and not isinstance(HAND[i], str)]
    rng = random.Random(2024)
    out += [random_schema(rng) for _ in range(12)]
    return out


BAD_GRAMMARS = [
    'root ::= "a" (',
    "root ::= undefined-rule",
    'start ::= "a"',
    'root ::= x\nx ::= x "a" | "b"',
    'root ::= "\\q"',
    "root ::= [a-",
    "   ",
    'root ::= "a"{2001}',
    'root : "a"',
    'root ::= "a"*?',
]

BAD_SCHEMAS = [
    {"type": "nonsense"},
    {"enum": []},
    {"$ref": "https://example.com/x.json"},
    {"type": "array", "minItems": -1},
    {"type": "string", "pattern": "^(a$"},
    "just a string",
    5,
    {"type": "object", "properties": {"a": {"type": "bogus"}}},
    {"$ref": "#/definitions/missing"},
    {"anyOf": []},
]


def error_requests() -> list[tuple[str, dict]]:
    out = []
    for g in BAD_GRAMMARS:
        out.append(("/completion", {"prompt": "Hello", "n_predict": 4, "grammar": g}))
    for s in BAD_SCHEMAS:
        out.append(("/completion", {"prompt": "Hello", "n_predict": 4, "json_schema": s}))
    chat = "/v1/chat/completions"
    for s in BAD_SCHEMAS:
        out.append((chat, {"messages": CHAT_USER, "max_tokens": 4, "response_format": {"type": "json_schema", "json_schema": {"schema": s}}}))
    out += [
        (chat, {"messages": CHAT_USER, "max_tokens": 4, "json_schema": {"type": "nonsense"}}),
        (chat, {"messages": CHAT_USER, "max_tokens": 4, "json_schema": {"type": "string"}, "grammar": 'root ::= "a"'}),
        (chat, {"messages": CHAT_USER, "max_tokens": 4, "response_format": {"type": "xml"}}),
        (chat, {"messages": CHAT_USER, "max_tokens": 4, "response_format": {"type": "json_object", "schema": {"type": "nonsense"}}}),
        (chat, {"messages": CHAT_USER, "max_tokens": 4, "grammar": 'root ::= "a" ('}),
        (chat, {"messages": CHAT_USER, "max_tokens": 4, "json_schema": [1, 2]}),
        ("/completion", {"prompt": "Hello", "n_predict": 4, "grammar": 'root ::= "x"', "grammar_type": "tool_calls",
                         "generation_prompt": "Sure"}),
        ("/completion", {"prompt": "Hello", "n_predict": 4, "json_schema": {"type": "integer"}, "grammar": "root ::= ("}),
    ]
    return out


E2E_GRAMMARS = {
    "yesno": 'root ::= "yes" | "no"',
    "digits": "root ::= [0-9]{3,6}",
    "word-list": 'root ::= word ("," " "? word){2,4} "."\nword ::= [a-z]+',
    "arith": None,  # sdist arithmetic.gbnf
    "list": None,   # sdist list.gbnf
    "json": None,   # sdist json.gbnf
    "json_arr": None,
    "chess": None,
    "japanese": None,
    "parens": 'root ::= expr\nexpr ::= "(" expr ")" | "[" expr "]" | "x"',
    "nested-list": 'root ::= list\nlist ::= "[" (item ("," item)*)? "]"\nitem ::= list | [0-9]+',
    "neg-class": 'root ::= [^0-9\\n]{5,20} "!"',
    "emoji": 'root ::= ("I feel " ("😀" | "😢" | "😡" | "🤔") " ")+ "."',
    "accents": 'root ::= [a-zàâçéèêëîïôûùüÿœæ]+ (" " [a-zàâçéèêëîïôûùüÿœæ]+){1,5}',
    "date": 'root ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])',
    "sentence": 'root ::= [A-Z] [a-z ,]{10,60} "."',
    "kv-lines": 'root ::= (key "=" value "\\n"){2,3}\nkey ::= [a-z]{1,8}\nvalue ::= [0-9]+ | "\\"" [a-z ]* "\\""',
    "any-then-stop": 'root ::= .{5,12} "END"',
    "optional": 'root ::= "Answer:" (" " [0-9]+)? " done"',
    "cjk-range": 'root ::= [一-鿿]{2,8}',
}


def _sdist(name: str) -> str:
    return dict(sdist_grammars())[name + ".gbnf"]


def e2e_requests() -> list[tuple[str, str, dict]]:
    """(id, endpoint, body)"""
    out = []
    prompts = ["Question: is the sky blue? Answer:", "Write some numbers:", "List three fruits:",
               "Compute:", "Shopping list:\n", "Data:", "Moves:", "日本語で書いてください:", "Brackets:",
               "Nested:", "Shout something", "How do you feel?", "Écrivez en français:", "Today's date is",
               "Write a sentence.", "Config file:\n", "Say anything", "Result of the test", "中文:"]
    grammars = list(E2E_GRAMMARS.items())
    for i, (gid, g) in enumerate(grammars):
        text = g if g is not None else _sdist({"arith": "arithmetic"}.get(gid, gid))
        body = {"prompt": prompts[i % len(prompts)], "n_predict": 40, "grammar": text, "return_tokens": True,
                "temperature": 0}
        out.append((f"gbnf-{gid}-greedy", "/completion", body))
        if i % 2 == 0:
            seeded = dict(body, temperature=0.9, seed=1000 + i)
            out.append((f"gbnf-{gid}-seed", "/completion", seeded))
    schemas = [
        {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]},
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "population": {"type": "integer", "minimum": 0, "maximum": 5000000}}},
        {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
        {"type": "object", "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}}, "required": ["ok"]},
        {"enum": ["red", "green", "blue"]},
        {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "time": {"type": "string", "format": "time"}}, "required": ["date"]},
        {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"]},
        {"type": "string", "pattern": "^[A-Z][a-z]+ [A-Z][a-z]+$"},
        {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}}, "additionalProperties": False},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "number"}}}]},
        {"type": "object", "properties": {"point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]}}},
        {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}}, "$ref": "#/$defs/node"},
        {"type": "object", "properties": {"score": {"type": "integer", "minimum": -10, "maximum": 10}, "label": {"const": "fixed"}}, "required": ["score", "label"]},
        {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "null"}}}]},
        {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "count": {"type": "integer", "exclusiveMinimum": 0}}},
    ]
    cprompts = ["Describe a person as JSON:\n", "A city record in JSON:\n", "JSON list of colors:\n", "Is it raining? JSON:\n",
                "Pick a color:", "Schedule JSON:\n", "Make an id:", "Full name:", "Tags JSON:\n", "Counts JSON:\n",
                "A value:", "A point:", "A tree:", "Score it:", "Record:", "Event:"]
    for i, s in enumerate(schemas):
        body = {"prompt": cprompts[i], "n_predict": 48, "json_schema": s, "return_tokens": True, "temperature": 0}
        out.append((f"schema-{i:02d}-greedy", "/completion", body))
        if i % 2 == 1:
            out.append((f"schema-{i:02d}-seed", "/completion", dict(body, temperature=0.8, seed=77 + i)))
    chat = "/v1/chat/completions"
    chat_msgs = [
        [{"role": "user", "content": "Give me a JSON object describing a fictional person."}],
        [{"role": "user", "content": "Return the weather in Paris as JSON."}],
        [{"role": "system", "content": "You only answer in JSON."}, {"role": "user", "content": "List two animals."}],
        [{"role": "user", "content": "What is 2+2? Answer in JSON."}],
        [{"role": "user", "content": "Describe a book."}],
    ]
    for i, m in enumerate(chat_msgs):
        body = {"messages": m, "max_tokens": 48, "temperature": 0, "response_format": {"type": "json_object"},
                "verbose": True, "return_tokens": True}
        out.append((f"chat-json-object-{i}", chat, body))
        out.append((f"chat-json-object-{i}-seed", chat, dict(body, temperature=0.8, seed=500 + i)))
    for i, s in enumerate(schemas[:10]):
        m = chat_msgs[i % len(chat_msgs)]
        body = {"messages": m, "max_tokens": 48, "temperature": 0, "verbose": True, "return_tokens": True,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}}
        out.append((f"chat-json-schema-{i:02d}", chat, body))
        if i % 3 == 0:
            out.append((f"chat-json-schema-{i:02d}-seed", chat, dict(body, temperature=1.0, seed=900 + i)))
    for i, s in enumerate(schemas[10:13]):
        body = {"messages": chat_msgs[i], "max_tokens": 40, "temperature": 0, "verbose": True, "return_tokens": True,
                "json_schema": s}
        out.append((f"chat-top-json-schema-{i}", chat, body))
    for i, gid in enumerate(["yesno", "word-list", "emoji"]):
        body = {"messages": chat_msgs[i], "max_tokens": 32, "temperature": 0, "verbose": True, "return_tokens": True,
                "grammar": E2E_GRAMMARS[gid]}
        out.append((f"chat-gbnf-{gid}", chat, body))
    out.append(("chat-json-object-with-grammar", chat, {"messages": chat_msgs[0], "max_tokens": 16, "temperature": 0,
                                                      "verbose": True, "return_tokens": True,
                                                      "response_format": {"type": "json_object"},
                                                      "grammar": 'root ::= "ignored"'}))
    out.append(("completion-grammar-not-string", "/completion", {"prompt": "Hi", "n_predict": 8, "temperature": 0,
                                                                 "return_tokens": True, "grammar": 42}))
    out.append(("completion-grammar-and-schema", "/completion", {"prompt": "Pick:", "n_predict": 8, "temperature": 0,
                                                                 "return_tokens": True, "grammar": 'root ::= "A" | "B"',
                                                                 "json_schema": {"type": "integer"}}))
    out.append(("completion-empty-schema", "/completion", {"prompt": "JSON:", "n_predict": 24, "temperature": 0,
                                                           "return_tokens": True, "json_schema": {}}))
    out.append(("completion-tool-calls-prefill", "/completion", {"prompt": "Say:", "n_predict": 8, "temperature": 0,
                                                                 "return_tokens": True, "grammar": 'root ::= "Sure, " [a-z]+',
                                                                 "grammar_type": "tool_calls", "generation_prompt": "Sure, "}))
    return out


def lazy_requests() -> list[tuple[str, str, dict]]:
    """(id, endpoint, body) for lazy grammars and the trigger fields; some are refusals"""
    g = 'root ::= "{" [a-z]+ "}"'
    base = {"n_predict": 24, "temperature": 0, "return_tokens": True}
    return [
        ("lazy-word", "/completion", dict(base, prompt="Write a sentence, then a code in braces:", grammar=g,
                                          grammar_lazy=True, grammar_triggers=[{"type": 1, "value": "code {"}])),
        ("lazy-pattern", "/completion", dict(base, prompt="The answer is", grammar=g, grammar_lazy=True,
                                             grammar_triggers=[{"type": 2, "value": "[\\s\\S]*?(\\{)"}])),
        ("lazy-pattern-full", "/completion", dict(base, prompt="Say: hello {", grammar=g, grammar_lazy=True,
                                                  grammar_triggers=[{"type": 3, "value": "(.*\\{)"}])),
        ("lazy-never", "/completion", dict(base, prompt="Count to five:", grammar=g, grammar_lazy=True,
                                           grammar_triggers=[{"type": 1, "value": "zebra crossing"}])),
        ("lazy-no-triggers-field", "/completion", dict(base, prompt="Hi", grammar=g, grammar_lazy=True)),
        ("lazy-token", "/completion", dict(base, prompt="Hello", grammar='root ::= [a-z ]+', grammar_lazy=True,
                                           preserved_tokens=[" world"],
                                           grammar_triggers=[{"type": 1, "value": " world"}])),
        ("lazy-empty-triggers", "/completion", dict(base, prompt="Hi", grammar=g, grammar_lazy=True,
                                                    grammar_triggers=[])),
        ("lazy-word-not-preserved", "/completion", dict(base, prompt="Hi", grammar=g, grammar_lazy=True,
                                                        grammar_triggers=[{"type": 1, "value": " world"}])),
        ("lazy-trigger-no-type", "/completion", dict(base, prompt="Hi", grammar=g, grammar_lazy=True,
                                                     grammar_triggers=[{"value": "x"}])),
        ("lazy-trigger-bad-value", "/completion", dict(base, prompt="Hi", grammar=g, grammar_lazy=True,
                                                       grammar_triggers=[{"type": 1, "value": 5}])),
        ("lazy-bad-grammar", "/completion", dict(base, prompt="Hi", grammar="root ::= (", grammar_lazy=True,
                                                 grammar_triggers=[{"type": 1, "value": "zebra crossing"}])),
        ("preserved-not-string", "/completion", dict(base, prompt="Hi", preserved_tokens=[5])),
        ("lazy-not-bool", "/completion", dict(base, prompt="Hi", grammar=g, grammar_lazy="yes")),
    ]


def e2e_more_requests() -> list[tuple[str, str, dict]]:
    """(id, endpoint, body): more distinct schemas (completion and chat, greedy and seeded)"""
    schemas = [
        {"type": "boolean"},
        {"type": "number"},
        {"type": "integer", "minimum": 1900, "maximum": 2100},
        {"type": "string", "maxLength": 20},
        {"type": "string", "minLength": 3, "maxLength": 6},
        {"type": ["string", "null"]},
        {"enum": [1, 2, 3, "many"]},
        {"const": "ok"},
        {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3},
        {"type": "object", "properties": {"first": {"type": "string"}, "last": {"type": "string"}},
         "required": ["first", "last"], "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}},
        {"type": "object", "properties": {"status": {"enum": ["active", "inactive"]}, "since": {"type": "string", "format": "date"}},
         "required": ["status"]},
        {"oneOf": [{"type": "object", "properties": {"cat": {"type": "string"}}, "required": ["cat"]},
                   {"type": "object", "properties": {"dog": {"type": "string"}}, "required": ["dog"]}]},
        {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"}, "qty": {"type": "integer", "minimum": 1}},
            "required": ["sku", "qty"]}, "maxItems": 2}}, "required": ["items"]},
        {"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
         "additionalProperties": {"type": "string"}},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]},
    ]
    prompts = ["Is water wet?", "A number:", "A year:", "A short word:", "A word:", "Maybe a name:", "How many?",
               "Status:", "Three numbers:", "Your name as JSON:", "Three values:", "Account status:",
               "A pet:", "An order:", "A film:", "A row:"]
    chat = "/v1/chat/completions"
    out = []
    for i, (s, p) in enumerate(zip(schemas, prompts)):
        if i % 2 == 0:
            body = {"prompt": p + "\n", "n_predict": 32, "json_schema": s, "return_tokens": True, "temperature": 0}
            out.append((f"more-schema-{i:02d}", "/completion", body))
            if i % 4 == 0:
                out.append((f"more-schema-{i:02d}-seed", "/completion", dict(body, temperature=0.7, seed=4242 + i)))
        else:
            body = {"messages": [{"role": "user", "content": p}], "max_tokens": 32, "temperature": 0, "verbose": True,
                    "return_tokens": True, "response_format": {"type": "json_schema", "json_schema": {"schema": s}}}
            out.append((f"more-chat-schema-{i:02d}", chat, body))
            if i % 4 == 1:
                out.append((f"more-chat-schema-{i:02d}-seed", chat, dict(body, temperature=0.7, seed=5151 + i)))
    return out

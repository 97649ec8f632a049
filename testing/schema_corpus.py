"""JSON schemas for the converter recorders (inputs only; the answers come from the oracle).

`schema_corpus()` returns (id, schema) pairs: hand-written schemas exercising every converter feature and
refusal, the schemas of the reference sdist's converter tests (read at record time), and random ones.
A schema is a Python object, or a raw JSON string where the exact text matters (key order, number forms).
"""

from __future__ import annotations

import json
import random

from testing.grammar_corpus import sdist_test_schemas

HAND: list = [
    {},
    {"type": "object"},
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "array"},
    {"type": ["string", "null"]},
    {"type": ["integer", "string", "boolean"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                      "email": {"type": "string"}}, "required": ["name", "age"]},
    {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}, "c": {"type": "string"}},
     "required": ["c", "a"]},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"},
                                      "d": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": True},
    {"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"],
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "additionalProperties": False},
    {"properties": {"x": {"type": "boolean"}}},
    {"additionalProperties": {"type": "number"}},
    {"type": "object", "properties": {"and": {"type": "null"}, "also": {"type": "null"}},
     "additionalProperties": True},
    {"type": "object", "properties": {"": {"type": "string"}}, "additionalProperties": True},
    {"type": "object", "properties": {"weird key \"quoted\"\n\\": {"type": "string"}}, "required": ["weird key \"quoted\"\n\\"]},
    {"type": "object", "properties": {"ünï": {"type": "string"}, "日本": {"type": "integer"}}},
    {"type": "object", "properties": {"a b": {"type": "object", "properties": {"c.d": {"type": "string"}}}}},
    {"type": "array", "items": {"type": "string"}},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 0, "maxItems": 1},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 3, "maxItems": 3},
    {"type": "array", "items": {"type": "null"}, "maxItems": 0},
    {"type": "array", "items": {"type": "number"}, "minItems": 5},
    {"type": "array", "minItems": 2},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
    {"type": "array", "items": [{"type": "integer"}, {"type": "boolean"}, {"type": "null"}]},
    {"prefixItems": [{"const": 1}, {"const": "x"}]},
    {"items": {"type": "string"}},
    {"type": "string", "minLength": 2},
    {"type": "string", "maxLength": 5},
    {"type": "string", "minLength": 3, "maxLength": 8},
    {"type": "string", "minLength": 0, "maxLength": 1},
    {"type": "string", "maxLength": 0},
    {"minLength": 4},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "uuid4"},
    {"type": "string", "format": "email"},
    {"format": "date"},
    {"type": "string", "pattern": "^[a-z]+$"},
    {"type": "string", "pattern": "^\\d{3}-\\d{4}$"},
    {"type": "string", "pattern": "^[A-Z][a-z]{2,5}(-[0-9]+)?$"},
    {"type": "string", "pattern": "^(abc|def)*x?$"},
    {"type": "string", "pattern": "^a.b.c$"},
    {"type": "string", "pattern": "^[^\"\\\\]{1,3}\\.txt$"},
    {"type": "string", "pattern": "^(?:ab)+$"},
    {"type": "string", "pattern": "^x{2}y{1,}z{,2}$"},
    {"type": "string", "pattern": "[a-z]+"},
    {"type": "string", "pattern": "^(?=a)b$"},
    {"type": "string", "pattern": "^a$b$"},
    {"type": "string", "pattern": "^(ab$"},
    {"type": "string", "pattern": "^ab)$"},
    {"type": "string", "pattern": "^*a$"},
    {"type": "string", "pattern": "^\\w+$"},
    {"type": "string", "pattern": "^[\\w]+$"},
    {"type": "string", "pattern": "^\\x41\\u00e9\\t$"},
    {"type": "string", "pattern": "^[\\x00-\\x1F]$"},
    {"type": "string", "pattern": "^a{2,3$"},
    {"type": "string", "pattern": "^a{x}$"},
    {"type": "string", "pattern": "^a\\"},
    {"type": "string", "pattern": "^[abc$"},
    {"type": "string", "pattern": "^é+ü?$"},
    {"type": "string", "pattern": "^\"quoted\"$"},
    {"type": "string", "pattern": "^(a|b)(c|d){2}$"},
    {"type": "string", "pattern": "^((a{2}){2}){2}$"},
    {"type": "string", "pattern": "^]$"},
    {"type": "string", "pattern": "^$"},
    {"type": "integer", "minimum": 0},
    {"type": "integer", "minimum": 1},
    {"type": "integer", "minimum": 5},
    {"type": "integer", "minimum": 10},
    {"type": "integer", "minimum": 123},
    {"type": "integer", "minimum": 987654},
    {"type": "integer", "minimum": -1},
    {"type": "integer", "minimum": -17},
    {"type": "integer", "maximum": 0},
    {"type": "integer", "maximum": 9},
    {"type": "integer", "maximum": 250},
    {"type": "integer", "maximum": -3},
    {"type": "integer", "maximum": -300},
    {"type": "integer", "minimum": 0, "maximum": 9},
    {"type": "integer", "minimum": 1, "maximum": 100},
    {"type": "integer", "minimum": 17, "maximum": 4321},
    {"type": "integer", "minimum": -10, "maximum": 10},
    {"type": "integer", "minimum": -256, "maximum": -5},
    {"type": "integer", "minimum": 5, "maximum": 5},
    {"type": "integer", "minimum": 99, "maximum": 101},
    {"type": "integer", "minimum": 0, "maximum": 1000000},
    {"type": "integer", "exclusiveMinimum": 0},
    {"type": "integer", "exclusiveMaximum": 100},
    {"type": "integer", "exclusiveMinimum": 1.5, "exclusiveMaximum": 9.5},
    {"type": "integer", "minimum": 2.5, "maximum": 7.2},
    {"type": "integer", "minimum": -9223372036854775807},
    {"type": "integer", "maximum": 9223372036854775806},
    {"type": "number", "minimum": 0, "maximum": 1},
    {"const": "fixed"},
    {"const": 42},
    {"const": 1.5},
    {"const": None},
    {"const": True},
    {"const": {"a": [1, 2, {"b": None}], "c": "d"}},
    {"const": "quote\" backslash\\ newline\n tab\t é 😀"},
    {"const": 1e100},
    {"const": 1.0},
    {"const": 0.1},
    {"const": -0.0},
    {"const": 12345678901234567890},
    {"enum": ["red", "green", "blue"]},
    {"enum": [1, 2, 3]},
    {"enum": ["a", 1, None, True, {"x": 1}, [1]]},
    {"type": "string", "enum": ["x", "y"]},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
    {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
               {"type": "object", "properties": {"b": {"type": "integer"}}}]},
    {"oneOf": [{"const": "x"}], "anyOf": [{"const": "y"}]},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
               {"type": "object", "properties": {"b": {"type": "integer"}}}]},
    {"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}]},
    {"allOf": [{"anyOf": [{"type": "object", "properties": {"x": {"type": "string"}}},
                          {"type": "object", "properties": {"y": {"type": "string"}}}]},
               {"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"]}]},
    {"type": "object", "allOf": [{"properties": {"p": {"type": "null"}}, "required": ["p"]}]},
    {"type": "string", "allOf": [{"enum": ["u", "v"]}, {"enum": ["v"]}]},
    {"allOf": [{"type": "integer"}, {"type": "string"}]},
    {"$ref": "#/definitions/item", "definitions": {"item": {"type": "integer"}}},
    {"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}},
    {"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array",
                                                                        "items": {"$ref": "#/$defs/node"}},
                                                         "name": {"type": "string"}}, "required": ["name"]}},
     "$ref": "#/$defs/node"},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}, "b": {"$ref": "#/$defs/x"}},
     "$defs": {"x": {"enum": [1, 2]}}},
    {"type": "array", "items": {"$ref": "#/prefixItems/0"}, "prefixItems": [{"type": "string"}]},
    {"$ref": "#/definitions/missing"},
    {"$ref": "https://example.com/schema.json"},
    {"$ref": 5},
    {"$ref": "#/items/3", "items": [{"type": "string"}]},
    {"$ref": "#/a~1b", "a~1b": {"type": "string"}},
    {"type": "nonsense"},
    {"type": 7},
    {"type": []},
    {"anyOf": []},
    {"anyOf": "x"},
    {"enum": []},
    {"enum": "x"},
    {"type": "array", "minItems": -1},
    {"type": "array", "maxItems": 1.5},
    {"type": "string", "maxLength": "3"},
    {"type": "string", "pattern": 5},
    {"type": "string", "format": 5},
    {"type": "integer", "minimum": "0"},
    {"type": "object", "properties": []},
    {"type": "object", "additionalProperties": 5},
    {"properties": {"a": 5}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "bogus"}}}}},
    {"anyOf": [{"type": "string"}, {"type": "wrong"}]},
    {"type": "array", "items": [{"type": "string"}, 3]},
    {"type": "object", "properties": {"root": {"type": "string"}, "space": {"type": "integer"},
                                      "value": {"type": "boolean"}}},
    {"type": "object", "properties": {"string": {"type": "string", "minLength": 1},
                                      "char": {"type": "string", "maxLength": 1}}},
    {"type": "object", "properties": {"date": {"type": "string", "format": "date"},
                                      "number": {"type": "number"}}},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[0-9]+$"},
                                      "b": {"type": "string", "pattern": "^[0-9]+$"}}},
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 5},
                                      "b": {"type": "integer", "minimum": 1, "maximum": 5}}},
    {"type": "object", "properties": {"list": {"type": "array", "items": {"type": "object",
                                                                          "properties": {"k": {"type": "string"}}}}}},
    {"title": "Person", "description": "ignored", "type": "object", "properties": {
        "firstName": {"type": "string", "description": "The person's first name."},
        "lastName": {"type": "string"},
        "age": {"description": "Age in years", "type": "integer", "minimum": 0}}},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                      "when": {"type": "string", "format": "date-time"},
                                      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                                      "score": {"type": "number"}, "ok": {"type": "boolean"}},
     "required": ["id", "when", "ok"]},
    '{"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "integer"}, "m": {"type": "integer"}}}',
    '{"type": "object", "properties": {"a": {"type": "string"}, "a": {"type": "integer"}}}',
    '{"const": 1.10}',
    '{"const": 1E3}',
    '{"const": -0}',
    '{"enum": [0.5, 2e-7, 123456789012345678]}',
    '{"const": "\\u00e9\\ud83d\\ude00"}',
    '{"const": "\\u0000\\u001f\\u007f"}',
    '[1, 2]',
    '"just a string"',
    'null',
    '42',
]


def random_schema(rng: random.Random, depth: int = 0):
    """A random schema mixing the supported keywords."""
    k = rng.random()
    if depth > 2 or k < 0.35:
        return rng.choice([
            {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
            {"type": "string", "maxLength": rng.randint(1, 6)},
            {"type": "integer", "minimum": rng.randint(-50, 50)},
            {"type": "integer", "minimum": rng.randint(-20, 0), "maximum": rng.randint(1, 300)},
            {"enum": rng.sample(["a", "b", "c", 1, 2, None, True], rng.randint(1, 4))},
            {"const": rng.choice(["k", 7, None, False])},
            {"type": "string", "format": rng.choice(["date", "time", "date-time", "uuid"])},
            {"type": "string", "pattern": rng.choice(["^[a-z]{2,4}$", "^[0-9]+(\\.[0-9]+)?$", "^(yes|no)$"])},
        ])
    if k < 0.65:
        props = {}
        for i in range(rng.randint(1, 4)):
            props[rng.choice(["id", "name", "value", "x", "y", "items", "meta"]) + str(i)] = random_schema(rng, depth + 1)
        s = {"type": "object", "properties": props}
        names = list(props)
        req = rng.sample(names, rng.randint(0, len(names)))
        if req:
            s["required"] = req
        ap = rng.random()
        if ap < 0.2:
            s["additionalProperties"] = False
        elif ap < 0.3:
            s["additionalProperties"] = random_schema(rng, depth + 1)
        return s
    if k < 0.85:
        s = {"type": "array", "items": random_schema(rng, depth + 1)}
        if rng.random() < 0.5:
            s["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.5:
            s["maxItems"] = rng.randint(s.get("minItems", 0), 4)
        return s
    return {rng.choice(["anyOf", "oneOf"]): [random_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}


def schema_corpus(n_random: int = 60, seed: int = 99) -> list[tuple[str, object]]:
    rng = random.Random(seed)
    out = [(f"hand-{i:03d}", s) for i, s in enumerate(HAND)]
    out += [(f"sdist-{i:03d}", s) for i, s in enumerate(sdist_test_schemas())]
    out += [(f"random-{i:03d}", random_schema(rng)) for i in range(n_random)]
    return out


def schema_text(schema) -> str:
    """The JSON text sent for a schema (raw strings are sent as they are)."""
    return schema if isinstance(schema, str) else json.dumps(schema, ensure_ascii=False)

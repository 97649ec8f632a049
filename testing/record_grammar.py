"""Record what llama.cpp b11192 says about grammars into tests/oracle/grammar/ (the tests replay these records).

    python -m testing.record_grammar vocab      # token pieces and end-of-generation ids, both models
    python -m testing.record_grammar parse      # the GBNF parser's rules (or refusal) for the grammar corpus
    python -m testing.record_grammar masks      # grammar sampler masks along random token walks (SmolLM2)
    python -m testing.record_grammar schemas    # json_schema_to_grammar texts and errors for the schema corpus
    python -m testing.record_grammar chat       # chat-template response-format grammars and parsed contents
    python -m testing.record_grammar server     # llama-server: constrained requests, grammar texts, errors
    python -m testing.record_grammar all

Developer tool: needs the oracle build (testing/build_oracle.sh) and the models. Each part rewrites its files.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

from testing.grammar_corpus import grammar_corpus
from testing.grammar_oracle import GrammarSampler, Shim, eog_ids, init_in_child, token_pieces
from testing.libllama import Llama
from testing.oracle import REPO, model_path

OUT = REPO / "tests" / "oracle" / "grammar"


def _safe(obj):
    """strings that are not valid UTF-8 (held with surrogate escapes) are stored as {"utf8_hex": ...}"""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return {"utf8_hex": obj.encode("utf-8", "surrogateescape").hex()}
    if isinstance(obj, dict):
        return {k: _safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_safe(v) for v in obj]
    return obj


def write(name: str, obj) -> None:
    """JSON with one record a line (readable diffs, small files)"""
    obj = _safe(obj)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    lists = {k: v for k, v in obj.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
    head = {k: v for k, v in obj.items() if k not in lists}
    parts = [json.dumps(k, ensure_ascii=False) + ": " + json.dumps(v, ensure_ascii=False) for k, v in head.items()]
    for k, v in lists.items():
        rows = ",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in v)
        parts.append(json.dumps(k) + ": [\n" + rows + "\n]")
    path.write_text("{" + ",\n".join(parts) + "}\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def ids_sha(mask: np.ndarray) -> str:
    """sha256 of the allowed token ids (int32 little-endian, ascending): the form the records keep."""
    return sha(np.flatnonzero(mask).astype("<i4").tobytes())


def _keep_text(rec: dict, key: str, text: str, full: bool) -> None:
    """a text in full, or its sha256 (UTF-8 bytes, invalid bytes as they are) to keep the records small"""
    if full:
        rec[key] = text
    else:
        rec[key + "_sha256"] = sha(text.encode("utf-8", "surrogateescape"))


def rules_sha(rules, symbols) -> str:
    canon = json.dumps({"rules": rules, "symbols": sorted(symbols.items())}, separators=(",", ":"))
    return sha(canon.encode())


# -- vocab ---------------------------------------------------------------------------------------------------

def record_vocab() -> None:
    for name in ("smollm2", "gemma3"):
        with Llama(model_path(name), vocab_only=True) as L:
            pieces = token_pieces(L)
            eog = eog_ids(L)
        blob = b"".join(len(p).to_bytes(4, "little") + p for p in pieces)
        write(f"vocab_{name}.json", {
            "model": model_path(name).name, "n_vocab": len(pieces), "eog_ids": eog,
            "pieces_sha256": sha(blob),
            "pieces_sha256_form": "sha256 over every piece as uint32le length + bytes, in id order",
            "sample": {str(i): pieces[i].hex() for i in list(range(0, 20)) + [198, 220, 1000, 30000, len(pieces) - 1]},
        })


# -- parse ---------------------------------------------------------------------------------------------------

def record_parse() -> None:
    shim = Shim()
    records = []
    with Llama(model_path("smollm2"), vocab_only=True) as L:
        for gid, text in grammar_corpus():
            r = shim.parse(text)
            init = init_in_child(L, text)
            rec = {"id": gid, "text": text, "parse_ok": r["ok"], "init": init}
            if r["ok"]:
                rec["n_rules"] = len(r["rules"])
                rec["rules_sha256"] = rules_sha(r["rules"], r["symbols"])
                if len(json.dumps(r["rules"])) < 600:
                    rec["rules"] = r["rules"]
                    rec["symbols"] = r["symbols"]
            records.append(rec)
    write("parse.json", {"form": "rules_sha256 = sha256 of compact JSON {rules, symbols: sorted [name, id]}",
                         "records": records})


# -- masks ---------------------------------------------------------------------------------------------------

def _partial_end(piece: bytes) -> bool:
    """does the piece end inside a UTF-8 sequence or start with a continuation byte"""
    if not piece:
        return False
    if 0x80 <= piece[0] < 0xC0:
        return True
    i = len(piece) - 1
    while i > 0 and 0x80 <= piece[i] < 0xC0:
        i -= 1
    lead = piece[i]
    need = 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4 if lead >> 3 == 30 else 1
    return len(piece) - i < need


def walk_grammars() -> list[tuple[str, str]]:
    """The grammars walked: every corpus grammar the oracle initialises (parse.json, recorded first), plus
    JSON-schema grammars."""
    out = []
    shim = Shim()
    parsed = json.loads((OUT / "parse.json").read_text(encoding="utf-8"))["records"]
    for rec in parsed:
        if rec["init"] == "ok" and len(rec["text"]) < 20000:
            out.append((rec["id"], rec["text"]))
    from testing.schema_corpus import schema_corpus
    for sid, schema in schema_corpus()[:60]:
        r = shim.schema(schema)
        if r["ok"]:
            out.append((f"schema-{sid}", r["grammar"]))
    return out


def record_masks(n_steps: int = 24, seed: int = 7) -> None:
    rng = random.Random(seed)
    records = []
    with Llama(model_path("smollm2"), vocab_only=True) as L:
        pieces = token_pieces(L)
        eog = set(eog_ids(L))
        all_ids = np.arange(L.n_vocab, dtype=np.int32)
        partial_tokens = [t for t, p in enumerate(pieces) if _partial_end(p)]
        for gid, text in walk_grammars():
            with GrammarSampler(L, text) as g:
                if not g.ok:
                    continue
                steps = []
                for _ in range(n_steps):
                    mask = g.allowed(all_ids)
                    allowed = np.flatnonzero(mask)
                    # a random subset of candidates (with an EOG token and a few partial-UTF-8 tokens)
                    sub = rng.sample(range(L.n_vocab), 12) + [2, 0] + rng.sample(partial_tokens, 4)
                    if len(allowed):
                        sub += [int(x) for x in rng.sample(list(allowed), min(6, len(allowed)))]
                    sub_mask = g.allowed(np.asarray(sub, dtype=np.int32))
                    step = {"n_allowed": int(mask.sum()), "allowed_sha256": ids_sha(mask), "subset": sub,
                            "subset_allowed": "".join("1" if x else "0" for x in sub_mask)}
                    if len(allowed) <= 64:
                        step["allowed"] = [int(x) for x in allowed]
                    choices = [int(t) for t in allowed if t not in eog]
                    if not choices or (any(t in eog for t in allowed) and rng.random() < 0.1):
                        ends = [int(t) for t in allowed if t in eog]
                        if ends:
                            step["token"] = ends[0]
                            g.accept(ends[0])
                        steps.append(step)
                        break
                    r = rng.random()
                    pool = choices
                    if r < 0.3:
                        part = [t for t in choices if _partial_end(pieces[t])]
                        pool = part or choices
                    elif r < 0.55:
                        pool = sorted(choices, key=lambda t: -len(pieces[t]))[:20]
                    tok = rng.choice(pool)
                    step["token"] = tok
                    steps.append(step)
                    g.accept(tok)
                records.append({"id": gid, "text": text, "steps": steps})
                print(gid, len(steps), file=sys.stderr)
    write("masks_smollm2.json", {"model": model_path("smollm2").name,
                                 "form": "allowed_sha256 = sha256 of the allowed ids as int32 little-endian, "
                                         "ascending; subset_allowed = llama_sampler_apply on `subset`",
                                 "records": records})


# -- schemas -------------------------------------------------------------------------------------------------

def record_schemas() -> None:
    from testing.schema_corpus import schema_corpus, schema_text
    shim = Shim()
    records = []
    for sid, schema in schema_corpus(n_random=240):
        text = schema_text(schema)
        r = shim.schema(text)
        rec = {"id": sid, "schema": text, "ok": r["ok"]}
        if r["ok"]:
            _keep_text(rec, "grammar", r["grammar"], len(records) < 150)
        else:
            rec["error"] = r["error"]
            rec["kind"] = r["kind"]
        records.append(rec)
    write("schemas.json", {"what": "json_schema_to_grammar(schema) of libllama-common (GBNF mode)",
                           "records": records})


# -- chat (the template's response format, through libllama-common) -----------------------------------------------

CONTENT_SAMPLES = [
    '{"a": 1}', '```json\n{"a":1}\n```', '  {"a"', '', '``', '{"a": 12', '{"a": 1} ',
    '\n\n {"x": [1, 2, {"y": null}]}\n', '```json {"a": "b\\"c"} ```', '```json\n{"a": 1.5e', '{"s": "\\u00e9\\u',
    '{"s": "é', ' ```js', '```json\n', '{"k": tru', '{"k": -', '{}', '{ }  ', '[1,2]', '"str"', '12.5', 'null',
    '```json\n{"a":1}\n`', '\t\n', '{"a": [1, 2', '{"a": "x"}\n\n\n', '```json\n\n  [true, false]  \n```',
]


def record_chat() -> None:
    from testing.schema_corpus import schema_corpus, schema_text
    shim = Shim()
    grammars, contents = [], []
    msgs = [{"role": "user", "content": "hi"}]
    with Llama(model_path("smollm2"), vocab_only=True) as L:
        tmpls = shim.templates(L.model)
        for sid, schema in schema_corpus(n_random=120):
            text = schema_text(schema)
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            if not isinstance(obj, dict) or not obj:
                continue
            r = shim.chat_apply(tmpls, msgs, text)
            rec = {"id": sid, "schema": text, "ok": r["ok"]}
            if r["ok"]:
                _keep_text(rec, "grammar", r["grammar"], len(grammars) < 40)
                rec["generation_prompt"] = r["generation_prompt"]
                rec["lazy"] = r["lazy"]
            else:
                rec["error"] = r["error"]
            grammars.append(rec)
        r = shim.chat_apply(tmpls, msgs, json.dumps({"type": "object"}))
        full = ('```json\n{"name": "x", "list": [1, 2.5, -3e4, true, false, null, {"n": "\\n"}], '
                '"u": "日本 😀"}\n```')
        samples = [x.encode() for x in CONTENT_SAMPLES] + [b'{"s": "\xe2\x82'] \
            + [full.encode()[:i] for i in range(0, len(full.encode()), 3)]
        for raw in samples:
            for partial in (False, True):
                o = shim.chat_parse(r["parser"], r["generation_prompt"], r["format"], raw, partial)
                contents.append({"text_hex": raw.hex(), "is_partial": partial, "ok": o["ok"],
                                 "content_hex": o.get("content", "").encode("utf-8", "surrogateescape").hex(),
                                 "empty": o.get("empty"), "error": o.get("error")})
    write("chat.json", {"model": model_path("smollm2").name,
                        "what": "common_chat_templates_apply (jinja, reasoning_format deepseek, thinking off) with "
                                "a json_schema: grammar or error; common_chat_parse of outputs for {type: object}",
                        "grammars": grammars, "contents": contents})


# -- server --------------------------------------------------------------------------------------------------

def _prompt_tokens(srv, endpoint: str, body: dict) -> list[int] | None:
    """The prompt's token ids as the server evaluates them (chat: the rendered template)."""
    from testing.oracle import LlamaServer  # noqa: F401
    if endpoint == "/completion":
        text = body["prompt"]
    else:
        st, tmpl = srv.post_json("/apply-template", {"messages": body["messages"]})
        if st != 200:
            return None
        text = tmpl["prompt"]
    st, tok = srv.post_json("/tokenize", {"content": text, "add_special": True, "parse_special": True})
    return tok["tokens"] if st == 200 else None


def record_server() -> None:
    from testing.grammar_requests import e2e_requests, error_requests, grammar_text_schemas
    from testing.oracle import LlamaServer
    texts, errors, e2e = [], [], []
    with LlamaServer(model_path("smollm2")) as srv:
        for schema in grammar_text_schemas():
            st, body = srv.post_json("/completion", {"prompt": "x", "n_predict": 1, "json_schema": schema})
            rec = {"schema": schema, "completion_status": st}
            if st == 200:
                rec["completion_grammar"] = body["generation_settings"]["grammar"]
            else:
                rec["completion_error"] = body
            st, body = srv.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                               "max_tokens": 1, "verbose": True,
                                                               "response_format": {"type": "json_schema",
                                                                                   "json_schema": {"schema": schema}}})
            rec["chat_status"] = st
            if st == 200:
                rec["chat_grammar"] = body["__verbose"]["generation_settings"]["grammar"]
                rec["chat_generation_prompt"] = body["__verbose"]["generation_settings"]["generation_prompt"]
            else:
                rec["chat_error"] = body
            texts.append(rec)
        for endpoint, req in error_requests():
            st, hdr, raw = srv.post(endpoint, req)
            errors.append({"endpoint": endpoint, "request": req, "status": st, "body": raw.decode("utf-8")})
            print("error", endpoint, st, raw[:120], file=sys.stderr)
        for rid, endpoint, req in e2e_requests():
            st, hdr, raw = srv.post(endpoint, req)
            body = json.loads(raw)
            rec = {"id": rid, "endpoint": endpoint, "request": req, "status": st, "response": body,
                   "prompt_tokens": _prompt_tokens(srv, endpoint, req)}
            e2e.append(rec)
            print("e2e", rid, st, json.dumps(body)[:160], file=sys.stderr)
    write("server_grammar_texts.json", {"model": model_path("smollm2").name, "records": texts})
    write("server_errors.json", {"model": model_path("smollm2").name, "records": errors})
    write("server_e2e.json", {"model": model_path("smollm2").name,
                              "server": "llama-server b11192 -t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui",
                              "records": e2e})


def record_tokens() -> None:
    """tokenize(text, add_special=false, parse_special=true) of the generation prompts the replays feed to
    grammars (inputs for the tests, which do not depend on bankml's tokenizer)"""
    from testing.verify_grammar_e2e import tokenize
    texts = ["<|im_start|>assistant\n", "Sure", "Sure, ", " Sure", "{", " world", "code {", "zebra crossing", "x"]
    with Llama(model_path("smollm2"), vocab_only=True) as L:
        out = {t: tokenize(L, t, False, True) for t in texts}
    write("tokens_smollm2.json", {"what": "llama_tokenize(vocab, text, add_special=false, parse_special=true)",
                                  "tokens": out})


def record_e2e_more() -> None:
    from testing.grammar_requests import e2e_more_requests
    from testing.oracle import LlamaServer
    recs = []
    with LlamaServer(model_path("smollm2")) as srv:
        for rid, endpoint, req in e2e_more_requests():
            st, hdr, raw = srv.post(endpoint, req)
            recs.append({"id": rid, "endpoint": endpoint, "request": req, "status": st, "response": json.loads(raw),
                         "prompt_tokens": _prompt_tokens(srv, endpoint, req)})
            print("e2e", rid, st, raw[:150], file=sys.stderr)
    write("server_e2e_more.json", {"model": model_path("smollm2").name,
                                   "server": "llama-server b11192 -t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui",
                                   "records": recs})


def record_lazy() -> None:
    from testing.grammar_requests import lazy_requests
    from testing.oracle import LlamaServer
    recs = []
    with LlamaServer(model_path("smollm2")) as srv:
        for rid, endpoint, req in lazy_requests():
            st, hdr, raw = srv.post(endpoint, req)
            rec = {"id": rid, "endpoint": endpoint, "request": req, "status": st}
            if st == 200:
                rec["response"] = json.loads(raw)
                rec["prompt_tokens"] = _prompt_tokens(srv, endpoint, req)
            else:
                rec["body"] = raw.decode("utf-8")
            recs.append(rec)
            print("lazy", rid, st, raw[:150], file=sys.stderr)
    write("server_lazy.json", {"model": model_path("smollm2").name, "records": recs})


PARTS = {"tokens": record_tokens, "lazy": record_lazy, "e2e_more": record_e2e_more, "vocab": record_vocab, "parse": record_parse, "masks": record_masks, "schemas": record_schemas,
         "chat": record_chat, "server": record_server}


def main(argv: list[str]) -> None:
    # the machine is shared: a runaway oracle (a grammar whose expansion never ends) must not take it down
    import resource
    cap = 8 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    names = argv or ["all"]
    for name in (list(PARTS) if names == ["all"] else names):
        PARTS[name]()


if __name__ == "__main__":
    main(sys.argv[1:])

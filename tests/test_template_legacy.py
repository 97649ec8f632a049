# bankml.chat.legacy against libllama b11192's llama_chat_apply_template
# (tests/oracle/template/legacy-builtin.json.gz, recorded by testing/record_template_legacy.py)

import gzip
import hashlib
import json
from functools import lru_cache
from pathlib import Path

import pytest

from bankml.chat import legacy as tl
from bankml.chat.messages import ChatMessage, ContentPart

RECORD = Path(__file__).parent / "oracle" / "template" / "legacy-builtin.json.gz"


@lru_cache(maxsize=1)
def record() -> dict:
    with gzip.open(RECORD) as f:
        return json.loads(f.read().decode("utf-8", "surrogateescape"))


def _text(entry) -> bytes:
    if entry["kind"] == "sdist":
        from _template_oracle import sdist_templates
        text = sdist_templates()[entry["template"]]
        assert hashlib.sha256(text).hexdigest() == entry["sha256"]
        return text
    return entry["text"].encode("utf-8", "surrogateescape")


def _same(got: bytes | None, want) -> bool:
    if want is None or got is None:
        return got is want
    if isinstance(want, dict):
        return hashlib.sha256(got).hexdigest() == want["sha256"] and len(got) == want["len"]
    return got == want.encode("utf-8", "surrogateescape")


def test_builtin_names():
    assert list(tl.BUILTIN_TEMPLATES) == record()["builtin_templates"]


@pytest.mark.parametrize("kind", ["name", "sdist", "gguf-smollm2", "probe"])
def test_apply_template_matches_libllama(kind):
    rec = record()
    n = 0
    bad = []
    for entry in rec["texts"]:
        if entry["kind"] != kind:
            continue
        src = _text(entry)
        chats = rec["conversations"] if entry["conversations"] == "all" else rec["probe_conversations"]
        assert len(chats) == len(entry["answers"])
        for chat, (with_gen, without) in zip(chats, entry["answers"]):
            pairs = [(r.encode("utf-8", "surrogateescape"), c.encode("utf-8", "surrogateescape")) for r, c in chat]
            for add_ass, want in ((True, with_gen), (False, without)):
                got = tl.apply_template(src, pairs, add_ass)
                n += 1
                if not _same(got, want):
                    bad.append((entry.get("template") or entry["text"][:60], chat[:2], add_ass, got, want))
    assert n > 0
    assert not bad, f"{len(bad)} of {n} differ; first: {bad[0]}"


def test_every_builtin_template_has_answers():
    # each name formats the whole corpus (none answers -1), and the corpus tells the names apart
    rec = record()
    outputs = {}
    for entry in rec["texts"]:
        if entry["kind"] == "name":
            assert all(a is not None for pair in entry["answers"] for a in pair)
            outputs[entry["text"]] = json.dumps(entry["answers"])
    assert len(outputs) == len(rec["builtin_templates"])
    # granite-4.0 and granite-4.1 format identically in b11192; every other name is told apart
    assert outputs["granite-4.0"] == outputs["granite-4.1"]
    assert len(set(outputs.values())) == len(outputs) - 1


def test_unknown_template():
    assert tl.detect("not a template") is None
    assert tl.apply_template(b"not a template", [(b"user", b"hi")], True) is None
    assert not tl.verify("not a template")
    with pytest.raises(tl.LegacyTemplateError, match="this custom template is not supported, try using --jinja"):
        tl.legacy_prompt("not a template", [ChatMessage("user", "hi")], True)


def test_message_contents_join_parts():
    # common_chat_templates_apply_legacy: content, then parts joined with "\n" once the text is not empty
    m = ChatMessage("user", content_parts=[ContentPart("text", ""), ContentPart("text", "a"),
                                           ContentPart("text", ""), ContentPart("text", "b")])
    assert tl.message_contents([m]) == [(b"user", b"a\n\nb")]
    assert tl.legacy_prompt("chatml", [m], True) == "<|im_start|>user\na\n\nb<|im_end|>\n<|im_start|>assistant\n"


APPLY_RECORDS = sorted(p.name[:-len(".json.gz")] for p in RECORD.parent.glob("legacy-*.json.gz")
                       if p.name != RECORD.name)


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("name", APPLY_RECORDS)
def test_apply_template_records(name, smollm2_path, gemma3_path):
    # llama-server --no-jinja's /apply-template answers to the 149 bodies of testing/template_cases.py
    # (recorded by testing/record_template.py): prompts, and the error status and body of what it refuses
    import _template_oracle as O
    from bankml.chat.request import ServerChatOptions
    from bankml.models.gguf import read_header_file
    from bankml.chat.template import ChatTemplates
    rec = O.load_record(name)
    assert rec["startup"] == "ok" and "--no-jinja" in rec["args"]
    header = read_header_file({"smollm2": smollm2_path, "gemma3": gemma3_path}[rec["model"]])
    templates = ChatTemplates.from_gguf(header, override=O.template_override(rec))
    bodies = O.cases()
    opt = ServerChatOptions(use_jinja=False)
    bad = [(case_id, bodies[case_id]["_kind"], (status, body), O.answer(templates, bodies[case_id], now, opt))
           for case_id, now, status, body in rec["results"]
           if O.answer(templates, bodies[case_id], now, opt) != (status, body)]
    assert len(rec["results"]) >= 100
    assert not bad, f"{len(bad)} of {len(rec['results'])} differ; first: {bad[:2]}"

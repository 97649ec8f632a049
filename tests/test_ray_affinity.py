"""bankml.ray.affinity, the routing key of bankml's Ray Serve replicas (needs no Ray): what shares a prefix
shares the first hashes of the chain, what does not, does not."""

from __future__ import annotations

import json

from bankml.ray import affinity


def _chat(messages, path="/v1/chat/completions", **extra):
    return affinity.of("POST", path, json.dumps({"messages": messages, **extra}).encode())


def test_a_follow_up_shares_the_conversation_chain():
    turn1 = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    turn2 = turn1 + [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]
    a, b = _chat(turn1), _chat(turn2)
    assert len(a.blocks) == 2 and len(b.blocks) == 4 and b.blocks[:2] == a.blocks
    doc = "d" * (3 * affinity.BLOCK)
    q1, q2 = _chat([{"role": "user", "content": doc + "Why?"}]), _chat([{"role": "user", "content": doc + "How?"}])
    assert q1.blocks[:3] == q2.blocks[:3] and q1.blocks[3] != q2.blocks[3]
    other = _chat([{"role": "system", "content": "Be long."}, {"role": "user", "content": "Hi"}])
    assert other.blocks[0] != a.blocks[0] and other.blocks[1] != a.blocks[1]
    # an edit in the middle keeps the blocks before it only
    edited = turn1[:1] + [{"role": "user", "content": "Hey"}] + turn2[2:]
    assert _chat(edited).blocks[0] == a.blocks[0] and _chat(edited).blocks[1] != a.blocks[1]


def test_what_precedes_the_messages_opens_the_chain():
    m = [{"role": "user", "content": "Hi"}]
    assert _chat(m, "/v1/messages", system="A").blocks[0] != _chat(m, "/v1/messages", system="B").blocks[0]
    assert _chat(m, "/api/chat", model="smollm2").model == "smollm2"


def test_text_prompts_in_whole_blocks():
    n = affinity.BLOCK
    p = "x" * (2 * n + 5)
    key = affinity.of("POST", "/completion", json.dumps({"prompt": p}).encode())
    longer = affinity.of("POST", "/completion", json.dumps({"prompt": p + "y" * n}).encode())
    assert len(key.blocks) == 2 and longer.blocks[:2] == key.blocks and len(longer.blocks) == 3
    assert affinity.of("POST", "/completion", json.dumps({"prompt": "short"}).encode()) is None
    ids = affinity.of("POST", "/completion", json.dumps({"prompt": list(range(n // 4 * 2))}).encode())
    assert len(ids.blocks) == 2


def test_no_key_where_there_is_no_prompt():
    assert affinity.of("GET", "/v1/chat/completions", b"") is None
    assert affinity.of("POST", "/tokenize", b'{"content": "hi"}') is None
    assert affinity.of("POST", "/v1/chat/completions", b"not json") is None
    assert affinity.of("POST", "/v1/chat/completions", b"[1, 2]") is None

"""Records llama-server b11192's answers to Anthropic Messages requests (POST /v1/messages,
/v1/messages/count_tokens) into tests/oracle/server/anthropic.json, in the sessions' format of
testing/record_server.py (replayed by tests/test_anthropic.py). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_anthropic.py [--no-check] [--port-base 8191]

Each session runs on a fresh llama-server (SmolLM2-135M-Instruct Q4_1, written `$MODEL`), twice unless
--no-check: a session whose two runs differ after normalization is reported and left out.
Sampling is greedy (temperature 0) except in the `seeded` session, whose server has a fixed --seed (the
Anthropic body has no seed field: llama-server's rewrite passes temperature, top_p, top_k only).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.record_server import record_file  # noqa: E402
from testing.server_sessions import flags, post  # noqa: E402

M = "/v1/messages"
C = "/v1/messages/count_tokens"


def msg(content, role="user") -> dict:
    return {"role": role, "content": content}


def req(messages, max_tokens=12, **kw) -> dict:
    return {"model": "smollm2", "max_tokens": max_tokens, "messages": messages, "temperature": 0, **kw}


HI = [msg("Hello")]
TURNS = [msg([{"type": "text", "text": "My name is Ada."}]), msg("Nice to meet you, Ada.", "assistant"),
         msg([{"type": "text", "text": "What is my name?"}, {"type": "text", "text": " Answer briefly."}])]
BLOCKS_SYSTEM = [{"type": "text", "text": "You are terse. "}, {"type": "image", "source": {}},
                 {"type": "text", "text": "Answer in one line."}]
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def answers() -> list[dict]:
    s = [
        post(M, req(HI)),
        post(M, req(HI, system="Be brief.")),
        post(M, req([msg("Name a colour.")], system=BLOCKS_SYSTEM)),
        post(M, req(TURNS, 16)),
        post(M, req([msg("Tell me about the sea.")], 40, stop_sequences=[" sea", "water"])),
        post(M, req(HI, 1)),
        post(M, req([msg("What is 2+2? Answer with the number only.")], 64)),
        post(M, {"model": "smollm2", "messages": [msg("Say yes.")], "temperature": 0, "top_k": 1,
                 "top_p": 0.5}),
        post(M, req([msg("Hi"), msg([{"type": "thinking", "thinking": "greet back"},
                                     {"type": "text", "text": "Hello!"}], "assistant"), msg("And now?")])),
        post(M, req([msg("Hi"), {"role": "assistant"}, msg("Again")])),
        post(M, req(HI, system="x-anthropic-billing-header: cc_version=2.1; cch=a5145; You are helpful.",
                    metadata={"user_id": "u-1"}, thinking={"type": "enabled", "budget_tokens": 100})),
        post(M, req([msg([{"type": "text", "text": "Describe"},
                          {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                       "data": PNG}}])])),
        post(M, req([msg([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}])])),
        post(M, req([msg([{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}])])),
        # streams
        post(M, req(HI, stream=True)),
        post(M, req([msg("Name a colour.")], system=BLOCKS_SYSTEM, stream=True)),
        post(M, req(TURNS, 16, stream=True)),
        post(M, req([msg("Tell me about the sea.")], 40, stop_sequences=[" sea", "water"], stream=True)),
        post(M, req(HI, 1, stream=True)),
        post(M, req([msg("What is 2+2? Answer with the number only.")], 64, stream=True)),
        post(M, req([msg("Café, naïve, 日本語: repeat these words.")], 24, stream=True)),
        # count_tokens
        post(C, {"model": "smollm2", "messages": HI}),
        post(C, {"model": "smollm2", "system": BLOCKS_SYSTEM, "messages": TURNS}),
        post(C, {"model": "smollm2", "system": "Be brief.", "messages": [msg("Hi")], "max_tokens": 5}),
    ]
    bad = [
        {"raw": "{not json"},
        {"body": [1, 2]},
        {"body": {"model": "smollm2", "max_tokens": 5}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": "hi"}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": []}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": [{"role": "wizard", "content": "hi"}]}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": [{"role": "user", "content": 5}]}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": [{"content": "hi"}]}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": "many", "messages": HI}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": HI, "stop_sequences": "x"}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": HI, "temperature": "hot"}},
        {"body": {"model": "smollm2", "temperature": 0, "max_tokens": 5, "messages": HI, "stream": True, "top_k": "k"}},
    ]
    for b in bad:
        s.append({"method": "POST", "path": M, **b})
    for b in bad[:5]:
        s.append({"method": "POST", "path": C, **b})
    return s


def sessions() -> list[dict]:
    return [
        {"name": "anthropic_messages", "flags": flags(), "note": "Anthropic Messages: answers, streams, "
         "count_tokens, refusals (greedy)", "steps": answers()},
        {"name": "anthropic_seeded", "flags": flags("--seed", "42"), "note": "sampled with a fixed server seed",
         "steps": [post(M, {"model": "smollm2", "max_tokens": 20, "messages": HI, "temperature": 0.9}),
                   post(M, {"model": "smollm2", "max_tokens": 20, "messages": HI, "temperature": 0.9,
                            "top_p": 0.9, "stream": True})]},
    ]


def main() -> None:
    record_file("anthropic.json", sessions(), __doc__, 8191)

if __name__ == "__main__":
    main()

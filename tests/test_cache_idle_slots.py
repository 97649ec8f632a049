"""Idle slots saved to the RAM prompt cache and cleared on a unified cache (`--cache-idle-slots`, the default with
`--cache-ram`), as llama.cpp's own tools/server/tests/unit/test_kv_keep_only_active.py (b11192) checks it: by the
debug tags llama-server prints at `-v` (server-context.cpp:1432, 2442) and "updating prompt cache" (:1643), with
SmolLM2 in place of the suite's hub model. Also: each saved idle slot trims the cache at once (as there).
"""

from __future__ import annotations

import pytest

import server_replay as sr

pytestmark = pytest.mark.slow

FLAGS = ["-c", "4096", "-t", "2", "-np", "2", "--n-predict", "4", "--temp", "0", "--slots", "--cache-ram", "100",
         "--kv-unified", "-v"]
LONG_PROMPT = ("Once upon a time in a land far away, there lived a brave knight who traveled across mountains and "
               "rivers to find the legendary golden sword hidden deep within the enchanted forest of whispers. He "
               "met many creatures along the way including dragons and fairies and wizards who helped him on his "
               "noble quest to save the kingdom.")


class Log:
    def __init__(self, srv):
        self.srv, self.pos = srv, 0

    def drain(self) -> str:
        text = self.srv.read_log().decode(errors="replace")
        new, self.pos = text[self.pos:], len(text)
        return new


def completion(port: int, body: dict) -> dict:
    res = sr.answer_record(*sr.send(port, {"method": "POST", "path": "/completion", "body": body}))
    assert res["status"] == 200, res
    return res["json"]


def test_clear_and_restore(smollm2_path):
    with sr.BankmlServe(["-m", str(smollm2_path)] + FLAGS) as srv:
        log = Log(srv)
        assert "__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__" in log.drain()
        first = completion(srv.port, {"prompt": LONG_PROMPT, "id_slot": 0, "cache_prompt": True})
        original_prompt_n = first["timings"]["prompt_n"]
        assert "__TEST_TAG_CACHE_IDLE_SLOT__" not in log.drain()      # slot 0 is the only one with cells
        completion(srv.port, {"prompt": "The quick brown fox", "id_slot": 1, "cache_prompt": True})
        assert "__TEST_TAG_CACHE_IDLE_SLOT__" in log.drain()          # launching slot 1 clears idle slot 0
        again = completion(srv.port, {"prompt": LONG_PROMPT, "cache_prompt": True})
        assert "updating prompt cache" in log.drain()
        assert again["timings"]["cache_n"] > 0 and again["timings"]["prompt_n"] < original_prompt_n
        completion(srv.port, {"prompt": LONG_PROMPT + " The knight finally reached the castle gates.",
                              "cache_prompt": True})
        assert "__TEST_TAG_CACHE_IDLE_SLOT__" not in log.drain()      # slot 0 kept its cells


def test_disabled_with_flag(smollm2_path):
    with sr.BankmlServe(["-m", str(smollm2_path)] + FLAGS + ["--no-cache-idle-slots"]) as srv:
        log = Log(srv)
        assert "__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__" not in log.drain()
        completion(srv.port, {"prompt": LONG_PROMPT, "id_slot": 0, "cache_prompt": True})
        completion(srv.port, {"prompt": "The quick brown fox", "id_slot": 1, "cache_prompt": True})
        assert "__TEST_TAG_CACHE_IDLE_SLOT__" not in log.drain()

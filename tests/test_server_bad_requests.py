"""Requests llama-server b11192 refuses (tests/oracle/server/bad_requests.json, recorded by
testing/record_server.py): bankml-serve answers each with the same status, compared headers and body.
Each group runs on one bankml-serve started with the group's flags (the default ones, -c 256, --api-key,
--slot-save-path, --no-slots).
"""

from __future__ import annotations

import pytest

import server_replay as sr

GROUPS = sr.load("bad_requests.json")
CASES = [(g, i) for g in GROUPS for i in range(len(g["steps"]))]


def _id(case) -> str:
    g, i = case
    req = g["steps"][i]["request"]
    return f"{g['name']}-{i}-{req['method']}-{req['path']}"


def test_enough_bad_requests_recorded():
    refused = [s for g in GROUPS for s in g["steps"] if s["answer"]["status"] >= 400]
    assert len(refused) >= 40


@pytest.fixture(scope="module")
def servers(smollm2_path):
    started = {}
    def server(g):
        # one server a group, started on first use (setdefault would start one every call)
        if g["name"] not in started:
            started[g["name"]] = sr.BankmlServe(sr.server_argv(g["flags"], str(smollm2_path))).__enter__()
        return started[g["name"]]
    yield server
    for srv in started.values():
        srv.__exit__()


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_refused_like_llama_server(case, servers, smollm2_path):
    g, i = case
    step = g["steps"][i]
    got = sr.normalize(servers(g).answer(step["request"]), str(smollm2_path))
    problems = sr.differences(sr.normalize(step["answer"], ""), got)
    assert not problems, "\n".join(problems)

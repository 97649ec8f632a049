"""Records llama-server b11192 answering embedding and rerank requests of several inputs on several slots (`-np 2`,
3 and 4 on the split KV cache, `-np -1` (auto: 4 slots on a unified KV cache) and `-np 2 -kvu`: each input gets its
own slot and their prompts are decoded together, several sequences in one ubatch) into tests/oracle/server/embeddings_batch.json, replayed in order against a fresh
bankml-serve by tests/test_embeddings_batch.py. Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_embeddings_batch.py

Same shape as testing/record_embeddings_http.py (whose record_session it uses): one session per command line, its
requests in order on one fresh server. Bodies up to 40,000 bytes are kept whole (most requests ask for base64, so
that several vectors fit), longer ones as their sha256 and length.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import testing.record_embeddings_http as http  # noqa: E402

OUT = REPO / "tests" / "oracle" / "server" / "embeddings_batch.json"

TEXTS = ["Hello",
         "The quick brown fox jumps over the lazy dog",
         "I believe the meaning of life is",
         "x " * 40,
         "A machine is a physical system that uses power to apply forces and control movement.",
         "Learning",
         "Paris, capitale de la France, est une grande ville européenne.",
         "one two three four five six seven eight nine ten eleven twelve"]


def pooled_requests() -> list:
    """Requests of 2 to 8 inputs of different lengths (pooling mean, cls, last)."""
    b64 = {"encoding_format": "base64"}
    return [
        ("/v1/embeddings", {"input": ["Hello world", "Hello there"], **b64}),
        ("/v1/embeddings", {"input": TEXTS[:2], **b64}),
        ("/v1/embeddings", {"input": TEXTS[1:4], **b64}),
        ("/v1/embeddings", {"input": TEXTS[:4], **b64}),
        ("/v1/embeddings", {"input": TEXTS[3:8], **b64}),
        ("/v1/embeddings", {"input": TEXTS[:6], **b64}),
        ("/v1/embeddings", {"input": TEXTS, **b64}),
        ("/v1/embeddings", {"input": TEXTS[::-1], **b64}),
        ("/v1/embeddings", {"input": [[12, 34, 56], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "string"], **b64}),
        ("/v1/embeddings", {"input": ["same text", "same text", "same text"], **b64}),
        ("/v1/embeddings", {"input": [" ".join(["word"] * i) for i in range(1, 8)], **b64}),
        ("/v1/embeddings", {"input": ["This is a test " * 20, "short", "This is a test " * 5, "mid length"], **b64}),
        ("/v1/embeddings", {"input": ["float one", "and float two, a little longer"]}),
        ("/v1/embeddings", {"input": TEXTS[4:7], "encoding_format": "float", "embd_normalize": -1}),
        ("/embeddings", {"input": ["llama-server's shape", "of two inputs"]}),
        ("/embeddings", {"content": TEXTS[2:5], "embd_normalize": 0}),
        ("/v1/embeddings", {"input": TEXTS[:2], **b64}),
        ("/v1/embeddings", {"input": ["fine", ""]}),
    ]


def none_requests() -> list:
    return [
        ("/embeddings", {"input": ["one", "two words"]}),
        ("/embeddings", {"input": ["Hello", "The quick brown fox", "I believe"]}),
        ("/embeddings", {"input": [[12, 34, 56], [1, 2, 3, 4, 5, 6, 7, 8], "x", "y z"]}),
        ("/embedding", {"content": ["a", "bb", "ccc dd", "e"]}),
    ]


def rerank_requests() -> list:
    docs = http.DOCS
    return [
        ("/rerank", {"query": "Machine learning is", "documents": docs[:2]}),
        ("/rerank", {"query": "Machine learning is", "documents": docs}),
        ("/rerank", {"query": "What is a machine?", "documents": docs + TEXTS[:4]}),
        ("/rerank", {"query": "Which city?", "documents": ["Paris", "Paris, capitale de la France", "a", "bc"]}),
        ("/rerank", {"query": "q", "documents": TEXTS[:3], "top_n": 2}),
        ("/rerank", {"query": "tie", "documents": ["same"] * 5}),
        ("/rerank", {"query": "Machine learning is", "texts": docs[1:4], "return_text": True}),
        ("/v1/rerank", {"query": "a", "documents": ["Hello", "Hello world", "I believe the meaning of life is"]}),
        ("/rerank", {"query": "numbers", "documents": [" ".join(["n"] * i) for i in range(1, 9)]}),
    ]


def _np(n: int, flags: list[str]) -> list[str]:
    # -np 3: -c 3072, a whole 1,024 cells a slot
    return flags + ["-np", str(n)] + (["-c", "3072"] if n == 3 else [])


SESSIONS = [
    ("mean-np2", _np(2, ["--embeddings", "--pooling", "mean"]), pooled_requests),
    # no mean-np3: llama-server b11192 aborts at start with mean pooling when n_ubatch (512) is not a multiple of
    # -np (the worst-case graph's inp_mean cannot be multiplied: GGML_ASSERT(ggml_can_mul_mat(a, b)))
    ("cls-np3", _np(3, ["--embeddings", "--pooling", "cls"]), pooled_requests),
    ("mean-np4", _np(4, ["--embeddings", "--pooling", "mean"]), pooled_requests),
    ("cls-np2", _np(2, ["--embeddings", "--pooling", "cls"]), pooled_requests),
    ("cls-np4", _np(4, ["--embeddings", "--pooling", "cls"]), pooled_requests),
    ("last-np2", _np(2, ["--embeddings", "--pooling", "last"]), pooled_requests),
    ("last-np3", _np(3, ["--embeddings", "--pooling", "last"]), pooled_requests),
    ("last-np2-b64", _np(2, ["--embeddings", "--pooling", "last", "-b", "64", "-ub", "64"]),
     lambda: pooled_requests()[:12]),
    ("none-np2", _np(2, ["--embeddings", "--pooling", "none"]), none_requests),
    ("none-np3", _np(3, ["--embeddings", "--pooling", "none"]), none_requests),
    ("rerank-np2", _np(2, ["--reranking"]), rerank_requests),
    ("rerank-np3", _np(3, ["--reranking"]), rerank_requests),
    ("rerank-np4", _np(4, ["--reranking"]), rerank_requests),
    # a unified KV cache: -np -1 (auto, llama-server's default: 4 slots, -kvu) and -np 2 -kvu; every slot's sequence
    # in one stream, the batch's rows placed by find_slot and pooled per ubatch
    # (fewer requests than the split-cache sessions: the record's replay stays short)
    ("mean-auto", _np(-1, ["--embeddings", "--pooling", "mean"]), lambda: pooled_requests()[:8]),
    ("cls-auto", _np(-1, ["--embeddings", "--pooling", "cls"]), lambda: pooled_requests()[:5]),
    ("last-auto", _np(-1, ["--embeddings", "--pooling", "last"]), lambda: pooled_requests()[:5]),
    ("last-auto-b64", _np(-1, ["--embeddings", "--pooling", "last", "-b", "64", "-ub", "64"]),
     lambda: pooled_requests()[:8]),
    ("mean-auto-b64", _np(-1, ["--embeddings", "--pooling", "mean", "-b", "64", "-ub", "64"]),
     lambda: pooled_requests()[:8]),
    ("none-auto", _np(-1, ["--embeddings", "--pooling", "none"]), none_requests),
    ("rerank-auto", _np(-1, ["--reranking"]), rerank_requests),
    ("mean-np2-kvu", _np(2, ["--embeddings", "--pooling", "mean", "-kvu"]), lambda: pooled_requests()[:5]),
    ("rerank-np2-kvu", _np(2, ["--reranking", "-kvu"]), lambda: rerank_requests()[:4]),
]


def main() -> None:
    """Records the sessions named on the command line (all by default), each written as soon as it is done (a
    session recorded before under the same name is replaced; the others are kept, in SESSIONS' order)."""
    http.KEEP = 40000
    only = set(sys.argv[1:])
    rec = {"model": "smollm2", "base": "-t 2 -c 4096 --jinja --reasoning off --no-webui", "sessions": []}
    if OUT.exists():
        rec = json.loads(OUT.read_text())
    order = [name for name, _, _ in SESSIONS]
    for name, flags, requests in SESSIONS:
        if only and name not in only:
            continue
        got = http.record_session(name, flags, requests)
        rec["sessions"] = sorted([s for s in rec["sessions"] if s["name"] != name] + [got],
                                 key=lambda s: order.index(s["name"]) if s["name"] in order else len(order))
        OUT.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
        print(name, len(got["requests"]), file=sys.stderr)


if __name__ == "__main__":
    main()

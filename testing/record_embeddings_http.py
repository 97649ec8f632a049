"""Records llama-server b11192's embedding and rerank routes as a client sees them (status and body bytes) into
tests/oracle/server/embeddings_http.json, replayed in order against a fresh bankml-serve by
tests/test_embeddings_server.py. Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_embeddings_http.py

One session per server command line (the usual `-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui` plus the
session's flags), its requests in order on one fresh server: the slot's cache carries from one request to the next
(pooling last reuses a cached prefix; a completion after an embedding reuses the embedding's cells). A body longer
than 20,000 bytes (several vectors, or a row per token) is kept as its sha256 and length.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.oracle import LlamaServer, model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "server" / "embeddings_http.json"
KEEP = 20000

LONG = "This is a test " * 200          # 801 tokens: more than a ubatch
DOCS = ["A machine is a physical system that uses power to apply forces and control movement.",
        "Learning is the process of acquiring new understanding, knowledge and skills.",
        "Machine learning is a field of study in artificial intelligence.",
        "Paris, capitale de la France, est une grande ville européenne."]


def embedding_requests() -> list:
    """The requests of a pooled session (mean, cls): every route and input shape, and the errors."""
    r = [
        ("/embeddings", {"input": "Hello world"}),
        ("/embedding", {"content": "I believe the meaning of life is"}),
        ("/embeddings", {"content": ["Hello", "world"]}),
        ("/v1/embeddings", {"input": "I believe the meaning of life is"}),
        ("/v1/embeddings", {"input": ["string1", "string2", "This is a test"]}),
        ("/v1/embeddings", {"input": [12, 34, 56]}),
        ("/v1/embeddings", {"input": [12, 34, "string", 56, 78]}),
        ("/v1/embeddings", {"input": [[12, 34, 56], "string1", [12, "string", 34, 56]]}),
        ("/v1/embeddings", {"input": {"prompt_string": "an object's prompt"}}),
        ("/v1/embeddings", {"input": "Test base64 embedding output", "encoding_format": "base64"}),
        ("/v1/embeddings", {"input": "Test base64 embedding output", "encoding_format": "float"}),
        ("/v1/embeddings", {"input": ["two", "base64 inputs"], "encoding_format": "base64", "model": "mine"}),
        ("/v1/embeddings", {"input": "a model name", "model": "text-embedding-3-small"}),
        ("/v1/embeddings", {"input": "a model that is a number", "model": 42}),
        ("/v1/embeddings", {"content": "content on the OpenAI route"}),
        ("/v1/embeddings", {"input": "Ünïcödé tëxt, 日本語 and emoji 🙂"}),
        ("/v1/embeddings", {"input": "<|im_start|>user\nspecial tokens<|im_end|>"}),
        ("/v1/embeddings", {"input": "x " * 250}),
    ]
    for n in (-1, 0, 1, 2, 3, 2.7, True):
        r.append(("/v1/embeddings", {"input": "normalised differently", "embd_normalize": n}))
    r.append(("/embeddings", {"input": "normalised differently", "embd_normalize": -1}))
    # errors
    r += [
        ("/v1/embeddings", {"input": ""}),
        ("/v1/embeddings", {"input": ["fine", ""]}),
        ("/v1/embeddings", {"input": []}),
        ("/v1/embeddings", {"input": None}),
        ("/v1/embeddings", {"input": 12}),
        ("/v1/embeddings", {"input": [{"x": 1}]}),
        ("/v1/embeddings", {"input": {"prompt_string": "x", "multimodal_data": ["AAAA"]}}),
        ("/v1/embeddings", {"nothing": 1}),
        ("/v1/embeddings", [1, 2]),
        ("/v1/embeddings", {"input": "x", "encoding_format": "bad"}),
        ("/v1/embeddings", {"input": "x", "encoding_format": 3}),
        ("/v1/embeddings", {"input": "x", "embd_normalize": "2"}),
        ("/v1/embeddings", {"input": "x", "embd_normalize": None}),
        ("/v1/embeddings", {"input": LONG}),
        ("/v1/embeddings", {"input": [999999]}),
        ("/v1/embeddings", {"input": [-5, 3]}),
        ("/embeddings", b'{"input": "unclosed'),
        ("/embeddings", b''),
        # a completion after the embeddings: the slot holds the last embedding's cells and tokens
        ("/v1/embeddings", {"input": "Hello world"}),
        ("/completion", {"prompt": "Hello world", "n_predict": 8, "temperature": 0}),
        ("/v1/embeddings", {"input": "Hello world, again"}),
    ]
    return r


def last_requests() -> list:
    """Pooling last may reuse the slot's cached prefix."""
    return [
        ("/v1/embeddings", {"input": "I believe the meaning of life is"}),
        ("/v1/embeddings", {"input": "I believe the meaning of life is"}),
        ("/v1/embeddings", {"input": "I believe the meaning of life is to find your gift"}),
        ("/v1/embeddings", {"input": "I believe"}),
        ("/v1/embeddings", {"input": ["This is a test", "This is another test", "This is a test"]}),
        ("/v1/embeddings", {"input": "x " * 300}),
        ("/v1/embeddings", {"input": "x " * 300 + "and a tail"}),
        ("/v1/embeddings", {"input": LONG}),
        ("/v1/embeddings", {"input": LONG + " and more"}),
        ("/v1/embeddings", {"input": "This is a test " * 300}),
        ("/embeddings", {"input": "Hello world", "embd_normalize": 0}),
        ("/v1/embeddings", {"input": "Test base64", "encoding_format": "base64"}),
        ("/completion", {"prompt": "Test base64 and then", "n_predict": 6, "temperature": 0}),
        ("/v1/embeddings", {"input": "Test base64 and then"}),
    ]


def none_requests() -> list:
    return [
        ("/embeddings", {"input": "hello hello hello"}),
        ("/embedding", {"content": "a"}),
        ("/embeddings", {"input": ["one", "two words"]}),
        ("/embeddings", {"input": "hi", "embd_normalize": 2}),
        ("/v1/embeddings", {"input": "hello hello hello"}),
        ("/v1/embeddings", {"content": "content answers llama-server's shape"}),
        ("/rerank", {"query": "q", "documents": ["d"]}),
    ]


def rerank_requests() -> list:
    r = [
        ("/rerank", {"query": "Machine learning is", "documents": DOCS}),
        ("/rerank", {"query": "Machine learning is", "texts": DOCS}),
        ("/rerank", {"query": "Machine learning is", "texts": DOCS, "return_text": True}),
        ("/rerank", {"query": "Machine learning is", "documents": DOCS, "return_text": True}),
        ("/reranking", {"query": "Which city?", "documents": ["Machine learning is ", "Paris, capitale de la"]}),
        ("/v1/rerank", {"query": "a", "documents": ["Hello", "Hello world", "I believe the meaning of life is"],
                        "model": "my-reranker"}),
        ("/v1/reranking", {"query": "a", "documents": ["x"], "model": 5}),
        ("/rerank", {"query": "tie", "documents": ["same"] * 20}),
        ("/rerank", {"query": "tie", "documents": [f"doc {i % 5}" for i in range(23)]}),
        ("/rerank", {"query": "", "documents": ["empty query"]}),
        ("/rerank", {"query": "q", "documents": [""]}),
        ("/rerank", {"query": "q", "documents": ["a"], "texts": ["b", "c"]}),
        ("/rerank", {"query": "q", "documents": [1, 2], "texts": ["b", "c"]}),
    ]
    for top_n in (0, 1, 2, 4, 99, 2.9, True, "2", None, -1):
        r.append(("/rerank", {"query": "Machine learning is", "documents": DOCS, "top_n": top_n}))
    r.append(("/rerank", {"query": "Machine learning is", "texts": DOCS, "top_n": 2}))
    for docs in ([], None, 123, [1, 2, 3], [{"text": "an object"}], "a string"):
        r.append(("/rerank", {"query": "Machine learning is", "documents": docs}))
    r += [
        ("/rerank", {"documents": DOCS}),
        ("/rerank", {"query": 5, "documents": DOCS}),
        ("/rerank", {"query": None, "documents": DOCS}),
        ("/rerank", [1]),
        ("/rerank", b'{"query": '),
        ("/rerank", {"query": "long", "documents": [LONG]}),
        ("/completion", {"prompt": "Machine learning is", "n_predict": 6, "temperature": 0}),
    ]
    return r


SESSIONS = [
    ("mean", ["--embeddings", "--pooling", "mean"], embedding_requests),
    ("cls", ["--embeddings", "--pooling", "cls"], lambda: embedding_requests()[:20]),
    ("last", ["--embeddings", "--pooling", "last"], last_requests),
    ("none", ["--embeddings"], none_requests),
    ("rerank", ["--reranking"], rerank_requests),
    ("ub128", ["--embeddings", "--pooling", "last", "-b", "128", "-ub", "128"],
     lambda: [("/v1/embeddings", {"input": "This is a test " * 40}),
              ("/v1/embeddings", {"input": "This is a test " * 10}),
              ("/v1/embeddings", {"input": "This is a test " * 30 + "!"})]),
    ("ub128-mean", ["--embeddings", "--pooling", "mean", "-ub", "128"],
     lambda: [("/v1/embeddings", {"input": "This is a test " * 40}),
              ("/v1/embeddings", {"input": "This is a test " * 10})]),
    ("norm1", ["--embeddings", "--pooling", "mean", "--embd-normalize", "1"],
     lambda: [("/v1/embeddings", {"input": "taxicab by default"}),
              ("/v1/embeddings", {"input": "taxicab by default", "embd_normalize": 2})]),
    ("off", [], lambda: [("/embeddings", {"input": "x"}), ("/v1/embeddings", {"input": "x"}),
                         ("/rerank", {"query": "q", "documents": ["d"]})]),
    ("np2-single", ["--embeddings", "--pooling", "mean", "-np", "2"],
     lambda: [("/v1/embeddings", {"input": "one input at a time"}),
              ("/v1/embeddings", {"input": "and another one"}),
              ("/v1/embeddings", {"input": "one input at a time"})]),
]


def record_session(name: str, flags: list[str], requests) -> dict:
    rows = []
    extra = list(flags)
    base = None
    if "-np" in extra:
        i = extra.index("-np")
        base = ["-t", "2", "-c", "4096", "-np", extra[i + 1], "--jinja", "--reasoning", "off", "--no-webui"]
        del extra[i:i + 2]
    with LlamaServer(model_path("smollm2"), extra=extra, base_args=base) as srv:
        for path, body in requests():
            raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
            status, _, out = srv.request("POST", path, raw=raw, headers={"Content-Type": "application/json"})
            row = {"path": path, "body": raw.decode("utf-8"), "status": status}
            if len(out) <= KEEP:
                row["answer"] = out.decode("utf-8")
            else:
                row["sha256"] = hashlib.sha256(out).hexdigest()
                row["length"] = len(out)
                row["head"] = out[:200].decode("utf-8", "replace")
            rows.append(row)
    return {"name": name, "flags": flags, "requests": rows}


def main() -> None:
    rec = {"model": "smollm2", "base": "-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui", "sessions": []}
    for name, flags, requests in SESSIONS:
        rec["sessions"].append(record_session(name, flags, requests))
        print(name, len(rec["sessions"][-1]["requests"]), file=sys.stderr)
    OUT.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

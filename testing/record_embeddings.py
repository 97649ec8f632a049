"""Records llama-server b11192's embeddings (POST /embeddings) and rerank scores (POST /rerank) for the pooling
types into tests/oracle/server/embeddings.json (replayed by tests/test_embeddings.py). Developer tool: needs the
oracle build.

    PYTHONPATH=. python testing/record_embeddings.py

One fresh llama-server per pooling type (SmolLM2-135M-Instruct Q4_1, `-t 2 -c 4096 -np 1` and the usual flags,
`--embeddings --pooling X`, `--reranking` for rank). Each input is its own request; its tokens come from the
same server's /tokenize (add_special, as tokenize_input_prompts does for embeddings). The vectors are stored as
the hex of their float32 bits (pooling none: the sha256 of every row's bits, the server's vectors being
float[n_tokens][n_embd]). With pooling last, llama-server may reuse a cached prefix (can_split,
server-context.cpp:441): the slot is erased before each input so every vector is a whole-prompt decode.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.oracle import LlamaServer, model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "server" / "embeddings.json"
SCRATCH = Path("/work/scratch/s24-embed")

WORDS = ("river stone light music garden winter paper engine market silver cloud forest letter window "
         "answer number simple quiet yellow orange planet ocean bridge coffee doctor").split()


def inputs() -> list[str]:
    out = ["a", "Hello", "Hello world", "I believe the meaning of life is", "This is a test",
           "This is another test", "Ünïcödé tëxt, 日本語 and emoji 🙂", "   leading spaces", "tabs\tand\nnewlines",
           "<|im_start|>user\nhi<|im_end|>", "x " * 200, "The quick brown fox jumps over the lazy dog. " * 10]
    i = 0
    while len(out) < 104:
        n = 1 + (i * 7) % 23
        out.append(" ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(n)) + ("." if i % 3 else "?"))
        i += 1
    return out


def bits(v) -> str:
    return np.asarray(v, dtype=np.float32).tobytes().hex()


def digest(rows) -> str:
    return hashlib.sha256(np.asarray(rows, dtype=np.float32).tobytes()).hexdigest()


def record_pooling(pooling: str, texts: list[str]) -> list[dict]:
    extra = ["--embeddings", "--pooling", pooling]
    if pooling == "last":
        SCRATCH.joinpath("slots").mkdir(parents=True, exist_ok=True)
        extra += ["--slot-save-path", str(SCRATCH / "slots")]
    cases = []
    with LlamaServer(model_path("smollm2"), extra=extra) as srv:
        for i, t in enumerate(texts):
            if pooling == "last":
                srv.post("/slots/0?action=erase")
            _, tk = srv.post_json("/tokenize", {"content": t, "add_special": True, "parse_special": True})
            body = {"input": t}
            if pooling == "mean" and i % 10 == 1:
                body["embd_normalize"] = [-1, 0, 3, 2][(i // 10) % 4]
            status, r = srv.post_json("/embeddings", body)
            case = {"input": t, "tokens": tk["tokens"], "status": status,
                    "embd_normalize": body.get("embd_normalize", 2)}
            if status == 200:
                rows = r[0]["embedding"]
                if pooling == "none":
                    case["n_rows"] = len(rows)
                    case["sha256"] = digest(rows)
                    case["row0"] = bits(rows[0])
                else:
                    case["bits"] = bits(rows[0])
            else:
                case["body"] = r
            cases.append(case)
    return cases


def record_rank(texts: list[str]) -> list[dict]:
    cases = []
    with LlamaServer(model_path("smollm2"), extra=["--embeddings", "--pooling", "rank"]) as srv:
        for i in range(0, len(texts) - 3, 1):
            q, docs = texts[i], texts[i + 1:i + 4]
            _, tq = srv.post_json("/tokenize", {"content": q, "add_special": False, "parse_special": False})
            status, r = srv.post_json("/rerank", {"query": q, "documents": docs})
            cases.append({"query": q, "documents": docs, "query_tokens": tq["tokens"], "status": status,
                          "body": r})
    return cases


def main() -> None:
    texts = inputs()
    rec = {"model": "smollm2", "flags": "-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui --embeddings",
           "pooling": {}}
    for p in ("none", "mean", "cls", "last"):
        rec["pooling"][p] = record_pooling(p, texts if p != "none" else texts[:100])
        print(p, len(rec["pooling"][p]), file=sys.stderr)
    rec["rank"] = record_rank(texts)
    print("rank", len(rec["rank"]), file=sys.stderr)
    OUT.write_text(json.dumps(rec, indent=0, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

"""Records what llama-server b11192 computes for the meaning of Ollama v0.13.3 embedding requests (POST /api/embed
and POST /api/embeddings) into tests/oracle/ollama/embed.json, replayed by tests/test_ollama_embed.py. Developer
tool: needs the oracle build and SmolLM2 Q4_1. Like testing/record_ollama.py it applies Ollama's rule on its own,
from Ollama's source (tag v0.13.3), and imports nothing of bankml.

    PYTHONPATH=. python testing/record_ollama_embed.py

The meaning of one input (server/routes.go EmbedHandler / EmbeddingsHandler, llm/server.go Embedding,
runner/llamarunner/runner.go embeddings):
- A llama model is served by the llama runner (llm/server.go:146: the Ollama engine only for
  fs/ggml/ggml.go:241's architectures). Its /embedding tokenizes the text with add_special on and specials parsed
  (runner.go:210), refuses no tokens (500 "Failed to create new sequence: no input provided", runner.go:128/:765)
  and more than num_ctx tokens (400 "the input length exceeds the context length", runner.go:146/:762; num_ctx
  at least 4, sched.go, and at most the trained length, llm/server.go:166), decodes the whole prompt (no cached
  prefix: cache.go:86) and returns llama_get_embeddings_seq, or for a model without pooling (no
  `llama.pooling_type`) the last token's embedding (runner.go:526-530): llama-server's `--embeddings --pooling
  last` with `embd_normalize: -1` (no normalization), the slot erased first so nothing cached is reused. Here:
  `-t 2 -c 4096 -np 1 ... --embeddings --pooling last`, POST /embeddings {"content": text, "embd_normalize": -1}.
- /api/embed's retry (routes.go:700-742): on the runner's 400, unless `truncate` is false, the text's tokens
  without specials added (llm/server.go:1702) are cut to min(num_ctx, llama.context_length) less one when the
  first is not BOS and one when the last is not EOS (routes.go:722-728), their pieces (specials rendered,
  llm/server.go:1732) joined and sent again as a JSON string (Go replaces each byte that starts no valid UTF-8
  sequence with U+FFFD); here the pieces come from llama-server's /tokenize with_pieces.
- /api/embed then normalizes every vector (routes.go:790: float32 squares summed in order in float32, the norm
  1/max(sqrt, 1e-12) rounded to float32, each value times it in float32) and with 0 < dimensions < len cuts and
  normalizes again (routes.go:758-760); prompt_eval_count is the sum of the runner's token counts.
- /api/embeddings returns the runner's vector unnormalized, each float32 as float64 (routes.go:836-839); its runner
  errors are 500 (routes.go:833).
Errors and the answers without vectors are Ollama's shapes from the source, each case naming its line.

Recorded: per case the Ollama request, the status, and either the error body, or each vector's float32 bits (hex,
little-endian), the count, and the steps (tokens, truncation).
"""

from __future__ import annotations

import codecs
import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.oracle import LlamaServer, model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "ollama" / "embed.json"
SCRATCH = Path("/work/scratch/ollama-embed")
MODEL = "smollm2-135m-instruct-q4_1"
N_CTX_TRAIN = 8192              # llama.context_length of SmolLM2-135M
BOS, EOS = 1, 2                 # tokenizer.ggml.bos_token_id / eos_token_id (<|im_start|>, <|im_end|>)
DEFAULT_NUM_CTX = 4096          # api/types.go DefaultOptions: envconfig.ContextLength()

WORDS = ("river stone light music garden winter paper engine market silver cloud forest letter window "
         "answer number simple quiet yellow orange planet ocean bridge coffee doctor").split()
SHORT = ["Hello", "Hello world", "a", "I believe the meaning of life is", "   leading spaces",
         "tabs\tand\nnewlines", "Ünïcödé tëxt, 日本語 and emoji 🙂", "<|im_start|>user\nhi<|im_end|>", "<|im_end|>",
         "ends with eos<|im_end|>", "naïve café — “quotes” & <tags>", "1234567890 3.14159 -42",
         "Ωμέγα русский العربية हिन्दी", "\u2028line\u2029separators"]
LONG_300 = "x " * 300
LONG_600 = "The quick brown fox jumps over the lazy dog. " * 60
UNI_LONG = "日本語のテキスト🙂と絵文字" * 12


def sentence(i: int) -> str:
    n = 3 + (i * 7) % 17
    return " ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(n)) + "."


def embed_cases() -> list[dict]:
    """(name, path, body) of the requests whose answers carry vectors."""
    c = []
    for i, t in enumerate(SHORT):
        c.append({"name": f"string_{i}", "path": "/api/embed", "body": {"model": MODEL, "input": t}})
    c += [
        {"name": "array_3", "path": "/api/embed", "body": {"model": MODEL, "input": SHORT[:3]}},
        {"name": "array_duplicates", "path": "/api/embed", "body": {"model": MODEL, "input": ["Hello", "Hello"]}},
        {"name": "array_mixed", "path": "/api/embed", "body": {"model": MODEL, "input": SHORT[5:10]}},
        {"name": "array_sentences", "path": "/api/embed",
         "body": {"model": MODEL, "input": [sentence(i) for i in range(8)]}},
        {"name": "long_300", "path": "/api/embed", "body": {"model": MODEL, "input": LONG_300}},
        {"name": "long_600_two_ubatches", "path": "/api/embed", "body": {"model": MODEL, "input": LONG_600}},
        {"name": "unicode_long", "path": "/api/embed", "body": {"model": MODEL, "input": UNI_LONG}},
    ]
    for d in (1, 16, 575, 576, 5000, -3, 0):
        c.append({"name": f"dimensions_{d}", "path": "/api/embed",
                  "body": {"model": MODEL, "input": "Hello world", "dimensions": d}})
    c.append({"name": "dimensions_64_array", "path": "/api/embed",
              "body": {"model": MODEL, "input": [sentence(20), sentence(21)], "dimensions": 64}})
    c += [
        {"name": "truncate_default_32", "path": "/api/embed",
         "body": {"model": MODEL, "input": LONG_300, "options": {"num_ctx": 32}}},
        {"name": "truncate_true_16", "path": "/api/embed",
         "body": {"model": MODEL, "input": LONG_600[:200], "truncate": True, "options": {"num_ctx": 16}}},
        {"name": "truncate_bos_first", "path": "/api/embed",
         "body": {"model": MODEL, "input": "<|im_start|>" + LONG_600[:300], "options": {"num_ctx": 16}}},
        {"name": "truncate_eos_last", "path": "/api/embed",
         "body": {"model": MODEL, "input": LONG_600[:300] + "<|im_end|>", "options": {"num_ctx": 20}}},
        {"name": "truncate_array_one_of_two", "path": "/api/embed",
         "body": {"model": MODEL, "input": ["short one", LONG_300], "options": {"num_ctx": 24},
                  "dimensions": 32}},
        {"name": "num_ctx_3_fits_4", "path": "/api/embed",
         "body": {"model": MODEL, "input": "a b", "options": {"num_ctx": 3}}},
        {"name": "num_ctx_8192", "path": "/api/embed", "body": {"model": MODEL, "input": "Hello",
                                                                  "options": {"num_ctx": 8192}}},
        {"name": "other_options", "path": "/api/embed",
         "body": {"model": MODEL, "input": "Hello", "options": {"temperature": 0.1, "seed": 3, "top_k": 5}}},
        {"name": "keep_alive_10m", "path": "/api/embed", "body": {"model": MODEL, "input": "Hello",
                                                                    "keep_alive": "10m"}},
    ]
    for n in (9, 10, 11, 12, 13):
        c.append({"name": f"truncate_unicode_{n}", "path": "/api/embed",
                  "body": {"model": MODEL, "input": UNI_LONG, "options": {"num_ctx": n}}})
    for i, t in enumerate(["Hello", "a", SHORT[6], SHORT[7], LONG_300, LONG_600, sentence(30)]):
        c.append({"name": f"embeddings_{i}", "path": "/api/embeddings", "body": {"model": MODEL, "prompt": t}})
    c.append({"name": "embeddings_num_ctx_64", "path": "/api/embeddings",
              "body": {"model": MODEL, "prompt": sentence(31), "options": {"num_ctx": 64}}})
    return c


def err(status: int, message: str) -> dict:
    return {"status": status, "answer": {"error": message}}


def fixed_cases() -> list[dict]:
    """Requests whose answer the source fixes without any vector: errors and the load-only answers."""
    M = MODEL
    nf = 'model "{}" not found, try pulling it first'
    return [
        # EmbedHandler
        dict(name="embed_empty_body", path="/api/embed", raw="", source="server/routes.go:645 (io.EOF)",
             **err(400, "missing request body")),
        dict(name="embed_bad_json", path="/api/embed", raw='{"model":', source="server/routes.go:648 (bind)",
             **err(400, "unexpected EOF")),
        dict(name="embed_bad_key", path="/api/embed", raw="{bad", source="server/routes.go:648 (bind)",
             **err(400, "invalid character 'b' looking for beginning of object key string")),
        dict(name="embed_array_body", path="/api/embed", raw="[]", source="server/routes.go:648 (bind)",
             **err(400, "json: cannot unmarshal array into Go value of type api.EmbedRequest")),
        dict(name="embed_input_number", path="/api/embed", body={"model": M, "input": 5},
             source="server/routes.go:672", **err(400, "invalid input type")),
        dict(name="embed_input_bool", path="/api/embed", body={"model": M, "input": True},
             source="server/routes.go:672", **err(400, "invalid input type")),
        dict(name="embed_input_object", path="/api/embed", body={"model": M, "input": {"a": "b"}},
             source="server/routes.go:672", **err(400, "invalid input type")),
        dict(name="embed_input_array_number", path="/api/embed", body={"model": M, "input": ["a", 1]},
             source="server/routes.go:666", **err(400, "invalid input type")),
        dict(name="embed_input_array_null", path="/api/embed", body={"model": M, "input": ["a", None]},
             source="server/routes.go:666", **err(400, "invalid input type")),
        dict(name="embed_input_nested", path="/api/embed", body={"model": M, "input": [["a"]]},
             source="server/routes.go:666", **err(400, "invalid input type")),
        dict(name="embed_input_type_before_model", path="/api/embed", body={"model": "nope", "input": 1},
             source="server/routes.go:672 (before the model, :677)", **err(400, "invalid input type")),
        dict(name="embed_dimensions_string", path="/api/embed", body={"model": M, "input": "a", "dimensions": "x"},
             source="server/routes.go:648 (bind, api/types.go:478)",
             **err(400, "json: cannot unmarshal string into Go struct field EmbedRequest.dimensions of type int")),
        dict(name="embed_dimensions_float", path="/api/embed", body={"model": M, "input": "a", "dimensions": 1.5},
             source="server/routes.go:648 (bind)",
             **err(400, "json: cannot unmarshal number 1.5 into Go struct field EmbedRequest.dimensions of type int")),
        dict(name="embed_truncate_string", path="/api/embed", body={"model": M, "input": "a", "truncate": "yes"},
             source="server/routes.go:648 (bind, api/types.go:475)",
             **err(400, "json: cannot unmarshal string into Go struct field EmbedRequest.truncate of type bool")),
        dict(name="embed_keep_alive_bad", path="/api/embed", body={"model": M, "input": "a", "keep_alive": "abc"},
             source="api/types.go:1040 (Duration.UnmarshalJSON)", **err(400, 'time: invalid duration "abc"')),
        dict(name="embed_keep_alive_bool", path="/api/embed", body={"model": M, "input": "a", "keep_alive": True},
             source="api/types.go:1048", **err(400, "Unsupported type: 'bool'")),
        dict(name="embed_options_string", path="/api/embed", body={"model": M, "input": "a", "options": "x"},
             source="server/routes.go:648 (bind, api/types.go:481)",
             **err(400, "json: cannot unmarshal string into Go struct field EmbedRequest.options of type "
                        "map[string]interface {}")),
        dict(name="embed_unknown_model", path="/api/embed", body={"model": "nope", "input": "a"},
             source="server/routes.go:679 -> :2363 handleScheduleError", **err(404, nf.format("nope"))),
        dict(name="embed_no_model", path="/api/embed", body={"input": "a"},
             source="server/routes.go:679 -> :2363 (GetManifestPath of an invalid name: fs.ErrNotExist)",
             **err(404, nf.format(""))),
        dict(name="embed_null_body", path="/api/embed", raw="null",
             source="server/routes.go:679 (a zero request) -> :2363", **err(404, nf.format(""))),
        dict(name="embed_option_type", path="/api/embed", body={"model": M, "input": "a",
                                                               "options": {"num_ctx": "x"}},
             source="server/routes.go:140 modelOptions -> :2366", **err(500, 'option "num_ctx" must be of type integer')),
        dict(name="embed_empty_string_in_array", path="/api/embed", body={"model": M, "input": [""]},
             source="runner/llamarunner/runner.go:128 -> :765; server/routes.go:776",
             **err(500, "Failed to create new sequence: no input provided")),
        dict(name="embed_empty_second", path="/api/embed", body={"model": M, "input": ["a", ""]},
             source="runner/llamarunner/runner.go:128 -> :765; server/routes.go:776",
             **err(500, "Failed to create new sequence: no input provided")),
        dict(name="embed_truncate_false", path="/api/embed",
             body={"model": M, "input": LONG_300, "truncate": False, "options": {"num_ctx": 32}},
             source="runner/llamarunner/runner.go:146 -> :762; server/routes.go:712",
             **err(400, "the input length exceeds the context length")),
        dict(name="embed_truncate_false_second", path="/api/embed",
             body={"model": M, "input": ["a", LONG_300], "truncate": False, "options": {"num_ctx": 64}},
             source="runner/llamarunner/runner.go:146 -> :762; server/routes.go:712",
             **err(400, "the input length exceeds the context length")),
        dict(name="embed_truncated_to_nothing", path="/api/embed",
             body={"model": M, "input": LONG_300, "options": {"num_ctx": 2}},
             source="server/routes.go:734 (ctxLen = 2 - 2)",
             **err(400, "input after truncation exceeds maximum context length")),
        dict(name="embed_truncated_to_nothing_1", path="/api/embed",
             body={"model": M, "input": "one two three four five six", "options": {"num_ctx": 1}},
             source="server/routes.go:734 (ctxLen = 1 - 2)",
             **err(400, "input after truncation exceeds maximum context length")),
        dict(name="embed_empty_string", path="/api/embed", body={"model": M, "input": ""},
             source="server/routes.go:684 (no input: loads)", status=200, answer={"model": M, "embeddings": []}),
        dict(name="embed_empty_array", path="/api/embed", body={"model": M, "input": []},
             source="server/routes.go:684", status=200, answer={"model": M, "embeddings": []}),
        dict(name="embed_null_input", path="/api/embed", body={"model": M, "input": None},
             source="server/routes.go:684", status=200, answer={"model": M, "embeddings": []}),
        dict(name="embed_no_input", path="/api/embed", body={"model": M},
             source="server/routes.go:684", status=200, answer={"model": M, "embeddings": []}),
        # EmbeddingsHandler
        dict(name="embeddings_empty_body", path="/api/embeddings", raw="", source="server/routes.go:806",
             **err(400, "missing request body")),
        dict(name="embeddings_bad_json", path="/api/embeddings", raw='{"prompt": "a"', source="server/routes.go:809",
             **err(400, "unexpected EOF")),
        dict(name="embeddings_prompt_number", path="/api/embeddings", body={"model": M, "prompt": 5},
             source="server/routes.go:809 (bind)",
             **err(400, "json: cannot unmarshal number into Go struct field EmbeddingRequest.prompt of type string")),
        dict(name="embeddings_no_model", path="/api/embeddings", body={"prompt": "a"},
             source="server/routes.go:815", **err(400, "model is required")),
        dict(name="embeddings_invalid_name", path="/api/embeddings", body={"model": "bad name!", "prompt": "a"},
             source="server/routes.go:815", **err(400, "model is required")),
        dict(name="embeddings_unknown_model", path="/api/embeddings", body={"model": "nope", "prompt": "a"},
             source="server/routes.go:820 -> :2363", **err(404, nf.format("nope"))),
        dict(name="embeddings_option_type", path="/api/embeddings",
             body={"model": M, "prompt": "a", "options": {"num_ctx": "x"}},
             source="server/routes.go:820 -> :2366", **err(500, 'option "num_ctx" must be of type integer')),
        dict(name="embeddings_too_long", path="/api/embeddings",
             body={"model": M, "prompt": LONG_300, "options": {"num_ctx": 32}},
             source="runner/llamarunner/runner.go:146 -> :762; server/routes.go:833 (always 500)",
             **err(500, "the input length exceeds the context length")),
        dict(name="embeddings_keep_alive_bad", path="/api/embeddings",
             body={"model": M, "prompt": "a", "keep_alive": []}, source="api/types.go:1048",
             **err(400, "Unsupported type: '[]interface {}'")),
        dict(name="embeddings_empty_prompt", path="/api/embeddings", body={"model": M, "prompt": ""},
             source="server/routes.go:829 (empty prompt: loads)", status=200, answer={"embedding": []}),
        dict(name="embeddings_no_prompt", path="/api/embeddings", body={"model": M},
             source="server/routes.go:829", status=200, answer={"embedding": []}),
    ]


# --- Ollama's rule, on its own ------------------------------------------------------------------------------------

def _go_replace(e: UnicodeDecodeError):
    # Go's utf8.DecodeRune fails one byte at a time: one U+FFFD, then decoding resumes at the next byte
    return "\ufffd", e.start + 1


codecs.register_error("go-json", _go_replace)


def go_utf8(b: bytes) -> str:
    """Go's json.Marshal of a string: a byte that starts no valid UTF-8 sequence is one U+FFFD."""
    return b.decode("utf-8", "go-json")


def go_normalize(v: np.ndarray) -> np.ndarray:
    acc = np.float32(0)
    for x in v:                          # for _, v := range vec { sum += v * v }
        acc = np.float32(acc + np.float32(x * x))
    norm = np.float32(1.0 / max(math.sqrt(float(acc)), 1e-12))
    return (v * norm).astype(np.float32)


class Oracle:
    def __init__(self, srv: LlamaServer):
        self.srv = srv

    def tokenize(self, text: str, add_special: bool, pieces: bool = False):
        st, r = self.srv.post_json("/tokenize", {"content": text, "add_special": add_special, "parse_special": True,
                                                 "with_pieces": pieces})
        assert st == 200, r
        return r["tokens"]

    def vector(self, text: str) -> np.ndarray:
        self.srv.post("/slots/0?action=erase")
        st, r = self.srv.post_json("/embeddings", {"content": text, "embd_normalize": -1})
        assert st == 200, (st, r)
        rows = r[0]["embedding"]
        assert len(rows) == 1
        return np.array(rows[0], dtype=np.float32)

    def runner(self, text: str, run_ctx: int):
        """The runner's /embedding: (tokens, error)."""
        toks = self.tokenize(text, True)
        if not toks:
            return toks, (500, "Failed to create new sequence: no input provided")
        if len(toks) > run_ctx:
            return toks, (400, "the input length exceeds the context length")
        return toks, None

    def one(self, text: str, num_ctx: int, truncate: bool, step: dict):
        run_ctx = min(max(num_ctx, 4), N_CTX_TRAIN)
        toks, e = self.runner(text, run_ctx)
        step["n_tokens"] = len(toks)
        if e is not None and e[0] == 400 and truncate:
            raw = self.tokenize(text, False, pieces=True)
            ctx_len = min(num_ctx, N_CTX_TRAIN)
            if raw and raw[0]["id"] != BOS:
                ctx_len -= 1
            if raw and raw[-1]["id"] != EOS:
                ctx_len -= 1
            if len(raw) <= ctx_len:
                return None, (400, "input exceeds maximum context length and cannot be truncated further")
            if ctx_len <= 0:
                return None, (400, "input after truncation exceeds maximum context length")
            b = b"".join(p["piece"].encode("utf-8") if isinstance(p["piece"], str) else bytes(p["piece"])
                         for p in raw[:ctx_len])
            text = go_utf8(b)
            step["truncated_to"] = ctx_len
            step["text"] = text
            step["coerced"] = "\ufffd" in text and "\ufffd" not in b.decode("utf-8", "surrogateescape")
            toks, e = self.runner(text, run_ctx)
            step["n_tokens"] = len(toks)
        if e is not None:
            return None, e
        return self.vector(text), None


def texts_of(body: dict, path: str) -> list[str]:
    if path == "/api/embeddings":
        return [body["prompt"]]
    v = body["input"]
    return [v] if isinstance(v, str) else list(v)


def record_case(o: Oracle, case: dict) -> dict:
    body, path = case["body"], case["path"]
    opts = body.get("options") or {}
    num_ctx = opts.get("num_ctx", DEFAULT_NUM_CTX)
    truncate = body.get("truncate", True) if path == "/api/embed" else False
    out = dict(case, steps=[])
    vecs, count = [], 0
    for t in texts_of(body, path):
        step = {}
        v, e = o.one(t, num_ctx, truncate, step)
        out["steps"].append(step)
        if e is not None:
            raise SystemExit(f"{case['name']}: unexpected error {e}")
        count += step["n_tokens"]
        if path == "/api/embed":
            v = go_normalize(v)
            d = body.get("dimensions", 0)
            if 0 < d < len(v):
                v = go_normalize(v[:d])
        vecs.append(v.astype("<f4").tobytes().hex())
    out.update(status=200, vectors=vecs, prompt_eval_count=count)
    return out


def main() -> None:
    SCRATCH.joinpath("slots").mkdir(parents=True, exist_ok=True)
    extra = ["--embeddings", "--pooling", "last", "--slot-save-path", str(SCRATCH / "slots")]
    cases = embed_cases()
    fixed = fixed_cases()
    with LlamaServer(model_path("smollm2"), extra=extra) as srv:
        o = Oracle(srv)
        recorded = []
        for c in cases:
            recorded.append(record_case(o, c))
            print(c["name"], recorded[-1]["prompt_eval_count"], file=sys.stderr)
        # the errors that depend on tokens: the rule above must reach each of them
        for c in fixed:
            b = c.get("body")
            if c["status"] >= 400 and isinstance(b, dict) and isinstance(b.get("options"), dict) \
                    and isinstance(b["options"].get("num_ctx"), int):
                got = None
                for t in texts_of(b, c["path"]):
                    _, e = o.one(t, b["options"]["num_ctx"],
                                 b.get("truncate", True) if c["path"] == "/api/embed" else False, {})
                    if e is not None:
                        got = e
                        break
                st = 500 if c["path"] == "/api/embeddings" and got else got and got[0]
                assert got and (st, got[1]) == (c["status"], c["answer"]["error"]), (c["name"], got)
                c["checked"] = True
        for c in fixed:
            b = c.get("body")
            if isinstance(b, dict) and isinstance(b.get("input"), list) and "" in b["input"]:
                for t in b["input"]:
                    toks = o.tokenize(t, True)
                    if not toks:
                        assert (c["status"], c["answer"]["error"]) == (500, "Failed to create new sequence: "
                                                                            "no input provided"), c["name"]
                        c["checked"] = True
                        break
    assert any(s.get("coerced") for c in recorded for s in c["steps"]), "no truncation cut a character"
    assert any("truncated_to" in s for c in recorded for s in c["steps"])
    rec = {"model": MODEL, "ollama": "v0.13.3 (709f842457f40550c88da80f84bc8d7ba29371b9)",
           "oracle": "llama-server b11192 -t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui --embeddings "
                     "--pooling last", "requests": recorded, "fixed": fixed}
    OUT.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    print(len(recorded), "requests with vectors,", len(fixed), "fixed answers", file=sys.stderr)


if __name__ == "__main__":
    main()

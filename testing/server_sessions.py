"""The sessions testing/record_server.py plays against llama-server b11192 (and tests/test_server_sessions.py
replays against bankml-serve from the records).

A session is a fresh server started with `flags` and a list of steps, sent in order. A step is a request dict
(method, path, body | raw | raw_hex | fill, headers) or a function of the answers so far returning one, so that
a conversation can carry on from what the model answered (the record keeps the request as sent).

Everything is greedy (temperature 0) or seeded, and short (at most 64 tokens), so replays stay fast.
"""

from __future__ import annotations

# flags: "$MODEL" is the model file, "$SLOTS" a fresh empty directory (tests/server_replay.server_argv)
DEFAULT = ["-m", "$MODEL", "-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]


def flags(*extra: str, ctx: str = "4096", np: str = "1", t: str = "2") -> list[str]:
    f = list(DEFAULT)
    f[f.index("-c") + 1] = ctx
    f[f.index("-np") + 1] = np
    f[f.index("-t") + 1] = t
    return f + list(extra)


def post(path: str, body, **kw) -> dict:
    # body None: no JSON body (a step then gives `raw`, `raw_hex` or `fill`, or sends nothing)
    return {"method": "POST", "path": path, **({} if body is None else {"body": body}), **kw}


def get(path: str, **kw) -> dict:
    return {"method": "GET", "path": path, **kw}


def _body(base: dict, kw: dict) -> dict:
    # a keyword given as None leaves the field out (the server's default applies)
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


def chat(messages, **kw) -> dict:
    return post("/v1/chat/completions", _body({"messages": messages, "temperature": 0, "max_tokens": 40}, kw))


def completion(prompt, **kw) -> dict:
    return post("/completion", _body({"prompt": prompt, "temperature": 0, "n_predict": 32}, kw))


def v1_completion(prompt, **kw) -> dict:
    return post("/v1/completions", _body({"prompt": prompt, "temperature": 0, "max_tokens": 32}, kw))


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def system(text: str) -> dict:
    return {"role": "system", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def reply(answer: dict) -> str:
    """The assistant text of a recorded chat answer (a JSON body or a stream's deltas)."""
    if "json" in answer:
        return answer["json"]["choices"][0]["message"]["content"]
    text = ""
    for ev in answer.get("sse", []):
        d = ev.get("data")
        if isinstance(d, dict):
            for ch in d.get("choices", []):
                text += (ch.get("delta") or {}).get("content") or ""
    return text


def first_event_bytes(answer: dict) -> int:
    """The length of a recorded stream's first event as it was sent (`data: <compact JSON>\n\n`)."""
    import json
    return len(("data: " + json.dumps(answer["sse"][0]["data"], ensure_ascii=False, separators=(",", ":"))
                + "\n\n").encode())


def turns(questions: list[str], stream=False, sys_text: str | None = None, at: int = 0, **kw) -> list:
    """A conversation whose steps start at step `at` of the session: each question asked with the model's
    earlier answers in the history."""
    steps = []
    for i, q in enumerate(questions):
        def step(prev, i=i, q=q, n0=at):
            msgs = [system(sys_text)] if sys_text else []
            for j in range(i):
                msgs += [user(questions[j]), assistant(reply(prev[n0 + j]))]
            return chat(msgs + [user(q)], stream=stream, **kw)
        steps.append(step)
    return steps


DOC = ("The Rhine is a river that begins in the Swiss canton of Graubunden in the southeastern Swiss Alps. "
       "It forms part of the Swiss-Liechtenstein, Swiss-Austrian and Swiss-German borders, and then flows "
       "through the Rhineland and the Netherlands, emptying into the North Sea. It is the second-longest river "
       "in Central and Western Europe, after the Danube, at about 1,230 km. ") * 6

Q = ["What is the capital of France?", "And of Italy?", "Which of the two is bigger?", "Thanks. One word: color of the sky?"]


def sessions() -> list[dict]:
    s = []

    def add(name, steps, f=None, note=""):
        s.append({"name": name, "flags": f or flags(), "note": note, "steps": steps})

    add("multi_turn_plain", turns(Q[:3]), note="three turns, each with the answers so far")
    add("multi_turn_stream", turns(Q[:3], stream=True), note="the same as streams")
    add("multi_turn_stream_usage", turns(Q[:3], stream=True, stream_options={"include_usage": True}))
    add("multi_turn_system", turns(["Who are you?", "Say hello in French.", "And in German?"],
                                   sys_text="You are a terse assistant. Answer in one sentence."))

    def edited(prev):
        return chat([user("What is the capital of Spain?"), assistant(reply(prev[0])), user(Q[1])])
    add("edited_history", turns(Q[:2]) + [edited, lambda prev: chat([user(Q[0]), assistant("Paris."), user(Q[1])])],
        note="the first question edited, then the first answer edited")

    add("regenerate", [chat([user(Q[0])]), chat([user(Q[0])]), chat([user(Q[0])], stream=True),
                       chat([user(Q[0])], temperature=0.8, seed=7), chat([user(Q[0])], temperature=0.8, seed=7),
                       chat([user(Q[0])], temperature=0.8, seed=8)],
        note="the same prompt again: whole prompt cached, last token recomputed; seeded regenerations")

    a = turns(Q[:2])
    b = turns(["Write a haiku about rain.", "Now one about snow."])
    add("two_conversations", [a[0], b[0], lambda prev: a[1]([prev[0]]), lambda prev: b[1]([prev[1]])],
        note="conversations A and B interleaved (the RAM prompt cache brings A back)")
    add("new_conversation_between", turns(Q[:2]) + [chat([user("Count from 1 to 5.")])] +
        [lambda prev: chat([user(Q[0]), assistant(reply(prev[0])), user(Q[1]), assistant(reply(prev[1])),
                            user(Q[2])])])

    add("stop_strings", [chat([user("List three fruits, one per line.")], stop=["\n"]),
                         chat([user("List three fruits, one per line.")], stop="an"),
                         chat([user("List three fruits, one per line.")], stop=["zzz", "."], stream=True),
                         chat([user(Q[0])], stop=["Paris"]), chat([user(Q[0])], stop=["Par"], stream=True),
                         chat([user(Q[0])], stop=[""])],
        note="stop strings as a list, a string, partial matches held back in streams, an empty stop")
    add("max_tokens_limit", [chat([user("Tell me a long story about a dragon.")], max_tokens=5),
                             chat([user("Tell me a long story about a dragon.")], max_tokens=7, stream=True),
                             chat([user("Tell me a long story about a dragon.")], max_completion_tokens=3),
                             chat([user("Tell me a long story about a dragon.")], n_predict=2, stream=True,
                                  stream_options={"include_usage": True}),
                             chat([user(Q[0])], max_tokens=0)])
    add("completion_prompts", [completion("The capital of France is"),
                               completion("The capital of France is", return_tokens=True),
                               completion([504, 3575, 282, 4649, 314], return_tokens=True),
                               completion(["The capital of", 4649, " is"], n_predict=8),
                               completion({"prompt_string": "Once upon a time"}, n_predict=12),
                               completion("Once upon a time", stream=True, n_predict=10),
                               completion("Once upon a time", n_predict=0),
                               completion("", n_predict=4)])
    add("completion_array", [completion(["One, two,", "Red, green,"], n_predict=6),
                             completion("One, two,", n_predict=6, response_fields=["content", "tokens_cached",
                                                                                  "generation_settings/n_predict"]),
                             completion("One, two,", n_predict=6, cache_prompt=False)])
    add("v1_completions", [v1_completion("The quick brown fox"), v1_completion("The quick brown fox", stream=True),
                           v1_completion("The quick brown fox", logprobs=3, max_tokens=6),
                           v1_completion(["Hello", "Goodbye"], max_tokens=5), v1_completion("Hi", echo=True,
                                                                                            max_tokens=4)])
    add("chat_logprobs", [chat([user(Q[0])], logprobs=True, top_logprobs=3, max_tokens=8),
                          chat([user(Q[0])], logprobs=True, max_tokens=4),
                          chat([user(Q[0])], logprobs=True, top_logprobs=2, max_tokens=6, stream=True),
                          chat([user(Q[0])], logprobs=True, top_logprobs=0, max_tokens=4),
                          chat([user("Say 'ok ok ok'")], logprobs=True, top_logprobs=2, stop=["ok"], max_tokens=8)])
    add("completion_probs", [completion("The capital of France is", n_probs=3, n_predict=6),
                             completion("The capital of France is", n_probs=3, n_predict=6,
                                        post_sampling_probs=True),
                             completion("The capital of France is", n_probs=2, n_predict=5, temperature=0.7, seed=3,
                                        post_sampling_probs=True),
                             completion("The capital of France is", n_probs=2, n_predict=4, stream=True)])
    add("seeded_sampling", [chat([user("Write a short poem.")], temperature=0.9, seed=1, max_tokens=32),
                            chat([user("Write a short poem.")], temperature=0.9, seed=2, max_tokens=32),
                            chat([user("Write a short poem.")], temperature=1.2, seed=1, top_k=10, top_p=0.8,
                                 max_tokens=32),
                            chat([user("Write a short poem.")], temperature=0.7, seed=5, min_p=0.1, stream=True,
                                 max_tokens=32),
                            completion("A list of animals:", temperature=1.0, seed=11, n_predict=24),
                            completion("A list of animals:", temperature=1.0, seed=11, n_predict=24, top_k=1)])
    add("penalties_and_bias", [chat([user("Repeat the word cat ten times.")], repeat_penalty=1.3, max_tokens=30),
                               chat([user("Repeat the word cat ten times.")], frequency_penalty=0.8,
                                    presence_penalty=0.5, max_tokens=30),
                               chat([user(Q[0])], logit_bias=[[7042, -100]], max_tokens=12),
                               completion("The capital of France is", logit_bias=[[" Paris", False]], n_predict=6),
                               chat([user("Tell a joke.")], temperature=0.8, seed=4, dry_multiplier=0.8,
                                    max_tokens=30)])
    add("samplers_and_mirostat", [completion("Numbers:", samplers=["top_k", "temperature"], top_k=5,
                                             temperature=0.8, seed=9, n_predict=16),
                                  completion("Numbers:", samplers="kt", top_k=5, temperature=0.8, seed=9,
                                             n_predict=16),
                                  completion("Numbers:", mirostat=2, temperature=0.8, seed=9, n_predict=16),
                                  completion("Numbers:", mirostat=1, temperature=0.8, seed=9, n_predict=16),
                                  completion("Numbers:", typical_p=0.9, xtc_probability=0.5, xtc_threshold=0.1,
                                             temperature=0.8, seed=9, n_predict=16)])
    add("endpoints_between", [get("/health"), get("/props"), chat([user(Q[0])]),
                              post("/tokenize", {"content": "Hello world", "with_pieces": True}),
                              chat([user(Q[0]), assistant("Paris."), user(Q[1])]), get("/v1/models"), get("/models"),
                              post("/apply-template", {"messages": [user(Q[0])]}),
                              post("/v1/chat/completions/input_tokens", {"messages": [user(Q[0])]}),
                              post("/detokenize", {"tokens": [504, 3575]}), get("/slots"),
                              chat([user(Q[0]), assistant("Paris."), user(Q[1])], stream=True), get("/slots"),
                              get("/props")])
    add("cache_prompt_false", turns(Q[:2]) + [lambda prev: turns(Q[:2], cache_prompt=False)[1](prev),
                                              lambda prev: turns(Q[:2])[1](prev)],
        note="the same second turn again with cache_prompt false, then true")
    add("unicode", [chat([user("Écris une phrase en français avec des accents.")], max_tokens=32),
                    chat([user("Reply with an emoji: 😀 🎉")], max_tokens=16, stream=True),
                    chat([user("日本語で挨拶してください。")], max_tokens=24, stream=True),
                    completion("Emoji: 😀😀😀", n_predict=12, stream=True),
                    completion("Emoji: 😀😀😀", n_predict=12, n_probs=2)])
    add("long_document", [chat([user(DOC + "\nHow long is the Rhine?")], max_tokens=24),
                          lambda prev: chat([user(DOC + "\nHow long is the Rhine?"), assistant(reply(prev[0])),
                                             user("Where does it end?")], max_tokens=24),
                          chat([user(DOC[:600] + "\nWhere does it begin?")], max_tokens=24, stream=True)],
        note="a prompt of ~600 tokens: two ubatches; then its prefix")
    add("assistant_prefill", [chat([user(Q[0]), assistant("The capital of France is")], max_tokens=8),
                              chat([user(Q[0]), assistant("The capital of France is")], max_tokens=8, stream=True),
                              chat([user("Count to five."), assistant("1, 2,")], max_tokens=10)])
    add("ignore_eos", [chat([user(Q[0])], ignore_eos=True, max_tokens=48),
                       completion("Hi", ignore_eos=True, n_predict=40, stream=True)])
    add("json_mode", [chat([user("Give me a JSON object with a name and an age.")],
                           response_format={"type": "json_object"}, max_tokens=40),
                      chat([user("A person as JSON.")], response_format={
                          "type": "json_schema", "json_schema": {"schema": {
                              "type": "object", "properties": {"name": {"type": "string"},
                                                               "age": {"type": "integer"}},
                              "required": ["name", "age"]}}}, max_tokens=40, stream=True),
                      completion("An answer:", grammar='root ::= "yes" | "no"', n_predict=4)])
    add("progress_and_timings", [chat([user(DOC[:400] + " Summarize.")], stream=True, return_progress=True,
                                      max_tokens=6),
                                 completion("Once upon a time", stream=True, timings_per_token=True, n_predict=5),
                                 completion("Once upon a time there", stream=True, return_progress=True, n_predict=3)])

    # sessions with other server flags
    add("np2_slots", [chat([user(Q[0])]), chat([user("Write a haiku about rain.")]), get("/slots"),
                      chat([user(Q[0]), assistant("Paris."), user(Q[1])]),
                      chat([user("Write a haiku about rain."), assistant("Rain."), user("Another.")]),
                      get("/slots"), chat([user(Q[0])], id_slot=0), get("/props")],
        f=flags(np="2"), note="-np 2: the LRU picks the higher slot first, then prompt similarity")
    add("np2_n_choices", [chat([user("Write a short poem.")], n=2, temperature=0.9, seed=3, max_tokens=20),
                          chat([user(Q[0])], n=2, max_tokens=10, stream=True),
                          completion("Hello", n_cmpl=2, n_predict=6, temperature=0.9, seed=5)],
        f=flags(np="2"))
    add("ctx256", [completion("word " * 300, n_predict=4),
                   chat([user("Write a long story about the sea. " * 20)], max_tokens=64),
                   completion("The sea " * 110, n_predict=64), completion("The sea " * 110, n_predict=64, stream=True),
                   chat([user("hi " * 300)], stream=True), get("/props")],
        f=flags(ctx="256"), note="-c 256: prompts over the context (400) and generations stopped by it (length)")
    add("metrics", [get("/metrics"), chat([user(Q[0])]), completion("Once upon a time", n_predict=8), get("/metrics"),
                    chat([user(Q[0])], stream=True), get("/metrics")], f=flags("--metrics"))
    key = {"Authorization": "Bearer sekrit"}
    add("api_key", [get("/health"), get("/v1/models"), get("/v1/models", headers=key),
                    {**chat([user(Q[0])]), "headers": key},
                    {**chat([user(Q[0])]), "headers": {"X-Api-Key": "sekrit"}},
                    {**chat([user(Q[0])]), "headers": {"Authorization": "sekrit"}},
                    {**chat([user(Q[0])]), "headers": {"Authorization": "Bearer wrong"}},
                    get("/nope"), get("/nope", headers=key), {"method": "OPTIONS", "path": "/v1/chat/completions"}],
        f=flags("--api-key", "sekrit"))
    add("alias", [get("/v1/models"), get("/props"), chat([user(Q[0])]), chat([user(Q[0])], stream=True),
                  completion("Hi", n_predict=4), v1_completion("Hi", max_tokens=4)],
        f=flags("--alias", "my-model"))
    add("server_defaults", [chat([user("Tell me a story.")], temperature=None, max_tokens=None),
                            completion("Once upon a time", temperature=None, n_predict=None),
                            chat([user("Tell me a story.")], temperature=None, max_tokens=None),
                            post("/v1/chat/completions", None) | {
                                "raw": '{"messages":[{"role":"user","content":"Hi"}],"temperature":null,'
                                       '"max_tokens":null,"seed":null}'}],
        f=flags("--temp", "0.7", "-n", "12", "--seed", "5"),
        note="--temp, -n and --seed as server defaults (fields left out, or null)")
    add("small_batches", [completion("The sea " * 40, stream=True, return_progress=True, n_predict=4),
                          completion("The sea " * 40 + "is blue and", stream=True, return_progress=True,
                                     n_predict=4)],
        f=flags("-b", "64", "-ub", "16"), note="-b 64 -ub 16: prompt progress in batches of 64")
    add("cors", [{**get("/health"), "headers": {"Origin": "http://example.com"}},
                 {"method": "OPTIONS", "path": "/v1/chat/completions", "headers": {"Origin": "http://a.b"}},
                 {**chat([user(Q[0])]), "headers": {"Origin": "http://a.b"}}], f=flags())
    add("no_ram_cache", [a[0], b[0], lambda prev: a[1]([prev[0]]), lambda prev: b[1]([prev[1]])],
        f=flags("--cache-ram", "0"), note="two interleaved conversations without the RAM prompt cache")
    S = "/slots/0?action="
    add("slot_save_restore", [chat([user(Q[0])]), post(S + "save", {"filename": "a.bin"}),
                              post(S + "erase", {}), get("/slots"),
                              chat([user(Q[0]), assistant("Paris."), user(Q[1])]),
                              post(S + "restore", {"filename": "a.bin"}), get("/slots"), chat([user(Q[0])]),
                              post(S + "save", {"filename": "b.bin"}), post("/slots/5?action=restore",
                                                                            {"filename": "b.bin"}),
                              chat([user(Q[0]), assistant("Paris."), user(Q[1])], stream=True)],
        f=flags("--slot-save-path", "$SLOTS"), note="--slot-save-path (a fresh empty directory): save, erase, "
                                                     "restore, and the prompt cache after each")
    story = [user("Tell me a story about a fox.")]
    add("stop_edge_cases", [chat(story, stop=["\n\nXY"], max_tokens=4), chat(story, stop=["\n\nXY"], max_tokens=4,
                                                                          stream=True),
                            completion("Once upon a time", stop=[" the", "zz"], n_predict=24, stream=True),
                            completion("Once upon a time", stop=[" the"], n_predict=24, n_probs=2),
                            chat(story, stop=["a"], logprobs=True, top_logprobs=1, max_tokens=20, stream=True),
                            chat([user(Q[0])], stop=["\n"], max_tokens=64, id_slot=7),
                            completion("1, 2, 3,", stop=[", 7"], n_predict=30, stream=True, return_tokens=True),
                            completion("The capital of France is", stop=["\n\nXY"], n_predict=4),
                            completion("The capital of France is", stop=["\n\nXY"], n_predict=4, stream=True),
                            v1_completion("The capital of France is", stop=["\n\nXY"], max_tokens=4, stream=True),
                            v1_completion("The capital of France is", stop="\n\nXY", max_tokens=4)],
        note="stop text held at the token limit (dropped in streams), /completion streams holding pieces, "
             "logprobs with stops, id_slot past the slot count")
    # resumable streams (server-stream.cpp): X-Conversation-Id, GET / DELETE /v1/stream, POST /v1/streams/lookup
    conv = "conv-stream-test::org/model:Q8_0"
    qs = "conv_id=conv-stream-test%3A%3Aorg%2Fmodel%3AQ8_0"
    hdr = {"X-Conversation-Id": conv}
    add("stream_sessions", [
        {**chat([user("hello")], stream=True, max_tokens=16), "headers": hdr},
        post("/v1/streams/lookup", {"conversation_ids": ["conv-stream-test", "nope", "", 5, conv]}),
        get(f"/v1/stream?{qs}&from=0"),
        lambda prev: get(f"/v1/stream?{qs}&from={first_event_bytes(prev[0])}"),
        get(f"/v1/stream?{qs}&from=%20+0"), get(f"/v1/stream?{qs}&from=0x10"), get(f"/v1/stream?{qs}&from=-1"),
        get(f"/v1/stream?{qs}&from=abc"), get(f"/v1/stream?{qs}&from=99999999999999999999"),
        get(f"/v1/stream?{qs}&from=18446744073709551615"), get(f"/v1/stream?{qs}"),
        get("/v1/stream"), get("/v1/stream?conv_id="), get("/v1/stream?conv_id=conv-stream-test"),
        get(f"/v1/stream/{qs}"), {"method": "DELETE", "path": f"/v1/stream?{qs}"},
        get(f"/v1/stream?{qs}&from=0"), {"method": "DELETE", "path": f"/v1/stream?{qs}"},
        {"method": "DELETE", "path": "/v1/stream"}, {"method": "DELETE", "path": "/v1/stream?conv_id=zzz"},
        post("/v1/streams/lookup", {"conversation_ids": ["conv-stream-test"]})],
        f=flags("-a", "org/model:Q8_0"),
        note="a chat stream with X-Conversation-Id, replayed from 0, from the second event and from the end; "
             "bad offsets and ids; DELETE (204, then 404)")
    add("stream_sessions_kinds", [
        {**chat([user("hello")], max_tokens=8), "headers": {"X-Conversation-Id": "c1"}},
        get("/v1/stream?conv_id=c1&from=0"),
        {**chat([user("hello")], max_tokens=8, stream=True, n_probs="x"), "headers": {"X-Conversation-Id": "c2"}},
        get("/v1/stream?conv_id=c2"),
        {**post("/v1/chat/completions", {"max_tokens": 8, "stream": True}), "headers": {"X-Conversation-Id": "c3"}},
        get("/v1/stream?conv_id=c3"),
        {**completion(DOC[:300], stream=True, n_predict=4, return_progress=True, timings_per_token=True),
         "headers": {"x-conversation-id": "c4::a"}},
        get("/v1/stream?conv_id=c4::a&from=0"),
        {**v1_completion("Once upon a time", stream=True, max_tokens=6), "headers": {"X-Conversation-Id": "c4::b"}},
        get("/v1/stream?conv_id=c4%3A%3Ab"),
        post("/v1/streams/lookup", {"conversation_ids": ["c4::b", "c1", "c2", "c3"]}),
        {**v1_completion("Once upon a time", stream=True, max_tokens=3), "headers": {"X-Conversation-Id": "c4::b"}},
        get("/v1/stream?conv_id=c4::b"),
        post("/v1/streams/lookup", {"conversation_ids": ["c4::b"]}),
        {**completion("Once upon a time", stream=True, n_predict=3), "headers": {"X-Conversation-Id": ""}},
        post("/v1/streams/lookup", {"conversation_ids": [""]}),
        post("/v1/streams/lookup", None, raw=""), post("/v1/streams/lookup", None, raw="{nope"),
        post("/v1/streams/lookup", {"conversation_ids": "c4::b"}), post("/v1/streams/lookup", ["c4::b"]),
        post("/v1/streams/lookup", {}), get("/v1/streams/lookup"), post("/v1/stream", {})],
        note="non-stream and failed requests leave no session; a /completion stream with progress and timings; "
             "a /v1/completions stream, replaced by the next one of the same id; lookup bodies")
    def conv_stream(cid, **kw):
        return {**completion("Hi", stream=True, n_predict=1, **kw), "headers": {"X-Conversation-Id": cid}}
    ids = ["m", "m::a", "m::b", "m::c", "m::d", "m::e", "mm", "m::f"]
    add("stream_sessions_order", [conv_stream(c) for c in ids] + [
        post("/v1/streams/lookup", {"conversation_ids": ["m", "m::a"]}),
        {"method": "DELETE", "path": "/v1/stream?conv_id=m%3A%3Ab"}, conv_stream("m::g"), conv_stream("m::a"),
        {"method": "DELETE", "path": "/v1/stream?conv_id=m"}, conv_stream("m::h"), conv_stream("m"),
        post("/v1/streams/lookup", {"conversation_ids": ["m", "mm"]})],
        note="lookup lists the sessions of an id in the order of llama-server's std::unordered_map (inserts, "
             "replacements, erases)")
    add("stream_sessions_ids", [
        conv_stream("conv-\u00e9::m"), post("/v1/streams/lookup", {"conversation_ids": ["conv-\u00e9"]}),
        get("/v1/stream?conv_id=conv-%C3%A9%3A%3Am&from=0"), conv_stream("a b"),
        get("/v1/stream?conv_id=a+b&from=0"), get("/v1/stream?conv_id=zz&conv_id=a%20b"),
        {"method": "DELETE", "path": "/v1/stream?conv_id=a+b"},
        post("/v1/streams/lookup", {"conversation_ids": ["a b", "conv-\u00e9::m"]})],
        note="ids with UTF-8 and spaces: the header's bytes, the query's %XX and + decoded, the last of two "
             "conv_id values")
    gone = {**chat([user("Count from 1 to 30.")], stream=True, max_tokens=48), "disconnect": True}
    add("stream_sessions_disconnect", [
        {**gone, "headers": {"X-Conversation-Id": "gone"}}, get("/v1/stream?conv_id=gone&from=0"),
        post("/v1/streams/lookup", {"conversation_ids": ["gone"]}),
        {**completion("Once upon a time", stream=True, n_predict=24, return_progress=True),
         "headers": {"X-Conversation-Id": "gone"}, "disconnect": True},
        get("/v1/stream?conv_id=gone"), gone, chat([user("Count from 1 to 30.")], max_tokens=8)],
        note="clients that go away once the answer's head arrived: with a session the generation runs on into it "
             "(read back whole, the reader following it live), without one it is cancelled")
    add("progress_timings", [
        completion("The sea " * 40, stream=True, return_progress=True, timings_per_token=True, n_predict=3),
        chat([user("The sea " * 30)], stream=True, return_progress=True, timings_per_token=True, max_tokens=3),
        v1_completion("The sea " * 40, stream=True, return_progress=True, timings_per_token=True, max_tokens=3),
        completion("The sea " * 40 + "and", stream=True, return_progress=True, n_predict=2)],
        f=flags("-b", "64", "-ub", "16"), note="prompt_progress chunks with timings_per_token (the first before any "
                                              "prompt token), in batches of 64")
    add("aliases_and_tags", [get("/models"), get("/v1/models"), get("/props"),
                             completion("Hi", n_predict=2), v1_completion("Hi", max_tokens=2)],
        f=flags("--alias", "tinyllama-2,fim, code", "--tags", "chat,fim,small"),
        note="several aliases (the first in std::set order names the model) and tags")

    # the bodies tests/test_server_openai_client.py makes the `openai` package send (same fields)
    oa = {"model": "bankml"}
    add("openai_client", [post("/v1/chat/completions", {"messages": [user(Q[0])], **oa, "max_tokens": 16,
                                                         "temperature": 0}),
                          post("/v1/chat/completions", {"messages": [user(Q[0])], **oa, "max_tokens": 16,
                                                         "stream": True, "temperature": 0}),
                          post("/v1/chat/completions", {"messages": [user(Q[0])], **oa, "logprobs": True,
                                                         "max_tokens": 6, "temperature": 0, "top_logprobs": 2}),
                          post("/v1/chat/completions", {"messages": [user(Q[0])], **oa, "max_tokens": 8,
                                                         "n": 2, "temperature": 0}),
                          post("/v1/completions", {**oa, "prompt": "The capital of France is", "max_tokens": 8,
                                                   "temperature": 0})],
        note="requests as the openai package sends them")
    s += proxy_sessions() + tools_sessions()
    s += n_choices_sessions()
    s += threads_sessions()
    return s


def threads_sessions() -> list[dict]:
    """llama-server -t 4, 8, 16: the split-KV decode cuts the cache into -t chunks and the tiled prefill its rows
    into 4 * -t chunks, so the bits follow -t. Prompts of ~450 and ~900 tokens (decode at n_kv 512 and 1024, a
    prefill of two ubatches), greedy and seeded, with logprobs."""
    out = []
    long2 = DOC + "\n\n" + DOC.replace("Rhine", "Danube").replace("North Sea", "Black Sea")
    for t in ("4", "8", "16"):
        q1 = [user(DOC + "\nHow long is the Rhine?")]
        out.append({"name": f"threads_t{t}", "flags": flags(t=t), "note": f"-t {t}: split-KV and tiled attention",
                    "steps": [
                        chat(q1, max_tokens=32, logprobs=True, top_logprobs=1),
                        lambda prev, q1=q1: chat(q1 + [assistant(reply(prev[0])), user("Where does it end?")],
                                                 max_tokens=24, stream=True),
                        chat([user(long2 + "\nCompare the two rivers.")], max_tokens=32, temperature=0.8, seed=11,
                             logprobs=True, top_logprobs=1),
                        chat([user(long2 + "\nCompare the two rivers.")], max_tokens=32),
                        chat([user("Write a short story about the sea.")], max_tokens=24, temperature=0.9, seed=5),
                    ]})
    return out


TOOL_FILES = {
    "a.txt": "line one\nline two\nline three\n",
    "b.md": "no newline at end",
    "sub/c.py": "def f():\n    return 1  \n",
    "sub/deep/d.txt": "x\n",
    "quotes.txt": "say \u201chello\u201d \u2014 ok  \nnext line\n",
    "dup.txt": "same\nother\nsame\n",
    "big.txt": "0123456789\n" * 2000,
    "bin.dat": {"hex": "fffe410a"},
    "edit.txt": "alpha\nbeta\ngamma\ndelta\n",
}


def _tool(tool: str, params=None, stream=None, cwd: bool = True, **headers) -> dict:
    body = {"tool": tool}
    if params is not None:
        body["params"] = params
    if stream is not None:
        body["stream"] = stream
    hs = ({"x-tool-cwd": "$TOOLS"} if cwd else {}) | {k.replace("_", "-"): v for k, v in headers.items()}
    return post("/tools", body, headers=hs)


def tools_sessions() -> list[dict]:
    """/tools (--tools): every built-in tool on a fresh directory of TOOL_FILES (`$TOOLS`, the x-tool-cwd), and the
    CORS default --tools brings. get_info's `os` (uname -a) is blanked: it names the machine."""
    s = []

    def add(name, steps, f, note="", files=True):
        s.append({"name": name, "flags": f, "note": note, "steps": steps,
                  **({"files": TOOL_FILES, "blank": ["os"]} if files else {})})

    R, G, X = "read_file", "grep_search", "exec_shell_command"
    add("tools_list_and_calls", [
        get("/tools"), _tool(R, {"path": "a.txt"}), _tool(R, {"path": "a.txt", "start_line": 2, "end_line": 2}),
        _tool(R, {"path": "a.txt", "append_loc": True, "start_line": 0}), _tool(R, {"path": "b.md"}),
        _tool(R, {"path": "big.txt"}), _tool(R, {"path": "big.txt", "start_line": 1999, "end_line": 5000}),
        _tool(R, {"path": "big.txt", "start_line": "2", "end_line": 2.7}), _tool(R, {"path": "nope.txt"}),
        _tool(R, {"path": "sub"}), _tool(R, {"path": "bin.dat"}), _tool(R, {"path": "bin.dat"}, x_resp_type="base64"),
        _tool(R, {"path": "$TOOLS/sub/c.py"}, cwd=False), _tool(R, {"path": "sub/../a.txt", "end_line": 0}),
        _tool(R, {"path": 5}), _tool(R, {}), _tool(R), _tool(R, {"path": "a.txt", "resp_type": "base64"}),
        _tool("write_file", {"path": "new/dir/e.txt", "content": "h\u00e9llo\n"}), _tool(R, {"path": "new/dir/e.txt"}),
        _tool("write_file", {"path": "a.txt/x", "content": "no"}), _tool("write_file", {"path": "w.txt"}),
        _tool("get_info"), _tool("get_info", {"cwd": "/elsewhere"}),
    ], flags("--tools", "all"), note="GET /tools, read_file, write_file, get_info")
    E = "edit_file"
    add("tools_edit_file", [
        _tool(E, {"path": "edit.txt", "edits": [{"old_text": "beta", "new_text": "BETA"}]}),
        _tool(R, {"path": "edit.txt"}),
        _tool(E, {"path": "edit.txt", "edits": [{"old_text": "delta\n", "new_text": ""},
                                                {"old_text": "alpha", "new_text": "A\nA"}]}),
        _tool(R, {"path": "edit.txt"}),
        _tool(E, {"path": "edit.txt", "edits": [{"old_text": "zzz", "new_text": "y"}]}),
        _tool(E, {"path": "dup.txt", "edits": [{"old_text": "same", "new_text": "y"}]}),
        _tool(E, {"path": "edit.txt", "edits": [{"old_text": "BETA\ngam", "new_text": "1"},
                                                {"old_text": "gamma", "new_text": "2"}]}),
        _tool(E, {"path": "edit.txt", "edits": [{"old_text": "", "new_text": "y"}]}),
        _tool(E, {"path": "edit.txt", "edits": []}), _tool(E, {"path": "edit.txt", "edits": "x"}),
        _tool(E, {"path": "edit.txt", "edits": [{"old_text": "BETA", "new_text": "BETA"}]}),
        _tool(E, {"path": "edit.txt", "edits": [5]}), _tool(E, {"path": "edit.txt"}),
        _tool(E, {"path": "quotes.txt", "edits": [{"old_text": 'say "hello" - ok\nnext', "new_text": "said\nnext"}]}),
        _tool(R, {"path": "quotes.txt"}),
        _tool(E, {"path": "missing.txt", "edits": [{"old_text": "a", "new_text": "b"}]}),
    ], flags("--tools", "all"), note="edit_file: exact, several, fuzzy (quotes, dashes, trailing blanks), refusals")
    F = "file_glob_search"
    add("tools_search", [
        _tool(F, {"path": ".", "include": "*.py"}), _tool(F, {"path": ".", "include": "deep/*.txt"}),
        _tool(F, {"path": ".", "include": "sub/**", "type": "dir"}), _tool(F, {"path": "sub", "include": "c.*"}),
        _tool(F, {"path": ".", "include": "d.txt", "max_depth": 2}), _tool(F, {"path": ".", "include": "[ab].md"}),
        _tool(F, {"path": ".", "include": "*.py", "exclude": "c*"}), _tool(F, {"path": ".", "limit": 0}),
        _tool(F, {"path": ".", "type": "link"}), _tool(F, {"path": "nowhere"}), _tool(F, {}),
        _tool(G, {"path": "a.txt", "pattern": "line"}),
        _tool(G, {"path": "a.txt", "pattern": "t[wh]", "return_line_numbers": True}),
        _tool(G, {"path": "a.txt", "pattern": "two", "context_lines": 1}),
        _tool(G, {"path": "a.txt", "pattern": "LINE T", "ignore_case": True}),
        _tool(G, {"path": "big.txt", "pattern": "^0123"}), _tool(G, {"path": "a.txt", "pattern": "e.t", "literal": True}),
        _tool(G, {"path": "sub", "pattern": "return\\s+\\d"}), _tool(G, {"path": ".", "pattern": "def", "include": "*.py"}),
        _tool(G, {"path": "nowhere", "pattern": "x"}), _tool(G, {"path": "a.txt"}),
        _tool(G, {"path": "a.txt", "pattern": "(?=line t)l"}), _tool(G, {"path": "a.txt", "pattern": "li(?!ne o)ne"}),
        _tool(G, {"path": "a.txt", "pattern": "\\x6cine\\s+o"}), _tool(G, {"path": "a.txt", "pattern": "l.*?e$"}),
        _tool(G, {"path": "a.txt", "pattern": "(two|three)\\b"}), _tool(G, {"path": "a.txt", "pattern": "(e)\\1"}),
        _tool(G, {"path": "a.txt", "pattern": "("}), _tool(G, {"path": "a.txt", "pattern": "[a"}),
        _tool(G, {"path": "a.txt", "pattern": "a)"}), _tool(G, {"path": "a.txt", "pattern": "*a"}),
        _tool(G, {"path": "a.txt", "pattern": "a\\"}), _tool(G, {"path": "a.txt", "pattern": "a{2"}),
        _tool(G, {"path": "a.txt", "pattern": "(?<=l)ine"}), _tool(G, {"path": "a.txt", "pattern": "a{3,1}"}),
        *[_tool(G, {"path": "a.txt", "pattern": p}) for p in (
            "a**", "+", "a|*b", "(*a)", "[", "[]", "a{,2}", "\\", "(?P<n>a)", "x(", "(a))", "[[:alpha:]]", "\\e",
            "a{2}{3}", "[b-a]", "(?:a", "\\u0041", "l\\w+?", "[^]x]")],
    ], flags("--tools", "all"), note="file_glob_search and grep_search (each listing matches at most one entry "
                                     "per directory: the walker's order is the file system's)")
    add("tools_exec", [
        _tool(X, {"command": "echo hi"}), _tool(X, {"command": "echo err 1>&2; exit 3"}),
        _tool(X, {"command": "printf abcdef", "max_output_size": 2}), _tool(X, {"command": "printf abc",
                                                                               "max_output_size": 0}),
        _tool(X, {"command": "pwd"}), _tool(X, {"command": "sleep 5", "timeout": 1}),
        _tool(X, {"command": "echo one"}, stream=True), _tool(X, {"command": "exit 2"}, stream=True),
        _tool(X, {"command": "echo a; sleep 0.5; echo b 1>&2; sleep 0.5; printf c"}, stream=True),
        _tool(X, {"command": "sleep 3", "timeout": 1}, stream=True),
        _tool(X, {"command": "pwd"}, x_tool_cwd="/nonexistent-dir"), _tool(X, {}),
        _tool(X, {"command": "echo hi"}, x_tool_runtime="bogus"),
        _tool(X, {"command": "echo hi"}, x_tool_runtime="docker:img"),
        _tool(X, {"command": "echo hi"}, x_tool_runtime="docker-container:-x"),
        _tool(X, {"command": "echo hi"}, x_tool_runtime="ssh:-oProxyCommand=touch /tmp/pwned"),
        _tool(X, {"command": "echo hi"}, x_tool_runtime="ssh:"),
    ], flags("--tools", "all"), note="exec_shell_command: output, exit codes, limits, timeout, stream, cwd")
    add("tools_requests", [
        post("/tools", {}), post("/tools", {"tool": "nope"}), post("/tools", {"tool": 5}),
        post("/tools", {"tool": "read_file", "stream": True}), post("/tools", {"tool": "read_file", "stream": "yes"}),
        post("/tools", {"tool": "read_file", "params": 5}), post("/tools", {"tool": "read_file", "params": None}),
        post("/tools", [1]), post("/tools", None, raw="{nope"), post("/tools", None),
        post("/tools", {"tool": "exec_shell_command", "params": {"command": "echo x"}}),
        get("/tools"), post("/tools", {"tool": "read_file", "params": 5}, headers={"x-tool-cwd": "/tmp"}),
        post("/tools", {"tool": "get_info", "params": None}, headers={"x-tool-cwd": "$TOOLS"}),
    ], flags("--tools", "read_file,get_info"), note="the request's own errors; a subset of the tools")
    GIT_FILES = {".gitignore": "ignored.txt\nbuild/\n", "ignored.txt": "x\n", "src/m.py": "def m():\n    pass\n",
                 "src/n.py": "def n():\n    return 2\n", "build/out.txt": "def built\n", "README.md": "# def\n",
                 "sub dir/space file.txt": "def spaced\n", "caf\u00e9.txt": "def accent\n", "src/deep/z.py": "def z(): 1\n"}
    s.append({"name": "tools_git", "flags": flags("--tools", "all"), "files": GIT_FILES, "git": True,
              "note": "file_glob_search / grep_search in a git repository (git ls-files: sorted, .gitignore applied)",
              "steps": [_tool(F, {"path": "."}), _tool(F, {"path": ".", "include": "*.py"}),
                        _tool(F, {"path": ".", "include": "src/*.py"}), _tool(F, {"path": ".", "max_depth": 1}),
                        _tool(F, {"path": "src", "max_depth": 2}), _tool(F, {"path": ".", "limit": 2}),
                        _tool(F, {"path": ".", "exclude": "*.md"}), _tool(G, {"path": ".", "pattern": "def"}),
                        _tool(G, {"path": ".", "pattern": "^def [mn]", "include": "src/**"}),
                        _tool(G, {"path": "src", "pattern": "return", "return_line_numbers": True})]})
    add("tools_edges", [
        _tool(X, {"command": "printf abc", "max_output_size": -1}), _tool(X, {"command": "printf abcdef",
                                                                            "max_output_size": 2.9}),
        _tool(X, {"command": "printf ok", "timeout": "x", "max_output_size": None}), _tool(X, {"command": 5}),
        _tool(X, {"command": "printf 'a\\377b'"}), _tool(X, {"command": "head -c 20000 /dev/zero | tr '\\0' y"}),
        _tool(R, {"path": "a.txt", "start_line": 10}), _tool(R, {"path": "a.txt", "end_line": -5}),
        _tool(R, {"path": "a.txt", "start_line": 3, "end_line": 2}), _tool(R, {"path": "a.txt", "append_loc": 1}),
        _tool(R, {"path": "big.txt", "end_line": 1600}), _tool(R, {"path": "a.txt", "start_line": True}),
        _tool("write_file", {"path": "", "content": "x"}), _tool("write_file", {"path": "sub", "content": "x"}),
        _tool("write_file", {"path": "z.txt", "content": ""}), _tool(R, {"path": "z.txt"}),
        _tool(F, {"path": ".", "include": "d.txt", "max_depth": -3, "limit": 500, "type": None}),
        _tool(G, {"path": "a.txt", "pattern": "line", "context_lines": -2}),
        _tool(G, {"path": "a.txt", "pattern": "t", "context_lines": 5}),
    ], flags("--tools", "all"), note="parameter edges: json_value's defaults and casts, empty and huge outputs")
    add("tools_api_key", [get("/tools"), get("/tools", headers={"Authorization": "Bearer sekrit"}),
                          _tool("read_file", {"path": "a.txt"}, X_Api_Key="sekrit"),
                          _tool("read_file", {"path": "a.txt"}, Authorization="Bearer nope")],
        flags("--tools", "read_file", "--api-key", "sekrit"), note="/tools behind --api-key")
    pre = _preflight
    add("tools_cors_default", [
        pre("http://localhost:8080"), pre("http://evil.com"), pre("http://127.0.0.1:3000", "/tools"),
        {**get("/health"), "headers": {"Origin": "http://evil.com"}},
        {**get("/tools"), "headers": {"Origin": "http://[::1]:1"}},
    ], flags("--tools", "all"), note="--tools: the default --cors-origins is localhost", files=False)
    add("tools_cors_explicit", [pre("http://localhost:8080"), pre("http://evil.com")],
        flags("--cors-origins", "*", "--tools", "get_info"), note="an explicit --cors-origins stays", files=False)
    s.append({"name": "head_requests", "flags": flags("--agent"), "target": True, "files": TOOL_FILES, "blank": ["os"],
              "note": "HEAD on /cors-proxy (the GET handler: forwarded as GET) and /tools", "steps": [
                  {"method": "HEAD", "path": "/cors-proxy?url=http://$TARGET/json"},
                  {"method": "HEAD", "path": "/cors-proxy?url=ftp://x/"},
                  {"method": "HEAD", "path": "/tools"}, {"method": "HEAD", "path": "/health"}]})
    add("agent_cors", [pre("http://localhost:8080"), pre("http://evil.com"), get("/tools"),
                       _proxy("http://127.0.0.1:1/"), get("/props")],
        flags("--agent"), note="--agent: all tools, the proxy, the localhost default", files=False)
    return s


def _proxy(url: str, method: str = "GET", **kw) -> dict:
    return {"method": method, "path": "/cors-proxy?url=" + url, **kw}


def _preflight(origin: str, path: str = "/completions") -> dict:
    return {"method": "OPTIONS", "path": path, "headers": {
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Authorization"}}


def proxy_sessions() -> list[dict]:
    """/cors-proxy (--ui-mcp-proxy) in front of a target server (tests/proxy_target.py: `$TARGET`), and the
    CORS default --tools changes. Proxy header names are sent lower-case (what an ASGI server sees)."""
    T = "http://$TARGET"
    P = "x-llama-server-proxy-header-"
    s = []

    def add(name, steps, f, note="", target=True):
        s.append({"name": name, "flags": f, "note": note, "steps": steps, **({"target": True} if target else {})})

    add("cors_proxy", [
        _proxy(T + "/plain"), _proxy(T + "/json", headers={P + "accept": "application/json", P + "b-second": "2",
                                                             P + "a-first": "1", "Cookie": "c=1"}),
        _proxy(T + "/echo", "POST", body={"a": 1}), _proxy(T + "/echo", "POST"),
        _proxy(T + "/echo", "POST", body={"a": 1}, headers={P + "content-type": "application/json"}),
        _proxy(T + "/echo", "POST", raw="x" * 1500), _proxy(T + "/continue", "POST", raw="y" * 1024),
        _proxy(T + "/continue", "POST", raw="w" * 10, headers={P + "expect": "100-continue"}),
        _proxy(T + "/early", "POST", raw="z" * 2000), _proxy(T + "/early", "POST", raw="z" * 1023),
        _proxy(T + "/chunked"), _proxy(T + "/empty"), _proxy(T + "/notype"), _proxy(T + "/close"),
        _proxy(T + "/missing"), _proxy(T + "/fail"), _proxy(T + "/short"), _proxy(T + "/badchunk"), _proxy(T + "/dup"), _proxy(T + "/binary"),
        _proxy(T + "/redirect"), _proxy(T + "/redirect-abs"), _proxy(T + "/loop"), _proxy(T + "/noloc"),
        _proxy(T + "/redirect-ftp"), _proxy(T + "/see-other", "POST", body={"a": 1}, headers={P + "x-keep": "k"}),
        _proxy(T + "/redirect", "POST", body={"a": 1}),
        _proxy(T + "/redirect-cross", "POST", body={"b": 2}, headers={
            P + "authorization": "Bearer x", P + "cookie": "c=1", P + "x-kept": "k", P + "host": "h"}),
        _proxy(T + "/a%20b+c?q=1+2&r=x%2By"), _proxy(T), _proxy(T + "/x&url=" + T + "/second"),
        _proxy("http%3A%2F%2F$TARGET%2Fenc%3Fa%3D%25zz%26b"), _proxy(T + "/p%C3%A9;x,y'z?k=%E2%82%AC&flag&=v&e="),
        _proxy("https://$TLSTARGET/plain"), _proxy("http://$TLSTARGET/plain"), _proxy(T + "/plain#frag"), _proxy("http://u@$TARGET/plain"),
        _proxy(T + "/binary", headers={P + "host": "example.com", P: "empty", P + "accept-encoding": "gzip",
                                       P + "content-length": "55", P + "connection": "keep-alive"}),
        {"method": "DELETE", "path": "/cors-proxy?url=" + T + "/plain"},
        {"method": "PUT", "path": "/cors-proxy?url=" + T + "/plain"},
        {"method": "OPTIONS", "path": "/cors-proxy", "headers": {"Origin": "http://localhost:3000"}},
    ], flags("--ui-mcp-proxy"), note="what the target receives and what comes back")
    add("cors_proxy_bad_urls", [
        _proxy("http://127.0.0.1:1/"), {"method": "GET", "path": "/cors-proxy"}, _proxy("ftp://x/"),
        _proxy("HTTP://x/"), _proxy("file:///etc/passwd"), _proxy("http://u:p@127.0.0.1:1/plain"),
        _proxy("http://127.0.0.1:abc/"), _proxy("http://127.0.0.1:99999999999/"), _proxy("http://127.0.0.1:70000/"),
        _proxy("http://127.0.0.1:0/"), _proxy("http://127.0.0.1:%2012x/"), _proxy("http://[::1/"), _proxy("http:///x"),
        _proxy("http://[::1]:1/x"), _proxy("http://localhost:1/"), _proxy("https://127.0.0.1:1/"),
        _proxy("http://127.0.0.1:1/", "POST", body={"a": 1}), get("/tools"), post("/tools", {"tool": "read_file"}),
    ], flags("--webui-mcp-proxy"), note="refused targets, unreachable ones", target=False)
    key = {"Authorization": "Bearer sekrit"}
    add("cors_proxy_api_key", [
        _proxy(T + "/capture"), _proxy(T + "/capture", headers={"Authorization": "Bearer wrong"}),
        _proxy(T + "/capture", headers={**key, "Proxy-Authorization": "Basic secret", "X-Api-Key": "sekrit",
                                        "Cookie": "session=secret", P + "accept": "application/json",
                                        P + "authorization": "Bearer explicit"}),
        _proxy(T + "/capture", headers={"X-Api-Key": "sekrit"}), get("/health"),
    ], flags("--api-key", "sekrit", "--ui-mcp-proxy"), note="the suite's test_cors_proxy_only_forwards_explicit_"
                                                          "proxy_headers, and the key check in front of the proxy")
    add("cors_proxy_disabled", [
        _proxy(T + "/plain"), _proxy(T + "/plain", "POST", body={}), get("/tools"), post("/tools", {}),
        {"method": "OPTIONS", "path": "/cors-proxy"}, _proxy(T + "/plain", headers={"Origin": "http://x.y"}),
    ], flags(), note="without --ui-mcp-proxy / --tools: 403, the target sees nothing")
    add("cors_proxy_agent_off", [_proxy(T + "/plain"), get("/tools"), get("/props")],
        flags("--ui-mcp-proxy", "--no-ui-mcp-proxy"), note="the last of --ui-mcp-proxy / --no-ui-mcp-proxy wins")
    return s


LONG = ("Here is a report about the history of sailing ships, their rigging, their crews and the trade routes "
        "they followed across the oceans. ") * 12


def n_choices_sessions() -> list[dict]:
    """n > 1 choices (issue 6): a parent task and n - 1 children on other slots (non-unified caches), seeded and
    greedy, with probabilities, streams, a follow-up on the parent's and on a child's slot, prompts whose cache
    view reaches 512 cells (the split-KV path once a choice decodes alone, the one-chunk path while several do),
    choices of different lengths (stop strings), slots that are not neighbours (-np 4), several prompts."""
    s = []

    def add(name, steps, f, note=""):
        s.append({"name": name, "flags": f, "note": note, "steps": steps})

    poem = [user("Write a short poem about the sea.")]
    add("nchoices_np2_probs", [
        chat(poem, n=2, temperature=0.9, seed=11, max_tokens=24, logprobs=True, top_logprobs=3),
        chat(poem, n=2, temperature=0.9, seed=11, max_tokens=24, logprobs=True, top_logprobs=3, stream=True),
        chat(poem, max_tokens=16, id_slot=1), chat(poem, max_tokens=16, id_slot=0), get("/slots"),
        completion("The best thing about the sea is", n_cmpl=2, n_probs=2, temperature=1.0, seed=5, stop=["."],
                   n_predict=40),
        completion("The best thing about the sea is", n_cmpl=2, n_probs=2, temperature=1.0, seed=5, n_predict=12,
                   stream=True, post_sampling_probs=True),
        completion("The best thing about the sea is", n_predict=8), get("/slots"),
        chat(poem, n=3, max_tokens=4)],
        flags(np="2"), note="-np 2: seeded choices with logprobs (JSON and stream), follow-ups on both slots, "
                            "/completion n_cmpl with n_probs and a stop (different lengths), n = 3 > slots (400)")
    add("nchoices_np2_greedy", [
        chat([user(Q[0])], n=2, max_tokens=12, logprobs=True, top_logprobs=2),
        chat([user(Q[0])], n=2, max_tokens=12, top_k=1, stream=True, stream_options={"include_usage": True}),
        v1_completion("The capital of France is", n=2, max_tokens=8, logprobs=2),
        v1_completion("The capital of France is", n=2, max_tokens=8, stream=True),
        completion(["Once upon a time", "The sea"], n_cmpl=2, n_predict=6, temperature=0.7, seed=9),
        chat([user(Q[0])], max_tokens=8)],
        flags(np="2"), note="greedy choices (equal), /v1/completions with n, two prompts of two choices each")
    add("nchoices_np2_long", [
        chat([user(LONG + "Summarize it.")], n=2, temperature=0.8, seed=21, max_tokens=40, stop=["."],
             logprobs=True, top_logprobs=1),
        chat([user(LONG + "Summarize it.")], n=2, temperature=0.8, seed=22, max_tokens=40, stop=[","],
             stream=True),
        chat([user(LONG + "Summarize it.")], max_tokens=12, logprobs=True, top_logprobs=1),
        completion(LONG, n_cmpl=2, n_predict=30, temperature=1.0, seed=3, stop=["."], n_probs=1)],
        flags(np="2"), note="prompts of 300+ tokens: 512+ cells in view; stops end the choices at different steps")
    add("nchoices_np4", [
        chat([user(LONG + "Summarize it.")], n=2, temperature=0.8, seed=31, max_tokens=30, stop=["."],
             logprobs=True, top_logprobs=1),
        chat([user(LONG + "Summarize it.")], n=3, temperature=0.8, seed=32, max_tokens=30, stop=[","],
             logprobs=True, top_logprobs=1),
        get("/slots"), chat([user(LONG + "Summarize it.")], max_tokens=10, logprobs=True, top_logprobs=1),
        completion("Hello", n_cmpl=4, n_predict=8, temperature=0.9, seed=1, stream=True)],
        flags(np="4"), note="-np 4: a parent and a child on slots 3 and 0 (separate ubatches), then 2, 0, 1 "
                            "(one ubatch of three streams), four choices")
    add("nchoices_metrics", [
        get("/metrics"), chat(poem, n=2, temperature=0.9, seed=4, max_tokens=10, stop=[","]), get("/metrics"),
        completion("The sea", n_cmpl=2, n_predict=6, stream=True), get("/metrics"), get("/slots")],
        flags("--metrics", np="2"), note="/metrics counters and /slots around n > 1 requests")
    add("nchoices_q8_cache", [
        chat([user(LONG + "Summarize it.")], n=2, temperature=0.8, seed=41, max_tokens=24, stop=["."],
             logprobs=True, top_logprobs=1),
        chat([user(LONG + "Summarize it.")], max_tokens=8, logprobs=True, top_logprobs=1)],
        flags("-ctk", "q8_0", "-ctv", "q8_0", np="2"), note="a Q8_0 KV cache (always the one-chunk path)")
    add("nchoices_suite", [
        chat([system("Book"), user("What is the best book")], max_tokens=8, n=2, id_slot=0, temperature=None),
        chat([system("Book"), user("What is the best book")], max_tokens=8, n=2, id_slot=0, temperature=None)],
        flags("-b", "32", "--seed", "42", ctx="512", np="2"),
        note="llama.cpp's test_chat_completions_multiple_choices: the tinyllama2 preset's flags, the same request twice")
    return s


def bad_requests() -> list[dict]:
    """Groups of requests llama-server refuses, each group on one fresh server: {flags, requests}."""
    C = "/v1/chat/completions"
    hi = [user("hi")]
    chat_bad = [
        post(C, None) | {"raw": "{b"}, post(C, None) | {"raw": ""}, post(C, None) | {"raw": '{"messages": [}'},
        post(C, None) | {"raw": '{"messages": []} x'}, post(C, None) | {"raw_hex": "7b226d657373616765"},
        post(C, None) | {"raw": "[1, 2]"}, post(C, None) | {"raw": "null"},
        post(C, {}), post(C, {"messages": "hi"}), post(C, {"messages": {"role": "user"}}),
        post(C, {"messages": ["hi"]}), post(C, {"messages": [{"role": "user"}]}),
        post(C, {"messages": [{"role": "user", "content": 5}]}),
        post(C, {"messages": [{"role": "user", "content": [{"type": "audio"}]}]}),
        post(C, {"messages": [{"role": "user", "content": [{"type": "image_url",
                                                             "image_url": {"url": "data:image/png;base64,AA"}}]}]}),
        post(C, {"messages": [{"content": "hi"}]}), post(C, {"messages": [{"role": 5, "content": "hi"}]}),
        post(C, {"messages": [user("hi"), {"role": "assistant"}]}),
        post(C, {"messages": hi, "temperature": "hot"}), post(C, {"messages": hi, "top_k": "5"}),
        post(C, {"messages": hi, "max_tokens": "5"}), post(C, {"messages": hi, "n_predict": -2}),
        post(C, {"messages": hi, "n": 2}), post(C, {"messages": hi, "top_logprobs": 2}),
        post(C, {"messages": hi, "response_format": {"type": "xml"}}),
        post(C, {"messages": hi, "response_format": {"type": "json_schema",
                                                     "json_schema": {"schema": {"type": "nonsense"}}}}),
        post(C, {"messages": hi, "json_schema": {"type": "object"}, "grammar": "root ::= \"a\""}),
        post(C, {"messages": hi, "grammar": "root ::= nope"}),
        post(C, {"messages": hi, "repeat_penalty": 0}),
        post(C, {"messages": hi, "dry_sequence_breakers": []}),
        post(C, {"messages": hi, "stop": [1]}),
        post(C, {"messages": hi, "reasoning_format": "bogus"}),
        post(C, {"messages": hi, "samplers": [1]}),
        post(C, {"messages": hi, "repeat_last_n": -5}),
        post(C, {"messages": hi, "adaptive_decay": 1.5}),
        post(C, {"messages": hi, "seed": "x"}),
        post(C, {"messages": hi, "logit_bias": "x", "max_tokens": 1, "temperature": 0}),
        post(C, {"messages": hi, "lora": "x"}),
        post(C, {"messages": hi, "chat_template_kwargs": {"enable_thinking": "yes"}}),
        post(C, {"messages": [user("a"), assistant("b"), assistant("c")]}),
        post(C, {"messages": hi, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                 "stream": True, "logprobs": True}),
        post(C, {"messages": hi, "stream": "yes"}),
        post(C, {"messages": hi, "dry_allowed_length": -1}),
        post(C, {"messages": hi, "n_probs": "3"}),
    ]
    completion_bad = [
        post("/completion", {}), post("/completion", {"prompt": []}), post("/completion", {"prompt": 5}),
        post("/completion", {"prompt": {}}), post("/completion", {"prompt": [999999]}),
        post("/completion", {"prompt": "hi", "json_schema": {"type": "nonsense"}}),
        post("/completion", {"prompt": "hi", "n_predict": "5"}),
        post("/completion", {"prompt": "hi", "grammar": "root ::= ("}),
        post("/completion", {"prompt": [-1]}), post("/completion", None) | {"raw": "{\"prompt\": \"a\""},
        post("/v1/completions", {}), post("/v1/completions", {"prompt": "hi", "n_predict": -3}),
        post("/completions", {"prompt": []}),
    ]
    routes_bad = [
        get("/nope"), post("/v1/nope", {}), get(C), get("/completion"), {"method": "DELETE", "path": "/completion"},
        post("/health", {}), {"method": "PUT", "path": "/v1/chat/completions", "body": {"messages": hi}},
        get("/metrics"), post("/props", {}), post("/slots/0?action=save", {"filename": "a.bin"}),
        post("/infill", {"input_prefix": "a", "input_suffix": "b"}), post("/embeddings", {"content": "hi"}),
        post("/detokenize", {"tokens": [99999999]}), post("/tokenize", {"content": 5}),
        post("/apply-template", {"messages": "x"}),
        post(C, None) | {"fill": {"prefix": '{"messages":[{"role":"user","content":"', "byte": "a",
                                  "size": 100 * 1024 * 1024 + 1, "suffix": '"}]}'}},
    ]
    return [
        {"name": "chat", "flags": flags(), "requests": chat_bad},
        {"name": "completion", "flags": flags(), "requests": completion_bad},
        {"name": "routes", "flags": flags(), "requests": routes_bad},
        {"name": "ctx256", "flags": flags(ctx="256"), "requests": [
            post(C, {"messages": [user("hi " * 300)]}), post(C, {"messages": [user("hi " * 300)], "stream": True}),
            post("/completion", {"prompt": "word " * 300}), post("/completion", {"prompt": list(range(1, 257))}),
            post("/completion", {"prompt": list(range(1, 256)), "n_predict": 1, "temperature": 0}),
            post("/v1/completions", {"prompt": "word " * 300, "stream": True})]},
        {"name": "slot_actions", "flags": flags("--slot-save-path", "$SLOTS"), "requests": [
            post("/slots/x?action=save", {"filename": "a.bin"}), post("/slots/0?action=fly", {"filename": "a.bin"}),
            post("/slots/0?action=save", {}), post("/slots/0?action=save", {"filename": "../a.bin"}),
            post("/slots/0?action=save", {"filename": ""}), post("/slots/0?action=restore", {"filename": "no.bin"}),
            post("/slots/0", {"filename": "a.bin"}), post("/slots/0?action=restore", {})]},
        {"name": "no_slots", "flags": flags("--no-slots"), "requests": [get("/slots")]},
        {"name": "api_key", "flags": flags("--api-key", "k1,k2"), "requests": [
            get("/v1/models"), post(C, {"messages": hi}), post(C, {"messages": hi}, headers={"Authorization": "Bearer k3"}),
            post(C, {"messages": hi}, headers={"X-Api-Key": "nope"}), get("/props", headers={"Authorization": "Bearer "}),
            get("/nope"), get("/slots"), get("/metrics"), post("/completion", {"prompt": "hi"})]},
    ]


# ---------------------------------------------------------------------------------------------------------------
# --no-jinja (the built-in templates), --chat-template, verbose: tests/oracle/server/sessions_legacy.json

def no_jinja(*extra: str) -> list[str]:
    f = flags(*extra)
    f[f.index("--jinja")] = "--no-jinja"
    return f


LEGACY_BODIES = [
    {"messages": [system("Book"), user("What is the best book")]},
    {"messages": [user("  padded  \n"), assistant(" a1 "), user("q2")]},
    {"messages": [system("s"), {"role": "user", "content": [{"type": "text", "text": "What is"},
                                                            {"type": "text", "text": "the best book"}]}]},
    {"messages": [user("hi"), assistant("Whill")]},
    {"messages": [user("hi"), assistant("He")], "continue_final_message": True, "add_generation_prompt": False},
    {"messages": [user("hi")], "add_generation_prompt": False},
    {"messages": []},
    {"messages": [{"role": "narrator", "content": "Once"}, {"role": "tool", "content": "r"}, user("x")]},
    {"messages": [user("a"), {"role": "assistant", "content": None,
                              "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                  user("b")]},
    {"messages": [user("nul\u0000inside"), {"role": "user", "content": "x", "reasoning_content": "r"}]},
    {"messages": [user("hi")], "tools": [{"type": "function", "function": {"name": "f"}}]},
    {"messages": [user("hi")], "tools": []},
    {"messages": [user("hi")], "tool_choice": "none"},
    {"messages": [user("hi")], "tool_choice": 5},
    {"messages": [user("Hi"), assistant("Hello")], "add_generation_prompt": True, "continue_final_message": True},
    {"messages": [user("hi")], "chat_template_kwargs": {"enable_thinking": True}},
]


def _legacy_steps(bodies=LEGACY_BODIES) -> list:
    return [post("/apply-template", b) for b in bodies] + [get("/props")]


def legacy_sessions() -> list[dict]:
    s = []
    C = "/v1/chat/completions"
    book = [system("Book"), user("What is the best book")]
    hi = [user("Does not matter what I say, does it?")]

    def add(name, steps, f, note=""):
        s.append({"name": name, "flags": f, "note": note, "steps": steps})

    add("legacy_gguf_template", _legacy_steps() + [
        chat(book, max_tokens=8),
        chat(hi, max_tokens=6, grammar='root ::= "a"{5,5}'),
        chat([system("You are a coding assistant."), user("Write an example")], max_tokens=6,
             json_schema={"const": "42"}),
        chat([user("Write an example")], max_tokens=10, response_format={"type": "json_object"}),
        chat([user("Write an example")], max_tokens=10,
             response_format={"type": "json_schema", "json_schema": {"schema": {"items": [{"type": "integer"}]}}}),
        chat([user("x")], response_format={"type": "json_object", "schema": {"type": "hiccup"}}),
        chat([user("x")], json_schema="not an object", max_tokens=4),
        chat([user("x")], json_schema={"type": "object"}, grammar="root ::= \"a\""),
        chat([user("x")], tools=[{"type": "function", "function": {"name": "f"}}]),
        chat(hi, max_tokens=6, grammar='root ::= "a"{5,5}', stream=True),
        chat([user("hi"), assistant("Whill")], max_tokens=6),
        chat(book, max_tokens=4, verbose=True),
        chat(book, max_tokens=4, verbose=True, stream=True),
        chat(book, max_tokens=4, verbose=False),
        v1_completion("Once upon a time", max_tokens=3, verbose=True),
        v1_completion("Once upon a time", max_tokens=3, verbose=True, stream=True),
        post("/v1/chat/completions/input_tokens", {"messages": book}),
        get("/v1/models"),
    ], no_jinja(), note="--no-jinja with SmolLM2's own template (detected as chatml): prompts, grammars, verbose")

    for name in ("llama3", "command-r", "gemma", "mistral-v7", "phi3", "deepseek3", "chatglm4", "vicuna"):
        add(f"legacy_named_{name}", _legacy_steps(LEGACY_BODIES[:9]) + [
            chat(book, max_tokens=6),
            chat([user("Hi"), assistant("Hello")], max_tokens=6, add_generation_prompt=True,
                 continue_final_message=True),
        ], no_jinja("--chat-template", name), note=f"--no-jinja --chat-template {name}")

    add("jinja_named_llama3", _legacy_steps(LEGACY_BODIES[:6]) + [
        chat(book, max_tokens=6),
        chat([user("Hi"), assistant("Hello")], max_tokens=8, add_generation_prompt=True,
             continue_final_message=True),
    ], flags("--chat-template", "llama3"), note="--jinja --chat-template llama3: the name is a Jinja text")

    llama31 = "$TEMPLATE:meta-llama-Llama-3.1-8B-Instruct.jinja"
    prefills = [
        chat(book + [assistant("Whill")], max_tokens=8, verbose=True),
        chat(book + [{"role": "assistant", "content": [{"type": "text", "text": "Wh"},
                                                         {"type": "text", "text": "ill"}]}], max_tokens=8,
             verbose=True),
        chat(book + [assistant("Whill")], max_tokens=8, add_generation_prompt=False, continue_final_message=True,
             verbose=True),
    ]
    add("legacy_file_llama31", _legacy_steps(LEGACY_BODIES[:9]) + [chat(book, max_tokens=6)] + prefills,
        no_jinja("--chat-template-file", llama31),
        note="--no-jinja --chat-template-file: a Jinja file detected as a built-in template (llama3)")
    add("jinja_file_llama31", _legacy_steps(LEGACY_BODIES[:6]) + prefills,
        flags("--chat-template-file", llama31, "--verbose"),
        note="--jinja --chat-template-file (the suite's prefill tests)")

    add("verbose_flag", [
        chat(book, max_tokens=2),
        chat(book, max_tokens=2, verbose=False),
        chat(book, max_tokens=2, stream=True),
        completion("Once upon a time", n_predict=2),
        v1_completion("Once upon a time", max_tokens=2),
    ], flags("--verbose"), note="--verbose: every answer carries __verbose unless the request says otherwise")
    return s

"""The Ollama requests of the equivalence records (tests/oracle/ollama/records.json), as sessions: each session is
a list of Ollama v0.13.3 requests (`/api/chat` or `/api/generate`, the body an Ollama client sends) played in
order against one fresh server, so a conversation's later turns find its earlier turns in the prompt cache.
Developer data for testing/record_ollama.py; knows nothing of bankml or of llama-server.

A session: {"name", "num_ctx" (the context its server is started with: 4096 unless a request's options ask
less), "requests": [{"path", "body"}]}. In a body, the model is written "$MODEL" (the replay names the served
model) and two placeholders stand for what an earlier request of the session answered (the recorder resolves
them from the oracle's answers and records the resolved body, which is what the replay sends):
{"$answer": k} (an assistant message's content: request k's answer text) and {"$context": k} (generate's
`context`: request k's context ids).
"""

from __future__ import annotations

M = "$MODEL"


def chat(messages, stream=False, **options):
    body = {"model": M, "messages": messages}
    if stream is not None:
        body["stream"] = stream
    if options:
        body["options"] = options
    return {"path": "/api/chat", "body": body}


def gen(prompt, stream=False, options=None, **extra):
    body = {"model": M, "prompt": prompt}
    if stream is not None:
        body["stream"] = stream
    body.update(extra)
    if options:
        body["options"] = options
    return {"path": "/api/generate", "body": body}


def u(text):
    return {"role": "user", "content": text}


def a(text):
    return {"role": "assistant", "content": text}


def s(text):
    return {"role": "system", "content": text}


def answer(k):
    return {"role": "assistant", "content": {"$answer": k}}


# long turns for the truncation sessions (about 60 to 90 tokens each)
FILLER = [
    "Tell me about the history of the bicycle, from the draisine of 1817 through the penny-farthing to the safety "
    "bicycle, and explain why the chain drive and the pneumatic tyre mattered so much for ordinary riders.",
    "The bicycle began as a running machine without pedals. Pedals on the front wheel came next, then huge front "
    "wheels for speed, and finally the safety bicycle with two equal wheels, a chain and air-filled tyres.",
    "Now describe how a lighthouse works: the lamp, the Fresnel lens that gathers the light into a beam, the "
    "clockwork that turns it, and how sailors tell one lighthouse from another by its pattern of flashes.",
    "A lighthouse keeps a bright lamp behind a Fresnel lens made of many glass rings, which bend the light into "
    "a narrow beam. A rotating mechanism sweeps the beam, and each light has its own characteristic flash.",
    "Explain photosynthesis for a ten year old: what the leaf takes in, where the energy comes from, what sugar "
    "the plant makes, and why the oxygen we breathe is a by-product of the whole process in green plants.",
    "Plants take in carbon dioxide through their leaves and water through their roots. Sunlight gives the "
    "energy to turn them into glucose, a sugar, and the oxygen left over goes out into the air we breathe.",
    "Write a short paragraph on the tides: how the moon and the sun pull on the oceans, why there are two high "
    "tides a day in most places, and what spring and neap tides are and when in the month they happen.",
    "The moon's gravity pulls the ocean into two bulges, one facing the moon and one opposite, so most coasts "
    "see two high tides a day. When sun and moon line up we get spring tides; at right angles, neap tides.",
]


def sessions() -> list[dict]:
    out = []

    def add(name, requests, num_ctx=4096, note=""):
        out.append({"name": name, "num_ctx": num_ctx, "note": note, "requests": requests})

    # Ollama's DefaultOptions (api/types.go:878) with only a seed (the default seed, -1, is random)
    add("defaults", [
        chat([u("What is the capital of France? Answer in one sentence.")], seed=1),
        chat([u("Name three colours.")], stream=None, seed=2),                       # stream absent: a stream
        gen("Write one sentence about the sea.", options={"seed": 3}),
        gen("Say hello.", stream=None, options={"seed": 4, "num_predict": 64}),
        chat([u("Count from one to five.")], seed=5, num_predict=-1),
    ], note="DefaultOptions, seeded; stream absent and false")

    # explicit sampling options, each mapped to llama-server's field of the same meaning
    add("options", [
        chat([u("Give me a fun fact about cats.")], temperature=0, num_predict=48),
        chat([u("Give me a fun fact about dogs.")], temperature=0.7, top_k=1, seed=7, num_predict=48),
        chat([u("Give me a fun fact about owls.")], top_p=0.5, seed=8, num_predict=48),
        chat([u("Give me a fun fact about bees.")], min_p=0.2, seed=9, num_predict=48),
        chat([u("Give me a fun fact about frogs.")], typical_p=0.7, seed=10, num_predict=48),
        chat([u("List ten fruits.")], repeat_penalty=1.5, repeat_last_n=16, seed=11, num_predict=64),
        chat([u("List ten animals.")], presence_penalty=0.8, frequency_penalty=0.6, seed=12, num_predict=64),
        chat([u("List ten cities.")], repeat_last_n=0, seed=13, num_predict=48),
        chat([u("List ten rivers.")], repeat_last_n=128, repeat_penalty=1.2, seed=14, num_predict=48),
        chat([u("Describe the moon.")], temperature=1.2, top_k=100, top_p=0.95, seed=15, num_predict=48),
        gen("The three primary colours are", options={"temperature": 0, "num_predict": 24}),
        gen("A good name for a cat is", options={"top_k": 5, "top_p": 0.8, "min_p": 0.05, "seed": 16,
                                                 "num_predict": 24}),
    ], note="each option alone or in small groups")

    # a conversation that takes turns: every turn sends the whole history (the prompt cache reuses its prefix)
    add("turns_greedy", [
        chat([u("Hi! My name is Ana. What is your name?")], temperature=0, num_predict=64),
        chat([u("Hi! My name is Ana. What is your name?"), answer(0), u("What is my name?")],
             temperature=0, num_predict=64),
        chat([u("Hi! My name is Ana. What is your name?"), answer(0), u("What is my name?"), answer(1),
              u("Tell me a short joke.")], stream=True, temperature=0, num_predict=64),
        chat([u("Hi! My name is Ana. What is your name?"), answer(0), u("What is my name?"), answer(1),
              u("Tell me a short joke."), answer(2), u("Explain it.")], temperature=0, num_predict=64),
    ], note="four turns, greedy")
    add("turns_sampled", [
        chat([s("You are a helpful travel guide."), u("Suggest a city to visit in Italy.")], seed=21,
             num_predict=64),
        chat([s("You are a helpful travel guide."), u("Suggest a city to visit in Italy."), answer(0),
              u("What should I eat there?")], stream=None, seed=22, num_predict=64),
        chat([s("You are a helpful travel guide."), u("Suggest a city to visit in Italy."), answer(0),
              u("What should I eat there?"), answer(1), u("And one museum?")], seed=23, num_predict=64),
    ], note="three turns, default sampling seeded, a system message")

    # stop strings and num_predict limits
    add("stops_and_limits", [
        chat([u("Write a poem about rain.")], temperature=0, stop=["\n"], num_predict=64),
        chat([u("Write a poem about snow.")], temperature=0, stop=["the", "The"], num_predict=64),
        chat([u("Write a poem about wind.")], stream=True, seed=31, stop=[","], num_predict=64),
        chat([u("Write a long story about a dragon.")], seed=32, num_predict=5),
        chat([u("Write a long story about a knight.")], stream=True, seed=33, num_predict=1),
        gen("Once upon a time", options={"seed": 34, "num_predict": 12}),
        gen("Once upon a time", options={"temperature": 0, "num_predict": 40, "stop": ["."]}),
        chat([u("Say yes.")], temperature=0, num_predict=-2),
    ], note="stop strings, done_reason length")

    # format: "json" and a JSON schema
    add("formats", [
        chat([u("Give me a JSON object with a name and an age for a fictional person.")], format="json",
             temperature=0, num_predict=64),
        chat([u("Describe a book as JSON.")], format={"type": "object", "properties": {
            "title": {"type": "string"}, "pages": {"type": "integer"}}, "required": ["title", "pages"]},
            seed=41, num_predict=64),
        gen("List two planets as JSON.", format="json", options={"seed": 42, "num_predict": 48}),
        chat([u("Is the sky blue? Answer as JSON.")], stream=True, format={"type": "object", "properties": {
            "answer": {"type": "boolean"}}, "required": ["answer"]}, temperature=0, num_predict=32),
    ], note="format json -> json_object, a schema -> json_schema")

    # system messages and generate's system
    add("system", [
        chat([s("You answer in French."), u("What is a cat?")], temperature=0, num_predict=48),
        chat([s("You are terse."), s("You like numbers."), u("How many legs has a spider?")], seed=51,
             num_predict=48),
        gen("What is a dog?", system="You answer like a pirate.", options={"temperature": 0, "num_predict": 48}),
        gen("What is a horse?", system="You answer in one word.", stream=True, options={"seed": 52,
                                                                                         "num_predict": 32}),
    ], note="system messages; generate's system")

    # num_ctx smaller than the served context: chatPrompt's truncation (server/prompt.go) drops old turns
    hist = [s("You are a patient teacher.")]
    for i in range(0, len(FILLER), 2):
        hist += [u(FILLER[i]), a(FILLER[i + 1])]
    add("num_ctx_384", [
        chat(hist + [u("Summarize what we talked about in one sentence.")], temperature=0, num_ctx=384,
             num_predict=48),
        chat(hist + [u("Which topic did we discuss last?")], seed=61, num_ctx=384, num_predict=48),
        chat(hist[:5] + [u("Summarize what we talked about in one sentence.")], temperature=0, num_ctx=384,
             num_predict=48),
        chat(hist[1:] + [u("What did I ask first?")], stream=True, temperature=0, num_ctx=384, num_predict=48),
        gen("Tell me something about tides.", system="You are a patient teacher.",
            options={"num_ctx": 384, "temperature": 0, "num_predict": 32}),
    ], num_ctx=384, note="history that no longer fits: old turns dropped, the system message kept")
    hist2 = [s("Be brief.")]
    for i in range(len(FILLER)):
        hist2.append(u(FILLER[i]) if i % 2 == 0 else a(FILLER[i]))
    hist2.insert(5, s("Use simple words."))
    add("num_ctx_256", [
        chat(hist2 + [u("What was the last topic?")], temperature=0, num_ctx=256, num_predict=24),
        chat(hist2 + [u("Say goodbye.")], seed=71, num_ctx=256, num_predict=16),
    ], num_ctx=256, note="a second system message in the middle of a history truncated hard")

    # the context shift (shift, default on: server/routes.go:520) at num_ctx 256: generations longer than the
    # context go on past it, keeping num_keep tokens; with shift false they stop there (done_reason length)
    long = {"num_ctx": 256, "temperature": 0}
    add("context_shift", [
        gen("Once upon a time, in a small village by the sea,", raw=True, options=dict(long, num_predict=330)),
        gen("Tell me a long story about a dragon.", stream=True, options=dict(long, num_predict=320, num_keep=8,
                                                                              temperature=0.8, seed=5)),
        chat([u("Tell me a very long story about a dragon and a knight.")],
             **dict(long, num_predict=300, num_keep=-1)),
    ], num_ctx=256, note="shift on (the default): the history shifts when the context fills")
    off = dict(chat([u("Tell me a very long story about a dragon and a knight.")], **dict(long, num_predict=300)))
    off["body"] = dict(off["body"], shift=False)
    add("context_no_shift", [
        gen("Once upon a time, in a small village by the sea,", raw=True, shift=False,
            options=dict(long, num_predict=330)),
        off,
    ], num_ctx=256, note="shift false: the generation stops when the context is full")

    # raw generate: the prompt verbatim to /completion, no template, no context in the answer
    add("raw", [
        gen("<|im_start|>user\nWhat is two plus two?<|im_end|>\n<|im_start|>assistant\n", raw=True,
            options={"temperature": 0, "num_predict": 32}),
        gen("The quick brown fox", raw=True, options={"seed": 81, "num_predict": 16}),
        gen("1, 2, 3, 4,", raw=True, stream=True, options={"temperature": 0, "num_predict": 16}),
    ], note="raw: true")

    # generate's context: the previous answer's token ids, detokenized and put before the new prompt
    # (server/routes.go:446-470)
    add("context", [
        gen("My favourite colour is green. Remember it.", options={"temperature": 0, "num_predict": 32}),
        gen("What is my favourite colour?", context={"$context": 0}, options={"temperature": 0,
                                                                                "num_predict": 32}),
        gen("And what did I ask you to do?", context={"$context": 1}, stream=True,
            options={"temperature": 0, "num_predict": 32}),
    ], note="generate's context reused twice")
    return out

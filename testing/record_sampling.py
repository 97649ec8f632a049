"""Record what llama-server b11192 says about sampling into tests/oracle/sampling/ (the tests replay these records).

    python -m testing.record_sampling params    # request bodies -> status + error body + generation_settings
    python -m testing.record_sampling chain     # sampler chain cases through libllama's llama_sampler_* C API
    python -m testing.record_sampling e2e       # seeded generations (64 tokens) over sampler variants, both models
    python -m testing.record_sampling graph     # backend-sampling graphs through libllama + ggml-cpu, step by step
    python -m testing.record_sampling backend   # seeded generations under --backend-sampling (ports 9551, 9553)

Developer tool: needs the oracle build (testing/build_oracle.sh) and the models. Each part rewrites its file.
Ports 8191-8199.
"""

from __future__ import annotations

import json
import sys

from testing.oracle import REPO, LlamaServer, model_path

OUT = REPO / "tests" / "oracle" / "sampling"
PARAMS_ARGS = ["-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui", "-n", "1"]
PROMPT = "Hi"


def write(name: str, obj) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def record_params() -> None:
    from testing.sampling_cases import bodies
    recs = []
    with LlamaServer(model_path("smollm2-135m-instruct-q4_1.gguf"), port=8191, base_args=PARAMS_ARGS,
                     log="/tmp/sampling_params_server.log") as srv:
        for i, body in enumerate(bodies()):
            sent = {"prompt": PROMPT, "cache_prompt": False, "seed": 1}
            sent.update(body)
            print(i, json.dumps(sent), flush=True)
            status, _, raw = srv.post("/completion", sent, timeout=60)
            resp = json.loads(raw) if raw else None
            rec = {"body": sent, "status": status}
            if status == 200 and "generation_settings" in resp:
                rec["generation_settings"] = resp["generation_settings"]
            elif status == 200:
                rec["response_keys"] = sorted(resp)   # response_fields projected the answer
            else:
                rec["error"] = resp
            recs.append(rec)
        status, _, raw = srv.get("/props")
        props = json.loads(raw)["default_generation_settings"]
    write("params.json", {"server_args": PARAMS_ARGS, "model": "smollm2-135m-instruct-q4_1", "prompt": PROMPT,
                          "props": props, "records": recs})
    print(f"params: {len(recs)} bodies, {sum(r['status'] != 200 for r in recs)} refusals")


def main(argv: list[str]) -> None:
    what = argv[1] if len(argv) > 1 else "all"
    if what in ("params", "all"):
        record_params()
    if what in ("chain", "all"):
        from testing.record_sampling_chain import record_chain
        record_chain()
    if what in ("e2e", "all"):
        from testing.record_sampling_e2e import record_e2e
        record_e2e()
    if what == "graph":
        from testing.record_sampling_graph import record_graph
        record_graph()
    if what == "backend":
        from testing.record_sampling_backend import record_backend_all
        record_backend_all()


if __name__ == "__main__":
    main(sys.argv)

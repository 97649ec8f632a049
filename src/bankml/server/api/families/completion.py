"""llama-server's own completion family, POST /completion (/completions): server_task_result_cmpl_final and
_partial `to_json_non_oaicompat` (tools/server/server-task.cpp). Several prompts answer an array of their
objects; the stream is SSE without a [DONE] marker."""

from __future__ import annotations

from ...generation import Final, Progress, Token
from .base import SSE, Family, nested_values, probs_to_json, progress_json, text


def completion_final(res: Final, params, model: str, index: int = 0) -> dict:
    body = {
        "index": index,
        "content": text(res.content),
        "tokens": res.tokens,
        "id_slot": res.id_slot,
        "stop": True,
        "model": model,
        "tokens_predicted": res.n_decoded,
        "tokens_evaluated": res.n_prompt_tokens,
        "generation_settings": params.to_json(),
        "prompt": text(res.prompt),
        "has_new_line": res.has_new_line,
        "truncated": res.truncated,
        "stop_type": res.stop,
        "stopping_word": res.stopping_word,
        "tokens_cached": res.n_tokens_cached,
        "timings": res.stats,
    }
    if not params.stream and res.probs:
        body["completion_probabilities"] = probs_to_json(res.probs, params.post_sampling_probs)
    fields = list(params.response_fields or [])
    return nested_values(fields, body) if fields else body


def completion_partial(ev, params, index: int = 0) -> dict:
    """A /completion stream chunk: a Token, or a Progress."""
    if isinstance(ev, Progress):
        body = {"index": index, "content": "", "tokens": [0], "stop": False, "id_slot": -1, "tokens_predicted": 0,
                "tokens_evaluated": ev.total}
        if ev.stats is not None:
            body["timings"] = ev.stats
        body["prompt_progress"] = progress_json(ev)
        return body
    body = {"index": index, "content": text(ev.text), "tokens": [ev.tok], "stop": False, "id_slot": -1,
            "tokens_predicted": ev.n_decoded, "tokens_evaluated": ev.n_prompt_tokens}
    if ev.stats is not None:
        body["timings"] = ev.stats
    if ev.probs is not None and ev.probs.probs:
        body["completion_probabilities"] = probs_to_json([ev.probs], params.post_sampling_probs)
    return body


class LlamaCompletion(Family):
    name = "completion"
    framing = SSE(done=False)

    def final(self, reply, i, ev):
        return completion_final(ev, reply.prep.params[i], reply.model, i)

    def chunks(self, reply, i, ev):
        if isinstance(ev, Final):
            return [completion_final(ev, reply.prep.params[i], reply.model, i)]
        if isinstance(ev, (Token, Progress)):
            return [completion_partial(ev, reply.prep.params[i], i)]
        return []

    def merge(self, bodies):
        return bodies

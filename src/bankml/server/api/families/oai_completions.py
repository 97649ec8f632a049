"""The OpenAI completions family, POST /v1/completions: server_task_result_cmpl_final and _partial
`to_json_oaicompat` (tools/server/server-task.cpp). Several results merge as choices of one object; the stream is
SSE ending in `data: [DONE]`."""

from __future__ import annotations

import time

from ...generation import Final, Progress, Token
from .base import BUILD_INFO, SSE, Family, finish_reason, probs_to_json, progress_json, text, usage
from .completion import completion_final, completion_partial


def oai_completion_final(res: Final, params, model: str, cmpl_id: str, index: int = 0) -> dict:
    logprobs = None
    if not params.stream and res.probs:
        logprobs = {"content": probs_to_json(res.probs, params.post_sampling_probs)}
    body = {
        "choices": [{"text": text(res.content), "index": index, "logprobs": logprobs,
                     "finish_reason": finish_reason(res.stop)}],
        "created": int(time.time()), "model": model, "system_fingerprint": BUILD_INFO,
        "object": "text_completion", "usage": usage(res), "id": cmpl_id,
    }
    if params.verbose:
        body["__verbose"] = completion_final(res, params, model, index)
    if res.stats is not None:
        body["timings"] = res.stats
    return body


def oai_completion_partial(ev, params, model: str, cmpl_id: str, index: int = 0) -> dict:
    """A /v1/completions stream chunk: a Token, or a Progress (no text, its prompt_progress)."""
    progress = isinstance(ev, Progress)
    logprobs = None
    if not progress and ev.probs is not None and ev.probs.probs:
        logprobs = {"content": probs_to_json([ev.probs], params.post_sampling_probs)}
    body = {
        "choices": [{"text": "" if progress else text(ev.text), "index": index, "logprobs": logprobs,
                     "finish_reason": None}],
        "created": int(time.time()), "model": model, "system_fingerprint": BUILD_INFO,
        "object": "text_completion", "id": cmpl_id,
    }
    if params.verbose:
        body["__verbose"] = completion_partial(ev, params, index)
    if ev.stats is not None:
        body["timings"] = ev.stats
    if progress:
        body["prompt_progress"] = progress_json(ev)
    return body


def merge_choices(bodies: list):
    """The OpenAI shapes' merge: the first object with every other one's choice appended."""
    out = bodies[0]
    for b in bodies[1:]:
        out["choices"].append(b["choices"][0])
    return out


class OAICompletions(Family):
    name = "oai_completions"
    framing = SSE(done=True)

    def final(self, reply, i, ev):
        return oai_completion_final(ev, reply.prep.params[i], reply.model, reply.prep.cmpl_id, i)

    def chunks(self, reply, i, ev):
        p = reply.prep.params[i]
        if isinstance(ev, Final):
            return [oai_completion_final(ev, p, reply.model, reply.prep.cmpl_id, i)]
        if isinstance(ev, (Token, Progress)):
            return [oai_completion_partial(ev, p, reply.model, reply.prep.cmpl_id, i)]
        return []

    def merge(self, bodies):
        return merge_choices(bodies)

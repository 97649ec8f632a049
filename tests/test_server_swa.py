"""bankml-serve and a sliding-window model (Gemma 3): the engine plays the graph (tests/test_forward_gemma3.py), but
llama-server's prompt cache for such models (context checkpoints) is not built, so serving refuses the model by
name instead of reusing cells the window has dropped."""

import pytest

from bankml.errors import ModelRefused
from bankml.server.context import ServerContext
from bankml.server.flags import parse_flags


def test_serving_gemma3_is_refused_with_the_reason(gemma3_path):
    cfg = parse_flags(["-m", str(gemma3_path), "-t", "2", "-c", "4096", "-np", "1", "--jinja"])
    with pytest.raises(ModelRefused, match="context checkpoints, not reproduced by bankml yet") as e:
        ServerContext.load(cfg)
    assert e.value.path == str(gemma3_path) and "gemma3" in e.value.reasons[0]


def test_serving_smollm2_still_loads(smollm2_path):
    cfg = parse_flags(["-m", str(smollm2_path), "-t", "2", "-c", "512", "-np", "1", "--jinja"])
    ctx = ServerContext.load(cfg)
    assert ctx.header.architecture == "llama"

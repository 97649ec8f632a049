# bankml.models.redescribe: SmolLM2's llama file re-described as qwen3 (the rule in the module's docstring)
import numpy as np
import pytest

from bankml.models import redescribe
from bankml.models.gguf import GGUFFile
from bankml.models.pull import model_path

SRC = model_path("smollm2-135m-instruct-q4_1")


@pytest.mark.skipif(not SRC.exists(), reason="needs smollm2-135m-instruct-q4_1 (bankml pull)")
def test_qwen3_rule(tmp_path):
    out = redescribe.convert(SRC, tmp_path / "a.gguf")
    again = redescribe.convert(SRC, tmp_path / "b.gguf")
    assert out.read_bytes() == again.read_bytes()
    with GGUFFile(SRC) as s, GGUFFile(out) as d:
        assert d.header.architecture == "qwen3"
        assert not [k for k in d.header.metadata if k.startswith("llama.")]
        for k, v in s.header.metadata.items():
            if k.startswith("llama."):
                assert d.header.metadata["qwen3." + k[6:]] == v
        for name in s.tensors:
            assert d.tensor_bytes(name).tobytes() == s.tensor_bytes(name).tobytes()
        n_layer = s.header.arch_key("block_count")
        assert len(d.tensors) == len(s.tensors) + 2 * n_layer
        for i in range(n_layer):
            q, k = redescribe.norm_weights(i, 64)
            np.testing.assert_array_equal(d.tensor(f"blk.{i}.attn_q_norm.weight"), q)
            np.testing.assert_array_equal(d.tensor(f"blk.{i}.attn_k_norm.weight"), k)
            assert (q != 1).all() and (k != 1).all()


def test_refuses_unknown_target(tmp_path):
    with pytest.raises(redescribe.RedescribeError, match="cannot re-describe"):
        redescribe.convert(tmp_path / "x.gguf", tmp_path / "y.gguf", arch="mamba")

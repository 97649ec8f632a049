"""Sampling as llama-server b11192 does it: request parameters (bankml.sampling.params), the sampler chain
(bankml.sampling.chain, over the C kernels in src/kernels/sampling.c) and token probabilities
(bankml.sampling.probs). See docs/sampling.md."""

from bankml.sampling.params import Defaults, Params, RequestError, from_request

__all__ = ["Defaults", "Params", "RequestError", "from_request"]

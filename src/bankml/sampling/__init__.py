"""Sampling as llama-server b11192 does it: request parameters (bankml.sampling.params), the sampler chain
(bankml.sampling.chain over the C kernels in src/kernels/sampling.c), the per-request sampler with its grammar
(bankml.sampling.sampler) and token probabilities (bankml.sampling.probs). See docs/sampling.md."""

from bankml.sampling import probs
from bankml.sampling.params import Defaults, Params, RequestError, from_request
from bankml.sampling.sampler import Sampler

__all__ = ["Defaults", "Params", "RequestError", "Sampler", "from_request", "probs"]

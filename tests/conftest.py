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


@pytest.fixture(scope="session")
def oracle_dir() -> Path:
    return ORACLE

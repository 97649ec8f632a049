"""`bankml list`, `bankml rm` and `bankml ps`: the registry on the command line, and what a server holds."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bankml import cli
from bankml.models import verify
from bankml.models.gguf import GGMLType, ValueType
from gguf_writer import tiny_llama
from test_registry import dirs, tiny  # noqa: F401 (dirs is a fixture)

PROV = {"how": "written by tests/test_cli_models.py"}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_human_size():
    assert [cli.human_size(n) for n in (0, 512, 2000, 1500, 98362432, 105_000_000, 1_500_000_000, 4 * 10**12)] == \
        ["0 B", "512 B", "2 KB", "1.5 KB", "98 MB", "105 MB", "1.5 GB", "4 TB"]


# --- list -----------------------------------------------------------------------------------------------------

@pytest.fixture
def shelf(dirs):
    models, forks = dirs
    q8 = {n: GGMLType.Q8_0 for n in ("token_embd.weight", "blk.0.attn_q.weight")}
    verify.pin(tiny(models / "pinned-Q8_0.gguf", types=q8, kvs={"general.file_type": (ValueType.UINT32, 7)}), PROV)
    tiny(models / "unpinned.gguf", n_layer=1)
    copy = models / "renamed.gguf"
    copy.write_bytes((models / "pinned-Q8_0.gguf").read_bytes())
    tiny(models / "refused.gguf", kvs={"general.architecture": (ValueType.STRING, "phi3")})
    grown = tiny(models / "grown.gguf")
    verify.pin(grown, PROV)
    with open(grown, "ab") as f:
        f.write(b"\0" * 32)
    return models, forks


def test_list_table(capsys, shelf, monkeypatch):
    def no_hashing(*a, **kw):
        raise AssertionError("listing must not hash")

    monkeypatch.setattr(verify, "sha256_file", no_hashing)
    code, out, err = run(capsys, "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "TYPE", "PINNED", "STATUS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert sorted(rows) == ["grown", "pinned-Q8_0", "refused", "renamed", "unpinned"]
    assert rows["pinned-Q8_0"].split()[3:] == ["Q8_0", "yes", "playable"]
    assert rows["unpinned"].split()[3:] == ["F32", "no", "playable"]       # no file_type: its matrices' type
    assert rows["renamed"].split()[3:] == ["Q8_0", "by-content?", "playable"]
    assert rows["grown"].split()[3:5] == ["F32", "mismatch"]
    assert "architecture 'phi3' is not supported yet" in rows["refused"]
    size = cli.human_size((shelf[0] / "unpinned.gguf").stat().st_size)
    assert rows["unpinned"].split()[1:3] == size.split() and size.endswith(" KB")
    assert run(capsys, "ls")[1] == out


def test_list_json(capsys, shelf):
    models, _ = shelf
    code, out, _ = run(capsys, "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0
    p = rows["pinned-Q8_0"]
    assert p["path"] == str(models / "pinned-Q8_0.gguf") and p["size"] == (models / "pinned-Q8_0.gguf").stat().st_size
    assert p["pin"] == str(models / "pinned-Q8_0.gguf.FORK.json") and p["pinned"] == "yes"
    assert p["type"] == "Q8_0" and p["verdict"] == "play" and p["status"] == "playable" and p["source"] == "models_dir"
    assert "pinned-q8_0:latest" in p["aliases"] and "pinned" in p["aliases"]
    assert rows["refused"]["verdict"] == "refuse" and rows["unpinned"]["pin"] is None


def test_list_empty_and_missing_directory(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BANKML_MODELS", str(tmp_path / "nowhere"))
    assert run(capsys, "list") == (0, "NAME    SIZE    TYPE    PINNED    STATUS\n", "")
    assert run(capsys, "list", "--json") == (0, "[]\n", "")


def test_list_shows_a_truncated_file(capsys, dirs):
    models, _ = dirs
    data = tiny_llama()
    (models / "cut.gguf").write_bytes(data[: len(data) - 100])
    code, out, _ = run(capsys, "list", "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["verdict"] == "need_more" and row["status"].startswith("truncated:")


# --- rm -------------------------------------------------------------------------------------------------------

def test_rm_removes_the_file_and_its_pin_beside_it(capsys, dirs):
    models, forks = dirs
    m = tiny(models / "m.gguf")
    verify.pin(m, PROV)
    (forks / "m.gguf.FORK.json").write_text((models / "m.gguf.FORK.json").read_text())
    keep = tiny(models / "keep.gguf", n_layer=1)
    assert run(capsys, "rm", "m") == (0, "deleted 'm'\n", "")
    assert not m.exists() and not (models / "m.gguf.FORK.json").exists()
    assert (forks / "m.gguf.FORK.json").exists() and keep.exists()          # forks pins stay
    assert all(p.exists() for p in verify.SHIPPED_FORKS.glob("*.FORK.json"))


def test_rm_by_alias_and_several(capsys, dirs):
    models, _ = dirs
    a, b = tiny(models / "Alpha-Q4_1.gguf"), tiny(models / "beta.gguf")
    code, out, _ = run(capsys, "rm", "alpha", "beta:latest")
    assert code == 0 and out == "deleted 'Alpha-Q4_1'\ndeleted 'beta'\n"
    assert not a.exists() and not b.exists()


def test_rm_unknown_removes_nothing(capsys, dirs):
    models, _ = dirs
    m = tiny(models / "m.gguf")
    code, out, err = run(capsys, "rm", "m", "nope")
    assert code == 1 and out == "" and err == "bankml: rm: model 'nope' not found (`bankml list` lists them)\n"
    assert m.exists()


@pytest.mark.parametrize("name", ["../outside", "sub/../../outside.gguf", "..", "/tmp"])
def test_rm_never_leaves_the_models_directory(capsys, dirs, tmp_path, name):
    outside = tiny(tmp_path / "outside.gguf")
    code, _, err = run(capsys, "rm", name)
    assert code == 1 and "not a model name" in err and outside.exists()


def test_rm_a_link_removes_the_link_only(capsys, dirs, tmp_path):
    models, _ = dirs
    target = tiny(tmp_path / "elsewhere" / "real.gguf")
    (models / "linked.gguf").symlink_to(target)
    assert run(capsys, "rm", "linked")[0] == 0
    assert not (models / "linked.gguf").is_symlink() and target.exists()


def test_rm_refuses_a_folder_linked_from_outside(capsys, dirs, tmp_path):
    models, _ = dirs
    target = tiny(tmp_path / "elsewhere" / "weights.gguf")
    (models / "ext").symlink_to(target.parent)
    code, _, err = run(capsys, "rm", "ext")
    assert code == 1 and "not in a models directory" in err and target.exists()


def test_rm_a_sharded_folder(capsys, dirs):
    models, _ = dirs
    d = models / "big"
    for i in (1, 2):
        verify.pin(tiny(d / f"big-0000{i}-of-00002.gguf"), PROV)
    tiny(d / "mmproj-big.gguf")
    assert run(capsys, "rm", "big") == (0, "deleted 'big'\n", "")
    assert sorted(p.name for p in d.iterdir()) == ["mmproj-big.gguf"]        # the projector is not the model
    assert run(capsys, "list", "--json")[1] == "[]\n"


def test_rm_an_ambiguous_name(capsys, dirs):
    models, _ = dirs
    tiny(models / "A.gguf")
    tiny(models / "a" / "w.gguf")
    tiny(models / "a.gguf", n_layer=1)
    code, _, err = run(capsys, "rm", "a")
    assert code == 1 and "ambiguous" in err
    assert (models / "a.gguf").exists() and (models / "a" / "w.gguf").exists()


def test_rm_a_file_named_by_a_pin(capsys, dirs):
    models, _ = dirs
    f = tiny(models / "weird.bin")
    verify.write_pin(models / "weird.gguf.FORK.json", verify.make_pin(
        [{"path": "weird.bin", "bytes": f.stat().st_size, "sha256": verify.sha256_file(f)}], PROV))
    assert run(capsys, "rm", "weird") == (0, "deleted 'weird'\n", "")
    assert list(models.iterdir()) == []


# --- ps -------------------------------------------------------------------------------------------------------

class Stub:
    """A tiny HTTP server answering GET /models and /props with given bodies (and 401 without the key)."""

    def __init__(self, models: dict, props: dict | None = None, key: str | None = None):
        self.seen: list[tuple[str, str | None]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                auth = self.headers.get("Authorization")
                stub.seen.append((self.path, auth))
                if key and auth != f"Bearer {key}":
                    return self._send(401, {"error": {"code": 401, "message": "Invalid API Key"}})
                body = {"/models": models, "/props": props}.get(self.path)
                self._send(200, body) if body is not None else self._send(404, {"error": "not found"})

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


SINGLE = {"object": "list", "data": [{"id": "smollm2-135m-instruct-q4_1", "object": "model", "meta": {}}],
          "models": [{"name": "smollm2-135m-instruct-q4_1"}]}


@pytest.mark.parametrize("sleeping, status", [(False, "loaded"), (True, "sleeping")])
def test_ps_single_model(capsys, sleeping, status):
    with Stub(SINGLE, {"is_sleeping": sleeping, "model_alias": "x"}) as s:
        code, out, err = run(capsys, "ps", "--url", s.url)
    assert code == 0 and err == ""
    assert out.splitlines() == [f"{'NAME':<26}    STATUS", f"smollm2-135m-instruct-q4_1    {status}"]
    assert [p for p, _ in s.seen] == ["/models", "/props"]


def test_ps_router(capsys):
    def m(name, value):
        return {"id": name, "object": "model", "status": {"value": value, "args": []}}

    router = {"object": "list", "data": [m("a", "loaded"), m("b", "unloaded"), m("c", "sleeping"),
                                         m("d", "loading"), m("e", "unloaded")]}
    with Stub(router) as s:
        code, out, _ = run(capsys, "ps", "--url", s.url + "/", "--json")
    assert code == 0 and json.loads(out) == [{"name": "a", "status": "loaded"}, {"name": "c", "status": "sleeping"},
                                             {"name": "d", "status": "loading"}]
    assert [p for p, _ in s.seen] == ["/models"]


def test_ps_router_nothing_loaded(capsys):
    with Stub({"data": [{"id": "a", "status": {"value": "unloaded"}}]}) as s:
        assert run(capsys, "ps", "--url", s.url) == (0, "NAME    STATUS\n", "")


def test_ps_api_key(capsys, monkeypatch):
    monkeypatch.delenv("LLAMA_API_KEY", raising=False)
    with Stub(SINGLE, {"is_sleeping": False}, key="sekrit") as s:
        code, _, err = run(capsys, "ps", "--url", s.url)
        assert code == 1 and "401 Unauthorized" in err and "--api-key" in err
        code, out, _ = run(capsys, "ps", "--url", s.url, "--api-key", "sekrit")
        assert code == 0 and "loaded" in out
        monkeypatch.setenv("LLAMA_API_KEY", "sekrit")
        code, out, _ = run(capsys, "ps", "--url", s.url)
        assert code == 0 and "smollm2-135m-instruct-q4_1" in out
    assert s.seen[-1] == ("/props", "Bearer sekrit") and s.seen[0] == ("/models", None)


def test_ps_unreachable(capsys):
    with Stub(SINGLE) as s:
        url = s.url
    code, out, err = run(capsys, "ps", "--url", url, "--timeout", "2")
    assert code == 1 and out == "" and err.startswith(f"bankml: ps: no server answers at {url}/models:")


def test_ps_not_a_server(capsys):
    with Stub({"hello": "world"}) as s:
        code, _, err = run(capsys, "ps", "--url", s.url)
    assert code == 1 and 'did not list models (no "data" array)' in err


# --- verify says how the pin was found -------------------------------------------------------------------------

def test_verify_a_renamed_copy(capsys, dirs):
    models, _ = dirs
    orig = tiny(models / "orig.gguf")
    verify.pin(orig, PROV)
    copy = models / "copy.gguf"
    copy.write_bytes(orig.read_bytes())
    code, out, _ = run(capsys, "verify", str(copy))
    assert code == 0 and out.startswith(f"verified: {copy} (sha256 ")
    assert out.rstrip().endswith("matched by sha256: the pinned orig.gguf)")
    code, out, _ = run(capsys, "verify", "--json", str(copy))
    d = json.loads(out)
    assert code == 0 and d["pin_match"] == "sha256" and d["pinned_as"] == "orig.gguf"

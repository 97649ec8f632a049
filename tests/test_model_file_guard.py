"""A served model's file changed under the process (issue 19, finding 4): cut under the map while a request reads
it, or rewritten in place between requests. Before: a cut file killed bankml-serve with SIGBUS (nothing logged, the
client got an empty reply) and bytes rewritten in place were served as garbage with a 200.

- bankml.models._mapguard on its own, in child processes (a failure there must not take pytest with it): a read
  past the end of a watched map that was cut gives zeros and the offset, one line on stderr names the file; an
  unwatched map still dies of SIGBUS as before (the handler chains to the default);
- bankml.engine.Model: decode on a cut file raises ModelFileChanged, and keeps raising;
- bankml-serve: a long generation whose file is cut under it ends with a 500 naming the file, the server keeps
  serving (/health), the next request is refused while the file differs, and the file put back serves the same
  answer as before; bytes rewritten in place between two requests are refused (500), never answered;
- bankml.Engine: the same refusal before a request on a changed file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import server_replay as sr

FLAGS = ["-c", "4096", "-np", "1", "-t", "2"]


def child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


# ------------------------------------------------------------------ the guard alone

def test_a_read_past_a_cut_watched_map_gives_zeros_and_the_offset(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(1, 256)) * 4096 * 3)          # ~3 MB, no zero byte
    r = child(f"""
        import mmap, os
        import numpy as np
        from bankml.models import _mapguard
        fh = open({str(path)!r}, "rb")
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        slot = _mapguard.watch(mm, {str(path)!r})
        view = np.frombuffer(mm, dtype=np.uint8)
        before = int(view[2_000_000])
        assert _mapguard.damaged(slot) == -1
        os.truncate({str(path)!r}, 4096)
        after = int(view[2_000_000])               # SIGBUS without the guard
        print(before, after, _mapguard.damaged(slot), int(view[100]))
        del view
        _mapguard.unwatch(slot)
        mm.close()
    """)
    assert r.returncode == 0, r.stderr
    before, after, hit, first = map(int, r.stdout.split())
    assert before != 0 and after == 0
    assert hit == 2_000_000
    assert first == 0, "the whole map is replaced, the part still in the file too"
    assert f"the model file {path} changed under the server" in r.stderr
    assert r.stderr.count("changed under the server") == 1, "one line, however many reads fault"


def test_an_unwatched_map_still_dies_of_sigbus(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"\x01" * 4096 * 4)
    r = child(f"""
        import mmap, os
        import numpy as np
        from bankml.models import _mapguard
        other = open({str(path)!r} + ".w", "wb"); other.write(b"x" * 8192); other.close()
        wf = open({str(path)!r} + ".w", "rb")
        watched = mmap.mmap(wf.fileno(), 0, access=mmap.ACCESS_READ)
        _mapguard.watch(watched, "watched")          # the handler is installed
        fh = open({str(path)!r}, "rb")
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        os.truncate({str(path)!r}, 0)
        print(int(np.frombuffer(mm, dtype=np.uint8)[8192]))
    """)
    assert r.returncode == -signal.SIGBUS, (r.returncode, r.stdout, r.stderr)
    assert "changed under the server" not in r.stderr


def test_model_decode_on_a_cut_file_raises(tmp_path, smollm2_path):
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(smollm2_path, copy)
    r = child(f"""
        import os
        from bankml.engine import Model
        from bankml.errors import ModelFileChanged
        m = Model.open({str(copy)!r}, n_ctx=256, n_threads=2)
        m.decode([1, 2, 3], 0)
        os.truncate({str(copy)!r}, 4096)
        for attempt in range(2):
            try:
                m.decode([4], m.n_past)
                print("decoded")
            except ModelFileChanged as e:
                print("refused", e.path == {str(copy)!r})
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["refused True", "refused True"], r.stdout


# ------------------------------------------------------------------ bankml-serve

def ask(port: int, content: str = "Name three colors.", max_tokens: int = 16, **extra) -> dict:
    body = {"messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": max_tokens}
    body.update(extra)
    return sr.answer_record(*sr.send(port, {"method": "POST", "path": "/v1/chat/completions", "body": body},
                                     timeout=120))


def health(port: int) -> int:
    return sr.answer_record(*sr.send(port, {"method": "GET", "path": "/health"}))["status"]


@pytest.mark.slow
def test_a_file_cut_under_a_running_generation(tmp_path, smollm2_path):
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(smollm2_path, copy)
    long = {}
    with sr.BankmlServe(["-m", str(copy)] + FLAGS) as srv:
        first = ask(srv.port)
        assert first["status"] == 200
        running = threading.Thread(target=lambda: long.update(ask(srv.port, "Write a long story.", 3000,
                                                                  ignore_eos=True)), daemon=True)
        running.start()
        time.sleep(1.5)                            # the generation is under way
        os.truncate(copy, 50_000_000)              # the embedding rows past this are gone
        running.join(120)
        assert long, "the running generation was never answered"
        assert srv.proc.poll() is None, "bankml-serve died"
        assert long["status"] == 500
        message = long["json"]["error"]["message"]
        assert f"the model file {copy} changed while it was in use" in message and "cut" in message
        assert health(srv.port) == 200
        refused = ask(srv.port)
        assert refused["status"] == 500 and str(copy) in refused["json"]["error"]["message"]
        shutil.copyfile(smollm2_path, copy)        # the file back: verified again, the same answer
        again = ask(srv.port)
        assert again["status"] == 200
        assert again["json"]["choices"] == first["json"]["choices"]
    assert b"changed under the server" in srv.log


@pytest.mark.slow
def test_bytes_rewritten_in_place_are_never_served(tmp_path, smollm2_path):
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(smollm2_path, copy)
    with sr.BankmlServe(["-m", str(copy)] + FLAGS) as srv:
        assert ask(srv.port)["status"] == 200
        size = os.path.getsize(copy)
        with open(copy, "r+b") as f:               # same inode, same size: the embedding rows overwritten
            f.seek(size // 4)
            f.write(b"\xff" * (size // 2))
        refused = ask(srv.port)
        assert refused["status"] == 500, refused
        assert "changed after it was verified" in refused["json"]["error"]["message"]
        assert ask(srv.port)["status"] == 500, "a file whose bytes no longer match its pin was loaded"
        assert health(srv.port) == 200


def test_engine_refuses_a_changed_file(tmp_path, smollm2_path):
    import bankml
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(smollm2_path, copy)
    body = {"messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "max_tokens": 2}
    with bankml.Engine(["-m", str(copy)] + FLAGS) as eng:
        assert eng.chat(body)["choices"][0]["message"]["content"]
        st = os.stat(copy)
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        with pytest.raises(bankml.EngineError) as e:
            eng.chat(body)
        assert e.value.status == 500 and f"the model file {copy} changed" in e.value.message

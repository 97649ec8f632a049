"""testing/llama_server_suite.py's choice of port: llama.cpp's ServerProcess takes any 200 from /health on its
port as its own server ready, so a server of another run listening there (a router answers the suite's
/v1/completions with 400 "model name is missing from the request") would be tested in place of the one the suite
started, which dies of "couldn't bind HTTP server socket". The runner therefore never defaults to a fixed port."""

from __future__ import annotations

import socket

import pytest

from testing import llama_server_suite as suite


def _listener(port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    return s


def test_default_port_is_free_even_when_8183_is_taken():
    # 8183 was the runner's fixed default; hold it (or find it held by another run already)
    try:
        held = _listener(8183)
    except OSError:
        held = None
    try:
        port = suite.suite_port({})
        assert port != 8183
        assert not suite._listened(port)
        _listener(port).close()       # it binds: the suite's server can listen there
    finally:
        if held is not None:
            held.close()


def test_given_port_already_listened_is_refused():
    other = _listener()
    try:
        port = other.getsockname()[1]
        with pytest.raises(SystemExit, match=f"PORT={port}: a server already listens there"):
            suite.suite_port({"PORT": str(port)})
    finally:
        other.close()


def test_given_free_port_is_kept():
    s = _listener()
    port = s.getsockname()[1]
    s.close()
    assert suite.suite_port({"PORT": str(port)}) == port

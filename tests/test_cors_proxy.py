"""bankml.server.agent.cors_proxy's pieces of cpp-httplib and common_http_parse_url (the whole proxy is replayed against
llama-server's records in tests/test_server_sessions.py, sessions cors_proxy*: these values are the ones those
records show the target receiving)."""

from __future__ import annotations

import pytest

from bankml.server.agent.cors_proxy import Hop, Refusal, forwarded_headers, parse_location, parse_query, parse_target, \
    request_target


def test_query_as_cpp_httplib_parses_it():
    assert parse_query("url=http://h/a%20b+c?q=1+2&r=x%2By") == {"url": "http://h/a b c?q=1 2", "r": "x+y"}
    assert parse_query("url=a&url=b&&=v&flag") == {"url": "b", "flag": ""}


def test_request_target_is_reencoded():
    assert request_target("/a b c?q=1 2") == "/a%20b%20c?q=1+2"
    assert request_target("/enc?a=%zz&b") == "/enc?a=%25zz&b"
    assert request_target("/p\xc3\xa9;x,y'z?k=\xe2\x82\xac") == "/p%C3%A9%3Bx%2Cy%27z?k=%E2%82%AC"


@pytest.mark.parametrize("url, status, message", [
    ("", 500, "invalid URL: no scheme"), ("ftp://x/", 500, "unsupported URL scheme: ftp"),
    ("HTTP://x/", 500, "unsupported URL scheme: HTTP"), ("http://[::1/", 500, "invalid IPv6 URL authority: [::1"),
    ("http://h:abc/", 400, "stoi"), ("http://h:99999999999/", 500, "stoi")])
def test_target_url_refusals(url, status, message):
    with pytest.raises(Refusal) as e:
        parse_target(url)
    assert (e.value.status, str(e.value)) == (status, message)


def test_target_url_parts():
    assert parse_target("http://u:p@h:81/x?y") == ("http", "u", "p", "h", 81, "/x?y")
    assert parse_target("https://[::1]") == ("https", "", "", "::1", 443, "/")
    assert parse_target("http://h: 12x/")[4] == 12          # std::stoi reads what it can
    assert parse_location("/plain") == ("", "", "", "/plain", "")
    assert parse_location("http://h:1/json?x=1") == ("http", "h", "1", "/json", "?x=1")


def test_only_explicit_proxy_headers_are_forwarded():
    raw = [(b"authorization", b"Bearer k"), (b"cookie", b"c"), (b"x-llama-server-proxy-header-b", b"2"),
           (b"x-llama-server-proxy-header-a", b"1"), (b"x-llama-server-proxy-header-", b"e"),
           (b"x-llama-server-proxy-header-host", b"example.com"),
           (b"x-llama-server-proxy-header-accept-encoding", b"gzip")]
    hs = forwarded_headers(raw, "http", "127.0.0.1", 8080)
    assert hs == [("a", "1"), ("b", "2"), ("host", "127.0.0.1:8080")]
    head = Hop("POST", "http", "127.0.0.1", 80, "/e", hs[:2], b'{"a":1}').head().decode()
    assert head == ("POST /e HTTP/1.1\r\nHost: 127.0.0.1\r\na: 1\r\nb: 2\r\nConnection: close\r\nAccept: */*\r\n"
                    "Content-Type: text/plain\r\nContent-Length: 7\r\n\r\n")

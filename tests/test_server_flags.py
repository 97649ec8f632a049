"""bankml.server.flags: llama-server's flags, defaults and refusals."""

from __future__ import annotations

import pytest

from bankml.errors import UnsupportedFlag
from bankml.server.cli import main
from bankml.server.context import slot_context
from bankml.server.flags import FlagError, ServerConfig, parse_flags


def test_defaults_are_llama_servers():
    cfg = parse_flags([])
    assert (cfg.hostname, cfg.port, cfg.n_ctx, cfg.n_parallel, cfg.n_batch, cfg.n_ubatch) == \
        ("127.0.0.1", 8080, 0, -1, 2048, 512)
    assert (cfg.cors_origins, cfg.cors_credentials, cfg.endpoint_slots, cfg.endpoint_metrics) == ("*", True, True, False)
    assert cfg.model is None and cfg.api_keys == [] and cfg.cache_ram_mib == 8192


def test_the_oracle_command_line_parses():
    cfg = parse_flags(["-m", "x.gguf", "-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off",
                       "--no-webui", "--port", "8181"])
    assert (cfg.model, cfg.n_threads, cfg.n_ctx, cfg.n_parallel, cfg.port) == ("x.gguf", 2, 4096, 1, 8181)
    assert cfg.oracle_threads == 2


def test_values_lists_and_sampling_defaults():
    cfg = parse_flags(["--alias", "b,a", "-a", "c", "--api-key", "k1,k2", "--api-key", "k3", "--temp", "0",
                       "--seed", "-1", "-n", "16", "--metrics", "--no-slots", "--ctx-size=512"])
    assert cfg.aliases == ["b", "a", "c"] and cfg.api_keys == ["k1", "k2", "k3"]
    assert cfg.sampling == {"temp": 0.0, "seed": 4294967295}
    assert (cfg.n_predict, cfg.endpoint_metrics, cfg.endpoint_slots, cfg.n_ctx) == (16, True, False, 512)


def test_backend_sampling_flag_and_underscores():
    """-bs / --backend-sampling; common_params_parse reads `--a_b` as `--a-b` (the server suite passes
    --backend_sampling)"""
    for argv in (["-bs"], ["--backend-sampling"], ["--backend_sampling"]):
        assert parse_flags(argv).sampling == {"backend_sampling": True}
    assert parse_flags(["--ctx_size", "512"]).n_ctx == 512
    with pytest.raises(FlagError, match="invalid argument: --bogus-flag"):
        parse_flags(["--bogus_flag"])


def test_unknown_flag_is_an_error():
    with pytest.raises(FlagError, match="invalid argument: --bogus"):
        parse_flags(["--bogus"])
    with pytest.raises(FlagError, match="expected value for argument: -c"):
        parse_flags(["-c"])
    with pytest.raises(FlagError, match="stoi"):
        parse_flags(["-c", "many"])


def test_llama_server_flag_bankml_lacks_is_refused_by_name():
    with pytest.raises(UnsupportedFlag, match="--mmproj: a llama-server flag bankml does not support"):
        parse_flags(["--mmproj", "x"])
    with pytest.raises(UnsupportedFlag, match="--reasoning on"):
        parse_flags(["--reasoning", "on"])
    with pytest.raises(UnsupportedFlag, match="--cache-reuse 4"):
        parse_flags(["--cache-reuse", "4"])
    with pytest.raises(UnsupportedFlag, match="-tb 3"):
        parse_flags(["-t", "2", "-tb", "3"])


def test_cli_exit_codes(capsys):
    assert main(["--bogus"]) == 2
    assert "invalid argument" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "--ctx-size" in capsys.readouterr().out


@pytest.mark.parametrize("n_ctx, np_, kvu, train, want", [
    (4096, -1, False, 8192, (4, 4096, True)),      # auto: 4 slots sharing the pool
    (4096, 3, False, 8192, (3, 1536, False)),      # pad256(4096 / 3)
    (1000, 2, True, 8192, (2, 1024, True)),
    (20000, 1, False, 8192, (1, 8192, False)),     # capped by the training context
    (0, 1, False, 8192, (1, 8192, False)),
    (300, 1, False, 8192, (1, 512, False)),
])
def test_slot_context_as_llama_server_splits_it(n_ctx, np_, kvu, train, want):
    assert slot_context(n_ctx, np_, kvu, train) == want


def test_tools_make_the_default_cors_origin_localhost():
    # common_params_parse: --tools (or --agent) without an explicit --cors-origins -> "localhost"
    assert parse_flags(["--tools", "all"]).cors_origins == "localhost"
    assert parse_flags(["-ag"]).cors_origins == "localhost" and parse_flags(["-ag"]).ui_mcp_proxy
    assert parse_flags(["--cors-origins", "*", "--tools", "read_file"]).cors_origins == "*"
    assert parse_flags(["--tools", "all", "--cors-origins", "http://a.b"]).cors_origins == "http://a.b"
    assert parse_flags(["--ui-mcp-proxy"]).cors_origins == "*"      # the proxy alone changes nothing
    cfg = parse_flags(["--agent", "--no-agent"])
    assert (cfg.server_tools, cfg.ui_mcp_proxy, cfg.cors_origins) == ([], False, "*")


def test_tools_value_is_a_csv_row():
    assert parse_flags(["--tools", 'read_file,"a,b",x""y']).server_tools == ["read_file", "a,b", 'x""y']
    assert parse_flags(["--tools", ""]).server_tools == [""]     # one empty field: enabled, then unknown
    assert parse_flags(["--webui-mcp-proxy", "--no-webui-mcp-proxy"]).ui_mcp_proxy is False


def test_tools_runtime_and_mcp_servers_are_refused():
    for flag in ("--tools-runtime", "--mcp-servers-config", "--mcp-servers-json"):
        with pytest.raises(UnsupportedFlag, match=flag):
            parse_flags([flag, "x"])
        parse_flags([flag, ""])          # empty: llama-server's default, nothing enabled

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


def test_default_threads_are_cpu_get_num_math():
    # llama-server's default -t (common_cpu_get_num_math); here no hybrid CPU: the distinct thread_siblings
    import os
    from pathlib import Path

    from bankml import _cpu
    from bankml.server.flags import default_threads
    sib = set()
    for cpu in range(os.cpu_count()):
        p = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings")
        if not p.exists():
            break
        sib.add(p.read_text())
    if _cpu.hybrid():
        pytest.skip("a hybrid CPU: the count pins a thread to each CPU")
    assert default_threads() == _cpu.num_math() == (len(sib) or _cpu.physical_cores())
    assert parse_flags([]).oracle_threads == default_threads()
    # the pinned count (used on hybrid parts) takes every other online CPU as a hyper-thread sibling, and
    # leaves this thread's affinity as it was
    before = os.sched_getaffinity(0)
    n_on = os.sysconf("SC_NPROCESSORS_ONLN")
    assert _cpu.math_cpus_pinned() in ((n_on + 1) // 2, -1)
    assert os.sched_getaffinity(0) == before
    # -t 0 or less: std::thread::hardware_concurrency(), the logical CPUs
    assert parse_flags(["-t", "0"]).oracle_threads == os.cpu_count()
    assert parse_flags(["-t", "-3", "-tb", str(os.cpu_count())]).n_threads == os.cpu_count()
    assert parse_flags(["-t", "16"]).oracle_threads == 16


def test_values_lists_and_sampling_defaults():
    cfg = parse_flags(["--alias", "b,a", "-a", "c", "--api-key", "k1,k2", "--api-key", "k3", "--temp", "0",
                       "--seed", "-1", "-n", "16", "--metrics", "--no-slots", "--ctx_size", "512"])
    assert cfg.aliases == ["b", "a", "c"] and cfg.api_keys == ["k1", "k2", "k3"]
    assert cfg.sampling == {"temp": 0.0, "seed": 4294967295}
    assert (cfg.n_predict, cfg.endpoint_metrics, cfg.endpoint_slots, cfg.n_ctx) == (16, True, False, 512)


def test_numbers_read_as_stoi_and_stof():
    cfg = parse_flags(["-c", " +512x", "--temp", "0.5abc", "--top-p", ".5", "-sps", "1e-1"], environ={})
    assert (cfg.n_ctx, cfg.sampling["temp"], cfg.sampling["top_p"], cfg.slot_prompt_similarity) == (512, 0.5, 0.5,
                                                                                                    0.1)
    for argv, what in ((["-c", "x1"], "stoi"), (["-c", "2147483648"], "stoi"), (["--temp", "e1"], "stof"),
                       (["--temp", "3.5e38"], "stof")):
        with pytest.raises(FlagError, match=f'argument "{argv[0]}": {what}$'):
            parse_flags(argv, environ={})


def test_underscores_and_no_equals_form():
    # llama-server reads --ctx_size as --ctx-size, and has no --flag=value form
    assert parse_flags(["--ctx_size", "512", "--n_predict", "3"], environ={}).n_ctx == 512
    with pytest.raises(FlagError, match="^error: invalid argument: --ctx-size=512$"):
        parse_flags(["--ctx-size=512"], environ={})

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
    with pytest.raises(FlagError, match='^error while handling argument "-c": expected value for argument$'):
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


def test_tags_and_several_hosts():
    cfg = parse_flags(["--tags", "chat, fim,,small,fim", "--host", "127.0.0.1,::1", "--host", '"a,b",c'], environ={})
    assert cfg.tags == ["chat", "fim", "small"]
    assert cfg.hostnames == ["a,b", "c"] and cfg.hostname == "a,b"     # parse_csv_row; a later --host replaces
    with pytest.raises(FlagError, match="--host requires at least one address"):
        parse_flags(["--host", " , "], environ={})


def test_environment_variables_then_the_command_line(capsys):
    env = {"LLAMA_ARG_HOST": "192.0.2.1", "LLAMA_ARG_ALIAS": "x", "LLAMA_ARG_CTX_SIZE": "512",
           "LLAMA_ARG_ENDPOINT_METRICS": "1", "LLAMA_ARG_NO_ENDPOINT_SLOTS": "", "LLAMA_API_KEY": "k",
           "LLAMA_ARG_TAGS": "t"}
    cfg = parse_flags([], environ=env)
    assert (cfg.hostnames, cfg.aliases, cfg.n_ctx, cfg.endpoint_metrics, cfg.endpoint_slots, cfg.api_keys,
            cfg.tags) == (["192.0.2.1"], ["x"], 512, True, False, ["k"], ["t"])
    cfg = parse_flags(["--host", "127.0.0.1,::1", "-a", "y", "-c", "1024"], environ=env)
    # --host's handler replaces the list, --alias's adds to the set (llama-server's handlers, run after the env)
    assert (cfg.hostnames, cfg.aliases, cfg.n_ctx) == (["127.0.0.1", "::1"], ["x", "y"], 1024)
    err = capsys.readouterr().err
    assert "warn: LLAMA_ARG_HOST environment variable is set, but will be overwritten by command line argument " \
           "--host" in err and "LLAMA_ARG_CTX_SIZE" in err
    # a switch with a value that is not truthy does nothing; a boolean needs a boolean
    assert parse_flags([], environ={"LLAMA_ARG_ENDPOINT_METRICS": "no"}).endpoint_metrics is False
    with pytest.raises(FlagError, match='environment variable "LLAMA_ARG_ENDPOINT_SLOTS": invalid boolean value'):
        parse_flags([], environ={"LLAMA_ARG_ENDPOINT_SLOTS": "maybe"})
    with pytest.raises(FlagError, match='^error while handling environment variable "LLAMA_ARG_CTX_SIZE": stoi$'):
        parse_flags([], environ={"LLAMA_ARG_CTX_SIZE": "x"})
    # the variable of a flag bankml does not implement is refused, naming both
    with pytest.raises(UnsupportedFlag, match=r"LLAMA_ARG_N_GPU_LAYERS \(--n-gpu-layers\)"):
        parse_flags([], environ={"LLAMA_ARG_N_GPU_LAYERS": "0"})
    # --jinja / --no-jinja and --chat-template have their variables too
    assert parse_flags([], environ={"LLAMA_ARG_JINJA": "off"}).use_jinja is False
    assert parse_flags([], environ={"LLAMA_ARG_JINJA": "0", "LLAMA_ARG_CHAT_TEMPLATE": "chatml"}).chat_template \
        == "chatml"
    assert parse_flags([], environ={"LLAMA_ARG_JINJA": "on", "HF_TOKEN": "t"}).model is None


def test_jinja_and_chat_template_flags(tmp_path):
    cfg = parse_flags([])
    assert cfg.use_jinja and cfg.chat_template == ""           # llama-server's defaults: --jinja, the GGUF's
    cfg = parse_flags(["--no-jinja", "--chat-template", "llama3"])
    assert not cfg.use_jinja and cfg.chat_template == "llama3"
    # under --jinja any text is a template (a name is not looked up)
    assert parse_flags(["--chat-template", "not a name"]).chat_template == "not a name"
    f = tmp_path / "t.jinja"
    f.write_bytes(b"{{ messages[0].content }}\xff")
    assert parse_flags(["--no-jinja", "--jinja", "--chat-template-file", str(f)]).chat_template.encode(
        "utf-8", "surrogateescape") == f.read_bytes()


def test_unsupported_legacy_template_is_refused_as_llama_server_does(tmp_path):
    # common_params_parse: the text printed before llama-server exits (checked live against b11192)
    with pytest.raises(FlagError, match="^error: the supplied chat template is not supported: not a template\n"
                                        "note: llama.cpp was started without --jinja, we only support commonly "
                                        "used templates$"):
        parse_flags(["--no-jinja", "--chat-template", "not a template"])
    with pytest.raises(FlagError, match="--chat-template-file\": error: failed to open file '/nonexistent'"):
        parse_flags(["--chat-template-file", "/nonexistent"])
    # a Jinja template without a built-in template's markers is refused only without --jinja
    f = tmp_path / "t.jinja"
    f.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert parse_flags(["--chat-template-file", str(f)]).use_jinja
    with pytest.raises(FlagError, match="not supported"):
        parse_flags(["--no-jinja", "--chat-template-file", str(f)])
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


def test_tools_runtime_is_refused():
    with pytest.raises(UnsupportedFlag, match="--tools-runtime"):
        parse_flags(["--tools-runtime", "x"])
    parse_flags(["--tools-runtime", ""])          # empty: llama-server's default, nothing enabled


def test_mcp_servers_flags():
    # bankml.server.agent.mcp reads them when the app is built; like --tools they make the CORS default localhost
    cfg = parse_flags(["--mcp-servers-config", "a.json", "--mcp-servers-json", "{}"])
    assert (cfg.mcp_servers_config, cfg.mcp_servers_json, cfg.cors_origins) == ("a.json", "{}", "localhost")
    assert parse_flags(["--mcp-servers-json", "{}", "--cors-origins", "*"]).cors_origins == "*"
    assert parse_flags(["--mcp-servers-json", ""]).cors_origins == "*"


def test_ray_flags():
    # bankml's own: --ray [--replicas N] [--replica-cpus C] (docs/scale.md); the replicas get the rest
    from bankml.ray.launch import replica_argv
    cfg = parse_flags(["--ray", "--replicas", "3", "--replica-cpus", "2", "-np", "2"])
    assert (cfg.ray, cfg.ray_replicas, cfg.ray_replica_cpus, cfg.n_parallel) == (True, 3, 2, 2)
    for argv in (["--replicas", "2"], ["--replica-cpus", "2"], ["--ray", "--replicas", "0"]):
        with pytest.raises(FlagError):
            parse_flags(argv)
    assert replica_argv(["--ray", "--replicas", "2", "-m", "m.gguf", "--host", "0.0.0.0", "--port", "80", "-np",
                         "2", "--replica-cpus", "1"]) == ["-m", "m.gguf", "-np", "2"]

"""bankml-serve's command line: llama-server b11192's flags (common/arg.cpp), with its defaults.

    cfg = parse_flags(["-m", path, "-c", "4096", "-np", "1"])    # ServerConfig; raises FlagError

Three kinds of flag:
- flags bankml implements, with llama-server's meaning and default (the table `_FLAGS` below);
- flags llama-server has that bankml does not implement: refused with "FLAG: a llama-server flag bankml does not
  support (yet)" (UnsupportedFlag), never silently ignored; a few are accepted only at the value that changes
  nothing bankml reproduces (`--flash-attn auto|on`, `--reasoning off`, `--cache-reuse 0`, ...);
- anything else: "unknown argument" (llama.cpp's own word for it), FlagError.

Sampling defaults given on the command line (--temp, --seed, --top-k, ...) are collected in
`cfg.sampling` ({field: value} with bankml.sampling.Defaults' field names) for bankml.sampling's Defaults.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from ..cxx.cfloat import f32
from ..errors import BankmlError, UnsupportedFlag


class FlagError(BankmlError):
    """A command line llama-server would refuse too (unknown argument, missing or malformed value)."""


#: every flag name llama.cpp b11192's common/arg.cpp defines (any of its programs)
LLAMA_FLAGS = frozenset("""
--adaptive-decay --adaptive-target --agent --alias --api-key --api-key-file --api-prefix --attention --audio
--backend-sampling --batch-size --binary-file --cache-idle-slots --cache-list --cache-prompt --cache-ram
--cache-reuse --cache-type-k --cache-type-k-draft --cache-type-v --cache-type-v-draft --chat-template
--chat-template-file --chat-template-kwargs --check --check-tensors --checkpoint-min-step --chunk
--chunk-separator --chunk-size --chunks --cls-separator --color --completion-bash --cont-batching --context-file
--context-shift --control-vector --control-vector-layer-range --control-vector-scaled --conversation
--cors-credentials --cors-headers --cors-methods --cors-origins --cpu-mask --cpu-mask-batch --cpu-mask-batch-draft
--cpu-mask-draft --cpu-moe --cpu-moe-draft --cpu-range --cpu-range-batch --cpu-range-batch-draft --cpu-range-draft
--cpu-strict --cpu-strict-batch --cpu-strict-batch-draft --cpu-strict-draft --ctx-checkpoints --ctx-size
--defrag-thold --device --device-draft --dflash --diffusion-add-gumbel-noise --diffusion-alg-temp
--diffusion-algorithm --diffusion-block-length --diffusion-cfg-scale --diffusion-eps --diffusion-steps
--diffusion-visual --display-prompt --docker-repo --draft --draft-max --draft-min --draft-n --draft-n-min
--draft-p-min --draft-p-split --dry-allowed-length --dry-base --dry-multiplier --dry-penalty-last-n
--dry-sequence-breaker --dynatemp-exp --dynatemp-range --eagle3 --embd-gemma-default --embd-normalize
--embd-output-format --embd-separator --embedding --embeddings --epochs --escape --file --fim-qwen-1.5b-default
--fim-qwen-14b-spec --fim-qwen-30b-default --fim-qwen-3b-default --fim-qwen-7b-default --fim-qwen-7b-spec --fit
--fit-ctx --fit-print --fit-target --flash-attn --frequency-penalty --from-chunk --gpt-oss-120b-default
--gpt-oss-20b-default --gpu-layers --gpu-layers-draft --grammar --grammar-file --grp-attn-n --grp-attn-w
--hellaswag --hellaswag-tasks --help --hf-file --hf-repo --hf-repo-draft --hf-token --host --ids --ignore-eos
--image --image-max-tokens --image-min-tokens --in-file --in-prefix --in-prefix-bos --in-suffix --interactive
--interactive-first --jinja --json-schema --json-schema-file --junk --keep --kl-divergence --kl-divergence-base
--kv-offload --kv-unified --kv-unified-per-slot --lazy-mode --learning-rate --learning-rate-decay-epochs
--learning-rate-min --list-devices --load-mode --log-colors --log-disable --log-file --log-jsonl --log-prefix
--log-prompts-dir --log-timestamps --log-verbose --log-verbosity --logit-bias --logits-output-dir
--lookup-cache-dynamic --lookup-cache-static --lora --lora-init-without-apply --lora-scaled --main-gpu
--mcp-servers-config --mcp-servers-json --media-path --method --metrics --min-p --mirostat --mirostat-ent
--mirostat-lr --mmproj --mmproj-auto --mmproj-offload --mmproj-url --model --model-draft --model-url
--models-autoload --models-dir --models-max --models-preset --mtmd-batch-max-tokens --mtp --multiline-input
--multiple-choice --multiple-choice-tasks --n-cpu-ffn --n-cpu-moe --n-cpu-moe-draft --n-gpu-layers
--n-gpu-layers-draft --n-predict --negative-file --no-agent --no-bos --no-cache-idle-slots --no-cache-prompt
--no-cont-batching --no-context-shift --no-conversation --no-cors-credentials --no-display-prompt --no-escape
--no-host --no-jinja --no-kv-offload --no-kv-unified --no-log-jsonl --no-log-prefix --no-log-timestamps
--no-mmproj --no-mmproj-auto --no-mmproj-offload --no-models-autoload --no-op-offload --no-parse-special --no-perf
--no-ppl --no-prefill-assistant --no-reasoning-preserve --no-repack --no-show-timings --no-skip-chat-parsing
--no-slots --no-spec-draft-backend-sampling --no-ui --no-ui-mcp-proxy --no-warmup --no-webui
--no-webui-mcp-proxy --numa --offline --op-offload --optimizer --output --output-file --output-format
--output-frequency --override-kv --override-tensor --override-tensor-draft --parallel --parse-special --path
--pca-batch --pca-iter --perf --poll --poll-batch --poll-batch-draft --poll-draft --pooling --port --pos
--positive-file --ppl --ppl-output-type --ppl-stride --predict --prefill-assistant --presence-penalty
--print-token-count --prio --prio-batch --prio-batch-draft --prio-draft --process-output --prompt --prompt-cache
--prompt-cache-all --prompt-cache-ro --props --reasoning --reasoning-budget --reasoning-budget-message
--reasoning-effort --reasoning-format --reasoning-preserve --repack --repeat-last-n --repeat-penalty --rerank
--reranking --reuse-port --reverse-prompt --rope-freq-base --rope-freq-scale --rope-scale --rope-scaling --rpc
--sampler-seq --samplers --sampling-seq --save-all-logits --save-frequency --save-logits --seed --sequences
--server-base --show-count --show-statistics --show-timings --simple-io --single-turn --skip-chat-parsing
--sleep-idle-seconds --slot-prompt-similarity --slot-save-path --slots --spec-default
--spec-draft-backend-sampling --spec-draft-cpu-mask --spec-draft-cpu-mask-batch --spec-draft-cpu-moe
--spec-draft-cpu-range --spec-draft-cpu-range-batch --spec-draft-cpu-strict --spec-draft-cpu-strict-batch
--spec-draft-device --spec-draft-hf --spec-draft-model --spec-draft-n-cpu-moe --spec-draft-n-max
--spec-draft-n-min --spec-draft-ncmoe --spec-draft-ngl --spec-draft-override-tensor --spec-draft-p-min
--spec-draft-p-split --spec-draft-poll --spec-draft-poll-batch --spec-draft-prio --spec-draft-prio-batch
--spec-draft-threads --spec-draft-threads-batch --spec-draft-type-k --spec-draft-type-v
--spec-ngram-map-k-min-hits --spec-ngram-map-k-size-m --spec-ngram-map-k-size-n --spec-ngram-map-k4v-min-hits
--spec-ngram-map-k4v-size-m --spec-ngram-map-k4v-size-n --spec-ngram-min-hits --spec-ngram-mod-n-match
--spec-ngram-mod-n-max --spec-ngram-mod-n-min --spec-ngram-simple-min-hits --spec-ngram-simple-size-m
--spec-ngram-simple-size-n --spec-ngram-size-m --spec-ngram-size-n --spec-synth-len --spec-synth-rates
--spec-type --special --split-mode --spm-infill --sse-ping-interval --ssl-cert-file --ssl-key-file --stdin
--swa-checkpoints --swa-full --system-prompt --system-prompt-file --tags --temp --temperature --tensor-filter
--tensor-split --threads --threads-batch --threads-batch-draft --threads-draft --threads-http --timeout --tools
--tools-runtime --top-k --top-n-sigma --top-nsigma --top-p --tts-lang --tts-speaker-file --typical --typical-p
--ubatch-size --ui --ui-config --ui-config-file --ui-mcp-proxy --usage --val-split --verbose --verbose-prompt
--verbosity --version --video --video-ffmpeg-dir --video-fps --video-timestamp-interval
--vision-gemma-12b-default --vision-gemma-4b-default --warmup --webui --webui-config --webui-config-file
--webui-mcp-proxy --weight-decay --winogrande --winogrande-tasks --xtc-probability --xtc-threshold
--yarn-attn-factor --yarn-beta-fast --yarn-beta-slow --yarn-ext-factor --yarn-orig-ctx -C -Cb -Cbd -Cd -Cr -Crb
-Crbd -Crd -a -ag -b -bf -bs -c -cb -cl -cmoe -cmoed -cms -cnv -co -cram -ctk -ctkd -ctv -ctvd -ctxcp
-decay-epochs -dev -devd -dr -dt -e -epochs -f -fa -fit -fitc -fitp -fitt -gan -gaw -h -hf -hfd -hff -hfr -hfrd
-hft -i -if -j -jf -kvo -kvu -l -lcd -lcs -lm -lr -lr-min -lv -lzm -m -md -mg -mli -mm -mmu -mu -n -ncffn -ncmoe
-ncmoed -ngl -ngld -nkvo -no-ag -no-cnv -no-kvu -nocb -np -npl -npp -nr -ns -ntg -o -ofreq -opt -ot -otd -p -pps
-ptc -r -rea -s -sm -sp -sps -st -sys -sysf -t -tb -tbd -td -tgs -to -ts -ub -v -val-split -wd
""".split())


@dataclass
class ServerConfig:
    """What bankml-serve was asked for, in llama-server's terms (common_params' names where they exist)."""
    model: str | None = None               # -m as given (None: bankml's default model, pulled when missing)
    n_ctx: int = 0                         # -c (0: the model's training context)
    n_threads: int = -1                    # -t (-1: cpu_get_num_math, bankml._cpu.num_math)
    n_threads_batch: int = -1              # -tb (-1: = -t)
    hostnames: list[str] = field(default_factory=lambda: ["127.0.0.1"])   # --host a,b (.sock: a UNIX socket)
    port: int = 8080
    n_parallel: int = -1                   # -np (-1: auto = 4 slots, unified KV)
    kv_unified: bool = False
    ctx_shift: bool = False                # --context-shift (common_params.ctx_shift, default off)
    n_batch: int = 2048
    n_ubatch: int = 512
    n_predict: int = -1
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    api_keys: list[str] = field(default_factory=list)
    cors_origins: str = "*"
    cors_methods: str = "GET, POST, DELETE, OPTIONS"
    cors_headers: str = "*"
    cors_credentials: bool = True
    cors_origins_explicit: bool = False    # --cors-origins given (else --tools makes the default "localhost")
    ui_mcp_proxy: bool = False             # --ui-mcp-proxy: /cors-proxy (bankml.server.agent.cors_proxy)
    server_tools: list[str] = field(default_factory=list)   # --tools (bankml.server.agent.tools)
    mcp_servers_config: str = ""           # --mcp-servers-config PATH (bankml.server.agent.mcp)
    mcp_servers_json: str = ""             # --mcp-servers-json JSON (bankml.server.agent.mcp)
    agent_open: bool = False               # bankml's --agent-open: /tools and /cors-proxy without agent.guard
    endpoint_metrics: bool = False
    endpoint_props: bool = False
    endpoint_slots: bool = True
    slot_save_path: str = ""
    slot_prompt_similarity: float = 0.1
    cache_ram_mib: int = 8192
    swa_full: bool = False                 # --swa-full: a full-size cache for sliding-window layers
    n_ctx_checkpoints: int = 32            # --ctx-checkpoints / --swa-checkpoints (common_params default)
    checkpoint_min_step: int = 8192        # --checkpoint-min-step (common_params default)
    cache_idle_slots: bool = True
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    sse_ping_interval: int = 30
    threads_http: int = -1
    log_verbosity: int = 3
    log_disable: bool = False
    use_jinja: bool = True                 # --jinja (llama-server's default) / --no-jinja: the built-in templates
    chat_template: str = ""                # --chat-template TEXT or --chat-template-file's content ("" = the GGUF's)
    sampling: dict = field(default_factory=dict)
    models_dir: str = ""                   # --models-dir: router mode when there is no -m
    models_max: int = 1                    # --models-max (llama-server's default is 4; bankml keeps one resident)
    models_autoload: bool = True           # --models-autoload / --no-models-autoload
    sleep_idle_seconds: int = -1           # --sleep-idle-seconds (-1: never)
    ollama: bool = False                   # bankml's --ollama: also listen on Ollama's address (OLLAMA_HOST)
    ray: bool = False                      # bankml's --ray: replicas on Ray Serve (bankml.ray, docs/scale.md)
    ray_replicas: int = 1                  # bankml's --replicas N (with --ray)
    ray_replica_cpus: int = 1              # bankml's --replica-cpus N: CPUs (compute threads) of each replica
    embedding: bool = False                # --embeddings (--reranking too): the embedding routes answer
    pooling: str | None = None             # --pooling none|mean|cls|last|rank (None: the model's default)
    embd_normalize: int = 2                # --embd-normalize (common_embd_normalize's mode)
    help: bool = False
    version: bool = False
    given: list = field(default_factory=list)   # the command line's (flag, value) pairs, in order

    @property
    def router_mode(self) -> bool:
        """llama-server's router: models from --models-dir, loaded on demand (bankml: with -m too, which is then
        the model of a request that names none, loaded at start)."""
        return bool(self.models_dir)

    @property
    def hostname(self) -> str:
        """The first --host address."""
        return self.hostnames[0]

    @property
    def oracle_threads(self) -> int:
        """The -t of the llama-server being reproduced (its bits depend on it)."""
        return self.n_threads if self.n_threads > 0 else default_threads()


def default_threads() -> int:
    """llama-server's -t when none is given: cpu_get_num_math() (bankml._cpu.num_math: the physical cores, or on
    a hybrid x86-64 CPU the performance cores as llama.cpp counts them)."""
    from .. import _cpu
    return _cpu.num_math()


_NUM_PREFIX_INT = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_NUM_PREFIX_FLOAT = re.compile(r"[ \t\n\v\f\r]*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                               r"|inf(?:inity)?|nan))", re.IGNORECASE)


def _int(flag: str, v: str) -> int:
    """std::stoi: leading white space, a sign, the leading digits (the rest ignored); no digit or past int32:
    an error."""
    m = _NUM_PREFIX_INT.match(v)
    if m is None or not -2**31 <= int(m.group(1)) < 2**31:
        raise FlagError(f"error while handling argument \"{flag}\": stoi") from None
    return int(m.group(1))


def _float(flag: str, v: str) -> float:
    """std::stof's reading of a decimal number (strtof: the longest prefix that is one; past float: an error)."""
    m = _NUM_PREFIX_FLOAT.match(v)
    if m is None:
        raise FlagError(f"error while handling argument \"{flag}\": stof") from None
    x = float(m.group(1))
    # rounding to float overflows from FLT_MAX + half an ulp on (ERANGE: out_of_range)
    if abs(x) >= 3.4028235677973366e38 and "inf" not in m.group(1).lower():
        raise FlagError(f"error while handling argument \"{flag}\": stof") from None
    return x


def _csv(v: str) -> list[str]:
    return [x.strip() for x in v.split(",")]


def _set(attr, conv=None):
    def apply(cfg, flag, v):
        setattr(cfg, attr, conv(flag, v) if conv else v)
    return apply


def _flag(attr, value):
    def apply(cfg, flag, v):
        setattr(cfg, attr, value)
    return apply


def _threads(attr):
    def apply(cfg, flag, v):
        # common/arg.cpp: a count of 0 or less is std::thread::hardware_concurrency() (the logical CPUs), not
        # cpu_get_num_math's default
        n = _int(flag, v)
        setattr(cfg, attr, n if n > 0 else (os.cpu_count() or 0))
    return apply


def _f32(flag: str, v: str) -> float:
    """std::stof: the value as a float32 (the sampling defaults are floats)."""
    return f32(_float(flag, v))


def _sampling(name, conv=_f32):
    def apply(cfg, flag, v):
        cfg.sampling[name] = conv(flag, v)
    return apply


def _alias(cfg, flag, v):
    for a in _csv(v):
        if a and a not in cfg.aliases:
            cfg.aliases.append(a)


def _tags(cfg, flag, v):
    for t in _csv(v):
        if t and t not in cfg.tags:
            cfg.tags.append(t)


def csv_row(v: str) -> list[str]:
    """parse_csv_row (common/arg.cpp): comma-separated fields, a field may be "quoted" ("" is a quote)."""
    fields, cur, quoted, i = [], "", False, 0
    while i < len(v):
        ch = v[i]
        if ch == '"':
            if not quoted:
                if cur:
                    cur += '"'
                else:
                    quoted = True
            elif v[i + 1:i + 2] == '"':
                cur += '"'
                i += 1
            else:
                quoted = False
        elif ch == "," and not quoted:
            fields.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    fields.append(cur)
    return fields


def _hosts(cfg, flag, v):
    hosts = [h.strip() for h in csv_row(v)]
    hosts = [h for h in hosts if h]
    if not hosts:
        raise FlagError(f"error while handling argument \"{flag}\": --host requires at least one address")
    cfg.hostnames = hosts


def _api_key(cfg, flag, v):
    cfg.api_keys += [k for k in _csv(v) if k]


def _api_key_file(cfg, flag, v):
    try:
        with open(v, encoding="utf-8") as f:
            for line in f.read().split("\n"):
                if line and not line.startswith("#"):
                    cfg.api_keys.append(line)
    except OSError:
        raise FlagError(f"error: failed to open file '{v}'") from None


def _chat_template_file(cfg, flag, v):
    try:
        with open(v, "rb") as f:
            cfg.chat_template = f.read().decode("utf-8", "surrogateescape")
    except OSError:
        raise FlagError(f"error while handling argument \"{flag}\": error: failed to open file '{v}'") from None
def _cors_origins(cfg, flag, v):
    cfg.cors_origins = v
    cfg.cors_origins_explicit = True


def _tools(cfg, flag, v):
    cfg.server_tools = csv_row(v)


def _agent(on):
    def apply(cfg, flag, v):
        cfg.server_tools = ["all"] if on else []
        cfg.ui_mcp_proxy = on
    return apply


def _refuse_nonempty(why):
    def apply(cfg, flag, v):
        if v:
            raise UnsupportedFlag(f"{flag} {v}", why)
    return apply


def _only(attr, allowed, why):
    def apply(cfg, flag, v):
        if v not in allowed:
            raise UnsupportedFlag(f"{flag} {v}", why)
        if attr:
            setattr(cfg, attr, v)
    return apply


def _only_int(allowed, why):
    def apply(cfg, flag, v):
        if _int(flag, v) not in allowed:
            raise UnsupportedFlag(f"{flag} {v}", why)
    return apply


def _verbosity(cfg, flag, v):
    cfg.log_verbosity = _int(flag, v)


def _cache_type(attr):
    def apply(cfg, flag, v):
        if v not in ("f16", "q8_0"):
            raise UnsupportedFlag(f"{flag} {v}", "bankml's KV cache is f16 or q8_0")
        setattr(cfg, attr, v)
    return apply


def _slot_save_path(cfg, flag, v):
    """common/arg.cpp: a directory that exists, with the separator appended, so that a slot file's name is
    joined inside it (without the separator "ok.bin" became "slotsok.bin" beside it)."""
    if not os.path.isdir(v):
        raise FlagError(f"error while handling argument \"{flag}\": not a directory: {v}")
    cfg.slot_save_path = v if v.endswith(os.sep) else v + os.sep


def _pooling(cfg, flag, v):
    if v not in ("none", "mean", "cls", "last", "rank"):
        raise FlagError(f"error while handling argument \"{flag}\": invalid value")
    cfg.pooling = v


def _reranking(cfg, flag, v):
    cfg.embedding = True
    cfg.pooling = "rank"


def _checkpoint_min_step(cfg, flag, v):
    n = _int(flag, v)
    if n < 0:
        raise FlagError(f"error while handling argument \"{flag}\": checkpoint-min-step must be non-negative")
    cfg.checkpoint_min_step = n


def _sleep_idle(cfg, flag, v):
    n = _int(flag, v)
    if n == 0 or n < -1:
        raise FlagError(f"error while handling argument \"{flag}\": invalid value: cannot be 0 or less than -1")
    cfg.sleep_idle_seconds = n


# (names, takes a value, apply(cfg, flag, value))
_FLAGS = [
    (("-m", "--model"), True, _set("model")),
    (("-c", "--ctx-size"), True, _set("n_ctx", _int)),
    (("-t", "--threads"), True, _threads("n_threads")),
    (("-tb", "--threads-batch"), True, _threads("n_threads_batch")),
    (("--host",), True, _hosts),
    (("--port",), True, _set("port", _int)),
    (("-np", "--parallel"), True, _set("n_parallel", _int)),
    (("-kvu", "--kv-unified"), False, _flag("kv_unified", True)),
    (("-no-kvu", "--no-kv-unified"), False, _flag("kv_unified", False)),
    (("-b", "--batch-size"), True, _set("n_batch", _int)),
    (("-ub", "--ubatch-size"), True, _set("n_ubatch", _int)),
    (("-n", "--predict", "--n-predict"), True, _set("n_predict", _int)),
    (("-a", "--alias"), True, _alias),
    (("--tags",), True, _tags),
    (("--api-key",), True, _api_key),
    (("--api-key-file",), True, _api_key_file),
    (("--cors-origins",), True, _cors_origins),
    (("--cors-methods",), True, _set("cors_methods")),
    (("--cors-headers",), True, _set("cors_headers")),
    (("--cors-credentials",), False, _flag("cors_credentials", True)),
    (("--no-cors-credentials",), False, _flag("cors_credentials", False)),
    (("--ui-mcp-proxy", "--webui-mcp-proxy"), False, _flag("ui_mcp_proxy", True)),
    (("--no-ui-mcp-proxy", "--no-webui-mcp-proxy"), False, _flag("ui_mcp_proxy", False)),
    (("--tools",), True, _tools),
    (("-ag", "--agent"), False, _agent(True)),
    (("-no-ag", "--no-agent"), False, _agent(False)),
    (("--agent-open",), False, _flag("agent_open", True)),
    (("--tools-runtime",), True, _refuse_nonempty("bankml runs --tools on the host only (no tools runtime)")),
    (("--mcp-servers-config",), True, _set("mcp_servers_config")),
    (("--mcp-servers-json",), True, _set("mcp_servers_json")),
    (("--metrics",), False, _flag("endpoint_metrics", True)),
    (("--props",), False, _flag("endpoint_props", True)),
    (("--slots",), False, _flag("endpoint_slots", True)),
    (("--no-slots",), False, _flag("endpoint_slots", False)),
    (("--slot-save-path",), True, _slot_save_path),
    (("-sps", "--slot-prompt-similarity"), True, _set("slot_prompt_similarity", _float)),
    (("-cram", "--cache-ram"), True, _set("cache_ram_mib", _int)),
    (("--swa-full",), False, _flag("swa_full", True)),
    (("-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"), True, _set("n_ctx_checkpoints", _int)),
    (("-cms", "--checkpoint-min-step"), True, _checkpoint_min_step),
    (("--cache-idle-slots",), False, _flag("cache_idle_slots", True)),
    (("--no-cache-idle-slots",), False, _flag("cache_idle_slots", False)),
    (("-ctk", "--cache-type-k"), True, _cache_type("cache_type_k")),
    (("-ctv", "--cache-type-v"), True, _cache_type("cache_type_v")),
    (("--sse-ping-interval",), True, _set("sse_ping_interval", _int)),
    (("--threads-http",), True, _set("threads_http", _int)),
    (("-lv", "--verbosity", "--log-verbosity"), True, _verbosity),
    (("-v", "--verbose", "--log-verbose"), False, _flag("log_verbosity", 99)),
    (("--log-disable",), False, _flag("log_disable", True)),
    (("--jinja",), False, _flag("use_jinja", True)),
    (("--no-jinja",), False, _flag("use_jinja", False)),
    (("--chat-template",), True, _set("chat_template")),
    (("--chat-template-file",), True, _chat_template_file),
    (("--no-webui", "--no-ui"), False, None),
    (("--no-warmup",), False, None),
    (("--warmup",), False, None),
    (("-cb", "--cont-batching"), False, None),
    (("--context-shift",), False, _flag("ctx_shift", True)),     # common/arg.cpp: off by default (b11192)
    (("--no-context-shift",), False, _flag("ctx_shift", False)),
    (("--cache-prompt",), False, None),
    (("--prefill-assistant",), False, None),
    (("--reasoning-preserve",), False, None),
    (("-rea", "--reasoning"), True, _only(None, ("off",), "bankml serves with --reasoning off only")),
    (("-fa", "--flash-attn"), True, _only(None, ("auto", "on"), "bankml's attention is llama.cpp's flash "
                                                                  "attention path (auto/on)")),
    (("--cache-reuse",), True, _only_int((0,), "bankml does not shift KV cells (n_cache_reuse 0 only)")),
    (("-s", "--seed"), True, _sampling("seed", lambda f, v: _int(f, v) & 0xFFFFFFFF)),
    (("--temp", "--temperature"), True, _sampling("temp")),
    (("--top-k",), True, _sampling("top_k", _int)),
    (("--top-p",), True, _sampling("top_p")),
    (("--min-p",), True, _sampling("min_p")),
    (("--repeat-penalty",), True, _sampling("penalty_repeat")),
    (("--repeat-last-n",), True, _sampling("penalty_last_n", _int)),
    (("--presence-penalty",), True, _sampling("penalty_present")),
    (("--frequency-penalty",), True, _sampling("penalty_freq")),
    (("-bs", "--backend-sampling"), False, _sampling("backend_sampling", lambda f, v: True)),
    (("--pooling",), True, _pooling),
    (("--embd-normalize",), True, _set("embd_normalize", _int)),
    (("--embedding", "--embeddings"), False, _flag("embedding", True)),
    (("--rerank", "--reranking"), False, _reranking),
    (("--models-dir",), True, _set("models_dir")),
    (("--models-max",), True, _set("models_max", _int)),
    (("--models-autoload",), False, _flag("models_autoload", True)),
    (("--no-models-autoload",), False, _flag("models_autoload", False)),
    (("--sleep-idle-seconds",), True, _sleep_idle),
    (("--ollama",), False, _flag("ollama", True)),
    (("--ray",), False, _flag("ray", True)),
    (("--replicas",), True, _set("ray_replicas", _int)),
    (("--replica-cpus",), True, _set("ray_replica_cpus", _int)),
    (("-h", "--help", "--usage"), False, _flag("help", True)),
    (("--version",), False, _flag("version", True)),
]

_TABLE = {name: (takes, apply) for names, takes, apply in _FLAGS for name in names}

#: every environment variable llama-server b11192 reads for a flag (common/arg.cpp's set_env), as
#: NAME=--flag (a value), NAME=--flag/--no-flag (a boolean) or NAME=--flag! (a switch); NAME is LLAMA_ARG_NAME,
#: @NAME is NAME itself. HF_TOKEN (--hf-token) and MTMD_BACKEND_DEVICE (--mmproj-device) are left out: they
#: only matter for -hf and --mmproj, which bankml refuses.
_ENV_TABLE = """
THREADS=--threads CTX_SIZE=--ctx-size KV_UNIFIED_PER_SLOT=--kv-unified-per-slot N_PREDICT=--n-predict
BATCH=--batch-size UBATCH=--ubatch-size SWA_FULL=--swa-full! CTX_CHECKPOINTS=--swa-checkpoints
CHECKPOINT_MIN_SPACING_NT=--checkpoint-min-step CACHE_RAM=--cache-ram KV_UNIFIED=--kv-unified/--no-kv-unified
CACHE_IDLE_SLOTS=--cache-idle-slots/--no-cache-idle-slots CONTEXT_SHIFT=--context-shift/--no-context-shift
FLASH_ATTN=--flash-attn PERF=--perf/--no-perf SHOW_TIMINGS=--show-timings/--no-show-timings
TEMPERATURE=--temperature TOP_K=--top-k TOP_P=--top-p MIN_P=--min-p REPEAT_PENALTY=--repeat-penalty
PRESENCE_PENALTY=--presence-penalty FREQUENCY_PENALTY=--frequency-penalty BACKEND_SAMPLING=--backend-sampling!
POOLING=--pooling ROPE_SCALING_TYPE=--rope-scaling ROPE_SCALE=--rope-scale ROPE_FREQ_BASE=--rope-freq-base
ROPE_FREQ_SCALE=--rope-freq-scale YARN_ORIG_CTX=--yarn-orig-ctx YARN_EXT_FACTOR=--yarn-ext-factor
YARN_ATTN_FACTOR=--yarn-attn-factor YARN_BETA_SLOW=--yarn-beta-slow YARN_BETA_FAST=--yarn-beta-fast
GRP_ATTN_N=--grp-attn-n GRP_ATTN_W=--grp-attn-w KV_OFFLOAD=--kv-offload/--no-kv-offload REPACK=--repack/--no-repack
NO_HOST=--no-host! CACHE_TYPE_K=--cache-type-k CACHE_TYPE_V=--cache-type-v DEFRAG_THOLD=--defrag-thold
N_PARALLEL=--parallel CONT_BATCHING=--cont-batching/--no-cont-batching MMPROJ=--mmproj MMPROJ_URL=--mmproj-url
MMPROJ_AUTO=--mmproj-auto/--no-mmproj-auto MMPROJ_OFFLOAD=--mmproj-offload/--no-mmproj-offload
IMAGE_MIN_TOKENS=--image-min-tokens IMAGE_MAX_TOKENS=--image-max-tokens
MTMD_BATCH_MAX_TOKENS=--mtmd-batch-max-tokens VIDEO_FPS=--video-fps
VIDEO_TIMESTAMP_INTERVAL=--video-timestamp-interval VIDEO_FFMPEG_DIR=--video-ffmpeg-dir RPC=--rpc
LOAD_MODE=--load-mode LAZY_MODE=--lazy-mode NUMA=--numa DEVICE=--device OVERRIDE_TENSOR=--override-tensor
CPU_MOE=--cpu-moe! N_CPU_MOE=--n-cpu-moe N_CPU_FFN=--n-cpu-ffn N_GPU_LAYERS=--n-gpu-layers SPLIT_MODE=--split-mode
TENSOR_SPLIT=--tensor-split MAIN_GPU=--main-gpu FIT=--fit FIT_ESTIMATE=--fit-print FIT_TARGET=--fit-target
FIT_CTX=--fit-ctx ALIAS=--alias TAGS=--tags MODEL=--model MODEL_URL=--model-url DOCKER_REPO=--docker-repo
HF_REPO=--hf-repo HF_FILE=--hf-file HOST=--host PORT=--port REUSE_PORT=--reuse-port! STATIC_PATH=--path
CORS_ORIGINS=--cors-origins CORS_METHODS=--cors-methods CORS_HEADERS=--cors-headers
CORS_CREDENTIALS=--cors-credentials/--no-cors-credentials API_PREFIX=--api-prefix UI_CONFIG=--webui-config
UI_CONFIG_FILE=--webui-config-file UI_MCP_PROXY=--webui-mcp-proxy/--no-webui-mcp-proxy TOOLS=--tools
TOOLS_RUNTIME=--tools-runtime MCP_SERVERS_CONFIG=--mcp-servers-config MCP_SERVERS_JSON=--mcp-servers-json
AGENT=--agent/--no-agent UI=--webui/--no-webui EMBEDDINGS=--embeddings! RERANKING=--reranking!
@LLAMA_API_KEY=--api-key API_KEY_FILE=--api-key-file SSL_KEY_FILE=--ssl-key-file SSL_CERT_FILE=--ssl-cert-file
CHAT_TEMPLATE_KWARGS=--chat-template-kwargs TIMEOUT=--timeout SSE_PING_INTERVAL=--sse-ping-interval
THREADS_HTTP=--threads-http CACHE_PROMPT=--cache-prompt/--no-cache-prompt CACHE_REUSE=--cache-reuse
ENDPOINT_METRICS=--metrics! ENDPOINT_PROPS=--props! ENDPOINT_SLOTS=--slots/--no-slots MODELS_DIR=--models-dir
MODELS_PRESET=--models-preset MODELS_MAX=--models-max MODELS_AUTOLOAD=--models-autoload/--no-models-autoload
JINJA=--jinja/--no-jinja THINK=--reasoning-format REASONING=--reasoning REASONING_EFFORT=--reasoning-effort
THINK_BUDGET=--reasoning-budget THINK_BUDGET_MESSAGE=--reasoning-budget-message
REASONING_PRESERVE=--reasoning-preserve/--no-reasoning-preserve CHAT_TEMPLATE=--chat-template
CHAT_TEMPLATE_FILE=--chat-template-file SKIP_CHAT_PARSING=--skip-chat-parsing/--no-skip-chat-parsing
PREFILL_ASSISTANT=--prefill-assistant/--no-prefill-assistant LOG_FILE=--log-file
LOG_JSONL=--log-jsonl/--no-log-jsonl LOG_COLORS=--log-colors OFFLINE=--offline! LOG_VERBOSITY=--log-verbosity
LOG_PREFIX=--log-prefix/--no-log-prefix LOG_TIMESTAMPS=--log-timestamps/--no-log-timestamps
SPEC_DRAFT_HF_REPO=--hf-repo-draft SPEC_DRAFT_CACHE_TYPE_K=--cache-type-k-draft
SPEC_DRAFT_CACHE_TYPE_V=--cache-type-v-draft SPEC_DRAFT_CPU_MOE=--cpu-moe-draft!
SPEC_DRAFT_N_CPU_MOE=--n-cpu-moe-draft SPEC_DRAFT_N_MAX=--spec-draft-n-max SPEC_DRAFT_N_MIN=--spec-draft-n-min
SPEC_SYNTH_LEN=--spec-synth-len SPEC_SYNTH_RATES=--spec-synth-rates SPEC_DRAFT_P_SPLIT=--draft-p-split
SPEC_DRAFT_P_MIN=--draft-p-min
SPEC_DRAFT_BACKEND_SAMPLING=--spec-draft-backend-sampling/--no-spec-draft-backend-sampling
N_GPU_LAYERS_DRAFT=--n-gpu-layers-draft SPEC_DRAFT_MODEL=--model-draft SPEC_TYPE=--spec-type DRAFT_MAX=--draft-max
DRAFT_MIN=--draft-n-min
"""


def _env_rows():
    for item in _ENV_TABLE.split():
        name, _, flags = item.partition("=")
        env = name[1:] if name.startswith("@") else "LLAMA_ARG_" + name
        if flags.endswith("!"):
            yield env, "switch", flags[:-1], None
        elif "/" in flags:
            pos, neg = flags.split("/")
            yield env, "bool", pos, neg
        else:
            yield env, "value", flags, None


ENV_VARS = list(_env_rows())
_ENV_OF = {flag: (env, kind) for env, kind, pos, neg in ENV_VARS for flag in (pos, neg) if flag}


def _truthy(v: str) -> bool:
    return v in ("on", "enabled", "true", "1")


def _falsey(v: str) -> bool:
    return v in ("off", "disabled", "false", "0")


def _dispatch(cfg, flag: str, value, env: str | None = None) -> None:
    entry = _TABLE.get(flag)
    if entry is None:
        what = f"{env} ({flag})" if env else flag
        raise UnsupportedFlag(what, "a llama-server flag bankml does not support (yet)")
    if entry[1] is not None:
        entry[1](cfg, flag, value)


def _apply_env(cfg, environ) -> None:
    """common_params_parse_ex's first pass: each flag's environment variable, through the flag's own handler
    (a boolean's LLAMA_ARG_NO_ variant counts as false)."""
    for env, kind, pos, neg in ENV_VARS:
        value = None
        if kind == "bool" and env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_", 1) in environ:
            value = "0"
        elif env in environ:
            value = environ[env]
        if value is None:
            continue
        try:
            if kind == "switch":
                if _truthy(value):
                    _dispatch(cfg, pos, None, env)
            elif kind == "bool":
                if _truthy(value):
                    _dispatch(cfg, pos, None, env)
                elif _falsey(value):
                    _dispatch(cfg, neg, None, env)
                else:
                    raise FlagError("invalid boolean value")
            else:
                _dispatch(cfg, pos, value, env)
        except FlagError as e:
            why = str(e)
            cli = f"error while handling argument \"{pos}\": "
            why = why[len(cli):] if why.startswith(cli) else why
            raise FlagError(f"error while handling environment variable \"{env}\": {why}") from None


def _env_is_set(flag: str, environ) -> str | None:
    """has_value_from_env: the variable of `flag` (any of its names) when it is set (a boolean's NO_ variant too)."""
    names = next((names for names, _, _ in _FLAGS if flag in names), (flag,))
    for name in names:
        if name in _ENV_OF:
            env, kind = _ENV_OF[name]
            if env in environ or (kind == "bool" and env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_", 1) in environ):
                return env
    return None


def parse_flags(argv: list[str], environ=None) -> ServerConfig:
    """llama-server's argument parsing of `argv` (without the program name): the LLAMA_ARG_* environment variables
    first (`environ`, default os.environ), then the command line (whose handlers run after: a --host replaces
    LLAMA_ARG_HOST, an --alias adds to LLAMA_ARG_ALIAS, as llama-server's do). Raises FlagError for what
    llama-server refuses too, UnsupportedFlag for a llama-server flag (or its variable) bankml does not implement."""
    cfg = ServerConfig()
    environ = os.environ if environ is None else environ
    _apply_env(cfg, environ)
    i = 0
    while i < len(argv):
        # parse_cli_args: a "--" word has its underscores read as dashes (--ctx_size); "--flag=value" is not a
        # form llama-server knows (an invalid argument)
        flag = argv[i].replace("_", "-") if argv[i].startswith("--") else argv[i]
        entry = _TABLE.get(flag)
        if entry is None:
            if flag in LLAMA_FLAGS:
                raise UnsupportedFlag(flag, "a llama-server flag bankml does not support (yet)")
            raise FlagError(f"error: invalid argument: {flag}")
        takes, apply = entry
        env = _env_is_set(flag, environ)
        if env:
            print(f"warn: {env} environment variable is set, but will be overwritten by command line argument "
                  f"{flag}", file=sys.stderr)
        value = None
        if takes:
            i += 1
            if i >= len(argv):
                raise FlagError(f"error while handling argument \"{flag}\": expected value for argument")
            value = argv[i]
        if apply is not None:
            apply(cfg, flag, value)
        cfg.given.append((flag, value))
        i += 1
    _check(cfg)
    return cfg


def _check(cfg: ServerConfig) -> None:
    if (cfg.server_tools or cfg.mcp_servers_config or cfg.mcp_servers_json) and not cfg.cors_origins_explicit:
        # common_params_parse: built-in tools (or MCP servers) make the default CORS origin localhost
        cfg.cors_origins = "localhost"
    if cfg.n_threads_batch > 0 and cfg.n_threads_batch != cfg.oracle_threads:
        raise UnsupportedFlag(f"-tb {cfg.n_threads_batch}", "bankml reproduces -tb equal to -t only")
    if cfg.n_ctx < 0:
        raise FlagError(f"error: invalid context size {cfg.n_ctx}")
    if cfg.n_parallel == 0 or cfg.n_parallel < -1:
        raise FlagError(f"error: invalid number of slots {cfg.n_parallel}")
    if cfg.n_batch < 1 or cfg.n_ubatch < 1:
        raise FlagError("error: batch sizes must be positive")
    if cfg.embedding and cfg.n_batch > cfg.n_ubatch and not cfg.router_mode:
        # server.cpp: an embedding's prompt must fit one ubatch, so llama-server lowers n_batch to n_ubatch (with
        # a warning); its router leaves that to the children
        print(f"warn: embeddings enabled with n_batch ({cfg.n_batch}) > n_ubatch ({cfg.n_ubatch}), setting "
              f"n_batch = n_ubatch = {cfg.n_ubatch}", file=sys.stderr)
        cfg.n_batch = cfg.n_ubatch
    if cfg.chat_template and not cfg.use_jinja:
        from ..chat.legacy import startup_error, verify
        if not verify(cfg.chat_template):
            raise FlagError(startup_error(cfg.chat_template).rstrip("\n"))
    if cfg.models_max < 0:
        raise FlagError("error: --models-max must be 0 (no limit) or more")
    if cfg.ray_replicas < 1 or cfg.ray_replica_cpus < 1:
        raise FlagError("error: --replicas and --replica-cpus must be 1 or more")
    if (cfg.ray_replicas != 1 or cfg.ray_replica_cpus != 1) and not cfg.ray:
        raise FlagError("error: --replicas and --replica-cpus need --ray")
    if cfg.cache_type_k != cfg.cache_type_v:
        raise UnsupportedFlag(f"-ctk {cfg.cache_type_k} -ctv {cfg.cache_type_v}",
                              "bankml's KV cache has one type for K and V")


# --- a router's child ----------------------------------------------------------------------------------------

#: llama-server's spellings of the options bankml takes: (spellings, negative spellings), as common/arg.cpp
#: defines them. A router renders a child's command line from them (common_preset::to_args): options in the order
#: of their first spelling, each written in its last (a negated flag in its negative's last), values after.
_LLAMA_OPTIONS = [
    (("-m", "--model"), ()), (("-c", "--ctx-size"), ()), (("-t", "--threads"), ()), (("-tb", "--threads-batch"), ()),
    (("--host",), ()), (("--port",), ()), (("-np", "--parallel"), ()),
    (("-kvu", "--kv-unified"), ("-no-kvu", "--no-kv-unified")), (("-b", "--batch-size"), ()),
    (("-ub", "--ubatch-size"), ()), (("-n", "--predict", "--n-predict"), ()), (("-a", "--alias"), ()),
    (("--tags",), ()), (("--api-key",), ()), (("--api-key-file",), ()), (("--cors-origins",), ()),
    (("--cors-methods",), ()), (("--cors-headers",), ()), (("--cors-credentials",), ("--no-cors-credentials",)),
    (("--ui-mcp-proxy", "--webui-mcp-proxy"), ("--no-ui-mcp-proxy", "--no-webui-mcp-proxy")), (("--tools",), ()),
    (("-ag", "--agent"), ("-no-ag", "--no-agent")), (("--tools-runtime",), ()), (("--mcp-servers-config",), ()),
    (("--mcp-servers-json",), ()), (("--metrics",), ()), (("--props",), ()), (("--slots",), ("--no-slots",)),
    (("--slot-save-path",), ()), (("-sps", "--slot-prompt-similarity"), ()), (("-cram", "--cache-ram"), ()),
    (("--swa-full",), ()), (("-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"), ()),
    (("-cms", "--checkpoint-min-step"), ()),
    (("--cache-idle-slots",), ("--no-cache-idle-slots",)), (("-ctk", "--cache-type-k"), ()),
    (("-ctv", "--cache-type-v"), ()), (("--sse-ping-interval",), ()), (("--threads-http",), ()),
    (("-lv", "--verbosity", "--log-verbosity"), ()), (("-v", "--verbose", "--log-verbose"), ()),
    (("--log-disable",), ()), (("--jinja",), ("--no-jinja",)), (("--chat-template",), ()),
    (("--chat-template-file",), ()), (("--ui", "--webui"), ("--no-ui", "--no-webui")),
    (("--warmup",), ("--no-warmup",)), (("-cb", "--cont-batching"), ("-nocb", "--no-cont-batching")),
    (("--context-shift",), ("--no-context-shift",)), (("--cache-prompt",), ("--no-cache-prompt",)),
    (("--prefill-assistant",), ("--no-prefill-assistant",)), (("--reasoning-preserve",), ("--no-reasoning-preserve",)),
    (("-rea", "--reasoning"), ()), (("-fa", "--flash-attn"), ()), (("--cache-reuse",), ()), (("-s", "--seed"), ()),
    (("--temp", "--temperature"), ()), (("--top-k",), ()), (("--top-p",), ()), (("--min-p",), ()),
    (("--repeat-penalty",), ()), (("--repeat-last-n",), ()), (("--presence-penalty",), ()),
    (("--frequency-penalty",), ()), (("-bs", "--backend-sampling"), ()), (("--pooling",), ()),
    (("--embd-normalize",), ()), (("--embedding", "--embeddings"), ()), (("--rerank", "--reranking"), ()),
    (("--models-dir",), ()),
    (("--models-max",), ()), (("--models-autoload",), ("--no-models-autoload",)), (("--sleep-idle-seconds",), ()),
]
_OPTION_OF = {name: (pos, neg, name in neg) for pos, neg in _LLAMA_OPTIONS for name in pos + neg}
#: what a router does not pass to its children (unset_reserved_args), and what it sets itself
_NOT_PASSED = {"--api-key", "--api-key-file", "--models-dir", "--models-max", "--models-autoload", "-m", "-a",
               "--host", "--port", "--ollama",      # --ollama: bankml's; the listener is the router's
               "--ray", "--replicas", "--replica-cpus"}


def _child_options(cfg, path: str, name: str, port: int) -> list[tuple[tuple, str, str | None]]:
    """(spellings, written spelling, value or None for a flag) of a child's options, in the router's order."""
    opts: dict[str, tuple] = {}
    for flag, value in cfg.given:
        pos, neg, negated = _OPTION_OF.get(flag, ((flag,), (), False))
        if pos[0] in _NOT_PASSED:
            continue
        if value is None:
            opts[pos[0]] = (pos, neg[-1] if negated else pos[-1], "false" if negated else "true")
        else:
            opts[pos[0]] = (pos, pos[-1], value)
    for key, value in (("--host", "127.0.0.1"), ("--port", str(port)), ("-a", name), ("-m", path)):
        pos = _OPTION_OF[key][0]
        opts[pos[0]] = (pos, pos[-1], value)
    return [opts[k] for k in sorted(opts)]


def child_args(cfg, path: str, name: str, port: int) -> list[str]:
    """The command line llama-server's router gives the child serving `name` (/models' status.args): the program,
    then the router's own flags less the router-only ones, with --host 127.0.0.1, --port, --alias and --model."""
    out = [sys.argv[0] if sys.argv and sys.argv[0] else "bankml-serve"]
    for pos, written, value in _child_options(cfg, path, name, port):
        if not _takes_value(pos):
            out.append(written)
        else:
            out += [written, value]
    return out


def _takes_value(pos: tuple) -> bool:
    return any(_TABLE.get(p, (False,))[0] for p in pos)


def child_preset(cfg, path: str, name: str) -> str:
    """The router's preset of a child as ini text (/models' status.preset): its options less host, port, alias
    and tags, each as `name = value` (a flag 1 or 0)."""
    lines = [f"[{name}]"]
    for pos, written, value in _child_options(cfg, path, name, 0):
        if pos[0] in ("--host", "--port", "-a", "--tags"):
            continue
        if not _takes_value(pos):
            value = "1" if value == "true" else "0"
        key = pos[-1].lstrip("-")
        lines.append(f"{key} = " + value.replace("\n", "\\\n"))
    return "\n".join(lines) + "\n\n"


HELP = """usage: bankml-serve [llama-server options]

bankml-serve answers llama-server b11192's HTTP API from bankml's own forward pass. It takes llama-server's
flags with llama-server's defaults; a llama-server flag bankml does not implement is refused, naming it.

  -m, --model FNAME          model path (default: bankml's default model, pulled when missing)
  -c, --ctx-size N           context size (default: 0 = the model's training context)
  -t, --threads N            threads of the llama-server whose bits are reproduced (default: llama-server's,
                             cpu_get_num_math: the physical cores; <= 0: the logical CPUs)
  -np, --parallel N          slots (default: -1 = auto: 4 slots, unified KV)
  -kvu, --kv-unified         one KV pool for every slot
  -b, --batch-size N         logical batch (default: 2048)
  -ub, --ubatch-size N       physical batch (default: 512)
  -n, --predict N            tokens to predict (default: -1 = until the end)
  --host HOST[,HOST]         addresses to listen on, or UNIX socket paths ending in .sock (default: 127.0.0.1)
  --port PORT                (default: 8080)
  -a, --alias A[,B]          model aliases; --tags T[,U]: model tags (/models)
  --api-key KEY[,KEY]        API keys (repeatable), --api-key-file FNAME
  --cors-origins O           (default: *); --cors-methods, --cors-headers, --[no-]cors-credentials
  --ui-mcp-proxy             enable /cors-proxy (--no-ui-mcp-proxy; default: disabled)
  --tools T1,T2 | all        built-in tools at /tools (default: none; makes --cors-origins default localhost)
  -ag, --agent               --tools all and --ui-mcp-proxy (-no-ag: neither)
  --mcp-servers-config PATH  MCP servers ({"mcpServers": {...}}) whose tools join /tools as SERVER_TOOL
  --mcp-servers-json JSON    the same config inline (both may be given; names must differ)
  --agent-open               /tools and /cors-proxy as llama-server serves them: any Origin, Host and
                             Content-Type (default: refused unless the Origin is allowed by --cors-origins,
                             localhost when not given; the Host is this machine's; a call is JSON)
  --metrics                  enable /metrics
  --props                    enable POST /props
  --slots, --no-slots        GET /slots (default: on)
  --slot-save-path PATH      enable slot save/restore/erase
  -sps N                     slot prompt similarity (default: 0.1)
  -cram, --cache-ram N       host prompt cache in MiB (default: 8192; -1 no limit; 0 off)
  -ctk, -ctv TYPE            KV cache type: f16 (default) or q8_0
  --temp, --seed, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
  --frequency-penalty        sampling defaults
  -bs, --backend-sampling    backend sampling by default (the sampling graph, docs/sampling.md)
  --jinja, --no-jinja         chat templates through Jinja (default), or llama.cpp's built-in templates
  --chat-template NAME|TEXT  the chat template (a built-in name without --jinja; a Jinja text with it)
  --chat-template-file FNAME the chat template from a file
  --reasoning off, --no-webui, --no-warmup, -fa auto|on   accepted (bankml's only mode)
  -lv N, -v, --log-disable   logging
  --ollama                   also listen on Ollama's address (OLLAMA_HOST, default 127.0.0.1:11434); set
                             OLLAMA_HOST does the same
  --ray [--replicas N] [--replica-cpus C]
                             serve through N Ray Serve replicas (default 1) of C CPUs each (default 1: their
                             compute threads) behind Ray's HTTP proxy, routed by prompt prefix
                             (pip install 'bankml[ray]'; $RAY_ADDRESS: join that cluster; docs/scale.md)
Every flag's LLAMA_ARG_* environment variable is read first (llama-server's); the command line wins.
"""

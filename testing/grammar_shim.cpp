// A thin C++ layer over the oracle's libllama / libllama-common (llama.cpp b11192) for the grammar recorders:
// the GBNF parser's rules, the JSON-schema converter's text and errors, the chat template's response-format
// grammar and the chat parser's content. Developer tool, built on demand by testing/grammar_oracle.py into the
// oracle's cache directory; never part of bankml. Every result is returned as a malloc'd JSON string.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <fcntl.h>

#include "llama.h"
#include "llama-grammar.h"
#include "chat.h"
#include "json.h"
#include "json-schema-to-grammar.h"

static std::string hex(const std::string & s) {
    static const char * digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) { out += digits[c >> 4]; out += digits[c & 15]; }
    return out;
}

static char * dup_str(const std::string & s) {
    char * out = (char *) malloc(s.size() + 1);
    memcpy(out, s.data(), s.size());
    out[s.size()] = 0;
    return out;
}

// run f with stderr sent to a temporary file; return what was written there
template <typename F>
static std::string capture_stderr(F f) {
    fflush(stderr);
    char path[] = "/tmp/gshimXXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    dup2(fd, 2);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string out;
    lseek(fd, 0, SEEK_SET);
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
    close(fd);
    unlink(path);
    return out;
}

extern "C" {

void gs_free(char * p) { free(p); }

// {"ok": bool, "error": captured stderr, "rules": [[[type, value], ...], ...], "symbols": {name: id}}
char * gs_parse(const char * text) {
    llama_grammar_parser parser(nullptr);
    bool ok = false;
    std::string err = capture_stderr([&] { ok = parser.parse(text); });
    common_json res = common_json::object();
    res["ok"] = ok;
    res["error"] = err;
    common_json rules = common_json::array();
    for (const auto & rule : parser.rules) {
        common_json r = common_json::array();
        for (const auto & e : rule) {
            common_json pair = common_json::array();
            pair.push_back((int) e.type);
            pair.push_back((int64_t) e.value);
            r.push_back(pair);
        }
        rules.push_back(r);
    }
    res["rules"] = rules;
    common_json syms = common_json::object();
    for (const auto & kv : parser.symbol_ids) syms[kv.first] = (int64_t) kv.second;
    res["symbols"] = syms;
    return dup_str(res.dump());
}

// {"ok": bool, "grammar": text} or {"ok": false, "error": what(), "kind": "invalid_argument"|"runtime_error"|...}
char * gs_schema(const char * schema_json) {
    common_json res = common_json::object();
    try {
        common_json schema = common_json::parse(schema_json);
        std::string g = json_schema_to_grammar(schema, true);
        res["ok"] = true;
        res["grammar_hex"] = hex(g);
    } catch (const std::invalid_argument & e) {
        res["ok"] = false; res["kind"] = "invalid_argument"; res["error"] = e.what();
    } catch (const std::runtime_error & e) {
        res["ok"] = false; res["kind"] = "runtime_error"; res["error"] = e.what();
    } catch (const std::exception & e) {
        res["ok"] = false; res["kind"] = "exception"; res["error"] = e.what();
    }
    return dup_str(res.dump());
}

void * gs_tmpls_init(const llama_model * model) {
    return common_chat_templates_init(model, "").release();
}

// the chat template applied as llama-server applies it for a request with `messages` and `json_schema`
// (reasoning_format deepseek, thinking off): {"ok", "grammar", "generation_prompt", "parser", "prompt", "lazy"}
char * gs_chat_apply(void * tmpls, const char * messages_json, const char * json_schema) {
    common_json res = common_json::object();
    try {
        common_chat_templates_inputs inputs;
        inputs.messages = common_chat_msgs_parse_oaicompat(common_json::parse(messages_json));
        inputs.json_schema = json_schema;
        inputs.use_jinja = true;
        inputs.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
        inputs.enable_thinking = false;
        auto p = common_chat_templates_apply((common_chat_templates *) tmpls, inputs);
        res["ok"] = true;
        res["grammar_hex"] = hex(p.grammar);
        res["generation_prompt"] = p.generation_prompt;
        res["parser"] = p.parser;
        res["prompt"] = p.prompt;
        res["lazy"] = p.grammar_lazy;
        res["format"] = (int) p.format;
    } catch (const std::invalid_argument & e) {
        res["ok"] = false; res["kind"] = "invalid_argument"; res["error"] = e.what();
    } catch (const std::exception & e) {
        res["ok"] = false; res["kind"] = "exception"; res["error"] = e.what();
    }
    return dup_str(res.dump());
}

// the chat parser on a model's output: {"ok", "content", "reasoning_content", "empty"} or the error
char * gs_chat_parse(const char * parser, const char * generation_prompt, int format, const char * input, int is_partial) {
    common_json res = common_json::object();
    try {
        common_chat_parser_params params;
        params.format = (common_chat_format) format;
        params.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
        params.generation_prompt = generation_prompt;
        if (parser && parser[0]) params.parser.load(parser);
        auto msg = common_chat_parse(input, is_partial != 0, params);
        res["ok"] = true;
        res["content"] = msg.content;
        res["reasoning_content"] = msg.reasoning_content;
        res["empty"] = msg.empty();
        res["n_tool_calls"] = (int) msg.tool_calls.size();
    } catch (const std::exception & e) {
        res["ok"] = false; res["error"] = e.what();
    }
    return dup_str(res.dump());
}

}

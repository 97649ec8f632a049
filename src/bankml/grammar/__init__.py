"""Constrained generation as llama-server b11192 does it: GBNF grammars, JSON schemas, JSON mode.

Owns: the GBNF syntax and the grammar engine (src/llama-grammar.cpp), the JSON-schema-to-grammar converter
(common/json-schema-to-grammar.cpp, common/json-schema.cpp), how a request's `grammar` / `json_schema` /
`response_format` becomes a grammar (tools/server), and the content llama-server returns for a JSON answer on
chat (the chat parser of common/chat.cpp for a response format). Must not know: HTTP, kernels.

    from bankml.grammar import Grammar, GrammarVocab
    g = Grammar.parse(text, vocab=GrammarVocab.from_gguf_file(path))
    g.apply(ids, logits); g.accept(token); g.is_done

See docs/grammar.md (engine, the sampler seam) and docs/json_schema.md (converter, request resolution).
"""

from bankml.errors import GrammarError, SchemaError
from bankml.grammar.grammar import Grammar, compile_grammar, init_grammar
from bankml.grammar.vocab import GrammarVocab

__all__ = ["Grammar", "GrammarError", "GrammarVocab", "SchemaError", "compile_grammar", "init_grammar"]

"""Behaviours of the C++ libraries llama.cpp builds on, reproduced where an answer depends on them.

  nljson      nlohmann::json: what it accepts, its error texts, its number and string output
  ecma_regex  libstdc++ std::regex (ECMAScript): patterns as grep_search reads them
Must not know: models, tokens, HTTP.
"""

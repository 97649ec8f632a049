"""Behaviours of the C++ libraries llama.cpp builds on, reproduced where an answer depends on them.

  nljson      nlohmann::json: what it accepts, its error texts, its number and string output
  ecma_regex  libstdc++ std::regex (ECMAScript): patterns as grep_search reads them
  _stl        libstdc++ containers and algorithms: std::hash, unordered_map order, std::sort (compiled)
  cfloat      static_cast<float>(double)
Must not know: models, tokens, HTTP.
"""

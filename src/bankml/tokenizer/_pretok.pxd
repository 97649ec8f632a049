# Pre-tokenizer steps (llama.cpp b11192's unicode_regex_split): each step cuts every segment of a codepoint
# array into smaller segments; segments are given by their lengths, in order.
from libc.stdint cimport uint16_t, uint32_t, int64_t
from bankml.tokenizer._buf cimport I64Buf

cdef enum:
    STEP_GPT2 = 1            # 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)   (fast path)
    STEP_LLAMA3 = 2          # (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...   (fast path)
    STEP_QWEN2 = 3           # as LLAMA3 with \p{N} single digits   (fast path)
    STEP_QWEN35 = 4          # as QWEN2 with [\p{L}\p{M}]+ words   (fast path)
    STEP_EACH_NUMBER = 5     # \p{N}               (std::regex on the collapsed text)
    STEP_RUN_NUMBER = 6      # \p{N}+              (std::regex on the collapsed text)
    STEP_RUN_PUNCT = 7       # [\p{P}\$\+<=>\^~\|]+   (std::regex on the collapsed text)
    STEP_ASCII_DIGITS3 = 8   # [0-9][0-9][0-9]     (std::wregex on the codepoints)

cdef int split_step(int step, const uint32_t *cpts, const uint16_t *table, const int64_t *seg_in,
                    Py_ssize_t n_in, I64Buf *seg_out) noexcept nogil

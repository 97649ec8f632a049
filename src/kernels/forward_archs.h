/* The architectures bankml has a forward graph for, one line each:
 *     BK_ARCH(enum value, GGUF general.architecture, the ubatch graph function of forward_<name>.c)
 * Included with BK_ARCH defined: forward.h makes the enum of it, forward_common.c the name table and the graph
 * table, forward_common.h the graph functions' declarations. No include guard (it is included several times). */
BK_ARCH(BK_ARCH_LLAMA, "llama", bk_llama_ubatch)
BK_ARCH(BK_ARCH_GEMMA3, "gemma3", bk_gemma3_ubatch)
BK_ARCH(BK_ARCH_QWEN3, "qwen3", bk_qwen3_ubatch)

/* One backend-sampling graph of the oracle's libllama (llama.cpp b11192) on ggml-cpu, for
 * testing/record_sampling_graph.py. Developer tool: built on demand into the oracle's cache directory; never
 * part of bankml.
 *
 * The graph is built as llm_graph_context::build_sampling builds it for one output row: the chain's
 * backend_reset, backend_apply on a 1-D f32 logits input, every output it sets marked and expanded; allocated
 * on the CPU buffer type, the row and the samplers' inputs (backend_set_input) set, computed on the CPU
 * backend with nth threads. */
#include <stdint.h>
#include <string.h>
#include "llama.h"
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

/* llama_set_sampler's backend_init (one output per sequence, as llama-server without speculative decoding) */
int be_init(struct llama_sampler *chain) {
    return chain->iface->backend_init(chain, ggml_backend_cpu_buffer_type(), 1) ? 1 : 0;
}

/* -> number of output entries; *sampled = the graph's token or -1; ids (the full vocabulary's when the graph
 * gives no candidates), logits, probs (*has_probs = 0: none) for each entry */
int be_step(struct llama_sampler *chain, const float *row, int n, int nth, int32_t *sampled, int32_t *ids,
            float *logits, float *probs, int *has_probs) {
    const size_t max_nodes = 8192;
    struct ggml_init_params ip = { max_nodes * ggml_tensor_overhead() + ggml_graph_overhead_custom(max_nodes, false),
                                   NULL, true };
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, max_nodes, false);
    struct ggml_tensor *x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_set_input(x);
    struct llama_sampler_data d = { x, NULL, NULL, NULL };
    if (chain->iface->backend_reset) chain->iface->backend_reset(chain);
    chain->iface->backend_apply(chain, ctx, gf, &d);
    struct ggml_tensor *outs[4] = { d.sampled, d.probs, d.logits, d.candidates };
    for (int i = 0; i < 4; i++) {
        if (outs[i]) {
            ggml_set_output(outs[i]);
            ggml_build_forward_expand(gf, outs[i]);
        }
    }
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    if (!ggml_gallocr_alloc_graph(ga, gf)) {
        ggml_gallocr_free(ga);
        ggml_free(ctx);
        return -1;
    }
    ggml_backend_tensor_set(x, row, 0, (size_t) n * sizeof(float));
    if (chain->iface->backend_set_input) chain->iface->backend_set_input(chain);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, nth);
    ggml_backend_graph_compute(be, gf);
    int n_out = (int) ggml_nelements(d.logits);
    *sampled = -1;
    if (d.sampled) ggml_backend_tensor_get(d.sampled, sampled, 0, sizeof(int32_t));
    ggml_backend_tensor_get(d.logits, logits, 0, (size_t) n_out * sizeof(float));
    if (d.candidates) ggml_backend_tensor_get(d.candidates, ids, 0, (size_t) n_out * sizeof(int32_t));
    else for (int i = 0; i < n_out; i++) ids[i] = i;
    *has_probs = d.probs != NULL;
    if (d.probs) ggml_backend_tensor_get(d.probs, probs, 0, (size_t) n_out * sizeof(float));
    ggml_backend_free(be);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    return n_out;
}

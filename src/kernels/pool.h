/* The pooling of token embeddings and the server's normalisation, in llama.cpp b11192's float order.
 *
 * Mean pooling (src/llama-graph.cpp build_pooling, LLAMA_POOLING_TYPE_MEAN) is
 *     MUL_MAT(CONT(TRANSPOSE(t_embd)), inp_mean)
 * with inp_mean one column of 1.0f/float(n) per sequence (llm_graph_input_mean::set_input). Both are F32 and the
 * second has one column (one sequence per ubatch in llama-server's embedding batches), so ggml-cpu takes its
 * vec_dot path for every output (llamafile's sgemm refuses n < 2, floatdot.h): pooled[e] =
 * ggml_vec_dot_f32(n, (t_embd[0][e], ..., t_embd[n-1][e]), (1/n, ..., 1/n)) = bk_dot_f32.
 * CLS, LAST and RANK (a model without a classifier head) are GET_ROWS of one token's row: exact copies.
 *
 * Normalisation (common/common.cpp common_embd_normalize): a double s over the floats, then
 * norm = (float)(1.0 / s) (0 when s <= 0), out_i = fl(x_i * norm):
 *   mode -1: s = 1;  0: s = max |x_i| / 32760.0;  2: s = sqrt(sum of (double)fl(x_i * x_i)) summed in order;
 *   p: s = pow(sum of pow(|x_i|, p), 1.0 / p) (double pow, in order).
 */
#ifndef BK_POOL_H
#define BK_POOL_H

/* embd: float[n][n_embd] (token t's row at embd + t*n_embd); out: float[n_embd]; scratch: float[2*n]. */
void bk_pool_mean(int n, int n_embd, const float *embd, float *out, float *scratch);

/* Mean pooling of one ubatch of ns sequences of nst rows each (rows grouped by sequence: split_equal's ubatch on a
 * split KV cache), as ggml computes MUL_MAT(CONT(TRANSPOSE(t_embd)), inp_mean) there: inp_mean has a column per
 * sequence, 1.0f/float(nst) on its own rows and 0 on the others', and each output is a dot product over all
 * n = ns*nst rows (the zeros included: they decide which lane an element lands in). One column (ns == 1): vec_dot
 * (as bk_pool_mean); two or more: llamafile's tinyBLAS when it takes the product (n_embd % 4 == 0, n % 8 == 0),
 * else vec_dot (floatdot.h). out: float[ns][n_embd]; scratch: float[n*n_embd + ns*n]. */
void bk_pool_mean_ubatch(int ns, int nst, int n_embd, const float *embd, float *out, float *scratch);

/* Mean pooling of one ubatch of n rows in any order (split_simple's ubatch on a unified KV cache: the rows of
 * ns sequences as the batch holds them): row t belongs to column col[t] (0 .. ns-1, the sequence's rank among the
 * ubatch's seq ids, llama_ubatch::seq_idx), and column s of inp_mean is 1.0f/float(its row count) on its rows, 0 on
 * the others' (llm_graph_input_mean::set_input). The product as bk_pool_mean_ubatch computes it.
 * out: float[ns][n_embd]; scratch: float[n*n_embd + ns*n]. */
void bk_pool_mean_rows(int n, int ns, int n_embd, const float *embd, const int *col, float *out, float *scratch);

/* out may alias x. */
void bk_embd_normalize(const float *x, float *out, int n, int mode);

#endif

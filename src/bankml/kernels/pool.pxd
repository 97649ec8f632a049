# src/kernels/pool.h: embedding pooling (mean) and the server's normalisation.

cdef extern from "pool.h" nogil:
    void bk_pool_mean(int n, int n_embd, const float *embd, float *out, float *scratch)
    void bk_embd_normalize(const float *x, float *out, int n, int mode)
    void bk_pool_mean_ubatch(int ns, int nst, int n_embd, const float *embd, float *out, float *scratch)
    void bk_pool_mean_rows(int n, int ns, int n_embd, const float *embd, const int *col, float *out,
                           float *scratch)

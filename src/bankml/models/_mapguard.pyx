# cython: language_level=3
"""The guard of the models' mappings: what happens when a mapped model file is cut or rewritten under the process.

A read of a mapped page past the end of a file that was truncated after it was mapped raises SIGBUS; without a
handler the process dies at once, nothing logged, every client cut off. This module installs one SIGBUS handler
(process-wide, chained to the one it replaces) and keeps a table of the mappings it watches:

    slot = watch(mm, path)      # a GGUFFile's read-only mmap (any object with a readable buffer) and its file
    damaged(slot)               # -1, or the offset of the first read that faulted
    unwatch(slot)               # before the mapping is closed

A fault inside a watched mapping replaces the whole mapping, at the same address, with zero-filled anonymous
pages (mmap with MAP_FIXED, which the handler may call), writes one line naming the file to stderr, records the
offset and returns: the faulting read and every later one see zeros instead of killing the process. The data is
then garbage, so whoever computes from the mapping asks damaged() after its reads and throws the result away
(bankml.engine.Model.decode does, after every forward pass). A fault anywhere else goes to the previous handler,
or to the default action (the process ends with SIGBUS, as it would have without this module).

It knows nothing of GGUF, models or servers: only address ranges and the file names to print. Compiled at the
baseline x86-64 level (the handler may run before any kernel is usable).
"""

cdef extern from *:
    """
    #include <signal.h>
    #include <string.h>
    #include <unistd.h>
    #include <stdint.h>
    #include <sys/mman.h>

    #define BK_GUARD_SLOTS 64
    #define BK_GUARD_PATH 1024

    typedef struct {
        volatile int used;
        volatile uintptr_t base;
        volatile size_t len;
        volatile long long hit;        /* -1, or the offset of the first faulting read */
        char path[BK_GUARD_PATH];
    } bk_guard_slot;

    static bk_guard_slot bk_guard_slots[BK_GUARD_SLOTS];
    static struct sigaction bk_guard_prev;
    static int bk_guard_installed = 0;

    static void bk_guard_write(const char *s) {
        size_t n = strlen(s);
        while (n > 0) {
            ssize_t w = write(2, s, n);
            if (w <= 0) return;
            s += w; n -= (size_t)w;
        }
    }

    static void bk_guard_write_num(unsigned long long v) {
        char buf[24];
        int i = 23;
        buf[i] = 0;
        do { buf[--i] = (char)('0' + v % 10); v /= 10; } while (v && i > 0);
        bk_guard_write(buf + i);
    }

    static void bk_guard_handler(int sig, siginfo_t *si, void *uc) {
        uintptr_t a = (uintptr_t)si->si_addr;
        for (int i = 0; i < BK_GUARD_SLOTS; i++) {
            bk_guard_slot *s = &bk_guard_slots[i];
            if (!s->used || a < s->base || a >= s->base + s->len) continue;
            void *r = mmap((void *)s->base, s->len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (s->hit < 0) {
                s->hit = (long long)(a - s->base);
                bk_guard_write("bankml: the model file ");
                bk_guard_write(s->path);
                bk_guard_write(" changed under the server (a read at offset ");
                bk_guard_write_num((unsigned long long)(a - s->base));
                bk_guard_write(" is past its end: it was truncated or replaced in place); "
                               "requests on it end with an error\\n");
            }
            if (r == MAP_FAILED) {
                bk_guard_write("bankml: cannot replace the damaged mapping; exiting\\n");
                _exit(70);
            }
            return;
        }
        /* not a watched mapping: whatever would have happened without this handler */
        if (bk_guard_prev.sa_flags & SA_SIGINFO) {
            if (bk_guard_prev.sa_sigaction) { bk_guard_prev.sa_sigaction(sig, si, uc); return; }
        } else if (bk_guard_prev.sa_handler != SIG_DFL && bk_guard_prev.sa_handler != SIG_IGN) {
            bk_guard_prev.sa_handler(sig);
            return;
        }
        signal(sig, SIG_DFL);          /* the faulting read runs again and ends the process */
    }

    static int bk_guard_install(void) {
        if (bk_guard_installed) return 0;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = bk_guard_handler;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &bk_guard_prev) != 0) return -1;
        bk_guard_installed = 1;
        return 0;
    }

    static int bk_guard_watch(const void *base, size_t len, const char *path) {
        if (bk_guard_install() != 0) return -1;
        for (int i = 0; i < BK_GUARD_SLOTS; i++) {
            bk_guard_slot *s = &bk_guard_slots[i];
            if (s->used) continue;
            s->hit = -1;
            strncpy(s->path, path, BK_GUARD_PATH - 1);
            s->path[BK_GUARD_PATH - 1] = 0;
            s->base = (uintptr_t)base;
            s->len = len;
            __atomic_store_n(&s->used, 1, __ATOMIC_SEQ_CST);
            return i;
        }
        return -1;
    }

    static void bk_guard_unwatch(int i) {
        if (i >= 0 && i < BK_GUARD_SLOTS) __atomic_store_n(&bk_guard_slots[i].used, 0, __ATOMIC_SEQ_CST);
    }

    static long long bk_guard_damaged(int i) {
        if (i < 0 || i >= BK_GUARD_SLOTS || !bk_guard_slots[i].used) return -1;
        return bk_guard_slots[i].hit;
    }
    """
    int bk_guard_watch(const void *base, size_t length, const char *path) nogil
    void bk_guard_unwatch(int slot) nogil
    long long bk_guard_damaged(int slot) nogil


def watch(mapping, path) -> int:
    """Watch a read-only mapping (an mmap.mmap, or any object exporting its buffer) of the file `path`; returns
    its slot (-1 when the table is full or the handler could not be installed: the mapping is then unguarded)."""
    cdef const unsigned char[::1] view = mapping
    if view.shape[0] == 0:
        return -1
    name = str(path).encode("utf-8", "replace")
    return bk_guard_watch(&view[0], <size_t>view.shape[0], name)


def unwatch(int slot) -> None:
    """Stop watching a slot (call it before the mapping is closed)."""
    bk_guard_unwatch(slot)


def damaged(int slot) -> int:
    """-1, or the offset in the file of the first read that faulted (the mapping is zeros from then on)."""
    return bk_guard_damaged(slot)

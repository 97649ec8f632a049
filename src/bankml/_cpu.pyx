# cython: language_level=3
"""CPU feature check. Compiled at the baseline x86-64 level so that it imports on any CPU and can name what
is missing before any AVX2 code runs (bankml.engine imports it first)."""

cdef extern from *:
    """
    static int bk_cpu_has(const char *name) {
        __builtin_cpu_init();
        if (!__builtin_strcmp(name, "avx")) return __builtin_cpu_supports("avx");
        if (!__builtin_strcmp(name, "avx2")) return __builtin_cpu_supports("avx2");
        if (!__builtin_strcmp(name, "fma")) return __builtin_cpu_supports("fma");
        if (!__builtin_strcmp(name, "f16c")) return __builtin_cpu_supports("f16c");
        if (!__builtin_strcmp(name, "bmi2")) return __builtin_cpu_supports("bmi2");
        if (!__builtin_strcmp(name, "avx512f")) return __builtin_cpu_supports("avx512f");
        if (!__builtin_strcmp(name, "avx512bw")) return __builtin_cpu_supports("avx512bw");
        if (!__builtin_strcmp(name, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
        return 0;
    }
    """
    int bk_cpu_has(const char *name) nogil

cdef extern from *:
    """
    #if defined(__x86_64__) && defined(__linux__)
    #ifndef _GNU_SOURCE
    #define _GNU_SOURCE
    #endif
    #include <cpuid.h>
    #include <pthread.h>
    #include <sched.h>
    #include <unistd.h>
    /* CPUID leaf 7, EDX bit 15: a hybrid part (performance and efficiency cores). */
    static int bk_cpu_hybrid(void) {
        unsigned a, b, c, d;
        __cpuid_count(7, 0, a, b, c, d);
        return (d >> 15) & 1;
    }
    /* CPUID leaf 0x1A, EAX bits 31..24 of the core this thread runs on: 0x20 is an Intel Atom (efficiency)
     * core. */
    static int bk_cpu_on_efficiency_core(void) {
        unsigned a, b, c, d;
        __cpuid_count(0x1a, 0, a, b, c, d);
        return ((a >> 24) & 0xff) == 0x20;
    }
    /* llama.cpp's count of the CPUs useful for math on a hybrid part (common/common.cpp, cpu_count_math_cpus,
     * b11192 lines 181-197): this thread is moved to CPU 0, 1, ... in turn; an efficiency core is passed over,
     * a performance core counts once and the CPU numbered after it (taken for its hyper-thread sibling) is
     * skipped. -1 when the thread cannot be moved. The thread's affinity is put back. */
    static int bk_cpu_math_cpus_hybrid(void) {
        int n_cpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (n_cpu < 1) return 0;
        cpu_set_t saved;
        if (pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved)) return 0;
        int result = 0;
        for (int cpu = 0; cpu < n_cpu; cpu++) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one)) { result = -1; break; }
            if (bk_cpu_on_efficiency_core()) continue;
            cpu++;
            result++;
        }
        pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
        return result;
    }
    #else
    static int bk_cpu_hybrid(void) { return 0; }
    static int bk_cpu_math_cpus_hybrid(void) { return 0; }
    #endif
    """
    int bk_cpu_hybrid() nogil
    int bk_cpu_math_cpus_hybrid() nogil

REQUIRED = ("avx", "avx2", "fma", "f16c", "bmi2")
OPTIONAL = ("avx512f", "avx512bw", "avx512vnni")


def has(str name):
    """True when the CPU supports the named feature (one of REQUIRED or OPTIONAL)."""
    b = name.encode()
    return bool(bk_cpu_has(b))


def missing_features():
    """The required features this CPU lacks, in REQUIRED's order (empty on a capable CPU)."""
    return [f for f in REQUIRED if not has(f)]


def features():
    """Every known feature and whether the CPU has it."""
    return {f: has(f) for f in REQUIRED + OPTIONAL}


def hybrid():
    """True on a CPU with performance and efficiency cores (CPUID 7, EDX bit 15)."""
    return bool(bk_cpu_hybrid())


def physical_cores():
    """llama.cpp's cpu_get_num_physical_cores on Linux: the distinct thread_siblings masks of cpu0, cpu1, ...
    (up to the first CPU without one); without any, std::thread::hardware_concurrency() when it is 4 or less,
    else half of it (4 when unknown)."""
    import os
    seen = set()
    cpu = 0
    while True:
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings") as fh:
                line = fh.readline()
        except OSError:
            break
        if line:  # std::getline fails on an empty file
            seen.add(line[:-1] if line.endswith("\n") else line)
        cpu += 1
    if seen:
        return len(seen)
    n = os.cpu_count() or 0
    return n if 0 < n <= 4 else (n // 2 if n else 4)


def math_cpus_pinned():
    """cpu_count_math_cpus's count on this machine, whether or not it is hybrid (-1: a CPU could not be
    pinned). num_math uses it on hybrid CPUs only, as llama.cpp does."""
    with nogil:
        n = bk_cpu_math_cpus_hybrid()
    return n


def num_math():
    """llama.cpp's cpu_get_num_math (common/common.cpp, b11192 lines 201-227), the -t llama-server uses when none
    is given: on x86-64 Linux with a hybrid CPU, the performance cores as cpu_count_math_cpus counts them (when
    it can pin a thread to every online CPU); otherwise physical_cores()."""
    if bk_cpu_hybrid():
        n = math_cpus_pinned()
        if n > 0:
            return n
    return physical_cores()

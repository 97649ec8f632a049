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

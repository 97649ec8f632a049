# cython: language_level=3
"""OpenMP facts and the thread count bankml uses, worked out once (sklearn's habit)."""

cimport openmp
import os


def max_threads():
    """What OpenMP would use by default (honours OMP_NUM_THREADS)."""
    return openmp.omp_get_max_threads()


def physical_cores():
    """llama.cpp's cpu_get_num_physical_cores (bankml._cpu.physical_cores: the distinct thread_siblings sets
    under /sys)."""
    from .. import _cpu
    return _cpu.physical_cores()


def effective_threads(requested=None):
    """The thread count bankml runs with: `requested` when given (> 0), else OMP_NUM_THREADS, else the
    number of physical cores, capped by the CPUs this process may run on."""
    if requested is not None:
        n = int(requested)
        if n <= 0:
            raise ValueError(f"thread count must be positive, got {n}")
        return n
    env = os.environ.get("OMP_NUM_THREADS")
    if env:
        try:
            n = int(env.split(",")[0])
            if n > 0:
                return n
        except ValueError:
            pass
    n = physical_cores()
    try:
        n = min(n, len(os.sched_getaffinity(0)))
    except AttributeError:
        pass
    return max(1, n)

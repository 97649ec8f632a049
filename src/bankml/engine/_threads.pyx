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


cdef extern from "omp.h":
    ctypedef enum omp_pause_resource_t:
        omp_pause_soft
    int omp_pause_resource_all(omp_pause_resource_t kind) nogil


def release_pool():
    """Let go of the calling thread's OpenMP thread pool (its helper threads exit; the next parallel region on
    this thread starts a new one). libgomp shortens every barrier wait to 100 spins before it sleeps on a futex
    as soon as the threads it manages, over all pools of the process, outnumber the CPUs: a pool left behind on
    the thread that opened a model (the weights' regroup runs a parallel region there) beside the pool of the
    thread that decodes is enough on a 2-core machine, and the decode then takes a futex sleep and wake at most
    of its barriers. Returns libgomp's status (0: released or nothing to release)."""
    return omp_pause_resource_all(omp_pause_soft)

/*
 * membw.h — a read-bandwidth probe: how fast this machine streams memory into
 * the cores, the ceiling every decode step is measured against. Shared by
 * `triforce bench` and bench/tfbench.c (`tfbench membw`).
 */
#ifndef TF_MEMBW_H
#define TF_MEMBW_H

#include <stddef.h>

/* Best read bandwidth in GB/s (1e9 bytes/s) over `reps` passes through a
 * buffer of `bytes`, split evenly across n_threads threads (1..64) that each
 * sum their part with 256-bit loads (AVX2 where the CPU has it, else 64-bit
 * scalar loads). The buffer is written once first, so its pages are resident.
 * Make it several times the last-level cache to measure DRAM. Returns -1 if
 * the buffer cannot be allocated or a thread cannot be started. */
double membw_read_gbs(int n_threads, size_t bytes, int reps);

#endif

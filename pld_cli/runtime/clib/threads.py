"""One OpenMP team in the process: why documents decoded together run their passes on one thread.

libgomp's threads wait for the next step of a pass by spinning, which costs nothing on an idle
core, but only while the process manages no more threads than there are cores; beyond that every
wait is a sleep and a wake-up. A pass of the C decoder has a hundred and more such steps, so on a
2-core machine a decode pass took 9 ms from the one thread that runs OpenMP and 21 ms once a
second thread had a team of its own (docs/batching.md). Each thread that opens a parallel region
gets its own team, torch's work included; so a batch runs every pass on one thread of its own,
the thread that opened it gives up its team, and the documents' threads keep their torch work
(the logits' argmax) on themselves.
"""

from __future__ import annotations

import torch

from pld_cli.runtime.clib import library

OMP_PAUSE_SOFT = 1  # OpenMP 5.0's omp_pause_soft: the threads end, the settings stay


def serial_thread() -> None:
    """This thread's parallel regions, torch's included, run on it alone (no team of its own)."""
    set_num_threads = library.kernel("omp_set_num_threads")
    if set_num_threads is None:
        return
    torch.get_num_threads()  # torch sets each thread's count once, on first use: before ours
    set_num_threads(1)


def release_team() -> None:
    """Ends this thread's OpenMP team, so that another thread's team is the only one; a later
    parallel region on this thread starts a new one."""
    pause_resource_all = library.kernel("omp_pause_resource_all")
    if pause_resource_all is not None:
        pause_resource_all(OMP_PAUSE_SOFT)

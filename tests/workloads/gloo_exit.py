"""A clean exit for the gloo workloads, around a torch 2.13 teardown race.

A gloo worker thread destroys each finished allreduce after the caller got its result; the
work's saved thread-local state holds a Python object, and dropping it takes the GIL. When
the interpreter is already finalizing by then, the thread is ended with ``pthread_exit``,
whose unwind through torch's C++ destructor calls ``std::terminate``: the rank aborts
("terminate called without an active exception", SIGABRT) after its last line. Seen in 2
of 15 plain torchrun runs of ddp_slow_rank.py on 2 cores, no perftop (a core file's
backtrace: ProcessGroupGloo::runLoop -> ~AsyncWork -> ~ThreadLocalState -> decref ->
take_gil -> PyThread_exit_thread). The exit handlers run (perftop's last flush among them);
the interpreter's teardown, where torch aborts, does not.
"""

import atexit
import os
import sys


def exit_cleanly() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(0)

# C types for the compiled build of steps.py (perftop.hook._steps_fast): declarations
# only; the logic is steps.py's, the one source.

cdef int NONE, LOADER, BACKWARD, OPTIMIZER, EXPLICIT  # C ints: compared on every call
cdef long long RING_REC, PHASED
cdef tuple SOURCES  # a C global: no module-dict lookup per step

# steps.py's ``_now``, ``_passthrough``, ``_hook``, ``_grad*`` and ``_refers`` are the
# plain twins in passthrough.py; compiled, these C primitives (perf_counter's clock read in
# C, a vectorcall pass-through, a direct hook, c10's grad flag, a weak reference read).
cdef extern from "_steps_fast.h":
    double _now "perftop_now" ()
    ctypedef int (*done_fn "perftop_done_fn")(object, double, double, bint, object) except -1
    object _passthrough "perftop_passthrough" (object orig, object target, done_fn done, object where)
    ctypedef object (*hook_fn "perftop_hook_fn")(object, object, object, object)
    object _hook "perftop_hook" (object target, hook_fn fn, object where)
    bint _grad "perftop_grad" (object fallback) except -1
    bint _grad_resolve "perftop_grad_resolve" (object path)
    void _grad_forget "perftop_grad_forget" ()
    bint _refers "perftop_refers" (object ref, object obj) except -1
    unsigned long _thread "perftop_thread" ()
    object _passthrough_outer "perftop_passthrough_outer" (object orig, object target, done_fn done, object where)
    char *_ring_ptr "perftop_ring_ptr" (object buf) except NULL
    void _ring_store "perftop_ring_store" (char *p, long long at, long long pid, double index, double t0, double t1, double data, double bwd, double opt, double src)

cdef double _cap(double x, double dur)

cimport cython

@cython.final  # no Python subclass: calls between its methods are direct C calls
cdef class StepTracker:
    # The fields a step reads and writes come first, together: a step's entries find them
    # cold after torch's work, so they cost by the cache lines they span (in declaration
    # order, ~330 bytes here, against 520 for the object); the rest (callbacks of rare
    # paths, intervals outside training) after them.
    cdef public unsigned long thread
    cdef public int mode, closure_depth
    cdef public bint running, in_gap, pend, has_fetch, has_bwd, blind, bwd_seen, timing
    cdef public bint multi_bwd, settled
    cdef public object fetch_loader, in_opt, train_last, on_arm, on_fetched
    cdef public object watching
    cdef public list held
    cdef public double start, last_end, data, bwd, opt, hole, fwd_wait, opt_t0, closure_s
    cdef public double flush_at
    cdef public long long index, step_hook_at
    cdef public object primary, mark, phases, on_close, on_step, on_flush, grad_enabled
    cdef public tuple last_it
    cdef public long long ring_cap, ring_r, ring_w, ring_pid
    cdef public double ring_off
    cdef public object ring_buf
    cdef char *ring  # ring_buf's bytes, for C stores (in range by construction)
    # Not on a step's way.
    cdef public object opt_pre_hook, opt_post_hook, emit, on_settle, on_error, on_between
    cdef public object on_open, on_closure, on_iter, clock, region, ng_sites, pend_loader, cand
    cdef public bint gap_eval, pend_got, held_fetch
    cdef public unsigned long fetch_thread, main_thread
    cdef public double gap_t0, gap_t1, gap_seen, save_s, save_t0, save_end, pend_t0, pend_t1
    cdef public double batch_t, batch_c
    cdef public object batch_site, pend_site, eval_loader
    cdef public double save_w, save_c, save_q, pre_end
    cdef public bint save_alone
    cdef public set train_loaders
    cdef public dict ring_phases

    cpdef close(self, double t)
    @cython.locals(w=cython.longlong)
    cpdef push(self, double index, double t0, double t1, double data, double bwd, double opt, object phases, double source)
    cpdef bint active(self)
    cpdef lazy_close(self, double t)
    cpdef fetched(self, double t0, double t1, bint got_batch=*, object loader=*, bint grad=*)
    cpdef backward(self, double t0, double t1)
    cpdef grads(self, double t0, double t1)
    cpdef backward_like(self, double t0, double t1)
    cpdef object optimizer_pre(self, object opt, double t0, object args=*, object kwargs=*)
    cpdef optimizer_post(self, object opt, double t1)


# What the pass-throughs and hooks call, by C function pointer (see _steps_fast.h), which
# also catch their errors.
cdef object _opt_pre(object tr, object opt, object args, object kwargs)
cdef object _opt_post(object tr, object opt, object args, object kwargs)
cdef int _backward_done(object tr, double t0, double t1, bint ok, object first) except -1
cdef int _grad_done(object tr, double t0, double t1, bint ok, object first) except -1
cdef int _next_done(object tr, double t0, double t1, bint ok, object it) except -1

/* The step tracker's state, shared by _tracker.c (the state machine) and _speedups.c
 * (the Python type, the torch wrappers, the module). */
#ifndef PERFTOP_TRACKER_H
#define PERFTOP_TRACKER_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

enum { NONE, LOADER, BACKWARD, OPTIMIZER, EXPLICIT, NMODES };

extern PyObject *pt_sources;      /* perftop.wire.STEP_SOURCES (index = mode), from configure() */
extern long long pt_hold_steps;
extern double pt_hold_s;
extern PyTypeObject *pt_TrackerType;
extern PyObject *pt_perf_counter; /* time.perf_counter, where CLOCK_MONOTONIC is not its clock */

/* time.perf_counter(), without a Python call: same clock, same rounding (ns / 1e9). */
static inline double
now(void)
{
#ifdef __linux__
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;
#else
    PyObject *r = PyObject_CallNoArgs(pt_perf_counter);
    double d = r ? PyFloat_AsDouble(r) : 0.0;
    Py_XDECREF(r);
    PyErr_Clear();
    return d;
#endif
}

typedef struct {
    PyObject_HEAD
    PyObject *emit, *on_close, *on_step, *on_fetched, *on_settle, *on_error;
    PyObject *phases; /* dict or None */
    PyObject *held;   /* list of step tuples held back until settled */
    double start, data, bwd, opt, opt_t0, last_end;
    unsigned long long primary_opt; /* id() of the first optimizer that stepped */
    long long index, step_hook_at;
    int mode;
    char has_start, has_primary, has_fetch, has_bwd, settled;
} Tracker;

#define IS_SET(o) ((o) != NULL && (o) != Py_None)

/* The state machine (_tracker.c): 0, or -1 with an exception set where steps.py raises. */
int pt_close(Tracker *s, double t);
int pt_fetched(Tracker *s, double t0, double t1, int got_batch);
int pt_backward(Tracker *s, double t0, double t1);
void pt_optimizer_pre(Tracker *s, double t0);
int pt_optimizer_post(Tracker *s, unsigned long long opt_id, double t1);
int pt_explicit(Tracker *s, double t);
int pt_phase(Tracker *s, PyObject *name, double t0, double t1);
int pt_flush(Tracker *s);
void pt_reset(Tracker *s);
int pt_report(Tracker *s, const char *where);
int pt_call_method(Tracker *s, const char *name, PyObject *a, PyObject *b, PyObject *c);

/* _wrappers.c: the HookWrapper type and the two calls it can make. */
extern PyTypeObject pt_WrapperType;
PyObject *pt_next_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *pt_backward_call(PyObject *self, PyObject *const *args, size_t nargsf,
                           PyObject *kwnames);
PyObject *pt_make_wrapper(PyObject *const *a, Py_ssize_t nargs, vectorcallfunc call);

#endif

/* perftop.hook._speedups, part 1: the step tracker's state machine in C.
 *
 * The same state machine as perftop/hook/steps.py (the reference: read it first), plus the
 * two wrappers torch_patch.py installs around torch.autograd.backward and
 * _BaseDataLoaderIter.__next__. A training step then runs no Python frame of perftop's:
 * the clock is read here (CLOCK_MONOTONIC, the clock of time.perf_counter on Linux) and
 * steps go to the sender's deque through its C-level append.
 *
 * Errors: tracker methods return -1 with an exception set, exactly where the Python code
 * would raise; the hooks and wrappers report Exception subclasses to on_error (with the
 * exception as sys.exc_info(), as in an except block) and never let them reach user code.
 */
#include "_tracker.h"

PyObject *pt_sources;      /* perftop.wire.STEP_SOURCES (index = mode), from configure() */
long long pt_hold_steps = 64;
double pt_hold_s = 5.0;
PyTypeObject *pt_TrackerType;
PyObject *pt_perf_counter; /* time.perf_counter, where CLOCK_MONOTONIC is not its clock */

/* Call a callback held in a field: a strong reference first, as the callback may
 * replace the field (sync detection's undo sets on_step = None). */
static int
call_cb(PyObject *cb, PyObject *const *args, size_t n)
{
    Py_INCREF(cb);
    PyObject *r = PyObject_Vectorcall(cb, args, n, NULL);
    Py_DECREF(cb);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *
call_index_t(PyObject *cb, long long index, double t)
{
    PyObject *args[2] = {PyLong_FromLongLong(index), PyFloat_FromDouble(t)};
    PyObject *r = NULL;
    if (args[0] && args[1]) {
        Py_INCREF(cb);
        r = PyObject_Vectorcall(cb, args, 2, NULL);
        Py_DECREF(cb);
    }
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    return r;
}

static void
clear_step(Tracker *s)
{
    s->data = s->bwd = s->opt = 0.0;
    Py_XSETREF(s->phases, Py_NewRef(Py_None));
    s->has_fetch = s->has_bwd = 0;
}

static int
settle(Tracker *s)
{
    s->settled = 1;
    return IS_SET(s->on_settle) ? call_cb(s->on_settle, NULL, 0) : 0;
}

/* No optimizer showed up in time: the weaker source's steps stand as they are. */
static int
release(Tracker *s)
{
    if (settle(s) < 0)
        return -1;
    PyObject *held = s->held ? s->held : Py_None;
    PyObject *it = PyObject_GetIter(held), *step;
    if (it == NULL)
        return -1;
    while ((step = PyIter_Next(it)) != NULL) {
        int rc = call_cb(s->emit, &step, 1);
        Py_DECREF(step);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    PyObject *empty = PyList_New(0);
    if (empty == NULL)
        return -1;
    Py_XSETREF(s->held, empty);
    return 0;
}

static int
item_double(PyObject *seq, Py_ssize_t i, double *out)
{
    PyObject *o = PySequence_GetItem(seq, i);
    if (o == NULL)
        return -1;
    *out = PyFloat_AsDouble(o);
    Py_DECREF(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int
hold(Tracker *s, PyObject *step, double t)
{
    PyObject *held = s->held;
    if (held == NULL || !PyList_Check(held)) {
        PyErr_SetString(PyExc_TypeError, "StepTracker.held must be a list");
        return -1;
    }
    if (PyList_Append(held, step) < 0)
        return -1;
    if (PyList_GET_SIZE(held) >= pt_hold_steps)
        return release(s);
    double first;
    if (item_double(PyList_GET_ITEM(held, 0), 1, &first) < 0)
        return -1;
    return t - first >= pt_hold_s ? release(s) : 0;
}

/* phases[name] = phases.get(name, 0.0) + dt, phases made on first use */
static int
add_phase(Tracker *s, PyObject *name, PyObject *dt)
{
    if (!IS_SET(s->phases)) {
        PyObject *d = PyDict_New();
        if (d == NULL)
            return -1;
        Py_XSETREF(s->phases, d);
    }
    PyObject *phases = Py_NewRef(s->phases), *zero = NULL, *sum = NULL;
    int rc = -1;
    if (!PyDict_Check(phases)) {
        PyErr_SetString(PyExc_TypeError, "StepTracker.phases must be a dict or None");
        goto done;
    }
    PyObject *old = PyDict_GetItemWithError(phases, name);
    if (old == NULL && PyErr_Occurred())
        goto done;
    if (old == NULL && (old = zero = PyFloat_FromDouble(0.0)) == NULL)
        goto done;
    if ((sum = PyNumber_Add(old, dt)) != NULL)
        rc = PyDict_SetItem(phases, name, sum);
done:
    Py_XDECREF(zero);
    Py_XDECREF(sum);
    Py_DECREF(phases);
    return rc;
}

/* A strong source appeared: the held steps were parts of the current step. */
static int
merge_held(Tracker *s)
{
    if (settle(s) < 0)
        return -1;
    PyObject *empty = PyList_New(0);
    if (empty == NULL)
        return -1;
    PyObject *held = s->held ? s->held : Py_NewRef(Py_None); /* steals the old list */
    s->held = empty;
    int rc = -1;
    PyObject *seq = PySequence_Fast(held, "StepTracker.held must be a list");
    if (seq == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        rc = 0;
        goto done;
    }
    PyObject **h = PySequence_Fast_ITEMS(seq);
    PyObject *idx = PySequence_GetItem(h[0], 0);
    if (idx == NULL)
        goto done;
    s->index = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    if ((s->index == -1 && PyErr_Occurred()) || item_double(h[0], 1, &s->start) < 0)
        goto done;
    s->has_start = 1;
    double *acc[3] = {&s->data, &s->bwd, &s->opt};
    for (int f = 0; f < 3; f++) { /* self.data += sum(h[3] for h in held), ... */
        double sum = 0.0, x;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (item_double(h[i], 3 + f, &x) < 0)
                goto done;
            sum += x;
        }
        *acc[f] += sum;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ph = PySequence_GetItem(h[i], 6), *name, *dt;
        if (ph == NULL)
            goto done;
        Py_ssize_t pos = 0;
        if (PyDict_Check(ph)) {
            while (PyDict_Next(ph, &pos, &name, &dt)) {
                if (add_phase(s, name, dt) < 0) {
                    Py_DECREF(ph);
                    goto done;
                }
            }
        }
        Py_DECREF(ph);
    }
    rc = 0;
done:
    Py_XDECREF(seq);
    Py_DECREF(held);
    return rc;
}

static PyObject *
make_step(Tracker *s, double t)
{
    if (s->mode < 0 || s->mode >= PyTuple_GET_SIZE(pt_sources)) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        return NULL;
    }
    PyObject *step = PyTuple_New(8);
    if (step == NULL)
        return NULL;
    PyObject *items[8] = {
        PyLong_FromLongLong(s->index), PyFloat_FromDouble(s->start), PyFloat_FromDouble(t),
        PyFloat_FromDouble(s->data), PyFloat_FromDouble(s->bwd), PyFloat_FromDouble(s->opt),
        Py_NewRef(s->phases ? s->phases : Py_None),
        Py_NewRef(PyTuple_GET_ITEM(pt_sources, s->mode)),
    };
    int ok = 1;
    for (int i = 0; i < 8; i++) {
        ok &= items[i] != NULL;
        PyTuple_SET_ITEM(step, i, items[i]);
    }
    if (!ok)
        Py_CLEAR(step);
    return step;
}

/* End the current step at t and start the next one there. */
int
pt_close(Tracker *s, double t)
{
    if (s->has_start) {
        PyObject *step = make_step(s, t);
        if (step == NULL)
            return -1;
        int rc = s->settled ? call_cb(s->emit, &step, 1) : hold(s, step, t);
        Py_DECREF(step);
        if (rc < 0)
            return -1;
        if (IS_SET(s->on_close)) {
            PyObject *r = call_index_t(s->on_close, s->index, t);
            if (r == NULL)
                return -1;
            Py_DECREF(r);
        }
        if (IS_SET(s->on_step) && s->index >= s->step_hook_at) {
            /* sync detection says when it next needs to run: step_hook_at = r or 0 */
            PyObject *r = call_index_t(s->on_step, s->index, t);
            if (r == NULL)
                return -1;
            int truth = PyObject_IsTrue(r);
            long long at = truth > 0 ? PyLong_AsLongLong(r) : 0;
            Py_DECREF(r);
            if (truth < 0 || (at == -1 && PyErr_Occurred()))
                return -1;
            s->step_hook_at = at;
        }
        s->index++;
    }
    s->start = t;
    s->has_start = 1;
    clear_step(s);
    return 0;
}

int
pt_fetched(Tracker *s, double t0, double t1, int got_batch)
{
    int mode = s->mode;
    if (mode == NONE)
        s->mode = mode = LOADER;
    if (!s->has_start) {
        s->start = t0;
        s->has_start = 1;
    }
    else if ((mode == LOADER && s->has_fetch) || (mode == BACKWARD && s->has_bwd)) {
        if (pt_close(s, t0) < 0)
            return -1;
    }
    s->data += t1 - t0;
    s->last_end = t1;
    if (got_batch && !s->has_fetch) {
        s->has_fetch = 1;
        if (IS_SET(s->on_fetched))
            return call_cb(s->on_fetched, NULL, 0);
    }
    return 0;
}

int
pt_backward(Tracker *s, double t0, double t1)
{
    int mode = s->mode;
    if (mode < BACKWARD)
        s->mode = mode = BACKWARD;
    if (!s->has_start) {
        s->start = t0;
        s->has_start = 1;
    }
    else if (mode == BACKWARD && s->has_bwd) {
        if (pt_close(s, t0) < 0)
            return -1;
    }
    s->bwd += t1 - t0;
    s->has_bwd = 1;
    s->last_end = t1;
    return 0;
}

void
pt_optimizer_pre(Tracker *s, double t0)
{
    s->opt_t0 = t0;
    if (!s->has_start) {
        s->start = t0;
        s->has_start = 1;
    }
}

int
pt_optimizer_post(Tracker *s, unsigned long long opt_id, double t1)
{
    s->opt += t1 - s->opt_t0;
    if (!s->has_primary) {
        s->primary_opt = opt_id;
        s->has_primary = 1;
    }
    if (s->mode < OPTIMIZER) {
        s->mode = OPTIMIZER;
        if (merge_held(s) < 0)
            return -1;
    }
    if (s->mode == OPTIMIZER && opt_id == s->primary_opt)
        return pt_close(s, t1);
    return 0;
}

int
pt_explicit(Tracker *s, double t)
{
    if (s->mode < EXPLICIT) {
        s->mode = EXPLICIT;
        if (merge_held(s) < 0)
            return -1;
    }
    return pt_close(s, t);
}

/* A perftop.phase() span; it also starts the first step if none has. */
int
pt_phase(Tracker *s, PyObject *name, double t0, double t1)
{
    if (!s->has_start) {
        s->start = t0;
        s->has_start = 1;
    }
    PyObject *dt = PyFloat_FromDouble(t1 - t0);
    int rc = dt ? add_phase(s, name, dt) : -1;
    Py_XDECREF(dt);
    return rc;
}

/* At exit: a step left open by a lazy source ends where its last activity did. */
int
pt_flush(Tracker *s)
{
    if (s->has_start &&
        ((s->mode == LOADER && s->has_fetch) || (s->mode == BACKWARD && s->has_bwd))) {
        if (pt_close(s, s->last_end >= s->start ? s->last_end : s->start) < 0)
            return -1;
    }
    return release(s);
}

void
pt_reset(Tracker *s)
{
    s->mode = NONE;
    s->index = 0;
    s->has_start = s->has_primary = 0;
    s->start = s->opt_t0 = s->last_end = 0.0;
    PyObject *empty = PyList_New(0);
    if (empty != NULL) /* else keep the old list: reset() runs after fork, must not fail */
        Py_XSETREF(s->held, empty);
    else
        PyErr_Clear();
    s->settled = 0;
    s->step_hook_at = 0;
    clear_step(s);
}

/* An Exception from the tracker: on_error(where) sees it as sys.exc_info(), as in the
 * Python hooks' except blocks; then it is gone. Anything else (KeyboardInterrupt)
 * propagates, as it would through `except Exception`: returns -1. */
int
pt_report(Tracker *s, const char *where)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyObject *type, *val, *tb, *otype, *oval, *otb;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    if (tb != NULL && val != NULL)
        PyException_SetTraceback(val, tb);
    PyErr_GetExcInfo(&otype, &oval, &otb);
    PyErr_SetExcInfo(type, val, tb);
    if (IS_SET(s->on_error)) {
        PyObject *w = PyUnicode_FromString(where);
        if (w == NULL || call_cb(s->on_error, &w, 1) < 0)
            PyErr_Clear(); /* the reporter failed too: still never reach user code */
        Py_XDECREF(w);
    }
    PyErr_SetExcInfo(otype, oval, otb);
    return 0;
}

/* A subclass (tests break methods on purpose) gets its methods called by name. */
int
pt_call_method(Tracker *s, const char *name, PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *args[4] = {(PyObject *)s, a, b, c}, *r = NULL;
    PyObject *meth = PyUnicode_InternFromString(name);
    if (meth != NULL && a != NULL && b != NULL)
        r = PyObject_VectorcallMethod(meth, args, c ? 4 : 3, NULL);
    Py_XDECREF(meth);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}


/* perftop.hook._speedups, part 2: the StepTracker type and the module (wrappers: part 3).
 *
 * Optional: perftop/hook/impl.py uses it when it imports (and PERFTOP_PURE is not set),
 * else the pure-Python reference in steps.py and torch_patch.py runs. What torch calls
 * per step: HookWrapper objects (the __next__ and backward wrappers: vectorcall, no
 * Python frame) and the tracker's opt_pre_hook / opt_post_hook (METH_FASTCALL).
 */
#include "_tracker.h"

static int
as_double(PyObject *o, double *d)
{
    *d = PyFloat_AsDouble(o);
    return (*d == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *
result(int rc)
{
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

#define TAKES(n, name)                                                                   \
    if (nargs != (n))                                                                    \
        return PyErr_Format(PyExc_TypeError, name "() takes %d arguments (%zd given)", (n), \
                            nargs);

/* -- StepTracker: the methods of steps.StepTracker ------------------------------------ */

static PyObject *
tr_close_m(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t;
    TAKES(1, "close");
    return as_double(a[0], &t) < 0 ? NULL : result(pt_close(s, t));
}

static PyObject *
tr_fetched_m(Tracker *s, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"t0", "t1", "got_batch", NULL};
    double t0, t1;
    PyObject *got = Py_True;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "dd|O:fetched", kwlist, &t0, &t1, &got))
        return NULL;
    int truth = PyObject_IsTrue(got);
    return truth < 0 ? NULL : result(pt_fetched(s, t0, t1, truth));
}

static PyObject *
tr_backward_m(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t0, t1;
    TAKES(2, "backward");
    if (as_double(a[0], &t0) < 0 || as_double(a[1], &t1) < 0)
        return NULL;
    return result(pt_backward(s, t0, t1));
}

static PyObject *
tr_optimizer_pre_m(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t0;
    TAKES(1, "optimizer_pre");
    if (as_double(a[0], &t0) < 0)
        return NULL;
    pt_optimizer_pre(s, t0);
    Py_RETURN_NONE;
}

static PyObject *
tr_optimizer_post_m(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t1;
    TAKES(2, "optimizer_post");
    /* ids compare modulo 2**64: id() of a live object always fits */
    unsigned long long opt_id = PyLong_AsUnsignedLongLongMask(a[0]);
    if ((opt_id == (unsigned long long)-1 && PyErr_Occurred()) || as_double(a[1], &t1) < 0)
        return NULL;
    return result(pt_optimizer_post(s, opt_id, t1));
}

/* torch calls these two directly: global optimizer hooks (opt, args, kwargs). */
static PyObject *
tr_opt_pre_hook(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    pt_optimizer_pre(s, now());
    Py_RETURN_NONE;
}

static PyObject *
tr_opt_post_hook(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t1 = now();
    TAKES(3, "opt_post_hook");
    int rc;
    Py_INCREF(s);
    if (Py_TYPE(s) == pt_TrackerType)
        rc = pt_optimizer_post(s, (unsigned long long)(uintptr_t)a[0], t1);
    else
        rc = pt_call_method(s, "optimizer_post", PyLong_FromVoidPtr(a[0]),
                            PyFloat_FromDouble(t1), NULL);
    if (rc < 0 && pt_report(s, "optimizer post-hook") < 0) {
        Py_DECREF(s);
        return NULL;
    }
    Py_DECREF(s);
    Py_RETURN_NONE;
}

static PyObject *
tr_explicit_m(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t;
    TAKES(1, "explicit");
    return as_double(a[0], &t) < 0 ? NULL : result(pt_explicit(s, t));
}

static PyObject *
tr_phase_m(Tracker *s, PyObject *const *a, Py_ssize_t nargs)
{
    double t0, t1;
    TAKES(3, "phase");
    if (as_double(a[1], &t0) < 0 || as_double(a[2], &t1) < 0)
        return NULL;
    return result(pt_phase(s, a[0], t0, t1));
}

static PyObject *
tr_flush_m(Tracker *s, PyObject *unused)
{
    return result(pt_flush(s));
}

static PyObject *
tr_reset_m(Tracker *s, PyObject *unused)
{
    pt_reset(s);
    Py_RETURN_NONE;
}

static PyMethodDef tr_methods[] = {
    {"close", (PyCFunction)(void (*)(void))tr_close_m, METH_FASTCALL, NULL},
    {"fetched", (PyCFunction)(void (*)(void))tr_fetched_m, METH_VARARGS | METH_KEYWORDS, NULL},
    {"backward", (PyCFunction)(void (*)(void))tr_backward_m, METH_FASTCALL, NULL},
    {"optimizer_pre", (PyCFunction)(void (*)(void))tr_optimizer_pre_m, METH_FASTCALL, NULL},
    {"optimizer_post", (PyCFunction)(void (*)(void))tr_optimizer_post_m, METH_FASTCALL, NULL},
    {"opt_pre_hook", (PyCFunction)(void (*)(void))tr_opt_pre_hook, METH_FASTCALL, NULL},
    {"opt_post_hook", (PyCFunction)(void (*)(void))tr_opt_post_hook, METH_FASTCALL, NULL},
    {"explicit", (PyCFunction)(void (*)(void))tr_explicit_m, METH_FASTCALL, NULL},
    {"phase", (PyCFunction)(void (*)(void))tr_phase_m, METH_FASTCALL, NULL},
    {"flush", (PyCFunction)tr_flush_m, METH_NOARGS, NULL},
    {"reset", (PyCFunction)tr_reset_m, METH_NOARGS, NULL},
    {NULL},
};

#define OBJ(name) {#name, T_OBJECT, offsetof(Tracker, name), 0, NULL}
#define NUM(name, type) {#name, type, offsetof(Tracker, name), 0, NULL}
static PyMemberDef tr_members[] = {
    OBJ(emit), OBJ(on_close), OBJ(on_step), OBJ(on_fetched), OBJ(on_settle), OBJ(on_error),
    OBJ(phases), OBJ(held), NUM(data, T_DOUBLE), NUM(bwd, T_DOUBLE), NUM(opt, T_DOUBLE),
    NUM(opt_t0, T_DOUBLE), NUM(last_end, T_DOUBLE), NUM(index, T_LONGLONG),
    NUM(step_hook_at, T_LONGLONG), NUM(mode, T_INT), NUM(has_fetch, T_BOOL),
    NUM(has_bwd, T_BOOL), NUM(settled, T_BOOL), {NULL},
};

/* start and primary_opt are `float | None` and `int | None` in steps.py */
static PyObject *
get_start(Tracker *s, void *c)
{
    return s->has_start ? PyFloat_FromDouble(s->start) : Py_NewRef(Py_None);
}

static int
set_start(Tracker *s, PyObject *v, void *c)
{
    if (v == NULL || v == Py_None) {
        s->has_start = 0;
        return 0;
    }
    if (as_double(v, &s->start) < 0)
        return -1;
    s->has_start = 1;
    return 0;
}

static PyObject *
get_primary(Tracker *s, void *c)
{
    return s->has_primary ? PyLong_FromUnsignedLongLong(s->primary_opt) : Py_NewRef(Py_None);
}

static int
set_primary(Tracker *s, PyObject *v, void *c)
{
    if (v == NULL || v == Py_None) {
        s->has_primary = 0;
        return 0;
    }
    s->primary_opt = PyLong_AsUnsignedLongLongMask(v);
    if (s->primary_opt == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    s->has_primary = 1;
    return 0;
}

static PyGetSetDef tr_getset[] = {
    {"start", (getter)get_start, (setter)set_start, NULL, NULL},
    {"primary_opt", (getter)get_primary, (setter)set_primary, NULL, NULL},
    {NULL},
};

static int
tr_init(Tracker *s, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"emit", NULL};
    PyObject *emit;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:StepTracker", kwlist, &emit))
        return -1;
    Py_XSETREF(s->emit, Py_NewRef(emit));
    PyObject **cbs[] = {&s->on_close, &s->on_step, &s->on_fetched, &s->on_settle, &s->on_error};
    for (size_t i = 0; i < sizeof cbs / sizeof cbs[0]; i++)
        Py_XSETREF(*cbs[i], Py_NewRef(Py_None));
    pt_reset(s);
    return PyErr_Occurred() ? -1 : 0;
}

static int
tr_traverse(Tracker *s, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(s));
    Py_VISIT(s->emit);
    Py_VISIT(s->on_close);
    Py_VISIT(s->on_step);
    Py_VISIT(s->on_fetched);
    Py_VISIT(s->on_settle);
    Py_VISIT(s->on_error);
    Py_VISIT(s->phases);
    Py_VISIT(s->held);
    return 0;
}

static int
tr_clear(Tracker *s)
{
    Py_CLEAR(s->emit);
    Py_CLEAR(s->on_close);
    Py_CLEAR(s->on_step);
    Py_CLEAR(s->on_fetched);
    Py_CLEAR(s->on_settle);
    Py_CLEAR(s->on_error);
    Py_CLEAR(s->phases);
    Py_CLEAR(s->held);
    return 0;
}

static void
tr_dealloc(Tracker *s)
{
    PyTypeObject *tp = Py_TYPE(s);
    PyObject_GC_UnTrack(s);
    tr_clear(s);
    tp->tp_free((PyObject *)s);
    Py_DECREF(tp);
}

/* A heap type without Py_TPFLAGS_IMMUTABLETYPE: like a Python class, its instances allow
 * __class__ assignment to a subclass (tests break methods that way). */
static PyType_Slot tr_slots[] = {
    {Py_tp_doc, "The C step tracker: same attributes, methods and steps as steps.StepTracker."},
    {Py_tp_init, tr_init},           {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, tr_dealloc},     {Py_tp_traverse, tr_traverse},
    {Py_tp_clear, tr_clear},         {Py_tp_methods, tr_methods},
    {Py_tp_members, tr_members},     {Py_tp_getset, tr_getset},
    {0, NULL},
};

static PyType_Spec tr_spec = {
    "perftop.hook._speedups.StepTracker", sizeof(Tracker), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, tr_slots,
};

/* -- the module ------------------------------------------------------------------------- */

static PyObject *
wrap_next(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    return pt_make_wrapper(a, nargs, pt_next_call);
}

static PyObject *
wrap_backward(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    return pt_make_wrapper(a, nargs, pt_backward_call);
}

static PyObject *
configure(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    TAKES(3, "configure");
    if (!PyTuple_Check(a[0]) || PyTuple_GET_SIZE(a[0]) != NMODES)
        return PyErr_Format(PyExc_ValueError, "sources: a tuple of %d names", NMODES);
    long long steps = PyLong_AsLongLong(a[1]);
    double s;
    if ((steps == -1 && PyErr_Occurred()) || as_double(a[2], &s) < 0)
        return NULL;
    Py_XSETREF(pt_sources, Py_NewRef(a[0]));
    pt_hold_steps = steps;
    pt_hold_s = s;
    Py_RETURN_NONE;
}

static PyObject *
clock_m(PyObject *m, PyObject *unused)
{
    return PyFloat_FromDouble(now());
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(sources, hold_steps, hold_s): steps.py's constants; call before use."},
    {"wrap_next", (PyCFunction)(void (*)(void))wrap_next, METH_FASTCALL,
     "wrap_next(orig, tracker): a DataLoader iterator __next__ that times orig."},
    {"wrap_backward", (PyCFunction)(void (*)(void))wrap_backward, METH_FASTCALL,
     "wrap_backward(orig, tracker): a torch.autograd.backward that times orig."},
    {"clock", clock_m, METH_NOARGS, "The hot path's clock: time.perf_counter()."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "perftop.hook._speedups", NULL, -1, module_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&pt_WrapperType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
#ifndef __linux__
    PyObject *time = PyImport_ImportModule("time");
    pt_perf_counter = time ? PyObject_GetAttrString(time, "perf_counter") : NULL;
    Py_XDECREF(time);
    if (pt_perf_counter == NULL)
        goto fail;
#endif
    pt_sources = Py_BuildValue("(sssss)", "", "loader", "backward", "optimizer", "explicit");
    pt_TrackerType = (PyTypeObject *)PyType_FromSpec(&tr_spec);
    if (pt_sources == NULL || pt_TrackerType == NULL ||
        PyModule_AddObject(m, "StepTracker", Py_NewRef(pt_TrackerType)) < 0 ||
        PyModule_AddObject(m, "HookWrapper", Py_NewRef(&pt_WrapperType)) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}

/* perftop.hook._speedups, part 3: the wrappers torch_patch.py installs around
 * torch.autograd.backward and _BaseDataLoaderIter.__next__ (HookWrapper objects: they
 * call the original, then time it into the C StepTracker, with no Python frame).
 */
#include "_tracker.h"

/* -- HookWrapper: torch.autograd.backward and _BaseDataLoaderIter.__next__ ------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *orig;
    Tracker *tracker;
    PyObject *dict; /* for functools.update_wrapper: __name__, __doc__, __wrapped__ */
} Wrapper;

/* After the original ran (res NULL: it raised): time it into the tracker, keep its
 * outcome. As the Python wrappers' finally blocks: the tracker's errors are reported. */
static PyObject *
after(Wrapper *w, PyObject *res, double t0, int is_next)
{
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    if (res == NULL)
        PyErr_Fetch(&et, &ev, &etb);
    double t1 = now();
    Tracker *s = w->tracker;
    int rc;
    Py_INCREF(s);
    if (Py_TYPE(s) == pt_TrackerType)
        rc = is_next ? pt_fetched(s, t0, t1, res != NULL) : pt_backward(s, t0, t1);
    else
        rc = pt_call_method(s, is_next ? "fetched" : "backward", PyFloat_FromDouble(t0),
                            PyFloat_FromDouble(t1),
                            is_next ? PyBool_FromLong(res != NULL) : NULL);
    if (rc < 0 && pt_report(s, is_next ? "DataLoader.__next__" : "backward") < 0) {
        /* not an Exception (KeyboardInterrupt): it wins, as out of a finally block */
        Py_XDECREF(res);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(etb);
        res = NULL;
    }
    else if (res == NULL)
        PyErr_Restore(et, ev, etb);
    Py_DECREF(s);
    return res;
}

PyObject *
pt_next_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Wrapper *w = (Wrapper *)self;
    double t0 = now();
    return after(w, PyObject_Vectorcall(w->orig, args, nargsf, kwnames), t0, 1);
}

PyObject *
pt_backward_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Wrapper *w = (Wrapper *)self;
    double t0 = now();
    return after(w, PyObject_Vectorcall(w->orig, args, nargsf, kwnames), t0, 0);
}

/* Bound like a function when set on a class. With Py_TPFLAGS_METHOD_DESCRIPTOR the
 * for loop's tp_iternext slot calls us unbound, (iterator,) as args: no method object. */
static PyObject *
wrapper_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int
wrapper_traverse(Wrapper *w, visitproc visit, void *arg)
{
    Py_VISIT(w->orig);
    Py_VISIT(w->tracker);
    Py_VISIT(w->dict);
    return 0;
}

static int
wrapper_clear(Wrapper *w)
{
    Py_CLEAR(w->orig);
    Py_CLEAR(w->tracker);
    Py_CLEAR(w->dict);
    return 0;
}

static void
wrapper_dealloc(Wrapper *w)
{
    PyObject_GC_UnTrack(w);
    wrapper_clear(w);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

PyTypeObject pt_WrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "perftop.hook._speedups.HookWrapper",
    .tp_basicsize = sizeof(Wrapper),
    .tp_dealloc = (destructor)wrapper_dealloc,
    .tp_vectorcall_offset = offsetof(Wrapper, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Calls the original, times it into a StepTracker; perftop's errors go to "
              "its on_error.",
    .tp_traverse = (traverseproc)wrapper_traverse,
    .tp_clear = (inquiry)wrapper_clear,
    .tp_getset = wrapper_getset,
    .tp_descr_get = wrapper_get,
    .tp_dictoffset = offsetof(Wrapper, dict),
};

PyObject *
pt_make_wrapper(PyObject *const *a, Py_ssize_t nargs, vectorcallfunc call)
{
    if (nargs != 2 || !PyObject_TypeCheck(a[1], pt_TrackerType))
        return PyErr_Format(PyExc_TypeError, "expected (original, StepTracker)");
    Wrapper *w = PyObject_GC_New(Wrapper, &pt_WrapperType);
    if (w == NULL)
        return NULL;
    w->vectorcall = call;
    w->orig = Py_NewRef(a[0]);
    w->tracker = (Tracker *)Py_NewRef(a[1]);
    w->dict = NULL;
    PyObject_GC_Track(w);
    return (PyObject *)w;
}


/* C helpers of the compiled step tracker (perftop.hook._steps_fast). No tracker logic
 * lives here: that is steps.py, the one source. Primitives Cython cannot express:
 *
 *   perftop_now()              perf_counter's clock read in C (no Python call, no float;
 *       on Linux clock_gettime(CLOCK_MONOTONIC) itself, perf_counter's clock there).
 *   perftop_passthrough(o, tr, d, where)  a callable that calls `o` with its caller's
 *       arguments as they came (vectorcall: no tuple or dict is built, which costs a
 *       Python-level *args, **kwargs wrapper 2-3 us a step in a real loop), then the C
 *       function d(tr, t0, t1, ok, first_arg): steps.py's _backward_done or _next_done,
 *       compiled, called directly. Its plain-Python twin is passthrough.py.
 *
 *   perftop_passthrough_outer(...)  the same, whose d runs for the outermost call only
 *       (one depth for all of them: a backward inside another, reentrant checkpointing,
 *       is part of the outer one's time). Its plain-Python twin is passthrough_outer.
 *
 *   perftop_thread()  the calling thread's identity, as threading.get_ident() gives it.
 *
 *   perftop_hook(tr, f, where)  a callable for torch's optimizer hooks, called as
 *       h(a, b, c): the C function f(tr, a, b, c) directly (steps.py's _opt_pre or
 *       _opt_post), with no bound method and no argument parsing on the way. Its
 *       plain-Python twin is passthrough.hook.
 *
 *   perftop_refers(ref, obj)  whether the weak reference `ref` (None: no) points at `obj`,
 *       read without calling it. Its plain-Python twin is passthrough.refers.
 *
 *   perftop_grad(fallback)  whether autograd records: c10::GradMode::is_enabled() read
 *       in C when perftop_grad_resolve(libc10_path) found it (and torch_patch.py checked
 *       it against torch.is_grad_enabled()), else fallback() (torch.is_grad_enabled), which
 *       costs as much as the rest of a batch's bookkeeping.
 *
 *   perftop_ring_ptr(buf)  the address of a writable buffer's bytes (the ring of steps,
 *       ring.py); the buffer object, kept by the tracker, keeps the memory. Its plain-Python
 *       twin returns the buffer itself (a memoryview).
 *
 *   perftop_ring_store(p, at, pid, index, t0, t1, data, bwd, opt, src)  one step record
 *       at p + at in the wire's STEP_RECORD layout ("<iqdddddB", 53 bytes, little-endian),
 *       stored field by field without a Python object. Its plain-Python twin is
 *       STEP_RECORD.pack_into.
 *
 * An error of `d` or `f` is caught here, not in them (a try block in the compiled code
 * costs on every call): reported with tr._error(where) and dropped, while an interrupt
 * is passed on. Nothing of perftop's may reach the caller, whose result or exception is
 * returned as it was. */
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <dlfcn.h>
#endif
#ifdef __linux__
#include <pthread.h>
#include <time.h>
#endif

static double perftop_now(void) {
#if defined(__linux__)
    /* What _PyTime_GetPerfCounter reads on Linux, in the same units and rounding as
     * time.perf_counter(), without its overflow checks (~40 instructions a read). */
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec) / 1e9;
#elif PY_VERSION_HEX >= 0x030D0000
    PyTime_t t;
    (void)PyTime_PerfCounterRaw(&t);
    return PyTime_AsSecondsDouble(t);
#else
    return _PyTime_AsSecondsDouble(_PyTime_GetPerfCounter());
#endif
}

typedef int (*perftop_done_fn)(PyObject *target, double t0, double t1, int ok,
                               PyObject *first); /* -1 with an error set */
typedef PyObject *(*perftop_hook_fn)(PyObject *target, PyObject *a, PyObject *b, PyObject *c);

/* One object type for both callables: `orig` and `done` for a pass-through, `hook` for a
 * hook; the per-object vectorcall says which. */
typedef struct {
    PyObject_HEAD
    PyObject *orig;
    PyObject *target;
    PyObject *where; /* what to tell target._error() */
    perftop_done_fn done;
    perftop_hook_fn hook; /* a hook's function */
    int outer; /* done for the outermost call only (perftop_depth) */
    PyObject *dict; /* functools.update_wrapper's __name__, __doc__, __wrapped__, ... */
    vectorcallfunc vectorcall;
} PerftopCall;

/* perftop's function failed: 1 for an interrupt (KeyboardInterrupt, SystemExit), left
 * set to pass on; any other error is reported with target._error(where) and cleared. */
static int perftop_failed(PerftopCall *p) {
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return 1;
    PyErr_Clear();
    PyObject *r = PyObject_CallMethod(p->target, "_error", "O", p->where);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return 1;
    PyErr_Clear();
    return 0;
}

static long perftop_depth = 0; /* outermost-only calls in progress (under the GIL) */

static unsigned long perftop_thread(void) {
#if defined(__linux__)
    return (unsigned long)pthread_self(); /* what PyThread_get_thread_ident returns there,
                                           * without a call into libpython on the way */
#else
    return PyThread_get_thread_ident();
#endif
}

static PyObject *perftop_pass_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    PerftopCall *p = (PerftopCall *)self;
    double t0 = perftop_now();
    if (p->outer)
        perftop_depth++;
    PyObject *res = PyObject_Vectorcall(p->orig, args, nargsf, kwnames);
    double t1 = perftop_now();
    if (p->outer && --perftop_depth > 0)
        return res; /* inside another: its time is the outer call's */
    PyObject *first = PyVectorcall_NARGS(nargsf) > 0 ? args[0] : Py_None;
    if (res != NULL) {
        if (p->done(p->target, t0, t1, 1, first) < 0 && perftop_failed(p)) {
            Py_DECREF(res);
            return NULL;
        }
    } else {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (p->done(p->target, t0, t1, 0, first) < 0 && perftop_failed(p))
            PyErr_Clear(); /* the call's own exception goes first */
        PyErr_Restore(et, ev, tb);
    }
    return res;
}

static PyObject *perftop_hook_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    PerftopCall *h = (PerftopCall *)self;
    if (PyVectorcall_NARGS(nargsf) == 3 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        PyObject *res = h->hook(h->target, args[0], args[1], args[2]);
        if (res != NULL)
            return res;
        if (perftop_failed(h))
            return NULL;
    }
    Py_RETURN_NONE; /* after an error, or a call of another shape: no effect */
}

/* Set as a class attribute (a DataLoader iterator's __next__) it binds like a function;
 * the for loop's slot calls it unbound with the iterator first (METHOD_DESCRIPTOR). */
static PyObject *perftop_call_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *perftop_call_repr(PyObject *self) {
    PerftopCall *p = (PerftopCall *)self;
    if (p->orig == NULL)
        return PyUnicode_FromString("<perftop hook>");
    return PyUnicode_FromFormat("<perftop pass-through of %R>", p->orig);
}

static int perftop_call_traverse(PyObject *self, visitproc visit, void *arg) {
    PerftopCall *p = (PerftopCall *)self;
    Py_VISIT(p->orig);
    Py_VISIT(p->target);
    Py_VISIT(p->where);
    Py_VISIT(p->dict);
    return 0;
}

static int perftop_call_clear(PyObject *self) {
    PerftopCall *p = (PerftopCall *)self;
    Py_CLEAR(p->orig);
    Py_CLEAR(p->target);
    Py_CLEAR(p->where);
    Py_CLEAR(p->dict);
    return 0;
}

static void perftop_call_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    perftop_call_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* copy.deepcopy() of a config that holds one (dynamo's ignore_logging_functions): itself,
 * as for a function. */
static PyObject *perftop_call_self(PyObject *self, PyObject *Py_UNUSED(arg)) {
    Py_INCREF(self);
    return self;
}

static PyMethodDef perftop_call_methods[] = {
    {"__copy__", perftop_call_self, METH_NOARGS, NULL},
    {"__deepcopy__", perftop_call_self, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef perftop_call_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PerftopCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perftop.hook._steps_fast.call",
    .tp_basicsize = sizeof(PerftopCall),
    .tp_dealloc = perftop_call_dealloc,
    .tp_vectorcall_offset = offsetof(PerftopCall, vectorcall),
    .tp_repr = perftop_call_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_traverse = perftop_call_traverse,
    .tp_clear = perftop_call_clear,
    .tp_getset = perftop_call_getset,
    .tp_methods = perftop_call_methods,
    .tp_descr_get = perftop_call_get,
    .tp_dictoffset = offsetof(PerftopCall, dict),
    .tp_free = PyObject_GC_Del,
};

static PyObject *perftop_call_new(PyObject *orig, PyObject *target, PyObject *where,
                                   vectorcallfunc call) {
    if (!(PerftopCallType.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&PerftopCallType) < 0)
        return NULL;
    PerftopCall *p = PyObject_GC_New(PerftopCall, &PerftopCallType);
    if (p == NULL)
        return NULL;
    Py_XINCREF(orig);
    Py_INCREF(target);
    Py_INCREF(where);
    p->orig = orig;
    p->target = target;
    p->where = where;
    p->done = NULL;
    p->hook = NULL;
    p->outer = 0;
    p->dict = NULL;
    p->vectorcall = call;
    PyObject_GC_Track((PyObject *)p);
    return (PyObject *)p;
}

static PyObject *perftop_passthrough(PyObject *orig, PyObject *target, perftop_done_fn done,
                                     PyObject *where) {
    PyObject *p = perftop_call_new(orig, target, where, perftop_pass_call);
    if (p != NULL)
        ((PerftopCall *)p)->done = done;
    return p;
}

static PyObject *perftop_passthrough_outer(PyObject *orig, PyObject *target,
                                           perftop_done_fn done, PyObject *where) {
    PyObject *p = perftop_passthrough(orig, target, done, where);
    if (p != NULL)
        ((PerftopCall *)p)->outer = 1;
    return p;
}

static PyObject *perftop_hook(PyObject *target, perftop_hook_fn fn, PyObject *where) {
    PyObject *h = perftop_call_new(NULL, target, where, perftop_hook_call);
    if (h != NULL)
        ((PerftopCall *)h)->hook = fn;
    return h;
}

/* 1: `ref` is a weak reference to `obj` (a reference to a live object); 0: it is None, or
 * to another or a freed object; -1: calling a reference of another type raised. */
static int perftop_refers(PyObject *ref, PyObject *obj) {
    if (ref == Py_None)
        return 0;
    if (PyWeakref_CheckRefExact(ref)) {
#if PY_VERSION_HEX >= 0x030D0000
        PyObject *o;
        if (PyWeakref_GetRef(ref, &o) < 0)
            return -1;
        Py_XDECREF(o); /* only the address is compared, while the caller holds `obj` */
        return o == obj;
#else
        return PyWeakref_GET_OBJECT(ref) == obj;
#endif
    }
    PyObject *o = PyObject_CallNoArgs(ref);
    if (o == NULL)
        return -1;
    Py_DECREF(o);
    return o == obj;
}

/* -- perftop_grad ----------------------------------------------------------------------- */
typedef _Bool (*perftop_grad_fn)(void);
static perftop_grad_fn perftop_grad_c = NULL;

/* Looks the function up in torch's already-loaded libc10 (never loads a library). */
static int perftop_grad_resolve(PyObject *path) {
#ifndef _WIN32
    const char *p = PyUnicode_AsUTF8(path);
    if (p == NULL) {
        PyErr_Clear();
        return 0;
    }
    void *lib = dlopen(p, RTLD_LAZY | RTLD_NOLOAD);
    if (lib != NULL)
        perftop_grad_c = (perftop_grad_fn)dlsym(lib, "_ZN3c108GradMode10is_enabledEv");
#else
    (void)path;
#endif
    return perftop_grad_c != NULL;
}

static void perftop_grad_forget(void) { perftop_grad_c = NULL; }

static int perftop_grad(PyObject *fallback) {
    if (perftop_grad_c != NULL)
        return perftop_grad_c() ? 1 : 0;
    PyObject *r = PyObject_CallNoArgs(fallback);
    if (r == NULL)
        return -1;
    int v = PyObject_IsTrue(r);
    Py_DECREF(r);
    return v;
}

static char *perftop_ring_ptr(PyObject *buf) {
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    char *p = (char *)view.buf;
    PyBuffer_Release(&view); /* `buf` (a memoryview of the mapping) keeps the memory */
    return p;
}

static void perftop_le(char *to, const void *from, size_t n) {
#if PY_LITTLE_ENDIAN
    memcpy(to, from, n);
#else
    for (size_t i = 0; i < n; i++)
        to[i] = ((const char *)from)[n - 1 - i];
#endif
}

static void perftop_ring_store(char *p, long long at, long long pid, double index, double t0,
                               double t1, double data, double bwd, double opt, double src) {
    char *r = p + at;
    int32_t pid32 = (int32_t)pid;
    int64_t index64 = (int64_t)index;
    unsigned char code = (unsigned char)src;
    perftop_le(r, &pid32, 4);
    perftop_le(r + 4, &index64, 8);
    perftop_le(r + 12, &t0, 8);
    perftop_le(r + 20, &t1, 8);
    perftop_le(r + 28, &data, 8);
    perftop_le(r + 36, &bwd, 8);
    perftop_le(r + 44, &opt, 8);
    r[52] = (char)code;
}

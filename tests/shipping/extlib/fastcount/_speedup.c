#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *triple(PyObject *self, PyObject *arg) {
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(3 * v);
}

static PyMethodDef methods[] = {{"triple", triple, METH_O, "3 * v"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_speedup", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedup(void) { return PyModule_Create(&mod); }

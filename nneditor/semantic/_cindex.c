/* The graph index's adjacency maps in C (optional; nneditor/platform/compiled.py).
 *
 * semantic/graph_index.GraphIndex maps every value to the node producing it and the nodes
 * consuming it. On a 50k-node export the Python loop costs ~0.07 s, half of the whole
 * hierarchy; the same dictionary operations without the interpreter take a fraction of it.
 * The Python loop stays the reference (tests compare the two maps).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A value name that counts: a non-empty str, or anything else that is true (as `if name:`). */
static inline int
named(PyObject *name)
{
    if (PyUnicode_CheckExact(name))
        return PyUnicode_GET_LENGTH(name) > 0;
    return PyObject_IsTrue(name);
}

/* adjacency(nodes) -> (producer, consumers)
 * producer: value -> index of the last node listing it as an output;
 * consumers: value -> indexes of the nodes listing it as an input, once per listing. */
static PyObject *
adjacency(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "nodes must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *inputs_key = PyUnicode_InternFromString("inputs");
    PyObject *outputs_key = PyUnicode_InternFromString("outputs");
    PyObject *producer = PyDict_New(), *consumers = PyDict_New(), *result = NULL;
    if (inputs_key == NULL || outputs_key == NULL || producer == NULL || consumers == NULL)
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL)
            goto done;
        for (int side = 0; side < 2; side++) {
            PyObject *names = PyObject_GetAttr(node, side ? inputs_key : outputs_key);
            PyObject *fast = names ? PySequence_Fast(names, "a node's values must be a sequence")
                                   : NULL;
            Py_XDECREF(names);
            if (fast == NULL) {
                Py_DECREF(index);
                goto done;
            }
            Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
            for (Py_ssize_t k = 0; k < n; k++) {
                PyObject *name = PySequence_Fast_GET_ITEM(fast, k);
                int ok = named(name);
                if (ok < 0)
                    goto fail_value;
                if (!ok)
                    continue;
                if (!side) {
                    if (PyDict_SetItem(producer, name, index) < 0)
                        goto fail_value;
                    continue;
                }
                PyObject *users = PyDict_GetItemWithError(consumers, name); /* borrowed */
                if (users != NULL) {
                    if (PyList_Append(users, index) < 0)
                        goto fail_value;
                    continue;
                }
                if (PyErr_Occurred())
                    goto fail_value;
                users = PyList_New(1);
                if (users == NULL)
                    goto fail_value;
                PyList_SET_ITEM(users, 0, Py_NewRef(index));
                int rc = PyDict_SetItem(consumers, name, users);
                Py_DECREF(users);
                if (rc < 0)
                    goto fail_value;
            }
            Py_DECREF(fast);
            continue;
        fail_value:
            Py_DECREF(fast);
            Py_DECREF(index);
            goto done;
        }
        Py_DECREF(index);
    }
    result = PyTuple_Pack(2, producer, consumers);
done:
    Py_XDECREF(inputs_key);
    Py_XDECREF(outputs_key);
    Py_XDECREF(producer);
    Py_XDECREF(consumers);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"adjacency", adjacency, METH_O, "(producer, consumers) maps of a node list."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cindex", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__cindex(void)
{
    return PyModule_Create(&module);
}

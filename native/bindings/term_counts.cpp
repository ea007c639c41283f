// latch._native.TermCounts: the episode index's term dictionary and the open episode's term counts (the
// reference is latch/hotpaths/_py.py `TermCounts`; tests/parity/test_term_counts_parity.py compares them).
//
// Terms are keyed by their PEP 393 storage (kind, code units): CPython keeps every str in its canonical
// kind, so two equal strs have the same kind and the same code units, lone surrogates included (no UTF-8
// conversion anywhere). A term scanned from ASCII text is a 1-byte key like the equal str. Every call
// touches Python objects (it takes strs, makes a str for a new term) and is bounded by one event's text,
// so none releases the GIL.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "latch/terms.hpp"

namespace py = pybind11;

PyObject* ascii_term_str(const char* w, std::size_t n);  // module.cpp: the str ascii_terms gives the term

namespace {

struct Key {
    const void* data;
    std::size_t length;  // in code units
    unsigned kind;       // bytes per code unit: 1, 2 or 4
};

Key key_of(PyObject* s) {
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) != 0) {
        throw py::error_already_set();
    }
#endif
    return Key{PyUnicode_DATA(s), static_cast<std::size_t>(PyUnicode_GET_LENGTH(s)),
               static_cast<unsigned>(PyUnicode_KIND(s))};
}

std::uint64_t hash_of(const Key& k) {
    const auto* p = static_cast<const unsigned char*>(k.data);
    std::uint64_t h = 1469598103934665603ULL ^ k.kind;  // FNV-1a over the code units' bytes, folded
    for (std::size_t j = 0, n = k.length * k.kind; j < n; ++j) {
        h = (h ^ p[j]) * 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

class TermCounts {
public:
    TermCounts() = default;
    TermCounts(const TermCounts&) = delete;
    TermCounts& operator=(const TermCounts&) = delete;
    ~TermCounts() {
        for (PyObject* t : terms_) {
            Py_DECREF(t);
        }
    }

    void add(const py::handle& terms) {
        const py::object seq = py::reinterpret_steal<py::object>(
            PySequence_Fast(terms.ptr(), "TermCounts.add: terms must be an iterable of str"));
        if (!seq) {
            throw py::error_already_set();
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
        PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
        for (Py_ssize_t i = 0; i < n; ++i) {
            PyObject* t = items[i];
            if (!PyUnicode_Check(t)) {
                throw py::type_error("TermCounts.add: term " + std::to_string(i) + " must be str, not " +
                                     Py_TYPE(t)->tp_name);
            }
            const Key k = key_of(t);
            count(intern(k, hash_of(k), t));
        }
    }

    bool add_text(const py::handle& text, Py_ssize_t limit) {
        PyObject* s = text.ptr();
        if (!PyUnicode_Check(s)) {
            throw py::type_error(std::string("TermCounts.add_text: text must be str, not ") + Py_TYPE(s)->tp_name);
        }
        if (limit < 0) {
            throw py::value_error("TermCounts.add_text: limit must be >= 0");
        }
        if (!PyUnicode_IS_ASCII(s)) {
            return false;
        }
        const Py_ssize_t n = std::min(PyUnicode_GET_LENGTH(s), limit);
        latch::for_each_ascii_term(static_cast<const unsigned char*>(PyUnicode_DATA(s)), static_cast<std::size_t>(n),
                                   [&](const char* w, std::size_t len) {
                                       const Key k{w, len, 1};
                                       count(intern(k, hash_of(k), nullptr));
                                   });
        return true;
    }

    py::list chosen(const py::handle& topic, Py_ssize_t k) {
        if (k < 0) {
            throw py::value_error("TermCounts.chosen: k must be >= 0");
        }
        const py::object seq = py::reinterpret_steal<py::object>(
            PySequence_Fast(topic.ptr(), "TermCounts.chosen: topic must be an iterable of str"));
        if (!seq) {
            throw py::error_already_set();
        }
        const auto want = static_cast<std::size_t>(k);
        std::vector<std::int32_t> picked;
        std::vector<char> taken(episode_ids_.size(), 0);
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
        PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
        for (Py_ssize_t i = 0; i < n && picked.size() < want; ++i) {
            PyObject* t = items[i];
            const std::int32_t id = PyUnicode_Check(t) ? find(key_of(t)) : -1;
            const std::int32_t at = id >= 0 ? position_[static_cast<std::size_t>(id)] : -1;
            if (at < 0) {
                throw py::value_error("TermCounts.chosen: topic term " + std::to_string(i) + " (of " +
                                      std::to_string(n) + ") was not counted in this episode");
            }
            if (!taken[static_cast<std::size_t>(at)]) {
                taken[static_cast<std::size_t>(at)] = 1;
                picked.push_back(id);
            }
        }
        if (picked.size() < want) {
            // the episode's terms, most counted first, ties in first-sighting order; the first want +
            // picked.size() of them hold every term still picked
            std::vector<std::int32_t> order(episode_ids_.size());
            for (std::size_t i = 0; i < order.size(); ++i) {
                order[i] = static_cast<std::int32_t>(i);
            }
            const std::size_t head = std::min(order.size(), want + picked.size());
            std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(head), order.end(),
                              [&](std::int32_t a, std::int32_t b) {
                                  const std::int64_t ca = episode_counts_[static_cast<std::size_t>(a)];
                                  const std::int64_t cb = episode_counts_[static_cast<std::size_t>(b)];
                                  return ca != cb ? ca > cb : a < b;
                              });
            for (std::size_t i = 0; i < head && picked.size() < want; ++i) {
                const auto at = static_cast<std::size_t>(order[i]);
                if (!taken[at]) {
                    picked.push_back(episode_ids_[at]);
                }
            }
        }
        py::list out(picked.size());
        for (std::size_t i = 0; i < picked.size(); ++i) {
            PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), PyLong_FromLong(picked[i]));
        }
        return out;
    }

    void new_episode() {
        for (const std::int32_t id : episode_ids_) {
            position_[static_cast<std::size_t>(id)] = -1;
        }
        episode_ids_.clear();
        episode_counts_.clear();
    }

    py::object term_id(const py::handle& term) const {
        if (!PyUnicode_Check(term.ptr())) {
            return py::none();
        }
        const std::int32_t id = find(key_of(term.ptr()));
        return id < 0 ? py::object(py::none()) : py::object(py::int_(id));
    }

    std::size_t size() const { return terms_.size(); }

    py::dict ids() const {
        py::dict out;
        for (std::size_t i = 0; i < terms_.size(); ++i) {
            out[py::handle(terms_[i])] = py::int_(i);
        }
        return out;
    }

private:
    static bool equal(PyObject* t, const Key& k) {
        return static_cast<std::size_t>(PyUnicode_GET_LENGTH(t)) == k.length &&
               static_cast<unsigned>(PyUnicode_KIND(t)) == k.kind &&
               std::memcmp(PyUnicode_DATA(t), k.data, k.length * k.kind) == 0;
    }

    std::int32_t find(const Key& k) const {
        const std::uint64_t h = hash_of(k);
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
            const std::int32_t id = slots_[i];
            if (id < 0) {
                return -1;
            }
            if (hashes_[static_cast<std::size_t>(id)] == h && equal(terms_[static_cast<std::size_t>(id)], k)) {
                return id;
            }
        }
    }

    // The id of the term `k` (hash `h`), a new one in first-sighting order when it is new: `obj` is its str
    // (or nullptr: an ASCII term scanned from a text, whose str comes from ascii_term_str).
    std::int32_t intern(const Key& k, std::uint64_t h, PyObject* obj) {
        std::size_t mask = slots_.size() - 1;
        std::size_t i = static_cast<std::size_t>(h) & mask;
        for (std::int32_t id = slots_[i]; id >= 0; id = slots_[i]) {
            if (hashes_[static_cast<std::size_t>(id)] == h && equal(terms_[static_cast<std::size_t>(id)], k)) {
                return id;
            }
            i = (i + 1) & mask;
        }
        if (obj == nullptr) {  // the str ascii_terms hands out for it: one object for both
            obj = ascii_term_str(static_cast<const char*>(k.data), k.length);
            if (obj == nullptr) {
                throw py::error_already_set();
            }
        } else {
            Py_INCREF(obj);
        }
        const auto id = static_cast<std::int32_t>(terms_.size());
        terms_.push_back(obj);
        hashes_.push_back(h);
        position_.push_back(-1);
        if (2 * terms_.size() > slots_.size()) {
            grow();
        } else {
            slots_[i] = id;
        }
        return id;
    }

    void grow() {
        std::vector<std::int32_t> grown(2 * slots_.size(), -1);
        const std::size_t mask = grown.size() - 1;
        for (std::size_t id = 0; id < terms_.size(); ++id) {
            std::size_t i = static_cast<std::size_t>(hashes_[id]) & mask;
            while (grown[i] >= 0) {
                i = (i + 1) & mask;
            }
            grown[i] = static_cast<std::int32_t>(id);
        }
        slots_.swap(grown);
    }

    void count(std::int32_t id) {
        std::int32_t& at = position_[static_cast<std::size_t>(id)];
        if (at < 0) {
            at = static_cast<std::int32_t>(episode_ids_.size());
            episode_ids_.push_back(id);
            episode_counts_.push_back(1);
        } else {
            ++episode_counts_[static_cast<std::size_t>(at)];
        }
    }

    std::vector<PyObject*> terms_;                              // by id (strong references)
    std::vector<std::uint64_t> hashes_;                         // by id
    std::vector<std::int32_t> position_;                        // by id: its index in episode_ids_, or -1
    std::vector<std::int32_t> slots_ = std::vector<std::int32_t>(1024, -1);  // open addressing: ids
    std::vector<std::int32_t> episode_ids_;                     // the open episode's terms, first sighting first
    std::vector<std::int64_t> episode_counts_;                  // their counts
};

}  // namespace

void bind_term_counts(py::module_& m) {
    py::class_<TermCounts>(m, "TermCounts",
                           "The episode index's term dictionary and the open episode's term counts (see "
                           "latch.hotpaths._py.TermCounts).")
        .def(py::init<>())
        .def("add", &TermCounts::add, py::arg("terms"), "Count each str of ``terms``, in order.")
        .def("add_text", &TermCounts::add_text, py::arg("text"), py::arg("limit"),
             "Count the terms of ``text[:limit]`` when ``text`` is ASCII (True); False (nothing counted) when not.")
        .def("chosen", &TermCounts::chosen, py::arg("topic"), py::arg("k"),
             "Term ids the open episode keeps: ``topic``'s first, then the most counted (ties: first seen).")
        .def("new_episode", &TermCounts::new_episode, "Start a new open episode (its counts empty).")
        .def("term_id", &TermCounts::term_id, py::arg("term"), "The id of ``term``, or None.")
        .def("ids", &TermCounts::ids, "The term dictionary: term -> id, in id order.")
        .def("__len__", &TermCounts::size);
}

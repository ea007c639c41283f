// latch._native: with term_counts.cpp, the only files that see Python. It reads arguments (str code
// points straight from PEP 393 storage, so lone surrogates need no special case;
// int64 arrays through the buffer protocol), allocates every output, then
// releases the GIL around each loop and touches no Python object until it takes
// the GIL back. Exceptions: suffix_start on a list or tuple bisects the items
// in place (O(log n) reads of Python ints, which need the GIL) instead of
// copying the whole list; ascii_terms and ascii_path_runs make their objects as
// they scan; ascii_command_classes keeps the GIL for one short, bounded scan.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "latch/budget.hpp"
#include "latch/estimate.hpp"
#include "latch/fts_prepare.hpp"
#include "latch/latch.h"
#include "latch/scoring.hpp"
#include "latch/terms.hpp"

namespace py = pybind11;

void bind_term_counts(py::module_& m);  // term_counts.cpp
void bind_canonical_fields(py::module_& m);  // canonical_json.cpp
PyObject* ascii_term_str(const char* w, std::size_t n);

namespace {

using Int64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// The GIL released for one scope, like py::gil_scoped_release, except that taking it back may end the
// thread: when the interpreter is shutting down, CPython ends a daemon thread that asks for the GIL with
// pthread_exit, a forced unwind through this destructor. A noexcept destructor (pybind11's) turns that
// into std::terminate and aborts the whole process; this one lets the unwind pass (pybind11's dispatcher
// rethrows abi::__forced_unwind), so the daemon thread just ends.
class GilReleased {
public:
    GilReleased() : state_(PyEval_SaveThread()) {}
    ~GilReleased() noexcept(false) { PyEval_RestoreThread(state_); }
    GilReleased(const GilReleased&) = delete;
    GilReleased& operator=(const GilReleased&) = delete;

private:
    PyThreadState* state_;
};

// A str's PEP 393 storage (valid while the str is alive). `what` names the argument
// in the TypeError; `item` >= 0 adds its index.
latch::TextView text_of(PyObject* s, const char* what, Py_ssize_t item = -1) {
    if (!PyUnicode_Check(s)) {
        const std::string where = item >= 0 ? " " + std::to_string(item) : std::string();
        throw py::type_error(std::string(what) + where + " must be str, not " + Py_TYPE(s)->tp_name);
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) != 0) {
        throw py::error_already_set();
    }
#endif
    return latch::TextView{PyUnicode_DATA(s), static_cast<std::size_t>(PyUnicode_GET_LENGTH(s)),
                           static_cast<unsigned>(PyUnicode_KIND(s))};
}

// The same ValueError as the reference for anything but a known profile name.
latch::Profile profile_of(const py::handle& profile) {
    if (PyUnicode_Check(profile.ptr())) {
        Py_ssize_t n = 0;
        const char* name = PyUnicode_AsUTF8AndSize(profile.ptr(), &n);
        latch::Profile p;
        if (name != nullptr && latch::parse_profile(name, static_cast<std::size_t>(n), &p)) {
            return p;
        }
        PyErr_Clear();
    }
    std::string known;
    for (const char* name : latch::kProfileNames) {
        known += known.empty() ? name : std::string(", ") + name;
    }
    throw py::value_error("unknown estimator profile " + py::repr(profile).cast<std::string>() + "; known: " + known);
}

std::int64_t estimate_tokens(const py::handle& text, const py::handle& profile) {
    const latch::Profile p = profile_of(profile);
    const latch::TextView t = text_of(text.ptr(), "estimate_tokens: text");
    const GilReleased released;
    return latch::estimate_view(t, p);
}

py::array_t<std::int64_t> estimate_tokens_batch(const py::handle& texts, const py::handle& profile) {
    const latch::Profile p = profile_of(profile);
    // PySequence_Fast keeps every item alive (a list or tuple as is, any other iterable copied).
    const py::object seq = py::reinterpret_steal<py::object>(
        PySequence_Fast(texts.ptr(), "estimate_tokens_batch: texts must be an iterable of str"));
    if (!seq) {
        throw py::error_already_set();
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
    PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
    std::vector<latch::TextView> views;
    views.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        views.push_back(text_of(items[i], "estimate_tokens_batch: item", i));
    }
    py::array_t<std::int64_t> out(n);
    std::int64_t* dst = out.mutable_data();
    {
        const GilReleased released;
        latch::estimate_batch(views.data(), views.size(), p, dst);
    }
    return out;
}

// A Python int as a 128-bit value; ints beyond int64 become +-2^100, which
// orders exactly like the true value against any int64 difference.
latch::wide_t wide_of(PyObject* v, bool* failed) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0) {
        return static_cast<latch::wide_t>(overflow) << 100;
    }
    if (x == -1 && PyErr_Occurred()) {
        *failed = true;
    }
    return x;
}

bool is_int64_buffer(const Py_buffer& view) {
    if (view.ndim != 1 || view.itemsize != 8 || view.format == nullptr) {
        return false;
    }
    std::string f(view.format);
    if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) {
        f.erase(0, 1);
    }
    return f == "q" || f == "l";
}

std::int64_t suffix_start(const py::handle& prefix_sums, const py::handle& budget_obj) {
    bool failed = false;
    const latch::wide_t budget = wide_of(budget_obj.ptr(), &failed);
    if (failed) {
        throw py::error_already_set();
    }
    PyObject* obj = prefix_sums.ptr();
    if (PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) {
        // O(log n) probes straight into the list; reading items needs the GIL.
        PyObject** items = PySequence_Fast_ITEMS(obj);
        const auto len = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(obj));
        const std::int64_t i = latch::suffix_start_with(
            [&](std::size_t j) { return failed ? latch::wide_t(0) : wide_of(items[j], &failed); }, len, budget);
        if (failed) {
            throw py::error_already_set();
        }
        return i;
    }
    Py_buffer view;
    if (PyObject_CheckBuffer(obj) && PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
        if (is_int64_buffer(view)) {
            const auto* data = static_cast<const std::int64_t*>(view.buf);
            const auto len = static_cast<std::size_t>(view.shape[0]);
            std::int64_t i;
            {
                const GilReleased released;
                i = latch::suffix_start(data, len, budget);
            }
            PyBuffer_Release(&view);
            return i;
        }
        PyBuffer_Release(&view);
    }
    PyErr_Clear();
    const Int64Array arr = Int64Array::ensure(prefix_sums);
    if (!arr || arr.ndim() != 1) {
        throw py::type_error("suffix_start: prefix_sums must be a 1-D sequence of int");
    }
    const std::int64_t* data = arr.data();
    const auto len = static_cast<std::size_t>(arr.size());
    const GilReleased released;
    return latch::suffix_start(data, len, budget);
}

// One 1-D int64 argument of score_episodes: a C-contiguous buffer of int64 (format 'q' or 'l': an
// array('q'), a memoryview of one, a numpy int64 array) is read in place, so a caller needs no numpy;
// anything else is converted as a numpy int64 array (a copy). Valid while the argument is alive.
class Int64Arg {
public:
    Int64Arg(const py::handle& h, const char* name) {
        PyObject* obj = h.ptr();
        if (PyObject_CheckBuffer(obj) && PyObject_GetBuffer(obj, &view_, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            if (is_int64_buffer(view_)) {
                held_ = true;
                data_ = static_cast<const std::int64_t*>(view_.buf);
                size_ = static_cast<std::size_t>(view_.shape[0]);
                return;
            }
            PyBuffer_Release(&view_);
        }
        PyErr_Clear();
        arr_ = Int64Array::ensure(h);  // imports numpy
        if (!*arr_ || arr_->ndim() != 1) {
            throw py::type_error(std::string("score_episodes: ") + name + " must be a 1-D sequence of int64");
        }
        data_ = arr_->data();
        size_ = static_cast<std::size_t>(arr_->size());
    }
    ~Int64Arg() {
        if (held_) {
            PyBuffer_Release(&view_);
        }
    }
    Int64Arg(const Int64Arg&) = delete;
    Int64Arg& operator=(const Int64Arg&) = delete;

    const std::int64_t* data() const { return data_; }
    std::size_t size() const { return size_; }

private:
    Py_buffer view_{};
    bool held_ = false;
    std::optional<Int64Array> arr_;  // only when converted: an empty array_t would import numpy
    const std::int64_t* data_ = nullptr;
    std::size_t size_ = 0;
};

py::list score_episodes(const py::handle& term_indptr_h, const py::handle& term_ids_h, const py::handle& file_indptr_h,
                        const py::handle& file_ids_h, const py::handle& markers_h, const py::handle& last_seq_h,
                        const py::handle& query_terms_h, const py::handle& current_files_h, std::int64_t now_seq,
                        std::int64_t k) {
    const Int64Arg term_indptr(term_indptr_h, "term_indptr");
    const Int64Arg term_ids(term_ids_h, "term_ids");
    const Int64Arg file_indptr(file_indptr_h, "file_indptr");
    const Int64Arg file_ids(file_ids_h, "file_ids");
    const Int64Arg markers(markers_h, "markers");
    const Int64Arg last_seq(last_seq_h, "last_seq");
    const Int64Arg query(query_terms_h, "query_terms");
    const Int64Arg files(current_files_h, "current_files");
    const std::size_t n = markers.size();
    if (term_indptr.size() != n + 1 || file_indptr.size() != n + 1 || last_seq.size() != n) {
        throw py::value_error("score_episodes: term_indptr/file_indptr need n+1 entries and last_seq n entries");
    }
    const latch::Episodes eps{term_indptr.data(), term_ids.data(), term_ids.size(), file_indptr.data(),
                              file_ids.data(),    file_ids.size(), markers.data(),  last_seq.data(),
                              n};
    const std::size_t want = k > 0 ? static_cast<std::size_t>(k) : 0;
    std::vector<std::int64_t> top(want < n ? want : n);
    std::size_t count = 0;
    latch::ScoreStatus st;
    {
        const GilReleased released;
        st = latch::score_episodes(eps, query.data(), query.size(), files.data(), files.size(), now_seq, want,
                                   top.data(), &count);
    }
    if (st != latch::ScoreStatus::ok) {
        const char* which = st == latch::ScoreStatus::term_indptr_out_of_range ? "term" : "file";
        throw py::value_error(std::string("score_episodes: a ") + which + "_indptr slice lies outside " + which +
                              "_ids");
    }
    py::list out(count);
    for (std::size_t i = 0; i < count; ++i) {
        out[i] = py::int_(top[i]);
    }
    return out;
}

// The str objects ascii_terms returned, by their bytes (strong references; open addressing at a load
// <= 1/2). A term met again, in this text or a later one, is the same str object: no allocation, no
// deallocation when the caller drops it, and its hash, once a dict computed it, stays cached. The
// vocabulary of agent transcripts is small next to their volume, so most terms are hits. Bounded: at
// kMaxTerms entries it starts empty again. Used with the GIL held only.
class TermTable {
public:
    static constexpr std::size_t kMaxTerms = std::size_t{1} << 16;

    // The str for the `n` bytes at `w` (a new reference), or nullptr with a Python error set.
    PyObject* get(const char* w, std::size_t n) {
        const std::uint64_t h = hash(reinterpret_cast<const unsigned char*>(w), n);
        std::size_t mask = slots_.size() - 1;
        std::size_t i = static_cast<std::size_t>(h) & mask;
        for (PyObject* t = slots_[i]; t != nullptr; t = slots_[i]) {
            if (static_cast<std::size_t>(PyUnicode_GET_LENGTH(t)) == n && std::memcmp(PyUnicode_DATA(t), w, n) == 0) {
                Py_INCREF(t);
                return t;
            }
            i = (i + 1) & mask;
        }
        PyObject* term = PyUnicode_New(static_cast<Py_ssize_t>(n), 127);
        if (term == nullptr) {
            return nullptr;
        }
        std::memcpy(PyUnicode_DATA(term), w, n);
        if (used_ == kMaxTerms) {
            clear();
            mask = slots_.size() - 1;
            i = static_cast<std::size_t>(h) & mask;
        } else if (2 * (used_ + 1) > slots_.size()) {
            grow();
            mask = slots_.size() - 1;
            i = static_cast<std::size_t>(h) & mask;
            while (slots_[i] != nullptr) {
                i = (i + 1) & mask;
            }
        }
        Py_INCREF(term);
        slots_[i] = term;
        ++used_;
        return term;
    }

private:
    static std::uint64_t hash(const unsigned char* w, std::size_t n) {
        std::uint64_t h = 1469598103934665603ULL;  // FNV-1a, folded
        for (std::size_t j = 0; j < n; ++j) {
            h = (h ^ w[j]) * 1099511628211ULL;
        }
        return h ^ (h >> 29);
    }

    void clear() {
        for (PyObject*& t : slots_) {
            Py_XDECREF(t);
            t = nullptr;
        }
        used_ = 0;
    }

    void grow() {
        std::vector<PyObject*> grown(2 * slots_.size(), nullptr);
        const std::size_t mask = grown.size() - 1;
        for (PyObject* t : slots_) {
            if (t != nullptr) {
                std::size_t k = static_cast<std::size_t>(hash(static_cast<const unsigned char*>(PyUnicode_DATA(t)),
                                                              static_cast<std::size_t>(PyUnicode_GET_LENGTH(t)))) &
                                mask;
                while (grown[k] != nullptr) {
                    k = (k + 1) & mask;
                }
                grown[k] = t;
            }
        }
        slots_.swap(grown);
    }

    std::vector<PyObject*> slots_ = std::vector<PyObject*>(1024, nullptr);
    std::size_t used_ = 0;
};

TermTable& term_table() {
    static TermTable* table = new TermTable();  // never destroyed: it may outlive the interpreter's objects
    return *table;
}

// The terms of an ASCII str as a list of str (see TermTable). No GIL release: the scan is one pass over
// a text the caller bounds (episode fields, at most 16,384 characters) and each term is a Python str.
py::list ascii_terms(const py::handle& text) {
    TermTable* table = &term_table();
    PyObject* s = text.ptr();
    if (!PyUnicode_Check(s)) {
        throw py::type_error(std::string("ascii_terms: text must be str, not ") + Py_TYPE(s)->tp_name);
    }
    if (!PyUnicode_IS_ASCII(s)) {
        throw py::value_error("ascii_terms: text must be ASCII (str.isascii())");
    }
    py::list out(0);
    latch::for_each_ascii_term(static_cast<const unsigned char*>(PyUnicode_DATA(s)),
                               static_cast<std::size_t>(PyUnicode_GET_LENGTH(s)), [&](const char* w, std::size_t n) {
                                   PyObject* term = table->get(w, n);
                                   if (term == nullptr || PyList_Append(out.ptr(), term) != 0) {
                                       Py_XDECREF(term);
                                       throw py::error_already_set();
                                   }
                                   Py_DECREF(term);
                               });
    return out;
}

// The path runs of an ASCII str as a flat list [start, end, start, end, ...] (see latch::for_each_ascii_path_run).
// No GIL release: one pass over a text the caller bounds (at most 16,384 characters), few runs.
py::list ascii_path_runs(const py::handle& text) {
    PyObject* s = text.ptr();
    if (!PyUnicode_Check(s)) {
        throw py::type_error(std::string("ascii_path_runs: text must be str, not ") + Py_TYPE(s)->tp_name);
    }
    if (!PyUnicode_IS_ASCII(s)) {
        throw py::value_error("ascii_path_runs: text must be ASCII (str.isascii())");
    }
    py::list out(0);
    latch::for_each_ascii_path_run(static_cast<const unsigned char*>(PyUnicode_DATA(s)),
                                   static_cast<std::size_t>(PyUnicode_GET_LENGTH(s)),
                                   [&](std::size_t start, std::size_t end) {
                                       const std::size_t at[2] = {start, end};
                                       for (const std::size_t i : at) {
                                           PyObject* v = PyLong_FromSize_t(i);
                                           if (v == nullptr || PyList_Append(out.ptr(), v) != 0) {
                                               Py_XDECREF(v);
                                               throw py::error_already_set();
                                           }
                                           Py_DECREF(v);
                                       }
                                   });
    return out;
}

// The command words of an ASCII str as bits (see latch::ascii_command_classes).
unsigned ascii_command_classes(const py::handle& text) {
    PyObject* s = text.ptr();
    if (!PyUnicode_Check(s)) {
        throw py::type_error(std::string("ascii_command_classes: text must be str, not ") + Py_TYPE(s)->tp_name);
    }
    if (!PyUnicode_IS_ASCII(s)) {
        throw py::value_error("ascii_command_classes: text must be ASCII (str.isascii())");
    }
    return latch::ascii_command_classes(static_cast<const unsigned char*>(PyUnicode_DATA(s)),
                                        static_cast<std::size_t>(PyUnicode_GET_LENGTH(s)));
}

py::tuple str_tuple(const char* const* items, std::size_t n) {
    py::tuple out(n);
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = py::str(items[i]);
    }
    return out;
}

// The str of the prepared text of an ASCII text: ASCII and the glue characters (U+E02E, U+E02B, U+E023: three
// bytes each, EE 80 xx), widened here to UCS-2 without a general UTF-8 decoder. A new reference, or nullptr with
// a Python error set (nullptr with none: the text holds another byte, decode it as UTF-8).
PyObject* ascii_prepared_str(const std::string& out) {
    const auto* b = reinterpret_cast<const unsigned char*>(out.data());
    const std::size_t n = out.size();
    std::size_t glue = 0;
    for (std::size_t i = 0; i < n; ++i) {
        glue += b[i] == 0xEE;
    }
    if (glue == 0) {
        return nullptr;  // all ASCII (the decoder's fast path)
    }
    PyObject* r = PyUnicode_New(static_cast<Py_ssize_t>(n - 2 * glue), 0xFFFF);
    if (r == nullptr) {
        return nullptr;
    }
    Py_UCS2* w = PyUnicode_2BYTE_DATA(r);
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = b[i];
        if (c < 0x80) {
            *w++ = c;
            ++i;
        } else if (c == 0xEE && i + 2 < n && b[i + 1] == 0x80 && (b[i + 2] & 0xC0) == 0x80) {
            *w++ = static_cast<Py_UCS2>(0xE000 | (b[i + 2] & 0x3F));
            i += 3;
        } else {
            Py_DECREF(r);
            return nullptr;
        }
    }
    return r;
}

// The FTS5 preparation of a str (see latch/fts_prepare.hpp): the str itself when nothing changes.
// UnicodeEncodeError for a str that is not valid UTF-8 (a lone surrogate): the caller falls back to the reference.
py::object fts_prepare_text(const py::handle& text) {
    PyObject* s = text.ptr();
    if (!PyUnicode_Check(s)) {
        throw py::type_error(std::string("fts_prepare_text: text must be str, not ") + Py_TYPE(s)->tp_name);
    }
    Py_ssize_t n = 0;
    const char* data = PyUnicode_AsUTF8AndSize(s, &n);
    if (data == nullptr) {
        throw py::error_already_set();
    }
    thread_local std::string out;  // kept between calls (let go when it grew past 1 MiB)
    struct Trim {
        ~Trim() {
            if (out.capacity() > (std::size_t{1} << 20)) {
                std::string().swap(out);
            }
        }
    } trim;
    if (!latch::fts_prepare(reinterpret_cast<const unsigned char*>(data), static_cast<std::size_t>(n), out)) {
        return py::reinterpret_borrow<py::object>(s);
    }
    PyObject* r = PyUnicode_IS_ASCII(s) ? ascii_prepared_str(out) : nullptr;
    if (r == nullptr && !PyErr_Occurred()) {
        r = PyUnicode_DecodeUTF8(out.data(), static_cast<Py_ssize_t>(out.size()), "strict");
    }
    if (r == nullptr) {
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(r);
}

}  // namespace

// The str of the ASCII term at `w` (`n` bytes), the one ascii_terms returns (a new reference), or nullptr
// with a Python error set. With the GIL held.
PyObject* ascii_term_str(const char* w, std::size_t n) { return term_table().get(w, n); }

PYBIND11_MODULE(_native, m) {
    m.doc() = "Latch hot paths in C++ (same answers as latch.hotpaths._py; see latch.hotpaths).";
    m.attr("ABI_VERSION") = LATCH_ABI_VERSION;
    py::tuple profiles(latch::kProfileCount);
    for (int i = 0; i < latch::kProfileCount; ++i) {
        profiles[i] = py::str(latch::kProfileNames[i]);
    }
    m.attr("PROFILES") = profiles;
    py::tuple stop_words(latch::kStopWordCount);
    for (std::size_t i = 0; i < latch::kStopWordCount; ++i) {
        stop_words[i] = py::str(latch::kStopWords[i]);
    }
    m.attr("STOP_WORDS") = stop_words;
    m.attr("PATH_EXTENSIONS") = str_tuple(latch::kPathExtensions, latch::kPathExtensionCount);
    m.attr("MUTATING_COMMANDS") = str_tuple(latch::kMutatingCommands, latch::kMutatingCommandCount);
    m.attr("TEST_COMMANDS") = str_tuple(latch::kTestCommands, latch::kTestCommandCount);
    m.attr("READ_COMMANDS") = str_tuple(latch::kReadCommands, latch::kReadCommandCount);
    m.attr("ESTIMATOR_KERNEL") = latch::estimator_kernel();  // "avx512", "avx2" or "scalar" (see estimate.hpp)
    m.def("estimate_tokens", &estimate_tokens, py::arg("text"), py::arg("profile") = "openai",
          "Conservative token estimate of ``text`` (tokens). ValueError on unknown profile.");
    m.def("estimate_tokens_batch", &estimate_tokens_batch, py::arg("texts"), py::arg("profile") = "openai",
          "Token estimates of every str in ``texts`` as a numpy int64 array.");
    m.def("suffix_start", &suffix_start, py::arg("prefix_sums"), py::arg("budget"),
          "Start index of the largest suffix of whole units fitting ``budget`` tokens (O(log n)).");
    m.def("score_episodes", &score_episodes, py::arg("term_indptr"), py::arg("term_ids"), py::arg("file_indptr"),
          py::arg("file_ids"), py::arg("markers"), py::arg("last_seq"), py::arg("query_terms"),
          py::arg("current_files"), py::arg("now_seq"), py::arg("k"),
          "Indices of the k best episodes, best first (see latch.hotpaths._py.score_episodes).");
    m.def("ascii_terms", &ascii_terms, py::arg("text"),
          "Lexical terms of an ASCII str, in text order (see latch.hotpaths._py.ascii_terms).");
    m.def("ascii_path_runs", &ascii_path_runs, py::arg("text"),
          "Maximal path-character runs of an ASCII str holding a path hint, as [start, end, ...] (see "
          "latch.hotpaths._py.ascii_path_runs).");
    m.def("ascii_command_classes", &ascii_command_classes, py::arg("text"),
          "The command words an ASCII str holds, as bits: 1 mutating, 2 test, 4 read (see "
          "latch.hotpaths._py.ascii_command_classes).");
    m.def("fts_prepare_text", &fts_prepare_text, py::arg("text"),
          "The FTS5 index text of a str (see latch.store.fts._prepare_text_py); UnicodeEncodeError for a lone "
          "surrogate.");
    bind_term_counts(m);
    bind_canonical_fields(m);
}

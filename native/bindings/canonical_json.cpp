// latch._native.CanonicalFields: the canonical JSON text of a dataclass event's fields, the text the reference
// latch/events.py `_fields_text_py` writes (tests/parity/test_canonical_fields_parity.py compares them).
//
// The text is built as UTF-8 and made a str once at the end. Every str copied into it goes through one
// encoder that writes a lone surrogate as `\udXXX` (lowercase hex), as the reference's final
// `_surrogates_escaped` does, so the text is always valid UTF-8. Values the reference hands to the json module
// (floats, dicts, subclasses of str or int, ...) are handed to the same Python function here.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace py = pybind11;

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Which ASCII characters a JSON string literal escapes (json.encoder.encode_basestring: '"', '\\', and
// every control character below 0x20; DEL is kept).
struct EscapeTable {
    bool v[128];
};

constexpr EscapeTable escape_table() {
    EscapeTable t{};
    for (int c = 0; c < 128; ++c) {
        t.v[c] = c < 0x20 || c == '"' || c == '\\';
    }
    return t;
}

constexpr EscapeTable kEscape = escape_table();

// The text being written: UTF-8 in a growing block (no zero fill, unlike std::string::resize).
class Buffer {
public:
    Buffer() : data_(static_cast<char*>(std::malloc(kFirst))), cap_(kFirst) {
        if (data_ == nullptr) {
            throw std::bad_alloc();
        }
    }
    ~Buffer() { std::free(data_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    // Room for `extra` more bytes; the place to write them (then `advance` to the end written).
    char* room(std::size_t extra) {
        if (cap_ - size_ < extra) {
            std::size_t cap = cap_ * 2;
            if (cap - size_ < extra) {
                cap = size_ + extra;
            }
            char* grown = static_cast<char*>(std::realloc(data_, cap));
            if (grown == nullptr) {
                throw std::bad_alloc();
            }
            data_ = grown;
            cap_ = cap;
        }
        return data_ + size_;
    }
    void advance(char* end) { size_ = static_cast<std::size_t>(end - data_); }
    void append(const char* s, std::size_t n) {
        char* p = room(n);
        std::memcpy(p, s, n);
        size_ += n;
    }
    void push(char c) { *room(1) = c, ++size_; }
    const char* data() const { return data_; }
    std::size_t size() const { return size_; }

private:
    static constexpr std::size_t kFirst = 4096;
    char* data_;
    std::size_t size_ = 0;
    std::size_t cap_;
};

// At most 6 bytes: a short escape, or \uXXXX for a control character or a lone surrogate (lowercase hex).
char* put_escape(char* p, std::uint32_t c) {
    *p++ = '\\';
    switch (c) {
        case '"': *p++ = '"'; return p;
        case '\\': *p++ = '\\'; return p;
        case '\n': *p++ = 'n'; return p;
        case '\r': *p++ = 'r'; return p;
        case '\t': *p++ = 't'; return p;
        case '\b': *p++ = 'b'; return p;
        case '\f': *p++ = 'f'; return p;
        default: break;
    }
    *p++ = 'u';
    *p++ = kHex[(c >> 12) & 0xF];
    *p++ = kHex[(c >> 8) & 0xF];
    *p++ = kHex[(c >> 4) & 0xF];
    *p++ = kHex[c & 0xF];
    return p;
}

// A code point >= 0x80 as UTF-8 (at most 4 bytes), a lone surrogate as its escape (6).
char* put_code_point(char* p, std::uint32_t c) {
    if (c < 0x800) {
        *p++ = static_cast<char>(0xC0 | (c >> 6));
        *p++ = static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        if (c >= 0xD800 && c <= 0xDFFF) {
            return put_escape(p, c);
        }
        *p++ = static_cast<char>(0xE0 | (c >> 12));
        *p++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        *p++ = static_cast<char>(0x80 | (c & 0x3F));
    } else {
        *p++ = static_cast<char>(0xF0 | (c >> 18));
        *p++ = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        *p++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        *p++ = static_cast<char>(0x80 | (c & 0x3F));
    }
    return p;
}

// The end of the run of ASCII characters from `i` that a literal keeps as they are (`quote`: not '"', '\\' or
// a control character), 16 bytes at a time where SSE2 is there.
template <typename Unit>
std::size_t plain_run(const Unit* s, std::size_t i, std::size_t n, bool quote) {
#if defined(__SSE2__)
    if constexpr (sizeof(Unit) == 1) {
        // as signed bytes, every byte >= 0x80 is below 0x20 too
        const __m128i low = _mm_set1_epi8(quote ? 0x20 : 0x00);
        const __m128i dq = _mm_set1_epi8(quote ? '"' : 0x00);
        const __m128i bs = _mm_set1_epi8(quote ? '\\' : 0x00);
        const __m128i zero = _mm_setzero_si128();
        while (i + 16 <= n) {
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
            const __m128i hit = quote ? _mm_or_si128(_mm_cmplt_epi8(x, low),
                                                     _mm_or_si128(_mm_cmpeq_epi8(x, dq), _mm_cmpeq_epi8(x, bs)))
                                      : _mm_cmplt_epi8(x, zero);
            const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(hit));
            if (mask != 0) {
                return i + static_cast<std::size_t>(__builtin_ctz(mask));
            }
            i += 16;
        }
    }
#endif
    while (i < n && s[i] < 0x80 && !(quote && kEscape.v[s[i]])) {
        ++i;
    }
    return i;
}

// `n` code units written at `p`, which has room for 6 bytes per unit.
template <typename Unit>
char* put_units(char* p, const Unit* s, std::size_t n, bool quote) {
    std::size_t i = 0;
    while (i < n) {
        // the longest run of ASCII characters copied as they are
        const std::size_t j = plain_run(s, i, n, quote);
        if constexpr (sizeof(Unit) == 1) {
            std::memcpy(p, s + i, j - i);
            p += j - i;
        } else {
            for (std::size_t k = i; k < j; ++k) {
                *p++ = static_cast<char>(s[k]);
            }
        }
        if (j == n) {
            break;
        }
        const std::uint32_t c = s[j];
        i = j + 1;
        p = c < 0x80 ? put_escape(p, c) : put_code_point(p, c);  // below 0x80 only when quoting
    }
    return p;
}

// `s` (a str) appended as UTF-8, lone surrogates as \uXXXX; `quote`: as a JSON string literal (quotes and
// escapes of encode_basestring, non-ASCII kept).
void put_str(Buffer& o, PyObject* s, bool quote) {
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) != 0) {
        throw py::error_already_set();
    }
#endif
    const std::size_t n = static_cast<std::size_t>(PyUnicode_GET_LENGTH(s));
    char* p = o.room(6 * n + 2);
    if (quote) {
        *p++ = '"';
    }
    switch (PyUnicode_KIND(s)) {
        case PyUnicode_1BYTE_KIND:
            p = put_units(p, PyUnicode_1BYTE_DATA(s), n, quote);
            break;
        case PyUnicode_2BYTE_KIND:
            p = put_units(p, PyUnicode_2BYTE_DATA(s), n, quote);
            break;
        default:
            p = put_units(p, PyUnicode_4BYTE_DATA(s), n, quote);
            break;
    }
    if (quote) {
        *p++ = '"';
    }
    o.advance(p);
}

class CanonicalFields {
public:
    // `writers`: the reference's per-class table (_WRITERS: type -> tuple of (key text, field name), or None);
    // `writer_of(type)`: fills it on a miss (_writer); `generic(value)`: the json module's text of any other value.
    CanonicalFields(py::dict writers, py::object writer_of, py::object generic)
        : writers_(std::move(writers)), writer_of_(std::move(writer_of)), generic_(std::move(generic)) {}

    py::object call(const py::handle& obj, const py::handle& writer) {
        // a buffer of this call's own: the generic encoder may let another thread write meanwhile
        Buffer buf;
        write_fields(buf, obj.ptr(), writer.ptr());
        PyObject* r = PyUnicode_DecodeUTF8(buf.data(), static_cast<Py_ssize_t>(buf.size()), "strict");
        if (r == nullptr) {
            throw py::error_already_set();
        }
        return py::reinterpret_steal<py::object>(r);
    }

private:
    void put_generic(Buffer& out, PyObject* value) {
        PyObject* text = PyObject_CallOneArg(generic_.ptr(), value);
        if (text == nullptr) {
            throw py::error_already_set();
        }
        py::object keep = py::reinterpret_steal<py::object>(text);
        if (!PyUnicode_Check(text)) {
            throw py::type_error("the generic encoder must return str");
        }
        put_str(out, text, false);
    }

    // The writer tuple of `cls`'s instances (a borrowed or kept reference), or nullptr for no dataclass.
    PyObject* writer_for(PyObject* cls, py::object& keep) {
        PyObject* found = PyDict_GetItemWithError(writers_.ptr(), cls);
        if (found == nullptr) {
            if (PyErr_Occurred()) {
                throw py::error_already_set();
            }
            found = PyObject_CallOneArg(writer_of_.ptr(), cls);
            if (found == nullptr) {
                throw py::error_already_set();
            }
            keep = py::reinterpret_steal<py::object>(found);
        }
        return found == Py_None ? nullptr : found;
    }

    void write_fields(Buffer& out, PyObject* obj, PyObject* writer) {
        if (!PyTuple_Check(writer)) {
            throw py::type_error("writer must be a tuple");
        }
        if (Py_EnterRecursiveCall(" while writing canonical JSON") != 0) {
            throw py::error_already_set();
        }
        struct Leave {
            ~Leave() { Py_LeaveRecursiveCall(); }
        } leave;
        const Py_ssize_t count = PyTuple_GET_SIZE(writer);
        for (Py_ssize_t f = 0; f < count; ++f) {
            PyObject* pair = PyTuple_GET_ITEM(writer, f);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
                throw py::type_error("writer entries must be (key text, field name)");
            }
            put_str(out, PyTuple_GET_ITEM(pair, 0), false);
            PyObject* value = PyObject_GetAttr(obj, PyTuple_GET_ITEM(pair, 1));
            if (value == nullptr) {
                throw py::error_already_set();
            }
            py::object keep = py::reinterpret_steal<py::object>(value);
            write_value(out, value);
        }
        if (count == 0) {
            out.push('{');
        }
        out.push('}');
    }

    void write_value(Buffer& out, PyObject* value) {
        PyTypeObject* kind = Py_TYPE(value);
        if (kind == &PyUnicode_Type) {
            put_str(out, value, true);
        } else if (value == Py_None) {
            out.append("null", 4);
        } else if (kind == &PyBool_Type) {
            if (value == Py_True) {
                out.append("true", 4);
            } else {
                out.append("false", 5);
            }
        } else if (kind == &PyLong_Type) {
            int overflow = 0;
            const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow == 0) {
                if (v == -1 && PyErr_Occurred()) {
                    throw py::error_already_set();
                }
                char digits[24];
                const auto end = std::to_chars(digits, digits + sizeof(digits), v).ptr;
                out.append(digits, static_cast<std::size_t>(end - digits));
            } else {
                PyObject* text = PyLong_Type.tp_repr(value);  // int.__repr__ (ValueError past the digit limit)
                if (text == nullptr) {
                    throw py::error_already_set();
                }
                py::object keep = py::reinterpret_steal<py::object>(text);
                put_str(out, text, false);
            }
        } else if (kind == &PyTuple_Type || kind == &PyList_Type) {
            write_items(out, value);
        } else {
            put_generic(out, value);  // floats (NaN refused there), dicts, subclasses of str or int, ...
        }
    }

    void write_items(Buffer& out, PyObject* seq) {
        // a list may change while the generic encoder runs: index it afresh each time, as iteration does
        const bool tuple = PyTuple_CheckExact(seq);
        Py_ssize_t i = 0;
        for (;; ++i) {
            const Py_ssize_t size = tuple ? PyTuple_GET_SIZE(seq) : PyList_GET_SIZE(seq);
            if (i >= size) {
                break;
            }
            PyObject* item = tuple ? PyTuple_GET_ITEM(seq, i) : PyList_GET_ITEM(seq, i);
            py::object hold = py::reinterpret_borrow<py::object>(item);
            out.push(i == 0 ? '[' : ',');
            if (Py_TYPE(item) == &PyUnicode_Type) {
                put_str(out, item, true);
                continue;
            }
            py::object keep;
            PyObject* item_writer = writer_for(reinterpret_cast<PyObject*>(Py_TYPE(item)), keep);
            if (item_writer != nullptr) {
                write_fields(out, item, item_writer);
            } else {
                put_generic(out, item);
            }
        }
        if (i == 0) {
            out.push('[');
        }
        out.push(']');
    }

    py::dict writers_;
    py::object writer_of_;
    py::object generic_;
};

// ---- the indexed text of a tool call's arguments when they are a flat JSON object of strings

int hex_digit(std::uint32_t c) {
    if (c >= '0' && c <= '9') {
        return static_cast<int>(c - '0');
    }
    if (c >= 'a' && c <= 'f') {
        return static_cast<int>(c - 'a' + 10);
    }
    if (c >= 'A' && c <= 'F') {
        return static_cast<int>(c - 'A' + 10);
    }
    return -1;
}

// A reader of the code units of one str that gives up (false) on anything json.loads would not read the
// same way as a flat object of strings: the caller then takes the reference path.
template <typename Unit>
class FlatObjectReader {
public:
    FlatObjectReader(const Unit* s, std::size_t n) : s_(s), n_(n) {}

    // The object's members, each (key, value) as [start, end) ranges of `text`, in order; false when the
    // text is not one JSON object of string members (or repeats a key, which json.loads would fold).
    bool read(std::vector<std::uint32_t>& text, std::vector<std::pair<std::size_t, std::size_t>>& ranges) {
        skip_ws();
        if (!take('{')) {
            return false;
        }
        skip_ws();
        if (!take('}')) {
            for (;;) {
                if (!string(text, ranges) || (skip_ws(), !take(':')) || (skip_ws(), !string(text, ranges))) {
                    return false;
                }
                skip_ws();
                if (take('}')) {
                    break;
                }
                if (!take(',')) {
                    return false;
                }
                skip_ws();
            }
        }
        skip_ws();
        if (i_ != n_) {
            return false;
        }
        // a repeated key: json.loads keeps one member (the first place, the last value)
        auto key = [&](std::size_t r) {
            return std::make_pair(text.begin() + static_cast<std::ptrdiff_t>(ranges[r].first),
                                  text.begin() + static_cast<std::ptrdiff_t>(ranges[r].second));
        };
        auto same = [&](std::size_t a, std::size_t b) {
            const auto x = key(a), y = key(b);
            return x.second - x.first == y.second - y.first && std::equal(x.first, x.second, y.first);
        };
        const std::size_t members = ranges.size() / 2;
        if (members <= 16) {
            for (std::size_t a = 0; a < ranges.size(); a += 2) {
                for (std::size_t b = a + 2; b < ranges.size(); b += 2) {
                    if (same(a, b)) {
                        return false;
                    }
                }
            }
            return true;
        }
        std::vector<std::size_t> order(members);  // many members: the keys sorted, then neighbours compared
        for (std::size_t m = 0; m < members; ++m) {
            order[m] = 2 * m;
        }
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            const auto x = key(a), y = key(b);
            return std::lexicographical_compare(x.first, x.second, y.first, y.second);
        });
        for (std::size_t m = 1; m < members; ++m) {
            if (same(order[m - 1], order[m])) {
                return false;
            }
        }
        return true;
    }

private:
    void skip_ws() {
        while (i_ < n_ && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
            ++i_;
        }
    }
    bool take(std::uint32_t c) {
        if (i_ < n_ && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    bool hex4(std::size_t at, std::uint32_t& v) const {
        v = 0;
        for (std::size_t k = at; k < at + 4; ++k) {
            const int d = hex_digit(s_[k]);
            if (d < 0) {
                return false;
            }
            v = (v << 4) | static_cast<std::uint32_t>(d);
        }
        return true;
    }
    // A JSON string (json's strict scanner: no raw control character), decoded onto `text`.
    bool string(std::vector<std::uint32_t>& text, std::vector<std::pair<std::size_t, std::size_t>>& ranges) {
        if (!take('"')) {
            return false;
        }
        const std::size_t start = text.size();
        for (;;) {
            if (i_ >= n_) {
                return false;
            }
            const std::uint32_t c = s_[i_++];
            if (c == '"') {
                break;
            }
            if (c < 0x20) {
                return false;
            }
            if (c != '\\') {
                text.push_back(c);
                continue;
            }
            if (i_ >= n_) {
                return false;
            }
            const std::uint32_t e = s_[i_++];
            switch (e) {
                case '"': text.push_back('"'); continue;
                case '\\': text.push_back('\\'); continue;
                case '/': text.push_back('/'); continue;
                case 'b': text.push_back('\b'); continue;
                case 'f': text.push_back('\f'); continue;
                case 'n': text.push_back('\n'); continue;
                case 'r': text.push_back('\r'); continue;
                case 't': text.push_back('\t'); continue;
                case 'u': break;
                default: return false;
            }
            std::uint32_t u;
            if (i_ + 4 > n_ || !hex4(i_, u)) {
                return false;
            }
            i_ += 4;
            // json's scanner: a high surrogate followed by "\\u" and four characters (with one more after them)
            // joins a low surrogate; four that are not hex digits are an error
            if (u >= 0xD800 && u <= 0xDBFF && i_ + 6 < n_ && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
                std::uint32_t low;
                if (!hex4(i_ + 2, low)) {
                    return false;
                }
                if (low >= 0xDC00 && low <= 0xDFFF) {
                    u = 0x10000 + (((u - 0xD800) << 10) | (low - 0xDC00));
                    i_ += 6;
                }
            }
            text.push_back(u);
        }
        ranges.emplace_back(start, text.size());
        return true;
    }

    const Unit* s_;
    std::size_t n_;
    std::size_t i_ = 0;
};

// `c` as json.encoder.encode_basestring writes it (non-ASCII, DEL and lone surrogates kept).
void put_readable(std::vector<std::uint32_t>& o, std::uint32_t c) {
    if (c >= 0x20 && c != '"' && c != '\\') {
        o.push_back(c);
        return;
    }
    char buf[6];
    const char* end = put_escape(buf, c);
    for (const char* p = buf; p != end; ++p) {
        o.push_back(static_cast<unsigned char>(*p));
    }
}

template <typename Unit>
py::object readable_units(const Unit* s, std::size_t n) {
    std::vector<std::uint32_t> text;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    text.reserve(n);
    if (!FlatObjectReader<Unit>(s, n).read(text, ranges)) {
        return py::none();
    }
    std::vector<std::uint32_t> out;
    out.reserve(n + 2 * ranges.size() + 2);
    out.push_back('{');
    for (std::size_t r = 0; r < ranges.size(); ++r) {
        if (r != 0) {
            out.push_back(r % 2 == 1 ? ':' : ',');
            out.push_back(' ');
        }
        out.push_back('"');
        for (std::size_t k = ranges[r].first; k < ranges[r].second; ++k) {
            put_readable(out, text[k]);
        }
        out.push_back('"');
    }
    out.push_back('}');
    PyObject* r = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out.data(), static_cast<Py_ssize_t>(out.size()));
    if (r == nullptr) {
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(r);
}

// json.dumps(json.loads(arguments), ensure_ascii=False) for arguments that are one JSON object whose values are
// all strings (no key repeated); None for any other text.
py::object readable_str_object(const py::handle& arguments) {
    PyObject* s = arguments.ptr();
    if (!PyUnicode_Check(s)) {
        return py::none();
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) != 0) {
        throw py::error_already_set();
    }
#endif
    const std::size_t n = static_cast<std::size_t>(PyUnicode_GET_LENGTH(s));
    switch (PyUnicode_KIND(s)) {
        case PyUnicode_1BYTE_KIND: return readable_units(PyUnicode_1BYTE_DATA(s), n);
        case PyUnicode_2BYTE_KIND: return readable_units(PyUnicode_2BYTE_DATA(s), n);
        default: return readable_units(PyUnicode_4BYTE_DATA(s), n);
    }
}

}  // namespace

void bind_canonical_fields(py::module_& m) {
    m.def("readable_str_object", &readable_str_object, py::arg("arguments"),
          "json.dumps(json.loads(arguments), ensure_ascii=False) when ``arguments`` is one JSON object of string "
          "values (no repeated key); None for anything else (see latch.events._readable_arguments).");
    py::class_<CanonicalFields>(m, "CanonicalFields",
                                "The canonical JSON text of a dataclass's fields (see latch.events._fields_text_py).")
        .def(py::init<py::dict, py::object, py::object>(), py::arg("writers"), py::arg("writer_of"),
             py::arg("generic"))
        .def("__call__", &CanonicalFields::call, py::arg("obj"), py::arg("writer"),
             "The text of ``obj``'s fields written by ``writer`` (a tuple of (key text, field name)); the errors "
             "of ``getattr`` and of the generic encoder.");
}

// Data from Python: record files, tf.train.Example encode/decode, and datasets iterated from
// Python (elements as flat lists of NumPy arrays; runnel/data.py gives them their structure).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "runnel/actors/data/dataset.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel::python {

namespace {

record_compression compression_named(const std::string& c) {
  if (c.empty() || c == "NONE" || c == "none")
    return record_compression::none;
  if (c == "ZLIB" || c == "zlib")
    return record_compression::zlib;
  if (c == "GZIP" || c == "gzip")
    return record_compression::gzip;
  if (c == "auto" || c == "AUTO")
    return record_compression::automatic;
  throw py::value_error("compression '" + c + "': NONE, ZLIB, GZIP or auto");
}

py::list element_to_py(element e) {
  py::list out;
  for (auto& t : e)
    out.append(to_numpy(std::move(t)));
  return out;
}

element element_from_py(py::handle items) {
  element e;
  for (py::handle v : items)
    e.push_back(to_tensor(v).copy()); // an element outlives the call: own its memory
  return e;
}

/// A Python callable shared by a dataset's stages, which may drop it on a pipeline thread.
std::shared_ptr<py::function> shared_callable(py::function fn) {
  return std::shared_ptr<py::function>(new py::function(std::move(fn)), [](py::function* p) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) { // taking the GIL now could hang
      p->release();
      delete p;
      return;
    }
    py::gil_scoped_acquire gil;
    delete p;
  });
}

/// A Python callable as a dataset function: it runs on the pipeline's threads, with the GIL.
map_fn python_map(py::function fn) {
  auto f = shared_callable(std::move(fn));
  return [f](element e) -> result<element> {
    py::gil_scoped_acquire gil;
    try {
      return element_from_py((*f)(element_to_py(std::move(e))));
    } catch (py::error_already_set& err) {
      return invalid_argument("the dataset's Python map function raised " +
                              std::string(err.what()));
    }
  };
}

predicate_fn python_predicate(py::function fn) {
  auto f = shared_callable(std::move(fn));
  return [f](const element& e) -> result<bool> {
    py::gil_scoped_acquire gil;
    try {
      return (*f)(element_to_py(e)).cast<bool>();
    } catch (py::error_already_set& err) {
      return invalid_argument("the dataset's Python filter function raised " +
                              std::string(err.what()));
    }
  };
}

/// A stream being read from Python; reading and closing happen without the GIL (its stages may
/// call back into Python).
struct py_stream {
  std::unique_ptr<element_stream> s;
  ~py_stream() {
    py::gil_scoped_release unlocked;
    s.reset();
  }
  py::object next() {
    element e;
    result<bool> r = false;
    {
      py::gil_scoped_release unlocked;
      r = s->next(e);
    }
    if (!r.ok())
      raise(r.error());
    if (!*r)
      throw py::stop_iteration();
    return element_to_py(std::move(e));
  }
  /// Each stage's counters so far, source first (element_stream::stats()).
  py::list stats() const {
    py::list out;
    for (auto& st : s->stats()) {
      py::dict d;
      d["stage"] = st.stage;
      d["elements"] = st.elements;
      d["calls"] = st.calls;
      d["seconds"] = st.seconds;
      d["rate"] = st.rate();
      d["latency"] = st.latency();
      d["buffer_fill"] = st.buffer_fill >= 0 ? py::object(py::float_(st.buffer_fill)) : py::none();
      d["autotuned"] = st.autotuned >= 0 ? py::object(py::int_(st.autotuned)) : py::none();
      out.append(d);
    }
    return out;
  }
};

std::vector<feature_spec> specs_from(const py::list& specs) {
  // (key, dtype, shape, layout, default or None)
  std::vector<feature_spec> out;
  for (py::handle s : specs) {
    auto t = s.cast<py::tuple>();
    feature_spec f;
    f.key = t[0].cast<std::string>();
    f.type = dtype_named(t[1].cast<std::string>());
    f.shape = to_shape(t[2]);
    std::string layout = t[3].cast<std::string>();
    f.layout = layout == "sparse"   ? feature_layout::sparse
               : layout == "padded" ? feature_layout::padded
                                    : feature_layout::fixed;
    if (!t[4].is_none())
      f.default_value = to_tensor(t[4], f.type).copy();
    out.push_back(std::move(f));
  }
  return out;
}

void bind_records(py::module_& m) {
  py::class_<record_writer>(m, "_RecordWriter")
      .def(py::init([](const std::string& path, const std::string& compression) {
        return check(record_writer::open(path, compression_named(compression)));
      }))
      .def("write", [](record_writer& w, const py::bytes& b) { check(w.write(std::string(b))); })
      .def("flush", [](record_writer& w) { check(w.flush()); })
      .def("close", [](record_writer& w) { check(w.close()); });
  py::class_<record_reader>(m, "_RecordReader")
      .def(py::init([](const std::string& path, const std::string& compression, bool skip) {
        record_reader_options o;
        o.compression = compression_named(compression);
        o.skip_corrupt = skip;
        return check(record_reader::open(path, o));
      }))
      .def("next",
           [](record_reader& r) -> py::object {
             std::string out;
             if (!check(r.next(out)))
               return py::none();
             return py::bytes(out);
           })
      .def_property_readonly("offset", &record_reader::offset)
      .def_property_readonly("skipped", &record_reader::skipped);
  m.def("_encode_example", [](const py::dict& features) {
    feature_map fm;
    for (auto [k, v] : features) {
      auto t = v.cast<py::tuple>(); // (kind, list of values)
      feature f;
      std::string kind = t[0].cast<std::string>();
      if (kind == "bytes") {
        f.kind = feature_kind::bytes;
        f.bytes = t[1].cast<std::vector<std::string>>();
      } else if (kind == "float") {
        f.kind = feature_kind::floats;
        f.floats = t[1].cast<std::vector<float>>();
      } else {
        f.kind = feature_kind::int64s;
        f.int64s = t[1].cast<std::vector<int64_t>>();
      }
      fm[py::str(k)] = std::move(f);
    }
    return py::bytes(encode_example(fm));
  });
  m.def("_decode_example", [](const py::bytes& b) {
    feature_map fm = check(decode_example(std::string(b)));
    py::dict out;
    for (auto& [k, f] : fm) {
      if (f.kind == feature_kind::bytes) {
        py::list items;
        for (auto& s : f.bytes)
          items.append(py::bytes(s));
        out[py::str(k)] = py::make_tuple("bytes", items);
      } else if (f.kind == feature_kind::floats) {
        out[py::str(k)] =
            py::make_tuple("float", py::array_t<float>(f.floats.size(), f.floats.data()));
      } else {
        out[py::str(k)] =
            py::make_tuple("int64", py::array_t<int64_t>(f.int64s.size(), f.int64s.data()));
      }
    }
    return out;
  });
}

} // namespace

void bind_data(py::module_& m) {
  bind_records(m);
  py::class_<py_stream>(m, "_Stream")
      .def("next", &py_stream::next)
      .def("stats", &py_stream::stats)
      .def("stats_table", [](const py_stream& s) { return format_stage_stats(s.s->stats()); });
  m.attr("_AUTOTUNE") = dataset::autotune;
  py::class_<dataset>(m, "_Dataset")
      .def_static("records",
                  [](std::vector<std::string> files, const std::string& compression, int cycle,
                     int block, uint64_t seed, bool skip) {
                    records_options o;
                    o.reader.compression = compression_named(compression);
                    o.reader.skip_corrupt = skip;
                    o.cycle_length = cycle;
                    o.block_length = block;
                    o.shuffle_files_seed = seed;
                    return dataset::records(std::move(files), o);
                  })
      .def_static("from_tensors",
                  [](py::list c) { return dataset::from_tensors(element_from_py(c)); })
      .def_static("from_tensor_slices",
                  [](py::list c) { return dataset::from_tensor_slices(element_from_py(c)); })
      .def_static("range", &dataset::range)
      .def("map", [](const dataset& d, py::function fn, int p) { return d.map(python_map(fn), p); })
      .def("parse_examples",
           [](const dataset& d, const py::list& specs, int p) {
             auto s = specs_from(specs);
             check(example_parser::create(s).error());
             return d.parse_examples(std::move(s), p);
           })
      .def("filter",
           [](const dataset& d, py::function fn) { return d.filter(python_predicate(fn)); })
      .def("shuffle", &dataset::shuffle)
      .def("batch", &dataset::batch)
      .def("padded_batch",
           [](const dataset& d, int64_t n, py::list shapes, bool drop) {
             std::vector<shape> s;
             for (py::handle h : shapes)
               s.push_back(to_shape(h));
             return d.padded_batch(n, s, drop);
           })
      .def("repeat", &dataset::repeat)
      .def("take", &dataset::take)
      .def("skip", &dataset::skip)
      .def("shard", &dataset::shard)
      .def("prefetch", &dataset::prefetch)
      .def("open", [](const dataset& d) {
        auto s = std::make_unique<py_stream>();
        runtime& rt = shared_runtime();
        result<std::unique_ptr<element_stream>> r = status(error_code::internal, "not opened");
        {
          py::gil_scoped_release unlocked;
          r = d.open(&rt);
        }
        s->s = check(std::move(r));
        return s;
      });
}

} // namespace runnel::python

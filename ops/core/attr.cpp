#include "runnel/ops/core/attr.hpp"

namespace runnel {

const char* to_string(attr_type t) {
  switch (t) {
    case attr_type::integer:
      return "int";
    case attr_type::real:
      return "float";
    case attr_type::boolean:
      return "bool";
    case attr_type::string:
      return "string";
    case attr_type::type:
      return "type";
    case attr_type::shape:
      return "shape";
    case attr_type::tensor:
      return "tensor";
    case attr_type::list_int:
      return "list(int)";
    case attr_type::list_real:
      return "list(float)";
    case attr_type::list_type:
      return "list(type)";
    case attr_type::list_string:
      return "list(string)";
    case attr_type::list_shape:
      return "list(shape)";
  }
  return "?";
}

attr_type type_of(const attr_value& v) {
  return attr_type(v.index());
}

namespace {
template <class T, class F> std::string join(const std::vector<T>& v, F f) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + f(v[i]);
  return s + "]";
}
std::string real_to_string(double d) {
  std::string s = std::to_string(d);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.')
    s.pop_back();
  return s;
}
} // namespace

std::string attr_to_string(const attr_value& v) {
  struct visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return real_to_string(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::string& s) const { return '"' + s + '"'; }
    std::string operator()(dtype t) const { return std::string(name(t)); }
    std::string operator()(const shape& s) const { return s.to_string(); }
    std::string operator()(const tensor& t) const { return t.to_string(); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return join(v, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double>& v) const { return join(v, real_to_string); }
    std::string operator()(const std::vector<dtype>& v) const {
      return join(v, [](dtype t) { return std::string(name(t)); });
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return join(v, [](const std::string& s) { return '"' + s + '"'; });
    }
    std::string operator()(const std::vector<shape>& v) const {
      return join(v, [](const shape& s) { return s.to_string(); });
    }
  };
  return std::visit(visitor{}, v);
}

} // namespace runnel

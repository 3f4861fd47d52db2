// Kernels and builders of ParseExample, ParseSingleExample, ParseSingleSequenceExample and
// DecodeRaw. The op definitions are in ops/defs/parsing_ops.cpp.
#include <bit>
#include <cstring>

#include "runnel/storage/example_parse.hpp"

namespace runnel {
namespace {

attr_map spec_attrs(const std::vector<feature_spec>& specs, std::vector<dtype> out_types) {
  std::vector<std::string> keys;
  std::vector<dtype> types, default_types;
  std::vector<int64_t> layouts, has_default;
  std::vector<shape> shapes;
  for (auto& s : specs) {
    keys.push_back(s.key);
    types.push_back(s.type);
    layouts.push_back(int64_t(s.layout));
    shapes.push_back(s.shape);
    has_default.push_back(s.default_value ? 1 : 0);
    if (s.default_value)
      default_types.push_back(s.type);
  }
  return {{"keys", keys},       {"types", types},         {"layouts", layouts},
          {"shapes", shapes},   {"has_default", has_default}, {"Tdefaults", default_types},
          {"Toutputs", std::move(out_types)}};
}

std::vector<output> build_parse(std::string_view op, output serialized,
                                const std::vector<feature_spec>& specs, std::string_view name) {
  auto parser = example_parser::create(specs);
  if (!parser)
    throw error(parser.error().with_context(std::string(op)));
  graph& g = serialized.owner();
  std::vector<endpoint> in{serialized.ep()};
  for (auto& s : specs)
    if (s.default_value)
      in.push_back(g.build("Const", s.key + "_default", {}, {{"value", *s.default_value},
                                                              {"dtype", s.type}})[0]
                       .ep());
  return g.build(op, name.empty() ? op : name, in, spec_attrs(specs, parser->output_types()));
}

/// Specs rebuilt from a node's attributes and its default inputs.
result<std::vector<feature_spec>> specs_from(const kernel_construction& c) {
  auto keys = c.attr<std::vector<std::string>>("keys");
  auto types = c.attr<std::vector<dtype>>("types");
  auto layouts = c.attr<std::vector<int64_t>>("layouts");
  auto shapes = c.attr<std::vector<shape>>("shapes");
  auto has_default = c.attr<std::vector<int64_t>>("has_default");
  if (types.size() != keys.size() || has_default.size() != keys.size())
    return invalid_argument("keys, types and has_default must have one entry per feature");
  std::vector<feature_spec> specs;
  for (size_t i = 0; i < keys.size(); ++i)
    specs.push_back({keys[i], types[i], shapes[i], feature_layout(layouts[i]), std::nullopt});
  return specs;
}

class parse_kernel : public kernel {
public:
  parse_kernel(std::vector<feature_spec> specs, std::vector<int64_t> has_default, bool batch)
      : specs_(std::move(specs)), has_default_(std::move(has_default)), batch_(batch) {
    for (auto d : has_default_)
      any_default_ |= d != 0;
  }
  status compute(kernel_context& ctx) override {
    // Defaults are inputs; bind them to the specs on first use (they are usually constants).
    if (!parser_ || any_default_) {
      int k = 1;
      for (size_t i = 0; i < specs_.size(); ++i)
        if (has_default_[i])
          specs_[i].default_value = ctx.input(k++);
      auto p = example_parser::create(specs_);
      if (!p)
        return p.error();
      parser_.emplace(std::move(p).value());
    }
    const tensor& in = ctx.input(0);
    std::vector<tensor> out;
    if (batch_) {
      if (in.rank() != 1)
        return invalid_argument("serialized must be a vector of records, got shape " +
                                in.shape().to_string());
      RUNNEL_RETURN_IF_ERROR(parser_->parse_batch(in.flat<std::string>(), out));
    } else {
      if (in.rank() != 0)
        return invalid_argument("serialized must be one record (a scalar), got shape " +
                                in.shape().to_string());
      RUNNEL_RETURN_IF_ERROR(parser_->parse_single(*in.data<std::string>(), out));
    }
    for (size_t i = 0; i < out.size(); ++i)
      ctx.set_output(int(i), std::move(out[i]));
    return {};
  }
private:
  std::vector<feature_spec> specs_;
  std::vector<int64_t> has_default_;
  bool batch_;
  bool any_default_ = false;
  std::optional<example_parser> parser_;
};

kernel_factory parse_factory(bool batch) {
  return [batch](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    auto specs = specs_from(c);
    if (!specs)
      return specs.error();
    auto k = std::make_unique<parse_kernel>(std::move(specs).value(),
                                            c.attr<std::vector<int64_t>>("has_default"), batch);
    return std::unique_ptr<kernel>(std::move(k));
  };
}

class sequence_kernel : public kernel {
public:
  explicit sequence_kernel(const kernel_construction& c) {
    auto make = [&](const char* keys, const char* types, const char* shapes) {
      std::vector<feature_spec> out;
      auto k = c.attr<std::vector<std::string>>(keys);
      auto t = c.attr<std::vector<dtype>>(types);
      auto s = c.attr<std::vector<shape>>(shapes);
      for (size_t i = 0; i < k.size() && i < t.size() && i < s.size(); ++i)
        out.push_back({k[i], t[i], s[i], feature_layout::fixed, std::nullopt});
      return out;
    };
    context_ = make("context_keys", "context_types", "context_shapes");
    sequence_ = make("sequence_keys", "sequence_types", "sequence_shapes");
  }
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    if (in.rank() != 0)
      return invalid_argument("serialized must be one record (a scalar), got shape " +
                              in.shape().to_string());
    std::vector<tensor> out;
    RUNNEL_RETURN_IF_ERROR(
        parse_single_sequence_example(*in.data<std::string>(), context_, sequence_, out));
    for (size_t i = 0; i < out.size(); ++i)
      ctx.set_output(int(i), std::move(out[i]));
    return {};
  }

private:
  std::vector<feature_spec> context_, sequence_;
};

class decode_raw_kernel : public kernel {
public:
  explicit decode_raw_kernel(const kernel_construction& c)
      : type_(c.attr<dtype>("out_type")), little_(c.attr<bool>("little_endian")) {}
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    size_t elem = size_of(type_);
    auto strings = in.flat<std::string>();
    size_t len = strings.empty() ? 0 : strings[0].size();
    for (size_t i = 0; i < strings.size(); ++i) {
      if (strings[i].size() != len)
        return invalid_argument("DecodeRaw: element " + std::to_string(i) + " has " +
                                std::to_string(strings[i].size()) + " bytes but element 0 has " +
                                std::to_string(len) + "; all must have the same length");
    }
    if (len % elem)
      return invalid_argument("DecodeRaw: " + std::to_string(len) +
                              " bytes is not a multiple of the size of " +
                              std::string(name(type_)) + " (" + std::to_string(elem) + ")");
    std::vector<int64_t> dims = in.shape().dims();
    dims.push_back(int64_t(len / elem));
    tensor& out = ctx.allocate_output(0, type_, shape(std::move(dims)));
    char* dst = static_cast<char*>(out.raw_data());
    bool swap = little_ != (std::endian::native == std::endian::little);
    for (size_t i = 0; i < strings.size(); ++i) {
      std::memcpy(dst + i * len, strings[i].data(), len);
      if (swap && elem > 1)
        for (size_t k = 0; k < len; k += elem)
          std::reverse(dst + i * len + k, dst + i * len + k + elem);
    }
    return {};
  }

private:
  dtype type_;
  bool little_;
};

} // namespace

std::vector<output> parse_example(output serialized, const std::vector<feature_spec>& specs,
                                  std::string_view name) {
  return build_parse("ParseExample", serialized, specs, name);
}
std::vector<output> parse_single_example(output serialized,
                                         const std::vector<feature_spec>& specs,
                                         std::string_view name) {
  return build_parse("ParseSingleExample", serialized, specs, name);
}

std::vector<output> parse_single_sequence_example(output serialized,
                                                  const std::vector<feature_spec>& context,
                                                  const std::vector<feature_spec>& sequence,
                                                  std::string_view name) {
  std::vector<std::string> ck, sk;
  std::vector<dtype> ct, st, out_types;
  std::vector<shape> cs, ss;
  for (auto& s : context) {
    ck.push_back(s.key);
    ct.push_back(s.type);
    cs.push_back(s.shape);
    out_types.push_back(s.type);
  }
  for (auto& s : sequence) {
    sk.push_back(s.key);
    st.push_back(s.type);
    ss.push_back(s.shape);
    out_types.push_back(s.type);
    out_types.push_back(dtype::i64);
  }
  return serialized.owner().build(
      "ParseSingleSequenceExample", name.empty() ? "ParseSingleSequenceExample" : name,
      {serialized.ep()},
      {{"context_keys", ck}, {"context_types", ct}, {"context_shapes", cs},
       {"sequence_keys", sk}, {"sequence_types", st}, {"sequence_shapes", ss},
       {"Toutputs", out_types}});
}

output decode_raw(output bytes, dtype type, bool little_endian, std::string_view name) {
  return bytes.owner().build("DecodeRaw", name.empty() ? "DecodeRaw" : name, {bytes.ep()},
                             {{"out_type", type}, {"little_endian", little_endian}})[0];
}

void register_parsing_kernels(kernel_registry& reg) {
  auto cpu = device_type::cpu;
  reg.add("ParseExample", cpu, {}, parse_factory(true));
  reg.add("ParseSingleExample", cpu, {}, parse_factory(false));
  reg.add("ParseSingleSequenceExample", cpu, {}, make_kernel<sequence_kernel>);
  reg.add("DecodeRaw", cpu, {}, make_kernel<decode_raw_kernel>);
}

} // namespace runnel

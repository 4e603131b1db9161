#include "frontend/onnx_import.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <onnx/defs/schema.h>

#include "frontend/import_context.h"
#include "frontend/onnx_tensor.h"
#include "frontend/passes.h"

namespace kiln::frontend {
namespace {

bool is_default_domain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }

onnx::ModelProto parse_model(const std::string &bytes, const std::string &what) {
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
  coded.SetRecursionLimit(64);  // ONNX graphs nest only through subgraph attributes
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw ImportError(what + " is not an ONNX model (it does not parse as a ModelProto; truncated or another format?)");
  if (model.ir_version() <= 0 || !model.has_graph())
    throw ImportError(what + " is not an ONNX model (no IR version or no graph)");
  return model;
}

// The opset of the default domain; checked before anything else reads the graph, so a
// too-new model gets Kiln's message, not a confusing one about some node.
int check_versions(const onnx::ModelProto &model, const std::string &what) {
  if (model.ir_version() > kMaxIrVersion)
    throw ImportError(what + " has ONNX IR version " + std::to_string(model.ir_version()) + "; Kiln reads up to " +
                      std::to_string(kMaxIrVersion) +
                      " (ONNX 1.16). Convert it with an ONNX release of that age, e.g. "
                      "onnx.version_converter, or export with an older onnx/torch");
  int opset = -1;
  for (const onnx::OperatorSetIdProto &o : model.opset_import())
    if (is_default_domain(o.domain())) opset = static_cast<int>(o.version());
  if (opset < 0) throw ImportError(what + " does not import the default ONNX opset");
  auto refuse = [&](const std::string &detail) {
    throw ImportError(what + " uses opset " + std::to_string(opset) + detail + "; Kiln imports opsets " +
                      std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                      ". Re-export with opset_version=" + std::to_string(opset < kMinOpset ? kMinOpset : kMaxOpset));
  };
  if (opset > kMaxOpset) refuse("");
  if (opset < kMinOpset) {
    // An older opset means the same as opset 11 for every operator whose definition
    // did not change in between (ONNX's schema registry knows when each changed).
    for (const onnx::NodeProto &n : model.graph().node()) {
      if (!is_default_domain(n.domain())) continue;
      const onnx::OpSchema *then = onnx::OpSchemaRegistry::Schema(n.op_type(), opset, "");
      const onnx::OpSchema *now = onnx::OpSchemaRegistry::Schema(n.op_type(), kMinOpset, "");
      if (then && now && then->SinceVersion() != now->SinceVersion())
        refuse(", and " + n.op_type() + " changed meaning by opset " + std::to_string(now->SinceVersion()));
    }
    return kMinOpset;
  }
  return opset;
}

// Reads a tensor stored as external data into its raw_data, so that the rest of the
// importer sees one kind of tensor. The location must stay inside `dir` (no absolute
// path, no "..": a model must not make Kiln read other files) and offset + length must
// lie within the file, checked before anything is allocated.
void load_external_tensor(onnx::TensorProto &t, const std::string &dir, const std::string &what) {
  const std::string tensor = "tensor '" + t.name() + "'";
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &entry : t.external_data()) {
    const std::string &key = entry.key();
    if (key == "location") {
      location = entry.value();
    } else if (key == "offset" || key == "length") {
      int64_t v = -1;
      try {
        size_t used = 0;
        v = std::stoll(entry.value(), &used);
        if (used != entry.value().size()) v = -1;
      } catch (const std::exception &) {
      }
      if (v < 0)
        throw ImportError(what + ": " + tensor + " has external data " + key + " '" + entry.value() +
                          "', which is not a non-negative integer");
      (key == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) throw ImportError(what + ": " + tensor + " is stored as external data but names no file");
  if (dir.empty())
    throw ImportError(what + ": " + tensor + " is stored in external file '" + location +
                      "', which only a model read from a file can name; import the .onnx file from its folder");
  const std::filesystem::path rel(location);
  bool escapes = rel.is_absolute() || rel.has_root_name();
  for (const auto &part : rel) escapes = escapes || part == "..";
  if (escapes)
    throw ImportError(what + ": " + tensor + " names external file '" + location +
                      "' outside the model's folder; external data must be a relative path without '..'");
  const std::filesystem::path file = std::filesystem::path(dir) / rel;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw ImportError(what + ": " + tensor + " is stored in '" + file.string() +
                      "', which does not exist or is not a file; keep the model's data file beside it");
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(file, ec));
  if (ec) throw ImportError(what + ": cannot read external data file '" + file.string() + "'");
  if (length < 0) length = offset <= size ? size - offset : 0;
  if (offset > size || length > size - offset)
    throw ImportError(what + ": " + tensor + " claims bytes " + std::to_string(offset) + " to " +
                      std::to_string(offset + length) + " of '" + file.string() + "', which holds " +
                      std::to_string(size) + " (truncated data file?)");
  std::ifstream in(file, std::ios::binary);
  std::string bytes(static_cast<size_t>(length), '\0');
  if (!in || !in.seekg(offset) || !in.read(bytes.data(), length))
    throw ImportError(what + ": cannot read " + tensor + " from '" + file.string() + "'");
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}

// Initializers and Constant nodes' values stored as external data, read in.
void load_external_data(onnx::GraphProto &graph, const std::string &dir, const std::string &what) {
  for (onnx::TensorProto &t : *graph.mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) load_external_tensor(t, dir, what);
  for (onnx::NodeProto &n : *graph.mutable_node())
    for (onnx::AttributeProto &a : *n.mutable_attribute())
      if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL)
        load_external_tensor(*a.mutable_t(), dir, what);
}

// One error naming every operator Kiln cannot import, with counts.
void check_supported(const onnx::GraphProto &graph, const std::string &what) {
  std::map<std::string, int> missing;
  for (const onnx::NodeProto &n : graph.node()) {
    std::string key = is_default_domain(n.domain()) ? n.op_type() : n.domain() + "::" + n.op_type();
    if (!is_default_domain(n.domain()) || !op_importers().count(n.op_type())) ++missing[key];
  }
  if (missing.empty()) return;
  std::string list;
  for (const auto &[op, count] : missing) list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(count) + ")";
  throw ImportError(what + " uses operators Kiln does not import: " + list);
}

// An input's dimensions from `--shape NAME=1xseq`, names resolved through --dim.
std::optional<std::vector<int64_t>> named_input_shape(const std::string &input, const ImportOptions &options) {
  auto dims = options.input_dims.find(input);
  if (dims == options.input_dims.end()) return std::nullopt;
  std::vector<int64_t> shape;
  for (const std::string &d : dims->second) {
    if (!d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      shape.push_back(std::stoll(d));
      continue;
    }
    auto value = options.dim_values.find(d);
    if (value == options.dim_values.end())
      throw ImportError("--shape for '" + input + "' names the dimension '" + d +
                        "', which no --dim gives: add --dim " + d + "=VALUE (or a range, --dim " + d + "=1..512)");
    shape.push_back(value->second);
  }
  return shape;
}

std::vector<int64_t> input_shape(const onnx::ValueInfoProto &in, const ImportOptions &options) {
  auto fixed = options.input_shapes.find(in.name());
  std::optional<std::vector<int64_t>> named = named_input_shape(in.name(), options);
  std::map<std::string, std::vector<int64_t>> resolved;
  if (named) {
    resolved[in.name()] = *named;
    fixed = resolved.begin();
  }
  if (!in.type().has_tensor_type())
    throw ImportError("graph input '" + in.name() + "' is not a tensor; Kiln imports tensor inputs only");
  const onnx::TypeProto_Tensor &tensor = in.type().tensor_type();
  if (named || fixed != options.input_shapes.end()) {
    if (tensor.has_shape() && tensor.shape().dim_size() != static_cast<int>(fixed->second.size()))
      throw ImportError("--shape " + in.name() + "=" + shape_string(fixed->second) + " has rank " +
                        std::to_string(fixed->second.size()) + " but the model's input has rank " +
                        std::to_string(tensor.shape().dim_size()));
    // An axis the model names after a dimension that --dim sets must agree with it: the
    // other inputs on that dimension follow --dim, and the graph would not fit together.
    for (int k = 0; tensor.has_shape() && k < tensor.shape().dim_size(); ++k) {
      const onnx::TensorShapeProto_Dimension &d = tensor.shape().dim(k);
      if (!d.has_dim_param()) continue;
      auto set = options.dim_values.find(d.dim_param());
      if (set == options.dim_values.end() || set->second == fixed->second[static_cast<size_t>(k)]) continue;
      throw ImportError("--shape " + in.name() + "=" + shape_string(fixed->second) + " gives axis " +
                        std::to_string(k) + " the extent " + std::to_string(fixed->second[static_cast<size_t>(k)]) +
                        ", but the model names that axis '" + d.dim_param() + "', which --dim sets to " +
                        std::to_string(set->second) + ": leave " + in.name() + " to --dim, or write the axis as '" +
                        d.dim_param() + "' in --shape");
    }
    return fixed->second;
  }
  if (!tensor.has_shape())
    throw ImportError("graph input '" + in.name() + "' has no shape; give one with --shape " + in.name() + "=DIMS");
  std::vector<int64_t> shape;
  for (int k = 0; k < tensor.shape().dim_size(); ++k) {
    const onnx::TensorShapeProto_Dimension &d = tensor.shape().dim(k);
    if (d.has_dim_param()) {
      auto named = options.dim_values.find(d.dim_param());
      if (named != options.dim_values.end()) {
        shape.push_back(named->second);
        continue;
      }
    }
    if (!d.has_dim_value() || d.dim_value() <= 0) {
      std::string dim = d.has_dim_param() ? "a dynamic dimension '" + d.dim_param() + "'"
                                          : "a dimension of unknown size (dimension " + std::to_string(k) + ")";
      std::string fix = d.has_dim_param()
                            ? "--dim " + d.dim_param() + "=VALUE (or a range, --dim " + d.dim_param() + "=1..512) or "
                            : "";
      throw ImportError("graph input '" + in.name() + "' has " + dim + "; give it with " + fix + "--shape " +
                        in.name() + "=DIMS (e.g. 1x3x224x224)");
    }
    shape.push_back(d.dim_value());
  }
  return shape;
}

}  // namespace

Graph import_onnx_bytes(const std::string &bytes, const ImportOptions &options, const std::string &what) {
  onnx::ModelProto model = parse_model(bytes, what);
  int opset = check_versions(model, what);
  const onnx::GraphProto &graph = model.graph();
  check_supported(graph, what);
  load_external_data(*model.mutable_graph(), options.external_data_dir, what);

  std::set<std::string> graph_inputs, initializer_names;
  for (const onnx::ValueInfoProto &in : graph.input()) graph_inputs.insert(in.name());
  for (const onnx::TensorProto &t : graph.initializer()) initializer_names.insert(t.name());
  std::set<std::string> fixed_inputs;
  for (const auto &[name, shape] : options.input_shapes) fixed_inputs.insert(name);
  for (const auto &[name, dims] : options.input_dims) fixed_inputs.insert(name);
  for (const std::string &name : fixed_inputs)
    if (!graph_inputs.count(name)) {
      std::string names;
      for (const onnx::ValueInfoProto &in : graph.input())
        if (!initializer_names.count(in.name())) names += (names.empty() ? "" : ", ") + in.name();
      throw ImportError("--shape names '" + name + "', which is not a graph input; the inputs are: " + names);
    }
  if (!options.dim_values.empty()) {
    std::set<std::string> named;
    for (const onnx::ValueInfoProto &in : graph.input())
      if (!initializer_names.count(in.name()) && !fixed_inputs.count(in.name()) && in.type().has_tensor_type() &&
          in.type().tensor_type().has_shape())
        for (const onnx::TensorShapeProto_Dimension &d : in.type().tensor_type().shape().dim())
          if (d.has_dim_param()) named.insert(d.dim_param());
    for (const auto &[input, dims] : options.input_dims)
      for (const std::string &d : dims)
        if (!std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; })) named.insert(d);
    for (const auto &[name, value] : options.dim_values)
      if (!named.count(name)) {
        std::string names;
        for (const std::string &n : named) names += (names.empty() ? "" : ", ") + n;
        throw ImportError("--dim names '" + name + "', which no graph input has as a named dimension" +
                          (named.empty() ? std::string(" (the inputs have no named dimensions: use --shape)")
                                         : "; the named dimensions are: " + names));
      }
  }
  ImportContext ctx(opset);
  for (const onnx::TensorProto &t : graph.initializer()) {
    ctx.bind(t.name(), ctx.add_constant(tensor_from_onnx(t), t.name()));
  }
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (initializer_names.count(in.name())) continue;  // an initializer with a default: a constant
    Value v;
    v.name = in.name();
    v.type = {input_shape(in, options),
              dtype_from_onnx(in.type().tensor_type().elem_type(), "graph input '" + in.name() + "'")};
    ValueId id = ctx.graph().add_value(std::move(v));
    ctx.graph().inputs.push_back(id);
    ctx.bind(in.name(), id);
  }
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &in : n.input()) ctx.note_use(in);
  for (const onnx::ValueInfoProto &out : graph.output()) ctx.note_use(out.name());

  const std::map<std::string, OpImporter> &importers = op_importers();
  for (const onnx::NodeProto &n : graph.node()) {
    ctx.begin(n);
    importers.at(n.op_type())(ctx);
    if (n.output_size() > 0 && !n.output(0).empty() && !ctx.lookup(n.output(0))) ctx.fail("produced no output");
  }
  for (const onnx::ValueInfoProto &out : graph.output()) {
    std::optional<ValueId> v = ctx.lookup(out.name());
    if (!v) throw ImportError("graph output '" + out.name() + "' is not produced by any node");
    ctx.graph().outputs.push_back(*v);
  }
  Graph g = std::move(ctx.graph());
  eliminate_dead_nodes(g);
  return g;
}

Graph import_onnx_file(const std::string &path, const ImportOptions &options) {
  // A directory opens as a stream whose size reads as 2^63 - 1 bytes.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ImportError("model file '" + path + "' is a directory; give the path of the .onnx file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw ImportError("cannot open model file '" + path + "'");
  std::streamoff size = in.tellg();
  if (size < 0) throw ImportError("cannot read model file '" + path + "'");
  if (size > options.max_file_bytes)
    throw ImportError("model file '" + path + "' is " + std::to_string(size) + " bytes; Kiln reads models up to " +
                      std::to_string(options.max_file_bytes) + " bytes (protobuf's 2 GiB limit)");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) throw ImportError("cannot read model file '" + path + "'");
  ImportOptions with_dir = options;
  if (with_dir.external_data_dir.empty()) {
    with_dir.external_data_dir = std::filesystem::path(path).parent_path().string();
    if (with_dir.external_data_dir.empty()) with_dir.external_data_dir = ".";
  }
  return import_onnx_bytes(bytes, with_dir, "'" + path + "'");
}

}  // namespace kiln::frontend

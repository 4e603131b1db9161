#include "executor/dynamic_model.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "support/json_checks.h"
#include "support/json_read.h"
#include "support/pieces.h"

namespace kiln::executor {

namespace {

std::string describe_value(const DynamicManifest &m, int64_t value, int dim) {
  const DynamicDim &d = m.dims.at(static_cast<size_t>(dim));
  return "'" + d.name + "' = " + std::to_string(value) + " (the model takes " + std::to_string(d.min) + ".." +
         std::to_string(d.max) + ")";
}

// Copies the leading block common to both shapes (row-major, the same rank) from `src` to `dst`.
void copy_leading(const uint8_t *src, const std::vector<int64_t> &src_shape, uint8_t *dst,
                  const std::vector<int64_t> &dst_shape, int64_t element_bytes, size_t axis = 0) {
  if (src_shape.empty()) {
    std::memcpy(dst, src, static_cast<size_t>(element_bytes));
    return;
  }
  int64_t src_stride = element_bytes, dst_stride = element_bytes;
  for (size_t a = axis + 1; a < src_shape.size(); ++a) src_stride *= src_shape[a], dst_stride *= dst_shape[a];
  const int64_t n = std::min(src_shape[axis], dst_shape[axis]);
  if (axis + 1 == src_shape.size()) {
    std::memcpy(dst, src, static_cast<size_t>(n * element_bytes));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    copy_leading(src + i * src_stride, src_shape, dst + i * dst_stride, dst_shape, element_bytes, axis + 1);
}

// Copies `rows` rows along `axis` from row `src_first` of `src` to row `dst_first` of
// `dst` (row-major, the same rank; the extents of every other axis agree).
void copy_rows(const uint8_t *src, const std::vector<int64_t> &src_shape, int64_t src_first, uint8_t *dst,
               const std::vector<int64_t> &dst_shape, int64_t dst_first, size_t axis, int64_t rows,
               int64_t element_bytes) {
  int64_t outer = 1, inner = element_bytes;
  for (size_t a = 0; a < axis; ++a) outer *= src_shape[a];
  for (size_t a = axis + 1; a < src_shape.size(); ++a) inner *= src_shape[a];
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + (o * dst_shape[axis] + dst_first) * inner, src + (o * src_shape[axis] + src_first) * inner,
                static_cast<size_t>(rows * inner));
}

// The axis of `t` along dimension 0 (a model that splits calls has one dimension), or -1.
int split_axis(const DynamicTensor &t) {
  for (size_t a = 0; a < t.axes.size(); ++a)
    if (t.axes[a].dim == 0) return static_cast<int>(a);
  return -1;
}

nlohmann::json tensor_json(const DynamicTensor &t) {
  nlohmann::json axes = nlohmann::json::array();
  for (const DynamicAxis &a : t.axes)
    axes.push_back(a.dim < 0 ? nlohmann::json{{"extent", a.extent}}
                             : nlohmann::json{{"dim", a.dim}, {"scale", a.scale}});
  return {{"name", t.name}, {"dtype", ir::dtype_name(t.dtype)}, {"axes", axes}};
}

// Bounds that keep every extent and element count of a manifest within int64_t.
constexpr int64_t kMaxDimValue = int64_t{1} << 20;
constexpr int64_t kMaxExtent = int64_t{1} << 40;
constexpr int kMaxPieces = 4;

DynamicTensor tensor_from_json(const nlohmann::json &j, size_t dims) {
  DynamicTensor t;
  t.name = j.at("name").get<std::string>();
  t.dtype = ir::parse_dtype(j.at("dtype").get<std::string>());
  for (const nlohmann::json &a : j.at("axes")) {
    DynamicAxis axis;
    if (a.contains("dim")) {
      axis.dim = a.at("dim").get<int>();
      axis.scale = a.at("scale").get<int64_t>();
      if (axis.dim < 0 || static_cast<size_t>(axis.dim) >= dims)
        throw ModelError("dynamic.json: tensor '" + t.name + "' names a dimension it does not have");
      if (axis.scale < 1 || axis.scale > kMaxExtent / kMaxDimValue)
        throw ModelError("dynamic.json: tensor '" + t.name + "' has an axis of " + std::to_string(axis.scale) +
                         " times a dimension");
    } else {
      axis.extent = a.at("extent").get<int64_t>();
      if (axis.extent < 0 || axis.extent > kMaxExtent)
        throw ModelError("dynamic.json: tensor '" + t.name + "' has an extent of " + std::to_string(axis.extent));
    }
    t.axes.push_back(axis);
  }
  return t;
}

}  // namespace

std::string DynamicManifest::bucket_folder(size_t i) const {
  std::string name;
  for (size_t d = 0; d < dims.size(); ++d) {
    std::string part;
    for (char c : dims[d].name) part += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    name += (d ? "_" : "") + part + std::to_string(buckets.at(i).at(d));
  }
  return name;
}

std::vector<int64_t> DynamicManifest::shape_at(const DynamicTensor &t, const std::vector<int64_t> &values) {
  std::vector<int64_t> shape;
  for (const DynamicAxis &a : t.axes)
    shape.push_back(a.dim < 0 ? a.extent : a.scale * values.at(static_cast<size_t>(a.dim)));
  return shape;
}

nlohmann::json DynamicManifest::to_json() const {
  nlohmann::json j{{"kiln_dynamic_model", kDynamicModelFormatVersion}};
  for (const DynamicDim &d : dims) {
    j["dims"].push_back({{"name", d.name}, {"min", d.min}, {"max", d.max}});
    if (d.max_pieces > 1) j["dims"].back()["pieces"] = d.max_pieces;
  }
  j["inputs"] = nlohmann::json::array();
  j["outputs"] = nlohmann::json::array();
  for (const DynamicTensor &t : inputs) j["inputs"].push_back(tensor_json(t));
  for (const DynamicTensor &t : outputs) j["outputs"].push_back(tensor_json(t));
  for (size_t i = 0; i < buckets.size(); ++i)
    j["buckets"].push_back({{"values", buckets[i]}, {"folder", bucket_folder(i)}});
  return j;
}

DynamicManifest DynamicManifest::from_json(const nlohmann::json &j) {
  try {
    if (!j.is_object() || !j.contains("kiln_dynamic_model"))
      throw ModelError("dynamic.json is not a Kiln dynamic model's manifest");
    support::require_int64_numbers(j, "dynamic.json");  // every number of it is an integer
    int version = j.at("kiln_dynamic_model").get<int>();
    if (version != kDynamicModelFormatVersion)
      throw ModelError("dynamic.json has format " + std::to_string(version) + "; this Kiln reads format " +
                       std::to_string(kDynamicModelFormatVersion) + ": compile the model again");
    DynamicManifest m;
    for (const nlohmann::json &d : j.at("dims")) {
      DynamicDim dim{d.at("name").get<std::string>(), d.at("min").get<int64_t>(), d.at("max").get<int64_t>(),
                     d.contains("pieces") ? d.at("pieces").get<int>() : 1};
      if (dim.max_pieces < 1 || dim.max_pieces > kMaxPieces)
        throw ModelError("dynamic.json: dimension '" + dim.name + "' splits calls into " +
                         std::to_string(dim.max_pieces) + " pieces (1.." + std::to_string(kMaxPieces) + ")");
      if (dim.min < 1 || dim.min > dim.max || dim.max > kMaxDimValue)
        throw ModelError("dynamic.json: dimension '" + dim.name + "' ranges over " + std::to_string(dim.min) + ".." +
                         std::to_string(dim.max) +
                         (dim.min < 1         ? ", below 1"
                          : dim.min > dim.max ? ", an empty range"
                                              : "") +
                         (dim.max > kMaxDimValue ? ", past " + std::to_string(kMaxDimValue) : std::string()) +
                         "; a range lies within 1.." + std::to_string(kMaxDimValue) + ": compile the model again");
      if (dim.name.empty()) throw ModelError("dynamic.json: a dimension without a name");
      for (const DynamicDim &other : m.dims)
        if (other.name == dim.name) throw ModelError("dynamic.json names dimension '" + dim.name + "' twice");
      m.dims.push_back(dim);
    }
    if (m.dims.empty()) throw ModelError("dynamic.json lists no dimensions");
    for (const nlohmann::json &t : j.at("inputs")) m.inputs.push_back(tensor_from_json(t, m.dims.size()));
    for (const nlohmann::json &t : j.at("outputs")) m.outputs.push_back(tensor_from_json(t, m.dims.size()));
    for (const nlohmann::json &b : j.at("buckets")) {
      std::vector<int64_t> values = b.at("values").get<std::vector<int64_t>>();
      if (values.size() != m.dims.size()) throw ModelError("dynamic.json: a bucket without a value per dimension");
      for (size_t d = 0; d < values.size(); ++d)
        if (values[d] < m.dims[d].min || values[d] > m.dims[d].max)
          throw ModelError("dynamic.json: a bucket outside dimension '" + m.dims[d].name + "''s range");
      m.buckets.push_back(values);
    }
    if (m.buckets.empty()) throw ModelError("dynamic.json lists no buckets");
    // Every call must have a bucket: one holds the ranges' maxima.
    bool holds_maxima = std::any_of(m.buckets.begin(), m.buckets.end(), [&](const std::vector<int64_t> &b) {
      for (size_t d = 0; d < b.size(); ++d)
        if (b[d] != m.dims[d].max) return false;
      return true;
    });
    if (!holds_maxima) throw ModelError("dynamic.json: no bucket holds the dimensions' largest values");
    for (const DynamicDim &d : m.dims) {
      if (d.max_pieces <= 1) continue;
      if (m.dims.size() > 1)
        throw ModelError("dynamic.json: dimension '" + d.name +
                         "' splits calls, which a model of several "
                         "dynamic dimensions cannot");
      for (const DynamicTensor &t : m.outputs)
        if (split_axis(t) < 0)
          throw ModelError("dynamic.json: dimension '" + d.name + "' splits calls, but output '" + t.name +
                           "' has no axis along it");
    }
    return m;
  } catch (const nlohmann::json::exception &e) {
    throw ModelError(std::string("dynamic.json is damaged: ") + e.what());
  } catch (const std::invalid_argument &e) {
    throw ModelError(std::string("dynamic.json is damaged: ") + e.what());
  }
}

bool is_dynamic_model(const std::string &dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / "dynamic.json", ec);
}

struct DynamicModel::Impl {
  std::string dir;
  DynamicManifest manifest;
  std::vector<std::optional<Model>> buckets;
  // Per loaded bucket: where each of the manifest's inputs is among the bucket model's
  // inputs, and which of its inputs take a dimension's value (by dimension).
  std::vector<std::vector<size_t>> input_index;
  std::vector<std::vector<std::pair<size_t, size_t>>> dim_inputs;
};

DynamicModel::DynamicModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DynamicModel::DynamicModel(DynamicModel &&) noexcept = default;
DynamicModel &DynamicModel::operator=(DynamicModel &&) noexcept = default;
DynamicModel::~DynamicModel() = default;

DynamicModel DynamicModel::load(const std::string &dir) {
  std::ifstream in(std::filesystem::path(dir) / "dynamic.json");
  if (!in) throw ModelError("'" + dir + "' is not a compiled model with dynamic dimensions (no dynamic.json)");
  nlohmann::json j = kiln::support::parse_json_or_discarded(in);
  if (j.is_discarded()) throw ModelError("'" + dir + "/dynamic.json' is not valid JSON: compile the model again");
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->manifest = DynamicManifest::from_json(j);
  impl->buckets.resize(impl->manifest.buckets.size());
  impl->input_index.resize(impl->manifest.buckets.size());
  impl->dim_inputs.resize(impl->manifest.buckets.size());
  return DynamicModel(std::move(impl));
}

const DynamicManifest &DynamicModel::manifest() const { return impl_->manifest; }

void DynamicModel::check_dim_values(const std::vector<int64_t> &values) const {
  const DynamicManifest &m = impl_->manifest;
  if (values.size() != m.dims.size())
    throw ModelError("the model has " + std::to_string(m.dims.size()) + " dynamic dimensions, " +
                     std::to_string(values.size()) + " values were given");
  for (size_t d = 0; d < values.size(); ++d)
    if (values[d] < m.dims[d].min || values[d] > m.dims[d].max)
      throw ModelError(describe_value(m, values[d], static_cast<int>(d)) +
                       " is outside the range the model was compiled for: compile it with a wider --dim " +
                       m.dims[d].name + "=MIN..MAX");
}

std::vector<int64_t> DynamicModel::dim_values(const std::vector<ir::HostTensor> &inputs) const {
  const DynamicManifest &m = impl_->manifest;
  if (inputs.size() != m.inputs.size())
    throw ModelError("the model takes " + std::to_string(m.inputs.size()) + " inputs, " +
                     std::to_string(inputs.size()) + " were given");
  std::vector<int64_t> values(m.dims.size(), -1);
  std::vector<std::string> seen_in(m.dims.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DynamicTensor &t = m.inputs[i];
    const std::vector<int64_t> &shape = inputs[i].shape();
    if (inputs[i].dtype() != t.dtype)
      throw ModelError("input '" + t.name + "' is " + ir::dtype_name(inputs[i].dtype()) + "; the model takes " +
                       ir::dtype_name(t.dtype));
    if (shape.size() != t.axes.size())
      throw ModelError("input '" + t.name + "' has rank " + std::to_string(shape.size()) + "; the model takes rank " +
                       std::to_string(t.axes.size()));
    for (size_t a = 0; a < shape.size(); ++a) {
      const DynamicAxis &axis = t.axes[a];
      if (axis.dim < 0) {
        if (shape[a] != axis.extent)
          throw ModelError("input '" + t.name + "' has extent " + std::to_string(shape[a]) + " along axis " +
                           std::to_string(a) + "; the model takes " + std::to_string(axis.extent) + " there");
        continue;
      }
      size_t d = static_cast<size_t>(axis.dim);
      if (values[d] >= 0 && values[d] != shape[a])
        throw ModelError("inputs '" + seen_in[d] + "' and '" + t.name + "' disagree on the dimension '" +
                         m.dims[d].name + "' (" + std::to_string(values[d]) + " and " + std::to_string(shape[a]) + ")");
      values[d] = shape[a];
      seen_in[d] = t.name;
    }
  }
  for (size_t d = 0; d < values.size(); ++d)
    if (values[d] < 0) throw ModelError("no input gives the dimension '" + m.dims[d].name + "'");
  check_dim_values(values);
  return values;
}

size_t DynamicModel::bucket_of(const std::vector<int64_t> &values) const {
  check_dim_values(values);
  const DynamicManifest &m = impl_->manifest;
  // The bucket that holds the values with the fewest padded elements.
  size_t best = m.buckets.size();
  double best_size = 0;
  for (size_t i = 0; i < m.buckets.size(); ++i) {
    bool holds = true;
    double size = 1;
    for (size_t d = 0; d < values.size(); ++d) {
      holds = holds && m.buckets[i][d] >= values[d];
      size *= static_cast<double>(m.buckets[i][d]);
    }
    if (holds && (best == m.buckets.size() || size < best_size)) best = i, best_size = size;
  }
  if (best == m.buckets.size()) throw ModelError("no bucket of the model holds these dimensions' values");
  return best;
}

Model &DynamicModel::bucket(size_t i) {
  std::optional<Model> &slot = impl_->buckets.at(i);
  if (slot) return *slot;
  const DynamicManifest &m = impl_->manifest;
  Model model = Model::load((std::filesystem::path(impl_->dir) / m.bucket_folder(i)).string());
  std::map<std::string, size_t> by_name;
  for (size_t k = 0; k < model.input_names().size(); ++k) by_name[model.input_names()[k]] = k;
  // dynamic.json is checked against the bucket's own model.json before anything runs:
  // the copies into and out of the bucket trust its shapes, dtypes and scales.
  const std::string fix = ": compile the model again";
  auto describe = [](const ir::TensorType &type) {
    std::string text = std::string(ir::dtype_name(type.dtype)) + " [";
    for (size_t a = 0; a < type.shape.size(); ++a) text += (a ? "x" : "") + std::to_string(type.shape[a]);
    return text + "]";
  };
  auto check_tensor = [&](const char *kind, const DynamicTensor &t, const ir::TensorType &actual) {
    ir::TensorType expected{DynamicManifest::shape_at(t, m.buckets[i]), t.dtype};
    if (actual.shape != expected.shape || actual.dtype != expected.dtype)
      throw ModelError("dynamic.json says " + std::string(kind) + " '" + t.name + "' of bucket '" + m.bucket_folder(i) +
                       "' is " + describe(expected) + ", but the bucket's model.json has " + describe(actual) + fix);
  };
  std::vector<size_t> index;
  for (const DynamicTensor &t : m.inputs) {
    auto it = by_name.find(t.name);
    if (it == by_name.end())
      throw ModelError("bucket '" + m.bucket_folder(i) + "' has no input '" + t.name + "' (dynamic.json names it)" +
                       fix);
    if (std::count(index.begin(), index.end(), it->second))
      throw ModelError("dynamic.json names input '" + t.name + "' twice" + fix);
    check_tensor("input", t, model.input_types()[it->second]);
    index.push_back(it->second);
  }
  std::vector<std::pair<size_t, size_t>> dims;
  for (size_t d = 0; d < m.dims.size(); ++d) {
    auto it = by_name.find("kiln.dim." + m.dims[d].name);
    if (it == by_name.end()) continue;
    const ir::TensorType &type = model.input_types()[it->second];
    int64_t elements = 1;
    for (int64_t extent : type.shape) elements *= extent;
    if (type.dtype != ir::DType::kFloat32 || elements != 1)
      throw ModelError("bucket '" + m.bucket_folder(i) + "' takes dimension '" + m.dims[d].name + "' as " +
                       describe(type) + ", not one float32" + fix);
    dims.push_back({it->second, d});
  }
  if (index.size() + dims.size() != model.input_names().size())
    throw ModelError("bucket '" + m.bucket_folder(i) + "' has " + std::to_string(model.input_names().size()) +
                     " inputs; dynamic.json accounts for " + std::to_string(index.size() + dims.size()) + fix);
  if (model.output_names().size() != m.outputs.size())
    throw ModelError("bucket '" + m.bucket_folder(i) + "' has " + std::to_string(model.output_names().size()) +
                     " outputs; dynamic.json lists " + std::to_string(m.outputs.size()) + fix);
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    if (model.output_names()[o] != m.outputs[o].name)
      throw ModelError("bucket '" + m.bucket_folder(i) + "''s output " + std::to_string(o) + " is '" +
                       model.output_names()[o] + "'; dynamic.json says '" + m.outputs[o].name + "'" + fix);
    check_tensor("output", m.outputs[o], model.output_types()[o]);
  }
  impl_->input_index[i] = std::move(index);
  impl_->dim_inputs[i] = std::move(dims);
  slot.emplace(std::move(model));
  return *slot;
}

std::vector<ir::HostTensor> DynamicModel::random_inputs(const std::vector<int64_t> &values, uint64_t seed) {
  size_t b = bucket_of(values);
  Model &model = bucket(b);
  std::vector<ir::HostTensor> padded = model.random_inputs(seed);
  const DynamicManifest &m = impl_->manifest;
  std::vector<ir::HostTensor> inputs;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const ir::HostTensor &src = padded.at(impl_->input_index[b][i]);
    ir::HostTensor t(m.inputs[i].dtype, DynamicManifest::shape_at(m.inputs[i], values));
    copy_leading(static_cast<const uint8_t *>(src.data()), src.shape(), static_cast<uint8_t *>(t.data()), t.shape(),
                 ir::dtype_bytes(t.dtype()));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::vector<DynamicPiece> DynamicModel::pieces_of(const std::vector<int64_t> &values) const {
  const DynamicManifest &m = impl_->manifest;
  check_dim_values(values);
  if (m.dims.size() == 1 && m.dims[0].max_pieces > 1) {
    std::vector<int64_t> sizes;
    for (const std::vector<int64_t> &b : m.buckets) sizes.push_back(b[0]);
    std::vector<int64_t> split = support::split_into_pieces(values[0], sizes, m.dims[0].max_pieces);
    if (!split.empty()) {
      std::vector<DynamicPiece> pieces;
      int64_t offset = 0;
      for (int64_t size : split) {
        auto bucket = static_cast<size_t>(std::find(sizes.begin(), sizes.end(), size) - sizes.begin());
        pieces.push_back({bucket, offset, std::min(size, values[0] - offset)});
        offset += pieces.back().rows;
      }
      return pieces;
    }
  }
  return {{bucket_of(values), 0, values.empty() ? 0 : values[0]}};
}

std::vector<ir::HostTensor> DynamicModel::run(const std::vector<ir::HostTensor> &inputs) {
  std::vector<int64_t> values = dim_values(inputs);
  std::vector<DynamicPiece> pieces = pieces_of(values);
  const DynamicManifest &m = impl_->manifest;
  if (pieces.size() == 1) return run_bucket(pieces[0].bucket, inputs, values);
  // Each piece runs its rows along the dimension (with the axis' scale) padded up to its
  // bucket; the model's rows never meet, so the pieces' outputs are the call's rows.
  std::vector<ir::HostTensor> outputs;
  for (const DynamicTensor &t : m.outputs) outputs.emplace_back(t.dtype, DynamicManifest::shape_at(t, values));
  for (const DynamicPiece &piece : pieces) {
    Model &model = bucket(piece.bucket);
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t k = impl_->input_index[piece.bucket][i];
      const ir::TensorType &type = model.input_types()[k];
      const int64_t element_bytes = ir::dtype_bytes(type.dtype);
      int64_t bytes = element_bytes;
      for (int64_t d : type.shape) bytes *= d;
      auto *dst = static_cast<uint8_t *>(model.input_data(k));
      std::memset(dst, 0, static_cast<size_t>(bytes));
      const auto *src = static_cast<const uint8_t *>(inputs[i].data());
      int axis = split_axis(m.inputs[i]);
      if (axis < 0) {
        copy_leading(src, inputs[i].shape(), dst, type.shape, element_bytes);
        continue;
      }
      const int64_t scale = m.inputs[i].axes[static_cast<size_t>(axis)].scale;
      copy_rows(src, inputs[i].shape(), scale * piece.offset, dst, type.shape, 0, static_cast<size_t>(axis),
                scale * piece.rows, element_bytes);
    }
    for (const auto &[k, d] : impl_->dim_inputs[piece.bucket]) {
      float value = static_cast<float>(piece.rows);
      std::memcpy(model.input_data(k), &value, sizeof value);
    }
    model.run();
    for (size_t o = 0; o < m.outputs.size(); ++o) {
      const ir::TensorType &type = model.output_types()[o];
      auto axis = static_cast<size_t>(split_axis(m.outputs[o]));
      const int64_t scale = m.outputs[o].axes[axis].scale;
      copy_rows(static_cast<const uint8_t *>(model.output_data(o)), type.shape, 0,
                static_cast<uint8_t *>(outputs[o].data()), outputs[o].shape(), scale * piece.offset, axis,
                scale * piece.rows, ir::dtype_bytes(type.dtype));
    }
  }
  return outputs;
}

std::vector<ir::HostTensor> DynamicModel::run_bucket(size_t b, const std::vector<ir::HostTensor> &inputs,
                                                     const std::vector<int64_t> &values) {
  Model &model = bucket(b);
  const DynamicManifest &m = impl_->manifest;
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t k = impl_->input_index[b][i];
    const ir::TensorType &type = model.input_types()[k];
    int64_t bytes = ir::dtype_bytes(type.dtype);
    for (int64_t d : type.shape) bytes *= d;
    // Padding is zero: token ids stay inside their tables; other padded elements are
    // never read into a real one (frontend/dynamic_shapes.h).
    auto *dst = static_cast<uint8_t *>(model.input_data(k));
    std::memset(dst, 0, static_cast<size_t>(bytes));
    copy_leading(static_cast<const uint8_t *>(inputs[i].data()), inputs[i].shape(), dst, type.shape,
                 ir::dtype_bytes(type.dtype));
  }
  for (const auto &[k, d] : impl_->dim_inputs[b]) {
    float value = static_cast<float>(values[d]);
    std::memcpy(model.input_data(k), &value, sizeof value);
  }
  model.run();
  std::vector<ir::HostTensor> outputs;
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    const ir::TensorType &type = model.output_types()[o];
    ir::HostTensor out(type.dtype, DynamicManifest::shape_at(m.outputs[o], values));
    copy_leading(static_cast<const uint8_t *>(model.output_data(o)), type.shape, static_cast<uint8_t *>(out.data()),
                 out.shape(), ir::dtype_bytes(type.dtype));
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace kiln::executor

// The column names of a feature row (documented one by one in costmodel/README.md).

#include <stdexcept>
#include <unordered_map>

#include "costmodel/feature_layout.h"
#include "costmodel/features.h"

namespace kiln::costmodel {

static std::vector<std::string> build_names() {
  using namespace layout;  // NOLINT: constants of this file's own layout
  static const char *const kOpNames[kNumOpCounts] = {
      "float_mad", "float_addsub", "float_mul", "float_divmod", "float_cmp", "float_math_func", "int_addsub",
      "int_mul",   "int_divmod",   "int_cmp",   "bool_op",      "select_op", "cast_op"};
  static const char *const kAnnotationNames[kNumAnnotationKinds] = {"vec", "unroll", "parallel"};
  static const char *const kPositionNames[kNumPositions] = {"none",          "inner_spatial", "middle_spatial",
                                                            "outer_spatial", "inner_reduce",  "middle_reduce",
                                                            "outer_reduce",  "mixed"};
  static const char *const kGpuNames[kNumGpu] = {"is_gpu",          "blockIdx_x_len",  "blockIdx_y_len",
                                                 "blockIdx_z_len",  "threadIdx_x_len", "threadIdx_y_len",
                                                 "threadIdx_z_len", "vthread_len"};
  static const char *const kBufferNames[kPerBuffer] = {"acc_type_read",
                                                       "acc_type_write",
                                                       "acc_type_read_write",
                                                       "bytes",
                                                       "unique_bytes",
                                                       "lines",
                                                       "unique_lines",
                                                       "reuse_type_loop_multiple_read",
                                                       "reuse_type_serial_multiple_read_write",
                                                       "reuse_type_no_reuse",
                                                       "reuse_dis_iter",
                                                       "reuse_dis_bytes",
                                                       "reuse_ct",
                                                       "bytes_d_reuse_ct",
                                                       "unique_bytes_d_reuse_ct",
                                                       "lines_d_reuse_ct",
                                                       "unique_lines_d_reuse_ct",
                                                       "stride"};
  static const char *const kAllocNames[kNumAlloc] = {"alloc_size", "alloc_prod", "alloc_outer_prod",
                                                     "alloc_inner_prod"};
  static const char *const kOuterNames[kNumOuter] = {"outer_prod", "num_loops", "auto_unroll_max_step"};

  std::vector<std::string> names;
  names.reserve(kNumFeatures);
  for (const char *n : kOpNames) names.emplace_back(n);
  for (const char *a : kAnnotationNames) {
    names.push_back(std::string(a) + "_num");
    names.push_back(std::string(a) + "_prod");
    names.push_back(std::string(a) + "_len");
    for (const char *p : kPositionNames) names.push_back(std::string(a) + "_pos_" + p);
  }
  for (const char *n : kGpuNames) names.emplace_back(n);
  for (size_t b = 0; b < kMaxBuffers; ++b) {
    for (const char *n : kBufferNames) names.push_back("B" + std::to_string(b) + "." + n);
  }
  for (const char *n : kAllocNames) names.emplace_back(n);
  for (const char *n : kOuterNames) names.emplace_back(n);
  for (size_t i = 0; i < kCurvePoints; ++i) names.push_back("arith_intensity_curve_" + std::to_string(i));
  if (names.size() != kNumFeatures) throw std::logic_error("feature names disagree with the feature layout");
  return names;
}

const std::vector<std::string> &feature_names(bool gpu) {
  static const std::vector<std::string> cpu = build_names();
  static const std::vector<std::string> with_gpu = [] {
    static const char *const kGpuProgramNames[layout::kNumGpuProgram] = {"gpu.threads_per_block",
                                                                         "gpu.blocks",
                                                                         "gpu.shared_bytes_per_block",
                                                                         "gpu.local_bytes_per_thread",
                                                                         "gpu.registers_estimate",
                                                                         "gpu.occupancy",
                                                                         "gpu.waves",
                                                                         "gpu.global_bytes",
                                                                         "gpu.shared_bytes",
                                                                         "gpu.local_bytes"};
    std::vector<std::string> names = build_names();
    for (const char *n : kGpuProgramNames) names.emplace_back(n);
    return names;
  }();
  return gpu ? with_gpu : cpu;
}

size_t feature_index(std::string_view name) {
  static const std::unordered_map<std::string, size_t> index = [] {
    std::unordered_map<std::string, size_t> m;
    const auto &names = feature_names(/*gpu=*/true);  // the CPU columns come first
    for (size_t i = 0; i < names.size(); ++i) m.emplace(names[i], i);
    return m;
  }();
  auto it = index.find(std::string(name));
  if (it == index.end()) throw std::invalid_argument("unknown feature name '" + std::string(name) + "'");
  return it->second;
}

std::span<const float> ProgramFeatures::row(size_t i) const {
  return std::span<const float>(values).subspan(i * num_columns, num_columns);
}

}  // namespace kiln::costmodel

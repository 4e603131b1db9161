#include "cli/pipeline_args.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>

#include "cli/common_flags.h"
#include "cli/workload_args.h"
#include "frontend/onnx_import.h"

namespace kiln::cli {

namespace {

bool is_number(const std::string &s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<frontend::DimRange> dim_ranges(const PipelineArgs &args) {
  std::vector<frontend::DimRange> ranges;
  std::set<std::string> names;
  for (const std::string &spec : args.dims) {
    try {
      ranges.push_back(frontend::parse_dim_range(spec));
    } catch (const std::invalid_argument &e) {
      fail(e.what());
    }
    if (!names.insert(ranges.back().name).second) fail("--dim " + ranges.back().name + " is given twice");
  }
  return ranges;
}

// The import options with the fixed dimensions; ranged ones are left to the caller.
frontend::ImportOptions options_from(const PipelineArgs &args) {
  frontend::ImportOptions options;
  for (const std::string &spec : args.shapes) {
    size_t eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0)
      fail("--shape '" + spec + "' must look like NAME=DIMS, e.g. input=1x3x224x224 (or 1xseq with --dim seq=...)");
    const std::string name = spec.substr(0, eq), dims = spec.substr(eq + 1);
    if (options.input_shapes.count(name) || options.input_dims.count(name))
      fail("--shape " + name + " is given twice; give each input's shape once");
    std::vector<std::string> parts;
    std::stringstream ss(dims);
    for (std::string part; std::getline(ss, part, 'x');) parts.push_back(part);
    if (std::all_of(parts.begin(), parts.end(), is_number)) {
      try {
        options.input_shapes[name] = ops::parse_shape(dims);
      } catch (const std::invalid_argument &e) {
        fail("--shape '" + spec + "': " + e.what());
      }
      continue;
    }
    for (const std::string &part : parts)
      if (part.empty() || (!is_number(part) && !std::all_of(part.begin(), part.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
          })))
        fail("--shape '" + spec + "': each dimension is a number or the name of a --dim (letters, digits, _)");
    options.input_dims[name] = parts;
  }
  for (const frontend::DimRange &r : dim_ranges(args))
    if (r.is_fixed()) options.dim_values[r.name] = r.max;
  return options;
}

frontend::Graph import_with(const PipelineArgs &args, const frontend::ImportOptions &options) {
  try {
    return frontend::import_onnx_file(args.model, options);
  } catch (const frontend::ImportError &e) {
    fail(e.what());
  }
}

}  // namespace

void add_pipeline_flags(CLI::App &cmd, PipelineArgs &args) {
  cmd.add_option("--model", args.model,
                 "the ONNX model file (IR up to 10, opsets 11-21; weights inside the file or in external data files "
                 "beside it)")
      ->required();
  cmd.add_option("--shape", args.shapes,
                 "NAME=DIMS: a graph input's shape, e.g. input=1x3x224x224; a dimension may be the name of a --dim "
                 "(input_ids=1xseq with --dim seq=1..128)");
  cmd.add_option("--dim", args.dims,
                 "NAME=VALUE fixes a named dimension of the inputs (the model's dim_param, e.g. batch=1, or a name "
                 "used in --shape); NAME=MIN..MAX makes it dynamic: the model runs any value in the range (compiled "
                 "and tuned as buckets, smaller values padded up exactly); NAME=MIN..MAX@8,16,16,128 or "
                 "@FILE.json (a list of values, or {value: weight}) says which values to expect, which places the "
                 "buckets and weights tuning");
  cmd.add_option("--buckets", args.buckets,
                 "with a dynamic --dim: the most buckets per dimension (a call runs the smallest bucket that holds "
                 "it; more buckets pad less, take longer to compile and tune, and hold more code)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd.add_flag_callback(
      "--no-split", [&args] { args.split = false; },
      "with one dynamic --dim whose rows never meet (a batch: no operator reduces or reads across it): run each "
      "call as one bucket, padded, instead of as up to two buckets on its rows (buckets are then chosen for "
      "padding alone, not as powers of two)");
  cmd.add_flag_callback(
      "--no-layout-rewrite", [&args] { args.layout_rewrite = false; },
      "do not mark the model's weights constant: programs then pack weights on every call instead of "
      "once at load (tasks get other keys; the choice is recorded, and kiln compile says when a database was "
      "tuned with another)");
  cmd.add_option("--layout", args.image_layout,
                 "NCHW|NHWC: the layout convolutions and pools run in; NHWC transposes the model's input once and "
                 "keeps the images channels-last between convolutions (tasks get other keys; the choice is "
                 "recorded, and kiln compile says when a database was tuned with another)")
      ->check(CLI::IsMember({"NCHW", "NHWC"}))
      ->capture_default_str();
  args.winograd_flag = cmd.add_flag_callback(
      "--winograd", [&args] { args.winograd = true; },
      "with --layout NHWC, on by default: run 3x3 stride-1 convolutions as Winograd F(2x2,3x3) or F(4x4,3x3), "
      "whichever saves more multiply-adds, where it saves at least half: an input transform, 16 or 36 matrix "
      "products with weights transformed at import, an output transform carrying the epilogue");
  cmd.add_flag_callback(
         "--no-winograd", [&args] { args.winograd = false; },
         "keep 3x3 convolutions direct (tasks get other keys; the choice is recorded, and kiln compile says when a "
         "database was tuned with another)")
      ->excludes(args.winograd_flag);
}

frontend::PipelineOptions pipeline_options(const PipelineArgs &args) {
  frontend::PipelineOptions options;
  options.layout = frontend::parse_image_layout(args.image_layout);
  options.layout_rewrite = args.layout_rewrite;
  bool nhwc = options.layout == frontend::ImageLayout::kNHWC;
  if (args.winograd && !nhwc && args.winograd_flag && args.winograd_flag->count() > 0)
    fail("--winograd rewrites NHWC convolutions: use it with --layout NHWC (the default)");
  // Winograd is on by default, for the default layout: NCHW alone turns it off.
  options.winograd = args.winograd && nhwc;
  return options;
}

std::string compile_command_line(const PipelineArgs &args, const std::string &db, const std::string &target) {
  std::string line = "kiln compile --model " + shell_quote(args.model);
  for (const std::string &shape : args.shapes) line += " --shape " + shell_quote(shape);
  for (const std::string &dim : args.dims) line += " --dim " + shell_quote(dim);
  if (args.buckets != PipelineArgs{}.buckets) line += " --buckets " + std::to_string(args.buckets);
  if (!args.split) line += " --no-split";
  std::string flags = pipeline_options(args).flags();
  if (!flags.empty()) line += " " + flags;
  if (db != kDefaultDatabase) line += " --db " + shell_quote(db);
  if (!target.empty()) line += " --target " + shell_quote(target);
  std::filesystem::path model(args.model);
  return line + " -o " + shell_quote(model.stem().string() + ".kiln");
}

frontend::PreparedModel prepare_model(const PipelineArgs &args) {
  if (has_dynamic_dims(args))
    fail("this command needs every dimension fixed: give --dim NAME=VALUE instead of a range");
  frontend::PipelineOptions options = pipeline_options(args);
  frontend::Graph graph = import_with(args, options_from(args));
  try {
    return frontend::prepare(std::move(graph), options);
  } catch (const std::invalid_argument &e) {
    fail(e.what());
  }
}

bool has_dynamic_dims(const PipelineArgs &args) {
  for (const frontend::DimRange &r : dim_ranges(args))
    if (!r.is_fixed()) return true;
  return false;
}

namespace {

std::vector<frontend::DimRange> ranged_dims(const PipelineArgs &args) {
  std::vector<frontend::DimRange> ranged;
  for (const frontend::DimRange &r : dim_ranges(args))
    if (!r.is_fixed()) ranged.push_back(r);
  return ranged;
}

// Throws (rather than fail()) so that find_symbolic_axes can say at which values the
// model does not import.
frontend::Graph import_at(const PipelineArgs &args, frontend::ImportOptions options,
                          const std::vector<frontend::DimRange> &ranged, const std::vector<int64_t> &values) {
  for (size_t d = 0; d < ranged.size(); ++d) options.dim_values[ranged[d].name] = values[d];
  return frontend::import_onnx_file(args.model, options);
}

executor::DynamicTensor dynamic_tensor(const frontend::SymbolicGraph &s, frontend::ValueId v) {
  const frontend::Value &value = s.at_max.values[static_cast<size_t>(v)];
  executor::DynamicTensor t{value.name, value.type.dtype, {}};
  for (size_t a = 0; a < value.type.shape.size(); ++a) {
    const frontend::SymbolicAxis &sa = s.axes[static_cast<size_t>(v)][a];
    t.axes.push_back(sa.is_symbolic() ? executor::DynamicAxis{0, sa.symbol, sa.scale}
                                      : executor::DynamicAxis{value.type.shape[a], -1, 1});
  }
  return t;
}

}  // namespace

DynamicPlan plan_dynamic(const PipelineArgs &args) {
  const std::vector<frontend::DimRange> ranged = ranged_dims(args);
  DynamicPlan plan;
  const frontend::ImportOptions fixed = options_from(args);
  try {
    plan.symbolic = frontend::find_symbolic_axes(
        [&](const std::vector<int64_t> &values) {
          try {
            return import_at(args, fixed, ranged, values);
          } catch (const frontend::ImportError &e) {
            // The same refusal at the range's low end is not the values' fault (a
            // dimension not given, say): it is reported as it is, not as a range to narrow.
            std::vector<int64_t> lows;
            for (const frontend::DimRange &r : ranged) lows.push_back(r.min);
            if (values != lows) {
              try {
                import_at(args, fixed, ranged, lows);
              } catch (const frontend::ImportError &at_low) {
                if (std::string(at_low.what()) == e.what()) throw frontend::DynamicShapeError(e.what());
              }
            }
            throw;
          }
        },
        ranged);
  } catch (const frontend::DynamicShapeError &e) {
    fail(e.what());
  }
  executor::DynamicManifest &m = plan.manifest;
  for (const frontend::DimRange &r : ranged) m.dims.push_back({r.name, r.min, r.max});
  for (frontend::ValueId in : plan.symbolic.at_max.inputs) m.inputs.push_back(dynamic_tensor(plan.symbolic, in));
  for (frontend::ValueId out : plan.symbolic.at_max.outputs) m.outputs.push_back(dynamic_tensor(plan.symbolic, out));
  for (size_t d = 0; d < ranged.size(); ++d) {
    bool used = false;
    for (const executor::DynamicTensor &t : m.inputs)
      for (const executor::DynamicAxis &a : t.axes) used = used || a.dim == static_cast<int>(d);
    if (!used) fail("--dim " + ranged[d].name + ": no input axis follows it");
  }
  // One dimension whose rows never meet (a batch): a call runs as up to two buckets on
  // its rows, powers of two, so that padding stays small.
  bool split = false;
  if (ranged.size() == 1) {
    try {
      plan.not_split = args.split ? frontend::rows_interact(plan.symbolic, 0) : "--no-split";
    } catch (const frontend::DynamicShapeError &e) {
      fail(e.what());
    }
    split = plan.not_split.empty();
    if (split) m.dims[0].max_pieces = 2;
  }
  // Every combination of the dimensions' buckets, and how often a call runs each.
  std::vector<std::vector<int64_t>> per_dim;
  std::vector<std::vector<double>> mass;
  for (const frontend::DimRange &r : ranged) {
    per_dim.push_back(split ? frontend::choose_split_buckets(r, args.buckets)
                            : frontend::choose_buckets(r, args.buckets));
    mass.push_back(frontend::bucket_runs(r, per_dim.back(), split ? 2 : 1));
  }
  std::vector<size_t> index(ranged.size(), 0);
  while (true) {
    std::vector<int64_t> values;
    double p = 1;
    for (size_t d = 0; d < ranged.size(); ++d) values.push_back(per_dim[d][index[d]]), p *= mass[d][index[d]];
    m.buckets.push_back(values);
    plan.bucket_weights.push_back(p);
    size_t d = ranged.size();
    while (d > 0 && ++index[d - 1] == per_dim[d - 1].size()) index[--d] = 0;
    if (d == 0) break;
  }
  if (m.buckets.size() > 64)
    fail(std::to_string(m.buckets.size()) +
         " buckets (every combination of the dimensions' buckets): at most 64; "
         "give fewer with --buckets, or fix a dimension with --dim NAME=VALUE");
  return plan;
}

frontend::PreparedModel prepare_bucket(const PipelineArgs &args, const DynamicPlan &plan, size_t i) {
  const std::vector<frontend::DimRange> ranged = ranged_dims(args);
  const std::vector<int64_t> &values = plan.manifest.buckets.at(i);
  frontend::ImportOptions options = options_from(args);
  for (size_t d = 0; d < ranged.size(); ++d) options.dim_values[ranged[d].name] = values[d];
  frontend::Graph graph = import_with(args, options);
  try {
    graph = frontend::bucket_graph(std::move(graph), plan.symbolic, values);
  } catch (const frontend::DynamicShapeError &e) {
    fail(e.what());
  }
  try {
    return frontend::prepare(std::move(graph), pipeline_options(args));
  } catch (const std::invalid_argument &e) {
    fail(e.what());
  }
}

}  // namespace kiln::cli

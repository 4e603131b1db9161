// Second pass of feature extraction: from the store sites of a lowered program to
// one feature row per store. Follows Ansor's per-store features (see README.md for
// the meaning of every column and where this differs from Ansor).

#include "costmodel/features.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "costmodel/feature_layout.h"
#include "costmodel/linear_form.h"
#include "costmodel/store_sites.h"
#include "ir/lower_passes.h"
#include "ir/simplify.h"

namespace kiln::costmodel {

using layout::LoopPosition;
using layout::ReuseType;

/// Ansor's squashing of magnitudes: sign(x) * log2(1 + |x|).
static float slog(double x) { return static_cast<float>(x >= 0 ? std::log2(1 + x) : -std::log2(1 - x)); }

static constexpr double kCacheLineBytes = 64;

namespace {

/// One buffer access of a store: its index lists as linear forms, and the number of
/// elements it touches when the loops from each level inward run in full.
struct AccessGeometry {
  const BufferAccess *access = nullptr;
  std::vector<std::vector<LinearForm>> forms;  ///< per index list, per dimension
  std::vector<double> elements;                ///< per level 0..n (n: no loop runs)
  std::vector<int64_t> outer_region;           ///< per-dimension extent at level 0
  int64_t elem_bytes = 1;
};

/// Per loop: how many store accesses each buffer gets inside it, and the bytes all of
/// them touch during one full run of the loop. Reuse features are read from here.
struct LoopTouches {
  std::unordered_map<const ir::BufferNode *, int> accesses;
  double bytes = 0;
};

struct BufferFeature {
  std::string name;
  AccessType type = AccessType::kRead;
  double bytes = 0, unique_bytes = 0, lines = 0, unique_lines = 0;
  ReuseType reuse = ReuseType::kNoReuse;
  double reuse_dis_iter = 0, reuse_dis_bytes = 0, reuse_ct = 0;
  double stride = 0;
};

}  // namespace

static int loop_level(const StoreSites &s, const StoreSite &site, const ir::VarNode *v) {
  for (size_t j = 0; j < site.loops.size(); ++j) {
    if (s.loops[site.loops[j]].var.get() == v) return static_cast<int>(j);
  }
  return -1;
}

/// The per-dimension extents one store's accesses to a buffer cover when the loops at
/// `level` and inside run in full and the outer ones sit at 0, clamped to the shape.
static std::vector<int64_t> region_at(const StoreSites &s, const StoreSite &site, const AccessGeometry &g,
                                      size_t level) {
  const std::vector<int64_t> &shape = g.access->buffer->shape;
  std::vector<int64_t> lo(shape.size(), ir::Interval::kInf), hi(shape.size(), -ir::Interval::kInf);
  std::optional<ir::Analyzer> analyzer;
  for (size_t a = 0; a < g.forms.size(); ++a) {
    for (size_t d = 0; d < shape.size() && d < g.forms[a].size(); ++d) {
      const LinearForm &f = g.forms[a][d];
      int64_t dlo = 0, dhi = 0;
      if (f.exact) {
        double flo = f.constant, fhi = f.constant;
        for (const auto &[var, c] : f.terms) {
          int j = loop_level(s, site, var);
          if (j < static_cast<int>(level)) continue;
          double span = c * static_cast<double>(s.loops[site.loops[j]].extent - 1);
          (span < 0 ? flo : fhi) += span;
        }
        dlo = static_cast<int64_t>(std::floor(flo));
        dhi = static_cast<int64_t>(std::ceil(fhi));
      } else {
        if (!analyzer) {
          analyzer.emplace();
          for (size_t j = 0; j < site.loops.size(); ++j) {
            const LoopInfo &loop = s.loops[site.loops[j]];
            analyzer->bind(loop.var, ir::Interval{0, j < level ? 0 : loop.extent - 1});
          }
        }
        ir::Interval b = analyzer->bounds(g.access->indices[a][d]);
        dlo = b.bounded() ? b.min : 0;
        dhi = b.bounded() ? b.max : shape[d] - 1;
      }
      lo[d] = std::min(lo[d], dlo);
      hi[d] = std::max(hi[d], dhi);
    }
  }
  std::vector<int64_t> region(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) region[d] = std::clamp<int64_t>(hi[d] - lo[d] + 1, 1, shape[d]);
  return region;
}

static AccessGeometry geometry_of(const StoreSites &s, const StoreSite &site, const BufferAccess &access) {
  AccessGeometry g;
  g.access = &access;
  g.elem_bytes = ir::dtype_bytes(access.buffer->dtype);
  for (const auto &indices : access.indices) {
    std::vector<LinearForm> dims;
    dims.reserve(indices.size());
    for (const ir::Expr &i : indices) dims.push_back(linear_form(i));
    g.forms.push_back(std::move(dims));
  }
  size_t n = site.loops.size();
  g.elements.resize(n + 1);
  for (size_t level = 0; level <= n; ++level) {
    std::vector<int64_t> region = region_at(s, site, g, level);
    g.elements[level] = std::accumulate(region.begin(), region.end(), 1.0,
                                        [](double acc, int64_t r) { return acc * static_cast<double>(r); });
    if (level == 0) g.outer_region = std::move(region);
  }
  return g;
}

/// Whether any index of the access moves with `v`.
static bool uses_loop(const AccessGeometry &g, const ir::VarNode *v) {
  for (const auto &dims : g.forms) {
    for (const LinearForm &f : dims) {
      if (f.coefficient(v) != 0) return true;
    }
  }
  return false;
}

/// Elements between consecutive iterations of `v` in the flattened buffer (the
/// smallest non-zero one over the accesses); 0 when no access moves with it.
static double stride_of(const AccessGeometry &g, const ir::VarNode *v) {
  const std::vector<int64_t> &shape = g.access->buffer->shape;
  double best = 0;
  for (const auto &dims : g.forms) {
    double stride = 0, row = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      if (d < dims.size()) stride += dims[d].coefficient(v) * row;
      row *= static_cast<double>(shape[d]);
    }
    stride = std::abs(stride);
    if (stride != 0 && (best == 0 || stride < best)) best = stride;
  }
  return best;
}

/// Ansor's reuse analysis: walking outward, the first loop the access does not move
/// with re-reads the same data every iteration (loop-multiple-read); a loop inside
/// which other stores touch the same buffer gives serial reuse; otherwise none.
static void compute_reuse(const StoreSites &s, const StoreSite &site, const AccessGeometry &g,
                          const std::vector<LoopTouches> &touches, BufferFeature *out) {
  double dis_iter = 1, dis_bytes = 0;
  for (size_t i = site.loops.size(); i-- > 0;) {
    const LoopInfo &loop = s.loops[site.loops[i]];
    const LoopTouches &touched = touches[site.loops[i]];
    double extent = static_cast<double>(loop.extent);
    if (!uses_loop(g, loop.var.get())) {
      out->reuse = ReuseType::kLoopMultipleRead;
      out->reuse_dis_iter = dis_iter;
      out->reuse_dis_bytes = dis_bytes;
      out->reuse_ct = extent;
      return;
    }
    dis_iter *= extent;
    dis_bytes = touched.bytes;
    auto it = touched.accesses.find(g.access->buffer.get());
    int serial = it == touched.accesses.end() ? 0 : it->second - 1;
    if (serial > 0) {
      out->reuse = ReuseType::kSerialMultipleReadWrite;
      out->reuse_dis_iter = dis_iter / extent;
      out->reuse_dis_bytes = dis_bytes / extent;
      out->reuse_ct = serial;
      return;
    }
  }
  out->reuse = ReuseType::kNoReuse;
}

static BufferFeature buffer_feature(const StoreSites &s, const StoreSite &site, const AccessGeometry &g,
                                    const std::vector<LoopTouches> &touches, double outer_prod) {
  BufferFeature f;
  f.name = g.access->buffer->name;
  f.type = g.access->type;
  double eb = static_cast<double>(g.elem_bytes);
  f.bytes = outer_prod * eb;
  f.unique_bytes = g.elements.front() * eb;

  // Cache lines: loops the access does not move with (innermost first) revisit the
  // same lines; the innermost loop it moves with sets how many lines one pass spans.
  double stride = 0, reduce_ratio = 1;
  size_t n = site.loops.size();
  size_t i = n;
  while (i-- > 0) {
    const LoopInfo &loop = s.loops[site.loops[i]];
    stride = stride_of(g, loop.var.get());
    if (stride != 0) break;
    reduce_ratio *= static_cast<double>(loop.extent);
  }
  f.lines = std::max(1.0, outer_prod / reduce_ratio * std::min(1.0, stride * eb / kCacheLineBytes));
  f.stride = (n > 0 && i == n - 1) ? stride : 0;

  // Unique lines: the touched region is contiguous over its trailing fully covered
  // dimensions plus the next one.
  const std::vector<int64_t> &shape = g.access->buffer->shape;
  double contiguous = eb;
  for (size_t d = shape.size(); d-- > 0;) {
    contiguous *= static_cast<double>(g.outer_region[d]);
    if (g.outer_region[d] != shape[d]) break;
  }
  f.unique_lines = std::max(1.0, f.unique_bytes / std::min(contiguous, kCacheLineBytes));

  compute_reuse(s, site, g, touches, &f);
  return f;
}

static void write_buffer(const BufferFeature &f, float *out) {
  size_t k = 0;
  out[k++] = f.type == AccessType::kRead;
  out[k++] = f.type == AccessType::kWrite;
  out[k++] = f.type == AccessType::kReadWrite;
  out[k++] = slog(f.bytes);
  out[k++] = slog(f.unique_bytes);
  out[k++] = slog(f.lines);
  out[k++] = slog(f.unique_lines);
  out[k++] = f.reuse == ReuseType::kLoopMultipleRead;
  out[k++] = f.reuse == ReuseType::kSerialMultipleReadWrite;
  out[k++] = f.reuse == ReuseType::kNoReuse;
  out[k++] = slog(f.reuse_dis_iter);
  out[k++] = slog(f.reuse_dis_bytes);
  out[k++] = slog(f.reuse_ct);
  // Without reuse the data costs twice what it would with one reuse (Ansor's choice).
  double divisor = f.reuse_ct > 0.5 ? f.reuse_ct : 0.5;
  out[k++] = slog(f.bytes / divisor);
  out[k++] = slog(f.unique_bytes / divisor);
  out[k++] = slog(f.lines / divisor);
  out[k++] = slog(f.unique_lines / divisor);
  out[k++] = slog(f.stride);
}

static bool is_parallel_kind(ir::ForKind k) { return k == ir::ForKind::kParallel || k == ir::ForKind::kThreadBinding; }

/// Count, product, innermost extent and position of the loops of one annotation kind.
static void write_annotation(const StoreSites &s, const StoreSite &site, bool (*matches)(ir::ForKind), float *out) {
  double count = 0, prod = 1, innermost = 0;
  std::optional<LoopPosition> position;
  bool mixed = false;
  for (size_t j = 0; j < site.loops.size(); ++j) {
    const LoopInfo &loop = s.loops[site.loops[j]];
    if (!matches(loop.kind)) continue;
    count += 1;
    prod *= static_cast<double>(loop.extent);
    innermost = static_cast<double>(loop.extent);
    // Spatial or reduce, and where among the loops of that class in this nest.
    bool reduce = site.reduce_vars.count(loop.var.get()) > 0;
    size_t first = site.loops.size(), last = 0;
    for (size_t m = 0; m < site.loops.size(); ++m) {
      if ((site.reduce_vars.count(s.loops[site.loops[m]].var.get()) > 0) != reduce) continue;
      first = std::min(first, m);
      last = std::max(last, m);
    }
    size_t base =
        reduce ? static_cast<size_t>(LoopPosition::kInnerReduce) : static_cast<size_t>(LoopPosition::kInnerSpatial);
    size_t offset = j == last ? 0 : (j == first ? 2 : 1);
    auto p = static_cast<LoopPosition>(base + offset);
    if (position && *position != p) mixed = true;
    position = p;
  }
  out[0] = slog(count);
  out[1] = slog(count > 0 ? prod : 0);
  out[2] = slog(innermost);
  LoopPosition pos = mixed ? LoopPosition::kMixed : position.value_or(LoopPosition::kNone);
  out[3 + static_cast<size_t>(pos)] = 1;
}

static void write_gpu(const StoreSites &s, const StoreSite &site, float *out) {
  static const char *const kTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                                      "threadIdx.y", "threadIdx.z", "vthread"};
  double extents[7] = {1, 1, 1, 1, 1, 1, 1};
  bool gpu = false;
  for (int id : site.loops) {
    const LoopInfo &loop = s.loops[id];
    if (loop.kind != ir::ForKind::kThreadBinding) continue;
    gpu = true;
    for (size_t t = 0; t < 7; ++t) {
      if (loop.thread_tag.rfind(kTags[t], 0) == 0) extents[t] *= static_cast<double>(loop.extent);
    }
  }
  out[0] = gpu;
  for (size_t t = 0; t < 7; ++t) out[1 + t] = gpu ? slog(extents[t]) : 0;
}

/// FLOPs per byte at 10 evenly spaced fractions of the store's FLOPs, walking loop
/// levels from the innermost outward (piecewise linear, on log2 values as in Ansor).
static void write_curve(const StoreSites &s, const StoreSite &site, const std::vector<AccessGeometry> &geometry,
                        float *out) {
  const OpCounts &ops = site.ops;
  double flops = 2 * ops[0];
  for (size_t k = 1; k < 6; ++k) flops += ops[k];
  if (flops <= 0 || site.loops.empty()) return;
  std::vector<double> compute, memory;
  for (size_t i = site.loops.size(); i-- > 0;) {
    flops *= static_cast<double>(s.loops[site.loops[i]].extent);
    double bytes = 0;
    for (const AccessGeometry &g : geometry) bytes += g.elements[i] * static_cast<double>(g.elem_bytes);
    compute.push_back(std::log2(1 + flops));
    memory.push_back(std::log2(1 + bytes));
  }
  size_t pt = 0;
  for (size_t i = 0; i < layout::kCurvePoints; ++i) {
    double target = compute.back() * static_cast<double>(i + 1) / layout::kCurvePoints;
    while (pt + 1 < compute.size() && compute[pt] < target - 1e-4) ++pt;
    if (pt == 0) {
      out[i] = static_cast<float>(compute[0] / memory[0]);
      continue;
    }
    double base = compute[pt - 1] / memory[pt - 1];
    double run = compute[pt] - compute[pt - 1];
    double slope = run > 0 ? (compute[pt] / memory[pt] - base) / run : 0;
    out[i] = static_cast<float>(base + slope * (target - compute[pt - 1]));
  }
}

/// The program-level GPU columns (costmodel/README.md, "GPU programs"): the launch (per
/// thread tag, the largest extent among the program's kernels), the on-chip memory its
/// blocks and threads hold,
/// the occupancy that leaves, and the bytes every store's accesses move per memory level.
static void write_gpu_program(const StoreSites &s, const std::vector<std::vector<AccessGeometry>> &geometry,
                              const GpuLimits &limits, float *out) {
  // The launch: per thread tag, the largest extent bound to it (a cooperative fetch
  // binds the block's threads again, inside the loops that bound them first).
  std::unordered_map<std::string, double> launch;
  for (const LoopInfo &loop : s.loops)
    if (loop.kind == ir::ForKind::kThreadBinding)
      launch[loop.thread_tag] = std::max(launch[loop.thread_tag], static_cast<double>(loop.extent));
  double threads = 1, blocks = 1;
  for (const auto &[tag, extent] : launch) {
    if (tag.rfind("threadIdx", 0) == 0) threads *= extent;
    if (tag.rfind("blockIdx", 0) == 0) blocks *= extent;
  }
  std::unordered_map<const ir::BufferNode *, double> on_chip;  // shared and local buffers: their bytes
  double moved[3] = {0, 0, 0};                                 // by MemoryScope
  for (size_t k = 0; k < s.sites.size(); ++k) {
    const StoreSite &site = s.sites[k];
    double outer_prod = 1;
    for (int id : site.loops) outer_prod *= static_cast<double>(s.loops[id].extent);
    for (const AccessGeometry &g : geometry[k]) {
      const ir::Buffer &b = g.access->buffer;
      moved[static_cast<size_t>(b->scope)] +=
          outer_prod * static_cast<double>(g.elem_bytes) * static_cast<double>(g.forms.size());
      if (b->scope != ir::MemoryScope::kGlobal)
        on_chip[b.get()] = static_cast<double>(b->num_elements() * ir::dtype_bytes(b->dtype));
    }
  }
  double shared = 0, local = 0;
  for (const auto &[buffer, bytes] : on_chip) (buffer->scope == ir::MemoryScope::kShared ? shared : local) += bytes;
  // Registers: the local buffers (accumulators) in 32-bit words, plus the addresses,
  // indices and loop counters every kernel keeps (ptxas reports 16-30 for Kiln's
  // untiled kernels); ptxas itself runs only on the programs that get measured.
  const double registers = std::min(255.0, 24 + std::ceil(local / 4));
  const double warp = std::max(1, limits.warp_size);
  const double warps = std::ceil(threads / warp);
  double resident = limits.max_blocks_per_sm;
  resident = std::min(resident, std::floor(limits.max_threads_per_sm / (warps * warp)));
  if (shared > 0)
    resident = std::min(resident, std::floor(static_cast<double>(limits.shared_memory_per_sm_bytes) / shared));
  resident = std::min(resident, std::floor(limits.registers_per_sm / (registers * warps * warp)));
  resident = std::max(resident, 0.0);
  const double max_warps = std::max(1.0, limits.max_threads_per_sm / warp);
  out[0] = slog(threads);
  out[1] = slog(blocks);
  out[2] = slog(shared);
  out[3] = slog(local);
  out[4] = slog(registers);
  out[5] = static_cast<float>(std::min(1.0, resident * warps / max_warps));
  out[6] = resident > 0 ? static_cast<float>(blocks / (resident * std::max(1, limits.sm_count))) : 0.0f;
  out[7] = slog(moved[static_cast<size_t>(ir::MemoryScope::kGlobal)]);
  out[8] = slog(moved[static_cast<size_t>(ir::MemoryScope::kShared)]);
  out[9] = slog(moved[static_cast<size_t>(ir::MemoryScope::kLocal)]);
}

ProgramFeatures extract_features_lowered(const ir::PrimFunc &lowered, const GpuLimits *gpu) {
  StoreSites s = collect_store_sites(lowered);
  std::vector<std::vector<AccessGeometry>> geometry(s.sites.size());
  std::vector<LoopTouches> touches(s.loops.size());
  for (size_t k = 0; k < s.sites.size(); ++k) {
    const StoreSite &site = s.sites[k];
    for (const BufferAccess &a : site.accesses) geometry[k].push_back(geometry_of(s, site, a));
    for (size_t level = 0; level < site.loops.size(); ++level) {
      LoopTouches &t = touches[site.loops[level]];
      for (const AccessGeometry &g : geometry[k]) {
        t.accesses[g.access->buffer.get()] += 1;
        t.bytes += g.elements[level] * static_cast<double>(g.elem_bytes);
      }
    }
  }

  ProgramFeatures result;
  result.num_columns = gpu ? layout::kNumGpuFeatures : layout::kNumFeatures;
  result.values.assign(s.sites.size() * result.num_columns, 0.0f);
  std::vector<float> gpu_program(layout::kNumGpuProgram, 0.0f);
  if (gpu) write_gpu_program(s, geometry, *gpu, gpu_program.data());
  for (size_t k = 0; k < s.sites.size(); ++k) {
    const StoreSite &site = s.sites[k];
    float *row = result.values.data() + k * result.num_columns;
    if (gpu) std::copy(gpu_program.begin(), gpu_program.end(), row + layout::kGpuProgramBegin);
    result.store_names.push_back(site.buffer->name);
    double outer_prod = 1;
    for (int id : site.loops) outer_prod *= static_cast<double>(s.loops[id].extent);

    for (size_t i = 0; i < layout::kNumOpCounts; ++i) row[layout::kOpsBegin + i] = slog(site.ops[i] * outer_prod);

    float *ann = row + layout::kAnnotationBegin;
    write_annotation(
        s, site, [](ir::ForKind k) { return k == ir::ForKind::kVectorized; }, ann);
    write_annotation(
        s, site, [](ir::ForKind k) { return k == ir::ForKind::kUnrolled; }, ann + layout::kPerAnnotation);
    write_annotation(s, site, is_parallel_kind, ann + 2 * layout::kPerAnnotation);
    write_gpu(s, site, row + layout::kGpuBegin);

    std::vector<BufferFeature> buffers;
    for (const AccessGeometry &g : geometry[k]) buffers.push_back(buffer_feature(s, site, g, touches, outer_prod));
    std::stable_sort(buffers.begin(), buffers.end(), [](const BufferFeature &a, const BufferFeature &b) {
      if (a.lines != b.lines) return a.lines > b.lines;
      if (a.bytes != b.bytes) return a.bytes > b.bytes;
      return a.name < b.name;
    });
    for (size_t b = 0; b < buffers.size() && b < layout::kMaxBuffers; ++b) {
      write_buffer(buffers[b], row + layout::kBufferBegin + b * layout::kPerBuffer);
    }

    if (site.alloc_depth >= 0) {
      double size = static_cast<double>(site.buffer->num_elements() * ir::dtype_bytes(site.buffer->dtype));
      double outer = 1, inner = 1;
      for (size_t j = 0; j < site.loops.size(); ++j) {
        (static_cast<int>(j) < site.alloc_depth ? outer : inner) *= static_cast<double>(s.loops[site.loops[j]].extent);
      }
      float *alloc = row + layout::kAllocBegin;
      alloc[0] = slog(size);
      alloc[1] = slog(size * outer);
      alloc[2] = slog(outer);
      alloc[3] = slog(inner);
    }

    row[layout::kOuterBegin] = slog(outer_prod);
    row[layout::kOuterBegin + 1] = slog(static_cast<double>(site.loops.size()));
    row[layout::kOuterBegin + 2] = slog(static_cast<double>(site.auto_unroll_max_step));

    write_curve(s, site, geometry[k], row + layout::kCurveBegin);
  }
  return result;
}

ProgramFeatures extract_features(const ir::PrimFunc &scheduled, const GpuLimits *gpu) {
  try {
    return extract_features_lowered(ir::lower_for_analysis(scheduled), gpu);
  } catch (const std::exception &e) {
    ProgramFeatures failed;
    failed.num_columns = gpu ? layout::kNumGpuFeatures : layout::kNumFeatures;
    failed.error = e.what();
    return failed;
  }
}

}  // namespace kiln::costmodel

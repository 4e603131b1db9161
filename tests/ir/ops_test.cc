// The operator library against an independent reference: every example workload is
// lowered, run by the interpreter on random inputs, and compared with plain loops
// written here from the ONNX definitions. Plus the user errors of attributes and shapes.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ops/examples.h"
#include "ops/registry.h"
#include "ops/winograd.h"

namespace kiln {
namespace {

using ir::DType;
using ir::HostTensor;
using nlohmann::json;
using Shape = std::vector<int64_t>;

// ---- reference tensors -----------------------------------------------------------------

struct Ref {
  Shape shape;
  std::vector<double> data;
  DType dtype = DType::kFloat32;
};

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Ref make_ref(Shape shape, DType dtype, double value = 0) {
  Ref r{std::move(shape), {}, dtype};
  r.data.assign(count(r.shape), value);
  return r;
}

// Row-major flat offset of a multi-index, and the inverse.
int64_t ravel(const Shape &shape, const Shape &idx) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}
Shape unravel(const Shape &shape, int64_t flat) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

double at(const Ref &r, const Shape &idx) { return r.data[ravel(r.shape, idx)]; }

int64_t axis_of(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

DType acc_type(DType t) {
  if (t == DType::kInt8) return DType::kInt32;
  if (t == DType::kBFloat16) return DType::kFloat32;
  return t;
}

// ---- reference operators (ONNX semantics, written as plain loops) ------------------------

Ref ref_conv2d(const std::vector<Ref> &in, const json &a) {
  const bool nhwc = a["layout"] == "NHWC";
  const Ref &x = in[0], &w = in[1];
  auto st = a["strides"].get<Shape>(), pads = a["pads"].get<Shape>(), dil = a["dilations"].get<Shape>();
  const int64_t g = a["groups"].get<int64_t>();
  const int64_t N = x.shape[0], C = nhwc ? x.shape[3] : x.shape[1], H = nhwc ? x.shape[1] : x.shape[2],
                W = nhwc ? x.shape[2] : x.shape[3];
  const int64_t O = nhwc ? w.shape[3] : w.shape[0], KH = nhwc ? w.shape[0] : w.shape[2],
                KW = nhwc ? w.shape[1] : w.shape[3];
  const int64_t cg = C / g, og = O / g;
  const int64_t OH = (H + pads[0] + pads[2] - dil[0] * (KH - 1) - 1) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - dil[1] * (KW - 1) - 1) / st[1] + 1;
  Ref out = make_ref(nhwc ? Shape{N, OH, OW, O} : Shape{N, O, OH, OW}, acc_type(x.dtype));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = in.size() > 2 ? in[2].data[o] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * st[0] - pads[0] + ky * dil[0], ix = ox * st[1] - pads[1] + kx * dil[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t ic = (o / og) * cg + c;
                double xv = nhwc ? at(x, {n, iy, ix, ic}) : at(x, {n, ic, iy, ix});
                double wv = nhwc ? at(w, {ky, kx, c, o}) : at(w, {o, c, ky, kx});
                acc += xv * wv;
              }
          out.data[ravel(out.shape, nhwc ? Shape{n, oy, ox, o} : Shape{n, o, oy, ox})] = acc;
        }
  return out;
}

// Winograd's transforms as plain loops over their matrices (the matrices themselves are
// checked end to end against direct convolutions in tests/frontend).
Ref ref_winograd_input(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  const ops::WinogradMatrices &w = *ops::winograd_matrices(a["output_tile"].get<int64_t>());
  const int64_t m = w.output_tile, A = w.input_tile;
  const Shape pads = a["pads"].get<Shape>();
  const int64_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3];
  const int64_t TH = (H + pads[0] + pads[2] - 2 + m - 1) / m, TW = (W + pads[1] + pads[3] - 2 + m - 1) / m;
  Ref out = make_ref({A * A, N * TH * TW, C}, x.dtype);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < TH; ++i)
      for (int64_t j = 0; j < TW; ++j)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t e = 0; e < A * A; ++e) {
            double v = 0;
            for (int64_t r = 0; r < A; ++r)
              for (int64_t s = 0; s < A; ++s) {
                int64_t y = m * i + r - pads[0], xx = m * j + s - pads[1];
                double d = y < 0 || y >= H || xx < 0 || xx >= W ? 0.0 : at(x, {n, y, xx, c});
                v += w.bt[e / A][r] * d * w.bt[e % A][s];
              }
            out.data[ravel(out.shape, {e, (n * TH + i) * TW + j, c})] = v;
          }
  return out;
}

Ref ref_winograd_output(const std::vector<Ref> &in, const json &a) {
  const Ref &p = in[0];
  const ops::WinogradMatrices &w = *ops::winograd_matrices(a["output_tile"].get<int64_t>());
  const int64_t m = w.output_tile, A = w.input_tile;
  const int64_t OH = a["height"].get<int64_t>(), OW = a["width"].get<int64_t>();
  const int64_t TH = (OH + m - 1) / m, TW = (OW + m - 1) / m, O = p.shape[2], N = p.shape[1] / (TH * TW);
  Ref out = make_ref({N, OH, OW, O}, p.dtype);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t y = 0; y < OH; ++y)
      for (int64_t x = 0; x < OW; ++x)
        for (int64_t o = 0; o < O; ++o) {
          double v = in.size() > 1 ? in[1].data[o] : 0.0;
          int64_t tile = (n * TH + y / m) * TW + x / m;
          for (int64_t r = 0; r < A; ++r)
            for (int64_t s = 0; s < A; ++s) v += w.at[y % m][r] * at(p, {r * A + s, tile, o}) * w.at[x % m][s];
          out.data[ravel(out.shape, {n, y, x, o})] = v;
        }
  return out;
}

// C[b] = op(A[b]) * op(B[b]) with an optional transposition of each operand.
Ref ref_matmul_core(const Ref &A, const Ref &B, bool ta, bool tb, bool batched) {
  const size_t o = batched ? 1 : 0;
  const int64_t batch = batched ? std::max(A.shape[0], B.shape[0]) : 1;
  const int64_t M = ta ? A.shape[o + 1] : A.shape[o], K = ta ? A.shape[o] : A.shape[o + 1];
  const int64_t N = tb ? B.shape[o] : B.shape[o + 1];
  Ref out = make_ref(batched ? Shape{batch, M, N} : Shape{M, N}, acc_type(A.dtype));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          Shape ia = ta ? Shape{k, i} : Shape{i, k}, ib = tb ? Shape{j, k} : Shape{k, j};
          if (batched) {
            ia.insert(ia.begin(), A.shape[0] == 1 ? 0 : b);
            ib.insert(ib.begin(), B.shape[0] == 1 ? 0 : b);
          }
          acc += at(A, ia) * at(B, ib);
        }
        out.data[(b * M + i) * N + j] = acc;
      }
  return out;
}

Ref ref_dense(const std::vector<Ref> &in, const json &) {
  Ref out = ref_matmul_core(in[0], in[1], false, true, false);
  if (in.size() > 2)
    for (int64_t f = 0; f < count(out.shape); ++f) out.data[f] += in[2].data[f % out.shape[1]];
  return out;
}

// Pooling over the valid (unpadded) taps of each window.
Ref ref_pool(const Ref &x, const json &a, bool is_max) {
  const bool nhwc = a["layout"] == "NHWC";
  auto k = a["kernel"].get<Shape>(), st = a["strides"].get<Shape>(), pads = a["pads"].get<Shape>(),
       dil = a["dilations"].get<Shape>();
  const bool include_pad = a.value("count_include_pad", false);
  const size_t ha = nhwc ? 1 : 2, wa = nhwc ? 2 : 3;
  const int64_t H = x.shape[ha], W = x.shape[wa];
  Shape os = x.shape;
  os[ha] = (H + pads[0] + pads[2] - dil[0] * (k[0] - 1) - 1) / st[0] + 1;
  os[wa] = (W + pads[1] + pads[3] - dil[1] * (k[1] - 1) - 1) / st[1] + 1;
  Ref out = make_ref(os, x.dtype);
  for (int64_t f = 0; f < count(os); ++f) {
    Shape idx = unravel(os, f);
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t valid = 0;
    for (int64_t ky = 0; ky < k[0]; ++ky)
      for (int64_t kx = 0; kx < k[1]; ++kx) {
        Shape src = idx;
        src[ha] = idx[ha] * st[0] - pads[0] + ky * dil[0];
        src[wa] = idx[wa] * st[1] - pads[1] + kx * dil[1];
        if (src[ha] < 0 || src[ha] >= H || src[wa] < 0 || src[wa] >= W) continue;
        double v = at(x, src);
        acc = is_max ? std::max(acc, v) : acc + v;
        ++valid;
      }
    out.data[f] = is_max ? acc : acc / static_cast<double>(include_pad ? k[0] * k[1] : valid);
  }
  return out;
}

Ref ref_global_avg_pool(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  const bool nhwc = a["layout"] == "NHWC";
  const size_t ha = nhwc ? 1 : 2, wa = nhwc ? 2 : 3;
  Shape os = x.shape;
  os[ha] = os[wa] = 1;
  Ref out = make_ref(os, x.dtype);
  for (int64_t f = 0; f < count(x.shape); ++f) {
    Shape idx = unravel(x.shape, f);
    idx[ha] = idx[wa] = 0;
    out.data[ravel(os, idx)] += x.data[f] / static_cast<double>(x.shape[ha] * x.shape[wa]);
  }
  return out;
}

Ref ref_unary(const Ref &x, const std::function<double(double)> &fn) {
  Ref out = x;
  for (double &v : out.data) v = fn(v);
  return out;
}

Ref ref_binary(const Ref &A, const Ref &B, const std::function<double(double, double)> &fn) {
  const size_t rank = std::max(A.shape.size(), B.shape.size());
  auto padded = [&](const Shape &s) {
    Shape p(rank - s.size(), 1);
    p.insert(p.end(), s.begin(), s.end());
    return p;
  };
  Shape pa = padded(A.shape), pb = padded(B.shape), os(rank);
  for (size_t d = 0; d < rank; ++d) os[d] = std::max(pa[d], pb[d]);
  Ref out = make_ref(os, A.dtype);
  for (int64_t f = 0; f < count(os); ++f) {
    Shape idx = unravel(os, f), ia(rank), ib(rank);
    for (size_t d = 0; d < rank; ++d) {
      ia[d] = pa[d] == 1 ? 0 : idx[d];
      ib[d] = pb[d] == 1 ? 0 : idx[d];
    }
    out.data[f] = fn(A.data[ravel(pa, ia)], B.data[ravel(pb, ib)]);
  }
  return out;
}

enum class Reduce { kSum, kMean, kMax, kMin };

Ref ref_reduce(const Ref &x, const json &a, Reduce kind) {
  const size_t rank = x.shape.size();
  std::vector<bool> reduced(rank, a["axes"].empty());
  for (int64_t ax : a["axes"].get<Shape>()) reduced[axis_of(ax, rank)] = true;
  const bool keep = a["keepdims"].get<bool>();
  Shape os;
  for (size_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      os.push_back(x.shape[d]);
    else if (keep)
      os.push_back(1);
  }
  if (os.empty()) os.push_back(1);  // Kiln's representation of a scalar
  double init = kind == Reduce::kMax   ? -std::numeric_limits<double>::infinity()
                : kind == Reduce::kMin ? std::numeric_limits<double>::infinity()
                                       : 0.0;
  Ref out = make_ref(os, x.dtype, init);
  int64_t n = 1;
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d]) n *= x.shape[d];
  for (int64_t f = 0; f < count(x.shape); ++f) {
    Shape idx = unravel(x.shape, f), oi;
    for (size_t d = 0; d < rank; ++d) {
      if (!reduced[d])
        oi.push_back(idx[d]);
      else if (keep)
        oi.push_back(0);
    }
    if (oi.empty()) oi.push_back(0);
    double &o = out.data[ravel(os, oi)];
    double v = x.data[f];
    o = kind == Reduce::kMax ? std::max(o, v) : kind == Reduce::kMin ? std::min(o, v) : o + v;
  }
  if (kind == Reduce::kMean)
    for (double &v : out.data) v /= static_cast<double>(n);
  return out;
}

// Applies `fn` to every 1-d slice of x along `axis` (softmax).
Ref ref_softmax(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  const int64_t axis = axis_of(a["axis"].get<int64_t>(), x.shape.size());
  Ref out = x;
  for (int64_t f = 0; f < count(x.shape); ++f) {
    Shape idx = unravel(x.shape, f);
    if (idx[axis] != 0) continue;  // visit each slice once, from its first element
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t k = 0; k < x.shape[axis]; ++k) {
      idx[axis] = k;
      mx = std::max(mx, at(x, idx));
    }
    for (int64_t k = 0; k < x.shape[axis]; ++k) {
      idx[axis] = k;
      sum += std::exp(at(x, idx) - mx);
    }
    for (int64_t k = 0; k < x.shape[axis]; ++k) {
      idx[axis] = k;
      out.data[ravel(x.shape, idx)] = std::exp(at(x, idx) - mx) / sum;
    }
  }
  return out;
}

Ref ref_layer_norm(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  const int64_t axis = axis_of(a["axis"].get<int64_t>(), x.shape.size());
  const double eps = a["epsilon"].get<double>();
  int64_t inner = 1;
  for (size_t d = axis; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t outer = count(x.shape) / inner;
  Ref out = x;
  for (int64_t o = 0; o < outer; ++o) {
    const double *row = &x.data[o * inner];
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += row[i];
    mean /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) {
      double y = (row[i] - mean) / std::sqrt(var + eps) * in[1].data[i];
      out.data[o * inner + i] = in.size() > 2 ? y + in[2].data[i] : y;
    }
  }
  return out;
}

Ref ref_transpose(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  Shape perm = a["perm"].get<Shape>();
  if (perm.empty())
    for (size_t d = x.shape.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  Shape os;
  for (int64_t p : perm) os.push_back(x.shape[p]);
  Ref out = make_ref(os, x.dtype);
  for (int64_t f = 0; f < count(os); ++f) {
    Shape idx = unravel(os, f), src(x.shape.size());
    for (size_t d = 0; d < perm.size(); ++d) src[perm[d]] = idx[d];
    out.data[f] = at(x, src);
  }
  return out;
}

Ref ref_reshape(const std::vector<Ref> &in, const json &a) {
  Ref out = in[0];
  Shape spec = a["shape"].get<Shape>();
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < spec.size(); ++d) {
    if (spec[d] == 0) spec[d] = in[0].shape[d];
    if (spec[d] == -1)
      infer = static_cast<int64_t>(d);
    else
      known *= spec[d];
  }
  if (infer >= 0) spec[infer] = count(in[0].shape) / known;
  out.shape = spec;
  return out;
}

Ref ref_flatten(const std::vector<Ref> &in, const json &a) {
  Ref out = in[0];
  const int64_t axis = axis_of(a["axis"].get<int64_t>(), in[0].shape.size());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in[0].shape[d];
  out.shape = {outer, count(in[0].shape) / outer};
  return out;
}

Ref ref_concat(const std::vector<Ref> &in, const json &a) {
  const int64_t axis = axis_of(a["axis"].get<int64_t>(), in[0].shape.size());
  Shape os = in[0].shape;
  os[axis] = 0;
  for (const Ref &r : in) os[axis] += r.shape[axis];
  Ref out = make_ref(os, in[0].dtype);
  int64_t start = 0;
  for (const Ref &r : in) {
    for (int64_t f = 0; f < count(r.shape); ++f) {
      Shape idx = unravel(r.shape, f);
      idx[axis] += start;
      out.data[ravel(os, idx)] = r.data[f];
    }
    start += r.shape[axis];
  }
  return out;
}

Ref ref_slice(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  const Shape begin = a["begin"].get<Shape>(), step = a["step"].get<Shape>(), os = a["shape"].get<Shape>();
  Ref out = make_ref(os, x.dtype);
  for (int64_t f = 0; f < count(os); ++f) {
    Shape idx = unravel(os, f);
    for (size_t d = 0; d < idx.size(); ++d) idx[d] = begin[d] + idx[d] * step[d];
    out.data[f] = at(x, idx);
  }
  return out;
}

Ref ref_cast(const std::vector<Ref> &in, const json &a) {
  Ref out = in[0];
  out.dtype = ir::parse_dtype(a["dtype"].get<std::string>());
  if (ir::is_int(out.dtype))
    for (double &v : out.data) v = std::trunc(v);
  if (out.dtype == DType::kBool)
    for (double &v : out.data) v = v != 0 ? 1.0 : 0.0;
  return out;
}

// A comparison: ref_binary's broadcast, bool results.
Ref ref_compare(const std::vector<Ref> &in, const std::function<bool(double, double)> &test) {
  Ref out = ref_binary(in[0], in[1], [&](double a, double b) { return test(a, b) ? 1.0 : 0.0; });
  out.dtype = DType::kBool;
  return out;
}

Ref ref_where(const std::vector<Ref> &in, const json &) {
  // cond ? x : y as (cond, x) then (that, y), each broadcast; NaN marks where the
  // condition is false (the examples' inputs are finite).
  const Ref &cond = in[0], &x = in[1], &y = in[2];
  Ref picked_x = ref_binary(cond, x, [](double c, double v) { return c != 0 ? v : std::nan(""); });
  Ref out = ref_binary(picked_x, y, [](double v, double w) { return std::isnan(v) ? w : v; });
  out.dtype = x.dtype;
  return out;
}

// ONNX Resize on the two spatial axes, in double precision.
Ref ref_resize(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0];
  const bool nhwc = a["layout"] == "NHWC";
  const std::array<size_t, 2> axes = nhwc ? std::array<size_t, 2>{1, 2} : std::array<size_t, 2>{2, 3};
  Shape os = x.shape;
  for (size_t d = 0; d < 2; ++d) os[axes[d]] = a["sizes"][d].get<int64_t>();
  const std::string mode = a["mode"], coordinates = a["coordinate_transformation_mode"], rounding = a["nearest_mode"];
  auto source = [&](size_t d, int64_t o) {
    const double scale = a["scales"][d].get<double>(), len_in = double(x.shape[axes[d]]), len_out = double(os[axes[d]]);
    if (coordinates == "asymmetric") return o / scale;
    if (coordinates == "align_corners") return len_out == 1 ? 0.0 : o * (len_in - 1) / (len_out - 1);
    if (coordinates == "pytorch_half_pixel" && len_out == 1) return 0.0;
    return (o + 0.5) / scale - 0.5;
  };
  auto clamp = [&](int64_t i, size_t d) { return std::clamp<int64_t>(i, 0, x.shape[axes[d]] - 1); };
  Ref out = make_ref(os, x.dtype);
  for (int64_t f = 0; f < count(os); ++f) {
    Shape o = unravel(os, f);
    std::array<double, 2> c = {source(0, o[axes[0]]), source(1, o[axes[1]])};
    auto value = [&](int64_t row, int64_t column) {
      Shape i = o;
      i[axes[0]] = clamp(row, 0);
      i[axes[1]] = clamp(column, 1);
      return at(x, i);
    };
    if (mode == "nearest") {
      std::array<int64_t, 2> i{};
      for (size_t d = 0; d < 2; ++d) {
        double frac = c[d] - std::floor(c[d]);
        i[d] = rounding == "floor"  ? int64_t(std::floor(c[d]))
               : rounding == "ceil" ? int64_t(std::ceil(c[d]))
               : frac == 0.5        ? int64_t(rounding == "round_prefer_ceil" ? std::ceil(c[d]) : std::floor(c[d]))
                                    : int64_t(std::round(c[d]));
      }
      out.data[f] = value(i[0], i[1]);
    } else {
      const auto r = int64_t(std::floor(c[0])), q = int64_t(std::floor(c[1]));
      const double wr = c[0] - std::floor(c[0]), wq = c[1] - std::floor(c[1]);
      out.data[f] = (1 - wr) * ((1 - wq) * value(r, q) + wq * value(r, q + 1)) +
                    wr * ((1 - wq) * value(r + 1, q) + wq * value(r + 1, q + 1));
    }
  }
  return out;
}

Ref ref_take(const std::vector<Ref> &in, const json &a) {
  const Ref &x = in[0], &indices = in[1];
  const auto axis = static_cast<size_t>(a["axis"].get<int64_t>() < 0 ? a["axis"].get<int64_t>() + x.shape.size()
                                                                     : a["axis"].get<int64_t>());
  const int64_t n = x.shape[axis];
  Shape os(x.shape.begin(), x.shape.begin() + static_cast<int64_t>(axis));
  os.insert(os.end(), indices.shape.begin(), indices.shape.end());
  os.insert(os.end(), x.shape.begin() + static_cast<int64_t>(axis) + 1, x.shape.end());
  Ref out = make_ref(os, x.dtype);
  for (int64_t f = 0; f < count(os); ++f) {
    Shape o = unravel(os, f);
    Shape at_index(o.begin() + static_cast<int64_t>(axis),
                   o.begin() + static_cast<int64_t>(axis + indices.shape.size()));
    auto i = static_cast<int64_t>(at(indices, at_index));
    i = std::clamp<int64_t>(i < 0 ? i + n : i, 0, n - 1);
    Shape src(o.begin(), o.begin() + static_cast<int64_t>(axis));
    src.push_back(i);
    src.insert(src.end(), o.begin() + static_cast<int64_t>(axis + indices.shape.size()), o.end());
    out.data[f] = at(x, src);
  }
  return out;
}

using RefOp = std::function<Ref(const std::vector<Ref> &, const json &)>;

const std::map<std::string, RefOp> &reference_ops() {
  auto unary = [](std::function<double(double)> fn) -> RefOp {
    return [fn](const std::vector<Ref> &in, const json &) { return ref_unary(in[0], fn); };
  };
  auto binary = [](std::function<double(double, double)> fn) -> RefOp {
    return [fn](const std::vector<Ref> &in, const json &) { return ref_binary(in[0], in[1], fn); };
  };
  auto reduce = [](Reduce kind) -> RefOp {
    return [kind](const std::vector<Ref> &in, const json &a) { return ref_reduce(in[0], a, kind); };
  };
  static const std::map<std::string, RefOp> ops = {
      {"conv2d", ref_conv2d},
      {"dense", ref_dense},
      {"matmul",
       [](const std::vector<Ref> &in, const json &a) {
         return ref_matmul_core(in[0], in[1], a["transpose_a"], a["transpose_b"], false);
       }},
      {"batch_matmul",
       [](const std::vector<Ref> &in, const json &a) {
         return ref_matmul_core(in[0], in[1], a["transpose_a"], a["transpose_b"], true);
       }},
      {"winograd_input_transform", ref_winograd_input},
      {"winograd_output_transform", ref_winograd_output},
      {"max_pool2d", [](const std::vector<Ref> &in, const json &a) { return ref_pool(in[0], a, true); }},
      {"avg_pool2d", [](const std::vector<Ref> &in, const json &a) { return ref_pool(in[0], a, false); }},
      {"global_avg_pool2d", ref_global_avg_pool},
      {"relu", unary([](double x) { return std::max(x, 0.0); })},
      {"clip",
       [](const std::vector<Ref> &in, const json &a) {
         double lo = a["min"], hi = a["max"];
         return ref_unary(in[0], [=](double x) { return std::min(std::max(x, lo), hi); });
       }},
      {"sigmoid", unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); })},
      {"tanh", unary([](double x) { return std::tanh(x); })},
      {"erf", unary([](double x) { return std::erf(x); })},
      {"gelu", unary([](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); })},
      {"exp", unary([](double x) { return std::exp(x); })},
      {"sqrt", unary([](double x) { return std::sqrt(x); })},
      {"log", unary([](double x) { return std::log(x); })},
      {"neg", unary([](double x) { return -x; })},
      {"abs", unary([](double x) { return std::abs(x); })},
      {"add", binary([](double a, double b) { return a + b; })},
      {"sub", binary([](double a, double b) { return a - b; })},
      {"mul", binary([](double a, double b) { return a * b; })},
      {"div", binary([](double a, double b) { return a / b; })},
      {"maximum", binary([](double a, double b) { return std::max(a, b); })},
      {"minimum", binary([](double a, double b) { return std::min(a, b); })},
      {"pow", binary([](double a, double b) { return std::pow(a, b); })},
      {"reduce_sum", reduce(Reduce::kSum)},
      {"reduce_mean", reduce(Reduce::kMean)},
      {"reduce_max", reduce(Reduce::kMax)},
      {"reduce_min", reduce(Reduce::kMin)},
      {"softmax", ref_softmax},
      {"layer_norm", ref_layer_norm},
      {"transpose", ref_transpose},
      {"reshape", ref_reshape},
      {"flatten", ref_flatten},
      {"concat", ref_concat},
      {"slice", ref_slice},
      {"cast", ref_cast},
      {"logical_not", [](const std::vector<Ref> &in,
                         const json &) { return ref_unary(in[0], [](double v) { return v != 0 ? 0.0 : 1.0; }); }},
      {"where", ref_where},
      {"equal", [](const std::vector<Ref> &in, const json &) { return ref_compare(in, std::equal_to<double>()); }},
      {"less", [](const std::vector<Ref> &in, const json &) { return ref_compare(in, std::less<double>()); }},
      {"less_equal",
       [](const std::vector<Ref> &in, const json &) { return ref_compare(in, std::less_equal<double>()); }},
      {"greater", [](const std::vector<Ref> &in, const json &) { return ref_compare(in, std::greater<double>()); }},
      {"greater_equal",
       [](const std::vector<Ref> &in, const json &) { return ref_compare(in, std::greater_equal<double>()); }},
      {"take", ref_take},
      {"resize", ref_resize},
  };
  return ops;
}

// Evaluates a workload op by op with the reference operators.
std::vector<Ref> reference_run(const ops::Workload &w, const std::vector<Ref> &inputs) {
  std::vector<Ref> results;
  auto resolve = [&](const std::string &name) -> const Ref & {
    if (name.rfind("in", 0) == 0) return inputs.at(std::stoul(name.substr(2)));
    return results.at(std::stoul(name.substr(2)));
  };
  for (const ops::OpCall &call : w.ops) {
    std::vector<Ref> args;
    for (const std::string &a : call.args) args.push_back(resolve(a));
    json attrs = ops::complete_attrs(*ops::find_op(call.op), call.attrs);
    results.push_back(reference_ops().at(call.op)(args, attrs));
  }
  std::vector<Ref> outs;
  for (const std::string &o : w.outputs) outs.push_back(resolve(o));
  return outs;
}

// Domains: logarithms, square roots, powers and divisions get positive inputs away from
// zero so that results are finite and well conditioned.
bool needs_positive_inputs(const ops::Workload &w) {
  for (const ops::OpCall &c : w.ops)
    if (c.op == "sqrt" || c.op == "log" || c.op == "pow" || c.op == "div") return true;
  return false;
}

// ---- the tests -----------------------------------------------------------------------

class OpsExampleTest : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(OpsExampleTest, InterpreterMatchesReference) {
  const ops::NamedWorkload &example = GetParam();
  const ops::Workload &w = example.workload;
  ir::PrimFunc func = te::lower(w.build_dag());

  std::mt19937_64 rng(std::hash<std::string>{}(example.name));
  const bool positive = needs_positive_inputs(w);
  std::vector<HostTensor> inputs;
  std::vector<Ref> refs;
  for (const ir::TensorType &t : w.inputs) {
    HostTensor h(t.dtype, t.shape);
    if (ir::is_float(t.dtype)) {
      positive ? h.fill_random(rng, 0.5, 2.0) : h.fill_random(rng, -1.0, 1.0);
    } else if (t.dtype == DType::kBool) {
      h.fill_random(rng, 0, 1);
    } else {
      h.fill_random(rng, -7, 7);
    }
    Ref r = make_ref(t.shape, t.dtype);
    for (int64_t i = 0; i < h.size(); ++i) r.data[i] = h.get(i);
    inputs.push_back(std::move(h));
    refs.push_back(std::move(r));
  }

  std::vector<HostTensor> outputs = ir::interpret(func, inputs);
  std::vector<Ref> expected = reference_run(w, refs);
  ASSERT_EQ(outputs.size(), expected.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    ASSERT_EQ(outputs[o].shape(), expected[o].shape) << example.name;
    ASSERT_EQ(outputs[o].dtype(), expected[o].dtype) << example.name;
    HostTensor want(expected[o].dtype, expected[o].shape);
    for (int64_t i = 0; i < want.size(); ++i) want.set(i, expected[o].data[i]);
    if (ir::is_float(want.dtype())) {
      for (int64_t i = 0; i < outputs[o].size(); ++i) ASSERT_TRUE(std::isfinite(outputs[o].get(i))) << i;
      // bfloat16 keeps 8 bits of mantissa and the interpreter rounds after every
      // operation, where the reference computes in double and rounds once.
      const double tolerance = want.dtype() == DType::kBFloat16 ? 1e-2 : 1e-5;
      EXPECT_LE(ir::relative_l2_error(outputs[o], want), tolerance) << example.name;
    } else {
      EXPECT_TRUE(ir::exactly_equal(outputs[o], want)) << example.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpsExampleTest, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

TEST(OpsRegistry, WindowAttributesBeyondAnyImageAreRefused) {
  ops::Workload w = ops::Workload::single(
      "conv2d", {ir::TensorType{{1, 3, 8, 8}, DType::kFloat32}, ir::TensorType{{4, 3, 3, 3}, DType::kFloat32}},
      {{"pads", {INT64_MAX, 0, 0, 0}}});
  try {
    w.build_dag();
    ADD_FAILURE() << "pads of 2^63-1 were accepted";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("9223372036854775807"), std::string::npos) << e.what();
  }
}

TEST(OpsRegistry, EveryOperatorHasAnExampleAndAReference) {
  std::set<std::string> used;
  for (const ops::NamedWorkload &e : ops::small_example_workloads())
    for (const ops::OpCall &c : e.workload.ops) used.insert(c.op);
  for (const ops::OpDef &op : ops::all_ops()) {
    EXPECT_TRUE(used.count(op.name)) << op.name << " has no example workload";
    EXPECT_TRUE(reference_ops().count(op.name)) << op.name << " has no reference implementation in this test";
    EXPECT_FALSE(op.summary.empty()) << op.name;
    EXPECT_TRUE(op.default_attrs.is_object()) << op.name;
  }
}

TEST(OpsRegistry, NamesAreUniqueAndFindable) {
  std::set<std::string> names;
  for (const ops::OpDef &op : ops::all_ops()) {
    EXPECT_TRUE(names.insert(op.name).second) << "duplicate " << op.name;
    EXPECT_EQ(ops::find_op(op.name), &op);
  }
  EXPECT_EQ(ops::find_op("no_such_op"), nullptr);
}

TEST(OpsRegistry, ExamplesAreSmallAndUniquelyNamed) {
  std::set<std::string> names;
  for (const ops::NamedWorkload &e : ops::small_example_workloads()) {
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate example " << e.name;
    EXPECT_NO_THROW(ops::Workload::from_json(e.workload.to_json())) << e.name;
  }
  EXPECT_GE(names.size(), 40u);
}

// Multiply-adds (or element visits) of a DAG: every stage's output size times its
// reduction extent. Examples must stay cheap for the interpreter-driven property tests.
int64_t work_of(const te::ComputeDAG &dag) {
  int64_t total = 0;
  for (const te::Tensor &stage : dag.stages) {
    int64_t work = count(stage.shape());
    if (const auto *red = stage->body.as<ir::ReduceNode>())
      for (const ir::IterVar &axis : red->axes) work *= axis.extent;
    total += work;
  }
  return total;
}

TEST(OpsRegistry, ExamplesStayWithinTheWorkBudget) {
  for (const ops::NamedWorkload &e : ops::small_example_workloads())
    EXPECT_LE(work_of(e.workload.build_dag()), 20000) << e.name;
}

// Fusion decides from each operator's pattern alone, so every operator has one, and it
// agrees with what the operator computes: reductions and contractions reduce, element-
// wise and layout operators do not (an operator added without its pattern, or with the
// wrong one, would fuse wrongly and silently).
TEST(OpsRegistry, EveryOperatorHasAFusionPatternMatchingItsCompute) {
  std::map<std::string, bool> reduces;
  for (const ops::NamedWorkload &e : ops::small_example_workloads()) {
    if (e.workload.ops.size() != 1) continue;
    bool any = false;
    for (const te::Tensor &stage : e.workload.build_dag().stages) any = any || stage->body.as<ir::ReduceNode>();
    reduces[e.workload.ops[0].op] = reduces[e.workload.ops[0].op] || any;
  }
  for (const ops::OpDef &op : ops::all_ops()) {
    EXPECT_NE(op.pattern, ops::OpPattern::kUnspecified) << op.name << " has no fusion pattern";
    EXPECT_NE(std::string(ops::to_string(op.pattern)), "unspecified") << op.name;
    auto found = reduces.find(op.name);
    if (found == reduces.end()) continue;  // only in larger examples
    bool should_reduce = op.pattern == ops::OpPattern::kReduction || op.pattern == ops::OpPattern::kOutputFusable;
    // Winograd transforms are contractions written out (unrolled tables), not reductions.
    if (op.name.rfind("winograd_", 0) == 0) continue;
    EXPECT_EQ(found->second, should_reduce) << op.name << " is " << ops::to_string(op.pattern);
  }
}

std::vector<std::string> stage_names(const std::string &example) {
  for (const ops::NamedWorkload &e : ops::small_example_workloads()) {
    if (e.name != example) continue;
    std::vector<std::string> names;
    for (const te::Tensor &t : e.workload.build_dag().stages) names.push_back(t.name());
    return names;
  }
  ADD_FAILURE() << "no example " << example;
  return {};
}

TEST(OpsRegistry, StagesHaveReadableNames) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(stage_names("conv2d_bias_relu_nchw"), (Names{"pad", "conv2d", "bias_add", "relu"}));
  EXPECT_EQ(stage_names("conv2d_nchw_1x1_bias"), (Names{"conv2d", "bias_add"}));  // no padding, no pad stage
  EXPECT_EQ(stage_names("dense_bias_gelu"), (Names{"dense", "bias_add", "gelu"}));
  EXPECT_EQ(stage_names("softmax"), (Names{"softmax_max", "softmax_expsum", "softmax_norm"}));
  EXPECT_EQ(stage_names("layer_norm"), (Names{"layer_norm_sum", "layer_norm_var_sum", "layer_norm"}));
  EXPECT_EQ(stage_names("avg_pool2d_s2_p1"), (Names{"pad", "avg_pool2d_sum", "avg_pool2d"}));
}

TEST(OpsRegistry, ExamplesIncludeIntegerTensors) {
  int integer = 0;
  for (const ops::NamedWorkload &e : ops::small_example_workloads())
    for (const ir::TensorType &t : e.workload.inputs) integer += ir::is_int(t.dtype);
  EXPECT_GT(integer, 0);
}

// ---- attributes --------------------------------------------------------------------------

std::string op_error(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const ops::OpError &e) {
    return e.what();
  }
  return "(no OpError)";
}

TEST(OpsAttrs, DefaultsAreMergedAndValuesNormalised) {
  const ops::OpDef &conv = *ops::find_op("conv2d");
  json a = ops::complete_attrs(conv, {{"groups", 2}});
  EXPECT_EQ(a["groups"], 2);
  EXPECT_EQ(a["layout"], "NCHW");
  EXPECT_EQ(a["pads"], json({0, 0, 0, 0}));
  // ONNX-style integer booleans and integer floats are accepted and normalised, so that
  // equal workloads have equal keys.
  json r = ops::complete_attrs(*ops::find_op("reduce_sum"), {{"keepdims", 0}});
  EXPECT_EQ(r["keepdims"], false);
  json c1 = ops::complete_attrs(*ops::find_op("clip"), {{"min", 0}});
  json c2 = ops::complete_attrs(*ops::find_op("clip"), {{"min", 0.0}});
  EXPECT_EQ(c1.dump(), c2.dump());
  EXPECT_EQ(ops::complete_attrs(conv, json()), conv.default_attrs);
}

TEST(OpsAttrs, UnknownAttributeListsValidOnes) {
  std::string msg = op_error([] { ops::complete_attrs(*ops::find_op("conv2d"), {{"stride", {2, 2}}}); });
  EXPECT_NE(msg.find("conv2d"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown attribute 'stride'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("strides"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dilations"), std::string::npos) << msg;
  std::string none = op_error([] { ops::complete_attrs(*ops::find_op("relu"), {{"alpha", 1.0}}); });
  EXPECT_NE(none.find("(none)"), std::string::npos) << none;
}

TEST(OpsAttrs, TypeMismatchesAreRejected) {
  const ops::OpDef &conv = *ops::find_op("conv2d");
  std::string msg = op_error([&] { ops::complete_attrs(conv, {{"groups", "2"}}); });
  EXPECT_NE(msg.find("'groups' must be an integer"), std::string::npos) << msg;
  msg = op_error([&] { ops::complete_attrs(conv, {{"groups", 1.5}}); });
  EXPECT_NE(msg.find("'groups' must be an integer"), std::string::npos) << msg;
  msg = op_error([&] { ops::complete_attrs(conv, {{"strides", {1.5, 2}}}); });
  EXPECT_NE(msg.find("'strides' must be a list of integers"), std::string::npos) << msg;
  msg = op_error([&] { ops::complete_attrs(conv, {{"layout", 1}}); });
  EXPECT_NE(msg.find("'layout' must be a string"), std::string::npos) << msg;
  msg = op_error([] { ops::complete_attrs(*ops::find_op("matmul"), {{"transpose_a", 2}}); });
  EXPECT_NE(msg.find("'transpose_a' must be a boolean"), std::string::npos) << msg;
  msg = op_error([] { ops::complete_attrs(*ops::find_op("clip"), {{"min", "low"}}); });
  EXPECT_NE(msg.find("'min' must be a number"), std::string::npos) << msg;
  msg = op_error([&] { ops::complete_attrs(conv, json::array()); });
  EXPECT_NE(msg.find("must be a JSON object"), std::string::npos) << msg;
}

// ---- shapes and values -------------------------------------------------------------------

using ir::TensorType;

std::string build_error(const std::string &op, std::vector<TensorType> inputs, json attrs = json::object()) {
  return op_error([&] { ops::Workload::single(op, std::move(inputs), std::move(attrs)).build_dag(); });
}

TensorType f32(Shape s) { return TensorType{std::move(s), DType::kFloat32}; }

void expect_contains(const std::string &msg, const std::vector<std::string> &parts) {
  for (const std::string &p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(OpsErrors, WinogradTransformChecks) {
  expect_contains(build_error("winograd_input_transform", {f32({1, 8, 8, 4})}, {{"output_tile", 3}}),
                  {"winograd_input_transform:", "output_tile must be 2 or 4", "got 3"});
  expect_contains(build_error("winograd_input_transform", {f32({1, 2, 2, 4})}), {"a 3x3 window does not fit"});
  expect_contains(build_error("winograd_input_transform", {f32({1, 8, 8, 4})}, {{"pads", {1, -1, 1, 1}}}),
                  {"pads must be non-negative"});
  expect_contains(build_error("winograd_output_transform", {f32({16, 10, 4})}, {{"height", 5}, {"width", 7}}),
                  {"do not come from 4x4 tiles of a 5x7 output", "expected [16, batch * 12, O]"});
  expect_contains(build_error("winograd_output_transform", {f32({36, 6, 4})}, {{"height", 9}, {"width", 7}}),
                  {"do not come from 4x4 tiles"});
  expect_contains(build_error("winograd_output_transform", {f32({16, 12, 4}), f32({5})}, {{"height", 5}, {"width", 7}}),
                  {"bias has shape [5], expected [4]"});
}

TEST(OpsErrors, Conv2dShapeChecks) {
  expect_contains(build_error("conv2d", {f32({1, 3, 7, 7}), f32({4, 4, 3, 3})}),
                  {"conv2d:", "3 channels", "weight needs 3 input channels", "OIHW"});
  expect_contains(build_error("conv2d", {f32({1, 6, 7, 7}), f32({4, 3, 3, 3})}, {{"groups", 4}}),
                  {"input channels (6) are not divisible by groups (4)"});
  expect_contains(build_error("conv2d", {f32({1, 6, 7, 7}), f32({5, 3, 3, 3})}, {{"groups", 2}}),
                  {"output channels (5) are not divisible by groups (2)"});
  expect_contains(build_error("conv2d", {f32({1, 3, 2, 2}), f32({4, 3, 3, 3})}), {"output would be empty"});
  expect_contains(build_error("conv2d", {f32({1, 3, 7, 7}), f32({4, 3, 3, 3})}, {{"strides", {1, 1, 1}}}),
                  {"'strides' needs 2 values, got 3"});
  expect_contains(build_error("conv2d", {f32({1, 3, 7, 7}), f32({4, 3, 3, 3})}, {{"strides", {0, 1}}}),
                  {"strides must be positive"});
  expect_contains(build_error("conv2d", {f32({1, 3, 7, 7}), f32({4, 3, 3, 3})}, {{"layout", "NCWH"}}),
                  {"layout 'NCWH' is not supported"});
  expect_contains(build_error("conv2d", {f32({1, 3, 7, 7}), f32({4, 3, 3, 3}), f32({3})}),
                  {"bias must have shape [4]"});
  expect_contains(build_error("conv2d", {f32({3, 7, 7}), f32({4, 3, 3, 3})}), {"data (NCHW) must have rank 4"});
  expect_contains(build_error("conv2d", {f32({1, 3, 7, 7}), TensorType{{4, 3, 3, 3}, DType::kInt32}}),
                  {"different dtypes"});
}

TEST(OpsErrors, MatrixProductShapeChecks) {
  expect_contains(build_error("dense", {f32({3, 5}), f32({4, 6})}), {"dense:", "[N, 5]", "transB=1"});
  expect_contains(build_error("matmul", {f32({3, 5}), f32({4, 6})}), {"inner dimensions differ", "K=5", "K=4"});
  expect_contains(build_error("batch_matmul", {f32({2, 3, 5}), f32({3, 5, 4})}), {"do not broadcast"});
}

TEST(OpsErrors, PoolingChecks) {
  expect_contains(build_error("max_pool2d", {f32({1, 3, 7, 7})}), {"'kernel' is required"});
  expect_contains(build_error("max_pool2d", {f32({1, 3, 7, 7})}, {{"kernel", {2, 2}}, {"pads", {2, 0, 0, 0}}}),
                  {"smaller than the kernel"});
  expect_contains(build_error("avg_pool2d", {TensorType{{1, 3, 7, 7}, DType::kInt32}}, {{"kernel", {2, 2}}}),
                  {"avg_pool2d:", "floating-point"});
}

TEST(OpsErrors, ElementwiseAndBroadcastChecks) {
  expect_contains(build_error("add", {f32({2, 3}), f32({4})}), {"add:", "[2, 3]", "[4]", "do not broadcast"});
  expect_contains(build_error("div", {TensorType{{2}, DType::kInt32}, TensorType{{2}, DType::kInt32}}),
                  {"div:", "floating-point"});
  expect_contains(build_error("exp", {TensorType{{2}, DType::kInt32}}), {"exp:", "int32"});
  expect_contains(build_error("clip", {f32({2})}, {{"min", 1.0}, {"max", 0.0}}), {"greater than max"});
}

TEST(OpsErrors, AxisChecks) {
  expect_contains(build_error("softmax", {f32({2, 3})}, {{"axis", 2}}), {"softmax:", "axis 2 is out of range"});
  expect_contains(build_error("reduce_sum", {f32({2, 3})}, {{"axes", {1, -1}}}), {"more than once"});
  expect_contains(build_error("layer_norm", {f32({2, 3}), f32({2})}),
                  {"gamma (scale) must have the normalized shape [3]"});
  expect_contains(build_error("transpose", {f32({2, 3})}, {{"perm", {0, 0}}}), {"not a permutation"});
  expect_contains(build_error("slice", {f32({4, 5})}, {{"begin", {0, 1}}, {"step", {1, 2}}, {"shape", {4, 3}}}),
                  {"axis 1 reads elements 1 to 5", "extent 5"});
  expect_contains(build_error("slice", {f32({4, 5})}, {{"begin", {0, 0}}, {"step", {0, 1}}, {"shape", {1, 1}}}),
                  {"has a 0 at axis 0"});
  expect_contains(build_error("reshape", {f32({2, 3})}, {{"shape", {4, -1}}}), {"cannot infer the -1"});
  expect_contains(build_error("reshape", {f32({2, 3})}, {{"shape", {4, 2}}}), {"cannot reshape [2, 3]"});
  expect_contains(build_error("reshape", {f32({2, 3})}), {"'shape' is required"});
  expect_contains(build_error("flatten", {f32({2, 3})}, {{"axis", 3}}), {"flatten:", "out of range"});
  expect_contains(op_error([] {
                    ops::Workload w;
                    w.inputs = {f32({2, 3}), f32({2, 4})};
                    w.ops = {ops::OpCall{"concat", json::object(), {"in0", "in1"}}};
                    w.outputs = {"op0"};
                    w.build_dag();
                  }),
                  {"concat:", "does not match [2, 3] outside axis 0"});
}

}  // namespace
}  // namespace kiln

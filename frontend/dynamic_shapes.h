// Dynamic shapes: a model whose inputs have named dimensions (a BERT's sequence length, a
// batch) that take any value in a declared range at run time.
//
// Kiln compiles such a model as a few static graphs, its *buckets*: the model imported
// with each dimension at a bucket value, run on inputs padded up to it. Padding is exact,
// not an approximation, because every tensor keeps its real elements in the leading part
// of each dynamic axis and the only operators that read across a dynamic axis — those
// that reduce over it (a matrix product's inner dimension, softmax, reductions) — get
// that axis masked by the dimension's actual value, which the bucket graph takes as an
// input (`kiln.dim.NAME`, float32 [1]): padded elements become the reduction's identity
// (0 for sums and products, -inf for maxima and softmax), and a mean divides
// by the actual count. Operators that would read padded elements another way (windows,
// concatenation or layer normalization along a dynamic axis) are refused by name.
//
// Which tensor axes are dynamic is found by importing the model at two values of each
// dimension and comparing the graphs: an axis whose extent moves with the dimension is
// symbolic, with extent scale × value (scale > 1 where a reshape merged it with static
// axes inside it). The same comparison checks that the graph's structure does not depend
// on the value and that constants folded from the dimension (position ids, causal masks)
// hold the same leading elements at every value.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "frontend/graph.h"

namespace kiln::frontend {

/// A model that cannot be compiled for its dynamic dimensions, with what to do.
struct DynamicShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A named dimension and the values it may take at run time.
struct DimRange {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  /// How often each value is expected (any positive scale); empty: every value alike.
  std::map<int64_t, double> weights;

  bool is_fixed() const { return min == max; }
  /// The weight of `value` (1 when no weights were given), normalized over the range.
  double probability(int64_t value) const;
};

/// Parses a `--dim` argument: "seq=128" (fixed), "seq=1..128" (a range), "seq=1..128@8,16,16,128"
/// (a range with expected values, weighted by how often each is listed) or
/// "seq=1..128@FILE.json" (a JSON list of values, or an object mapping values to weights).
/// Throws std::invalid_argument saying what is wrong.
DimRange parse_dim_range(const std::string &spec);

/// The bucket values for a range: at most `count`, always including the maximum, chosen
/// to minimize the expected padding Σ p(n) · bucket(n) / n, where bucket(n) is the least
/// bucket ≥ n. Candidates are the values up to 8 and the multiples of a grid (1 up to
/// a maximum of 63, then 2, 4, and 8 from a maximum of 256): round extents tile well.
std::vector<int64_t> choose_buckets(const DimRange &range, int count);

/// For ascending `buckets` ending at the range's maximum: the probability that a call
/// runs each (the values above the bucket before it, up to it).
std::vector<double> bucket_probabilities(const DimRange &range, const std::vector<int64_t> &buckets);

/// The buckets of a dimension whose calls may be split (rows_interact is empty): powers
/// of two below the maximum, and the maximum; the largest `count`. A call then runs as at
/// most two of them (support::split_into_pieces), so no call pads by more than about a
/// third of its rows (or up to the smallest bucket).
std::vector<int64_t> choose_split_buckets(const DimRange &range, int count);

/// Per bucket, how many times a call runs it, on average over the range's values: with
/// `max_pieces` 1 the probability that a call runs it (bucket_probabilities), else
/// counting every piece of each value's split.
std::vector<double> bucket_runs(const DimRange &range, const std::vector<int64_t> &buckets, int max_pieces);

/// An axis whose extent is scale × a dimension's value.
struct SymbolicAxis {
  int symbol = -1;  ///< index into SymbolicGraph::symbols; -1: a static axis
  int64_t scale = 0;

  bool is_symbolic() const { return symbol >= 0; }
  bool operator==(const SymbolicAxis &) const = default;
};

/// A model's graph with the axes each value has symbolic, found by find_symbolic_axes.
struct SymbolicGraph {
  std::vector<DimRange> symbols;
  /// Per value of the graph (as imported), per axis.
  std::vector<std::vector<SymbolicAxis>> axes;
  /// The graph imported at every dimension's maximum, without constants' data except
  /// those with a symbolic axis: what every bucket's import is checked against.
  Graph at_max;
};

/// Imports the model with each dimension of `symbols` at the given values (in order).
using ImportAt = std::function<Graph(const std::vector<int64_t> &values)>;

/// Imports the model at the dimensions' maxima and, for each ranged dimension, at one
/// less, and compares. Throws DynamicShapeError when the graph's structure or a
/// constant's values depend on a dimension, or an extent is not proportional to it.
SymbolicGraph find_symbolic_axes(const ImportAt &import_at, const std::vector<DimRange> &symbols);

/// The graph input that takes a dimension's actual value: "kiln.dim.NAME".
std::string dim_input_name(const std::string &symbol);

/// The model at one bucket (`graph`: imported at `values`, one per symbol), with the
/// reductions over symbolic axes masked by the dimensions' inputs (dim_input_name),
/// which are appended to the graph's inputs where some operator reads them. Throws
/// DynamicShapeError naming the operator that reads across a dynamic axis in a way
/// Kiln does not mask, or where `graph` does not match the symbolic graph.
Graph bucket_graph(Graph graph, const SymbolicGraph &symbolic, const std::vector<int64_t> &values);

/// Empty when the model's rows along dimension `symbol` never meet — every tensor along
/// it has it on one axis, no operator reduces over it, reads across it or makes values
/// along it from positions (constants, ranges), every output has it — so that a call
/// may run as pieces of rows (a dynamic batch); else what makes them meet.
std::string rows_interact(const SymbolicGraph &symbolic, size_t symbol);

}  // namespace kiln::frontend

// XGBoost pack-sum model (see xgb_model.h and README.md).

#include "costmodel/xgb_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln::costmodel {

static void check(int status, const char *what) {
  if (status != 0) throw std::runtime_error(std::string("xgboost: ") + what + ": " + XGBGetLastError());
}

namespace {

/// Rows of many programs in one matrix, with the program of every row.
struct PackedRows {
  size_t num_columns = 0;
  std::vector<float> values;
  std::vector<size_t> program_of_row;
  size_t num_rows() const { return program_of_row.size(); }
};

class DMatrix {
 public:
  explicit DMatrix(const PackedRows &rows) {
    // NaN marks missing values, so that 0 is an ordinary feature value.
    check(XGDMatrixCreateFromMat(rows.values.data(), rows.num_rows(), rows.num_columns,
                                 std::numeric_limits<float>::quiet_NaN(), &handle_),
          "cannot create a matrix");
  }
  ~DMatrix() { XGDMatrixFree(handle_); }
  DMatrix(const DMatrix &) = delete;
  DMatrix &operator=(const DMatrix &) = delete;
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

}  // namespace

struct XGBoostCostModel::Booster {
  BoosterHandle handle = nullptr;
  explicit Booster(const XGBoostOptions &o) {
    check(XGBoosterCreate(nullptr, 0, &handle), "cannot create a booster");
    auto set = [&](const char *key, const std::string &value) {
      check(XGBoosterSetParam(handle, key, value.c_str()), key);
    };
    set("booster", "gbtree");
    set("tree_method", "hist");
    set("max_depth", std::to_string(o.max_depth));
    set("eta", std::to_string(o.eta));
    set("gamma", std::to_string(o.gamma));
    set("min_child_weight", std::to_string(o.min_child_weight));
    set("max_bin", std::to_string(o.max_bin));
    if (o.max_leaves > 0) {
      set("grow_policy", "lossguide");
      set("max_leaves", std::to_string(o.max_leaves));
    }
    // Rows are summed per program, so each row starts from 0, not from a global mean.
    set("base_score", "0");
    // The raw booster interface learns the column count from nothing else.
    set("num_feature", std::to_string(o.num_features));
    set("seed", std::to_string(o.seed));
    set("verbosity", "0");
    if (o.threads > 0) set("nthread", std::to_string(o.threads));
  }
  ~Booster() { XGBoosterFree(handle); }

  std::vector<float> predict_rows(const DMatrix &m, bool training) const {
    bst_ulong len = 0;
    const float *out = nullptr;
    // option 1: raw margins (no transformation); every tree.
    check(XGBoosterPredict(handle, m.get(), 1, 0, training ? 1 : 0, &len, &out), "prediction failed");
    return std::vector<float>(out, out + len);
  }
};

static PackedRows pack(const std::vector<ProgramFeatures> &programs, size_t num_columns) {
  PackedRows rows;
  rows.num_columns = num_columns;
  for (size_t p = 0; p < programs.size(); ++p) {
    if (!programs[p].ok()) continue;
    if (programs[p].num_columns != num_columns)
      throw std::logic_error("a cost model for rows of " + std::to_string(num_columns) +
                             " features was given rows of " + std::to_string(programs[p].num_columns) +
                             ": programs of CPU and GPU targets need a cost model each");
    rows.values.insert(rows.values.end(), programs[p].values.begin(), programs[p].values.end());
    rows.program_of_row.insert(rows.program_of_row.end(), programs[p].num_rows(), p);
  }
  return rows;
}

XGBoostCostModel::XGBoostCostModel(XGBoostOptions options) : options_(options), rng_(options.seed) {
  if (options_.num_features == 0) options_.num_features = feature_names().size();
  if (options_.loss == Loss::kPairwiseRank && options_.pairs_per_program == 0)
    throw std::invalid_argument("cost model: the pairwise rank loss needs pairs_per_program >= 1");
}
XGBoostCostModel::~XGBoostCostModel() = default;

bool XGBoostCostModel::ready() const {
  return booster_ != nullptr && (pretrained_ || warm_started_ || data_.programs.size() >= options_.min_samples);
}

size_t XGBoostCostModel::append_trainable(const Measurements &measured, const char *caller) {
  measured.check_sizes((std::string("cost model ") + caller).c_str());
  size_t added = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    if (!measured.programs[i].ok() || measured.programs[i].num_rows() == 0) continue;
    data_.programs.push_back(measured.programs[i]);
    data_.throughputs.push_back(measured.throughputs[i]);
    auto [it, inserted] = data_.task_ids.emplace(measured.task(i), static_cast<uint32_t>(data_.task_ids.size()));
    data_.task_of.push_back(it->second);
    ++added;
  }
  return added;
}

void XGBoostCostModel::warm_start(const Measurements &others) {
  others.check_sizes("cost model warm start");
  TrainingData own = std::exchange(data_, {});
  try {
    if (append_trainable(others, "warm start") > 0) {
      train_from_scratch();
      warm_started_ = true;
    }
  } catch (...) {
    data_ = std::move(own);
    throw;
  }
  data_ = std::move(own);
  trained_from_scratch_on_ = 0;  // this task's data trains from scratch once there is enough
}

void XGBoostCostModel::update(const Measurements &measured) {
  if (append_trainable(measured, "update") == 0) return;
  if (pretrained_) {
    boost(options_.incremental_rounds, 0);
    return;
  }
  if (data_.programs.size() < options_.min_samples) return;  // cold, or ranking with the warm-start trees
  bool grown = static_cast<double>(data_.programs.size()) >=
               static_cast<double>(trained_from_scratch_on_) * (1 + options_.retrain_growth);
  if (booster_ == nullptr || grown) {
    train_from_scratch();
    return;
  }
  boost(options_.incremental_rounds, 0);
}

void XGBoostCostModel::train_from_scratch() {
  booster_ = std::make_unique<Booster>(options_);
  rounds_ = 0;
  trained_from_scratch_on_ = data_.programs.size();
  boost(options_.max_rounds, options_.early_stopping_rounds);
}

namespace {

/// log(1 + exp(x)) without overflow.
double softplus(double x) { return x > 30 ? x : x < -30 ? std::exp(x) : std::log1p(std::exp(x)); }

/// Two programs of one task, the first with the higher label.
struct OrderedPair {
  uint32_t faster, slower;
};

/// Pairs of programs of the same task with different labels: all of them in a task
/// of at most per_program + 1 programs, otherwise per_program random partners for
/// each program.
std::vector<OrderedPair> draw_pairs(const std::vector<float> &labels, const std::vector<uint32_t> &task_of,
                                    size_t per_program, std::mt19937_64 &rng) {
  std::vector<std::vector<uint32_t>> members;  // by task id: ids are dense, from 0
  for (size_t p = 0; p < labels.size(); ++p) {
    if (task_of[p] >= members.size()) members.resize(task_of[p] + 1);
    members[task_of[p]].push_back(static_cast<uint32_t>(p));
  }
  std::vector<OrderedPair> pairs;
  auto add = [&](uint32_t a, uint32_t b) {
    if (labels[a] > labels[b]) pairs.push_back({a, b});
    if (labels[b] > labels[a]) pairs.push_back({b, a});
  };
  for (const std::vector<uint32_t> &list : members) {
    if (list.size() <= per_program + 1) {
      for (size_t i = 0; i < list.size(); ++i)
        for (size_t j = i + 1; j < list.size(); ++j) add(list[i], list[j]);
      continue;
    }
    std::uniform_int_distribution<size_t> other(0, list.size() - 2);
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t k = 0; k < per_program; ++k) {
        size_t j = other(rng);
        add(list[i], list[j >= i ? j + 1 : j]);
      }
    }
  }
  return pairs;
}

}  // namespace

/// Boosts with a custom objective on program scores s_p (the sum of a program's
/// rows' predictions); every row of program p gets p's gradient and hessian.
/// Squared error: w_p (s_p - y_p)^2 / 2, gradient w_p (s_p - y_p), hessian w_p.
/// Pairwise rank: for each pair with y_a > y_b, log(1 + exp(-(s_a - s_b))), whose
/// gradient is -q for a and +q for b, with q = 1 / (1 + exp(s_a - s_b)), and
/// hessian q (1 - q) for both. With early stopping, stops after that many rounds
/// without a lower training loss.
void XGBoostCostModel::boost(int max_rounds, int early_stopping_rounds) {
  PackedRows rows = pack(data_.programs, options_.num_features);
  DMatrix matrix(rows);
  // Labels against each task's best throughput seen so far.
  std::vector<float> labels = normalized_per_group(data_.throughputs, data_.task_of);
  std::vector<OrderedPair> pairs;
  if (options_.loss == Loss::kPairwiseRank) {
    std::mt19937_64 pair_rng(options_.seed + static_cast<uint64_t>(data_.programs.size()));
    pairs = draw_pairs(labels, data_.task_of, options_.pairs_per_program, pair_rng);
  }
  std::vector<float> grad(rows.num_rows()), hess(rows.num_rows());
  std::vector<double> sums(data_.programs.size()), program_grad(data_.programs.size()),
      program_hess(data_.programs.size());
  double best_loss = std::numeric_limits<double>::infinity();
  int best_round = 0;
  for (int round = 0; round < max_rounds; ++round) {
    std::fill(sums.begin(), sums.end(), 0.0);
    if (rounds_ > 0) {
      std::vector<float> preds = booster_->predict_rows(matrix, true);
      for (size_t r = 0; r < preds.size(); ++r) sums[rows.program_of_row[r]] += preds[r];
    }
    double loss = 0;
    if (options_.loss == Loss::kSquaredError) {
      for (size_t p = 0; p < sums.size(); ++p) {
        double w = std::max<double>(labels[p], options_.min_weight);
        double error = sums[p] - labels[p];
        loss += w * error * error / 2;
        program_grad[p] = w * error;
        program_hess[p] = w;
      }
    } else {
      std::fill(program_grad.begin(), program_grad.end(), 0.0);
      std::fill(program_hess.begin(), program_hess.end(), 0.0);
      for (const OrderedPair &pair : pairs) {
        double margin = sums[pair.faster] - sums[pair.slower];
        double q = 1 / (1 + std::exp(margin));  // probability of the wrong order
        loss += softplus(-margin);
        program_grad[pair.faster] -= q;
        program_grad[pair.slower] += q;
        program_hess[pair.faster] += q * (1 - q);
        program_hess[pair.slower] += q * (1 - q);
      }
    }
    if (early_stopping_rounds > 0) {
      if (loss < best_loss - 1e-9) {
        best_loss = loss;
        best_round = round;
      } else if (round - best_round >= early_stopping_rounds) {
        break;
      }
    }
    for (size_t r = 0; r < rows.num_rows(); ++r) {
      size_t p = rows.program_of_row[r];
      grad[r] = static_cast<float>(program_grad[p]);
      hess[r] = static_cast<float>(program_hess[p]);
    }
    check(XGBoosterBoostOneIter(booster_->handle, matrix.get(), grad.data(), hess.data(), rows.num_rows()),
          "boosting failed");
    ++rounds_;
  }
}

std::vector<float> XGBoostCostModel::predict(const std::vector<ProgramFeatures> &programs) {
  constexpr float kFailed = -std::numeric_limits<float>::infinity();
  std::vector<float> scores(programs.size(), 0.0f);
  if (!ready()) {
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (size_t p = 0; p < programs.size(); ++p) scores[p] = programs[p].ok() ? uniform(rng_) : kFailed;
    return scores;
  }
  PackedRows rows = pack(programs, options_.num_features);
  if (rows.num_rows() > 0) {
    DMatrix matrix(rows);
    std::vector<float> preds = booster_->predict_rows(matrix, false);
    for (size_t r = 0; r < preds.size(); ++r) scores[rows.program_of_row[r]] += preds[r];
  }
  for (size_t p = 0; p < programs.size(); ++p) {
    if (!programs[p].ok()) scores[p] = kFailed;
  }
  return scores;
}

static constexpr const char *kFeatureCountAttr = "kiln_feature_count";
static constexpr const char *kRoundsAttr = "kiln_rounds";

void XGBoostCostModel::save(const std::filesystem::path &path) const {
  if (booster_ == nullptr) throw std::runtime_error("cannot save a cost model that has not been trained");
  check(XGBoosterSetAttr(booster_->handle, kFeatureCountAttr, std::to_string(options_.num_features).c_str()),
        "cannot set an attribute");
  check(XGBoosterSetAttr(booster_->handle, kRoundsAttr, std::to_string(rounds_).c_str()), "cannot set an attribute");
  bst_ulong len = 0;
  const char *data = nullptr;
  check(XGBoosterSaveModelToBuffer(booster_->handle, R"({"format": "json"})", &len, &data), "cannot save the model");
  std::ofstream out(path, std::ios::binary);
  out.write(data, static_cast<std::streamsize>(len));
  out.close();
  if (!out) throw std::runtime_error("cannot write cost model file '" + path.string() + "'");
}

void XGBoostCostModel::load(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read cost model file '" + path.string() + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  auto booster = std::make_unique<Booster>(options_);
  check(XGBoosterLoadModelFromBuffer(booster->handle, bytes.data(), bytes.size()),
        ("cannot load cost model file '" + path.string() + "'").c_str());
  const char *value = nullptr;
  int found = 0;
  check(XGBoosterGetAttr(booster->handle, kFeatureCountAttr, &value, &found), "cannot read an attribute");
  std::string expected = std::to_string(options_.num_features);
  if (!found || expected != value) {
    throw std::runtime_error("cost model file '" + path.string() + "' was trained on " +
                             (found ? std::string(value) : std::string("an unknown number of")) +
                             " features per row, but this build extracts " + expected);
  }
  check(XGBoosterGetAttr(booster->handle, kRoundsAttr, &value, &found), "cannot read an attribute");
  rounds_ = found ? std::stoi(value) : 1;
  booster_ = std::move(booster);
  pretrained_ = true;
}

}  // namespace kiln::costmodel

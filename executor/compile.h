// Compiling a model: every fused subgraph built with its best tuned schedule from the
// database (exact target first, then the same-device fallback), or with the untuned
// default (inlined element-wise producers, parallel outer and vectorized inner loops),
// into a folder that executor::Model loads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "executor/dynamic_model.h"
#include "frontend/pipeline.h"
#include "ir/stmt.h"
#include "target/target.h"

namespace kiln::executor {

/// One tuned step whose programs were timed against each other inside the model.
struct InModelChoice {
  size_t step = 0;
  std::string workload;         ///< the subgraph's summary
  size_t tried = 0;             ///< other programs built and timed in the model
  size_t chosen_rank = 0;       ///< the kept program's place in the database's ranking (0: its best)
  double window_ms = 0;         ///< the step and the two after it, with the database's best
  double chosen_window_ms = 0;  ///< the same steps with the kept program
};

/// The schedule a subgraph gets when the database has none for it. The executor does
/// not choose schedules itself: `kiln compile` passes the search's untuned default
/// (search::untuned_schedule: element-wise producers inlined, parallel outer and
/// vectorized inner loops).
using UntunedSchedule = std::function<ir::PrimFunc(const ir::PrimFunc &func, const Target &target)>;

/// Builds `func` for `target` into the shared library `path`; throws std::exception
/// with the reason when it cannot. `kiln compile` passes one that builds in a child
/// process with a time and memory limit (the tuner's builder pool), so that a record
/// whose program makes the compiler run away is passed over instead of ending the
/// compile.
using BuildArtifact = std::function<void(const ir::PrimFunc &func, const Target &target, const std::string &path)>;

struct CompileOptions {
  std::string target = "llvm -mcpu=native";
  std::string db_path;  ///< empty: no database, every subgraph gets the untuned default
  /// Empty: untuned subgraphs are built as written (correct, unscheduled).
  UntunedSchedule untuned_schedule;
  /// Empty: built in this process with codegen::Compiler.
  BuildArtifact build_artifact;
  /// Programs tried inside the compiled model (0: none). A kernel timed alone does not
  /// see what the model does to it: weights that come from memory, an input the other
  /// core just wrote, a next step that reads its output split another way. With N > 0,
  /// each tuned step's next N programs in the database (within 30% of its best) are
  /// built and timed in the model, one at a time against the program the step has, over
  /// the step and the two after it; one at least 2% faster there replaces it. Steps are
  /// taken in model order. Timing uses the runtime pool's threads (Model::set_threads).
  int choose_in_model = 0;
};

struct CompileReport {
  size_t subgraphs = 0;
  size_t tuned = 0;    ///< built from a database record
  size_t untuned = 0;  ///< built with the default schedule
  /// Subgraphs that only reshape a computed tensor: no step, their output is a view of
  /// their input's bytes (subgraphs = tuned + untuned + views).
  size_t views = 0;
  /// Database records passed over because they no longer replay on their subgraph or
  /// do not build (a damaged or foreign trace): the next record, or the untuned
  /// default, was used instead. Each one is also in `warnings`.
  size_t unusable_records = 0;
  std::vector<std::string> warnings;
  /// Untuned subgraphs whose workload the database holds records of for this target
  /// under other pipeline options (frontend::PipelineOptions), by those options' flags:
  /// the model was likely tuned with them (see compile_model).
  std::vector<std::string> tuned_with_other_options;
  /// Untuned subgraphs whose workload the database holds successful records of for
  /// other targets only, counted by target: the model was likely tuned for one of them.
  std::map<std::string, size_t> untuned_with_records_for;
  double seconds = 0;
  int64_t arena_bytes = 0;              ///< activations after memory planning
  int64_t unplanned_bytes = 0;          ///< activations with one buffer each
  std::vector<InModelChoice> in_model;  ///< steps that tried programs inside the model
};

/// Builds a prepared model (frontend::prepare) into the folder `out_dir`. The folder is
/// written beside it under another name and renamed into place when complete; an
/// existing folder is replaced only when it is a compiled model holding nothing but
/// the files its manifest names (else ModelError, and nothing is touched).
/// `progress` is told each finished subgraph, `chosen` each step once its programs were
/// tried inside the model (choose_in_model).
CompileReport compile_model(const frontend::PreparedModel &model, const CompileOptions &options,
                            const std::string &out_dir,
                            const std::function<void(size_t done, size_t total)> &progress = {},
                            const std::function<void(const InModelChoice &)> &chosen = {});

/// Compiles every bucket (`prepare(i)` gives bucket i's prepared model, built one at a
/// time so that only one bucket's weights are in memory) into `out_dir`, written beside
/// it and renamed into place when complete; an existing folder is replaced only when it
/// is a compiled model (static or dynamic) holding nothing else. The report adds the
/// buckets' counts; `bucket_done` is told each finished bucket.
CompileReport compile_dynamic_model(const DynamicManifest &manifest,
                                    const std::function<frontend::PreparedModel(size_t bucket)> &prepare,
                                    const CompileOptions &options, const std::string &out_dir,
                                    const std::function<void(size_t bucket, const CompileReport &)> &bucket_done = {});

}  // namespace kiln::executor

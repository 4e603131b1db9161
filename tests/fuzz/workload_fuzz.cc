// Workload JSON (kiln show/tune-op --workload, keys stored in databases): any bytes are
// refused with a clear error or give a workload that lowers to a loop program with a
// stable key.
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "ops/workload.h"
#include "te/te.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(workload_json) {
  kiln::ops::Workload workload;
  try {
    workload = kiln::ops::Workload::from_json(nlohmann::json::parse(input));
    kiln::te::lower(workload.build_dag());
  } catch (const nlohmann::json::exception &) {
    return;
  } catch (const std::invalid_argument &) {
    return;
  }
  std::string key = workload.key_hash();
  if (kiln::ops::Workload::from_json(workload.to_json()).key_hash() != key) {
    throw std::logic_error("a workload's key changed when written and read back");
  }
}

#include "measure/error_kind.h"

#include <gtest/gtest.h>

namespace kiln::measure {
namespace {

TEST(ErrorKind, NamesRoundTripAndMatchTheDatabase) {
  const std::pair<ErrorKind, const char *> expected[] = {
      {ErrorKind::kNone, "none"},
      {ErrorKind::kBuildError, "build_error"},
      {ErrorKind::kBuildTimeout, "build_timeout"},
      {ErrorKind::kLoadError, "load_error"},
      {ErrorKind::kRuntimeError, "runtime_error"},
      {ErrorKind::kRunTimeout, "run_timeout"},
      {ErrorKind::kWrongResult, "wrong_result"},
  };
  for (const auto &[kind, name] : expected) {
    EXPECT_STREQ(to_string(kind), name);
    EXPECT_EQ(error_kind_from_string(name), kind);
  }
  EXPECT_EQ(error_kind_from_string("segfault"), std::nullopt);
  EXPECT_EQ(error_kind_from_string(""), std::nullopt);
}

}  // namespace
}  // namespace kiln::measure

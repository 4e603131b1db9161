#include "measure/error_kind.h"

#include <gtest/gtest.h>

namespace kiln::measure {
namespace {

TEST(ErrorKind, NamesRoundTripAndMatchTheDatabase) {
  const std::pair<ErrorKind, const char *> expected[] = {
      {ErrorKind::none, "none"},
      {ErrorKind::build_error, "build_error"},
      {ErrorKind::build_timeout, "build_timeout"},
      {ErrorKind::load_error, "load_error"},
      {ErrorKind::runtime_error, "runtime_error"},
      {ErrorKind::run_timeout, "run_timeout"},
      {ErrorKind::wrong_result, "wrong_result"},
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

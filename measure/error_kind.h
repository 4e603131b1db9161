// The measurement's error vocabulary (support/error_kind.h), by its measure:: names.
#pragma once

#include "support/error_kind.h"

namespace kiln::measure {

using support::error_kind_from_string;
using support::ErrorKind;
using support::to_string;

}  // namespace kiln::measure

// The measurement's error vocabulary (support/error_kind.h), by its measure:: names.
#pragma once

#include "support/error_kind.h"

namespace kiln::measure {

using kiln::error_kind_from_string;
using kiln::ErrorKind;
using kiln::to_string;

}  // namespace kiln::measure

// A byte count for a message: "512 KiB", "3.5 MiB", "16 GiB", never "0.0 GiB".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::support {

inline std::string format_bytes(int64_t bytes) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < sizeof units / sizeof units[0]) value /= 1024, ++unit;
  char text[40];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%lld bytes", static_cast<long long>(bytes));
  else
    std::snprintf(text, sizeof text, "%.3g %s", value, units[unit]);
  return text;
}

}  // namespace kiln::support

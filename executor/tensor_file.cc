#include "executor/tensor_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

namespace kiln::executor {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// A header dictionary longer than this is not a tensor NumPy wrote.
constexpr uint32_t kMaxHeaderBytes = 1 << 16;

std::string shape_text(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// NumPy's type string for a dtype.
std::string npy_descr(ir::DType t) {
  switch (t) {
    case ir::DType::kBool:
      return "|b1";
    case ir::DType::kInt8:
      return "|i1";
    case ir::DType::kInt32:
      return "<i4";
    case ir::DType::kInt64:
      return "<i8";
    case ir::DType::kFloat16:
      return "<f2";
    case ir::DType::kFloat32:
      return "<f4";
    case ir::DType::kBFloat16:
      return "<V2";  // NumPy has no bfloat16: its bits, as ml_dtypes writes them
  }
  return "?";
}

// The header dictionary: {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

NpyHeader parse_header(const std::string &text, const std::string &path) {
  auto bad = [&](const std::string &why) { return TensorFileError("'" + path + "' is a damaged .npy file: " + why); };
  auto value_of = [&](const std::string &key) {
    size_t k = text.find("'" + key + "'");
    if (k == std::string::npos) throw bad("its header has no '" + key + "'");
    size_t colon = text.find(':', k);
    if (colon == std::string::npos) throw bad("its header is not a dictionary");
    size_t start = text.find_first_not_of(' ', colon + 1);
    if (start == std::string::npos) throw bad("its header ends early");
    return start;
  };
  NpyHeader h;
  size_t d = value_of("descr");
  size_t quote_end = text.find('\'', d + 1);
  if (text[d] != '\'' || quote_end == std::string::npos) throw bad("'descr' is not a simple type string");
  h.descr = text.substr(d + 1, quote_end - d - 1);
  size_t f = value_of("fortran_order");
  if (text.compare(f, 4, "True") == 0)
    h.fortran_order = true;
  else if (text.compare(f, 5, "False") != 0)
    throw bad("'fortran_order' is neither True nor False");
  size_t s = value_of("shape");
  size_t close = text.find(')', s);
  if (text[s] != '(' || close == std::string::npos) throw bad("'shape' is not a tuple");
  std::stringstream dims(text.substr(s + 1, close - s - 1));
  std::string item;
  while (std::getline(dims, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos) continue;  // the trailing comma of (n,)
    item = item.substr(a, b - a + 1);
    if (item.empty() || item.size() > 15 || item.find_first_not_of("0123456789") != std::string::npos)
      throw bad("dimension '" + item + "' is not a whole number");
    h.shape.push_back(std::stoll(item));
  }
  return h;
}

// Reads the .npy payload into `want`, converting the element type where that is safe.
ir::HostTensor convert(const std::string &payload, const NpyHeader &h, const ir::TensorType &want,
                       const std::string &path, std::vector<std::string> *warnings) {
  ir::HostTensor t(want.dtype, want.shape);
  const std::string native = npy_descr(want.dtype);
  int64_t n = t.size();
  auto need = [&](int64_t element_bytes) {
    if (static_cast<int64_t>(payload.size()) != n * element_bytes)
      throw TensorFileError("'" + path + "' holds " + std::to_string(payload.size()) + " bytes of data; " +
                            shape_text(h.shape) + " of '" + h.descr + "' needs " + std::to_string(n * element_bytes));
  };
  // '=' and '<' both mean little-endian on the hosts Kiln runs on; '|' has no order.
  std::string descr = h.descr;
  if (!descr.empty() && (descr[0] == '=' || descr[0] == '|')) descr[0] = '<';
  std::string native_lt = native;
  native_lt[0] = '<';
  if (descr == native_lt) {
    need(ir::dtype_bytes(want.dtype));
    std::memcpy(t.data(), payload.data(), payload.size());
    return t;
  }
  if (descr == "<f8" && ir::is_float(want.dtype)) {
    need(8);
    int64_t overflowed = 0, first = -1;
    double first_value = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, payload.data() + i * 8, 8);
      t.set(i, v);
      if (std::isfinite(v) && !std::isfinite(t.get(i))) {
        if (overflowed++ == 0) first = i, first_value = v;
      }
    }
    if (overflowed && warnings) {
      char value[32];
      std::snprintf(value, sizeof value, "%.6g", first_value);
      warnings->push_back("'" + path + "': " + std::to_string(overflowed) + " float64 value(s) beyond " +
                          ir::dtype_name(want.dtype) + "'s range became infinite (element " + std::to_string(first) +
                          ": " + value + ")");
    }
    return t;
  }
  if (descr == "<i8" && (want.dtype == ir::DType::kInt32 || want.dtype == ir::DType::kInt8)) {
    need(8);
    double lo = want.dtype == ir::DType::kInt8 ? -128 : std::numeric_limits<int32_t>::min();
    double hi = want.dtype == ir::DType::kInt8 ? 127 : std::numeric_limits<int32_t>::max();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, payload.data() + i * 8, 8);
      if (static_cast<double>(v) < lo || static_cast<double>(v) > hi)
        throw TensorFileError("'" + path + "': element " + std::to_string(i) + " (" + std::to_string(v) +
                              ") does not fit the model's " + ir::dtype_name(want.dtype));
      t.set(i, static_cast<double>(v));
    }
    return t;
  }
  if (descr.size() > 1 && descr[0] == '>')
    throw TensorFileError("'" + path + "' is big-endian ('" + h.descr + "'); save it little-endian (array.astype('" +
                          native + "'))");
  throw TensorFileError("'" + path + "' holds '" + h.descr + "' elements; the model takes " +
                        ir::dtype_name(want.dtype) + " ('" + native + "'): convert it with array.astype('" + native +
                        "')");
}

}  // namespace

namespace {

// want.shape is empty and any_shape is set: the file's shape is taken.
ir::HostTensor read_bytes(const std::string &bytes, ir::TensorType want, const std::string &path, bool any_shape,
                          std::vector<std::string> *warnings) {
  if (bytes.compare(0, kMagicBytes, kMagic, kMagicBytes) != 0) {
    if (any_shape)
      throw TensorFileError("'" + path +
                            "' is not a .npy file: the model's inputs have dynamic dimensions, so each "
                            "input file must say its shape (save it with numpy.save)");
    ir::HostTensor t(want.dtype, want.shape);
    auto size = static_cast<int64_t>(t.size() * ir::dtype_bytes(want.dtype));
    if (static_cast<int64_t>(bytes.size()) != size)
      throw TensorFileError("'" + path + "' holds " + std::to_string(bytes.size()) + " bytes; the tensor needs " +
                            std::to_string(size) + " (raw little-endian " + ir::dtype_name(want.dtype) + ", shape " +
                            shape_text(want.shape) + ") or a .npy file");
    std::memcpy(t.data(), bytes.data(), bytes.size());
    return t;
  }
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
  if (bytes.size() < 10) throw TensorFileError("'" + path + "' is a damaged .npy file: it ends inside its header");
  uint32_t major = byte(6);
  size_t header_start = major == 1 ? 10 : 12;
  if (major < 1 || major > 3)
    throw TensorFileError("'" + path + "' is .npy format " + std::to_string(major) + ".x; Kiln reads 1.0 to 3.0");
  if (bytes.size() < header_start)
    throw TensorFileError("'" + path + "' is a damaged .npy file: it ends inside its header");
  uint32_t header_bytes =
      major == 1 ? byte(8) | byte(9) << 8 : byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
  if (header_bytes > kMaxHeaderBytes || header_start + header_bytes > bytes.size())
    throw TensorFileError("'" + path + "' is a damaged .npy file: its header length " + std::to_string(header_bytes) +
                          " runs past the file");
  NpyHeader h = parse_header(bytes.substr(header_start, header_bytes), path);
  if (h.fortran_order)
    throw TensorFileError("'" + path + "' is stored in Fortran order; save it C-ordered (np.ascontiguousarray)");
  if (any_shape) want.shape = h.shape;
  if (h.shape != want.shape)
    throw TensorFileError("'" + path + "' has shape " + shape_text(h.shape) + "; the tensor it is read as has " +
                          shape_text(want.shape));
  return convert(bytes.substr(header_start + header_bytes), h, want, path, warnings);
}

// The largest file that can hold `elements` elements: a .npy header and 8 bytes each
// (float64 and int64 convert). A longer file is refused before it is read whole: the
// path may be /dev/zero.
int64_t max_file_bytes(int64_t elements) { return 12 + int64_t{kMaxHeaderBytes} + 8 * elements; }

std::string read_file_bytes(const std::string &path, int64_t max_bytes, const std::string &what_fits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw TensorFileError("'" + path + "' is a directory; give a tensor file (.npy, or raw bytes)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TensorFileError("cannot open '" + path + "': " + std::strerror(errno));
  std::string bytes;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    bytes.append(chunk.data(), static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(bytes.size()) > max_bytes)
      throw TensorFileError("'" + path + "' holds more than " + std::to_string(max_bytes) + " bytes, more than " +
                            what_fits + " takes: is it the right file?");
  }
  if (in.bad()) throw TensorFileError("cannot read '" + path + "': " + std::strerror(errno));
  return bytes;
}

std::string type_text(const ir::TensorType &type) {
  return std::string(ir::dtype_name(type.dtype)) + " " + shape_text(type.shape);
}

}  // namespace

ir::HostTensor read_tensor_bytes(const std::string &bytes, const ir::TensorType &want, const std::string &path,
                                 std::vector<std::string> *warnings) {
  return read_bytes(bytes, want, path, /*any_shape=*/false, warnings);
}

ir::HostTensor read_tensor_file(const std::string &path, const ir::TensorType &want,
                                std::vector<std::string> *warnings) {
  int64_t elements = 1;
  for (int64_t extent : want.shape) elements *= extent;
  std::string bytes = read_file_bytes(path, max_file_bytes(elements), "a tensor of " + type_text(want));
  return read_tensor_bytes(bytes, want, path, warnings);
}

ir::HostTensor read_npy_file(const std::string &path, ir::DType dtype, int64_t max_elements,
                             std::vector<std::string> *warnings) {
  std::string bytes = read_file_bytes(path, max_file_bytes(max_elements),
                                      "a tensor of " + std::to_string(max_elements) + " " + ir::dtype_name(dtype) +
                                          " elements (the largest the model takes)");
  return read_bytes(bytes, {{}, dtype}, path, /*any_shape=*/true, warnings);
}

std::string npy_bytes(const ir::HostTensor &t) {
  std::string header =
      "{'descr': '" + npy_descr(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape_text(t.shape()) + ", }";
  // Magic, version, length, then the dictionary padded with spaces to a multiple of 64
  // bytes and ended by a newline, as NumPy writes it.
  size_t total = kMagicBytes + 4 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicBytes);
  out += {1, 0, static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out += header;
  out.append(static_cast<const char *>(t.data()), static_cast<size_t>(t.size() * ir::dtype_bytes(t.dtype())));
  return out;
}

void write_tensor_file(const std::string &path, const ir::HostTensor &t) {
  bool npy = path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
  std::ofstream out(path, std::ios::binary);
  if (!out) throw TensorFileError("cannot write '" + path + "': " + std::strerror(errno));
  if (npy) {
    out << npy_bytes(t);
  } else {
    out.write(static_cast<const char *>(t.data()), t.size() * ir::dtype_bytes(t.dtype()));
  }
  // A full disk shows only when the buffer is flushed: check the close too.
  out.close();
  if (!out) throw TensorFileError("cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace kiln::executor

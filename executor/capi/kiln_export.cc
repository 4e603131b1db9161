// kiln_export.h over executor::export_kernel.
#include "kiln_export.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "executor/export.h"

namespace {

kiln_export_status failed(kiln_export_status status, const std::string &message, char *error, size_t error_bytes) {
  if (error != nullptr && error_bytes > 0) {
    size_t n = std::min(message.size(), error_bytes - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return status;
}

}  // namespace

extern "C" kiln_export_status kiln_export_kernel(const char *db_path, const char *workload, const char *target,
                                                 const char *symbol, const char *object_path, const char *header_path,
                                                 char *error, size_t error_bytes) {
  if (error != nullptr && error_bytes > 0) error[0] = '\0';
  if (!db_path || !workload || !target || !object_path || !header_path)
    return failed(KILN_EXPORT_INVALID_ARGUMENT,
                  "kiln_export_kernel: db_path, workload, target, object_path and header_path must not be NULL", error,
                  error_bytes);
  try {
    kiln::executor::ExportRequest request{db_path, workload, target, symbol ? symbol : ""};
    kiln::executor::ExportedKernel kernel = kiln::executor::export_kernel(request);
    kiln::executor::write_exported_kernel(kernel, object_path, header_path);
    return KILN_EXPORT_OK;
  } catch (const kiln::executor::ExportNotFound &e) {
    return failed(KILN_EXPORT_NOT_FOUND, e.what(), error, error_bytes);
  } catch (const kiln::executor::ExportBadRequest &e) {
    return failed(KILN_EXPORT_INVALID_ARGUMENT, e.what(), error, error_bytes);
  } catch (const kiln::executor::ExportError &e) {
    return failed(KILN_EXPORT_ERROR, e.what(), error, error_bytes);
  } catch (const std::bad_alloc &) {
    return failed(KILN_EXPORT_ERROR, "out of memory", error, error_bytes);
  } catch (const std::exception &e) {
    return failed(KILN_EXPORT_ERROR, e.what(), error, error_bytes);
  }
}

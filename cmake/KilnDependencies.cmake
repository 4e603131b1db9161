# Finds every external dependency Kiln uses, now or in later layers, so that a
# missing package is reported once, up front, with the Debian package to install.
# scripts/setup-deps installs all of them.

function(kiln_require found_var package)
  if(NOT ${found_var})
    message(FATAL_ERROR
      "Kiln needs the Debian package '${package}', which was not found.\n"
      "Install every dependency with:  scripts/setup-deps")
  endif()
endfunction()

find_package(Threads REQUIRED)


find_package(Protobuf CONFIG QUIET)
if(NOT Protobuf_FOUND)
  find_package(Protobuf QUIET)
endif()
kiln_require(Protobuf_FOUND libprotobuf-dev)
find_program(KILN_PROTOC protoc)
kiln_require(KILN_PROTOC protobuf-compiler)
find_package(PkgConfig REQUIRED)
pkg_check_modules(GRPCPP QUIET IMPORTED_TARGET grpc++)
kiln_require(GRPCPP_FOUND libgrpc++-dev)
find_program(KILN_GRPC_CPP_PLUGIN grpc_cpp_plugin)
kiln_require(KILN_GRPC_CPP_PLUGIN protobuf-compiler-grpc)

find_package(nlohmann_json 3 QUIET)
kiln_require(nlohmann_json_FOUND nlohmann-json3-dev)

find_package(CLI11 QUIET)
kiln_require(CLI11_FOUND libcli11-dev)

find_package(OpenSSL QUIET)
kiln_require(OpenSSL_FOUND libssl-dev)

# The slim runner build (KILN_RUNNER_ONLY) needs nothing below.
if(KILN_RUNNER_ONLY)
  return()
endif()

find_package(LLVM 16 CONFIG QUIET HINTS /usr/lib/llvm-16/lib/cmake/llvm)
kiln_require(LLVM_FOUND llvm-16-dev)
# lld as a library (linking in process, codegen/compiler.cc): its static archives, which
# take LLVM's symbols from the one shared libLLVM like the rest of Kiln.
find_library(KILN_LLD_ELF_LIB NAMES liblldELF.a HINTS /usr/lib/llvm-16/lib NO_DEFAULT_PATH)
find_library(KILN_LLD_COMMON_LIB NAMES liblldCommon.a HINTS /usr/lib/llvm-16/lib NO_DEFAULT_PATH)
if(KILN_LLD_ELF_LIB AND KILN_LLD_COMMON_LIB)
  set(KILN_LLD_FOUND TRUE)
endif()
kiln_require(KILN_LLD_FOUND liblld-16-dev)
find_package(ZLIB QUIET)
kiln_require(ZLIB_FOUND zlib1g-dev)
find_library(KILN_ZSTD_LIB zstd)
kiln_require(KILN_ZSTD_LIB libzstd-dev)

find_path(KILN_XGBOOST_INCLUDE xgboost/c_api.h)
find_library(KILN_XGBOOST_LIB xgboost)
if(KILN_XGBOOST_INCLUDE AND KILN_XGBOOST_LIB)
  set(KILN_XGBOOST_FOUND TRUE)
endif()
kiln_require(KILN_XGBOOST_FOUND libxgboost-dev)

find_package(SQLite3 QUIET)
kiln_require(SQLite3_FOUND libsqlite3-dev)

find_package(GTest QUIET)
kiln_require(GTest_FOUND libgtest-dev)

find_package(ONNX QUIET)
kiln_require(ONNX_FOUND libonnx-dev)


find_program(KILN_AARCH64_CXX aarch64-linux-gnu-g++)
kiln_require(KILN_AARCH64_CXX g++-aarch64-linux-gnu)
find_program(KILN_QEMU_AARCH64 qemu-aarch64)
kiln_require(KILN_QEMU_AARCH64 qemu-user)

# oneDNN is only the benchmarks' peer. Debian's dnnl-config.cmake drags in OpenCL, so
# locate the header and library directly.
find_path(KILN_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp)
find_library(KILN_DNNL_LIB dnnl)
if(KILN_DNNL_INCLUDE AND KILN_DNNL_LIB)
  add_library(kiln_dnnl INTERFACE)
  target_include_directories(kiln_dnnl INTERFACE ${KILN_DNNL_INCLUDE})
  target_link_libraries(kiln_dnnl INTERFACE ${KILN_DNNL_LIB})
  set(KILN_HAVE_DNNL TRUE)
else()
  message(STATUS "oneDNN (libdnnl-dev) not found: kernel benchmarks will be skipped")
endif()

# Cross-compiling for 64-bit ARM boards (Jetson, Graviton, Raspberry Pi 4/5) from an
# x86-64 Debian host with Debian's cross compiler and arm64 multiarch libraries: the
# slim runner (KILN_RUNNER_ONLY) is what a board needs. scripts/setup-deps --arm64
# installs the packages; rpc/README.md has the commands.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs (protoc, grpc_cpp_plugin) run on the host; libraries and headers are the
# board's, from /usr/lib/aarch64-linux-gnu.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# Tests and helpers that run what was built go through qemu.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

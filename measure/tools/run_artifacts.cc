// kiln-run-artifacts: loads artifacts and runs each once on given inputs, writing the
// outputs. Built for the host and cross-built for AArch64 (run there, or here under
// qemu-aarch64), with the runtime linked in and exported so artifacts resolve
// kiln_rt_* from this executable: a board needs this binary and nothing else.
//
// Usage: kiln-run-artifacts MANIFEST
// Each manifest line: ARTIFACT INPUT_FILE OUTPUT_FILE NUM_PARAMS NUM_INPUTS BYTES_0 ... BYTES_{N-1}
// INPUT_FILE holds the inputs' bytes back to back; OUTPUT_FILE receives the outputs'.
// Exit status: 0 when every line ran; otherwise 1 with a message naming the line.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/runtime/abi.h"

namespace {

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) {
    if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0) data = nullptr;
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  void *data = nullptr;
};

int fail(size_t line, const std::string &why) {
  std::cerr << "kiln-run-artifacts: manifest line " << line << ": " << why << "\n";
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: kiln-run-artifacts MANIFEST\n";
    return 2;
  }
  std::ifstream manifest(argv[1]);
  if (!manifest) {
    std::cerr << "kiln-run-artifacts: cannot read manifest " << argv[1] << "\n";
    return 2;
  }
  std::string text;
  size_t line_no = 0;
  while (std::getline(manifest, text)) {
    ++line_no;
    if (text.empty()) continue;
    std::istringstream in(text);
    std::string artifact, input_file, output_file;
    size_t num_params = 0, num_inputs = 0;
    if (!(in >> artifact >> input_file >> output_file >> num_params >> num_inputs) || num_inputs > num_params)
      return fail(line_no, "expected ARTIFACT INPUT OUTPUT NUM_PARAMS NUM_INPUTS BYTES...");
    std::vector<size_t> bytes(num_params);
    for (size_t &b : bytes)
      if (!(in >> b)) return fail(line_no, "missing parameter sizes");
    std::vector<AlignedBuffer *> buffers;
    std::vector<void *> args;
    for (size_t b : bytes) {
      buffers.push_back(new AlignedBuffer(b));
      args.push_back(buffers.back()->data);
    }
    std::ifstream inputs(input_file, std::ios::binary);
    for (size_t i = 0; i < num_inputs; ++i)
      if (!inputs.read(static_cast<char *>(args[i]), static_cast<std::streamsize>(bytes[i])))
        return fail(line_no, "input file " + input_file + " is too short");
    void *handle = dlopen(artifact.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return fail(line_no, std::string("cannot load artifact: ") + dlerror());
    auto entry = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_ENTRY_SYMBOL));
    if (!entry) return fail(line_no, "artifact has no " KILN_ENTRY_SYMBOL);
    int32_t rc = entry(args.data());
    if (rc != 0) return fail(line_no, "kernel returned " + std::to_string(rc));
    std::ofstream outputs(output_file, std::ios::binary);
    for (size_t i = num_inputs; i < num_params; ++i)
      outputs.write(static_cast<const char *>(args[i]), static_cast<std::streamsize>(bytes[i]));
    if (!outputs) return fail(line_no, "cannot write " + output_file);
    dlclose(handle);
    for (AlignedBuffer *b : buffers) delete b;
  }
  return 0;
}

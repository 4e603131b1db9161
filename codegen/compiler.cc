// Compiler: target machines, the optimization pipeline, object emission and linking.
#include <lld/Common/CommonLinkerContext.h>
#include <lld/Common/Driver.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "codegen/lower_llvm.h"
#include "codegen/runtime/abi.h"
#include "ir/functor.h"
#include "support/c_identifier.h"

namespace kiln::codegen {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// LLVM 16's loop vectorizer may put loads and stores of one address within an iteration
// into one interleaved access group and reorder them (LLVM issue 63602, fixed in LLVM
// 17). The x86 cost model makes such groups profitable only with AVX-512, so a
// register-tiled accumulator loop that Kiln left scalar came out wrong there and right
// on AVX2. Kiln vectorizes strided accesses itself (lower_llvm.cc), so LLVM's interleaved
// groups are off for every target.
// LLVM runs a second, post-register-allocation list scheduler for AMD Zen CPUs (not for
// Intel ones). On the large straight-line bodies of register-tiled kernels and of
// vectorized epilogues (erf, exp) it took ~45% of code generation, for no measurable
// speed on an out-of-order core (codegen/README.md), so it is off for every target.
// KILN_LLVM_ARGS adds LLVM options for debugging, e.g. "-opt-bisect-limit=400".
const std::vector<std::string> &llvm_option_words() {
  static const std::vector<std::string> words = [] {
    // -tail-merge-threshold: branch folding compares the tails of every pair of a
    // block's predecessors (up to 150 by default); a workload of hundreds of stages has
    // a block with that many, and one of 250 took 26 s to emit (2 s with 16). Kernels'
    // blocks have a few predecessors: what they merge is unchanged.
    std::vector<std::string> w = {"-enable-interleaved-mem-accesses=false", "-post-RA-scheduler=false",
                                  "-tail-merge-threshold=16"};
    if (const char *extra = std::getenv("KILN_LLVM_ARGS")) {
      std::istringstream in(extra);
      for (std::string word; in >> word;) w.push_back(word);
    }
    return w;
  }();
  return words;
}

// lld resets every LLVM option to its default before parsing its own -mllvm options, so
// each link passes Kiln's options again (link_shared) and holds this lock exclusively:
// optimization and emission, which read the options, hold it shared.
std::shared_mutex &llvm_options_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

void initialize_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    std::vector<const char *> argv = {"kiln"};
    for (const std::string &w : llvm_option_words()) argv.push_back(w.c_str());
    std::string errors;
    llvm::raw_string_ostream err(errors);
    std::unique_lock<std::shared_mutex> options_guard(llvm_options_mutex());
    if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &err))
      throw CodegenError("bad LLVM options in KILN_LLVM_ARGS: " + err.str());
  });
}

std::string normalize_triple(const std::string &t) {
  // Debian spells triples x86_64-linux-gnu; LLVM wants the vendor too.
  if (t == "x86_64-linux-gnu") return "x86_64-pc-linux-gnu";
  if (t == "aarch64-linux-gnu") return "aarch64-unknown-linux-gnu";
  return t;
}

// CPUs newer than the LLVM Kiln links, by the name later LLVMs give them, and the model
// this LLVM builds their code for: the newest of the same family, whose instructions
// they all have. Targets (and so records) keep the real name: two generations of a
// family never share a record, though this LLVM schedules their code alike.
const std::map<std::string, std::string> &cpus_newer_than_llvm() {
  static const std::map<std::string, std::string> table = {{"znver5", "znver4"}};
  return table;
}

// The CPU model LLVM builds `cpu`'s code for, or "" if it knows neither the name nor a
// stand-in for it.
std::string llvm_model_of(const std::string &cpu, const llvm::MCSubtargetInfo *subtarget) {
  if (cpu == "generic" || (subtarget && subtarget->isCPUStringValid(cpu))) return cpu;
  auto it = cpus_newer_than_llvm().find(cpu);
  if (it != cpus_newer_than_llvm().end() && subtarget && subtarget->isCPUStringValid(it->second)) return it->second;
  return "";
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target &target) {
  if (!target.is_llvm())
    throw CodegenError("target '" + target.str() + "' is not an llvm target; CPU code generation needs `llvm ...`");
  initialize_llvm_once();
  std::string triple = normalize_triple(target.mtriple.empty() ? llvm::sys::getDefaultTargetTriple() : target.mtriple);
  std::string error;
  const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) throw CodegenError("LLVM cannot generate code for triple '" + triple + "': " + error);
  bool host_triple_target = normalize_triple(target.mtriple) == normalize_triple(host_triple());
  // KILN_HOST_CPU names the host's CPU: it is built as that CPU, with its features.
  bool stand_in_host = host_triple_target && host_cpu_stands_in();
  const std::string named = target.mcpu.empty()                        ? "generic"
                            : target.mcpu == "native" && stand_in_host ? host_cpu()
                                                                       : target.mcpu;
  // LLVM only warns about a CPU it does not know, then builds for a generic one (or
  // aborts the process: "64-bit code requested on a subtarget that doesn't support it").
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(t->createMCSubtargetInfo(triple, "", ""));
  std::string cpu = named == "native" ? named : llvm_model_of(named, subtarget.get());
  if (cpu.empty())
    throw CodegenError("LLVM " + std::to_string(LLVM_VERSION_MAJOR) + " does not know the CPU '" + named + "' for " +
                       triple + (stand_in_host && named == host_cpu() ? " (the CPU KILN_HOST_CPU names)" : "") +
                       "; `llc-" + std::to_string(LLVM_VERSION_MAJOR) + " -mtriple=" + triple +
                       " -mcpu=help` lists the names it accepts");
  std::string features;
  // The host's own CPU (as `native` resolves to) is built with LLVM's view of the host,
  // features included: a virtual machine may lack some of its model's features.
  bool host_cpu_target = host_triple_target && !stand_in_host && (named == "native" || named == host_cpu());
  if (host_cpu_target) {
    // LLVM calls a CPU newer than itself "generic" (LLVM 16 on AMD's Zen 5), whose
    // scheduling model is an old core's; the model of Kiln's name for the host
    // (target/host_cpu.cc, its stand-in above if LLVM is older) fits far better. The
    // instructions follow the host's features either way.
    std::string llvm_host = llvm::sys::getHostCPUName().str();
    std::string kiln_host = llvm_model_of(host_cpu(), subtarget.get());
    cpu = llvm_host == "generic" && !kiln_host.empty() ? kiln_host : llvm_host;
    llvm::StringMap<bool> host;
    if (llvm::sys::getHostCPUFeatures(host)) {
      for (const auto &f : host)
        features += (features.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
    }
  }
  // -mattr last: LLVM takes the last word on a feature.
  for (const std::string &f : target.mattr) features += (features.empty() ? "" : ",") + f;
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // a*b+c may become one FMA
  auto *tm = t->createTargetMachine(triple, cpu, features, options, llvm::Reloc::PIC_, std::nullopt,
                                    llvm::CodeGenOpt::Aggressive);
  if (!tm) throw CodegenError("LLVM has no target machine for cpu '" + cpu + "' on '" + triple + "'");
  return std::unique_ptr<llvm::TargetMachine>(tm);
}

// NVPTX for a cuda target's arch, writing the arch's PTX ISA (the backend's, target/cuda_arch.cc).
std::unique_ptr<llvm::TargetMachine> make_nvptx_machine(const Target &target) {
  initialize_llvm_once();
  const std::string triple = "nvptx64-nvidia-cuda";
  std::string error;
  const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) throw CodegenError("this LLVM has no NVPTX backend: " + error);
  std::string isa = ptx_isa_for(target);
  std::string feature = "+ptx" + isa.substr(0, isa.find('.')) + isa.substr(isa.find('.') + 1);
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(t->createMCSubtargetInfo(triple, target.arch, feature));
  if (!subtarget || !subtarget->isCPUStringValid(target.arch))
    throw CodegenError("LLVM " + std::to_string(LLVM_VERSION_MAJOR) + " cannot generate code for " + target.arch);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  auto *tm = t->createTargetMachine(triple, target.arch, feature, options, std::nullopt, std::nullopt,
                                    llvm::CodeGenOpt::Aggressive);
  if (!tm) throw CodegenError("LLVM has no NVPTX target machine for " + target.arch);
  return std::unique_ptr<llvm::TargetMachine>(tm);
}

// Whether lowering kept LLVM's loop vectorizer off one of `f`'s loops: a loop whose body
// Kiln unrolled into more statements than LLVM's dependence analysis handles cheaply
// (kMaxAutoVectorizedBody, llvm_emitter.h).
bool has_loop_kept_from_vectorizer(const llvm::Function &f) {
  for (const llvm::BasicBlock &bb : f) {
    llvm::MDNode *loop = bb.getTerminator() ? bb.getTerminator()->getMetadata(llvm::LLVMContext::MD_loop) : nullptr;
    llvm::MDNode *hint = loop ? llvm::findOptionMDForLoopID(loop, "llvm.loop.vectorize.enable") : nullptr;
    if (hint && hint->getNumOperands() == 2)
      if (auto *value = llvm::mdconst::dyn_extract<llvm::ConstantInt>(hint->getOperand(1)); value && value->isZero())
        return true;
  }
  return false;
}

// Loop load elimination runs the same dependence analysis as the vectorizer on every
// innermost loop, and has no per-loop switch: with the vectorizer kept off a large body
// (a sampled 3x3 convolution tile of 448 statements) it took 6 of the build's 7 seconds
// instead, and changed nothing. It is skipped in functions with such a loop.
void skip_costly_loop_analyses(llvm::PassInstrumentationCallbacks &pic) {
  pic.registerShouldRunOptionalPassCallback([](llvm::StringRef pass, llvm::Any ir) {
    if (pass != "LoopLoadEliminationPass") return true;
    const llvm::Function *const *f = llvm::any_cast<const llvm::Function *>(&ir);
    return !f || !has_loop_kept_from_vectorizer(**f);
  });
}

void optimize(llvm::Module &mod, llvm::TargetMachine &tm) {
  std::shared_lock<std::shared_mutex> options_guard(llvm_options_mutex());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassInstrumentationCallbacks pic;
  llvm::StandardInstrumentations instrumentation(mod.getContext(), /*DebugLogging=*/false);
  instrumentation.registerCallbacks(pic, &fam);
  skip_costly_loop_analyses(pic);
  llvm::PassBuilder pb(&tm, pto, std::nullopt, &pic);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(mod, mam);
}

std::string emit(llvm::Module &mod, llvm::TargetMachine &tm, llvm::CodeGenFileType type) {
  std::shared_lock<std::shared_mutex> options_guard(llvm_options_mutex());
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw CodegenError("LLVM cannot emit this file type for " + tm.getTargetTriple().str());
  pm.run(mod);
  return std::string(buffer.data(), buffer.size());
}

// Links an object into a shared library with lld, in this process: spawning ld.lld costs
// about 25 ms per candidate (mostly loading libLLVM), linking one small object in
// process under 1 ms. lld keeps its state in globals, so links are serialized and its
// context is destroyed after each. `--threads=1`: lld would otherwise start LLVM's
// global thread pool, whose threads a process forked later (the runner's children) lacks
// and whose destructor then waits for them forever at exit. lld is a cross linker: the
// same code links x86-64 and AArch64 artifacts. A fatal lld error (an unreadable object,
// say) ends the process; builds run in a child process per candidate
// (measure::LocalBuilderPool), so there it costs one build.
void link_shared(const std::string &object_path, const std::string &output_path,
                 const std::vector<std::string> &extra_words = {}) {
  std::vector<std::string> words = {"ld.lld",    "-shared",  "--no-undefined-version", "--threads=1", "-o",
                                    output_path, object_path};
  words.insert(words.end(), extra_words.begin(), extra_words.end());
  for (const std::string &w : llvm_option_words()) words.push_back("-mllvm=" + w);
  std::vector<const char *> args;
  for (const std::string &w : words) args.push_back(w.c_str());
  std::string out_text;
  std::string err_text;
  llvm::raw_string_ostream out(out_text);
  llvm::raw_string_ostream err(err_text);
  std::unique_lock<std::shared_mutex> options_guard(llvm_options_mutex());
  bool ok = lld::elf::link(args, out, err, /*exitEarly=*/false, /*disableOutput=*/false);
  lld::CommonLinkerContext::destroy();
  if (!ok) throw CodegenError("linking " + output_path + " failed: " + err.str());
}

// The soname of libkiln_runtime (codegen/runtime/CMakeLists.txt: SOVERSION 1).
constexpr const char *kRuntimeSoname = "libkiln_runtime.so.1";

// A shared library named libkiln_runtime.so.1 for `tm`'s architecture, holding nothing:
// linking an artifact against it records the dependency (DT_NEEDED) without the real
// runtime, which may be built for another architecture than the target's. One per
// triple in the temporary directory, shared by every process (written under another
// name and renamed into place), so a build costs one extra link at most once.
std::string runtime_stub(llvm::TargetMachine &tm, const std::function<std::string()> &empty_object) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln-runtime-stub-" + std::to_string(getuid())) / tm.getTargetTriple().str();
  std::filesystem::path stub = dir / kRuntimeSoname;
  std::error_code ec;
  if (std::filesystem::is_regular_file(stub, ec)) return stub.string();
  std::filesystem::create_directories(dir, ec);
  if (ec) throw CodegenError("cannot create " + dir.string() + ": " + ec.message());
  const std::string unique =
      "." + std::to_string(getpid()) + "." + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::filesystem::path object = dir / ("stub.o" + unique), partial = dir / (std::string(kRuntimeSoname) + unique);
  {
    std::ofstream out(object, std::ios::binary);
    std::string bytes = empty_object();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw CodegenError("cannot write " + object.string());
  }
  link_shared(object.string(), partial.string(), {std::string("-soname=") + kRuntimeSoname});
  std::filesystem::remove(object, ec);
  std::filesystem::rename(partial, stub, ec);
  if (ec) throw CodegenError("cannot write " + stub.string() + ": " + ec.message());
  return stub.string();
}

}  // namespace

struct Compiler::Impl {
  llvm::LLVMContext ctx;
  std::map<std::string, std::unique_ptr<llvm::TargetMachine>> machines;

  llvm::TargetMachine &machine(const Target &target) {
    std::string key = target.str();
    auto it = machines.find(key);
    if (it == machines.end())
      it = machines
               .emplace(key, target.backend().kind() == BackendKind::kCuda ? make_nvptx_machine(target)
                                                                           : make_target_machine(target))
               .first;
    return *it->second;
  }
};

Compiler::Compiler() : impl_(std::make_unique<Impl>()) {}
Compiler::~Compiler() = default;

BuildStats Compiler::build_artifact(const ir::PrimFunc &func, const Target &target, const std::string &output_path,
                                    bool needs_runtime_library) {
  BuildStats stats;
  switch (target.backend().kind()) {
    case BackendKind::kCuda: {
      auto start = std::chrono::steady_clock::now();
      build_cuda_artifact(func, target, output_path);
      stats.emit_seconds = seconds_since(start);
      return stats;
    }
    case BackendKind::kX86Cpu:
    case BackendKind::kAArch64Cpu:
    case BackendKind::kOtherCpu:
      break;
  }
  llvm::TargetMachine &tm = impl_->machine(target);
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<llvm::Module> mod = lower_to_llvm(func, target, impl_->ctx, tm);
  stats.lower_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  optimize(*mod, tm);
  stats.optimize_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::string object = emit(*mod, tm, llvm::CGFT_ObjectFile);
  stats.emit_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::string object_path = output_path + ".o";
  {
    std::ofstream out(object_path, std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out) throw CodegenError("cannot write " + object_path);
  }
  std::vector<std::string> runtime;
  if (needs_runtime_library) {
    runtime.push_back(runtime_stub(tm, [&] {
      llvm::Module empty("kiln_runtime_stub", impl_->ctx);
      empty.setTargetTriple(tm.getTargetTriple().str());
      empty.setDataLayout(tm.createDataLayout());
      return emit(empty, tm, llvm::CGFT_ObjectFile);
    }));
  }
  link_shared(object_path, output_path, runtime);
  std::remove(object_path.c_str());
  stats.link_seconds = seconds_since(t0);
  return stats;
}

KernelObject Compiler::build_object(const ir::PrimFunc &func, const Target &target, const std::string &symbol) {
  if (!support::is_c_identifier(symbol))
    throw CodegenError("'" + symbol + "' is not a C identifier: name the kernel with one");
  if (target.backend().is_gpu())
    throw CodegenError("kernels for GPU targets are exported as PTX (kiln show --emit ptx)");
  llvm::TargetMachine &tm = impl_->machine(target);
  std::unique_ptr<llvm::Module> mod = lower_to_llvm(func, target, impl_->ctx, tm);
  optimize(*mod, tm);
  KernelObject out;
  if (llvm::GlobalVariable *info = mod->getGlobalVariable(KILN_INFO_SYMBOL)) {
    if (auto *text = llvm::dyn_cast<llvm::ConstantDataSequential>(info->getInitializer()))
      out.info_json = text->getAsCString().str();
    info->setName(symbol + "_info");
  }
  mod->getFunction(KILN_ENTRY_SYMBOL)->setName(symbol);
  if (llvm::Function *prepack = mod->getFunction(KILN_PREPACK_SYMBOL)) {
    prepack->setName(symbol + "_prepack");
    out.has_prepack = true;
  }
  // Everything else the kernel defines (parallel task bodies) stays private to it.
  for (llvm::Function &f : *mod) {
    if (!f.isDeclaration() && f.getName() != symbol && f.getName() != symbol + "_prepack")
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  out.object = emit(*mod, tm, llvm::CGFT_ObjectFile);
  return out;
}

CudaModule Compiler::build_cuda(const ir::PrimFunc &func, const Target &target) {
  if (target.backend().kind() != BackendKind::kCuda)
    throw CodegenError("target '" + target.str() + "' is not a cuda target");
  ir::GpuProgram program;
  try {
    program = ir::lower_for_gpu(func, gpu_limits(target));
  } catch (const ir::GpuLoweringError &e) {
    throw CodegenError(std::string("the schedule cannot run on ") + target.arch + ": " + e.what());
  }
  llvm::TargetMachine &tm = impl_->machine(target);
  std::unique_ptr<llvm::Module> mod = lower_to_nvptx(program, impl_->ctx, tm, target);
  optimize(*mod, tm);
  CudaModule m;
  m.name = func.name;
  m.target = target.str();
  m.arch = target.arch;
  m.ptx_isa = ptx_isa_for(target);
  m.ptx = emit(*mod, tm, llvm::CGFT_AssemblyFile);
  std::unordered_set<const ir::BufferNode *> written;
  ir::for_each_stmt(func.body, [&](const ir::Stmt &s) {
    if (const auto *st = s.as<ir::StoreNode>()) written.insert(st->buffer.get());
  });
  for (const ir::Buffer &p : program.params)
    m.buffers.push_back({p->name, p->dtype, p->shape, written.count(p.get()) ? "output" : "input"});
  for (const ir::Buffer &s : program.global_scratch) m.buffers.push_back({s->name, s->dtype, s->shape, "scratch"});
  for (const ir::GpuKernel &k : program.kernels) m.launches.push_back({k.name, k.grid, k.block, k.shared_bytes});
  return m;
}

CudaModule Compiler::build_cuda_artifact(const ir::PrimFunc &func, const Target &target,
                                         const std::string &output_path) {
  CudaModule m = build_cuda(func, target);
  if (std::string ptxas = find_ptxas(); !ptxas.empty()) {
    PtxasResult assembled = run_ptxas(m.ptx, m.arch, ptxas);
    check_registers(m, assembled.kernels, target);
    m.cubin = assembled.cubin;
    m.cubin_toolkit = assembled.toolkit;
  }
  std::ofstream out(output_path, std::ios::binary);
  out << m.artifact_text();
  out.close();
  if (!out) throw CodegenError("cannot write " + output_path);
  return m;
}

std::string Compiler::llvm_cpu(const Target &target) { return impl_->machine(target).getTargetCPU().str(); }

std::string Compiler::emit_llvm_ir(const ir::PrimFunc &func, const Target &target) {
  llvm::TargetMachine &tm = impl_->machine(target);
  std::unique_ptr<llvm::Module> mod = lower_to_llvm(func, target, impl_->ctx, tm);
  optimize(*mod, tm);
  std::string text;
  llvm::raw_string_ostream os(text);
  mod->print(os, nullptr);
  return os.str();
}

std::string Compiler::emit_assembly(const ir::PrimFunc &func, const Target &target) {
  llvm::TargetMachine &tm = impl_->machine(target);
  std::unique_ptr<llvm::Module> mod = lower_to_llvm(func, target, impl_->ctx, tm);
  optimize(*mod, tm);
  return emit(*mod, tm, llvm::CGFT_AssemblyFile);
}

}  // namespace kiln::codegen

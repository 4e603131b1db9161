#include "ir/schedule/trace.h"

#include <stdexcept>

#include "ir/schedule/instruction_kind.h"
#include "support/json_checks.h"

namespace kiln::ir {

using nlohmann::json;

const char *rv_kind_name(RVKind kind) {
  switch (kind) {
    case RVKind::kBlock:
      return "block";
    case RVKind::kLoop:
      return "loop";
    case RVKind::kInt:
      return "integer";
  }
  return "?";
}

json Trace::to_json() const {
  json insts = json::array();
  for (const Instruction &i : instructions) {
    json outputs = json::array();
    for (const TraceRV &o : i.outputs) outputs.push_back(o.name);
    insts.push_back(json::array({std::string(i.kind->name), i.inputs, i.attrs, outputs}));
  }
  json decs = json::array();
  for (const auto &[index, d] : decisions) decs.push_back(json::array({index, d}));
  return json{{"kiln_trace", kFormatVersion}, {"instructions", insts}, {"decisions", decs}};
}

Trace Trace::from_json(const json &j) {
  support::require_max_depth(j, "a trace");
  if (!j.is_object() || !j.contains("instructions") || !j.at("instructions").is_array())
    throw std::invalid_argument("a trace is a JSON object with an \"instructions\" array");
  // Every number a trace holds is an integer (factors, indices, decisions, attribute
  // values) except the sampling probabilities: refuse others before any is read as one.
  if (j.is_object()) {
    if (j.contains("decisions")) support::require_int64_numbers(j.at("decisions"), "a trace's decisions");
    if (j.contains("instructions") && j.at("instructions").is_array()) {
      for (const auto &instruction : j.at("instructions")) {
        if (!instruction.is_array()) continue;
        for (const auto &part : instruction) {
          if (!part.is_object()) {
            support::require_int64_numbers(part, "a trace instruction");
            continue;
          }
          for (const auto &[key, value] : part.items()) {
            if (key != "probs") support::require_int64_numbers(value, "trace attribute \"" + key + "\"");
          }
        }
      }
    }
  }
  if (!j.contains("kiln_trace"))
    throw std::invalid_argument("a trace needs its format version \"kiln_trace\"; this Kiln reads version " +
                                std::to_string(kFormatVersion));
  if (!j.at("kiln_trace").is_number_integer())
    throw std::invalid_argument("trace format version \"kiln_trace\" must be an integer, got " +
                                support::json_excerpt(j.at("kiln_trace")));
  int64_t version = j.at("kiln_trace").get<int64_t>();
  if (version != kFormatVersion)
    throw std::invalid_argument("trace format version " + std::to_string(version) +
                                " is not supported; this Kiln reads version " + std::to_string(kFormatVersion));
  Trace t;
  size_t n = 0;
  for (const json &row : j.at("instructions")) {
    if (!row.is_array() || row.size() != 4 || !row[0].is_string() || !row[1].is_array() || !row[2].is_object() ||
        !row[3].is_array())
      throw std::invalid_argument("trace instruction " + std::to_string(n) +
                                  " is not [kind, inputs, attrs, outputs]: " + support::json_excerpt(row));
    Instruction inst;
    inst.kind = find_instruction_kind(row[0].get<std::string>());
    if (!inst.kind) {
      std::string known;
      for (const InstructionKind *k : instruction_kinds()) known += (known.empty() ? "" : ", ") + std::string(k->name);
      throw std::invalid_argument("trace instruction " + std::to_string(n) + " has unknown kind " +
                                  support::json_excerpt(row[0]) + "; this Kiln knows " + known);
    }
    inst.inputs = row[1];
    inst.attrs = row[2];
    for (const json &o : row[3]) {
      if (!o.is_string())
        throw std::invalid_argument("trace instruction " + std::to_string(n) + " has a non-string output");
      inst.outputs.push_back(TraceRV{inst.kind->output_kind, o.get<std::string>()});
    }
    t.instructions.push_back(std::move(inst));
    ++n;
  }
  if (j.contains("decisions")) {
    if (!j.at("decisions").is_array())
      throw std::invalid_argument("trace \"decisions\" must be an array of [index, value] pairs, got " +
                                  support::json_excerpt(j.at("decisions")));
    for (const json &d : j.at("decisions")) {
      // Parsed text gives unsigned indices, JSON built in C++ signed ones; both are fine.
      if (!d.is_array() || d.size() != 2 || !d[0].is_number_integer() || d[0].get<int64_t>() < 0)
        throw std::invalid_argument("trace decision is not [index, value]: " + support::json_excerpt(d));
      size_t index = d[0].get<size_t>();
      if (index >= t.instructions.size())
        throw std::invalid_argument("trace decision refers to instruction " + std::to_string(index) +
                                    ", but there are only " + std::to_string(t.instructions.size()));
      t.decisions[index] = d[1];
    }
  }
  return t;
}

Trace Trace::with_decision(size_t instruction, json decision) const {
  Trace t = *this;
  t.decisions[instruction] = std::move(decision);
  return t;
}

std::vector<size_t> Trace::decided(const InstructionKind &kind) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < instructions.size(); ++i)
    if (instructions[i].kind == &kind && decisions.count(i)) out.push_back(i);
  return out;
}

std::string to_string(const Trace &trace) {
  std::string text;
  for (size_t i = 0; i < trace.instructions.size(); ++i) {
    const Instruction &inst = trace.instructions[i];
    std::string line;
    for (const TraceRV &o : inst.outputs) line += (line.empty() ? "" : ", ") + o.name;
    if (!line.empty()) line += " = ";
    line += std::string(inst.kind->name) + "(";
    std::string args;
    for (const json &in : inst.inputs)
      args += (args.empty() ? "" : ", ") + (in.is_string() ? in.get<std::string>() : in.dump());
    for (const auto &[key, value] : inst.attrs.items()) args += (args.empty() ? "" : ", ") + key + "=" + value.dump();
    line += args + ")";
    if (auto d = trace.decisions.find(i); d != trace.decisions.end()) line += "  # decision: " + d->second.dump();
    text += line + "\n";
  }
  return text;
}

}  // namespace kiln::ir

#include "frontend/pipeline.h"

#include <stdexcept>

#include "frontend/passes.h"
#include "support/json_read.h"

namespace kiln::frontend {

const char *to_string(ImageLayout layout) { return layout == ImageLayout::kNHWC ? "NHWC" : "NCHW"; }

ImageLayout parse_image_layout(const std::string &name) {
  if (name == "NHWC") return ImageLayout::kNHWC;
  if (name == "NCHW") return ImageLayout::kNCHW;
  throw std::invalid_argument("image layout '" + name + "' is neither NCHW nor NHWC");
}

nlohmann::json PipelineOptions::to_json() const {
  return {{"layout", to_string(layout)}, {"winograd", winograd}, {"layout_rewrite", layout_rewrite}};
}

PipelineOptions PipelineOptions::from_json(const nlohmann::json &j) {
  if (!j.is_object())
    throw std::invalid_argument("pipeline options must be a JSON object, got " + support::json_excerpt(j));
  PipelineOptions o;
  for (const auto &[key, value] : j.items()) {
    if (key == "layout" && value.is_string())
      o.layout = parse_image_layout(value.get<std::string>());
    else if (key == "winograd" && value.is_boolean())
      o.winograd = value.get<bool>();
    else if (key == "layout_rewrite" && value.is_boolean())
      o.layout_rewrite = value.get<bool>();
    else
      throw std::invalid_argument("pipeline option '" + key + "': " + support::json_excerpt(value) +
                                  " is not an option this Kiln knows or has the wrong type");
  }
  return o;
}

std::string PipelineOptions::flags() const {
  std::string out;
  auto add = [&](const std::string &flag) { out += (out.empty() ? "" : " ") + flag; };
  if (layout != ImageLayout::kNHWC) add(std::string("--layout ") + to_string(layout));
  if (!winograd && layout == ImageLayout::kNHWC) add("--no-winograd");
  if (!layout_rewrite) add("--no-layout-rewrite");
  return out;
}

PreparedModel prepare(Graph graph, const PipelineOptions &options) {
  if (options.winograd && options.layout != ImageLayout::kNHWC)
    throw std::invalid_argument("Winograd convolutions are rewritten from NHWC ones: use them with the NHWC layout");
  run_default_passes(graph);
  if (options.layout == ImageLayout::kNHWC) convert_images_to_nhwc(graph);
  if (options.winograd) rewrite_winograd_convolutions(graph);
  PreparedModel out{std::move(graph), {}, options};
  out.subgraphs = fuse(out.graph, options.layout_rewrite);
  return out;
}

}  // namespace kiln::frontend

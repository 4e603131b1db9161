// Where each feature group starts in a row. feature_names.cc and features.cc both
// derive their positions from here, so names and values cannot drift apart.

#pragma once

#include <cstddef>

namespace kiln::costmodel::layout {

/// Operation counts (see kOpNames in feature_names.cc).
inline constexpr size_t kNumOpCounts = 13;
/// vectorize, unroll, parallel: count, product, innermost extent, 8-way position.
inline constexpr size_t kNumAnnotationKinds = 3;
inline constexpr size_t kNumPositions = 8;
inline constexpr size_t kPerAnnotation = 3 + kNumPositions;
/// is_gpu, then blockIdx.{x,y,z}, threadIdx.{x,y,z}, vthread extents.
inline constexpr size_t kNumGpu = 8;
inline constexpr size_t kMaxBuffers = 5;
inline constexpr size_t kPerBuffer = 18;
inline constexpr size_t kNumAlloc = 4;
inline constexpr size_t kNumOuter = 3;
inline constexpr size_t kCurvePoints = 10;

inline constexpr size_t kOpsBegin = 0;
inline constexpr size_t kAnnotationBegin = kOpsBegin + kNumOpCounts;
inline constexpr size_t kGpuBegin = kAnnotationBegin + kNumAnnotationKinds * kPerAnnotation;
inline constexpr size_t kBufferBegin = kGpuBegin + kNumGpu;
inline constexpr size_t kAllocBegin = kBufferBegin + kMaxBuffers * kPerBuffer;
inline constexpr size_t kOuterBegin = kAllocBegin + kNumAlloc;
inline constexpr size_t kCurveBegin = kOuterBegin + kNumOuter;
inline constexpr size_t kNumFeatures = kCurveBegin + kCurvePoints;

/// GPU programs only (feature rows for cuda targets): the launch, occupancy and memory
/// traffic of the program, the same in each of its rows, after the CPU columns. The CPU
/// layout, and the models trained on it, stay as they are.
inline constexpr size_t kNumGpuProgram = 10;
inline constexpr size_t kGpuProgramBegin = kNumFeatures;
inline constexpr size_t kNumGpuFeatures = kNumFeatures + kNumGpuProgram;

/// Positions of an annotated loop (the one-hot "pos" features).
enum class LoopPosition : size_t {
  kNone,
  kInnerSpatial,
  kMiddleSpatial,
  kOuterSpatial,
  kInnerReduce,
  kMiddleReduce,
  kOuterReduce,
  kMixed,
};

/// Reuse kinds of a buffer access (the one-hot "reuse" features).
enum class ReuseType : size_t { kLoopMultipleRead, kSerialMultipleReadWrite, kNoReuse };

}  // namespace kiln::costmodel::layout

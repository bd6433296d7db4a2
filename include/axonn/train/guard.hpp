// train/guard.hpp — the numerical guard: which steps' updates are applied.
//
// A step whose loss or gradient norm is not finite is skipped: no update, the optimizer's state (its
// moments and its step count t) untouched, as if the step had not been taken; the schedule and the
// data go on. Every rank decides alike: the loss is the global batch's mean and the norm the whole
// model's, both results of collectives, and the ranks agree on their finiteness with one all-reduce
// (train_step's `agreement`), which also covers a value that went bad on one rank after the sums.
// Optionally, as llm.c's -sl/-sg, a step whose loss or norm is an outlier is skipped too: its z-score
// against the previous `kOutlierWindow` finite values above a threshold.
//
//   train::StepGuard guard(settings);
//   train::StepOptions o; o.guard = &guard;    // train_step asks guard.judge(loss, norm) before updating
#pragma once

#include <cstdint>
#include <deque>
#include <string>

namespace axonn::train {

// Why a step's update was or was not applied.
enum class Verdict { kUpdate, kNonFinite, kLossOutlier, kGradOutlier };
const char* verdict_name(Verdict v);  // "update", "non-finite", "loss-outlier", "grad-outlier"

// The z-score of a value against the last `window` values (llm.c's OutlierDetector): NaN until the
// window is full, then (x - mean) / std of the window (population std). add() appends, dropping the
// oldest beyond the window.
class OutlierDetector {
 public:
  static constexpr int kOutlierWindow = 128;
  explicit OutlierDetector(int window = kOutlierWindow) : window_(window) {}
  double z(double x) const;
  void add(double x);
  // The window as text ("v1,v2,...", exact doubles) and back, for checkpoints. from_text throws
  // std::invalid_argument on malformed text.
  std::string to_text() const;
  void from_text(const std::string& text);

 private:
  int window_;
  std::deque<double> values_;
};

class StepGuard {
 public:
  // z thresholds; 0 turns that outlier check off.
  StepGuard(float skip_loss_z, float skip_grad_z) : loss_z_(skip_loss_z), grad_z_(skip_grad_z) {}
  // The verdict on a step's loss and norm (before its update); records finite values in the windows.
  Verdict judge(float loss, double norm);
  OutlierDetector& losses() { return losses_; }
  OutlierDetector& norms() { return norms_; }
  const OutlierDetector& losses() const { return losses_; }
  const OutlierDetector& norms() const { return norms_; }

 private:
  float loss_z_, grad_z_;
  OutlierDetector losses_, norms_;
};

}  // namespace axonn::train

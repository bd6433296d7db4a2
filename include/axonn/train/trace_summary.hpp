// train/trace_summary.hpp — what a timeline trace (axonn train --trace) says about overlap.
//
// Per rank (process), over the traced window, as unions of intervals (nested or simultaneous spans
// count once):
//   compute   time in kernels and GEMMs ("cat":"compute"), less the blocking collectives that run inside
//             a compute span, during which the compute thread waits
//   comm      time during which at least one collective is in flight ("cat":"comm")
//   hidden    the part of comm during which the rank also computes: communication hidden under
//             computation; hidden_fraction = hidden / comm
//   exposed   comm - hidden: communication the rank waits for (or that runs while it does neither)
//   wall      first span begin to last span end
//
//   auto ranks = train::summarize_trace_file("trace.json");
//   train::print_trace_summary(stdout, ranks);
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace axonn::train {

struct TraceRankSummary {
  int pid = 0;
  std::string name;  // the process name ("rank 1 (x,y,z,d)=(1,0,0,0)")
  double wall_ms = 0, compute_ms = 0, comm_ms = 0, hidden_ms = 0, exposed_ms = 0;
  double hidden_fraction = 0;  // hidden / comm; 0 without communication
  // Time with at least one collective in flight, per track ("y all_reduce", ...), by name.
  std::vector<std::pair<std::string, double>> comm_ms_by_track;
  int spans = 0;
};

// From the text of a Chrome trace-event file: one entry per pid, ascending. Throws
// InvalidArgument if the text is not JSON, has no "traceEvents" array of events, or an event's field
// has the wrong type.
std::vector<TraceRankSummary> summarize_trace(const std::string& json_text);
// The same from a file (IoError if it cannot be read).
std::vector<TraceRankSummary> summarize_trace_file(const std::string& path);

// A table, one line per rank, then each rank's communication per track.
void print_trace_summary(FILE* out, const std::vector<TraceRankSummary>& ranks);
// The same as a JSON array (for scripts).
std::string trace_summary_json(const std::vector<TraceRankSummary>& ranks);

}  // namespace axonn::train

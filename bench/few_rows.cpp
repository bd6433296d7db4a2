// bench_few_rows — the few-row product's kernel variants (kernels/gemm.hpp, src/kernels/cpu/few_rows.cpp) on a
// model's decode-step linears, fp32 weights from memory: for each row count, every variant forced in turn and
// the measured choice, interleaved round by round (the machine is shared: compare within one run). A "step" is
// one product per linear of every layer and the LM head, as a decode step of that many sequences does; the
// weights are the model's size, so they stream from memory as in `axonn generate`.
//
//   bench_few_rows [--model llama-124m] [--rows 1,8] [--rounds 5] [--steps 5]      (OMP_NUM_THREADS threads)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "axonn/kernels/gemm.hpp"
#include "axonn/model/gpt_config.hpp"

namespace {

struct Linear {
  int64_t N, K;
  std::vector<float> w;  // [N, K], as a linear's weights
};

// One decode step's linears: per layer the fused q/k/v, the attention's output, the MLP's up (SwiGLU: gate and up
// fused) and down projections; then the LM head.
std::vector<Linear> decode_linears(const axonn::model::GptConfig& c) {
  const bool llama = c.family == axonn::model::Family::kLlama;
  const int64_t C = c.channels, hd = c.head_dim ? c.head_dim : C / c.num_heads;
  const int64_t kv = c.num_kv_heads ? c.num_kv_heads : c.num_heads, ffn = c.ffn_hidden ? c.ffn_hidden : 4 * C;
  std::vector<Linear> out;
  for (int l = 0; l < c.num_layers; l++) {
    out.push_back({(c.num_heads + 2 * kv) * hd, C, {}});
    out.push_back({C, c.num_heads * hd, {}});
    out.push_back({llama ? 2 * ffn : ffn, C, {}});
    out.push_back({C, ffn, {}});
  }
  out.push_back({c.padded_vocab_size, C, {}});
  uint32_t state = 1;
  for (Linear& L : out) {
    L.w.resize(static_cast<size_t>(L.N * L.K));
    for (float& x : L.w) x = static_cast<float>((state = state * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
  }
  return out;
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::atoi(item.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "llama-124m";
  std::vector<int> rows = {1, 8};
  int rounds = 5, steps = 5;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 == argc) {  // every option takes a value: a trailing one alone is a mistake, not ignored
      std::fprintf(stderr, "bench_few_rows: %s needs a value (--model NAME, --rows N,N, --rounds N, --steps N)\n",
                   a.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (a == "--model") model = v;
    else if (a == "--rows") rows = parse_ints(v);
    else if (a == "--rounds") rounds = std::atoi(v.c_str());
    else if (a == "--steps") steps = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "bench_few_rows: unknown option %s (--model, --rows, --rounds, --steps)\n", a.c_str());
      return 2;
    }
  }
  if (rounds < 1 || steps < 1) {
    std::fprintf(stderr, "bench_few_rows: --rounds and --steps take counts of at least 1 (got %d and %d)\n", rounds,
                 steps);
    return 2;
  }
  for (int r : rows)
    if (r < 1 || r > 8) {
      std::fprintf(stderr, "bench_few_rows: --rows takes counts from 1 to 8 (the few-row product's), not %d\n", r);
      return 2;
    }
  axonn::model::GptConfig config;
  try {
    config = axonn::model::gpt_preset(model);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_few_rows: %s\n", e.what());
    return 2;
  }
  const std::vector<Linear> linears = decode_linears(config);
  size_t weights = 0;
  int64_t widest = 0, longest = 0;
  for (const Linear& L : linears) {
    weights += L.w.size();
    widest = std::max(widest, L.N);
    longest = std::max(longest, L.K);
  }
  std::vector<float> act(static_cast<size_t>(8 * longest), 0.25f), out(static_cast<size_t>(8 * widest));
  const std::vector<std::string> names = axonn::kernels::few_rows_variant_names();
  const int cases = static_cast<int>(names.size()) + 1;  // every variant forced, then the measured choice (-1)
  std::printf("model %s: %zu linears, %.0f MB of fp32 weights; %d threads; %d rounds of %d steps, interleaved\n",
              model.c_str(), linears.size(), static_cast<double>(weights) * 4e-6, omp_get_max_threads(), rounds,
              steps);

  // times[row count][case]: seconds per step, one per round
  std::vector<std::vector<std::vector<double>>> times(rows.size(), std::vector<std::vector<double>>(cases));
  for (int round = 0; round < rounds; round++)
    for (size_t ri = 0; ri < rows.size(); ri++)
      for (int c = 0; c < cases; c++) {
        axonn::kernels::set_few_rows_variant(c < cases - 1 ? c : -1);
        const auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; s++)
          for (const Linear& L : linears)
            axonn::kernels::sgemm(false, true, rows[ri], L.N, L.K, 1.0f, act.data(), L.K, L.w.data(), L.K, 0.0f,
                                  out.data(), L.N);
        times[ri][static_cast<size_t>(c)].push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps);
      }
  axonn::kernels::set_few_rows_variant(-1);

  std::printf("%-5s %-22s %12s %14s %10s\n", "rows", "variant", "ms/step", "rows x steps/s", "GB/s");
  for (size_t ri = 0; ri < rows.size(); ri++)
    for (int c = 0; c < cases; c++) {
      std::vector<double> t = times[ri][static_cast<size_t>(c)];
      std::sort(t.begin(), t.end());
      const double median = t[t.size() / 2];
      std::printf("%-5d %-22s %12.2f %14.1f %10.1f\n", rows[ri],
                  c < cases - 1 ? names[static_cast<size_t>(c)].c_str() : "measured (default)", median * 1e3,
                  rows[ri] / median, static_cast<double>(weights) * 4 / median * 1e-9);
    }
  return 0;
}

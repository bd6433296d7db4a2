// infer/sampler.hpp — the next token from a row of logits: greedy, or sampled from the softmax at a
// temperature, truncated to the top k tokens and to the top p of the probability mass.
//
// A sample's randomness is counter-based: the uniform draw for the token at `position` of sequence
// `sample` depends only on (seed, sample, position), so a seed gives the same samples on every grid
// and every batch size.
//
//   infer::Sampling s{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 7};
//   int next = infer::sample_token(logits, s, infer::uniform_at(s.seed, sample, position));
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace axonn::infer {

struct Sampling {
  float temperature = 1.0f;  // 0: greedy (the largest logit; ties to the lowest id)
  int top_k = 0;             // keep the k most likely tokens (0: all)
  float top_p = 1.0f;        // then the fewest most likely tokens whose probability reaches p (1: all)
  uint64_t seed = 0;
};

// InvalidArgument naming the flag unless temperature >= 0, top_k >= 0 and 0 < top_p <= 1.
void check_sampling(const Sampling& s);

// A uniform draw in [0, 1) from (seed, sample, position): splitmix64 of the three, 53 bits.
double uniform_at(uint64_t seed, int64_t sample, int64_t position);

// The tokens that may be drawn and their probabilities (summing to 1), most likely first (equal
// logits: lower id first): softmax(logits / temperature) over the top k, then cut to the top p and
// renormalised. Temperature 0: the greedy token alone.
std::vector<std::pair<int, double>> candidates(std::span<const float> logits, const Sampling& s);

// The token of candidates(logits, s) in whose cumulative-probability interval u falls.
int sample_token(std::span<const float> logits, const Sampling& s, double u);

// log softmax(logits)[id], in double: the model's log-probability of a token (no temperature or cut).
double log_softmax_at(std::span<const float> logits, int id);

}  // namespace axonn::infer

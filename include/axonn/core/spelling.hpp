// core/spelling.hpp — "did you mean": the known word nearest a mistyped one (commands, flags, model
// names, config keys).
//
//   if (auto near = nearest_word("gpt2-smal", names)) message += "; did you mean " + *near + "?";
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace axonn {

// Levenshtein distance: how many one-character edits make `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest `word`: at most 2 edits away, or one that begins with it (3 characters or more);
// nullopt when none is that near.
std::optional<std::string> nearest_word(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace axonn
